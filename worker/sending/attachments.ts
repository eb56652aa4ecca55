// Attachments (contract 4.1): bytes given inline (`content`) or fetched from an https URL
// (`path`), with their filename, content type and Content-ID checked and normalised.
import type { FetchLimit, OutboundBody, OutboundFetcher, OutboundFile } from "../net/outbound.ts";
import type { Result } from "../result.ts";
import type { StoredBytes } from "./content.ts";
import { CONTENT_ID_LIMIT, MAX_FILENAME_LENGTH } from "./request.ts";

export interface AttachmentInput {
  filename?: string;
  content?: unknown;
  path?: string;
  content_type?: string;
  /** Alias of content_type (the Node SDK's spelling). */
  contentType?: string;
  content_id?: string;
  /** Alias of content_id. */
  inline_content_id?: string;
}

export interface ResolvedAttachment {
  filename?: string;
  contentType: string;
  /** The bytes, or where `store` put them (a fetched path). */
  content: Uint8Array | StoredBytes;
  contentId?: string;
}

/** Takes a fetched body as it arrives and says where it put it (sending/content.ts writes it to
 * R2), so a large file is never held whole. */
export type FetchedBodyStore = (body: OutboundBody) => Promise<StoredBytes>;

export type AttachmentError = { code: "invalid_attachment" | "validation_error"; message: string };

const DEFAULT_CONTENT_TYPE = "application/octet-stream";

/** By lower-case filename extension. */
const CONTENT_TYPES: Readonly<Record<string, string>> = {
  pdf: "application/pdf",
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
  svg: "image/svg+xml",
  avif: "image/avif",
  heic: "image/heic",
  bmp: "image/bmp",
  ico: "image/vnd.microsoft.icon",
  tif: "image/tiff",
  tiff: "image/tiff",
  txt: "text/plain",
  csv: "text/csv",
  tsv: "text/tab-separated-values",
  html: "text/html",
  htm: "text/html",
  css: "text/css",
  md: "text/markdown",
  ics: "text/calendar",
  vcf: "text/vcard",
  rtf: "application/rtf",
  json: "application/json",
  xml: "application/xml",
  yaml: "application/yaml",
  yml: "application/yaml",
  zip: "application/zip",
  gz: "application/gzip",
  tar: "application/x-tar",
  "7z": "application/x-7z-compressed",
  rar: "application/vnd.rar",
  doc: "application/msword",
  docx: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
  xls: "application/vnd.ms-excel",
  xlsx: "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
  ppt: "application/vnd.ms-powerpoint",
  pptx: "application/vnd.openxmlformats-officedocument.presentationml.presentation",
  odt: "application/vnd.oasis.opendocument.text",
  ods: "application/vnd.oasis.opendocument.spreadsheet",
  odp: "application/vnd.oasis.opendocument.presentation",
  epub: "application/epub+zip",
  eml: "message/rfc822",
  mp3: "audio/mpeg",
  wav: "audio/wav",
  ogg: "audio/ogg",
  m4a: "audio/mp4",
  aac: "audio/aac",
  flac: "audio/flac",
  mp4: "video/mp4",
  m4v: "video/mp4",
  mov: "video/quicktime",
  webm: "video/webm",
  avi: "video/x-msvideo",
  mpeg: "video/mpeg",
  woff: "font/woff",
  woff2: "font/woff2",
  ttf: "font/ttf",
  otf: "font/otf",
};

/** The content type for a filename's extension, or application/octet-stream. */
export function contentTypeForFilename(filename: string | undefined): string {
  return guessContentType(filename) ?? DEFAULT_CONTENT_TYPE;
}

function guessContentType(filename: string | undefined): string | undefined {
  const dot = filename?.lastIndexOf(".") ?? -1;
  if (filename === undefined || dot < 0) return undefined;
  return CONTENT_TYPES[filename.slice(dot + 1).toLowerCase()];
}

const TOKEN = "[A-Za-z0-9!#$&^_.+-]+";
const MIME_TYPE = new RegExp(`^${TOKEN}/${TOKEN}$`);

/** `type/subtype`, optionally followed by `; parameters` in printable ASCII. */
function isValidContentType(value: string): boolean {
  const semicolon = value.indexOf(";");
  const essence = (semicolon < 0 ? value : value.slice(0, semicolon)).trim();
  const parameters = semicolon < 0 ? "" : value.slice(semicolon);
  return value.length <= 255 && MIME_TYPE.test(essence) && /^[\x20-\x7e]*$/.test(parameters);
}

const BASE64_VALUES = (() => {
  const table = new Int16Array(128).fill(-1);
  const standard = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (let i = 0; i < 64; i++) table[standard.charCodeAt(i)] = i;
  table["-".charCodeAt(0)] = 62;
  table["_".charCodeAt(0)] = 63;
  return table;
})();

/**
 * content arrives as a base64 string (standard or url-safe alphabet, whitespace/newlines
 * tolerated, padding optional, anything else refused), an array of byte integers (each an
 * integer 0..255), or {"type":"Buffer","data":[...]}. `field` names it in messages.
 */
export function decodeAttachmentContent(content: unknown, field = "content"): Result<Uint8Array> {
  if (typeof content === "string") return decodeBase64(content, field);
  if (Array.isArray(content)) return decodeByteArray(content, field);
  if (typeof content === "object" && content !== null) {
    const buffer = content as { type?: unknown; data?: unknown };
    if (buffer.type === "Buffer" && Array.isArray(buffer.data)) return decodeByteArray(buffer.data, `${field}.data`);
  }
  return {
    ok: false,
    message: `\`${field}\` must be a base64 string, an array of bytes, or {"type":"Buffer","data":[...]}.`,
  };
}

/** Checks base64 text without copying it (standard or url-safe alphabet, whitespace anywhere,
 * padding optional and only at the end) and gives the number of bytes it decodes to. */
function checkBase64(text: string, field: string): Result<number> {
  const invalid: Result<number> = { ok: false, message: `\`${field}\` is not valid base64.` };
  let standard = false;
  let urlSafe = false;
  let digits = 0;
  let padding = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    // Spaces, tabs, CR, LF and form feeds may be anywhere, padding only at the end.
    if (code === 32 || code === 9 || code === 13 || code === 10 || code === 12) continue;
    if (code === 61) {
      padding++;
      continue;
    }
    const value = code < 128 ? (BASE64_VALUES[code] ?? -1) : -1;
    if (value < 0 || padding > 0) return invalid;
    if (code === 43 || code === 47) standard = true; // + /
    if (code === 45 || code === 95) urlSafe = true; // - _
    digits++;
  }
  if (padding > 2 || (padding > 0 && (digits + padding) % 4 !== 0)) return invalid;
  if (digits % 4 === 1) return invalid;
  if (standard && urlSafe) {
    return { ok: false, message: `\`${field}\` mixes the standard and url-safe base64 alphabets; use one.` };
  }
  return { ok: true, value: Math.floor((digits * 3) / 4) };
}

/** The bytes of base64 text checked by checkBase64 (`size` of them), written into `buffer`
 * and yielded each time it is full and at the end: a view of `buffer`, valid until the next
 * one is asked for. */
function* base64Slices(text: string, size: number, buffer: Uint8Array): Generator<Uint8Array> {
  let total = 0;
  let out = 0;
  let acc = 0;
  let held = 0;
  for (let i = 0; i < text.length && total < size; i++) {
    const code = text.charCodeAt(i);
    const value = code < 128 ? (BASE64_VALUES[code] ?? -1) : -1;
    if (value < 0) continue; // whitespace and padding (checkBase64 refused anything else)
    acc = (acc << 6) | value;
    held += 6;
    if (held >= 8) {
      held -= 8;
      buffer[out++] = (acc >> held) & 255;
      total++;
      if (out === buffer.length) {
        yield buffer;
        out = 0;
      }
    }
  }
  if (out > 0) yield buffer.subarray(0, out);
}

/** Two passes over the text, no copy of it: one checks every character and counts the base64
 * ones, one writes the bytes. A 28 MB attachment sent inline is about 39 MB of base64 in the
 * parsed JSON; a copy without whitespace and an array of its 6-bit values beside it cost twice
 * that again (issue 20, item 3: measured in docs/benchmarks.md). */
function decodeBase64(text: string, field: string): Result<Uint8Array> {
  const size = checkBase64(text, field);
  if (!size.ok) return size;
  const bytes = new Uint8Array(size.value);
  // A buffer of the whole size: the first slice is all of it.
  base64Slices(text, size.value, bytes).next();
  return { ok: true, value: bytes };
}

/** Decoded base64 content not yet written anywhere: its size, and its bytes in slices. */
export interface DecodedContent {
  size: number;
  /** The bytes, a slice at a time, each valid until the next is asked for. */
  slices(): Iterable<Uint8Array>;
}

/** The most bytes of base64 content decoded at a time when it is written to a store. */
const SLICE_BYTES = 64 * 1024;

/** Takes base64 `content`, checked and measured but not decoded, with what the message says
 * about it, and says where it put the bytes (sending/content.ts writes them to R2 a slice at a
 * time), so the decoded attachment is never held whole beside its base64 text. May throw to
 * refuse it (the email would be too large) before anything is written. */
export type ContentStore = (content: DecodedContent, meta: { filename?: string; contentType: string; contentId?: string }) => Promise<StoredBytes>;

function decodeByteArray(items: unknown[], field: string): Result<Uint8Array> {
  const bytes = new Uint8Array(items.length);
  for (const [i, item] of items.entries()) {
    if (typeof item !== "number" || !Number.isInteger(item) || item < 0 || item > 255) {
      return { ok: false, message: `\`${field}[${i}]\` must be an integer from 0 to 255.` };
    }
    bytes[i] = item;
  }
  return { ok: true, value: bytes };
}

type Failure = { ok: false } & AttachmentError;
const fail = (code: AttachmentError["code"], message: string): Failure => ({ ok: false, code, message });

/** An optional string field: absent when undefined, null or empty. */
function optionalString(input: Record<string, unknown>, key: string, name: string): Result<string | undefined, AttachmentError> {
  const value = input[key];
  if (value === undefined || value === null || value === "") return { ok: true, value: undefined };
  if (typeof value !== "string") return fail("validation_error", `\`${name}.${key}\` must be a string.`);
  return { ok: true, value };
}

/** A field that has an alias: the two must agree when both are given. */
function aliased(
  input: Record<string, unknown>,
  canonical: string,
  alias: string,
  name: string,
): Result<string | undefined, AttachmentError> {
  const a = optionalString(input, canonical, name);
  if (!a.ok) return a;
  const b = optionalString(input, alias, name);
  if (!b.ok) return b;
  if (a.value !== undefined && b.value !== undefined && a.value !== b.value) {
    return fail("validation_error", `\`${name}.${canonical}\` and \`${name}.${alias}\` differ; send only one of them.`);
  }
  return { ok: true, value: a.value ?? b.value };
}

function checkFilename(filename: string, field: string): Failure | undefined {
  if (/[\x00-\x1f\x7f]/.test(filename)) {
    return fail("validation_error", `\`${field}\` must not contain line breaks or other control characters.`);
  }
  if ([...filename].length > MAX_FILENAME_LENGTH) {
    return fail("validation_error", `\`${field}\` must be at most ${MAX_FILENAME_LENGTH} characters.`);
  }
  return undefined;
}

/** The last segment of a URL's path, decoded, when it makes a usable filename. */
function filenameFromUrl(url: string): string | undefined {
  let segment: string;
  try {
    segment = decodeURIComponent(new URL(url).pathname.split("/").pop() ?? "");
  } catch {
    return undefined;
  }
  if (segment === "" || checkFilename(segment, "") !== undefined) return undefined;
  return segment;
}

/**
 * Resolves one attachment: exactly one of content/path, aliases checked, bytes decoded or
 * fetched through `fetcher`, content type taken from the request, else the filename's
 * extension, else (for a path) the server's Content-Type, else application/octet-stream.
 * Errors: invalid_attachment when the bytes cannot be had (no content or path, undecodable
 * content, a path that is refused or fails); validation_error for the other fields, and for a
 * fetched file over `limit` (the room the email has left). With `store`, a fetched body goes
 * there as it arrives instead of into memory; on any failure `store` has kept nothing. With
 * `storeContent`, base64 `content` is checked whole, then decoded into it a slice at a time.
 */
export async function resolveAttachment(
  input: AttachmentInput,
  index: number,
  fetcher: OutboundFetcher,
  limit?: FetchLimit,
  store?: FetchedBodyStore,
  storeContent?: ContentStore,
): Promise<Result<ResolvedAttachment, AttachmentError>> {
  const name = `attachments[${index}]`;
  if (typeof input !== "object" || input === null || Array.isArray(input)) {
    return fail("validation_error", `\`${name}\` must be an object.`);
  }
  const fields = input as Record<string, unknown>;

  const filename = optionalString(fields, "filename", name);
  if (!filename.ok) return filename;
  if (filename.value !== undefined) {
    const bad = checkFilename(filename.value, `${name}.filename`);
    if (bad) return bad;
  }

  const requestedType = aliased(fields, "content_type", "contentType", name);
  if (!requestedType.ok) return requestedType;
  if (requestedType.value !== undefined && !isValidContentType(requestedType.value)) {
    const field = fields.content_type !== undefined && fields.content_type !== null ? "content_type" : "contentType";
    return fail("validation_error", `\`${name}.${field}\` must be a MIME type like application/pdf, on one line.`);
  }

  const contentId = aliased(fields, "content_id", "inline_content_id", name);
  if (!contentId.ok) return contentId;
  if (contentId.value !== undefined) {
    const field = fields.content_id !== undefined && fields.content_id !== null ? "content_id" : "inline_content_id";
    if (contentId.value.length >= CONTENT_ID_LIMIT) {
      return fail("validation_error", `\`${name}.${field}\` must be shorter than ${CONTENT_ID_LIMIT} characters.`);
    }
    if (/[<>\s\x00-\x1f\x7f]/.test(contentId.value)) {
      return fail("validation_error", `\`${name}.${field}\` must not contain <, >, spaces, line breaks or control characters.`);
    }
  }

  const hasContent = fields.content !== undefined && fields.content !== null;
  const hasPath = fields.path !== undefined && fields.path !== null;
  if (hasContent && hasPath) {
    return fail("validation_error", `\`${name}\` has both \`content\` and \`path\`; send only one of them.`);
  }
  if (!hasContent && !hasPath) {
    return fail("invalid_attachment", `\`${name}\` needs either \`content\` or \`path\`.`);
  }

  let content: Uint8Array | StoredBytes;
  let resolvedFilename = filename.value;
  let servedType: string | undefined;
  if (hasContent && typeof fields.content === "string" && storeContent) {
    const text = fields.content;
    const size = checkBase64(text, `${name}.content`);
    if (!size.ok) return fail("invalid_attachment", size.message);
    const meta = {
      contentType: requestedType.value ?? guessContentType(resolvedFilename) ?? DEFAULT_CONTENT_TYPE,
      ...(resolvedFilename !== undefined ? { filename: resolvedFilename } : {}),
      ...(contentId.value !== undefined ? { contentId: contentId.value } : {}),
    };
    const slices = () => base64Slices(text, size.value, new Uint8Array(Math.min(SLICE_BYTES, size.value)));
    return { ok: true, value: { ...meta, content: await storeContent({ size: size.value, slices }, meta) } };
  } else if (hasContent) {
    const decoded = decodeAttachmentContent(fields.content, `${name}.content`);
    if (!decoded.ok) return fail("invalid_attachment", decoded.message);
    content = decoded.value;
  } else {
    if (typeof fields.path !== "string" || fields.path.trim() === "") {
      return fail("validation_error", `\`${name}.path\` must be a non-empty URL string.`);
    }
    const url = fields.path.trim();
    const fetched: Result<Omit<OutboundFile, "body"> & { body: Uint8Array | StoredBytes }, { message: string; tooBig?: true }> = store
      ? await fetcher.stream(url, limit, async (b) => ({ body: await store(b), finalUrl: b.finalUrl, ...(b.contentType !== undefined ? { contentType: b.contentType } : {}) }))
      : await fetcher(url, limit);
    // Over the room the email had left: the email is too large, not the attachment broken.
    if (!fetched.ok && fetched.tooBig && limit) return fail("validation_error", `\`${name}.path\`: ${fetched.message}`);
    if (!fetched.ok) return fail("invalid_attachment", `\`${name}.path\` could not be fetched. ${fetched.message}`);
    content = fetched.value.body;
    resolvedFilename ??= filenameFromUrl(fields.path.trim()) ?? filenameFromUrl(fetched.value.finalUrl);
    const served = fetched.value.contentType?.split(";")[0]?.trim().toLowerCase();
    if (served !== undefined && MIME_TYPE.test(served)) servedType = served;
  }

  const contentType =
    requestedType.value ?? guessContentType(resolvedFilename) ?? servedType ?? DEFAULT_CONTENT_TYPE;
  return {
    ok: true,
    value: {
      content,
      contentType,
      ...(resolvedFilename !== undefined ? { filename: resolvedFilename } : {}),
      ...(contentId.value !== undefined ? { contentId: contentId.value } : {}),
    },
  };
}
