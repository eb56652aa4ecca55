// The dashboard's Logs page: the account's API requests newest first, narrowed by status class,
// method, endpoint prefix and API key, a page at a time. GET /logs keeps Resend's shape
// (pagination only); these filters are the dashboard's.
//
// Bounds: every request walks the (account_id, id) index newest first and reads at most
// SEARCH_WINDOW of the account's rows, whatever the filters; a rare filter (5xx on an account
// with millions of requests) answers the matches in that window and where it stopped, and the
// page offers to search the next window. No index per filter: each would cost every API
// request a write, and status classes are ranges that an index could not walk newest first.
import { and, between, desc, eq, lt, sql, type SQL } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { apiKeys, apiLogs, type ApiLogRow } from "../db/schema.ts";
import { summary } from "./service.ts";

/** Rows of the account one request reads at most. A row's filter columns sit before its JSON
 * bodies, so a row costs one page read, never its overflow pages: a full window of 6 KB rows
 * took about 6 ms of SQL in local D1 (test/worker/logs-search.test.ts counts the rows read). */
export const SEARCH_WINDOW = 5_000;

export const STATUS_CLASSES = {
  success: { label: "success (1xx-3xx)", range: [100, 399] },
  client_error: { label: "client errors (4xx)", range: [400, 499] },
  server_error: { label: "server errors (5xx)", range: [500, 599] },
} as const;
export type StatusClass = keyof typeof STATUS_CLASSES;

export const LOG_METHODS = ["GET", "POST", "PATCH", "PUT", "DELETE"] as const;

export interface LogFilters {
  status?: StatusClass | undefined;
  method?: (typeof LOG_METHODS)[number] | undefined;
  /** A path prefix: "/emails" matches /emails, /emails/batch and /emails/{id}. */
  endpoint?: string | undefined;
  keyId?: string | undefined;
}

const UUID = /^[0-9a-f-]{36}$/i;

/** The filters from a page's query string, and what was wrong with it (the rest still apply). */
export function readLogFilters(q: Record<string, string | undefined>): { filters: LogFilters; error: string | null } {
  const filters: LogFilters = {};
  const errors: string[] = [];
  const status = q.status?.trim();
  if (status) {
    if (status in STATUS_CLASSES) filters.status = status as StatusClass;
    else errors.push("Status is all, success, client_error or server_error.");
  }
  const method = q.method?.trim().toUpperCase();
  if (method) {
    if ((LOG_METHODS as readonly string[]).includes(method)) filters.method = method as LogFilters["method"];
    else errors.push(`Method is one of ${LOG_METHODS.join(", ")}.`);
  }
  let endpoint = q.endpoint?.trim();
  if (endpoint) {
    // A pasted URL or a path with a query reads as its path: the log keeps paths only.
    try {
      if (/^https?:\/\//i.test(endpoint)) endpoint = new URL(endpoint).pathname;
    } catch {}
    endpoint = endpoint.replace(/[?#].*$/, "");
    if (!endpoint.startsWith("/")) endpoint = `/${endpoint}`;
    if (endpoint.length > 200) errors.push("The endpoint is too long (at most 200 characters).");
    else if (endpoint !== "/") filters.endpoint = endpoint;
  }
  const key = q.key?.trim();
  if (key) {
    if (UUID.test(key)) filters.keyId = key.toLowerCase();
    else errors.push("That is not an API key id.");
  }
  return { filters, error: errors.length ? errors.join(" ") : null };
}

const hasFilters = (f: LogFilters) => !!(f.status || f.method || f.endpoint || f.keyId);

/** The account's rows newest first, older than `after`: the walk every search takes. */
function walk(accountId: string, after: string | undefined): SQL | undefined {
  return and(eq(apiLogs.accountId, accountId), after ? lt(apiLogs.id, after) : undefined);
}

/** The page's statement (one match more than the page, which says whether there is more):
 * the window's filter columns, the filters on them, then each match's other columns by its
 * id and its key's name. test/worker/query-plans.test.ts checks its plan. */
export function logSearchQuery(d1: D1Database, accountId: string, f: LogFilters, page: { limit: number; after?: string | undefined }) {
  const db = drizzle(d1);
  const w = db.select({ id: apiLogs.id, keyId: apiLogs.keyId, method: apiLogs.method, endpoint: apiLogs.endpoint, status: apiLogs.status })
    .from(apiLogs).where(walk(accountId, page.after)).orderBy(desc(apiLogs.id)).limit(SEARCH_WINDOW).as("w");
  const where: (SQL | undefined)[] = [];
  if (f.status) {
    const [low, high] = STATUS_CLASSES[f.status].range;
    where.push(between(w.status, low, high));
  }
  if (f.method) where.push(eq(w.method, f.method));
  // A prefix compared as text, not a LIKE pattern: D1 refuses patterns over 50 bytes, and a
  // pasted path is easily longer. Lower-cased on both sides, as LIKE compared ASCII.
  if (f.endpoint) where.push(sql`lower(substr(${w.endpoint}, 1, length(${f.endpoint}))) = lower(${f.endpoint})`);
  if (f.keyId) where.push(eq(w.keyId, f.keyId));
  return db.select({ id: w.id, createdAt: apiLogs.createdAt, endpoint: w.endpoint, method: w.method, status: w.status, userAgent: apiLogs.userAgent, keyId: w.keyId, keyName: apiKeys.name })
    .from(w)
    .innerJoin(apiLogs, eq(apiLogs.id, w.id))
    .leftJoin(apiKeys, and(eq(apiKeys.id, w.keyId), eq(apiKeys.accountId, accountId)))
    .where(and(...where)).orderBy(desc(w.id)).limit(page.limit + 1);
}

/** The last row of a full window (the search stopped there), or nothing when the account's
 * history ends within it: a walk of the index alone. */
export function windowEndQuery(d1: D1Database, accountId: string, after: string | undefined) {
  return drizzle(d1).select({ id: apiLogs.id, createdAt: apiLogs.createdAt }).from(apiLogs).where(walk(accountId, after))
    .orderBy(desc(apiLogs.id)).limit(1).offset(SEARCH_WINDOW - 1);
}

export interface LogListItem extends ReturnType<typeof summary> {
  key_id: string | null;
  /** The key's name; null when it has been revoked since (or the row names none). */
  key_name: string | null;
}

export interface LogSearchResult {
  data: LogListItem[];
  /** The cursor of the next (older) page, or null at the end of the history. */
  next: string | null;
  /** Set when the window ran out before the page filled: the search stopped at this request
   * (its time), and `next` goes on from there. */
  stoppedAt: string | null;
}

export async function searchLogs(d1: D1Database, accountId: string, f: LogFilters, page: { limit: number; after?: string | undefined }): Promise<LogSearchResult> {
  const after = page.after && UUID.test(page.after) ? page.after.toLowerCase() : undefined;
  const query = logSearchQuery(d1, accountId, f, { limit: page.limit, after });
  const filtered = hasFilters(f);
  // Both in one batch (one round trip, one snapshot): a request logged between two statements
  // would move the window's end and show a match twice.
  const [rows, end] = filtered ? await drizzle(d1).batch([query, windowEndQuery(d1, accountId, after)]) : [await query, []];
  const data = rows.slice(0, page.limit).map((r): LogListItem => ({ ...summary(r), key_id: r.keyId, key_name: r.keyName }));
  if (rows.length > page.limit) return { data, next: data[data.length - 1]!.id, stoppedAt: null };
  const stop = end[0];
  return stop ? { data, next: stop.id, stoppedAt: new Date(stop.createdAt).toISOString() } : { data, next: null, stoppedAt: null };
}

/** The ids of the emails a logged request made or named: a send's, a batch's, or the email of
 * an /emails/{id} path. */
export function emailIdsOf(row: Pick<ApiLogRow, "method" | "endpoint" | "status" | "responseJson">): string[] {
  const ids = new Set<string>();
  const inPath = row.endpoint.match(/^\/emails\/([0-9a-f-]{36})(\/|$)/i);
  if (inPath) ids.add(inPath[1]!.toLowerCase());
  if (row.method === "POST" && row.status >= 200 && row.status < 300 && row.responseJson && (row.endpoint === "/emails" || row.endpoint === "/emails/batch")) {
    try {
      const body = JSON.parse(row.responseJson) as { id?: unknown; data?: unknown };
      const items = row.endpoint === "/emails" ? [body] : Array.isArray(body.data) ? (body.data as { id?: unknown }[]) : [];
      for (const item of items) if (typeof item?.id === "string" && UUID.test(item.id)) ids.add(item.id.toLowerCase());
    } catch {}
  }
  return [...ids];
}
