// The webhook outbox: every event an enabled endpoint of the account subscribes to is written as
// a webhook_events row in the same D1 batch as the change it reports, with the payload as it is
// at that moment; an event nobody subscribes to is not written (the insert itself asks), so an
// account without endpoints pays no row, hint or fan-out per event, and an endpoint hears of
// what happens from its creation on. After the batch, a hint goes to the webhook queue; the
// webhook consumer fans each event out to the account's subscribed endpoints once. A lost hint
// is found by the cron (fanned_out_at still null), so an event is never lost between the change
// and its webhooks.
import type { BatchItem } from "drizzle-orm/batch";
import type { DrizzleD1Database } from "drizzle-orm/d1";
import { and, eq, sql, type SQL } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import { insertWebhookEvent, insertWebhookEventIfRecorded, outboxColumns, subscribedTo } from "../db/compiled.ts";
import { emailEvents, webhookEvents, type EmailRow } from "../db/schema.ts";
import { uuidv7 } from "../ids.ts";
import {
  contactEventPayload,
  domainEventPayload,
  emailEventPayload,
  type ContactEventType,
  type ContactFacts,
  type DomainEventType,
  type DomainFacts,
  type EmailEventInput,
  type EmailFacts,
  type WebhookEventType,
} from "../webhooks/payloads.ts";

/** What the webhook queue carries: an event to fan out, or one delivery to (re)attempt. */
export type WebhookQueueMessage = { kind: "event"; eventId: string } | { kind: "delivery"; deliveryId: string };

export interface OutboxEvent {
  id: string;
  accountId: string;
  type: WebhookEventType;
  /** The exact body endpoints receive. */
  body: string;
  createdAt: number;
}

export function outboxEvent(accountId: string, payload: { type: WebhookEventType; created_at: string }, now: number): OutboxEvent {
  return { id: uuidv7(now), accountId, type: payload.type, body: JSON.stringify(payload), createdAt: now };
}

export function outboxInsert(db: DrizzleD1Database, e: OutboxEvent): BatchItem<"sqlite"> {
  return db.insert(webhookEvents).select(db.select(outboxColumns(outboxRow(e))).from(sql`(select 1)`).where(subscribedTo(e.accountId, e.type)));
}

/** The webhook_events row of an outbox event. */
function outboxRow(e: OutboxEvent) {
  return { id: e.id, accountId: e.accountId, type: e.type, payloadJson: e.body, createdAt: e.createdAt };
}

/** Which event each compiled outbox statement writes, so that a hot path hints only the events
 * that wait for their fan-out (eventsToFanOut). */
const eventOf = new WeakMap<D1PreparedStatement, OutboxEvent>();

/** The same insert as a D1 statement compiled once (worker/db/compiled.ts), for the plain D1
 * batches of the hot paths. */
export function outboxStatement(d1: D1Database, e: OutboxEvent): D1PreparedStatement {
  const statement = insertWebhookEvent.bind(d1, outboxRow(e));
  eventOf.set(statement, e);
  return statement;
}

/** outboxInsertIfRecorded compiled once, for a settlement's events (delivery/consumer.ts). */
export function outboxStatementIfRecorded(d1: D1Database, e: OutboxEvent, emailEventId: string): D1PreparedStatement {
  const statement = insertWebhookEventIfRecorded.bind(d1, { ...outboxRow(e), emailEventId });
  eventOf.set(statement, e);
  return statement;
}

/** The events a batch of `statements` wrote waiting for their fan-out (an endpoint subscribes
 * to them): the ones worth a hint to the webhook queue. */
export function eventsToFanOut(statements: readonly D1PreparedStatement[], results: readonly D1Result[]): OutboxEvent[] {
  const out: OutboxEvent[] = [];
  for (let i = 0; i < statements.length; i++) {
    const e = eventOf.get(statements[i]!);
    if (e && (results[i]?.results[0] as { fanned_out_at?: unknown } | undefined)?.fanned_out_at === null) out.push(e);
  }
  return out;
}

/** The outbox row of an email event whose insert, earlier in the same batch, may have been
 * ignored as a duplicate: written only if email event `emailEventId` is there. */
export function outboxInsertIfRecorded(db: DrizzleD1Database, e: OutboxEvent, emailEventId: string): BatchItem<"sqlite"> {
  return outboxInsertIfRow(db, e, emailEvents, eq(emailEvents.id, emailEventId));
}

/** The outbox row of an event about a row whose insert, earlier in the same batch, may have been
 * ignored as a duplicate: written only if `table` has a row where `present`. */
export function outboxInsertIfRow(db: DrizzleD1Database, e: OutboxEvent, table: SQLiteTable, present: SQL): BatchItem<"sqlite"> {
  return db.insert(webhookEvents).select(db.select(outboxColumns(outboxRow(e))).from(table).where(and(present, subscribedTo(e.accountId, e.type))));
}

/** The facts every email event repeats, from the stored row. */
export function emailFacts(email: Pick<EmailRow, "id" | "createdAt" | "fromAddress" | "toJson" | "subject" | "messageId" | "tagsJson"> & { broadcastId?: string | null }): EmailFacts {
  return {
    id: email.id,
    createdAt: email.createdAt,
    from: email.fromAddress,
    to: JSON.parse(email.toJson) as string[],
    subject: email.subject,
    messageId: email.messageId,
    tags: JSON.parse(email.tagsJson) as { name: string; value: string }[],
    broadcastId: email.broadcastId ?? null,
  };
}

export function emailOutboxEvent(accountId: string, input: EmailEventInput, now: number): OutboxEvent {
  return outboxEvent(accountId, emailEventPayload(input), now);
}

export function domainOutboxEvent(accountId: string, type: DomainEventType, domain: DomainFacts, now: number): OutboxEvent {
  return outboxEvent(accountId, domainEventPayload(type, domain, now), now);
}

export function contactOutboxEvent(accountId: string, type: ContactEventType, contact: ContactFacts, now: number): OutboxEvent {
  return outboxEvent(accountId, contactEventPayload(type, contact, now), now);
}

/** announce for events written through drizzle's outboxInsert, which does not say whether it
 * wrote its row: one read of which types the accounts' enabled endpoints hear first, so that a
 * contact import of an account without endpoints sends no hint per contact. A read that fails
 * hints them all (the consumer skips what was not written). */
export async function announceHeard(env: Pick<Env, "DB" | "WEBHOOK_QUEUE">, events: readonly OutboxEvent[]): Promise<void> {
  if (events.length === 0) return;
  let heard: Set<string> | null = null;
  try {
    const accounts = [...new Set(events.map((e) => e.accountId))];
    const rows = await env.DB.prepare(
      `SELECT DISTINCT w.account_id AS account, j.value AS type FROM webhooks w, json_each(w.events_json) j WHERE w.status = 'enabled' AND w.account_id IN (${accounts.map(() => "?").join(", ")})`,
    ).bind(...accounts).all<{ account: string; type: string }>();
    heard = new Set(rows.results.map((r) => `${r.account} ${r.type}`));
  } catch (err) {
    console.error("webhook subscriptions not read; hinting every event", err instanceof Error ? err.message : String(err));
  }
  await announce(env, heard ? events.filter((e) => heard.has(`${e.accountId} ${e.type}`)) : events);
}

/** Whether an outbox insert's result wrote its row: it writes none when no enabled endpoint of
 * the account hears the event, and then there is nothing to hint. A result without counts is
 * taken as written: a spare hint costs a queue message, a missing one the cron's delay. */
export function outboxWritten(result: unknown): boolean {
  const changes = (result as Partial<D1Result> | undefined)?.meta?.changes;
  return typeof changes !== "number" || changes > 0;
}

/** Tells the webhook consumer about committed events. Best effort: the cron finds any event
 * whose hint was lost. */
export async function announce(env: Pick<Env, "WEBHOOK_QUEUE">, events: readonly OutboxEvent[]): Promise<void> {
  if (events.length === 0) return;
  try {
    for (let i = 0; i < events.length; i += 100) {
      await env.WEBHOOK_QUEUE.sendBatch(events.slice(i, i + 100).map((e) => ({ body: { kind: "event", eventId: e.id } satisfies WebhookQueueMessage })));
    }
  } catch (err) {
    console.error("webhook hint not sent; the cron will fan the events out", err instanceof Error ? err.message : String(err));
  }
}
