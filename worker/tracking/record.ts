// What an open or a click of a tracked email leaves behind: an email_events row (the email's
// history), the email's last_event, and the email.opened / email.clicked webhook event, in one
// D1 batch. Opens are counted once per email within a short window: mail clients and proxies
// fetch the same pixel several times for one reading. Clicks are counted once per email, link
// and client within a window, and at most CLICKS_PER_LINK_PER_WINDOW times per link and window,
// so whoever holds one link cannot flood the account's events and webhooks; the redirect
// itself never waits on or depends on either.
import { and, desc, eq, gt, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { emailEvents, emailLinks, emails, type EmailRow } from "../db/schema.ts";
import { toHex } from "../bytes.ts";
import { unsubscribeAddress } from "../contacts/contacts.ts";
import { announce, outboxWritten, emailFacts, emailOutboxEvent, outboxInsertIfRecorded } from "../events/outbox.ts";
import { uuidv7 } from "../ids.ts";
import { rollupItem } from "../metrics/rollup.ts";

/** Pixel fetches of one email closer together than this are one open. */
export const OPEN_DEDUP_MS = 60_000;
/** Clicks are counted per window of this length (windows start on the clock's minute). */
export const CLICK_WINDOW_MS = 60_000;
/** The most clicks one link of one email records per window, whoever clicks. */
export const CLICKS_PER_LINK_PER_WINDOW = 10;
/** The most clicks one email records per window, over all its links. */
export const CLICKS_PER_EMAIL_PER_WINDOW = 50;

export interface Visitor {
  ipAddress: string;
  userAgent: string;
}

/** The visitor as the request shows it: Cloudflare's client address and the browser's agent. */
export function visitorOf(req: Request): Visitor {
  return {
    ipAddress: req.headers.get("cf-connecting-ip") ?? "",
    userAgent: (req.headers.get("user-agent") ?? "").slice(0, 512),
  };
}

export async function loadEmail(d1: D1Database, emailId: string): Promise<EmailRow | undefined> {
  return drizzle(d1).select().from(emails).where(eq(emails.id, emailId)).get();
}

/** The original links of a tracked email, by link index; null when it has none stored. */
export async function loadLinks(d1: D1Database, emailId: string): Promise<string[] | null> {
  const row = await drizzle(d1).select({ linksJson: emailLinks.linksJson }).from(emailLinks).where(eq(emailLinks.emailId, emailId)).get();
  return row ? (JSON.parse(row.linksJson) as string[]) : null;
}

type RecordEnv = Pick<Env, "DB" | "WEBHOOK_QUEUE">;

/** Records an open; false when it repeats a recent one of the same email. */
export async function recordOpen(env: RecordEnv, email: EmailRow, visitor: Visitor, now = Date.now()): Promise<boolean> {
  const db = drizzle(env.DB);
  const recent = await db.select({ id: emailEvents.id }).from(emailEvents)
    .where(and(eq(emailEvents.emailId, email.id), eq(emailEvents.type, "opened"), gt(emailEvents.createdAt, now - OPEN_DEDUP_MS)))
    .orderBy(desc(emailEvents.id)).limit(1).get();
  if (recent) return false;
  // Concurrent fetches all pass the read above: the window's key lets one of them record.
  return record(env, email, "opened", { open: visitor }, now, { key: `open:${Math.floor(now / OPEN_DEDUP_MS)}` });
}

/** Records a click; false when the same client clicked this link in this window, or the
 * link has recorded its most clicks for the window. Decided by the insert itself (a unique
 * dedupe key and a count in one statement), so concurrent clicks cannot all pass a check. */
export async function recordClick(env: RecordEnv, email: EmailRow, linkIndex: number, link: string, visitor: Visitor, now = Date.now()): Promise<boolean> {
  // click:<window>:<link index>:<client>; one window's keys share click:<window>:, and one
  // window's keys of a link click:<window>:<link index>:.
  const emailScope = `click:${Math.floor(now / CLICK_WINDOW_MS)}:`;
  const scope = `${emailScope}${linkIndex}:`;
  const client = new TextEncoder().encode(`${visitor.ipAddress}\n${visitor.userAgent}`);
  const clientHash = toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", client), 0, 12));
  return record(env, email, "clicked", { click: { ...visitor, link } }, now, { key: scope + clientHash, scope, max: CLICKS_PER_LINK_PER_WINDOW, outer: { scope: emailScope, max: CLICKS_PER_EMAIL_PER_WINDOW } });
}

/** An event recorded only when no event of the email has `key`, and (with a scope) fewer
 * than `max` have a key that starts with `scope`. */
interface Limit {
  key: string;
  scope?: string;
  max?: number;
  /** A second, wider scope and its own maximum (the email's clicks of the window). */
  outer?: { scope: string; max: number };
}

async function record(
  env: RecordEnv,
  email: EmailRow,
  type: "opened" | "clicked",
  data: { open: Visitor } | { click: Visitor & { link: string } },
  now: number,
  limit: Limit,
): Promise<boolean> {
  const db = drizzle(env.DB);
  const base = { email: emailFacts(email), at: now };
  const event = "open" in data
    ? emailOutboxEvent(email.accountId, { ...base, type: "email.opened", open: data.open }, now)
    : emailOutboxEvent(email.accountId, { ...base, type: "email.clicked", click: data.click }, now);
  const row = { id: uuidv7(now), emailId: email.id, accountId: email.accountId, type, dataJson: JSON.stringify(data), createdAt: now };
  // The keys of a scope sort between the scope and the scope with its last ":" made ";", so
  // the count reads a range of the (email_id, dedupe_key) index.
  const under = (scope: string, max: number) =>
    sql`(select count(*) from ${emailEvents} where ${emailEvents.emailId} = ${email.id} and ${emailEvents.dedupeKey} >= ${scope} and ${emailEvents.dedupeKey} < ${`${scope.slice(0, -1)};`}) < ${max}`;
  const within = limit.scope === undefined
    ? sql`1`
    : limit.outer === undefined
      ? under(limit.scope, limit.max ?? 1)
      : sql`${under(limit.scope, limit.max ?? 1)} and ${under(limit.outer.scope, limit.outer.max)}`;
  const recorded = sql`exists (select 1 from ${emailEvents} where ${emailEvents.id} = ${row.id})`;
  const [inserted, , outboxed] = await db.batch([
    db.insert(emailEvents).select(
      db.select({
        id: sql`${row.id}`.as("id"), emailId: sql`${row.emailId}`.as("email_id"), accountId: sql`${row.accountId}`.as("account_id"),
        type: sql`${row.type}`.as("type"), dataJson: sql`${row.dataJson}`.as("data_json"), createdAt: sql`${row.createdAt}`.as("created_at"),
        dedupeKey: sql`${limit.key}`.as("dedupe_key"),
      }).from(emails).where(and(eq(emails.id, email.id), within)),
    ).onConflictDoNothing().returning({ id: emailEvents.id }),
    db.update(emails).set({ lastEvent: type }).where(and(eq(emails.id, email.id), recorded)),
    outboxInsertIfRecorded(db, event, row.id),
    // Counted only when the click or open was recorded (a flood or a repeat counts nothing).
    ...rollupItem(db, { accountId: email.accountId, domainId: email.domainId, broadcastId: email.broadcastId, at: now, events: [{ type }], engagement: { emailId: email.id, eventId: row.id }, ifRecorded: row.id }),
  ]);
  if (inserted.length === 0) return false;
  if (outboxWritten(outboxed)) await announce(env, [event]);
  return true;
}

/** A one-click unsubscribe (RFC 8058) from an email tern sent: the contact change, and an
 * `unsubscribed` event on the email (counted by the metrics) in the same batch. Only a real
 * change records the event: unsubscribing twice counts once. */
export async function recordUnsubscribe(env: RecordEnv, claim: { accountId: string; emailId: string; recipient: string }, now = Date.now()): Promise<void> {
  const db = drizzle(env.DB);
  const email = await loadEmail(env.DB, claim.emailId);
  const eventId = uuidv7(now);
  const data = { recipients: [claim.recipient] };
  const alongside = email && email.accountId === claim.accountId
    ? [
        db.insert(emailEvents).values({ id: eventId, emailId: email.id, accountId: email.accountId, type: "unsubscribed", dataJson: JSON.stringify(data), createdAt: now }),
        ...rollupItem(db, { accountId: email.accountId, domainId: email.domainId, broadcastId: email.broadcastId, at: now, events: [{ type: "unsubscribed", data }] }),
      ]
    : [];
  await unsubscribeAddress(env, claim.accountId, claim.recipient, now, alongside);
}
