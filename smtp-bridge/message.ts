// Reads a message from the DATA stream, with one of three readers, chosen from the top-level
// header as soon as it is complete:
// - a single text part (simple-message.ts): the message, up to SIMPLE_MAX_BYTES, is gathered
//   and read in one pass;
// - a multipart message (multipart.ts): read in one pass as it arrives, the raw message kept
//   once (raw.ts), its attachments ranges of it; when that reader declines the message, at any
//   point, mailparser reads it from the start;
// - anything else: mailparser, as it arrives. The raw message is not kept; what stays is the
//   top-level header, the decoded html and text, and each attachment's decoded bytes (in
//   memory while the message fits the spool's threshold and memory, then in the spool: spool.ts).
// Past the size limit the rest of the stream is read and dropped, so an oversized message
// costs no memory.
import { finished, Readable, Transform, type TransformCallback } from "node:stream";
import type { MimeNode } from "@zone-eu/mailsplit";
import { MailParser, type AttachmentStream, type HeaderValue, type MessageText } from "mailparser";
import { applyHeaders } from "./headers.ts";
import { isMultipartTop, MultipartReader } from "./multipart.ts";
import { RawStore } from "./raw.ts";
import { plainHeader, readSimpleMessage, simpleOf, type SimpleHeader } from "./simple-message.ts";
import { discardParts, PartSink, type MemoryBudget, type Spool } from "./spool.ts";
import type { MessagePart, ParsedMessage } from "./submission.ts";

export interface Envelope {
  /** MAIL FROM, null for the null sender. */
  mailFrom: string | null;
  /** RCPT TO addresses, in order. */
  rcptTo: string[];
}

/** Which reader read the message: the one-pass readers (simple-message.ts, multipart.ts) or mailparser. */
export type Reader = "single-part" | "multipart" | "mailparser";

export type ReadResult = { ok: true; message: ParsedMessage; bytes: number; reader: Reader } | { ok: false; reason: "too-big"; bytes: number };

/** Passes at most `max` bytes on; counts and drops the rest. */
class SizeGuard extends Transform {
  bytes = 0;
  readonly #max: number;
  constructor(max: number) {
    super();
    this.#max = max;
  }
  get exceeded(): boolean {
    return this.bytes > this.#max;
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    const wasOver = this.exceeded;
    this.bytes += chunk.length;
    if (!wasOver && !this.exceeded) this.push(chunk);
    done();
  }
}

/** A single-part message up to this size is gathered and read by simple-message.ts. */
export const SIMPLE_MAX_BYTES = 256 * 1024;
/** A header not complete within this many bytes is left to mailparser. */
const SIMPLE_MAX_HEADER_BYTES = 64 * 1024;

/** What the start of a message says: a single text part (simple-message.ts), a multipart
 * message (multipart.ts), neither (mailparser reads it), or not yet (the header goes on). */
export type Start = { simple: SimpleHeader } | { multipart: { end: number; node: MimeNode } } | "other" | "incomplete";

export function startOf(raw: Buffer): Start {
  try {
    const top = plainHeader(raw);
    if (top === undefined) return "incomplete";
    if (top === null) return "other";
    const simple = simpleOf(top);
    if (simple) return { simple };
    return isMultipartTop(top.node) ? { multipart: top } : "other";
  } catch {
    return "other";
  }
}

/** True when a blank line (LF LF, or LF CR LF) may end in `chunk`, the bytes before it ending with `tail`. */
function blankLineIn(tail: Buffer, chunk: Buffer): boolean {
  const seam = Buffer.concat([tail, chunk.subarray(0, 2)]);
  return chunk.indexOf("\n\n") >= 0 || chunk.indexOf("\n\r\n") >= 0 || seam.indexOf("\n\n") >= 0 || seam.indexOf("\n\r\n") >= 0;
}

export async function readMessage(input: Readable, maxBytes: number, spool: Spool): Promise<ReadResult> {
  // Gather while the message may be a single text part: until its header says otherwise, it
  // passes the size for that path, or it ends.
  const chunks: Buffer[] = [];
  let bytes = 0;
  let start: Start = "incomplete";
  let tail: Buffer = Buffer.alloc(0); // the last bytes before the current chunk
  const ended = await new Promise<boolean>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      bytes += chunk.length;
      if (start === "incomplete") {
        // The header is looked for in the first SIMPLE_MAX_HEADER_BYTES, however the bytes came,
        // and read again only when a chunk may have brought its blank line (in small pieces,
        // joining and reading it at every chunk would be quadratic).
        const mayEnd = chunks.length === 1 || blankLineIn(tail, chunk);
        tail = Buffer.from((chunk.length >= 2 ? chunk : Buffer.concat([tail, chunk])).subarray(-2));
        if (mayEnd) {
          const head = chunks.length === 1 ? chunk : Buffer.concat(chunks, Math.min(bytes, SIMPLE_MAX_HEADER_BYTES));
          start = startOf(head.length > SIMPLE_MAX_HEADER_BYTES ? head.subarray(0, SIMPLE_MAX_HEADER_BYTES) : head);
        }
        if (start === "incomplete" && bytes >= SIMPLE_MAX_HEADER_BYTES) start = "other";
        if (start === "other" || (typeof start === "object" && "multipart" in start)) return finish(false);
      }
      if (bytes > SIMPLE_MAX_BYTES || bytes > maxBytes) finish(false);
    };
    const onEnd = () => finish(true);
    const onError = (err: Error) => {
      input.off("data", onData).off("end", onEnd);
      input.resume(); // read the rest of DATA, so the SMTP session can answer
      reject(err);
    };
    const finish = (end: boolean) => {
      input.off("data", onData).off("end", onEnd).off("error", onError);
      if (!end) input.pause();
      resolve(end);
    };
    input.on("data", onData).once("end", onEnd).once("error", onError);
  });
  const found = start as Start;
  if (typeof found === "object" && "multipart" in found) return readMultipart(input, ended, chunks, found.multipart, maxBytes, spool);
  if (!ended) return readWithMailparser(input, maxBytes, spool, chunks); // what was gathered first, then the rest
  const simple = typeof found === "object" && "simple" in found ? readSimpleMessage(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, bytes), found.simple) : null;
  if (simple) return { ok: true, message: simple, bytes, reader: "single-part" };
  return readWithMailparser(Readable.from(chunks), maxBytes, spool);
}

/**
 * The multipart path: the message is kept raw (raw.ts) and read as it arrives (multipart.ts).
 * When that reader declines it, at any point, mailparser reads it again from the start: what
 * was kept, then the rest of the stream. `first` holds the bytes read so far (the header ends
 * at `top.end`); `ended` when they are the whole message.
 */
async function readMultipart(input: Readable, ended: boolean, first: Buffer[], top: { end: number; node: MimeNode }, maxBytes: number, spool: Spool): Promise<ReadResult> {
  const store = new RawStore(spool);
  const reader = new MultipartReader(store, top.node, top.end);
  const rest = ended ? null : chunksOf(input);
  let next = 0;
  const nextChunk = async (): Promise<Buffer | null> => {
    if (next < first.length) return first[next++]!;
    return rest ? rest.next() : null;
  };
  /** Reads the rest of DATA and drops it, so the SMTP session can answer. */
  const drain = async () => {
    if (rest) while (await rest.next().catch(() => null));
  };
  try {
    return await readMultipartFrom(store, reader, nextChunk, drain, top.end, maxBytes, spool);
  } finally {
    rest?.stop();
  }
}

/**
 * The chunks of a paused stream, one at a time, as they were written to it. (A paused stream's
 * read(), and so its async iterator, joins whatever is buffered into a new buffer: a copy of
 * every byte of a large message, and memory for the garbage collector to find.) Ends with null
 * at the stream's end; rejects with its error, or when it closes before its end. Listens from
 * the start, so that an error while the first chunks are handled is not an uncaught one.
 */
export function chunksOf(input: Readable): { next(): Promise<Buffer | null>; stop(): void } {
  const queue: Buffer[] = [];
  let done = false;
  let failure: Error | null = null;
  let wake: (() => void) | null = null;
  const onData = (chunk: Buffer) => {
    queue.push(chunk);
    input.pause(); // one chunk waits here; the rest wait in the stream
    wake?.();
  };
  const cleanup = finished(input, (err) => {
    if (err) failure = err;
    else done = true;
    wake?.();
  });
  input.on("data", onData);
  input.resume();
  return {
    async next() {
      while (!queue.length && !done && !failure) await new Promise<void>((resolve) => (wake = resolve));
      wake = null;
      const chunk = queue.shift();
      if (chunk) {
        if (!done && !failure) input.resume();
        return chunk;
      }
      if (failure) throw failure;
      return null;
    },
    /** Stops listening; the rest of the stream, if a reader failed part way, is read and
     * dropped, so that the SMTP session can answer. */
    stop() {
      input.off("data", onData);
      cleanup();
      if (!done && !failure) input.resume();
    },
  };
}

async function readMultipartFrom(
  store: RawStore,
  reader: MultipartReader,
  nextChunk: () => Promise<Buffer | null>,
  drain: () => Promise<void>,
  headerEnd: number,
  maxBytes: number,
  spool: Spool,
): Promise<ReadResult> {
  let bytes = 0;
  let skip = headerEnd; // the header's bytes: already read
  let declined = false;
  try {
    for (let chunk = await nextChunk(); chunk; chunk = await nextChunk()) {
      bytes += chunk.length;
      if (bytes > maxBytes) {
        // Refused: the rest is read and counted, not kept.
        while ((chunk = await nextChunk())) bytes += chunk.length;
        await store.close();
        return { ok: false, reason: "too-big", bytes };
      }
      const written = store.append(chunk);
      if (written) await written;
      if (skip >= chunk.length) {
        skip -= chunk.length;
        continue;
      }
      try {
        reader.push(skip ? chunk.subarray(skip) : chunk);
      } catch {
        // Declined, or anything else the reader did not expect: mailparser decides.
        declined = true;
        break;
      }
      skip = 0;
    }
    if (!declined) {
      let message: ParsedMessage | null = null;
      try {
        message = reader.end();
      } catch {
        declined = true;
      }
      if (message) {
        await store.finish();
        if (!message.attachments.some((a) => a.raw)) await store.close();
        return { ok: true, message, bytes, reader: "multipart" };
      }
    }
  } catch (err) {
    // The spool failed, or the stream did.
    await store.close();
    await drain();
    throw err;
  }
  // Declined: mailparser reads the message from its start.
  const kept = store.length;
  async function* again(): AsyncGenerator<Buffer> {
    try {
      for await (const piece of store.read(0, kept)) yield Buffer.from(piece); // a file's pieces share one buffer
    } catch (err) {
      await drain(); // the spool failed: mailparser stops, the rest of DATA is still read
      throw err;
    }
    for (let chunk = await nextChunk(); chunk; chunk = await nextChunk()) yield chunk;
  }
  return readWithMailparser(Readable.from(again(), { objectMode: false }), maxBytes, spool).finally(() => store.close());
}

/** The mailparser path alone (the reference both one-pass readers are tested against). */
export function readWithMailparser(input: Readable, maxBytes: number, spool: Spool, prefix: Buffer[] = []): Promise<ReadResult> {
  return new Promise((resolve, reject) => {
    const guard = new SizeGuard(maxBytes);
    // mailparser hashes every attachment (the bridge never reads the checksum): sha1 is its
    // cheapest choice here, less than half md5's CPU per byte.
    const parser = new MailParser({ skipHtmlToText: true, skipTextToHtml: true, skipTextLinks: true, skipImageLinks: true, checksumAlgo: "sha1" });
    const message: ParsedMessage = { headerLines: [], from: [], to: [], cc: [], replyTo: [], subject: undefined, html: undefined, text: undefined, attachments: [] };
    const reading: Promise<void>[] = [];
    /** Attachments being read: a failure ends them, since the parser that feeds them stops. */
    const contents: Readable[] = [];
    const sinks: PartSink[] = [];
    const budget: MemoryBudget = { bytes: 0 }; // the message's attachments in memory
    let failed = false;
    // A message that is one text part ends with the line break every SMTP message ends with;
    // it is not part of the text (in a multipart message it belongs to the boundary).
    let singlePart = false;
    const body = (s: string) => (singlePart ? s.replace(/\r?\n$/, "") : s);
    const fail = (err: unknown) => {
      if (failed) return;
      failed = true;
      input.unpipe(guard);
      input.resume(); // read the rest of DATA, so the SMTP session can answer
      // An attachment cut off (the client dropped the connection) would never end: end it.
      const cause = err instanceof Error ? err : new Error(String(err));
      for (const content of contents) if (!content.readableEnded) content.destroy(cause);
      parser.destroy();
      Promise.all(reading.map((r) => r.catch(() => {})))
        .then(() => Promise.all(sinks.map((sink) => sink.abort())))
        .then(() => discardParts(message.attachments))
        .finally(() => reject(err));
    };

    parser.on("headerLines", (lines: { key: string; line: string }[]) => {
      message.headerLines = lines.map((l) => ({ key: l.key, line: l.line }));
    });
    parser.on("headers", (headers: Map<string, HeaderValue>) => {
      applyHeaders(message, headers);
      const type = headers.get("content-type") as { value?: string } | undefined;
      singlePart = !(type?.value ?? "text/plain").toLowerCase().startsWith("multipart/");
    });
    parser.on("data", (data: AttachmentStream | MessageText) => {
      if (data.type === "text") {
        if (typeof data.html === "string") message.html = body(data.html);
        if (typeof data.text === "string") message.text = body(data.text);
        return;
      }
      const part: MessagePart = { contentType: data.contentType || "application/octet-stream", chunks: [], size: 0 };
      if (data.filename) part.filename = data.filename;
      const related = (data as { related?: boolean }).related === true;
      if (data.cid && (related || data.contentDisposition === "inline")) part.contentId = data.cid;
      message.attachments.push(part);
      const sink = new PartSink(part, spool, budget);
      sinks.push(sink);
      const content = data.content as Readable;
      contents.push(content);
      reading.push(
        new Promise<void>((done, broken) => {
          content.on("data", (chunk: Buffer) => {
            if (guard.exceeded) return; // dropped: the message is refused anyway
            const written = sink.write(chunk);
            if (written) {
              content.pause();
              written.then(() => content.resume(), broken);
            }
          });
          content.once("end", () => {
            sink.end().then(() => {
              data.release();
              done();
            }, broken);
          });
          content.once("error", broken);
        }),
      );
    });
    parser.once("error", fail);
    guard.once("error", fail);
    input.once("error", fail);
    parser.once("end", () => {
      Promise.all(reading).then(
        () => {
          if (failed) return;
          if (guard.exceeded) {
            message.html = message.text = undefined;
            discardParts(message.attachments).finally(() => resolve({ ok: false, reason: "too-big", bytes: guard.bytes }));
          } else resolve({ ok: true, message, bytes: guard.bytes, reader: "mailparser" });
        },
        fail,
      );
    });
    guard.pipe(parser);
    for (const chunk of prefix) guard.write(chunk); // read from `input` before it came here
    input.pipe(guard);
  });
}
