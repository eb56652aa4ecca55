// Broadcasts (Resend's /broadcasts): one message to a segment's contacts, optionally scoped to a
// topic. A draft may be edited and deleted; sending it (now or at a time, in natural language
// too) hands it to the fan-out (fanout.ts), which records one email per eligible contact.
// Status: draft -> scheduled -> queued -> sending -> sent, or canceled; `failed` (tern's own)
// when the fan-out cannot go on, with the reason in status_reason.
import { and, eq, inArray, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Principal } from "../auth.ts";
import { broadcastRecipients, broadcasts, contacts, emailEvents, segments, topics, type BroadcastRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { uuidv7 } from "../ids.ts";
import { parseMailbox } from "../mime/address.ts";
import { finishPage, pageQuery, type Page } from "../pagination.ts";
import { parseScheduledAt } from "../sending/schedule.ts";
import { authorizeSender } from "../sending/sender.ts";
import { healthPauseOn } from "../config.ts";
import { assertSendingAllowed } from "../metrics/health.ts";
import { htmlToText } from "../mime/html-to-text.ts";
import { assertFitsRow, utf8Bytes } from "../db/row-size.ts";

export type BroadcastStatus = "draft" | "scheduled" | "queued" | "sending" | "sent" | "canceled" | "failed";

export interface BroadcastFields {
  name?: string | null;
  segmentId?: string;
  topicId?: string | null;
  from?: string;
  subject?: string;
  replyTo?: string[];
  previewText?: string | null;
  html?: string | null;
  text?: string | null;
  /** The dashboard editor's document that html and text were rendered from. A change of html
   * or text without one drops the stored document: it would no longer match the body. */
  document?: string | null;
}

export interface BroadcastMessage {
  broadcastId: string;
}

async function requireSegment(db: D1Database, accountId: string, id: string): Promise<void> {
  const row = await drizzle(db).select({ id: segments.id }).from(segments).where(and(eq(segments.accountId, accountId), eq(segments.id, id))).get();
  if (!row) throw new ApiError("validation_error", `\`segment_id\` names segment ${id}, which this account does not have.`);
}

async function requireTopic(db: D1Database, accountId: string, id: string): Promise<void> {
  const row = await drizzle(db).select({ id: topics.id }).from(topics).where(and(eq(topics.accountId, accountId), eq(topics.id, id))).get();
  if (!row) throw new ApiError("validation_error", `\`topic_id\` names topic ${id}, which this account does not have.`);
}

async function checkReferences(db: D1Database, accountId: string, f: BroadcastFields): Promise<void> {
  if (f.segmentId !== undefined) await requireSegment(db, accountId, f.segmentId);
  if (f.topicId) await requireTopic(db, accountId, f.topicId);
}

/** What a new draft holds beside its content: nothing scheduled, sent or fanned out yet. A
 * created broadcast and a duplicate both start here. */
function draftState(now: number) {
  return {
    status: "draft" as const, statusReason: null, scheduledAt: null, sentAt: null, checkpoint: null, recipientCount: 0,
    domainId: null, region: null, leaseUntil: null, createdAt: now, updatedAt: now,
  };
}

/** The body a broadcast's row keeps (its html, text and editor document) fits the row. */
function checkBodySize(body: { html: string | null; text: string | null; document: string | null }): void {
  assertFitsRow(utf8Bytes(body.html) + utf8Bytes(body.text) + utf8Bytes(body.document), "The broadcast's html, text and editor document",
    "Make the html smaller (link images rather than embedding them), or leave out text: tern derives it from the html.");
}

export async function createBroadcast(db: D1Database, principal: Principal, f: BroadcastFields & { segmentId: string; from: string; subject: string }, now = Date.now()): Promise<BroadcastRow> {
  checkBodySize({ html: f.html ?? null, text: f.text ?? null, document: f.document ?? null });
  await checkReferences(db, principal.accountId, f);
  const row: BroadcastRow = {
    id: uuidv7(now),
    accountId: principal.accountId,
    name: f.name ?? null,
    segmentId: f.segmentId,
    topicId: f.topicId ?? null,
    fromAddress: f.from,
    subject: f.subject,
    replyToJson: JSON.stringify(f.replyTo ?? []),
    previewText: f.previewText ?? null,
    html: f.html ?? null,
    text: f.text ?? null,
    documentJson: f.document ?? null,
    ...draftState(now),
  };
  await drizzle(db).insert(broadcasts).values(row);
  return row;
}

export async function findBroadcast(db: D1Database, accountId: string, id: string): Promise<BroadcastRow | undefined> {
  return drizzle(db).select().from(broadcasts).where(and(eq(broadcasts.accountId, accountId), eq(broadcasts.id, id))).get();
}

export async function listBroadcasts(db: D1Database, accountId: string, page: Page) {
  const q = pageQuery(broadcasts.id, page, eq(broadcasts.accountId, accountId));
  return finishPage(await drizzle(db).select().from(broadcasts).where(q.where).orderBy(q.orderBy).limit(q.limit), page);
}

const notDraft = (row: BroadcastRow, what: string) =>
  new ApiError("validation_error", `Only a draft broadcast can be ${what}; this one is ${row.status}.`);

/** Changes a draft; the update is conditional on it still being a draft (a send racing it wins). */
export async function updateBroadcast(db: D1Database, accountId: string, id: string, f: BroadcastFields, now = Date.now()): Promise<BroadcastRow | undefined> {
  const row = await findBroadcast(db, accountId, id);
  if (!row) return undefined;
  if (row.status !== "draft") throw notDraft(row, "changed");
  await checkReferences(db, accountId, f);
  const set: Partial<BroadcastRow> = { updatedAt: now };
  if (f.name !== undefined) set.name = f.name;
  if (f.segmentId !== undefined) set.segmentId = f.segmentId;
  if (f.topicId !== undefined) set.topicId = f.topicId;
  if (f.from !== undefined) set.fromAddress = f.from;
  if (f.subject !== undefined) set.subject = f.subject;
  if (f.replyTo !== undefined) set.replyToJson = JSON.stringify(f.replyTo);
  if (f.previewText !== undefined) set.previewText = f.previewText;
  if (f.html !== undefined) set.html = f.html;
  if (f.text !== undefined) set.text = f.text;
  if (f.document !== undefined) set.documentJson = f.document;
  else if (f.html !== undefined || f.text !== undefined) set.documentJson = null;
  // The body as the change leaves it.
  const after = { ...row, ...set };
  checkBodySize({ html: after.html, text: after.text, document: after.documentJson });
  const changed = await drizzle(db).update(broadcasts).set(set).where(and(eq(broadcasts.id, row.id), eq(broadcasts.status, "draft"))).returning();
  if (changed.length === 0) throw notDraft((await findBroadcast(db, accountId, id))!, "changed");
  return changed[0];
}

/** Why a broadcast may not be deleted, or null when it may: a draft, or a canceled or failed
 * broadcast that recorded no email (Resend deletes drafts only; tern also lets these dead ends
 * go, since nothing sent refers to them). One that reached anyone stays: its emails, recipients
 * and metrics name it. */
export function undeletable(row: BroadcastRow): ApiError | null {
  if (row.status === "draft") return null;
  if ((row.status === "canceled" || row.status === "failed") && row.recipientCount === 0) return null;
  if (row.status === "canceled" || row.status === "failed") {
    return new ApiError("validation_error", `This broadcast is ${row.status} after reaching ${row.recipientCount} recipient${row.recipientCount === 1 ? "" : "s"}; it stays so their emails and its metrics keep their broadcast. Only a draft, or a canceled or failed broadcast that reached nobody, can be deleted.`);
  }
  return new ApiError("validation_error", `Only a draft broadcast (or a canceled or failed one that reached nobody) can be deleted; this one is ${row.status}${["scheduled", "queued", "sending"].includes(row.status) ? ": cancel it first" : ""}.`);
}

export async function deleteBroadcast(db: D1Database, accountId: string, id: string): Promise<BroadcastRow | undefined> {
  const row = await findBroadcast(db, accountId, id);
  if (!row) return undefined;
  const refused = undeletable(row);
  if (refused) throw refused;
  // Conditional on the state read: a send or a fan-out page racing the delete wins.
  const gone = await drizzle(db).delete(broadcasts)
    .where(and(eq(broadcasts.id, row.id), eq(broadcasts.status, row.status), eq(broadcasts.recipientCount, 0))).returning({ id: broadcasts.id });
  if (gone.length === 0) throw undeletable((await findBroadcast(db, accountId, id))!) ?? notDraft(row, "deleted");
  return row;
}

export async function duplicateBroadcast(db: D1Database, principal: Principal, id: string, now = Date.now()): Promise<BroadcastRow | undefined> {
  const row = await findBroadcast(db, principal.accountId, id);
  if (!row) return undefined;
  const copy: BroadcastRow = {
    ...row,
    id: uuidv7(now),
    name: row.name === null ? null : `${row.name} (Copy)`.slice(0, 256),
    ...draftState(now),
  };
  await drizzle(db).insert(broadcasts).values(copy);
  return copy;
}

/**
 * Sends a draft now (queued, and the fan-out is told) or at `scheduledAt` (scheduled; the cron
 * queues it when due). Everything a send needs is checked first: a sender on a verified domain,
 * a body, a segment and topic that still exist, and (with HEALTH_PAUSE on) an account whose
 * bounce and complaint rates are under the limits, as for any send.
 */
export async function sendBroadcast(env: Pick<Env, "DB" | "BROADCAST_QUEUE" | "HEALTH_PAUSE">, principal: Principal, id: string, scheduledAt: string | undefined, now = Date.now()): Promise<BroadcastRow | undefined> {
  const row = await findBroadcast(env.DB, principal.accountId, id);
  if (!row) return undefined;
  if (row.status !== "draft") throw new ApiError("validation_error", `Only a draft broadcast can be sent; this one is ${row.status}.`);
  const problems = await sendProblems(env, principal, row, now);
  if (problems.length > 0) throw problems[0];
  let at: number | null = null;
  if (scheduledAt !== undefined) {
    const parsed = parseScheduledAt(scheduledAt, new Date(now));
    if (!parsed.ok) throw new ApiError("validation_error", parsed.message);
    at = parsed.value.getTime();
  }
  const status = at !== null && at > now ? "scheduled" : "queued";
  const changed = await drizzle(env.DB).update(broadcasts).set({ status, scheduledAt: at, updatedAt: now })
    .where(and(eq(broadcasts.id, row.id), eq(broadcasts.status, "draft"))).returning();
  if (changed.length === 0) throw new ApiError("validation_error", "Only a draft broadcast can be sent; this one was sent meanwhile.");
  if (status === "queued") await hint(env, row.id);
  return changed[0];
}

/** Everything that keeps a draft from being sent, in the order a send reports them (it throws
 * the first): missing fields, no body, a sender whose domain is not verified, a segment or topic
 * that is gone, an account over its health limits. The dashboard's pre-send review lists them all. */
export async function sendProblems(env: Pick<Env, "DB" | "HEALTH_PAUSE">, principal: Principal, row: BroadcastRow, now = Date.now()): Promise<ApiError[]> {
  const problems: ApiError[] = [];
  const collect = (err: unknown) => {
    if (!(err instanceof ApiError)) throw err;
    problems.push(err);
  };
  const missing = [!row.fromAddress && "`from`", !row.subject && "`subject`", !row.segmentId && "`segment_id`"].filter(Boolean);
  if (missing.length > 0) problems.push(new ApiError("missing_required_field", `The broadcast needs ${missing.join(", ")} before it can be sent.`));
  const empty = emptyBody(row);
  if (empty) problems.push(new ApiError(row.html || row.text ? "validation_error" : "missing_required_field", empty));
  const from = row.fromAddress ? parseMailbox(row.fromAddress) : null;
  if (from) await authorizeSender(env.DB, principal, from.email).catch(collect);
  if (row.segmentId) await requireSegment(env.DB, principal.accountId, row.segmentId).catch(collect);
  // A topic deleted since the draft was written: sending without it would ignore the opt-outs.
  if (row.topicId) await requireTopic(env.DB, principal.accountId, row.topicId).catch(collect);
  if (healthPauseOn(env)) await assertSendingAllowed(env.DB, principal.accountId, now).catch(collect);
  return problems;
}

/** Whether html shows a reader anything: text (placeholders count) or an image. */
export function htmlShowsSomething(html: string): boolean {
  if (/<img\b[^>]*\bsrc\s*=\s*["']?[^\s"'>]/i.test(html)) return true;
  return htmlToText(html).replace(/[\u200b-\u200d\u2060\ufeff]/g, "").trim() !== "";
}

/** Why a body would show its readers nothing, or null when it shows something. The html is
 * what mail apps show when there is one, so an html with nothing in it is empty even beside a
 * text part. The one rule for an empty body: a broadcast's send, its review and its test send,
 * and a template's publish, its review and its test send all ask it (`kind` and `before` only
 * word the message). */
export function emptyBody(row: Pick<BroadcastRow, "html" | "text">, kind: "broadcast" | "template" = "broadcast", before: "sending" | "publishing" = "sending"): string | null {
  if (row.html) {
    return htmlShowsSomething(row.html) ? null
      : `The ${kind}'s body is empty: its html shows no text or image. Write the message in the editor (or give \`html\` with content through the API) before ${before}.`;
  }
  if (row.text && row.text.trim()) return null;
  return row.text === null || row.text === undefined
    ? `The ${kind} needs \`html\` or \`text\` before it can be ${before === "sending" ? "sent" : "published"}: write the message in the editor, or give one through the API.`
    : `The ${kind}'s body is empty: its text is blank. Write the message in the editor (or give \`html\` or \`text\` with content through the API) before ${before}.`;
}

/** Tells the fan-out about a broadcast; best effort, the cron finds any it missed. */
export async function hint(env: Pick<Env, "BROADCAST_QUEUE">, broadcastId: string): Promise<void> {
  try {
    await env.BROADCAST_QUEUE.send({ broadcastId } satisfies BroadcastMessage);
  } catch (err) {
    console.error("broadcast hint not sent; the cron will start it", broadcastId, err instanceof Error ? err.message : String(err));
  }
}

/** Cancels a broadcast that has not finished: recipients the fan-out has not reached get
 * nothing; emails it already recorded were accepted and go out. */
export async function cancelBroadcast(db: D1Database, accountId: string, id: string, now = Date.now()): Promise<BroadcastRow | undefined> {
  const row = await findBroadcast(db, accountId, id);
  if (!row) return undefined;
  const changed = await drizzle(db).update(broadcasts).set({ status: "canceled", updatedAt: now, leaseUntil: null })
    .where(and(eq(broadcasts.id, row.id), inArray(broadcasts.status, ["scheduled", "queued", "sending"]))).returning();
  if (changed.length === 0) {
    const now = await findBroadcast(db, accountId, id);
    throw new ApiError("validation_error", `Only a scheduled, queued or sending broadcast can be canceled; this one is ${now!.status}.`);
  }
  return changed[0];
}

// --- Recipients and clicked links --------------------------------------------------------------

export const RECIPIENT_TYPES = ["sent", "delivered", "opened", "clicked", "bounced", "complained", "unsubscribed", "suppressed"] as const;
export type RecipientType = (typeof RECIPIENT_TYPES)[number];

export interface RecipientRow {
  emailId: string;
  contactId: string;
  email: string;
  count: number;
  dataJson: string;
}

/** The broadcast's recipients with at least one event of `type` (unsubscribed: whose contact is
 * now unsubscribed), one row per recipient; the row id is its email's id. */
export async function listRecipients(db: D1Database, accountId: string, broadcastId: string, type: RecipientType, page: Page, email?: string) {
  const d = drizzle(db);
  const q = pageQuery(broadcastRecipients.emailId, page, and(eq(broadcastRecipients.broadcastId, broadcastId), eq(broadcastRecipients.accountId, accountId), email ? eq(broadcastRecipients.email, email.trim().toLowerCase()) : undefined));
  const base = { emailId: broadcastRecipients.emailId, contactId: broadcastRecipients.contactId, email: broadcastRecipients.email };
  if (type === "unsubscribed") {
    const rows = await d.select({ ...base, count: sql<number>`1`, dataJson: sql<string>`'{}'` }).from(broadcastRecipients)
      .innerJoin(contacts, and(eq(contacts.id, broadcastRecipients.contactId), eq(contacts.unsubscribed, true)))
      .where(q.where).orderBy(q.orderBy).limit(q.limit);
    return finishPage(rows, page);
  }
  const rows = await d.select({ ...base, count: sql<number>`count(*)`, dataJson: sql<string>`json_group_array(json(${emailEvents.dataJson}))` }).from(broadcastRecipients)
    .innerJoin(emailEvents, and(eq(emailEvents.emailId, broadcastRecipients.emailId), eq(emailEvents.type, type)))
    .where(q.where).groupBy(broadcastRecipients.emailId).orderBy(q.orderBy).limit(q.limit);
  return finishPage(rows, page);
}

/** Every link clicked in the broadcast's emails: total and unique (per recipient) clicks. */
export async function clickedLinks(db: D1Database, accountId: string, broadcastId: string) {
  const rows = await drizzle(db).select({
    url: sql<string>`json_extract(${emailEvents.dataJson}, '$.click.link')`,
    clicks: sql<number>`count(*)`,
    unique: sql<number>`count(distinct ${emailEvents.emailId})`,
  }).from(broadcastRecipients)
    .innerJoin(emailEvents, and(eq(emailEvents.emailId, broadcastRecipients.emailId), eq(emailEvents.type, "clicked")))
    .where(and(eq(broadcastRecipients.broadcastId, broadcastId), eq(broadcastRecipients.accountId, accountId)))
    .groupBy(sql`1`).orderBy(sql`2 desc`, sql`1`);
  return rows;
}
