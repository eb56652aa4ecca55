// The common message, read without mailparser's streams: one text/plain or text/html part
// (no attachments), UTF-8 or ASCII, in 7bit, 8bit, quoted-printable or base64, under a plain
// ASCII header with CRLF line ends. Most mail from applications and frameworks that send one
// body looks like this, and at 10 KB mailparser's pipeline (a line splitter, a transfer decoder
// and a charset stage, each a stream) was most of the bridge's cost per message.
//
// The header is read by the same code mailparser uses (mailsplit's MimeNode for the structure,
// mailparser's own processHeaders for names, addresses and the subject), so only the body is
// decoded here, in one pass over the bytes. Anything outside that subset returns null and the
// caller reads the message with mailparser. test/node/simple-message.test.ts checks, on a
// corpus and on thousands of mutations of it, that whatever this accepts it reads exactly as
// mailparser does.
import { isAscii } from "node:buffer";
import { MimeNode } from "@zone-eu/mailsplit";
import { MailParser, type HeaderValue } from "mailparser";
import { applyHeaders } from "./headers.ts";
import type { ParsedMessage } from "./submission.ts";

/** Mailparser's header processing, used without its streams (it keeps no state between calls). */
interface HeaderProcessor {
  processHeaders(lines: { key: string; line: string }[]): Map<string, HeaderValue>;
}
let processor: HeaderProcessor | null = null;
export const headerProcessor = (): HeaderProcessor => (processor ??= new MailParser() as unknown as HeaderProcessor);

const CR = 0x0d;
const LF = 0x0a;
const TAB = 0x09;
const SPACE = 0x20;

/** Where the header ends (the index after its blank line); -1 when the header is not plain
 * ASCII fields with CRLF line ends (any other shape goes to mailparser); -2 when `raw` ends
 * before the header does. */
export function plainHeaderEnd(raw: Uint8Array): number {
  let lineStart = true;
  let inName = false; // between the start of a field and its colon
  let nameLength = 0;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c === CR) {
      if (i + 1 === raw.length) return -2; // the LF may be in the next piece
      if (raw[i + 1] !== LF) return -1;
      if (lineStart) return i === 0 ? -1 : i + 2; // the blank line: the header ends after it
      if (inName) return -1; // a line without a colon
      i++;
      lineStart = true;
      continue;
    }
    if (c === LF) return -1; // a bare LF
    if (lineStart) {
      lineStart = false;
      if (c === SPACE || c === TAB) {
        if (i === 0) return -1;
        continue; // a folded line continues the field before it
      }
      inName = true;
      nameLength = 0;
    }
    if (inName) {
      if (c === 0x3a) {
        if (nameLength === 0) return -1;
        inName = false;
      } else if (c <= SPACE || c >= 0x7f) return -1; // a field name is printable ASCII
      else nameLength++;
    } else if (c >= 0x7f || (c < SPACE && c !== TAB)) return -1; // and so is every value here
  }
  return -2; // no blank line yet
}

/**
 * Quoted-printable to bytes, as libqp's `decode` (what mailparser uses) does it: trailing spaces
 * and tabs of each line go, then soft line breaks ("=" before CRLF, LF or the end), then each
 * "=" with two hex digits becomes its byte; any other "=" stays. The same steps, but the scans
 * are native (indexOf, one plain regular expression) and the rare trailing blanks are removed
 * in one linear pass, where libqp's `[\t ]+$` is quadratic in a long run of spaces.
 */
export function decodeQuotedPrintable(input: Uint8Array): Buffer {
  const bytes = Buffer.from(input.buffer, input.byteOffset, input.length);
  let text = bytes.toString("latin1");
  if (hasTrailingBlanks(text)) text = stripTrailingBlanks(bytes).toString("latin1");
  const s = text.replace(/=(?:\r?\n|$)/g, "");
  let at = s.indexOf("=");
  if (at < 0) return Buffer.from(s, "latin1");
  const pieces: string[] = [];
  let from = 0;
  while (at >= 0) {
    if (at + 2 < s.length) {
      const hi = hexValue(s.charCodeAt(at + 1));
      const lo = hexValue(s.charCodeAt(at + 2));
      if (hi >= 0 && lo >= 0) {
        pieces.push(s.slice(from, at), LATIN1[(hi << 4) | lo]!);
        from = at + 3;
        at = s.indexOf("=", from);
        continue;
      }
    }
    at = s.indexOf("=", at + 1);
  }
  pieces.push(s.slice(from));
  return Buffer.from(pieces.join(""), "latin1");
}

const LATIN1 = Array.from({ length: 256 }, (_, i) => String.fromCharCode(i));
/** True when a space or tab ends a line (before a CR or LF) or the whole input. */
function hasTrailingBlanks(s: string): boolean {
  const last = s.charCodeAt(s.length - 1);
  if (last === SPACE || last === TAB) return true;
  for (const lineEnd of ["\n", "\r"]) {
    for (let at = s.indexOf(lineEnd, 1); at > 0; at = s.indexOf(lineEnd, at + 1)) {
      const c = s.charCodeAt(at - 1);
      if (c === SPACE || c === TAB) return true;
    }
  }
  return false;
}

/** Drops every run of spaces and tabs that ends a line (before CR or LF) or the input. */
function stripTrailingBlanks(input: Buffer): Buffer {
  const out = Buffer.allocUnsafe(input.length);
  let n = 0;
  let run = -1; // where the current run of spaces and tabs began
  for (let i = 0; i < input.length; i++) {
    const c = input[i]!;
    if (c === SPACE || c === TAB) {
      if (run < 0) run = i;
      continue;
    }
    if (run >= 0) {
      if (c !== CR && c !== LF) n += input.copy(out, n, run, i);
      run = -1;
    }
    out[n++] = c;
  }
  return out.subarray(0, n);
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  return -1;
}

/** Base64 to bytes when its only padding is at its end (what libbase64's decoder does in one
 * piece then); null for padding inside, which it decodes segment by segment, and for bytes
 * over 0x7f, which it reads as ASCII with the high bit cleared (0xC1 is "A", 0xBD "="). */
export function decodeBase64(input: Buffer): Buffer | null {
  if (!isAscii(input)) return null;
  const clean = input.toString("latin1").replace(/[^a-zA-Z0-9+/=]/g, "");
  const pad = clean.indexOf("=");
  if (pad >= 0 && !/^={1,2}$/.test(clean.slice(pad))) return null;
  return Buffer.from(clean, "base64");
}

export const UTF8_LIKE = new Set(["", "ascii", "usascii", "utf8"]);
export const PLAIN_ENCODINGS = new Set(["", "7bit", "8bit", "binary"]);

/**
 * Reads `raw` (a whole message as received after DATA) when it is a single text part as
 * described above; null otherwise. What it gives is what message.ts makes of mailparser's
 * events for the same bytes.
 */
export function readSimpleMessage(raw: Buffer, header?: SimpleHeader): ParsedMessage | null {
  try {
    return readSimple(raw, header ?? simpleHeader(raw));
  } catch {
    return null; // whatever mailsplit or mailparser's header code refuses, mailparser reads (or refuses) itself
  }
}

/** A header read by message.ts's startOf, to be passed on to {@link readSimpleMessage} so the
 * header is not read twice. */
export interface SimpleHeader {
  /** Where the body begins. */
  end: number;
  node: MimeNode;
  type: "text/plain" | "text/html";
  encoding: string;
}

/** The top-level header of a message as mailsplit reads it, when it is plain ASCII fields with
 * CRLF line ends; null when it is not; undefined while `raw` ends before the header does. */
export function plainHeader(raw: Uint8Array): { end: number; node: MimeNode } | null | undefined {
  const end = plainHeaderEnd(raw);
  if (end === -2) return undefined;
  if (end < 0) return null;
  const node = new MimeNode(false);
  node.addHeaderChunk(Buffer.from(raw.buffer, raw.byteOffset, end));
  node.parseHeaders();
  return { end, node };
}

/** The header of a message this path may read; null when the message is not one; undefined
 * while `raw` (the start of a message) ends before its header does. */
function simpleHeader(raw: Uint8Array): SimpleHeader | null | undefined {
  const top = plainHeader(raw);
  if (!top) return top;
  return simpleOf(top);
}

/** The single-part header, from a header read by {@link plainHeader}; null when the message is not one. */
export function simpleOf({ end, node }: { end: number; node: MimeNode }): SimpleHeader | null {
  const type = node.contentType || "text/plain";
  if (type !== "text/plain" && type !== "text/html") return null;
  // mailsplit splits on a boundary parameter whatever the type; and with two Content-Type
  // fields it reads the first while mailparser's header map keeps the last.
  if ((node as unknown as { _boundary: unknown })._boundary) return null;
  if ((node.headers as unknown as { get(key: string): string[] }).get("Content-Type").length > 1) return null;
  if (node.disposition !== false && node.disposition !== "inline") return null;
  if (node.filename || node.flowed) return null;
  if (!UTF8_LIKE.has(String(node.charset || "").toLowerCase().replace(/[^a-z0-9]+/g, ""))) return null;
  const encoding = node.encoding || "";
  if (encoding !== "quoted-printable" && encoding !== "base64" && !PLAIN_ENCODINGS.has(encoding)) return null;
  return { end, node, type, encoding };
}

function readSimple(raw: Buffer, header: SimpleHeader | null | undefined): ParsedMessage | null {
  if (!header) return null;
  const { end, node, type, encoding } = header;
  const body = raw.subarray(end);
  let bytes: Buffer | null;
  if (encoding === "quoted-printable") bytes = decodeQuotedPrintable(body);
  else if (encoding === "base64") bytes = decodeBase64(body);
  else bytes = body;
  if (bytes === null) return null;

  const headers = node.headers as unknown as { lines: { key: string; line: string }[]; getList(): { key: string; line: string }[] };
  const list = headers.getList();
  const processed = headerProcessor().processHeaders(list);
  const message: ParsedMessage = {
    headerLines: list.map((l) => ({ key: l.key, line: l.line })),
    from: [], to: [], cc: [], replyTo: [], subject: undefined, html: undefined, text: undefined, attachments: [],
  };
  // As mailparser: the text with LF line ends; an html part alone also reports text "" (the
  // bridge runs it without html-to-text); an empty part reports neither. The last line break
  // is SMTP's end of data, not part of the text (message.ts, singlePart).
  const content = bytes.toString().replace(/\r?\n/g, "\n");
  if (content) {
    const text = content.replace(/\r?\n$/, "");
    if (type === "text/html") {
      message.html = text;
      message.text = "";
    } else message.text = text;
  }
  applyHeaders(message, processed);
  return message;
}
