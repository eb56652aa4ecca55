// Transfer and header encodings (RFC 2045, 2047, 2231, 5322). Every function returns 7-bit
// ASCII with CRLF line breaks; no line it produces is longer than 78 characters unless the
// caller hands it a single unbreakable token, and none is ever longer than 998.

/** RFC 5322 section 2.1.1: lines SHOULD be at most 78 characters. */
export const LINE_SOFT_LIMIT = 78;
/** RFC 5322 section 2.1.1: lines MUST be at most 998 characters. */
export const LINE_HARD_LIMIT = 998;
/** RFC 2047 section 2: an encoded-word is at most 75 characters. */
export const ENCODED_WORD_MAX = 75;

const CRLF = "\r\n";
const HEX = "0123456789ABCDEF";
const utf8 = new TextEncoder();

// --- RFC 2047 encoded-words -----------------------------------------------------------------

// Characters that may stay literal in a Q-encoded word in every context, phrases included
// (RFC 2047 section 5 (3)); everything else is =XX, and a space is "_".
const Q_SAFE = /[A-Za-z0-9!*+\-/]/;
const Q_PREFIX = "=?UTF-8?Q?";
const B_PREFIX = "=?UTF-8?B?";
const WORD_OVERHEAD = Q_PREFIX.length + 2; // the prefix and the closing "?="
// A room that always fits one character: a 4-byte UTF-8 character is 12 Q characters.
const MIN_WORD_ROOM = WORD_OVERHEAD + 12;

/**
 * Encodes text as RFC 2047 encoded-words (UTF-8, Q or B, whichever is shorter). The first
 * word is at most `firstRoom` characters, the others at most `room` (both capped at 75). A
 * word never splits a character, so each word decodes on its own. Decoders join adjacent
 * encoded-words and drop the whitespace between them, so the words carry every space.
 */
export function encodeWords(text: string, firstRoom: number, room: number = ENCODED_WORD_MAX): string[] {
  room = Math.min(room, ENCODED_WORD_MAX);
  firstRoom = Math.min(firstRoom, room);
  if (room < MIN_WORD_ROOM || firstRoom < MIN_WORD_ROOM) throw new RangeError("no room for an encoded-word");
  const chars = Array.from(text, (c) => utf8.encode(c));
  let qLength = 0;
  let byteLength = 0;
  for (const bytes of chars) {
    byteLength += bytes.length;
    for (const b of bytes) qLength += b === 0x20 || Q_SAFE.test(String.fromCharCode(b)) ? 1 : 3;
  }
  const useB = Math.ceil(byteLength / 3) * 4 < qLength;
  const words: string[] = [];
  let limit = firstRoom - WORD_OVERHEAD;
  let pending: number[] = [];
  let pendingLength = 0;
  const flush = () => {
    words.push(useB ? B_PREFIX + base64(Uint8Array.from(pending)) + "?=" : Q_PREFIX + qEncode(pending) + "?=");
    pending = [];
    pendingLength = 0;
    limit = room - WORD_OVERHEAD;
  };
  for (const bytes of chars) {
    const next = useB ? Math.ceil((pending.length + bytes.length) / 3) * 4 : pendingLength + qEncode(bytes).length;
    if (next > limit && pending.length > 0) flush();
    pending.push(...bytes);
    pendingLength = useB ? 0 : pendingLength + qEncode(bytes).length;
  }
  if (pending.length > 0 || words.length === 0) flush();
  return words;
}

function qEncode(bytes: ArrayLike<number>): string {
  let out = "";
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    const c = String.fromCharCode(b);
    if (b === 0x20) out += "_";
    else if (Q_SAFE.test(c)) out += c;
    else out += "=" + HEX[b >> 4] + HEX[b & 15];
  }
  return out;
}

// --- Header fields --------------------------------------------------------------------------

const PRINTABLE_ASCII = /^[\x20-\x7e\t]*$/;

/** How an unstructured value that is plain ASCII is treated. */
export type UnstructuredMode =
  /** Text that tern owns (Subject): encoded-words whenever the plain form cannot keep every
   * line within 78 characters, or when it contains "=?" (so it reads back literally). */
  | "text"
  /** A caller's header, possibly structured (List-Unsubscribe, References): plain ASCII is
   * written as given, folded at whitespace; encoded only if a line would pass 998. */
  | "verbatim";

/**
 * A complete header field `Name: value` for an unstructured value, folded with CRLF + space,
 * without the final CRLF. Non-ASCII or control characters make RFC 2047 encoded-words.
 */
export function unstructuredField(name: string, value: string, mode: UnstructuredMode): string {
  if (PRINTABLE_ASCII.test(value) && !(mode === "text" && value.includes("=?"))) {
    const lines = foldAtWhitespace(`${name}:`, value);
    const limit = mode === "text" ? LINE_SOFT_LIMIT : LINE_HARD_LIMIT;
    if (lines.every((l) => l.length <= limit)) return lines.join(CRLF);
  }
  return encodedField(name, value);
}

function encodedField(name: string, value: string): string {
  if (value === "") return `${name}:`;
  const firstRoom = LINE_SOFT_LIMIT - name.length - 2;
  if (firstRoom < MIN_WORD_ROOM) {
    // A long field name: the value starts on the next line (FWS may begin with CRLF).
    return [`${name}:`, ...encodeWords(value, ENCODED_WORD_MAX).map((w) => " " + w)].join(CRLF);
  }
  const words = encodeWords(value, firstRoom);
  return `${name}: ${words[0]}` + words.slice(1).map((w) => CRLF + " " + w).join("");
}

/**
 * Folds `head` + " " + value before whitespace so lines stay within 78 where the value
 * allows. Unfolding (removing each CRLF) gives back `head + " " + value` exactly; a
 * continuation line always holds more than whitespace.
 */
function foldAtWhitespace(head: string, value: string): string[] {
  if (value === "") return [head];
  const tokens = value.match(/[ \t]*[^ \t]+|[ \t]+$/g) ?? [];
  const lines: string[] = [];
  let line = `${head} ${tokens[0] ?? ""}`;
  for (const token of tokens.slice(1)) {
    const whitespaceOnly = !/[^ \t]/.test(token);
    if (line.length + token.length <= LINE_SOFT_LIMIT || whitespaceOnly) {
      line += token;
    } else {
      lines.push(line);
      line = token;
    }
  }
  lines.push(line);
  return lines;
}

/**
 * A header field whose value is a list of items separated by ", " (address lists). Each
 * item is a list of tokens separated by single spaces; the field folds between tokens,
 * preferably after a comma, never inside a token.
 */
export function listField(name: string, items: string[][]): string {
  const lines: string[] = [];
  let line = `${name}:`;
  let empty = true;
  items.forEach((tokens, i) => {
    tokens.forEach((token, j) => {
      const text = j === tokens.length - 1 && i < items.length - 1 ? token + "," : token;
      // Move a whole item to a new line rather than splitting it, when that helps.
      const itemRest = j === 0 ? tokens.join(" ").length + 1 : text.length;
      if (!empty && line.length + 1 + Math.min(itemRest, LINE_SOFT_LIMIT) > LINE_SOFT_LIMIT) {
        lines.push(line);
        line = " " + text;
      } else {
        line += " " + text;
      }
      empty = false;
    });
  });
  lines.push(line);
  return lines.join(CRLF);
}

/**
 * A structured field `Name: first; p1; p2` (Content-Type, Content-Disposition), folded
 * before a parameter when the line would pass 78 characters.
 */
export function parameterField(name: string, first: string, params: string[]): string {
  const lines: string[] = [];
  let line = `${name}: ${first}`;
  params.forEach((p, i) => {
    const reserve = i < params.length - 1 ? 1 : 0; // room for the ";" a later fold adds
    if (line.length + 2 + p.length + reserve <= LINE_SOFT_LIMIT) {
      line += "; " + p;
    } else {
      lines.push(line + ";");
      line = " " + p;
    }
  });
  lines.push(line);
  return lines.join(CRLF);
}

/** A quoted-string (RFC 5322 section 3.2.4) for printable ASCII. */
export function quoteString(s: string): string {
  return `"${s.replace(/["\\]/g, "\\$&")}"`;
}

// --- RFC 2231 parameters (attachment file names) --------------------------------------------

// RFC 2231 attribute-char, minus "'" "%" "*" which have a meaning in extended values.
const ATTR_CHAR = /[A-Za-z0-9!#$&+\-.^_`|~]/;
// " " + `key="value"` + ";" within 78 characters.
const PARAM_MAX = LINE_SOFT_LIMIT - 2;

/**
 * Parameters that carry a file name (`filename` for Content-Disposition, `name` for
 * Content-Type). Printable ASCII that fits a line: `filename="x.pdf"`. Otherwise an ASCII
 * fallback `filename="..."` for old readers plus the exact name as RFC 2231 UTF-8
 * (`filename*=UTF-8''...`, split into `filename*0*=`, `filename*1*=`... when long; every
 * section decodes on its own: no character is split).
 */
export function fileNameParams(key: string, fileName: string): string[] {
  const plain = `${key}=${quoteString(fileName)}`;
  if (/^[\x20-\x7e]*$/.test(fileName) && plain.length <= PARAM_MAX) return [plain];
  const fallback = `${key}=${quoteString(asciiFallbackName(fileName, PARAM_MAX - key.length - 3))}`;
  const encoded = Array.from(fileName, (c) => percentEncode(utf8.encode(c)));
  const single = `${key}*=UTF-8''${encoded.join("")}`;
  if (single.length <= PARAM_MAX) return [fallback, single];
  const sections: string[] = [];
  let value = "UTF-8''";
  for (const piece of encoded) {
    const head = `${key}*${sections.length}*=`;
    if (head.length + value.length + piece.length > PARAM_MAX && value !== "" && value !== "UTF-8''") {
      sections.push(head + value);
      value = "";
    }
    value += piece;
  }
  sections.push(`${key}*${sections.length}*=${value}`);
  return [fallback, ...sections];
}

function percentEncode(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) {
    const c = String.fromCharCode(b);
    out += b < 0x80 && ATTR_CHAR.test(c) ? c : "%" + HEX[b >> 4] + HEX[b & 15];
  }
  return out;
}

/**
 * A printable-ASCII stand-in for a file name: accents dropped ("résumé" -> "resume"),
 * other characters and path separators replaced by "_", the extension kept, at most
 * `max` characters.
 */
export function asciiFallbackName(fileName: string, max = 60): string {
  let s = fileName
    .normalize("NFKD")
    .replace(/\p{M}/gu, "")
    .replace(/[^\x20-\x7e]|[/\\"]/gu, "_");
  const dot = s.lastIndexOf(".");
  let ext = dot > 0 && s.length - dot <= 10 ? s.slice(dot) : "";
  let stem = ext ? s.slice(0, dot) : s;
  if (!/[A-Za-z0-9]/.test(stem)) stem = "attachment";
  if (ext.length > max / 2) ext = "";
  s = stem.slice(0, Math.max(1, max - ext.length)) + ext;
  return s;
}

// --- Content-Type ---------------------------------------------------------------------------

const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const MEDIA_TYPE = new RegExp(`^(${TOKEN})/(${TOKEN})$`);
const PARAMETER = new RegExp(`^(${TOKEN})=(${TOKEN}|"(?:[\\x20\\x21\\x23-\\x5b\\x5d-\\x7e]|\\\\[\\x20-\\x7e])*")$`);

/**
 * Checks a caller's content type (`type/subtype` with optional `; key=value` parameters)
 * and returns it normalized: type lower-cased, parameters kept except `name` (tern writes
 * its own), each parameter a separate string. Null when it is not a valid media type.
 */
export function parseContentType(contentType: string): { type: string; params: string[] } | null {
  if (typeof contentType !== "string" || contentType.length > 255) return null;
  const [head = "", ...rest] = contentType.split(";");
  const m = MEDIA_TYPE.exec(head.trim());
  if (!m) return null;
  const params: string[] = [];
  for (const [i, raw] of rest.entries()) {
    const p = raw.trim();
    if (p === "" && i === rest.length - 1) continue; // a trailing ";"
    const pm = PARAMETER.exec(p);
    if (!pm) return null;
    const key = pm[1]!.toLowerCase();
    if (key === "name" || key.startsWith("name*")) continue;
    params.push(`${key}=${pm[2]}`);
  }
  return { type: `${m[1]}/${m[2]}`.toLowerCase(), params };
}

// --- Body transfer encodings ----------------------------------------------------------------

const QP_LINE_MAX = 76;
const HEX_CODES = Uint8Array.from(HEX, (c) => c.charCodeAt(0));

/**
 * Quoted-printable (RFC 2045 section 6.7) of the UTF-8 text. Line breaks (CRLF, LF or a lone
 * CR) become CRLF hard breaks; encoded lines are at most 76 characters with "=" soft breaks;
 * whitespace before a line break, "=", controls and non-ASCII are =XX. A line beginning
 * with "." stays as it is: the SMTP transport dot-stuffs.
 */
export function encodeQuotedPrintable(text: string): string {
  return new TextDecoder().decode(encodeQuotedPrintableBytes(text));
}

/** {@link encodeQuotedPrintable} as ASCII octets, written without intermediate strings
 * (a 10 MB html body encodes in tens of milliseconds). */
export function encodeQuotedPrintableBytes(text: string): Uint8Array {
  const bytes = utf8.encode(text);
  const n = bytes.length;
  let out = new Uint8Array(Math.max(64, n + (n >> 3)));
  let o = 0;
  let col = 0;
  for (let i = 0; i < n; i++) {
    // Room for the longest step: a soft break (3) and an escape (3).
    if (o + 6 > out.length) {
      const grown = new Uint8Array(out.length + (out.length >> 1) + 64);
      grown.set(out.subarray(0, o));
      out = grown;
    }
    const b = bytes[i]!;
    if (b === 13 || b === 10) {
      if (b === 13 && bytes[i + 1] === 10) i++;
      out[o++] = 13;
      out[o++] = 10;
      col = 0;
      continue;
    }
    const next = bytes[i + 1];
    const last = next === undefined || next === 13 || next === 10;
    const literal = (b >= 33 && b <= 126 && b !== 61) || ((b === 32 || b === 9) && !last);
    const width = literal ? 1 : 3;
    // A soft break costs one "=" at the end of the line; the final token needs no room for it.
    if (col + width > (last ? QP_LINE_MAX : QP_LINE_MAX - 1)) {
      out[o++] = 61;
      out[o++] = 13;
      out[o++] = 10;
      col = 0;
    }
    if (literal) {
      out[o++] = b;
    } else {
      out[o++] = 61;
      out[o++] = HEX_CODES[b >> 4]!;
      out[o++] = HEX_CODES[b & 15]!;
    }
    col += width;
  }
  return out.subarray(0, o);
}

/**
 * True when the text can go as `7bit` unchanged: printable ASCII (and tabs), every line at
 * most 78 characters, no whitespace at a line end (transports may strip it), and no "=_"
 * (tern's boundaries begin with it, and quoted-printable and base64 can never contain it).
 */
export function isSevenBitSafe(text: string): boolean {
  if (!/^[\x20-\x7e\t\r\n]*$/.test(text) || text.includes("=_")) return false;
  for (const line of text.split(/\r\n|\r|\n/)) {
    if (line.length > LINE_SOFT_LIMIT || /[ \t]$/.test(line)) return false;
  }
  return true;
}

/** Text with every line break (CRLF, LF, lone CR) as CRLF. */
export function toCrlf(text: string): string {
  return text.replace(/\r\n|\r|\n/g, CRLF);
}

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64_CODES = Uint8Array.from(B64, (c) => c.charCodeAt(0));
const B64_LINE = 76;

/** Length in octets of {@link writeBase64Lines}'s output for `n` input octets. */
export function base64LinesLength(n: number): number {
  const chars = Math.ceil(n / 3) * 4;
  return chars + 2 * Math.max(0, Math.ceil(chars / B64_LINE) - 1);
}

/**
 * Writes base64 (RFC 2045 section 6.8) of `bytes` into `out` at `offset`: 76-character
 * lines separated by CRLF, no CRLF after the last line. Returns the offset after it.
 * Writing octets directly keeps a 30 MB attachment from becoming several 40 MB strings.
 */
export function writeBase64Lines(bytes: Uint8Array, out: Uint8Array, offset: number): number {
  let o = offset;
  let col = 0;
  const put = (c: number) => {
    if (col === B64_LINE) {
      out[o++] = 13;
      out[o++] = 10;
      col = 0;
    }
    out[o++] = c;
    col++;
  };
  const n = bytes.length;
  let i = 0;
  for (; i + 2 < n; i += 3) {
    const v = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    put(B64_CODES[v >> 18]!);
    put(B64_CODES[(v >> 12) & 63]!);
    put(B64_CODES[(v >> 6) & 63]!);
    put(B64_CODES[v & 63]!);
  }
  if (i < n) {
    const v = (bytes[i]! << 16) | ((i + 1 < n ? bytes[i + 1]! : 0) << 8);
    put(B64_CODES[v >> 18]!);
    put(B64_CODES[(v >> 12) & 63]!);
    put(i + 1 < n ? B64_CODES[(v >> 6) & 63]! : 61);
    put(61);
  }
  return o;
}

/** Base64 in 76-character lines joined by CRLF, as a string (for small payloads). */
export function encodeBase64Lines(bytes: Uint8Array): string {
  const out = new Uint8Array(base64LinesLength(bytes.length));
  writeBase64Lines(bytes, out, 0);
  return new TextDecoder().decode(out);
}

function base64(bytes: Uint8Array): string {
  return encodeBase64Lines(bytes).replace(/\r\n/g, "");
}
