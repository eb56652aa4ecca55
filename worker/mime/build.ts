// Builds the RFC 5322 / MIME message for one send. The output is 7-bit ASCII with CRLF line
// endings, deterministic for a given input and boundary seed (DKIM signs these exact bytes),
// and not dot-stuffed: the SMTP transport does that.

import { toHex } from "../bytes.ts";
import type { Address } from "./address.ts";
import { isTraceHeaderName } from "../../smtp-bridge/trace-headers.ts";
import { formatMailboxTokens } from "./address.ts";
import {
  base64LinesLength,
  encodeQuotedPrintableBytes,
  fileNameParams,
  isSevenBitSafe,
  listField,
  parameterField,
  parseContentType,
  toCrlf,
  unstructuredField,
  writeBase64Lines,
} from "./encoding.ts";

/** An attachment's bytes read on demand (from R2 at delivery), each read from the start: a
 * message near the 40 MB bound is made without holding its attachments (issue 20, item 3). */
export interface ByteSource {
  /** Its length in octets; a read that yields another length is an error. */
  readonly size: number;
  read(): AsyncIterable<Uint8Array>;
}

export interface MimeAttachment {
  filename?: string;
  contentType: string;
  /** The bytes, or a source read each time the message is made (composeMessage only). */
  content: Uint8Array | ByteSource;
  /** set for inline parts referenced as cid: in html */
  contentId?: string;
}

export interface MimeMessageInput {
  from: Address;
  to: Address[];
  cc: Address[];
  replyTo: Address[];
  subject: string;
  html?: string;
  text?: string;
  /** Custom headers, already validated (RFC 5322 names, no CR/LF in values). Emitted as given, values encoded if non-ASCII. */
  headers: Record<string, string>;
  attachments: MimeAttachment[];
  /** Message-ID without angle brackets, e.g. "0192...@tern.test" */
  messageId: string;
  date: Date;
  /** Optional: makes boundaries deterministic (tests, signing); default random. */
  boundarySeed?: string;
}

// Header fields tern writes itself (or that would change the MIME structure): a caller's
// header with one of these names is refused by the API and ignored here.
const OWNED_HEADER_NAMES = new Set([
  "from",
  "to",
  "cc",
  "bcc",
  "subject",
  "date",
  "message-id",
  "mime-version",
  "content-type",
  "content-transfer-encoding",
  "content-disposition",
  "content-id",
  "dkim-signature",
  "sender",
  "return-path",
]);

/** True for a header name tern owns (case-insensitive); callers must refuse these. */
export function isOwnedHeaderName(name: string): boolean {
  return OWNED_HEADER_NAMES.has(name.toLowerCase());
}

/** RFC 5322 field-name (printable ASCII but ":"), short enough for "Name:" to fit a line. */
export function isValidHeaderName(name: string): boolean {
  return /^[\x21-\x39\x3b-\x7e]{1,900}$/.test(name);
}

/** A Content-ID tern accepts: printable ASCII without spaces or angle brackets, 1..250 long
 * (surrounding "<" ">" are allowed and stripped). */
export function isValidContentId(contentId: string): boolean {
  return /^[\x21-\x3b\x3d\x3f-\x7e]{1,250}$/.test(stripAngles(contentId));
}

const MESSAGE_ID = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]{1,200}@[A-Za-z0-9!#$%&'*+/=?^_`{|}~.\-[\]:]{1,200}$/;
const CRLF = "\r\n";
const utf8 = new TextEncoder();

type Node = Leaf | Multipart;
interface Leaf {
  kind: "leaf";
  /** Folded header fields, without their final CRLF. */
  headers: string[];
  /** ASCII text, ASCII octets (quoted-printable), or octets to write as base64. */
  body: { text: string } | { ascii: Uint8Array } | { base64: Uint8Array | ByteSource };
}
interface Multipart {
  kind: "multipart";
  subtype: "mixed" | "related" | "alternative";
  params: string[];
  boundary: string;
  parts: Node[];
}

/** Builds the complete RFC 5322 message, CRLF line endings, NOT dot-stuffed. There is NO Bcc
 * parameter and no Bcc header may ever be written. Attachments must be bytes here; a message
 * with streamed attachments is composed and read in pieces (composeMessage). */
export function buildMessage(input: MimeMessageInput): Uint8Array {
  const root = structure(input, boundaries(input.boundarySeed));
  const fields = [...topHeaders(input), ...nodeHeaders(root)];
  const writer = bodyWriter(root);
  const head = headerBytes(fields);
  const out = new Uint8Array(head.length + writer.size);
  out.set(head);
  let offset = head.length;
  for (const piece of piecesOf(writer.parts, new Uint8Array(BASE64_OUT + 2))) {
    if (!(piece instanceof Uint8Array)) throw new TypeError("buildMessage takes attachment bytes; compose a message with streamed attachments");
    out.set(piece, offset);
    offset += piece.length;
  }
  return out;
}

/** A message body made on demand, in pieces of about 64 KB: each call of chunks() yields the
 * same bytes again (reading streamed attachments again), and a 40 MB message never exists as
 * one buffer (issue 20, item 3). A piece is only valid until the next one is asked for (its
 * buffer is used again). */
export interface MessageBody {
  /** Its length in octets. */
  readonly length: number;
  chunks(): AsyncGenerator<Uint8Array>;
}

/** A message as its header fields (folded, without their CRLF) and its body. */
export interface ComposedMessage {
  fields: string[];
  body: MessageBody;
}

/** The message buildMessage builds, without building it: the same bytes are headerBytes(fields)
 * followed by the body's chunks. The body keeps references to the attachments' bytes. */
export function composeMessage(input: MimeMessageInput): ComposedMessage {
  const top = topHeaders(input);
  const root = structure(input, boundaries(input.boundarySeed));
  const { parts, size } = bodyWriter(root);
  return { fields: [...top, ...nodeHeaders(root)], body: { length: size, chunks: () => pieces(parts) } };
}

function bodyWriter(root: Node): MessageWriter {
  const out = new MessageWriter();
  writeBody(root, out);
  // The message ends with CRLF; a text body that already ends with one keeps its length.
  if (root.kind === "multipart" || !endsWithCrlf(root.body)) out.text(CRLF);
  return out;
}

/** The header section's octets: each field with its CRLF, then the empty line. */
export function headerBytes(fields: string[]): Uint8Array {
  const text = fields.map((f) => f + CRLF).join("") + CRLF;
  // Every header encoding above yields ASCII; anything else is a bug here.
  if (!/^[\x00-\x7f]*$/.test(text)) throw new Error("mime: non-ASCII output");
  return utf8.encode(text);
}

/** An email's stored fields that no message can be built from (a subject or header with a line
 * break or NUL, an invalid Message-ID, content id or date). Retrying cannot fix it, so delivery
 * fails the email with this reason instead of trying again. */
export class UnbuildableMessageError extends TypeError {}

function topHeaders(input: MimeMessageInput): string[] {
  const fields: string[] = [listField("From", [formatMailboxTokens(input.from)])];
  if (input.to.length > 0) fields.push(listField("To", input.to.map(formatMailboxTokens)));
  if (input.cc.length > 0) fields.push(listField("Cc", input.cc.map(formatMailboxTokens)));
  if (input.replyTo.length > 0) fields.push(listField("Reply-To", input.replyTo.map(formatMailboxTokens)));
  if (/[\r\n\0]/.test(input.subject)) throw new UnbuildableMessageError("subject contains CR, LF or NUL");
  fields.push(unstructuredField("Subject", input.subject, "text"));
  fields.push(`Date: ${formatDate(input.date)}`);
  if (!MESSAGE_ID.test(input.messageId)) throw new UnbuildableMessageError("invalid Message-ID");
  fields.push(`Message-ID: <${input.messageId}>`);
  fields.push("MIME-Version: 1.0");
  for (const [name, value] of Object.entries(input.headers)) {
    if (!isValidHeaderName(name)) throw new UnbuildableMessageError(`invalid header name: ${JSON.stringify(name)}`);
    // Trace headers are refused by the API; an email accepted before that rule still never
    // carries them.
    if (isOwnedHeaderName(name) || isTraceHeaderName(name)) continue;
    // Reply-To may appear once: the structured replyTo wins over a custom one.
    if (name.toLowerCase() === "reply-to" && input.replyTo.length > 0) continue;
    if (typeof value !== "string" || /[\r\n\0]/.test(value)) throw new UnbuildableMessageError(`header ${name} contains CR, LF or NUL`);
    fields.push(unstructuredField(name, value, "verbatim"));
  }
  return fields;
}

function structure(input: MimeMessageInput, boundary: (tag: string) => string): Node {
  const html = input.html ?? "";
  const text = input.text ?? "";
  const hasHtml = html !== "";
  // An empty text next to html is an opt-out of the text part, not an empty part.
  let root: Node =
    hasHtml && text !== ""
      ? multipart("alternative", [], boundary("a"), [textLeaf("plain", text), textLeaf("html", html)])
      : hasHtml
        ? textLeaf("html", html)
        : textLeaf("plain", text);
  const inline = input.attachments.filter((a) => (a.contentId ?? "") !== "");
  const regular = input.attachments.filter((a) => (a.contentId ?? "") === "");
  if (hasHtml && inline.length > 0) {
    const rootType = root.kind === "multipart" ? "multipart/alternative" : "text/html";
    root = multipart("related", [`type="${rootType}"`], boundary("r"), [root, ...inline.map(attachmentLeaf)]);
  }
  // Without html nothing can reference an inline part: it travels with the attachments.
  const attached = hasHtml ? regular : input.attachments;
  if (attached.length > 0) root = multipart("mixed", [], boundary("m"), [root, ...attached.map(attachmentLeaf)]);
  return root;
}

function multipart(subtype: Multipart["subtype"], params: string[], boundary: string, parts: Node[]): Multipart {
  return { kind: "multipart", subtype, params, boundary, parts };
}

function textLeaf(subtype: "plain" | "html", content: string): Leaf {
  const sevenBit = isSevenBitSafe(content);
  return {
    kind: "leaf",
    headers: [
      parameterField("Content-Type", `text/${subtype}`, ["charset=utf-8"]),
      `Content-Transfer-Encoding: ${sevenBit ? "7bit" : "quoted-printable"}`,
    ],
    body: sevenBit ? { text: toCrlf(content) } : { ascii: encodeQuotedPrintableBytes(content) },
  };
}

function attachmentLeaf(a: MimeAttachment): Leaf {
  let type = parseContentType(a.contentType) ?? { type: "application/octet-stream", params: [] };
  // multipart/* and message/* may not be base64-encoded (RFC 2046 5.1, 5.2), and arbitrary
  // bytes can only travel in a 7-bit message as base64: send them as opaque bytes.
  if (/^(multipart|message)\//.test(type.type)) type = { type: "application/octet-stream", params: [] };
  const fileName = a.filename ?? "";
  const inline = (a.contentId ?? "") !== "";
  const headers = [
    parameterField("Content-Type", type.type, [...type.params, ...(fileName ? fileNameParams("name", fileName) : [])]),
    "Content-Transfer-Encoding: base64",
    parameterField("Content-Disposition", inline ? "inline" : "attachment", fileName ? fileNameParams("filename", fileName) : []),
  ];
  if (inline) {
    if (!isValidContentId(a.contentId!)) throw new UnbuildableMessageError("invalid content id");
    headers.push(`Content-ID: <${stripAngles(a.contentId!)}>`);
  }
  return { kind: "leaf", headers, body: { base64: a.content } };
}

function nodeHeaders(node: Node): string[] {
  if (node.kind === "leaf") return node.headers;
  return [parameterField("Content-Type", `multipart/${node.subtype}`, [...node.params, `boundary="${node.boundary}"`])];
}

function writeBody(node: Node, out: MessageWriter): void {
  if (node.kind === "leaf") {
    if ("text" in node.body) out.text(node.body.text);
    else if ("ascii" in node.body) out.ascii(node.body.ascii);
    else out.base64(node.body.base64);
    return;
  }
  for (const part of node.parts) {
    out.text(`--${node.boundary}${CRLF}`);
    for (const field of nodeHeaders(part)) out.text(field + CRLF);
    out.text(CRLF);
    writeBody(part, out);
    // This CRLF belongs to the delimiter that follows (RFC 2046 5.1.1), not to the part.
    out.text(CRLF);
  }
  out.text(`--${node.boundary}--`);
}

/**
 * Boundaries are "=_tern_<tag>_<16 hex>": "=_" never occurs in quoted-printable or base64,
 * and 7bit parts are only chosen when they lack it, so no part can contain a boundary; the
 * fixed length keeps any boundary from being a prefix of another.
 */
function boundaries(seed: string | undefined): (tag: string) => string {
  const id = seed === undefined ? randomHex() : seedHex(seed);
  return (tag) => `=_tern_${tag}_${id}`;
}

function randomHex(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return toHex(bytes);
}

// Two independent 32-bit FNV-1a style hashes: a stable, well-spread id for a seed.
function seedHex(seed: string): string {
  let h1 = 0x811c9dc5;
  let h2 = 0x9747b28c;
  for (const b of utf8.encode(seed)) {
    h1 = Math.imul(h1 ^ b, 0x01000193);
    h2 = Math.imul(h2 ^ b, 0x5bd1e995);
    h2 ^= h2 >>> 15;
  }
  return (h1 >>> 0).toString(16).padStart(8, "0") + (h2 >>> 0).toString(16).padStart(8, "0");
}

const DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/** RFC 5322 section 3.3 date-time in UTC: "Thu, 01 Jan 2026 09:05:00 +0000". */
function formatDate(d: Date): string {
  if (!(d instanceof Date) || Number.isNaN(d.getTime())) throw new UnbuildableMessageError("invalid date");
  const two = (n: number) => String(n).padStart(2, "0");
  return (
    `${DAYS[d.getUTCDay()]}, ${two(d.getUTCDate())} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()} ` +
    `${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())} +0000`
  );
}

function endsWithCrlf(body: Leaf["body"]): boolean {
  if ("text" in body) return body.text.endsWith(CRLF);
  if ("ascii" in body) return body.ascii.at(-2) === 13 && body.ascii.at(-1) === 10;
  return false;
}

function stripAngles(id: string): string {
  return id.startsWith("<") && id.endsWith(">") ? id.slice(1, -1) : id;
}

type BodyPart = string | { ascii: Uint8Array } | { base64: Uint8Array | ByteSource };

/** Collects the body as ASCII strings, octets and attachments, and its length; pieces() then
 * writes it out in pieces of about PIECE_BYTES each time it is read (base64 goes straight from
 * the attachment, or from its stream, into the piece). */
class MessageWriter {
  readonly parts: BodyPart[] = [];
  size = 0;

  text(s: string): void {
    this.parts.push(s);
    this.size += s.length;
  }

  ascii(bytes: Uint8Array): void {
    this.parts.push({ ascii: bytes });
    this.size += bytes.length;
  }

  base64(content: Uint8Array | ByteSource): void {
    this.parts.push({ base64: content });
    this.size += base64LinesLength(content instanceof Uint8Array ? content.length : content.size);
  }
}

/** Input octets of one base64 piece: whole 57-octet lines (76 characters), about 80 KB out. */
const BASE64_PIECE = 57 * 1024;
const BASE64_OUT = base64LinesLength(BASE64_PIECE);
/** Text and headers are gathered into pieces of about this size before they are yielded. */
const PIECE_BYTES = 64 * 1024;

/** The body's pieces. A base64 piece is written into one buffer used again for the next: a
 * piece is only valid until the next one is asked for (everything that reads a body, hashing,
 * dot-stuffing, joining, is done with a piece by then), which keeps a 40 MB message from
 * leaving 40 MB of garbage behind each time it is read. A streamed attachment is read from its
 * source here, one piece of input at a time. */
async function* pieces(parts: BodyPart[]): AsyncGenerator<Uint8Array> {
  const scratch = new Uint8Array(BASE64_OUT + 2);
  for (const piece of piecesOf(parts, scratch)) {
    if (piece instanceof Uint8Array) yield piece;
    else yield* streamedBase64(piece, scratch);
  }
}

/** One base64 piece of `input` (whole lines, CRLF between them) into `scratch`; one that is not
 * the attachment's last ends with the CRLF before the next line. */
function base64Piece(input: Uint8Array, last: boolean, scratch: Uint8Array): Uint8Array {
  const out = scratch.subarray(0, base64LinesLength(input.length) + (last ? 0 : 2));
  const end = writeBase64Lines(input, out, 0);
  if (!last) {
    out[end] = 13;
    out[end + 1] = 10;
  }
  return out;
}

/** A streamed attachment's base64 lines: the same bytes piecesOf writes for it in memory (its
 * input is cut into BASE64_PIECE octets whatever chunks the stream brings). */
async function* streamedBase64(source: ByteSource, scratch: Uint8Array): AsyncGenerator<Uint8Array> {
  const input = new Uint8Array(BASE64_PIECE);
  let filled = 0;
  let seen = 0;
  for await (const chunk of source.read()) {
    for (let at = 0; at < chunk.length; ) {
      // A full piece goes once another octet is known to follow: then it is not the last.
      if (filled === BASE64_PIECE) {
        yield base64Piece(input, false, scratch);
        filled = 0;
      }
      const n = Math.min(BASE64_PIECE - filled, chunk.length - at);
      input.set(chunk.subarray(at, at + n), filled);
      filled += n;
      at += n;
    }
    seen += chunk.length;
    if (seen > source.size) break;
  }
  if (seen !== source.size) throw new Error(`mime: an attachment read ${seen} octets, not the ${source.size} it has`);
  if (filled > 0) yield base64Piece(input.subarray(0, filled), true, scratch);
}

/** The pieces of parts whose content is in memory; a streamed attachment is handed out as its
 * source, for pieces() to read (buildMessage refuses it). */
function* piecesOf(chunks: BodyPart[], scratch: Uint8Array): Generator<Uint8Array | ByteSource> {
  let text = "";
  for (const chunk of chunks) {
    if (typeof chunk === "string") {
      text += chunk;
      if (text.length < PIECE_BYTES) continue;
    }
    if (text !== "") {
      const bytes = utf8.encode(text);
      // Every body encoding above yields ASCII; anything else is a bug here.
      if (bytes.length !== text.length) throw new Error("mime: non-ASCII output");
      text = "";
      yield bytes;
    }
    if (typeof chunk === "string") continue;
    if ("ascii" in chunk) {
      for (let i = 0; i < chunk.ascii.length; i += PIECE_BYTES) yield chunk.ascii.subarray(i, i + PIECE_BYTES);
      continue;
    }
    const bytes = chunk.base64;
    if (!(bytes instanceof Uint8Array)) {
      yield bytes;
      continue;
    }
    // Lines are separated by CRLF; a piece that is not the last ends with the CRLF before the next.
    for (let i = 0; i < bytes.length; i += BASE64_PIECE) {
      yield base64Piece(bytes.subarray(i, i + BASE64_PIECE), i + BASE64_PIECE >= bytes.length, scratch);
    }
  }
  if (text !== "") {
    const bytes = utf8.encode(text);
    if (bytes.length !== text.length) throw new Error("mime: non-ASCII output");
    yield bytes;
  }
}

// Upper bounds of what the pieces of a message take once built, so that a send can be held to
// a size before its attachments are fetched and before anything is built. They never
// undercount; they overcount headers and quoted-printable soft breaks by a little.

/** Headers of one part (Content-Type, -Transfer-Encoding, -Disposition, -ID) and the boundary
 * line before it, without the filename, which attachmentBound counts. */
const PART_OVERHEAD = 512;
/** The top-level fields tern writes whatever the input (Date, Message-ID, MIME-Version,
 * Content-Type with its boundary) and the closing boundaries. */
const MESSAGE_OVERHEAD = 1024;

/** At most the octets of one header field: an encoded word turns a UTF-8 byte into at most
 * three characters, plus its "=?UTF-8?Q?" "?=" and a fold every line. */
export function headerFieldBound(name: string, value: string): number {
  return name.length + 4 + 4 * utf8Length(value) + 16;
}

/** At most the octets a text or html part's body takes (7bit, or quoted-printable). */
export function encodedTextBound(text: string): number {
  if (isSevenBitSafe(text)) return text.length + (text.match(/\n/g)?.length ?? 0) + 2 + PART_OVERHEAD;
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // Printable ASCII but "=" goes as itself, and so do spaces and tabs but at a line's end;
    // a line break as CRLF; any other octet as "=XX".
    if (c === 32 || c === 9) {
      const next = text.charCodeAt(i + 1);
      n += Number.isNaN(next) || next === 10 || next === 13 ? 3 : 1;
    } else if (c === 10 || c === 13) n += 2;
    else if (c < 0x80) n += c >= 33 && c <= 126 && c !== 61 ? 1 : 3;
    else if (c < 0x800 || (c >= 0xd800 && c <= 0xdfff)) n += 6; // a surrogate pair: four octets
    else n += 9;
  }
  // A soft line break ("=" CRLF) at most every 73 characters.
  return n + 3 * Math.ceil(n / 73) + 2 + PART_OVERHEAD;
}

type AttachmentMeta = Pick<MimeAttachment, "filename" | "contentType" | "contentId">;

/** At most the octets an attachment of `size` bytes takes: its base64 lines and its headers. */
export function attachmentBound(size: number, meta: AttachmentMeta): number {
  // name= and filename=, percent-encoded (RFC 2231); a name not known yet (a file still to be
  // fetched) counts as the longest, 255 characters of four octets.
  const names = 8 * (meta.filename === undefined ? 255 * 4 : utf8Length(meta.filename));
  return base64LinesLength(size) + PART_OVERHEAD + names + meta.contentType.length + (meta.contentId?.length ?? 0);
}

/** The largest attachment whose attachmentBound fits `room` (0 when none does). */
export function largestAttachmentWithin(room: number, meta: AttachmentMeta): number {
  const forBase64 = room - attachmentBound(0, meta);
  if (forBase64 <= 0) return 0;
  // 57 octets make one 76-character line and its CRLF (78 octets).
  let n = Math.floor(forBase64 / 78) * 57 + Math.floor(((forBase64 % 78) / 4)) * 3;
  while (base64LinesLength(n + 1) <= forBase64) n++;
  while (n > 0 && base64LinesLength(n) > forBase64) n--;
  return n;
}

/** At most the octets of the message without its attachments. */
export function messageBaseBound(input: Pick<MimeMessageInput, "subject" | "headers"> & { html: string | null; text: string | null; addresses: string[] }): number {
  let n = MESSAGE_OVERHEAD + headerFieldBound("Subject", input.subject);
  for (const a of input.addresses) n += headerFieldBound("To", a);
  for (const [name, value] of Object.entries(input.headers)) n += headerFieldBound(name, value);
  if (input.html) n += encodedTextBound(input.html);
  if (input.text) n += encodedTextBound(input.text);
  return n;
}

function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    n += c < 0x80 ? 1 : c < 0x800 || (c >= 0xd800 && c <= 0xdfff) ? 2 : 3; // a surrogate pair: 2 + 2
  }
  return n;
}
