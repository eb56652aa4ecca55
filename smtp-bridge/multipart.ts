// Multipart messages read in one pass, without mailparser's streams: text and html parts in
// UTF-8 or ASCII, and attachments in base64 or sent as they are (7bit, 8bit, binary). This is
// the common shape of mail from applications (a body, an html alternative, files), and at 1 MB
// mailparser's pipeline (a byte-by-byte line splitter, a base64 decoder stream, a checksum,
// the spool's copies) was most of the bridge's cost per message.
//
// The message is kept raw, once (raw.ts: in memory while small, in the spool when large), and
// an attachment is the range of it that holds its body: a base64 body whose lines are canonical
// base64 is passed into the request as it is (its line breaks removed), with no decoding and no
// encoding; any other body is encoded from its bytes when the request is written.
//
// The parts are found as mailsplit (mailparser's splitter) finds them, line by line with the
// same boundary rules, but boundary lines are looked for with Buffer.indexOf instead of a test
// of every line; part headers are read by mailsplit's MimeNode and mailparser's processHeaders;
// html and text are put together by mailparser's rules (getTextContent). Anything outside
// that subset throws Declined, and message.ts gives the message, from its raw bytes, to
// mailparser. test/node/multipart-message.test.ts checks, on a corpus, on mutations of it and
// on every way of cutting it into chunks, that whatever this accepts leads to the request
// mailparser's reading leads to, byte for byte.
import { MimeNode } from "@zone-eu/mailsplit";
import { applyHeaders } from "./headers.ts";
import type { RawStore } from "./raw.ts";
import { decodeBase64, decodeQuotedPrintable, headerProcessor, PLAIN_ENCODINGS, plainHeaderEnd, UTF8_LIKE } from "./simple-message.ts";
import type { MessagePart, ParsedMessage } from "./submission.ts";

/** The message is not one this reader reads; mailparser reads it. */
class Declined extends Error {}
const decline = (why: string): never => {
  throw new Declined(why);
};

const CR = 0x0d;
const LF = 0x0a;
const DASH = 0x2d;
const EQUALS = 0x3d;

/** Limits past which a message is left to mailparser (mailsplit's own are 1,000 parts and 1 MB headers). */
const MAX_PARTS = 200;
const MAX_DEPTH = 8;
const MAX_HEADER_BYTES = 64 * 1024;
const MAX_BOUNDARY = 200;

/** The top-level header of a message this reader may read (a multipart with a boundary). */
export function isMultipartTop(node: MimeNode): boolean {
  return Boolean(node.multipart && node._boundary && node._boundary.length <= MAX_BOUNDARY && singleContentType(node));
}

/** mailsplit reads the first Content-Type field, mailparser's header map the last: one only. */
function singleContentType(node: MimeNode): boolean {
  return (node.headers as unknown as { get(key: string): string[] }).get("Content-Type").length <= 1;
}

// ---------------------------------------------------------------------------------------
// The tree of parts, as mailparser builds it.

interface Part {
  mime: MimeNode;
  parent: Part | null;
  /** Lower-cased content type, as mailparser's tree has it. */
  contentType: string;
  children: Part[];
  /** A text part's content, once its body has ended (mailparser's textContent). */
  text?: string;
}

/** What a leaf's body bytes go to while it is read. */
interface BodySink {
  /** Body bytes, in order. */
  write(bytes: Buffer): void;
  /** The body ended at `end` (exclusive) in the raw message. */
  end(end: number): void;
}

/** Gathers a text part and decodes it at its end, as mailparser's decoders do. */
class TextSink implements BodySink {
  readonly #chunks: Buffer[] = [];
  #length = 0;
  readonly part: Part;
  readonly encoding: string;
  constructor(part: Part, encoding: string) {
    this.part = part;
    this.encoding = encoding;
  }
  write(bytes: Buffer): void {
    this.#chunks.push(bytes);
    this.#length += bytes.length;
  }
  end(): void {
    const body = Buffer.concat(this.#chunks, this.#length);
    let bytes: Buffer | null;
    if (this.encoding === "quoted-printable") bytes = decodeQuotedPrintable(body);
    else if (this.encoding === "base64") bytes = decodeBase64(body);
    else bytes = body;
    if (bytes === null) return decline("a base64 text part that libbase64 reads piece by piece");
    this.part.text = bytes.toString().replace(/\r?\n/g, "\n");
  }
}

/** An attachment: its body is the range of the raw message from `start`. */
abstract class AttachmentSink implements BodySink {
  readonly attachment: MessagePart;
  readonly store: RawStore;
  readonly start: number;
  constructor(attachment: MessagePart, store: RawStore, start: number) {
    this.attachment = attachment;
    this.store = store;
    this.start = start;
  }
  abstract write(bytes: Buffer): void;
  abstract end(end: number): void;
}

/** An attachment sent as it is (7bit, 8bit, binary or an unknown encoding, which mailparser
 * also passes through): its bytes are its range of the raw message. */
class RangeSink extends AttachmentSink {
  write(): void {}
  end(end: number): void {
    this.attachment.raw = { store: this.store, start: this.start, end, base64Length: null };
    this.attachment.size = end - this.start;
  }
}

// What each byte is in base64: its value, or -1.
const B64 = new Int8Array(256).fill(-1);
"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".split("").forEach((c, i) => (B64[c.charCodeAt(0)] = i));
const ALPHABET = 1;
const KIND = Uint8Array.from(B64, (v) => (v >= 0 ? ALPHABET : 0));
const UNDERSCORE = 0x5f;
/** Bytes of whole lines checked by one decode, and where it decodes them (then drops them). */
const CHECKED_AT_ONCE = 256 * 1024;
const SCRATCH = Buffer.allocUnsafeSlow((CHECKED_AT_ONCE / 4) * 3);

/**
 * A base64 attachment, passed through when its lines are canonical base64: the alphabet only,
 * CRLF line breaks, padding only at the very end with the unused bits zero, and a length that
 * is a multiple of four. Then the text without its line breaks is exactly the base64 of what
 * mailparser's decoder (libbase64) makes of it, so it goes into the request as it is.
 * Anything else (spaces, other characters, a missing or inner "=", a bare CR or LF) declines.
 */
class Base64Sink extends AttachmentSink {
  #chars = 0; // alphabet characters
  #padding = 0; // "=" at the end
  #last = 0; // the last alphabet character (the padding's unused bits are in it)
  #cr = false; // the last byte was a CR: a LF must follow
  #column = 0; // bytes of the current line so far
  #lineLength = 0; // the first line's length, when a multiple of 4 (76 from most writers)
  write(bytes: Buffer): void {
    for (let i = 0; i < bytes.length; ) {
      const whole = this.#column === 0 && this.#lineLength && !this.#padding ? this.#wholeLines(bytes, i) : 0;
      i = whole ? i + whole : this.#line(bytes, i);
    }
  }

  /** Whole lines of the first line's length from `at`, checked natively: the line breaks where
   * they should be, no "=", "-" or "_" (Node's decoder reads the last two as base64url), and
   * the decoded length that only the alphabet gives (Node skips any other byte). The bytes
   * taken, 0 when there are none (the byte by byte check goes on). */
  #wholeLines(bytes: Buffer, at: number): number {
    const length = this.#lineLength;
    const stride = length + 2;
    let lines = Math.min(Math.floor((bytes.length - at) / stride), Math.floor(CHECKED_AT_ONCE / stride));
    for (let k = 0; k < lines; k++) {
      const end = at + k * stride + length;
      if (bytes[end] !== CR || bytes[end + 1] !== LF) {
        lines = k;
        break;
      }
    }
    let region = bytes.subarray(at, at + lines * stride);
    const padding = region.indexOf(EQUALS);
    if (padding >= 0) {
      lines = Math.floor(padding / stride); // the line with "=" is left to the byte by byte check
      region = region.subarray(0, lines * stride);
    }
    if (!lines) return 0;
    if (region.indexOf(DASH) >= 0 || region.indexOf(UNDERSCORE) >= 0) decline("a character outside base64");
    if (SCRATCH.write(region.toString("latin1"), 0, "base64") !== (lines * length * 3) / 4) decline("a character outside base64, or a bare CR or LF");
    this.#chars += lines * length;
    this.#last = region[region.length - 3]!;
    return region.length;
  }

  /** Checks from `at` to the end of the line (its LF) or of `bytes`, byte by byte; where it stopped. */
  #line(bytes: Buffer, at: number): number {
    let chars = this.#chars;
    let padding = this.#padding;
    let last = this.#last;
    let cr = this.#cr;
    let column = this.#column;
    let i = at;
    for (const n = bytes.length; i < n; i++) {
      const c = bytes[i]!;
      if (cr) {
        if (c !== LF) decline("a bare CR in base64");
        cr = false;
        if (!this.#lineLength && column && column % 4 === 0) this.#lineLength = column;
        column = 0;
        i++;
        break;
      }
      if (KIND[c] === ALPHABET) {
        if (padding) decline("base64 after its padding");
        chars++;
        last = c;
        column++;
      } else if (c === CR) cr = true;
      else if (c === EQUALS) {
        padding++;
        column++;
      } else decline("a character outside base64, or a bare LF");
    }
    this.#chars = chars;
    this.#padding = padding;
    this.#last = last;
    this.#cr = cr;
    this.#column = column;
    return i;
  }
  end(end: number): void {
    const chars = this.#chars;
    const padding = this.#padding;
    if (this.#cr) decline("a bare CR in base64");
    if (padding > 2 || (chars + padding) % 4 !== 0 || (padding && chars % 4 !== 4 - padding)) decline("base64 that is not whole groups");
    const last = B64[this.#last]!;
    if ((padding === 1 && last & 0x03) || (padding === 2 && last & 0x0f)) decline("base64 padding with bits set");
    this.attachment.raw = { store: this.store, start: this.start, end, base64Length: chars + padding };
    this.attachment.size = ((chars + padding) / 4) * 3 - padding;
  }
}

// ---------------------------------------------------------------------------------------
// The splitter: mailsplit's rules, with boundary lines found by indexOf.

/**
 * mailsplit's compareBoundary: 1 for "--boundary" then a line end, 2 for "--boundary--" (or
 * the line ending early); false otherwise. `line` runs from the start of the line to the end
 * of its LF (or of the message).
 */
function compareBoundary(line: Buffer, startpos: number, boundary: Buffer): 1 | 2 | false {
  if (line.length < boundary.length + 3 + startpos || line.length > boundary.length + 6 + startpos) return false;
  for (let i = 0; i < boundary.length; i++) if (line[i + 2 + startpos] !== boundary[i]) return false;
  let pos = 0;
  for (let i = boundary.length + 2 + startpos; i < line.length; i++) {
    const c = line[i]!;
    if (pos === 0 && (c === CR || c === LF)) return 1;
    if (pos === 0 && c !== DASH) return false;
    if (pos === 1 && c !== DASH) return false;
    if (pos === 2 && c !== CR && c !== LF) return false;
    if (pos === 3 && c !== LF) return false;
    pos++;
  }
  return 2;
}

/** The parser's node: mailsplit's current node, with the boundaries it answers to. */
interface Node {
  part: Part;
  /** Own boundary (a multipart whose header has been read). */
  boundary: Buffer | null;
  /** The boundary of the multipart this node is in, and that multipart. */
  parentBoundary: Buffer | null;
  owner: Node | null;
}

/** The last three bytes of `before` then `chunk` (where a CRLF CRLF may begin). */
function lastBytes(before: Buffer | null, chunk: Buffer): Buffer {
  if (chunk.length >= 3 || !before) return Buffer.from(chunk.subarray(-3));
  return Buffer.from(Buffer.concat([before, chunk]).subarray(-3));
}

/** True when a header's blank line may end in `chunk`, the bytes before it ending with `tail`. */
function mayEndHeader(tail: Buffer, chunk: Buffer): boolean {
  return chunk.indexOf(CRLF_CRLF) >= 0 || Buffer.concat([tail, chunk.subarray(0, 3)]).indexOf(CRLF_CRLF) >= 0;
}

const CRLF_CRLF = Buffer.from("\r\n\r\n");
const LF_DASH = Buffer.from("\n-");
const LF_CR = Buffer.from("\n\r");

export class MultipartReader {
  readonly #store: RawStore;
  readonly #root: Part;
  /** Unread bytes, and where they begin in the raw message. */
  #pending: Buffer = Buffer.alloc(0);
  /** Chunks after #pending, not joined yet (a part header that has not ended), and the last
   * bytes of all that (where a blank line may begin). */
  #waiting: Buffer[] = [];
  #waitingBytes = 0;
  #tail: Buffer = Buffer.alloc(0);
  #at: number;
  #node: Node;
  /** Reading a part's header (mailsplit's HEAD state). */
  #head = false;
  #inEpilogue = false;
  /** #pending begins at the start of a line. */
  #lineStart = true;
  /** Where the body of the current leaf goes (null in a preamble or epilogue). */
  #sink: BodySink | null = null;
  /** Where the current leaf's body began. */
  #bodyStart = 0;
  #parts = 1;
  #maxBoundary: number;
  readonly #attachments: MessagePart[] = [];
  #hasText = false;
  #hasHtml = false;

  /** `header` is the top-level header, which ends at `headerEnd` in the raw message; push()
   * is given the bytes after it. */
  constructor(store: RawStore, header: MimeNode, headerEnd: number) {
    this.#store = store;
    this.#root = { mime: header, parent: null, contentType: String(header.contentType), children: [] };
    this.#node = { part: this.#root, boundary: header._boundary || null, parentBoundary: null, owner: null };
    this.#maxBoundary = this.#node.boundary?.length ?? 0;
    this.#at = headerEnd;
  }

  /** The next bytes of the message. Throws Declined. */
  push(chunk: Buffer): void {
    // A part header that has begun waits, unjoined, until its blank line may have come: joining
    // and reading it again at every chunk would be quadratic when it arrives in small pieces.
    if (this.#head && this.#pending.length && !mayEndHeader(this.#tail, chunk)) {
      this.#waiting.push(chunk);
      this.#waitingBytes += chunk.length;
      this.#tail = lastBytes(this.#tail, chunk);
      if (this.#pending.length + this.#waitingBytes > MAX_HEADER_BYTES) decline("a part header that does not end");
      return;
    }
    this.#join(chunk);
    this.#run(false);
  }

  /** The message has ended: what it reads as. Throws Declined. */
  end(): ParsedMessage {
    this.#join(null);
    this.#run(true);
    if (this.#head) decline("a part header that does not end");
    // A leaf still open runs to the end of the message, its last line break included (mailsplit).
    if (this.#sink) this.#endBody(this.#at);
    return this.#message();
  }

  #run(final: boolean): void {
    while (this.#head ? this.#readHeader(final) : this.#readBody(final));
    this.#tail = lastBytes(null, this.#pending);
  }

  /** #pending, the chunks waiting and `chunk`, as one buffer. */
  #join(chunk: Buffer | null): void {
    const parts = [this.#pending, ...this.#waiting];
    if (chunk) parts.push(chunk);
    const nonEmpty = parts.filter((p) => p.length);
    this.#pending = nonEmpty.length === 1 ? nonEmpty[0]! : Buffer.concat(nonEmpty);
    this.#waiting = [];
    this.#waitingBytes = 0;
  }

  #consume(n: number): void {
    this.#pending = this.#pending.subarray(n);
    this.#at += n;
  }

  /** A part's header: true once read. */
  #readHeader(final: boolean): boolean {
    const buf = this.#pending;
    const end = plainHeaderEnd(buf);
    if (end === -2) {
      if (buf.length > MAX_HEADER_BYTES || final) decline("a part header that does not end");
      return false;
    }
    if (end < 0) decline("a part header that is not plain ASCII fields with CRLF line ends");
    // mailsplit looks for boundaries in header lines too: a header with one is not for this path.
    for (let at = 0; at < end; ) {
      const next = buf.indexOf(LF, at) + 1;
      if (buf[at] === DASH && this.#boundaryOf(buf.subarray(at, next), 0)) decline("a boundary line inside a part header");
      at = next;
    }
    const mime = new MimeNode(this.#node.owner!.part.mime);
    mime.addHeaderChunk(buf.subarray(0, end));
    mime.parseHeaders();
    this.#consume(end);
    this.#head = false;
    this.#lineStart = true;
    this.#openPart(mime);
    return true;
  }

  /** A part whose header has been read: a multipart (its preamble follows) or a leaf (its body). */
  #openPart(mime: MimeNode): void {
    const parent = this.#node.owner!.part;
    const contentType = mime.contentType || "";
    if (!singleContentType(mime)) decline("two Content-Type fields");
    const part: Part = { mime, parent, contentType, children: [] };
    parent.children.push(part);
    this.#node.part = part;
    let depth = 0;
    for (let p: Part | null = parent; p; p = p.parent) depth++;
    if (depth > MAX_DEPTH) decline("parts nested too deep");
    if (/^message\//.test(contentType)) decline("an attached message");
    if (/^multipart\//.test(contentType)) {
      if (!mime.multipart || !mime._boundary || mime._boundary.length > MAX_BOUNDARY) decline("a multipart without a usable boundary");
      this.#node.boundary = mime._boundary as Buffer;
      this.#maxBoundary = Math.max(this.#maxBoundary, this.#node.boundary.length);
      return; // its preamble follows
    }
    if (mime._boundary) decline("a boundary parameter on a part that is not multipart");
    // mailparser's createNode: an unknown disposition is an attachment; a part that is not
    // text/plain or text/html (or message/delivery-status) is an attachment unless inline.
    let disposition = mime.disposition || "";
    if (disposition && disposition !== "attachment" && disposition !== "inline") disposition = "attachment";
    const textType = contentType === "text/plain" || contentType === "text/html";
    if (!disposition) disposition = textType ? "inline" : "attachment";
    const encoding = mime.encoding || "";
    if (textType && disposition === "inline") {
      if (mime.flowed) decline("format=flowed text");
      if (!UTF8_LIKE.has(String(mime.charset || "").toLowerCase().replace(/[^a-z0-9]+/g, ""))) decline("text in another charset");
      if (encoding !== "quoted-printable" && encoding !== "base64" && !PLAIN_ENCODINGS.has(encoding)) decline("text in another transfer encoding");
      if (contentType === "text/plain") this.#hasText = true;
      else this.#hasHtml = true;
      this.#sink = new TextSink(part, encoding);
      this.#bodyStart = this.#at;
      return;
    }
    if (encoding === "quoted-printable") decline("a quoted-printable attachment");
    let type = contentType;
    if (type === "application/octet-stream" && mime.filename) {
      type = (mime as unknown as { libmime: { detectMimeType(name: string): string | false } }).libmime.detectMimeType(mime.filename) || type;
    }
    const attachment: MessagePart = { contentType: type || "application/octet-stream", chunks: [], size: 0 };
    if (mime.filename) attachment.filename = mime.filename;
    const headers = mime.headers as unknown as { get(key: string): string[]; getList(): { key: string; line: string }[] };
    if (headers.get("Content-ID").length) {
      // message.ts keeps a content id for a part shown inline, or inside multipart/related.
      const id = headerProcessor().processHeaders(headers.getList()).get("content-id");
      const cid = id === undefined ? "" : String([id].flat().shift()).trim().replace(/^<|>$/g, "").trim();
      let related = false;
      for (let p: Part | null = parent; p; p = p.parent) if (p.contentType === "multipart/related") related = true;
      if (cid && (related || mime.disposition === "inline")) attachment.contentId = cid;
    }
    this.#attachments.push(attachment);
    this.#bodyStart = this.#at;
    this.#sink = encoding === "base64" ? new Base64Sink(attachment, this.#store, this.#at) : new RangeSink(attachment, this.#store, this.#at);
  }

  /** mailsplit's checkBoundary for `line` (from its start to the end of its LF). */
  #boundaryOf(line: Buffer, startpos: number): 1 | 2 | 3 | 4 | false {
    const node = this.#node;
    let b: 1 | 2 | false;
    if (!this.#inEpilogue && node.boundary && (b = compareBoundary(line, startpos, node.boundary))) return b;
    if (node.parentBoundary && (b = compareBoundary(line, startpos, node.parentBoundary))) return (b + 2) as 3 | 4;
    return false;
  }

  /** The first line at or after `from` (an index of a LF, or -1 for the start of #pending when
   * that starts a line) that may be a boundary line: one that begins with "-", or with a CR
   * (mailsplit skips one line-end byte at the start of a line). -1 when none. */
  #candidate(buf: Buffer, from: number): number {
    if (from < 0) {
      if (buf.length && buf[0] !== DASH && buf[0] !== CR) from = 0;
      else return 0;
    }
    const dash = buf.indexOf(LF_DASH, from);
    const cr = buf.indexOf(LF_CR, from);
    if (dash < 0) return cr < 0 ? -1 : cr + 1;
    return cr < 0 || dash < cr ? dash + 1 : cr + 1;
  }

  /** Reads body bytes (a leaf's, or a preamble or epilogue) up to a boundary line: true when
   * one was found and acted on; false when more bytes are needed. */
  #readBody(final: boolean): boolean {
    const buf = this.#pending;
    let from = this.#lineStart ? -1 : 0;
    for (let lineStart = this.#candidate(buf, from); lineStart >= 0; lineStart = this.#candidate(buf, from)) {
      from = lineStart; // the next search starts after this line's first byte
      const startpos = buf[lineStart] === CR ? 1 : 0;
      const lf = buf.indexOf(LF, lineStart);
      if (lf < 0 && !final) break; // the last line: it may still become a boundary line
      // A message's last line, unfinished, that starts with a CR: mailsplit moves the line end
      // before it onto it, and then reads it differently. (SMTP always ends the data with a
      // line end, so this is never mail that arrived over SMTP.)
      if (lf < 0 && startpos) decline("an unfinished last line that starts with a CR");
      const line = buf.subarray(lineStart, lf < 0 ? buf.length : lf + 1);
      if (line.length < 4 || line[startpos] !== DASH || line[startpos + 1] !== DASH) continue;
      const kind = this.#boundaryOf(line, startpos);
      if (kind) {
        this.#boundary(kind, lineStart, line.length);
        return true;
      }
    }
    // No boundary line: what cannot be followed by one goes to the sink.
    let keep = buf.length;
    if (!final) {
      const lastLf = buf.lastIndexOf(LF);
      const lastLine = lastLf < 0 && this.#lineStart ? 0 : lastLf + 1;
      const tail = buf.length - lastLine;
      if (lastLine > 0 || (lastLf < 0 && this.#lineStart)) {
        if (tail <= this.#maxBoundary + 8 && (tail === 0 || buf[lastLine] === DASH || buf[lastLine] === CR)) {
          // The last line may still be a boundary line: keep it, with the line end before it.
          keep = lastLine;
          if (keep > 0 && buf[keep - 1] === LF) keep--;
          if (keep > 0 && buf[keep - 1] === CR) keep--;
        }
      }
      if (keep === buf.length && buf[keep - 1] === CR) keep--; // a CR may begin the line end before one
    }
    if (keep > 0) {
      this.#sink?.write(buf.subarray(0, keep));
      this.#consume(keep);
      this.#lineStart = false;
    }
    return false;
  }

  /** A boundary line at `lineStart` of #pending, `length` bytes long. */
  #boundary(kind: 1 | 2 | 3 | 4, lineStart: number, length: number): void {
    const buf = this.#pending;
    // The line end before a boundary line belongs to it (mailsplit's trimBodyLineEnd).
    let bodyEnd = lineStart;
    if (bodyEnd > 0 && buf[bodyEnd - 1] === LF) bodyEnd--;
    if (bodyEnd > 0 && buf[bodyEnd - 1] === CR) bodyEnd--;
    // mailsplit keeps it, though, when it is the whole body and the boundary line is not a
    // closing one: the body of "\r\n" before the next part's line is "\r\n".
    if ((kind === 1 || kind === 3) && this.#at + bodyEnd === this.#bodyStart) bodyEnd = lineStart;
    if (this.#sink) {
      if (bodyEnd > 0) this.#sink.write(buf.subarray(0, bodyEnd));
      this.#endBody(this.#at + bodyEnd);
    }
    this.#consume(lineStart + length);
    this.#lineStart = true;
    switch (kind) {
      case 1: // the first or next child of the current node
        this.#newNode(this.#node);
        break;
      case 2: // the current node's own closing line, in its preamble: nothing changes (mailsplit)
        break;
      case 3: // the next sibling
        this.#newNode(this.#node.owner!);
        break;
      case 4: // the end of the multipart the current node is in
        if (this.#node.owner) {
          this.#node = this.#node.owner;
          this.#inEpilogue = true;
        }
        break;
    }
  }

  #newNode(parent: Node): void {
    if (++this.#parts > MAX_PARTS) decline("too many parts");
    // Its part is made once its header has been read (#openPart).
    this.#node = { part: parent.part, boundary: null, parentBoundary: parent.boundary, owner: parent };
    this.#head = true;
    this.#inEpilogue = false;
  }

  #endBody(end: number): void {
    this.#sink!.end(end);
    this.#sink = null;
  }

  /** The message as message.ts makes it of mailparser's events. */
  #message(): ParsedMessage {
    const headers = this.#root.mime.headers as unknown as { getList(): { key: string; line: string }[] };
    const list = headers.getList();
    const message: ParsedMessage = {
      headerLines: list.map((l) => ({ key: l.key, line: l.line })),
      from: [], to: [], cc: [], replyTo: [], subject: undefined, html: undefined, text: undefined,
      attachments: this.#attachments,
    };
    applyHeaders(message, headerProcessor().processHeaders(list));
    // mailparser's getTextContent, with html-to-text and text-to-html turned off.
    const text: string[] = [];
    const html: string[] = [];
    const walk = (part: Part, alternative: boolean) => {
      if (part.text) {
        if (part.contentType === "text/plain") {
          text.push(part.text);
          if (!alternative && this.#hasHtml) html.push("");
        } else {
          if (!alternative && this.#hasText) text.push("");
          html.push(part.text);
        }
      }
      const inner = alternative || part.contentType === "multipart/alternative";
      for (const child of part.children) walk(child, inner);
    };
    walk(this.#root, false);
    if (html.length) message.html = html.join("<br/>\n");
    if (text.length) message.text = text.join("\n");
    return message;
  }
}
