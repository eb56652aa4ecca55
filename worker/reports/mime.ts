// A MIME reader for the reports that come back to the return path: headers, the multipart
// tree, transfer encodings and charsets, and no more. It never throws and bounds its work
// (depth, parts, header lines), because what arrives here is written by strangers. A report's
// machine-readable part comes before the returned message, so reading a prefix of a huge
// report loses nothing that matters; a missing closing boundary just ends the last part.
//
// Text is handled as a "binary string" (one char per byte) until a part is decoded, so
// boundaries and offsets never depend on a charset.

export interface HeaderField {
  /** Lower-cased field name. */
  name: string;
  /** Unfolded value, trimmed. */
  value: string;
}

export interface MimePart {
  headers: HeaderField[];
  /** Lower-cased `type/subtype`; text/plain when absent or unreadable. */
  type: string;
  /** Lower-cased parameter names. */
  params: Record<string, string>;
  /** The body, still transfer-encoded, as a binary string with LF line ends. */
  body: string;
  /** The parts of a multipart body; empty otherwise. */
  children: MimePart[];
}

export const MAX_DEPTH = 8;
export const MAX_PARTS = 64;
const MAX_HEADER_FIELDS = 500;

/** Bytes as a binary string, one char per byte (never through a charset). */
export function binaryString(bytes: Uint8Array): string {
  let out = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    out += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return out;
}

function bytesOf(binary: string): Uint8Array {
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i) & 0xff;
  return out;
}

/** The message as a tree of parts. `raw` is a binary string (see binaryString). */
export function parseMessage(raw: string): MimePart {
  const counter = { parts: 0 };
  return parsePart(raw.replace(/\r\n?/g, "\n"), 0, counter, "text/plain");
}

function parsePart(text: string, depth: number, counter: { parts: number }, defaultType: string): MimePart {
  counter.parts++;
  const { headers, body } = splitHeaders(text);
  const contentType = parseContentTypeValue(headerValue(headers, "content-type") ?? "") ?? { type: defaultType, params: {} };
  const part: MimePart = { headers, type: contentType.type, params: contentType.params, body, children: [] };
  const boundary = contentType.params.boundary;
  if (contentType.type.startsWith("multipart/") && boundary && depth < MAX_DEPTH) {
    const childDefault = contentType.type === "multipart/digest" ? "message/rfc822" : "text/plain";
    for (const chunk of splitMultipart(body, boundary)) {
      if (counter.parts >= MAX_PARTS) break;
      part.children.push(parsePart(chunk, depth + 1, counter, childDefault));
    }
  }
  return part;
}

/** Header fields and body of an entity (text with LF line ends). A text without a blank line is all headers. */
export function splitHeaders(text: string): { headers: HeaderField[]; body: string } {
  let end = text.indexOf("\n\n");
  let bodyStart = end + 2;
  if (text.startsWith("\n")) {
    end = 0;
    bodyStart = 1;
  } else if (end === -1) {
    end = text.length;
    bodyStart = text.length;
  }
  return { headers: parseHeaderBlock(text.slice(0, end)), body: text.slice(bodyStart) };
}

/** Fields of a header block; lines that are not fields (an mbox "From " line, junk) are skipped. */
export function parseHeaderBlock(block: string): HeaderField[] {
  const fields: HeaderField[] = [];
  let current: { name: string; value: string } | null = null;
  const flush = () => {
    if (current) fields.push({ name: current.name, value: current.value.replace(/\s+/g, " ").trim() });
    current = null;
  };
  for (const line of block.replace(/\r\n?/g, "\n").split("\n")) {
    if ((line.startsWith(" ") || line.startsWith("\t")) && current) {
      current.value += ` ${line.trim()}`;
      continue;
    }
    flush();
    if (fields.length >= MAX_HEADER_FIELDS) break;
    const m = /^([!-9;-~]+)[ \t]*:(.*)$/.exec(line);
    if (m) current = { name: m[1]!.toLowerCase(), value: m[2]! };
  }
  flush();
  return fields;
}

export function headerValue(headers: readonly HeaderField[], name: string): string | undefined {
  return headers.find((h) => h.name === name)?.value;
}

export function headerValues(headers: readonly HeaderField[], name: string): string[] {
  return headers.filter((h) => h.name === name).map((h) => h.value);
}

/** `type/subtype; key=value; key="quoted value"` (RFC 2045), lenient about spacing; null when there is no media type. */
export function parseContentTypeValue(value: string): { type: string; params: Record<string, string> } | null {
  const m = /^\s*([!#$%&'*+\-.^_`|~0-9A-Za-z]+)\s*\/\s*([!#$%&'*+\-.^_`|~0-9A-Za-z]+)\s*(.*)$/s.exec(value);
  if (!m) return null;
  const params: Record<string, string> = {};
  const rest = m[3]!;
  const param = /;\s*([!#$%&'*+\-.^_`|~0-9A-Za-z]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]*))/gs;
  for (let p = param.exec(rest); p !== null; p = param.exec(rest)) {
    const key = p[1]!.toLowerCase();
    if (!(key in params)) params[key] = p[2] !== undefined ? p[2].replace(/\\(.)/gs, "$1") : p[3]!;
  }
  return { type: `${m[1]}/${m[2]}`.toLowerCase(), params };
}

/** The bodies between the boundary lines; a missing close delimiter ends the last part at the end of the text. */
function splitMultipart(body: string, boundary: string): string[] {
  const delimiter = `--${boundary}`;
  const chunks: string[] = [];
  let start = -1;
  for (let lineStart = 0; lineStart <= body.length; ) {
    let lineEnd = body.indexOf("\n", lineStart);
    if (lineEnd === -1) lineEnd = body.length;
    if (body.startsWith(delimiter, lineStart)) {
      // A delimiter line may end in whitespace; "--boundaryX" is another boundary, not ours.
      const rest = body.slice(lineStart + delimiter.length, lineEnd);
      const closing = rest.startsWith("--");
      if (closing || rest.trim() === "") {
        // The line break before a delimiter belongs to the delimiter.
        if (start !== -1) chunks.push(body.slice(start, Math.max(start, lineStart - 1)));
        if (closing) return chunks;
        start = lineEnd + 1;
      }
    }
    lineStart = lineEnd + 1;
  }
  if (start !== -1) chunks.push(body.slice(start));
  return chunks;
}

/** The body with its Content-Transfer-Encoding undone, still as a binary string. */
export function decodedBody(part: MimePart): string {
  const encoding = (headerValue(part.headers, "content-transfer-encoding") ?? "").toLowerCase().trim();
  if (encoding === "base64") {
    const clean = part.body.replace(/[^A-Za-z0-9+/]/g, "");
    const usable = clean.slice(0, clean.length - (clean.length % 4 === 1 ? 1 : 0));
    try {
      return atob(usable.padEnd(Math.ceil(usable.length / 4) * 4, "="));
    } catch {
      return "";
    }
  }
  if (encoding === "quoted-printable") {
    return part.body.replace(/[ \t]+$/gm, "").replace(/=\n/g, "").replace(/=([0-9A-Fa-f]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  }
  return part.body;
}

/** The body as text: transfer encoding undone, then the charset (UTF-8 when unknown or unreadable). */
export function partText(part: MimePart): string {
  const bytes = bytesOf(decodedBody(part));
  const charset = (part.params.charset ?? "utf-8").toLowerCase();
  try {
    return new TextDecoder(charset === "us-ascii" || charset === "ascii" ? "utf-8" : charset, { fatal: false, ignoreBOM: false }).decode(bytes);
  } catch {
    return new TextDecoder("utf-8", { fatal: false, ignoreBOM: false }).decode(bytes);
  }
}

/** Every part of the tree, depth first, the root included. */
export function allParts(root: MimePart): MimePart[] {
  const out: MimePart[] = [];
  const walk = (p: MimePart) => {
    out.push(p);
    for (const c of p.children) walk(c);
  };
  walk(root);
  return out;
}
