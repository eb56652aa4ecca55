// The dev relay: a local SMTP server that stands in for the outside world under `npm start`.
// tern's Worker delivers every accepted email to it (plain SMTP on loopback); it keeps each
// message as `<mailDir>/<id>.eml` (exactly the bytes received) plus `<id>.json` (envelope,
// arrival time, a parsed summary), and serves a mailbox a person can read plus a JSON API for
// tests and scripts. Run directly: `node dev/relay.ts` (RELAY_SMTP_PORT, RELAY_HTTP_PORT,
// RELAY_MAIL_DIR, RELAY_HOST).
import { createHash, randomBytes } from "node:crypto";
import { EventEmitter } from "node:events";
import { mkdir, readFile, readdir, rename, stat, unlink, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { hostname as osHostname } from "node:os";
import { join, resolve } from "node:path";
import type { Readable } from "node:stream";
import { simpleParser, type AddressObject, type ParsedMail } from "mailparser";
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from "smtp-server";
import { escapeHtml, pageCsp, renderMailboxPage, renderMessagePage, renderNotFoundPage } from "./mailbox-page.ts";

export interface DevRelayOptions {
  /** Interface to bind both servers to (default 127.0.0.1). */
  host?: string;
  /** SMTP port; 0 picks a free one. */
  smtpPort: number;
  /** HTTP (mailbox and API) port; 0 picks a free one. */
  httpPort: number;
  /** Where messages live; created if missing. Messages already there are listed. */
  mailDir: string;
  /** Name in the SMTP greeting (default: the machine's hostname). */
  hostname?: string;
  log?: (line: string) => void;
  /** Called once a message is on disk (e.g. to answer with a DSN). Errors are logged. */
  onMessage?: (message: MessageSummary) => void | Promise<void>;
}

export interface DevRelay {
  smtpPort: number;
  httpPort: number;
  close(): Promise<void>;
}

export interface Envelope {
  /** MAIL FROM address; "" for the null sender. */
  from: string;
  /** RCPT TO addresses, in order. */
  to: string[];
}

export interface MessageSummary {
  id: string;
  receivedAt: string;
  /** Bytes of the .eml. */
  size: number;
  envelope: Envelope;
  /** The From header, decoded ("Name <addr>"). */
  from: string;
  /** Addresses of the To header. */
  to: string[];
  /** Addresses of the Cc header. */
  cc: string[];
  subject: string;
  /** The Date header as ISO 8601, null when missing or unparseable. */
  date: string | null;
  messageId: string | null;
  attachmentCount: number;
}

export interface AttachmentInfo {
  index: number;
  filename: string | null;
  contentType: string;
  size: number;
  sha256: string;
  contentId: string | null;
  disposition: string | null;
  url: string;
}

export interface HeaderLine {
  name: string;
  /** Unfolded, otherwise as received. */
  value: string;
  /** With RFC 2047 encoded words decoded. */
  decoded: string;
}

export interface MessageDetail extends MessageSummary {
  /** Lower-cased name -> decoded value; for a repeated header, its first (topmost) occurrence. */
  headers: Record<string, string>;
  /** Every header field in order. */
  headerLines: HeaderLine[];
  html: string | null;
  text: string | null;
  attachments: AttachmentInfo[];
  client: { address: string; helo: string } | null;
}

/** The `<id>.json` file. */
interface StoredRecord {
  version: 1;
  id: string;
  receivedAt: string;
  size: number;
  envelope: Envelope;
  client: { address: string; helo: string } | null;
  summary?: ParsedSummary;
}

type ParsedSummary = Pick<MessageSummary, "from" | "to" | "cc" | "subject" | "date" | "messageId" | "attachmentCount">;

const MAX_MESSAGE_BYTES = 50 * 1024 * 1024;
const SMTP_CLOSE_GRACE_MS = 10_000;
const HTTP_CLOSE_GRACE_MS = 2_000;
const MAX_WAIT_MS = 60_000;
const RAW_PREVIEW_CHARS = 256 * 1024;
const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,199}$/;

// ---------------------------------------------------------------------------------------
// Message ids: UTC timestamp (ms) + per-millisecond sequence + random, so names sort by
// arrival (20261115T103045123Z-000-9f3c2a).

let lastStamp = "";
let sequence = 0;
function newMessageId(now: Date): string {
  const stamp = now.toISOString().replace(/[-:]/g, "").replace(".", "");
  sequence = stamp === lastStamp ? sequence + 1 : 0;
  lastStamp = stamp;
  return `${stamp}-${String(sequence).padStart(3, "0")}-${randomBytes(3).toString("hex")}`;
}

// ---------------------------------------------------------------------------------------
// Header parsing: our own, so header values are exactly what was received (unfolded).

export function parseHeaderLines(raw: Buffer): HeaderLine[] {
  const crlf = raw.indexOf("\r\n\r\n");
  const lf = raw.indexOf("\n\n");
  let end = crlf;
  if (end === -1 || (lf !== -1 && lf < end)) end = lf;
  const head = (end === -1 ? raw : raw.subarray(0, end)).toString("utf8");
  const fields: Array<{ name: string; value: string }> = [];
  for (const line of head.split(/\r?\n/)) {
    const last = fields[fields.length - 1];
    if (/^[ \t]/.test(line)) {
      if (last) last.value += line;
      continue;
    }
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    fields.push({ name: line.slice(0, colon).trim(), value: line.slice(colon + 1) });
  }
  return fields.map((f) => {
    const value = f.value.trim();
    return { name: f.name, value, decoded: decodeMimeWords(value) };
  });
}

function decodeCharset(bytes: Buffer, charset: string): string {
  try {
    return new TextDecoder(charset.split("*")[0]!.trim().toLowerCase()).decode(bytes);
  } catch {
    return bytes.toString("latin1");
  }
}

/** RFC 2047: decodes encoded words; adjacent words of one charset are joined before decoding. */
export function decodeMimeWords(value: string): string {
  const word = /=\?([^?\s]+)\?([BbQq])\?([^?\s]*)\?=/g;
  let out = "";
  let last = 0;
  let pending: { charset: string; bytes: Buffer[] } | null = null;
  const flush = () => {
    if (pending) out += decodeCharset(Buffer.concat(pending.bytes), pending.charset);
    pending = null;
  };
  for (let m = word.exec(value); m; m = word.exec(value)) {
    const between = value.slice(last, m.index);
    const charset = m[1]!.toLowerCase();
    const text = m[3]!;
    const bytes =
      m[2]!.toUpperCase() === "B"
        ? Buffer.from(text, "base64")
        : Buffer.from(
            text.replace(/_/g, " ").replace(/=([0-9A-Fa-f]{2})/g, (_s, h: string) => String.fromCharCode(parseInt(h, 16))),
            "latin1",
          );
    const adjacent = pending !== null && /^[ \t\r\n]*$/.test(between);
    if (adjacent && pending!.charset === charset) {
      pending!.bytes.push(bytes);
    } else {
      flush();
      if (!adjacent) out += between;
      pending = { charset, bytes: [bytes] };
    }
    last = m.index + m[0].length;
  }
  flush();
  return out + value.slice(last);
}

// ---------------------------------------------------------------------------------------
// Parsing

function parse(raw: Buffer): Promise<ParsedMail> {
  return simpleParser(raw, {
    keepCidLinks: true,
    checksumAlgo: "sha256",
    skipHtmlToText: true,
    skipTextToHtml: true,
    skipTextLinks: true,
  });
}

function addresses(field: AddressObject | AddressObject[] | undefined): string[] {
  const out: string[] = [];
  const visit = (list: Array<{ address?: string; group?: Array<{ address?: string; group?: unknown }> }>) => {
    for (const entry of list) {
      if (entry.address) out.push(entry.address);
      if (Array.isArray(entry.group)) visit(entry.group as typeof list);
    }
  };
  for (const obj of Array.isArray(field) ? field : field ? [field] : []) visit(obj.value);
  return out;
}

function summarize(parsed: ParsedMail, headerLines: HeaderLine[]): ParsedSummary {
  const first = (name: string) => headerLines.find((h) => h.name.toLowerCase() === name);
  const dateHeader = first("date");
  const date = dateHeader ? new Date(dateHeader.value) : null;
  return {
    from: first("from")?.decoded ?? "",
    to: addresses(parsed.to),
    cc: addresses(parsed.cc),
    subject: first("subject")?.decoded ?? "",
    date: date && !Number.isNaN(date.getTime()) ? date.toISOString() : null,
    messageId: first("message-id")?.value ?? null,
    attachmentCount: parsed.attachments.length,
  };
}

async function summarizeRaw(raw: Buffer): Promise<ParsedSummary> {
  const headerLines = parseHeaderLines(raw);
  try {
    return summarize(await parse(raw), headerLines);
  } catch {
    const first = (name: string) => headerLines.find((h) => h.name.toLowerCase() === name);
    return { from: first("from")?.decoded ?? "", to: [], cc: [], subject: first("subject")?.decoded ?? "", date: null, messageId: null, attachmentCount: 0 };
  }
}

// ---------------------------------------------------------------------------------------
// The mailbox on disk

class Mailbox {
  readonly dir: string;
  private readonly cache = new Map<string, MessageSummary>();
  readonly events = new EventEmitter();

  constructor(dir: string) {
    this.dir = dir;
    this.events.setMaxListeners(0);
  }

  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    // Temporary files a crashed relay left behind (not ones a live writer may still own).
    const cutoff = Date.now() - 10 * 60 * 1000;
    for (const name of await readdir(this.dir)) {
      if (!name.startsWith(".") || !name.endsWith(".tmp")) continue;
      const path = join(this.dir, name);
      const info = await stat(path).catch(() => null);
      if (info && info.mtimeMs < cutoff) await unlink(path).catch(() => {});
    }
  }

  private path(id: string, ext: "eml" | "json"): string {
    return join(this.dir, `${id}.${ext}`);
  }

  private async writeAtomic(path: string, data: string | Buffer): Promise<void> {
    const base = path.slice(this.dir.length + 1);
    const tmp = join(this.dir, `.${base}.${randomBytes(4).toString("hex")}.tmp`);
    try {
      await writeFile(tmp, data);
      await rename(tmp, path);
    } catch (err) {
      await unlink(tmp).catch(() => {});
      throw err;
    }
  }

  /** Stores a message: the .json first, then the .eml (a message is listed once its .eml exists). */
  async add(record: StoredRecord, raw: Buffer): Promise<MessageSummary> {
    await this.writeAtomic(this.path(record.id, "json"), `${JSON.stringify(record, null, 2)}\n`);
    await this.writeAtomic(this.path(record.id, "eml"), raw);
    const summary = toSummary(record, record.summary!);
    this.cache.set(record.id, summary);
    this.events.emit("message", summary);
    return summary;
  }

  async ids(): Promise<string[]> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    return names.filter((n) => n.endsWith(".eml") && !n.startsWith(".")).map((n) => n.slice(0, -4)).filter((id) => ID_PATTERN.test(id));
  }

  /** Newest first; optionally only messages whose envelope includes `to`. */
  async list(to: string | null): Promise<MessageSummary[]> {
    const ids = await this.ids();
    const all: MessageSummary[] = [];
    for (let i = 0; i < ids.length; i += 64) {
      // in slices: a big mailbox read cold must not open thousands of files at once
      for (const m of await Promise.all(ids.slice(i, i + 64).map((id) => this.summary(id)))) if (m) all.push(m);
    }
    const wanted = to?.trim().toLowerCase();
    const filtered = wanted ? all.filter((m) => m.envelope.to.some((a) => a.toLowerCase() === wanted)) : all;
    return filtered.sort((a, b) => (a.receivedAt === b.receivedAt ? (a.id < b.id ? 1 : -1) : a.receivedAt < b.receivedAt ? 1 : -1));
  }

  async summary(id: string): Promise<MessageSummary | null> {
    if (!ID_PATTERN.test(id)) return null;
    const cached = this.cache.get(id);
    if (cached) return cached;
    const emlPath = this.path(id, "eml");
    const info = await stat(emlPath).catch(() => null);
    if (!info) return null;
    let record = (await readFile(this.path(id, "json"), "utf8")
      .then((t) => JSON.parse(t) as StoredRecord)
      .catch(() => null)) as StoredRecord | null;
    if (!record || typeof record !== "object" || !record.envelope) {
      // An .eml without its .json (dropped in by hand): no envelope is known.
      record = { version: 1, id, receivedAt: info.mtime.toISOString(), size: info.size, envelope: { from: "", to: [] }, client: null };
    }
    const summary = record.summary ?? (await summarizeRaw(await readFile(emlPath)));
    const result = toSummary({ ...record, id, size: info.size }, summary);
    this.cache.set(id, result);
    return result;
  }

  async raw(id: string): Promise<Buffer | null> {
    if (!ID_PATTERN.test(id)) return null;
    return readFile(this.path(id, "eml")).catch(() => null);
  }

  async client(id: string): Promise<StoredRecord["client"]> {
    const record = await readFile(this.path(id, "json"), "utf8")
      .then((t) => JSON.parse(t) as StoredRecord)
      .catch(() => null);
    return record?.client ?? null;
  }

  async remove(id: string): Promise<boolean> {
    if (!ID_PATTERN.test(id)) return false;
    this.cache.delete(id);
    const removed = await unlink(this.path(id, "eml")).then(
      () => true,
      () => false,
    );
    await unlink(this.path(id, "json")).catch(() => {});
    return removed;
  }
}

function toSummary(record: StoredRecord, summary: ParsedSummary): MessageSummary {
  return {
    id: record.id,
    receivedAt: record.receivedAt,
    size: record.size,
    envelope: { from: record.envelope.from ?? "", to: [...(record.envelope.to ?? [])] },
    from: summary.from,
    to: summary.to,
    cc: summary.cc,
    subject: summary.subject,
    date: summary.date,
    messageId: summary.messageId,
    attachmentCount: summary.attachmentCount,
  };
}

async function detail(mailbox: Mailbox, id: string): Promise<{ detail: MessageDetail; parsed: ParsedMail; raw: Buffer } | null> {
  const summary = await mailbox.summary(id);
  const raw = summary && (await mailbox.raw(id));
  if (!summary || !raw) return null;
  const headerLines = parseHeaderLines(raw);
  const headers: Record<string, string> = {};
  for (const h of headerLines) {
    const key = h.name.toLowerCase();
    if (!(key in headers)) headers[key] = h.decoded;
  }
  const parsed = await parse(raw);
  const base = `/messages/${encodeURIComponent(id)}/attachments/`;
  return {
    parsed,
    raw,
    detail: {
      ...summary,
      headers,
      headerLines,
      html: typeof parsed.html === "string" ? parsed.html : null,
      text: typeof parsed.text === "string" ? parsed.text : null,
      attachments: parsed.attachments.map((a, index) => ({
        index,
        filename: a.filename ?? null,
        contentType: a.contentType,
        size: a.content.length,
        sha256: createHash("sha256").update(a.content).digest("hex"),
        contentId: a.cid ?? null,
        disposition: a.contentDisposition ?? null,
        url: `${base}${index}`,
      })),
      client: await mailbox.client(id),
    },
  };
}

/** The HTML body with cid: references turned into data: URIs, for the preview only. */
function previewHtml(parsed: ParsedMail): string | null {
  if (typeof parsed.html !== "string") return null;
  const byCid = new Map<string, string>();
  for (const a of parsed.attachments) {
    if (a.cid && a.content.length <= 10 * 1024 * 1024) {
      const type = /^[\w.+-]+\/[\w.+-]+$/.test(a.contentType) ? a.contentType : "application/octet-stream";
      byCid.set(a.cid.toLowerCase(), `data:${type};base64,${a.content.toString("base64")}`);
    }
  }
  if (!byCid.size) return parsed.html;
  return parsed.html.replace(/cid:([^"'\s)>]+)/gi, (whole, cid: string) => {
    let key = cid;
    try {
      key = decodeURIComponent(cid);
    } catch {}
    return byCid.get(key.toLowerCase()) ?? whole;
  });
}

// ---------------------------------------------------------------------------------------
// HTTP

const COMMON_HEADERS = {
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store",
  "cross-origin-resource-policy": "same-origin",
};

function send(res: ServerResponse, status: number, type: string, body: string | Buffer, extra: Record<string, string> = {}): void {
  const buf = typeof body === "string" ? Buffer.from(body, "utf8") : body;
  res.writeHead(status, {
    ...COMMON_HEADERS,
    "content-security-policy": "default-src 'none'; frame-ancestors 'none'; sandbox",
    "content-type": type,
    "content-length": String(buf.length),
    ...extra,
  });
  res.end(buf);
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  send(res, status, "application/json; charset=utf-8", `${JSON.stringify(value, null, 2)}\n`);
}

function sendHtml(res: ServerResponse, status: number, nonce: string, html: string): void {
  send(res, status, "text/html; charset=utf-8", html, { "content-security-policy": pageCsp(nonce) });
}

function contentDisposition(kind: "attachment" | "inline", filename: string): string {
  const fallback = filename.replace(/[^\x20-\x7e]|["\\%]/g, "_") || "download";
  return `${kind}; filename="${fallback}"; filename*=UTF-8''${encodeURIComponent(filename).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)}`;
}

function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\./.test(host);
}

/** DNS rebinding guard: with a loopback bind, only loopback Host headers are served. */
function hostAllowed(req: IncomingMessage, bindHost: string): boolean {
  if (!isLoopback(bindHost)) return true;
  const header = req.headers.host;
  if (!header) return true;
  const name = header.startsWith("[") ? header.slice(1, header.indexOf("]")) : header.replace(/:\d+$/, "");
  const lower = name.toLowerCase();
  return isLoopback(lower) || lower.endsWith(".localhost");
}

interface HttpContext {
  mailbox: Mailbox;
  bindHost: string;
  smtpAddress: () => string;
  closing: () => boolean;
  log: (line: string) => void;
  waiters: Set<() => void>;
}

async function handle(ctx: HttpContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const nonce = randomBytes(16).toString("base64");
  if (!hostAllowed(req, ctx.bindHost)) return send(res, 403, "text/plain; charset=utf-8", "Forbidden host\n");
  const url = new URL(req.url ?? "/", "http://relay.invalid");
  const method = req.method === "HEAD" ? "GET" : (req.method ?? "GET");
  const parts = url.pathname.split("/").filter(Boolean).map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return "\0";
    }
  });
  const to = url.searchParams.get("to");
  const { mailbox } = ctx;
  const notAllowed = (allow: string) => send(res, 405, "text/plain; charset=utf-8", "Method not allowed\n", { allow });
  const notFound = (api: boolean, what = "Not found") =>
    api ? sendJson(res, 404, { statusCode: 404, name: "not_found", message: what }) : sendHtml(res, 404, nonce, renderNotFoundPage(nonce, what));

  // Mailbox pages
  if (parts.length === 0) {
    if (method !== "GET") return notAllowed("GET, HEAD");
    const messages = await mailbox.list(to);
    return sendHtml(res, 200, nonce, renderMailboxPage({ messages, filterTo: to, smtpAddress: ctx.smtpAddress(), mailDir: mailbox.dir, nonce }));
  }
  const api = parts[0] === "api";
  const rest = api ? parts.slice(1) : parts;
  if (rest[0] !== "messages") return notFound(api);

  // /api/messages
  if (rest.length === 1) {
    if (!api) {
      res.writeHead(302, { ...COMMON_HEADERS, location: "/" }).end();
      return;
    }
    if (method === "GET") {
      const wait = Math.min(Math.max(Number(url.searchParams.get("wait") ?? 0) || 0, 0), MAX_WAIT_MS);
      // Listen before listing, so a message landing in between is not missed.
      const waiter = wait > 0 ? waitForMessage(ctx, to, wait) : null;
      let messages = await mailbox.list(to);
      if (waiter) {
        if (!messages.length) {
          await waiter.arrived;
          messages = await mailbox.list(to);
        }
        waiter.cancel();
      }
      return sendJson(res, 200, { object: "list", data: messages });
    }
    if (method === "DELETE") {
      const ids = to ? (await mailbox.list(to)).map((m) => m.id) : await mailbox.ids();
      let deleted = 0;
      for (const id of ids) if (await mailbox.remove(id)) deleted++;
      ctx.log(`relay: deleted ${deleted} message${deleted === 1 ? "" : "s"}`);
      return sendJson(res, 200, { object: "list", deleted });
    }
    return notAllowed("GET, HEAD, DELETE");
  }

  const id = rest[1]!;
  // /messages/:id
  if (rest.length === 2) {
    if (api && method === "DELETE") {
      return (await mailbox.remove(id)) ? sendJson(res, 200, { object: "message", id, deleted: true }) : notFound(true, `No message ${id}`);
    }
    if (method !== "GET") return notAllowed(api ? "GET, HEAD, DELETE" : "GET, HEAD");
    const found = await detail(mailbox, id);
    if (!found) return notFound(api, `No message ${id}`);
    if (api) return sendJson(res, 200, found.detail);
    const rawText = found.raw.toString("utf8");
    return sendHtml(
      res,
      200,
      nonce,
      renderMessagePage({
        message: found.detail,
        previewHtml: previewHtml(found.parsed),
        raw: rawText.length > RAW_PREVIEW_CHARS ? rawText.slice(0, RAW_PREVIEW_CHARS) : rawText,
        rawTruncated: rawText.length > RAW_PREVIEW_CHARS,
        nonce,
      }),
    );
  }

  // /messages/:id/raw
  if (rest.length === 3 && rest[2] === "raw") {
    if (method !== "GET") return notAllowed("GET, HEAD");
    const raw = await mailbox.raw(id);
    if (!raw) return notFound(api, `No message ${id}`);
    if (url.searchParams.has("download")) {
      return send(res, 200, "message/rfc822", raw, { "content-disposition": contentDisposition("attachment", `${id}.eml`) });
    }
    return send(res, 200, "text/plain; charset=utf-8", raw);
  }

  // /messages/:id/attachments/:index
  if (rest.length === 4 && rest[2] === "attachments") {
    if (method !== "GET") return notAllowed("GET, HEAD");
    const index = /^\d{1,6}$/.test(rest[3]!) ? Number(rest[3]) : -1;
    const raw = (await mailbox.summary(id)) && (await mailbox.raw(id));
    if (!raw) return notFound(api, `No message ${id}`);
    const attachment = index >= 0 ? (await parse(raw)).attachments[index] : undefined;
    if (!attachment) return notFound(api, `No attachment ${rest[3]} in message ${id}`);
    const type = /^[\w.+-]+\/[\w.+-]+$/.test(attachment.contentType) ? attachment.contentType : "application/octet-stream";
    return send(res, 200, type, attachment.content, {
      "content-disposition": contentDisposition("attachment", attachment.filename ?? `attachment-${index}`),
    });
  }
  return notFound(api);
}

/** Resolves `arrived` when a message for `to` (any, if null) lands, the time is up, or the relay closes. */
function waitForMessage(ctx: HttpContext, to: string | null, ms: number): { arrived: Promise<void>; cancel(): void } {
  const wanted = to?.trim().toLowerCase();
  let finish = () => {};
  const arrived = new Promise<void>((done) => {
    const onMessage = (m: MessageSummary) => {
      if (!wanted || m.envelope.to.some((a) => a.toLowerCase() === wanted)) finish();
    };
    const timer = setTimeout(() => finish(), ms);
    finish = () => {
      clearTimeout(timer);
      ctx.mailbox.events.off("message", onMessage);
      ctx.waiters.delete(finish);
      done();
    };
    ctx.mailbox.events.on("message", onMessage);
    ctx.waiters.add(finish);
    if (ctx.closing()) finish();
  });
  return { arrived, cancel: () => finish() };
}

// ---------------------------------------------------------------------------------------
// SMTP

class SmtpError extends Error {
  responseCode: number;
  constructor(message: string, responseCode: number) {
    super(message);
    this.responseCode = responseCode;
  }
}

async function readMessage(stream: SMTPServerDataStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream as Readable) {
    if (!stream.sizeExceeded) chunks.push(chunk as Buffer);
  }
  if (stream.sizeExceeded) throw new SmtpError(`Message exceeds the ${MAX_MESSAGE_BYTES} byte limit`, 552);
  return Buffer.concat(chunks);
}

function formatHostPort(host: string, port: number): string {
  return `${host.includes(":") ? `[${host}]` : host}:${port}`;
}

export async function startDevRelay(opts: DevRelayOptions): Promise<DevRelay> {
  const host = opts.host ?? "127.0.0.1";
  const log = opts.log ?? (() => {});
  const mailbox = new Mailbox(resolve(opts.mailDir));
  await mailbox.init();

  let closing = false;
  const inFlight = new Set<string>(); // SMTP session ids inside DATA
  const pending = new Set<Promise<unknown>>();

  const smtp: SMTPServer = new SMTPServer({
    name: opts.hostname ?? osHostname(),
    banner: "tern dev relay",
    // Plain, loopback-only, trusted by configuration: nothing to authenticate or encrypt. Not
    // advertising AUTH matters: some clients refuse servers that offer it when they have no
    // credentials.
    authOptional: true,
    disabledCommands: ["AUTH", "STARTTLS"],
    size: MAX_MESSAGE_BYTES,
    logger: false,
    closeTimeout: SMTP_CLOSE_GRACE_MS,
    onData(stream: SMTPServerDataStream, session: SMTPServerSession, callback: (err?: Error | null, message?: string) => void) {
      inFlight.add(session.id);
      const work = receive(stream, session).then(
        (summary) => {
          inFlight.delete(session.id);
          callback(null, `OK: queued as ${summary.id}`);
          log(
            `relay: ${summary.id} from=<${summary.envelope.from}> to=${summary.envelope.to.map((a) => `<${a}>`).join(",")} ${summary.size}B subject=${JSON.stringify(summary.subject)}`,
          );
          if (closing) sayGoodbye(session.id);
          if (opts.onMessage) {
            Promise.resolve()
              .then(() => opts.onMessage!(summary))
              .catch((err: unknown) => log(`relay: onMessage failed for ${summary.id}: ${String(err)}`));
          }
        },
        (err: unknown) => {
          inFlight.delete(session.id);
          const e = err instanceof SmtpError ? err : new SmtpError(`Could not store the message: ${String(err)}`, 451);
          if (!(err instanceof SmtpError)) log(`relay: ${e.message}`);
          callback(e);
          if (closing) sayGoodbye(session.id);
        },
      );
      pending.add(work);
      void work.finally(() => pending.delete(work));
    },
  });
  smtp.on("error", (err: Error) => log(`relay: smtp error: ${err.message}`));

  function sayGoodbye(sessionId: string): void {
    for (const conn of smtp.connections as Set<{ id: string; send(code: number, text: string): void }>) {
      if (conn.id === sessionId) conn.send(421, "Server shutting down");
    }
  }

  async function receive(stream: SMTPServerDataStream, session: SMTPServerSession): Promise<MessageSummary> {
    const raw = await readMessage(stream);
    const now = new Date();
    const id = newMessageId(now);
    const envelope: Envelope = {
      from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
      to: session.envelope.rcptTo.map((r) => r.address),
    };
    const record: StoredRecord = {
      version: 1,
      id,
      receivedAt: now.toISOString(),
      size: raw.length,
      envelope,
      client: { address: session.remoteAddress, helo: session.hostNameAppearsAs ?? "" },
      summary: await summarizeRaw(raw),
    };
    return mailbox.add(record, raw);
  }

  await new Promise<void>((ok, fail) => {
    smtp.server.once("error", fail);
    smtp.listen(opts.smtpPort, host, () => {
      smtp.server.off("error", fail);
      ok();
    });
  });
  const smtpPort = (smtp.server.address() as { port: number }).port;

  const waiters = new Set<() => void>();
  const ctx: HttpContext = {
    mailbox,
    bindHost: host,
    smtpAddress: () => formatHostPort(host, smtpPort),
    closing: () => closing,
    log,
    waiters,
  };
  const http: Server = createServer((req, res) => {
    handle(ctx, req, res).catch((err: unknown) => {
      log(`relay: http ${req.method} ${req.url}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      if (!res.headersSent) send(res, 500, "text/plain; charset=utf-8", `Internal error: ${escapeHtml(String(err))}\n`);
      else res.destroy();
    });
  });
  http.on("error", (err) => log(`relay: http error: ${err.message}`));
  try {
    await new Promise<void>((ok, fail) => {
      http.once("error", fail);
      http.listen(opts.httpPort, host, () => {
        http.off("error", fail);
        ok();
      });
    });
  } catch (err) {
    await new Promise<void>((r) => smtp.close(() => r()));
    throw err;
  }
  const httpPort = (http.address() as { port: number }).port;

  let closed: Promise<void> | null = null;
  return {
    smtpPort,
    httpPort,
    close() {
      closed ??= (async () => {
        closing = true;
        // SMTP: stop accepting; idle sessions are told 421 now, sessions inside DATA finish
        // their message first (smtp-server cuts them off after SMTP_CLOSE_GRACE_MS).
        const smtpClosed = new Promise<void>((r) => smtp.close(() => r()));
        for (const conn of smtp.connections as Set<{ id: string; send(code: number, text: string): void }>) {
          if (!inFlight.has(conn.id)) conn.send(421, "Server shutting down");
        }
        // HTTP: stop accepting, end long polls, drop idle keep-alive sockets.
        const httpClosed = new Promise<void>((r) => http.close(() => r()));
        for (const finish of [...waiters]) finish();
        http.closeIdleConnections();
        const force = setTimeout(() => http.closeAllConnections(), HTTP_CLOSE_GRACE_MS);
        await Promise.all([smtpClosed, httpClosed]);
        clearTimeout(force);
        await Promise.allSettled([...pending]);
      })();
      return closed;
    },
  };
}

// ---------------------------------------------------------------------------------------
// `node dev/relay.ts`

function portFromEnv(name: string, fallback: number): number {
  const value = process.env[name];
  if (value === undefined || value === "") return fallback;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`${name} must be a port number, got ${JSON.stringify(value)}`);
  return port;
}

if (import.meta.main) {
  const mailDir = process.env.RELAY_MAIL_DIR || ".tern/mailbox";
  const host = process.env.RELAY_HOST || "127.0.0.1";
  const relay = await startDevRelay({
    host,
    smtpPort: portFromEnv("RELAY_SMTP_PORT", 2525),
    httpPort: portFromEnv("RELAY_HTTP_PORT", 8025),
    mailDir,
    log: (line) => console.log(line),
  });
  console.log(
    [
      "tern dev relay",
      `  SMTP     smtp://${formatHostPort(host, relay.smtpPort)}`,
      `  Mailbox  http://${formatHostPort(host, relay.httpPort)}/`,
      `  Files    ${resolve(mailDir)}`,
    ].join("\n"),
  );
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      console.log(`relay: ${signal} again, exiting now`);
      process.exit(1);
    }
    stopping = true;
    console.log(`relay: ${signal}, finishing sessions in flight...`);
    relay.close().then(
      () => {
        console.log("relay: stopped");
        process.exit(0);
      },
      (err: unknown) => {
        console.error(`relay: close failed: ${String(err)}`);
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGTERM", () => stop("SIGTERM"));
}
