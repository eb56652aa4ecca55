// Sent emails of an account: read, list, reschedule, cancel, events. The REST routes and the
// dashboard are both thin callers of these; sending itself is worker/sending's.
import { and, asc, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { emailEvents, emails, type EmailRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { uuidv7 } from "../ids.ts";
import { finishPage, pageQuery, type Page } from "../pagination.ts";
import { loadBodies } from "../sending/content.ts";
import { parseScheduledAt } from "../sending/schedule.ts";

const iso = (ms: number | null | undefined): string | null => (ms == null ? null : new Date(ms).toISOString());

function nullableList(json: string): string[] | null {
  const list = JSON.parse(json) as string[];
  return list.length > 0 ? list : null;
}

export function emailListItem(row: EmailRow) {
  return {
    object: "email" as const,
    id: row.id,
    from: row.fromAddress,
    to: JSON.parse(row.toJson) as string[],
    cc: nullableList(row.ccJson),
    bcc: nullableList(row.bccJson),
    reply_to: nullableList(row.replyToJson),
    subject: row.subject,
    created_at: iso(row.createdAt)!,
    scheduled_at: iso(row.scheduledAt),
    last_event: row.lastEvent,
  };
}

/** The account's email, or 404 (another account's email is not found either). */
export async function findEmail(d1: D1Database, accountId: string, id: string): Promise<EmailRow> {
  const row = await drizzle(d1).select().from(emails).where(and(eq(emails.id, id), eq(emails.accountId, accountId))).get();
  if (!row) throw new ApiError("not_found", "Email not found.");
  return row;
}

export async function listEmails(d1: D1Database, accountId: string, page: Page) {
  const q = pageQuery(emails.id, page, eq(emails.accountId, accountId));
  const rows = await drizzle(d1).select().from(emails).where(q.where).orderBy(q.orderBy).limit(q.limit);
  return finishPage(rows.map(emailListItem), page);
}

/** The email with its bodies (from R2) and tags. */
export async function getEmail(env: Pick<Env, "DB" | "BLOBS">, accountId: string, id: string) {
  const row = await findEmail(env.DB, accountId, id);
  const bodies = await loadBodies(env.BLOBS, row);
  return { ...emailListItem(row), html: bodies.html, text: bodies.text, tags: JSON.parse(row.tagsJson) as { name: string; value: string }[] };
}

function notScheduled(state: string, verb: "rescheduled" | "canceled"): ApiError {
  const why = state === "canceled" ? "it was canceled" : "it is not scheduled (it has already been sent or is being sent)";
  return new ApiError("validation_error", `This email cannot be ${verb}: ${why}.`);
}

/** Moves a scheduled email to `scheduledAt` (the API's forms: ISO 8601 or natural language). */
export async function rescheduleEmail(d1: D1Database, accountId: string, id: string, scheduledAt: string, now: number): Promise<{ object: "email"; id: string }> {
  const row = await findEmail(d1, accountId, id);
  const when = parseScheduledAt(scheduledAt, new Date(now));
  if (!when.ok) throw new ApiError("validation_error", when.message);
  const at = when.value.getTime();
  const db = drizzle(d1);
  const updated = await db.update(emails).set({ scheduledAt: at, nextAttemptAt: at })
    .where(and(eq(emails.id, row.id), eq(emails.state, "scheduled"))).returning({ id: emails.id });
  if (updated.length === 0) throw notScheduled(row.state, "rescheduled");
  await db.insert(emailEvents).values({
    id: uuidv7(now), emailId: row.id, accountId: row.accountId, type: "scheduled",
    dataJson: JSON.stringify({ scheduled_at: new Date(at).toISOString() }), createdAt: now,
  });
  return { object: "email", id: row.id };
}

export async function cancelEmail(d1: D1Database, accountId: string, id: string, now: number): Promise<{ object: "email"; id: string }> {
  const row = await findEmail(d1, accountId, id);
  const db = drizzle(d1);
  // The state check and the change are one statement, so the cron cannot send it in between.
  const updated = await db.update(emails).set({ state: "canceled", lastEvent: "canceled", nextAttemptAt: null })
    .where(and(eq(emails.id, row.id), eq(emails.state, "scheduled"))).returning({ id: emails.id });
  if (updated.length === 0) throw notScheduled(row.state, "canceled");
  await db.insert(emailEvents).values({ id: uuidv7(now), emailId: row.id, accountId: row.accountId, type: "canceled", createdAt: now });
  return { object: "email", id: row.id };
}

/** Every event of the email, oldest first. */
export async function listEmailEvents(d1: D1Database, accountId: string, id: string) {
  const row = await findEmail(d1, accountId, id);
  const rows = await drizzle(d1).select().from(emailEvents).where(eq(emailEvents.emailId, row.id)).orderBy(asc(emailEvents.id));
  return {
    object: "list" as const,
    has_more: false,
    data: rows.map((e) => ({ object: "email_event" as const, id: e.id, type: e.type, created_at: iso(e.createdAt)!, data: JSON.parse(e.dataJson) as Record<string, unknown> })),
  };
}
