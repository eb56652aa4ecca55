// Segments (Resend's /segments, and the older /audiences for the same rows): named groups of
// contacts. Deleting one removes its memberships (each member reports contact.updated), never
// the contacts.
import { and, eq, inArray, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { contactSegments, segments, type SegmentRow } from "../db/schema.ts";
import { changeContactsInChunks, type ContactEnv } from "./contacts.ts";
import { uuidv7 } from "../ids.ts";
import { finishPage, pageQuery, type Page } from "../pagination.ts";

export async function createSegment(db: D1Database, accountId: string, name: string, now = Date.now()): Promise<SegmentRow> {
  const row: SegmentRow = { id: uuidv7(now), accountId, name, createdAt: now };
  await drizzle(db).insert(segments).values(row);
  return row;
}

export async function findSegment(db: D1Database, accountId: string, id: string): Promise<SegmentRow | undefined> {
  return drizzle(db).select().from(segments).where(and(eq(segments.accountId, accountId), eq(segments.id, id))).get();
}

export async function listSegments(db: D1Database, accountId: string, page: Page) {
  const q = pageQuery(segments.id, page, eq(segments.accountId, accountId));
  return finishPage(await drizzle(db).select().from(segments).where(q.where).orderBy(q.orderBy).limit(q.limit), page);
}

/** How many contacts each segment has: one count per segment over its key (segment_id, contact_id). */
export async function segmentCounts(db: D1Database, ids: string[]): Promise<Map<string, number>> {
  const d = drizzle(db);
  const counts = await Promise.all(ids.map((id) => d.select({ n: sql<number>`count(*)` }).from(contactSegments).where(eq(contactSegments.segmentId, id)).get()));
  return new Map(ids.map((id, i) => [id, counts[i]?.n ?? 0]));
}

export async function renameSegment(db: D1Database, accountId: string, id: string, name: string): Promise<SegmentRow | undefined> {
  const row = await findSegment(db, accountId, id);
  if (!row) return undefined;
  await drizzle(db).update(segments).set({ name }).where(eq(segments.id, id));
  return { ...row, name };
}

/** Its members leave it first, a chunk at a time with their contact.updated events; then it goes. */
export async function deleteSegment(env: ContactEnv, accountId: string, id: string, now = Date.now()): Promise<SegmentRow | undefined> {
  const row = await findSegment(env.DB, accountId, id);
  if (!row) return undefined;
  const db = drizzle(env.DB);
  const members = await db.select({ id: contactSegments.contactId }).from(contactSegments).where(eq(contactSegments.segmentId, id));
  await changeContactsInChunks(env, accountId, members.map((m) => m.id), (ids) => [
    db.delete(contactSegments).where(and(eq(contactSegments.segmentId, id), inArray(contactSegments.contactId, ids))),
  ], now);
  await db.delete(segments).where(and(eq(segments.accountId, accountId), eq(segments.id, id)));
  return row;
}
