// The account's API request log (GET /logs): list newest first, read one with its bodies.
import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { apiKeys, apiLogs, type ApiLogRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { finishPage, pageQuery, type Page } from "../pagination.ts";

export function summary(r: Pick<ApiLogRow, "id" | "createdAt" | "endpoint" | "method" | "status" | "userAgent">) {
  return {
    object: "log" as const,
    id: r.id,
    created_at: new Date(r.createdAt).toISOString(),
    endpoint: r.endpoint,
    method: r.method,
    response_status: r.status,
    user_agent: r.userAgent,
  };
}

export async function listLogs(d1: D1Database, accountId: string, page: Page) {
  const q = pageQuery(apiLogs.id, page, eq(apiLogs.accountId, accountId));
  const rows = await drizzle(d1)
    .select({ id: apiLogs.id, createdAt: apiLogs.createdAt, endpoint: apiLogs.endpoint, method: apiLogs.method, status: apiLogs.status, userAgent: apiLogs.userAgent })
    .from(apiLogs).where(q.where).orderBy(q.orderBy).limit(q.limit);
  return finishPage(rows.map(summary), page);
}

/** Resend's Log bodies are an object or null (resend-java reads a Map): a batch's array body
 * is answered as `{ data: [...] }`, the way Resend wraps every list. */
function bodyObject(json: string | null): unknown {
  if (json === null) return null;
  const v = JSON.parse(json) as unknown;
  return v !== null && typeof v === "object" && !Array.isArray(v) ? v : { data: v };
}

/** One of the account's logs as stored, with the name of the key that made it (null when the
 * key has been revoked since); another account's id is not found. */
export async function findLog(d1: D1Database, accountId: string, id: string): Promise<{ row: ApiLogRow; keyName: string | null }> {
  const found = await drizzle(d1).select({ row: apiLogs, keyName: apiKeys.name }).from(apiLogs)
    .leftJoin(apiKeys, and(eq(apiKeys.id, apiLogs.keyId), eq(apiKeys.accountId, accountId)))
    .where(and(eq(apiLogs.id, id), eq(apiLogs.accountId, accountId))).get();
  if (!found) throw new ApiError("not_found", "Log not found.");
  return found;
}

export async function getLog(d1: D1Database, accountId: string, id: string) {
  const { row } = await findLog(d1, accountId, id);
  return {
    ...summary(row),
    request_body: bodyObject(row.requestJson),
    response_body: bodyObject(row.responseJson),
  };
}
