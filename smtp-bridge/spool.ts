// Where a message's content waits between the end of DATA and the API's answer. A message
// keeps its content in memory (its raw bytes on the multipart path, raw.ts; its attachments'
// decoded bytes on mailparser's) up to the spool's threshold, and while all messages together
// hold less than the spool's memory; past either, its content goes to a file in the bridge's
// private spool directory (as an MTA writes its queue). So the bridge's memory does not grow
// with message size or with the number of sessions sending large messages at once, and a
// message that fits does not touch the disk. A message's files are removed as soon as it is
// answered; the directory goes when the bridge stops.
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { open, unlink, type FileHandle } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { MessagePart } from "./submission.ts";

/** The bytes all messages hold in memory at once, shared by the bridge's sessions. */
export class MemoryPool {
  readonly limit: number;
  #used = 0;
  constructor(limit: number) {
    this.limit = limit;
  }
  get used(): number {
    return this.#used;
  }
  /** Counts `n` more bytes in memory when they fit under the limit; false when they do not. */
  take(n: number): boolean {
    if (this.#used + n > this.limit) return false;
    this.#used += n;
    return true;
  }
  /** Bytes no longer in memory (written to a file, or their message answered). */
  give(n: number): void {
    this.#used -= n;
  }
}

export interface Spool {
  dir: string | null;
  /** Bytes of one message held in memory; past them, the rest goes to a file. */
  threshold: number;
  /** What all messages hold in memory together; a message that does not fit goes to a file. */
  memory: MemoryPool;
  close(): void;
}

/** A spool under `base` (default: the system's temporary directory), readable only by this user. */
export function openSpool(base: string | undefined, threshold: number, memoryBytes = Infinity): Spool {
  const dir = mkdtempSync(join(base || tmpdir(), "tern-smtp-bridge-")); // mode 0700
  return { dir, threshold, memory: new MemoryPool(memoryBytes), close: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Keeps everything in memory (tests of the conversion). */
export const memoryOnly: Spool = { dir: null, threshold: Infinity, memory: new MemoryPool(Infinity), close() {} };

/** A failure of the spool (disk full, I/O error): the client should try again later. */
export class SpoolError extends Error {}

const BLOCK = 64 * 1024;

/** What a message's attachments hold in memory, shared by their sinks. */
export interface MemoryBudget {
  bytes: number;
}

/** Collects one attachment's decoded bytes: in whole blocks of its own in memory (the
 * decoder's chunks are small views of larger buffers, which would be kept alive with them)
 * while its message's attachments hold at most the spool's threshold, then in a file. */
export class PartSink {
  readonly #part: MessagePart;
  readonly #spool: Spool;
  readonly #budget: MemoryBudget;
  #block: Buffer | null = null;
  #used = 0;
  #file: FileHandle | null = null;

  constructor(part: MessagePart, spool: Spool, budget: MemoryBudget) {
    this.#part = part;
    this.#spool = spool;
    this.#budget = budget;
  }

  /** Takes a chunk; when it returns a promise, wait for it before the next one. */
  write(chunk: Buffer): Promise<void> | null {
    // Once in a file, chunks go straight there: no copy, no block to collect later.
    if (this.#file) {
      this.#part.size += chunk.length;
      return this.#append(chunk);
    }
    this.#part.size += chunk.length;
    let waiting: Promise<void> | null = null;
    for (let at = 0; at < chunk.length; ) {
      if (!this.#block || this.#used === this.#block.length) {
        const full = this.#takeBlock();
        if (full) waiting = chain(waiting, () => this.#keep(full));
        this.#block = Buffer.allocUnsafeSlow(BLOCK);
        this.#used = 0;
      }
      const n = chunk.copy(this.#block, this.#used, at);
      this.#used += n;
      at += n;
    }
    return waiting;
  }

  async end(): Promise<void> {
    // The last block is cut to size (one small copy), so no unused tail stays in memory.
    const last = this.#takeBlock();
    if (last) await this.#keep(this.#file ? last : Buffer.from(last));
    if (this.#file) {
      await this.#file.close().catch(() => {});
      this.#file = null;
    }
  }

  /** Closes the part's file, if one is open (the part's reading failed); discardParts removes it. */
  async abort(): Promise<void> {
    const file = this.#file;
    this.#file = null;
    await file?.close().catch(() => {});
  }

  #takeBlock(): Buffer | null {
    const b = this.#block && this.#used ? this.#block.subarray(0, this.#used) : null;
    this.#block = null;
    this.#used = 0;
    return b;
  }

  async #keep(block: Buffer): Promise<void> {
    const part = this.#part;
    const spool = this.#spool;
    if (!this.#file) {
      if (spool.dir === null) {
        part.chunks.push(block);
        return;
      }
      if (this.#budget.bytes + block.length <= spool.threshold && spool.memory.take(block.length)) {
        part.chunks.push(block);
        part.pool = spool.memory; // discardParts gives the bytes back
        this.#budget.bytes += block.length;
        return;
      }
    }
    try {
      if (!this.#file) {
        part.file = join(spool.dir!, randomUUID());
        this.#file = await open(part.file, "wx", 0o600);
        for (const kept of part.chunks) {
          await this.#file.write(kept);
          this.#budget.bytes -= kept.length;
          spool.memory.give(kept.length);
        }
        part.chunks = [];
      }
      await this.#file.write(block);
    } catch (err) {
      throw new SpoolError(`the spool could not take an attachment: ${(err as Error).message}`);
    }
  }

  async #append(chunk: Buffer): Promise<void> {
    try {
      await this.#file!.write(chunk);
    } catch (err) {
      throw new SpoolError(`the spool could not take an attachment: ${(err as Error).message}`);
    }
  }
}

function chain(p: Promise<void> | null, next: () => Promise<void>): Promise<void> {
  return p ? p.then(next) : next();
}

/** A part's bytes, from memory or from its file. A file is read into one buffer, reused for
 * each read: use each chunk before asking for the next. */
export async function* partBytes(part: MessagePart): AsyncGenerator<Buffer> {
  if (part.raw) {
    yield* part.raw.base64Length === null ? part.raw.store.read(part.raw.start, part.raw.end) : base64Decoded(base64TextOf(part.raw));
    return;
  }
  if (!part.file) {
    yield* part.chunks;
    return;
  }
  const file = await open(part.file, "r");
  try {
    const buffer = Buffer.allocUnsafeSlow(48 * 1024); // a multiple of 3: base64 without carry
    for (;;) {
      const { bytesRead } = await file.read(buffer, 0, buffer.length, null);
      if (!bytesRead) return;
      yield buffer.subarray(0, bytesRead);
    }
  } finally {
    await file.close();
  }
}

/** The text of a range of canonical base64 lines (multipart.ts checked them: the alphabet,
 * CRLF, padding at the end) without its line breaks, in pieces of up to TEXT_PIECE bytes (a
 * message in memory is kept in the chunks it came in, a few KB each: one write, and one read
 * in the API, per chunk would cost more than the copy), all in one buffer, reused: use each
 * piece (a socket: until its write has completed) before asking for the next. A piece of the
 * range may end between a CR and its LF. */
export async function* base64TextOf(raw: NonNullable<MessagePart["raw"]>): AsyncGenerator<Buffer> {
  const out = Buffer.allocUnsafeSlow(Math.max(1, Math.min(TEXT_PIECE, raw.end - raw.start)));
  let n = 0;
  for await (const piece of raw.store.read(raw.start, raw.end)) {
    for (let at = 0; at < piece.length; ) {
      const lf = piece.indexOf(0x0a, at);
      let end = lf < 0 ? piece.length : lf;
      if (end > at && piece[end - 1] === 0x0d) end--;
      // A line that does not fit is split: what fits now, the rest after the piece.
      const take = Math.min(end - at, out.length - n);
      n += piece.copy(out, n, at, at + take);
      if (n === out.length) {
        yield out;
        n = 0;
      }
      at += take;
      if (at === end) at = lf < 0 ? piece.length : lf + 1;
    }
  }
  if (n) yield out.subarray(0, n);
}
const TEXT_PIECE = 256 * 1024;

/** Base64 text (without line breaks), decoded. */
async function* base64Decoded(text: AsyncGenerator<Buffer>): AsyncGenerator<Buffer> {
  let carry = "";
  for await (const piece of text) {
    const chars = carry + piece.toString("latin1");
    const whole = chars.length - (chars.length % 4);
    carry = chars.slice(whole);
    if (whole) yield Buffer.from(chars.slice(0, whole), "base64");
  }
  if (carry) yield Buffer.from(carry, "base64");
}

/** Removes the files of a message's parts (after its answer, or when it is refused). */
export async function discardParts(parts: MessagePart[]): Promise<void> {
  for (const p of parts) {
    p.pool?.give(p.chunks.reduce((n, c) => n + c.length, 0));
    p.pool = undefined;
    p.chunks = [];
  }
  await Promise.all(parts.map((p) => (p.file ? unlink(p.file).catch(() => {}) : p.raw?.store.close())));
}
