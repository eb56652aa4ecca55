// Recording API requests for GET /logs. What is kept: endpoint, method, status, user agent,
// time, and the request and response bodies with secrets, link credentials (the query of a
// signed URL) and attachment contents left out.
// A send's row goes into the send's own D1 batch (sendLogHook), so the hot path pays no extra
// round trip (test/worker/round-trips.test.ts); every other request writes its row after the
// answer, with waitUntil.
import { drizzle } from "drizzle-orm/d1";
import type { Principal } from "../auth.ts";
import { insertApiLog } from "../db/compiled.ts";
import { apiLogs, type ApiLogRow } from "../db/schema.ts";
import { parsedBody } from "../http.ts";
import { uuidv7 } from "../ids.ts";
import { describeFailure } from "../errors.ts";

/** Fields whose values are credentials: never stored. */
const SECRET_KEYS = /^(token|signing_secret|secret|password|authorization|api_key|api_token|previous_secret|recovery_codes?)$/i;
/** A body kept in a log is at most this much JSON; a larger one is summarised. */
export const MAX_LOGGED_BODY = 32 * 1024;

/** Fields that hold links whose query (or fragment) is the credential: a share's `url`, an
 * attachment's `download_url`, a send's attachments[].path (often a presigned URL). */
const LINK_KEYS = /^(url|download_url|path)$/i;
/** A URL anywhere in a string whose query carries a signature or token. */
const SIGNED_URL = /\b([a-z][a-z0-9+.-]*:\/\/[^\s"'<>?#]*)[?#][^\s"'<>]*?(?:signature|token|x-amz-signature)=[^\s"'<>]*/gi;

/** The link without its query and fragment: where it pointed stays readable, what opened it
 * does not. */
export function withoutQuery(link: string): string {
  const cut = link.search(/[?#]/);
  return cut < 0 ? link : link.slice(0, cut);
}

/** Nesting kept in a log; anything deeper is replaced by a marker. Bounds the recursion, so a
 * hostile body nested 100,000 levels deep (JSON.parse accepts it) still gets its log entry. */
export const MAX_LOGGED_DEPTH = 32;
export const TOO_DEEP = "[nested too deep]";

/** A copy of a JSON value without secrets, link credentials and attachment contents. */
export function redact(value: unknown, key = "", depth = 0): unknown {
  if (typeof value === "string") return LINK_KEYS.test(key) ? withoutQuery(value) : value.replace(SIGNED_URL, "$1");
  if (value === null || typeof value !== "object") return value;
  if (depth >= MAX_LOGGED_DEPTH) return TOO_DEEP;
  if (Array.isArray(value)) {
    return key === "attachments" ? value.map((a) => redactAttachment(a, depth + 1)) : value.map((v) => redact(v, "", depth + 1));
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = SECRET_KEYS.test(k) && v != null ? "[redacted]" : redact(v, k, depth + 1);
  return out;
}

/** The contents go before anything else looks at the attachment: a 40 MB base64 string must not
 * be scanned for signed URLs only to be thrown away. */
function redactAttachment(a: unknown, depth: number): unknown {
  if (a === null || typeof a !== "object" || Array.isArray(a)) return redact(a, "", depth);
  const { content, ...rest } = a as Record<string, unknown>;
  const copy = redact(rest, "", depth) as Record<string, unknown>;
  if (typeof content === "string") copy.content = `[omitted: ${content.length} characters]`;
  else if (content !== undefined) copy.content = "[omitted]";
  return copy;
}

/** The redacted JSON text, or a summary when it is larger than MAX_LOGGED_BODY. */
export function loggedJson(value: unknown): string | null {
  if (value === undefined) return null;
  const text = JSON.stringify(redact(value));
  if (text.length <= MAX_LOGGED_BODY) return text;
  return JSON.stringify({ truncated: true, size: text.length });
}

export interface LogRequest {
  req: Request;
  principal: Principal;
}

export function logRow(r: LogRequest, status: number, responseJson: string | null, now = Date.now()): ApiLogRow {
  const url = new URL(r.req.url);
  return {
    id: uuidv7(now),
    accountId: r.principal.accountId,
    keyId: r.principal.keyId,
    method: r.req.method.toUpperCase(),
    endpoint: url.pathname,
    status,
    userAgent: r.req.headers.get("user-agent"),
    requestJson: loggedJson(parsedBody(r.req)),
    responseJson,
    createdAt: now,
  };
}

function responseJsonOf(text: string): string | null {
  try {
    return loggedJson(JSON.parse(text));
  } catch {
    return null;
  }
}

/** The statement that records a request with its answer. */
export function logStatement(d1: D1Database, r: LogRequest, status: number, responseBody: string): D1PreparedStatement {
  return insertApiLog.bind(d1, logRow(r, status, responseJsonOf(responseBody)));
}

/** Writes the request's row (after the answer: the caller defers it). `responseText` is the
 * JSON answer's text, null for any other answer. */
export async function writeLog(d1: D1Database, r: LogRequest, status: number, responseText: string | null): Promise<void> {
  try {
    await drizzle(d1).insert(apiLogs).values(logRow(r, status, responseText === null ? null : responseJsonOf(responseText)));
  } catch (err) {
    // A lost log line must never fail or slow the request it describes.
    console.error("could not record the API log", describeFailure(err));
  }
}

/** The JSON answer's text, and the answer rebuilt around it (a tee of the body would wait on a
 * reader the runtime may never start); any other answer is left as it is. */
export async function readAnswer(res: Response): Promise<{ res: Response; text: string | null }> {
  if (!(res.headers.get("content-type") ?? "").includes("application/json") || !res.body) return { res, text: null };
  const text = await res.text();
  return { res: new Response(text, res), text };
}

/** Reading the log is not itself logged: polling it would fill it. */
export function isLogRead(req: Request): boolean {
  return req.method === "GET" && /^\/logs(\/|$)/.test(new URL(req.url).pathname);
}

/** A send's log: its row is built from the answer and committed in the send's batch; `written`
 * says it was, so the route does not write it again. */
export interface SendLog {
  statement(status: number, body: string): D1PreparedStatement;
  written: boolean;
}

export function sendLog(d1: D1Database, r: LogRequest): SendLog {
  return { statement: (status, body) => logStatement(d1, r, status, body), written: false };
}
