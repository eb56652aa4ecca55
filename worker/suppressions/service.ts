// The suppression list as an account manages it: list, add by hand, remove. The REST routes
// and the dashboard are both thin callers of these; bounces and complaints add themselves
// through suppress.ts inside their own batches.
import { contains, MAX_SEARCH_CHARS } from "../db/search.ts";
import { and, eq, inArray } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { suppressions, type SuppressionRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { finishPage, pageQuery, type Page } from "../pagination.ts";
import { suppressionKey, suppressStatement, type SuppressionReason } from "./suppress.ts";

/** At most this many addresses per batch add or remove. */
export const MAX_SUPPRESSION_BATCH = 100;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** D1 binds at most 100 parameters per statement. */
function chunks<T>(list: readonly T[], size = 90): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < list.length; i += size) out.push(list.slice(i, i + size));
  return out;
}

/** A suppression named by its id or by its address (Resend's `{id_or_email}`). */
function byRef(accountId: string, ref: string) {
  const scope = eq(suppressions.accountId, accountId);
  return UUID.test(ref) ? and(scope, eq(suppressions.id, ref.toLowerCase())) : and(scope, eq(suppressions.email, suppressionKey(ref)));
}

export async function getSuppression(d1: D1Database, accountId: string, ref: string): Promise<SuppressionView> {
  const row = await drizzle(d1).select().from(suppressions).where(byRef(accountId, ref)).get();
  if (!row) throw new ApiError("not_found", "Suppression not found.");
  return suppressionView(row);
}

/** Removes a suppression named by id or address. */
export async function removeSuppression(d1: D1Database, accountId: string, ref: string): Promise<{ object: "suppression"; id: string; deleted: true }> {
  const deleted = await drizzle(d1).delete(suppressions).where(byRef(accountId, ref)).returning({ id: suppressions.id });
  if (deleted.length === 0) throw new ApiError("not_found", "Suppression not found.");
  return { object: "suppression", id: deleted[0]!.id, deleted: true };
}

/** Adds up to MAX_SUPPRESSION_BATCH addresses by hand in one batch; each answers its entry's
 * id, the existing one for an address already on the list. */
export async function addSuppressions(d1: D1Database, accountId: string, addresses: readonly string[], now = Date.now()): Promise<{ object: "suppression"; id: string }[]> {
  const db = drizzle(d1);
  const keys = [...new Set(addresses.map(suppressionKey))];
  await db.batch(keys.map((email) => suppressStatement(db, { accountId, email, reason: "manual", now })) as [ReturnType<typeof suppressStatement>]);
  const ids = new Map<string, string>();
  for (const c of chunks(keys)) {
    const rows = await db.select({ id: suppressions.id, email: suppressions.email }).from(suppressions)
      .where(and(eq(suppressions.accountId, accountId), inArray(suppressions.email, c)));
    for (const r of rows) ids.set(r.email, r.id);
  }
  return addresses.map((a) => ({ object: "suppression" as const, id: ids.get(suppressionKey(a))! }));
}

/** Removes up to MAX_SUPPRESSION_BATCH suppressions named by address or id; answers those
 * that were on the list. */
export async function removeSuppressions(d1: D1Database, accountId: string, by: { emails?: readonly string[]; ids?: readonly string[] }): Promise<{ object: "suppression"; id: string; deleted: true }[]> {
  const db = drizzle(d1);
  const scope = eq(suppressions.accountId, accountId);
  const statements = [
    ...chunks([...new Set((by.emails ?? []).map(suppressionKey))]).map((c) => db.delete(suppressions).where(and(scope, inArray(suppressions.email, c))).returning({ id: suppressions.id })),
    ...chunks([...new Set((by.ids ?? []).map((i) => i.toLowerCase()))]).map((c) => db.delete(suppressions).where(and(scope, inArray(suppressions.id, c))).returning({ id: suppressions.id })),
  ];
  if (statements.length === 0) return [];
  const results = await db.batch(statements as [(typeof statements)[number]]);
  return results.flat().map((d) => ({ object: "suppression" as const, id: d.id, deleted: true as const }));
}

export function suppressionView(r: SuppressionRow) {
  return {
    object: "suppression" as const,
    id: r.id,
    email: r.email,
    reason: r.reason,
    email_id: r.emailId,
    /** Resend's names for reason and email_id. */
    origin: r.reason,
    source_id: r.emailId,
    detail: r.detail,
    created_at: new Date(r.createdAt).toISOString(),
  };
}

export type SuppressionView = ReturnType<typeof suppressionView>;

/** A page of the list, newest first; with `search`, only addresses holding it (any case: the
 * addresses are stored lowercased, so the term is lowercased the same way). The
 * walk is the (account_id, id) index, the search checked on the rows it meets. */
export async function listSuppressions(d1: D1Database, accountId: string, page: Page, origin?: SuppressionReason, search?: string) {
  const term = search?.trim() ? suppressionKey([...search.trim()].slice(0, MAX_SEARCH_CHARS).join("")) : undefined;
  const q = pageQuery(suppressions.id, page, and(
    eq(suppressions.accountId, accountId),
    origin ? eq(suppressions.reason, origin) : undefined,
    term ? contains(suppressions.email, term) : undefined,
  ));
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

/** Changes the note kept with a suppression (null clears it); its reason and address stay. */
export async function updateSuppressionNote(d1: D1Database, accountId: string, id: string, detail: string | null): Promise<SuppressionView> {
  const rows = await drizzle(d1).update(suppressions).set({ detail })
    .where(and(eq(suppressions.id, id), eq(suppressions.accountId, accountId))).returning();
  if (rows.length === 0) throw new ApiError("not_found", "Suppression not found.");
  return suppressionView(rows[0]!);
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
