// What an open or a click of a tracked email leaves behind: an email_events row (the email's
// history), the email's last_event, and the email.opened / email.clicked webhook event, in one
// D1 batch. Opens are counted once per email within a short window: mail clients and proxies
// fetch the same pixel several times for one reading.
import { and, desc, eq, gt } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { emailEvents, emailLinks, emails, type EmailRow } from "../db/schema.ts";
import { unsubscribeAddress } from "../contacts/contacts.ts";
import { announce, emailFacts, emailOutboxEvent, outboxInsert } from "../events/outbox.ts";
import { uuidv7 } from "../ids.ts";
import { rollupItem } from "../metrics/rollup.ts";

/** Pixel fetches of one email closer together than this are one open. */
export const OPEN_DEDUP_MS = 60_000;

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
  await record(env, email, "opened", { open: visitor }, now);
  return true;
}

export async function recordClick(env: RecordEnv, email: EmailRow, link: string, visitor: Visitor, now = Date.now()): Promise<void> {
  await record(env, email, "clicked", { click: { ...visitor, link } }, now);
}

async function record(
  env: RecordEnv,
  email: EmailRow,
  type: "opened" | "clicked",
  data: { open: Visitor } | { click: Visitor & { link: string } },
  now: number,
): Promise<void> {
  const db = drizzle(env.DB);
  const base = { email: emailFacts(email), at: now };
  const event = "open" in data
    ? emailOutboxEvent(email.accountId, { ...base, type: "email.opened", open: data.open }, now)
    : emailOutboxEvent(email.accountId, { ...base, type: "email.clicked", click: data.click }, now);
  const eventId = uuidv7(now);
  await db.batch([
    db.insert(emailEvents).values({ id: eventId, emailId: email.id, accountId: email.accountId, type, dataJson: JSON.stringify(data), createdAt: now }),
    db.update(emails).set({ lastEvent: type }).where(eq(emails.id, email.id)),
    outboxInsert(db, event),
    ...rollupItem(db, { accountId: email.accountId, domainId: email.domainId, broadcastId: email.broadcastId, at: now, events: [{ type }], engagement: { emailId: email.id, eventId } }),
  ]);
  await announce(env, [event]);
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
