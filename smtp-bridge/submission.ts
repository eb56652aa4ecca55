// One SMTP message becomes one `POST /emails` (contract section 7): the header fields map to
// the request's fields, envelope recipients missing from To and Cc become bcc, X-Tern-Tags
// become tags, an idempotency header becomes the Idempotency-Key, and every other header the
// API does not build itself passes through. The JSON body is produced in pieces: attachments
// are base64-encoded while the request is written, never as one big string.
import { oneLine } from "./header-text.ts";
import type { Envelope } from "./message.ts";
import type { RawStore } from "./raw.ts";
import { base64TextOf, partBytes, type MemoryPool } from "./spool.ts";
import { isTraceHeaderName } from "./trace-headers.ts";

export interface Mailbox {
  name: string;
  address: string;
}

export interface MessagePart {
  filename?: string;
  contentType: string;
  /** Without angle brackets; set when the part is shown inline (cid: references). */
  contentId?: string;
  /** Decoded content in memory, or (when large) the spool file that holds it. */
  chunks: Buffer[];
  /** The spool's memory that counts `chunks` (discardParts gives their bytes back). */
  pool?: MemoryPool;
  file?: string;
  /** Or: the range of the raw message that holds its body (multipart.ts), either its bytes as
   * they are, or canonical base64 lines (`base64Length` characters once their line breaks go). */
  raw?: { store: RawStore; start: number; end: number; base64Length: number | null };
  /** Decoded bytes. */
  size: number;
}

/** What the bridge keeps of a parsed message (see message.ts). */
export interface ParsedMessage {
  /** Raw header lines of the top-level header, in order: key is the lower-cased name. */
  headerLines: { key: string; line: string }[];
  from: Mailbox[];
  to: Mailbox[];
  cc: Mailbox[];
  replyTo: Mailbox[];
  subject: string | undefined;
  html: string | undefined;
  text: string | undefined;
  attachments: MessagePart[];
}

/** The small fields of the request; html, text and attachments are streamed by {@link requestBody}. */
export interface SendFields {
  from: string;
  to: string[];
  cc?: string[];
  bcc?: string[];
  reply_to?: string[];
  subject?: string;
  headers?: Record<string, string>;
  tags?: { name: string; value: string }[];
}

export interface Submission {
  fields: SendFields;
  html: string | undefined;
  text: string | undefined;
  attachments: MessagePart[];
  idempotencyKey: string | undefined;
}

// Header fields the API writes itself (worker/mime/build.ts refuses these names in `headers`),
// Reply-To (it is `reply_to`) and the bridge's own control headers. Trace and verdict fields
// (trace-headers.ts, the API refuses them) belong to the hop they were written on: dropped.
const NOT_PASSED = new Set([
  "from", "to", "cc", "bcc", "subject", "date", "message-id", "mime-version", "content-type",
  "content-transfer-encoding", "content-disposition", "content-id", "dkim-signature", "sender",
  "return-path", "reply-to",
  "x-tern-tags", "tern-idempotency-key", "resend-idempotency-key",
]);

/** True for a header name the bridge does not pass through as a custom header. */
export function isHeaderNotPassed(name: string): boolean {
  const n = name.toLowerCase();
  return NOT_PASSED.has(n) || n.startsWith("content-") || isTraceHeaderName(n);
}

/** `Name <a@b.c>` the way the API parses it: quoted when the name has specials. */
export function formatMailbox(m: Mailbox): string {
  const name = m.name.replace(/[\u0000-\u001f\u007f-\u009f]+/g, " ").trim();
  if (!name) return m.address;
  if (!/[<>",;:\\]/.test(name)) return `${name} <${m.address}>`;
  return `"${name.replace(/(["\\])/g, "\\$1")}" <${m.address}>`;
}

/** A header line as written, unfolded: the value after the colon with folds removed. */
export function headerValue(line: string): string {
  const colon = line.indexOf(":");
  return line.slice(colon + 1).replace(/\r?\n(?=[ \t])/g, "").replace(/^[ \t]+|[ \t\r\n]+$/g, "");
}

/** `X-Tern-Tags: name=value, name2=value2`. An entry without `=` is a tag with an empty
 * value, which the API refuses with its own message. */
export function parseTags(values: string[]): { name: string; value: string }[] {
  const tags: { name: string; value: string }[] = [];
  for (const v of values) {
    for (const entry of v.split(",")) {
      const e = entry.trim();
      if (!e) continue;
      const eq = e.indexOf("=");
      tags.push(eq < 0 ? { name: e, value: "" } : { name: e.slice(0, eq).trim(), value: e.slice(eq + 1).trim() });
    }
  }
  return tags;
}

export function toSubmission(message: ParsedMessage, envelope: Envelope): Submission {
  const headers: Record<string, string> = {};
  const lower = new Set<string>();
  const tagValues: string[] = [];
  let ternKey: string | undefined;
  let resendKey: string | undefined;
  for (const { key, line } of message.headerLines) {
    const value = headerValue(line);
    if (key === "x-tern-tags") tagValues.push(value);
    else if (key === "tern-idempotency-key") ternKey ??= value;
    else if (key === "resend-idempotency-key") resendKey ??= value;
    if (isHeaderNotPassed(key) || lower.has(key)) continue; // a repeated custom field: the first one wins
    lower.add(key);
    headers[line.slice(0, line.indexOf(":")).trim()] = value;
  }

  const from = message.from[0] ?? (envelope.mailFrom ? { name: "", address: envelope.mailFrom } : undefined);
  const to = message.to.map(formatMailbox);
  const cc = message.cc.map(formatMailbox);
  const visible = new Set([...message.to, ...message.cc].map((m) => m.address.toLowerCase()));
  const bcc: string[] = [];
  for (const rcpt of envelope.rcptTo) {
    const a = rcpt.toLowerCase();
    if (!visible.has(a)) {
      visible.add(a);
      bcc.push(rcpt);
    }
  }
  const fields: SendFields = { from: from ? formatMailbox(from) : "", to };
  if (cc.length) fields.cc = cc;
  if (bcc.length) fields.bcc = bcc;
  if (message.replyTo.length) fields.reply_to = message.replyTo.map(formatMailbox);
  // Decoded, a subject or filename may hold line breaks and control characters: the API would
  // refuse the send for some (422) and keep the others, so each goes as one line of text.
  if (message.subject !== undefined) fields.subject = oneLine(message.subject);
  if (Object.keys(headers).length) fields.headers = headers;
  const tags = parseTags(tagValues);
  if (tags.length) fields.tags = tags;
  return {
    fields,
    html: message.html || undefined,
    // The parser reports an html-only message as text "": absent, so the API derives the text as it does for REST.
    text: message.text || (message.html ? undefined : message.text),
    attachments: message.attachments.map((a) => (a.filename === undefined ? a : { ...a, filename: oneLine(a.filename) })),
    idempotencyKey: ternKey ?? resendKey,
  };
}

// ---------------------------------------------------------------------------------------
// The request body, streamed.

const STRING_SLICE = 256 * 1024; // characters of html/text escaped at a time
const BASE64_GROUP = 48 * 1024; // bytes encoded at a time (a multiple of 3)

function* escapedSlices(s: string): Generator<string> {
  for (let i = 0; i < s.length; ) {
    let end = Math.min(s.length, i + STRING_SLICE);
    // Keep surrogate pairs whole, so every slice escapes exactly as the whole string would.
    if (end < s.length && /[\ud800-\udbff]/.test(s[end - 1]!)) end--;
    yield JSON.stringify(s.slice(i, end)).slice(1, -1);
    i = end;
  }
}

/** Base64 text of a part, in pieces (strings: they go to the socket without another buffer). */
async function* base64Of(part: MessagePart): AsyncGenerator<string | Buffer> {
  if (part.raw && part.raw.base64Length !== null) {
    yield* base64TextOf(part.raw);
    return;
  }
  let carry: Buffer = Buffer.alloc(0);
  for await (const chunk of partBytes(part)) {
    for (let at = 0; at < chunk.length; ) {
      const take = Math.min(chunk.length - at, BASE64_GROUP - carry.length);
      const piece = carry.length ? Buffer.concat([carry, chunk.subarray(at, at + take)]) : chunk.subarray(at, at + take);
      at += take;
      const whole = piece.length - (piece.length % 3);
      if (whole) yield piece.subarray(0, whole).toString("base64");
      carry = Buffer.from(piece.subarray(whole));
    }
  }
  if (carry.length) yield carry.toString("base64");
}

/** A piece of the body: JSON text; html or text, escaped once and kept (when that comes to at
 * most ESCAPE_ONCE_CHARS) or escaped slice by slice each time it is read (larger: for the
 * length, then for the request, so that it is never held twice); or a part's bytes to encode. */
type Piece = { small: string } | { escaped: string[] } | { big: string } | { part: MessagePart };
const ESCAPE_ONCE_CHARS = 1024 * 1024;

/** The escaped slices of `value`, when they come to at most ESCAPE_ONCE_CHARS (escaping can
 * make a string up to six times longer: \u0001); null for a value that has to be escaped as
 * it is written. */
function escapedOnce(value: string): { escaped: string[] } | null {
  if (value.length > ESCAPE_ONCE_CHARS) return null;
  const escaped = [...escapedSlices(value)];
  let chars = 0;
  for (const slice of escaped) chars += slice.length;
  return chars <= ESCAPE_ONCE_CHARS ? { escaped } : null;
}

function pieces(s: Submission): Piece[] {
  const head = JSON.stringify(s.fields);
  const out: Piece[] = [{ small: head.slice(0, -1) }];
  for (const [name, value] of [["html", s.html], ["text", s.text]] as const) {
    if (value === undefined) continue;
    out.push({ small: `,"${name}":"` }, escapedOnce(value) ?? { big: value }, { small: '"' });
  }
  if (s.attachments.length) {
    out.push({ small: ',"attachments":[' });
    s.attachments.forEach((a, i) => {
      const meta: Record<string, string> = { content_type: a.contentType };
      if (a.filename) meta.filename = a.filename;
      if (a.contentId) meta.content_id = a.contentId;
      out.push({ small: `${i ? "," : ""}${JSON.stringify(meta).slice(0, -1)},"content":"` }, { part: a }, { small: '"}' });
    });
    out.push({ small: "]" });
  }
  out.push({ small: "}" });
  return out;
}

export interface RequestBody {
  /** Bytes in all: the Content-Length. */
  length: number;
  /** The body, in pieces of at most a few hundred KB (UTF-8 strings or bytes); may be called
   * again (a retry). A buffer piece is lent: its bytes may change once the next piece is asked
   * for (a socket's write must have completed), so keep a copy to hold on to it. */
  chunks(): AsyncGenerator<string | Buffer>;
}

export function requestBody(s: Submission): RequestBody {
  const list = pieces(s);
  let length = 0;
  for (const p of list) {
    if ("small" in p) length += Buffer.byteLength(p.small);
    else if ("escaped" in p) for (const slice of p.escaped) length += Buffer.byteLength(slice);
    else if ("big" in p) for (const slice of escapedSlices(p.big)) length += Buffer.byteLength(slice);
    else length += p.part.raw?.base64Length ?? 4 * Math.ceil(p.part.size / 3);
  }
  return {
    length,
    async *chunks() {
      for (const p of list) {
        if ("small" in p) yield p.small;
        else if ("escaped" in p) yield* p.escaped;
        else if ("big" in p) yield* escapedSlices(p.big);
        else yield* base64Of(p.part);
      }
    },
  };
}
