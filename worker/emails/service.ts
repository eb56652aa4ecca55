// Sent emails of an account: read, list, reschedule, cancel, events. The REST routes and the
// dashboard are both thin callers of these; sending itself is worker/sending's.
import { and, asc, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { emailEvents, emails, type EmailRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { uuidv7 } from "../ids.ts";
import { finishPage, pageOfList, pageQuery, type Page } from "../pagination.ts";
import type { TernConfig } from "../config.ts";
import { signedQuery, verifyLink, type LinkQuery } from "../inbound/links.ts";
import { broadcastContent } from "../broadcasts/content.ts";
import { ContentMissingError, loadBodies, type StoredAttachment as SentAttachment } from "../sending/content.ts";
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

/** The email with its bodies (from R2) and tags; a broadcast's email stores no body of its own,
 * so its body is the broadcast's, rendered for its recipient as the consumer renders it (one
 * D1 join; the unsubscribe link stays a placeholder, as in any stored body). */
export async function getEmail(env: Pick<Env, "DB" | "BLOBS">, accountId: string, id: string) {
  const row = await findEmail(env.DB, accountId, id);
  const bodies = row.broadcastId ? await broadcastBodies(env.DB, row) : await loadBodies(env.BLOBS, row);
  return { ...emailListItem(row), html: bodies.html, text: bodies.text, tags: JSON.parse(row.tagsJson) as { name: string; value: string }[] };
}

async function broadcastBodies(d1: D1Database, row: EmailRow): Promise<{ html: string | null; text: string | null }> {
  try {
    const { html, text } = await broadcastContent(d1, row);
    return { html, text };
  } catch (e) {
    if (e instanceof ContentMissingError) return { html: null, text: null }; // the broadcast is gone
    throw e;
  }
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

// Attachments of a sent email: their metadata with a signed, expiring download link (as
// received mail has), and the download the link points at.

/** A sent attachment's id: stored attachments have none, so it is derived from the email's id
 * and the attachment's position (a SHA-256, laid out as a version-8 UUID): stable, unguessable
 * without the email id, and the same in every answer. */
export async function sentAttachmentId(emailId: string, index: number): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(`tern-attachment:${emailId}:${index}`)));
  const b = digest.slice(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x80;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const hex = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export interface AttachmentView {
  object: "attachment";
  id: string;
  filename: string | null;
  content_type: string;
  content_id: string | null;
  content_disposition: string | null;
  size: number;
  download_url: string;
  expires_at: string;
}

async function sentAttachments(row: EmailRow): Promise<{ id: string; stored: SentAttachment }[]> {
  const list = JSON.parse(row.attachmentsJson) as SentAttachment[];
  return Promise.all(list.map(async (stored, i) => ({ id: await sentAttachmentId(row.id, i), stored })));
}

async function sentAttachmentView(config: TernConfig, origin: string, keyId: string, emailId: string, id: string, a: SentAttachment, now: number): Promise<AttachmentView> {
  const s = await signedQuery(config.masterKey, `sent-attachment:${emailId}:${id}`, keyId, now);
  return {
    object: "attachment",
    id,
    filename: a.filename,
    content_type: a.content_type,
    content_id: a.content_id,
    content_disposition: a.content_id ? "inline" : "attachment",
    size: a.size,
    download_url: `${origin}/emails/${emailId}/attachments/${id}?${s.query}`,
    expires_at: new Date(s.expiresAt).toISOString(),
  };
}

export async function listEmailAttachments(env: Pick<Env, "DB">, config: TernConfig, accountId: string, keyId: string, emailId: string, origin: string, page: Page, now = Date.now()) {
  const row = await findEmail(env.DB, accountId, emailId);
  const all = await sentAttachments(row);
  const views = await Promise.all(all.map((a) => sentAttachmentView(config, origin, keyId, row.id, a.id, a.stored, now)));
  return pageOfList(views, page);
}

export async function getEmailAttachment(env: Pick<Env, "DB">, config: TernConfig, accountId: string, keyId: string, emailId: string, attachmentId: string, origin: string, now = Date.now()): Promise<AttachmentView> {
  const row = await findEmail(env.DB, accountId, emailId);
  const found = (await sentAttachments(row)).find((a) => a.id === attachmentId.toLowerCase());
  if (!found) throw new ApiError("not_found", "Attachment not found.");
  return sentAttachmentView(config, origin, keyId, row.id, found.id, found.stored, now);
}

/** The bytes a signed link names; the link is the credential. */
export async function downloadEmailAttachment(env: Pick<Env, "DB" | "BLOBS">, config: TernConfig, emailId: string, attachmentId: string, q: LinkQuery, now = Date.now()) {
  const invalid = () => new ApiError("not_found", "This download link is invalid or has expired.");
  if (!(await verifyLink(env.DB, config.masterKey, `sent-attachment:${emailId}:${attachmentId}`, q, now))) throw invalid();
  const row = await drizzle(env.DB).select().from(emails).where(eq(emails.id, emailId)).get();
  const found = row ? (await sentAttachments(row)).find((a) => a.id === attachmentId) : undefined;
  const obj = found ? await env.BLOBS.get(found.stored.key) : null;
  if (!found || !obj) throw invalid();
  return { attachment: found.stored, body: obj };
}
