// The suppression list as an account manages it: list, add by hand, remove. The REST routes
// and the dashboard are both thin callers of these; bounces and complaints add themselves
// through suppress.ts inside their own batches.
import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { suppressions, type SuppressionRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { finishPage, pageQuery, type Page } from "../pagination.ts";
import { suppressionKey, suppressStatement } from "./suppress.ts";

export function suppressionView(r: SuppressionRow) {
  return {
    object: "suppression" as const,
    id: r.id,
    email: r.email,
    reason: r.reason,
    email_id: r.emailId,
    detail: r.detail,
    created_at: new Date(r.createdAt).toISOString(),
  };
}

export type SuppressionView = ReturnType<typeof suppressionView>;

export async function listSuppressions(d1: D1Database, accountId: string, page: Page) {
  const q = pageQuery(suppressions.id, page, eq(suppressions.accountId, accountId));
  const rows = await drizzle(d1).select().from(suppressions).where(q.where).orderBy(q.orderBy).limit(q.limit);
  return finishPage(rows.map(suppressionView), page);
}

/** Adds an address by hand; `created` is false when it was already on the list (its entry,
 * with its first reason, is answered). */
export async function addSuppression(d1: D1Database, accountId: string, address: string, detail: string | null, now = Date.now()): Promise<{ created: boolean; suppression: SuppressionView }> {
  const db = drizzle(d1);
  const email = suppressionKey(address);
  const find = () => db.select().from(suppressions).where(and(eq(suppressions.accountId, accountId), eq(suppressions.email, email))).get();
  const before = await find();
  if (before) return { created: false, suppression: suppressionView(before) };
  await db.batch([suppressStatement(db, { accountId, email, reason: "manual", detail, now })]);
  return { created: true, suppression: suppressionView((await find())!) };
}

export async function removeSuppressionById(d1: D1Database, accountId: string, id: string): Promise<{ object: "suppression"; id: string; deleted: true }> {
  const deleted = await drizzle(d1).delete(suppressions)
    .where(and(eq(suppressions.id, id), eq(suppressions.accountId, accountId))).returning({ id: suppressions.id });
  if (deleted.length === 0) throw new ApiError("not_found", "Suppression not found.");
  return { object: "suppression", id, deleted: true };
}

export async function removeSuppressionByEmail(d1: D1Database, accountId: string, address: string): Promise<{ object: "suppression"; id: string; deleted: true }> {
  const deleted = await drizzle(d1).delete(suppressions)
    .where(and(eq(suppressions.email, suppressionKey(address)), eq(suppressions.accountId, accountId))).returning({ id: suppressions.id });
  if (deleted.length === 0) throw new ApiError("not_found", "This address is not suppressed.");
  return { object: "suppression", id: deleted[0]!.id, deleted: true };
}
