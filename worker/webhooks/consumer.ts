// The webhook queue's consumer (contract section 6). An `event` message fans one outbox event
// out to the account's enabled endpoints subscribed to its type (one delivery row each, in one
// D1 batch with the event's fanned_out_at) and attempts them; a `delivery` message attempts one
// delivery again when it is due. Every attempt is signed with the endpoint's live secrets,
// bounded in time, recorded in the attempt log, and followed by the next step of the retry
// schedule, by success, or by giving up; the endpoint's health is updated with it.
//
// A claim (a conditional UPDATE on the delivery's attempt count) decides who attempts, so a
// redelivered or duplicated message never attempts the same delivery twice at once.
import { and, eq, inArray, isNull, lt, lte, sql } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { drizzle } from "drizzle-orm/d1";
import { readConfig, type TernConfig } from "../config.ts";
import { claimDelivery, enabledHookRows, enabledHooks, insertWebhookAttempt, insertWebhookDelivery, markDelivered, markFannedOut, pendingEventRows, pendingEvents, prepared, statementOf } from "../db/compiled.ts";
import { webhookDeliveries, webhookEvents, webhooks, type WebhookDeliveryRow, type WebhookRow } from "../db/schema.ts";
import type { WebhookQueueMessage } from "../events/outbox.ts";
import { uuidv7 } from "../ids.ts";
import { attemptDelivery, type AttemptRecord } from "./attempt.ts";
import { endpointPolicy } from "./endpoint.ts";
import { afterFailedAttempt, ATTEMPT_TIMEOUT_MS, DISABLE_AFTER_MS, endpointHealthAfter } from "./retry.ts";
import { liveSecrets } from "./secrets.ts";
import { signWebhook } from "./signing.ts";

/** The clock and the network, injectable so a test can run the whole schedule in moments. */
export interface WebhookDeps {
  now?: () => number;
  fetch?: typeof fetch;
}

/** Attempts in flight at once (a Worker invocation may hold 6 connections). */
export const PARALLEL_ATTEMPTS = 6;
/** A queue message may arrive a little before its attempt is due. */
const EARLY_SLACK_MS = 2_000;
/** How long a claimed attempt owns its delivery; past this the cron sends it again. */
export const ATTEMPT_LEASE_MS = ATTEMPT_TIMEOUT_MS + 50_000;
/** The longest delay Queues accepts. */
const MAX_QUEUE_DELAY_S = 12 * 3600;
/** An event not fanned out this long after it was written lost its queue hint. */
export const UNANNOUNCED_AFTER_MS = 30_000;
/** A pending delivery this far past its time lost its queue message (or its consumer crashed). */
export const OVERDUE_AFTER_MS = 2 * 60_000;

/** What a delivery needs for an attempt: itself, its endpoint and the event's body. */
export interface DeliveryWork {
  delivery: WebhookDeliveryRow;
  webhook: WebhookRow;
  /** The exact body; null when the event is gone. */
  body: string | null;
}

/** After an attempt: seconds until the next one, or null when the delivery is settled. */
export type AttemptOutcome = { record: AttemptRecord; attempt: number; retryInSeconds: number | null };

export async function consumeWebhookBatch(batch: MessageBatch<WebhookQueueMessage>, env: Env, deps: WebhookDeps = {}): Promise<void> {
  const config = readConfig(env);
  const now = deps.now ?? Date.now;
  const eventMessages = batch.messages.filter((m) => m.body.kind === "event");
  const deliveryMessages = batch.messages.filter((m) => m.body.kind === "delivery");

  let fanned: string[] = [];
  try {
    fanned = await fanOut(env.DB, [...new Set(eventMessages.map((m) => (m.body as { eventId: string }).eventId))], now());
    for (const m of eventMessages) m.ack();
  } catch (err) {
    console.error("webhook fan-out failed; will retry", err instanceof Error ? err.message : String(err));
    for (const m of eventMessages) m.retry({ delaySeconds: 30 });
  }

  // One job per delivery; a message repeated in the batch is acknowledged once its twin is handled.
  const byId = new Map<string, Message<WebhookQueueMessage> | null>();
  for (const id of fanned) byId.set(id, null);
  for (const m of deliveryMessages) {
    const id = (m.body as { deliveryId: string }).deliveryId;
    if (byId.has(id)) m.ack();
    else byId.set(id, m);
  }
  const outcomes = await attemptDue(env, config, [...byId.keys()], deps);

  const later: { body: WebhookQueueMessage; delaySeconds: number }[] = [];
  for (const [id, message] of byId) {
    const outcome = outcomes.get(id);
    if (outcome === "error") {
      if (message) message.retry({ delaySeconds: 30 });
      // A fresh delivery whose attempt broke stays pending: the cron finds it when it is overdue.
      continue;
    }
    const delay = outcome?.retryInSeconds ?? null;
    if (delay === null) message?.ack();
    else if (message) message.retry({ delaySeconds: delay });
    else later.push({ body: { kind: "delivery", deliveryId: id }, delaySeconds: delay });
  }
  await sendLater(env, later);
}

/** Schedules deliveries' next attempts; a lost message is found by the cron. */
async function sendLater(env: Pick<Env, "WEBHOOK_QUEUE">, messages: { body: WebhookQueueMessage; delaySeconds: number }[]): Promise<void> {
  try {
    for (let i = 0; i < messages.length; i += 100) await env.WEBHOOK_QUEUE.sendBatch(messages.slice(i, i + 100));
  } catch (err) {
    console.error("webhook retry not enqueued; the cron will find it", err instanceof Error ? err.message : String(err));
  }
}

function subscribed(webhook: Pick<WebhookRow, "eventsJson">, type: string): boolean {
  return (JSON.parse(webhook.eventsJson) as string[]).includes(type);
}

/**
 * Creates the deliveries of events not yet fanned out, one per enabled endpoint of the
 * account subscribed to the event's type, and marks the events fanned out, in one D1 batch.
 * Answers the ids of the deliveries it created (the unique (webhook, event) index ignores any
 * a concurrent fan-out created first; attempting those finds nothing to claim).
 */
export async function fanOut(d1: D1Database, eventIds: string[], t: number): Promise<string[]> {
  if (eventIds.length === 0) return [];
  const events: { id: string; accountId: string; type: string }[] = [];
  for (let i = 0; i < eventIds.length; i += 90) {
    events.push(...pendingEventRows(await prepared(d1, pendingEvents(eventIds.slice(i, i + 90))).raw()));
  }
  if (events.length === 0) return [];
  const accountIds = [...new Set(events.map((e) => e.accountId))];
  const hooks: Pick<WebhookRow, "id" | "accountId" | "eventsJson">[] = [];
  for (let i = 0; i < accountIds.length; i += 90) {
    hooks.push(...enabledHookRows(await prepared(d1, enabledHooks(accountIds.slice(i, i + 90))).raw()));
  }
  const created: string[] = [];
  // Compiled once (worker/db/compiled.ts): these run for every event.
  const statements: D1PreparedStatement[] = [];
  for (const event of events) {
    for (const hook of hooks) {
      if (hook.accountId !== event.accountId || !subscribed(hook, event.type)) continue;
      const id = uuidv7(t);
      created.push(id);
      statements.push(insertWebhookDelivery.bind(d1, { id, webhookId: hook.id, accountId: event.accountId, eventId: event.id, eventType: event.type, at: t }));
    }
  }
  // One statement marks a whole chunk fanned out, in the batch that creates its deliveries.
  for (let i = 0; i < events.length; i += 90) {
    const ids = events.slice(i, i + 90).map((e) => e.id);
    statements.push(prepared(d1, markFannedOut(ids, t)));
  }
  await d1.batch(statements);
  return created;
}

/** Loads deliveries with their endpoint and event body. */
export async function loadWork(d1: D1Database, deliveryIds: string[]): Promise<DeliveryWork[]> {
  const db = drizzle(d1);
  const out: DeliveryWork[] = [];
  for (let i = 0; i < deliveryIds.length; i += 90) {
    const rows = await db.select({ delivery: webhookDeliveries, webhook: webhooks, body: webhookEvents.payloadJson })
      .from(webhookDeliveries)
      .innerJoin(webhooks, eq(webhooks.id, webhookDeliveries.webhookId))
      .leftJoin(webhookEvents, eq(webhookEvents.id, webhookDeliveries.eventId))
      .where(inArray(webhookDeliveries.id, deliveryIds.slice(i, i + 90)));
    out.push(...rows.map((r) => ({ delivery: r.delivery, webhook: r.webhook, body: r.body ?? null })));
  }
  return out;
}

/**
 * Attempts the given deliveries that are pending and due, a few at a time. Deliveries that
 * are settled, not yet due (a newer message is on its way) or claimed by someone else are
 * left alone (no entry, or retryInSeconds null).
 */
export async function attemptDue(env: Env, config: TernConfig, deliveryIds: string[], deps: WebhookDeps = {}): Promise<Map<string, AttemptOutcome | null | "error">> {
  const now = deps.now ?? Date.now;
  const results = new Map<string, AttemptOutcome | null | "error">();
  const work = (await loadWork(env.DB, deliveryIds)).filter((w) => {
    const due = w.delivery.status === "pending" && (w.delivery.nextAttemptAt ?? 0) <= now() + EARLY_SLACK_MS;
    if (!due) results.set(w.delivery.id, null);
    return due;
  });
  const secrets = new SecretCache(config.masterKey);
  await Promise.all(
    Array.from({ length: Math.min(PARALLEL_ATTEMPTS, work.length) }, async () => {
      for (let w = work.shift(); w; w = work.shift()) {
        try {
          results.set(w.delivery.id, await claimAndAttempt(env, config, w, "scheduled", secrets, deps));
        } catch (err) {
          console.error("webhook attempt failed unexpectedly; will retry", w.delivery.id, err instanceof Error ? err.message : String(err));
          results.set(w.delivery.id, "error");
        }
      }
    }),
  );
  return results;
}

/** Opens each endpoint's secrets once per batch. */
export class SecretCache {
  private opened = new Map<string, Promise<string[]>>();
  constructor(private readonly masterKey: string | undefined) {}
  get(webhook: WebhookRow, at: number): Promise<string[]> {
    const live = webhook.previousSecretSealed !== null && (webhook.previousSecretExpiresAt ?? 0) > at;
    const key = `${webhook.id}:${webhook.secretSealed}:${live}`;
    let s = this.opened.get(key);
    if (!s) this.opened.set(key, (s = liveSecrets(this.masterKey, webhook, at)));
    return s;
  }
}

/**
 * Claims one attempt of a delivery and makes it. "scheduled": the delivery must be pending and
 * its failure follows the schedule. "replay": any status, asked for by the account; a failed
 * replay of a settled delivery leaves it as it was, of a pending one it follows the schedule.
 * Answers null when the claim was lost (someone else attempts it).
 */
export async function claimAndAttempt(
  env: Env,
  config: TernConfig,
  work: DeliveryWork,
  mode: "scheduled" | "replay",
  secrets: SecretCache,
  deps: WebhookDeps,
): Promise<AttemptOutcome | null> {
  const now = deps.now ?? Date.now;
  const db = drizzle(env.DB);
  const { delivery, webhook } = work;
  const t = now();

  if (mode === "scheduled" && (webhook.status !== "enabled" || work.body === null)) {
    // A disabled endpoint gets nothing more; the account can replay once it is enabled again.
    await db.update(webhookDeliveries).set({ status: "failed", nextAttemptAt: null })
      .where(and(eq(webhookDeliveries.id, delivery.id), eq(webhookDeliveries.status, "pending")));
    return null;
  }
  if (work.body === null) return null;

  // The statements of every attempt are compiled once (db/compiled.ts); the rarer ones are built here.
  const claimed = await prepared(env.DB, claimDelivery(mode, delivery.status === "pending", {
    id: delivery.id, attempts: delivery.attempts, t, lease: t + ATTEMPT_LEASE_MS, due: t + EARLY_SLACK_MS,
  })).first<{ attempts: number; status: string }>();
  if (!claimed) return null;
  const attempt = claimed.attempts;
  const pending = claimed.status === "pending";

  const headers = await signWebhook({ id: delivery.id, timestamp: Math.floor(t / 1000), body: work.body }, await secrets.get(webhook, t));
  const record = await attemptDelivery(
    { url: webhook.endpoint, headers, body: work.body },
    { policy: endpointPolicy({ allowLocalTargets: config.webhookAllowPrivateTargets }), fetch: deps.fetch, now },
  );

  const statements: D1PreparedStatement[] = [
    insertWebhookAttempt.bind(env.DB, {
      id: uuidv7(record.startedAt), deliveryId: delivery.id, webhookId: webhook.id, attempt,
      startedAt: record.startedAt, durationMs: record.durationMs, statusCode: record.status, ok: record.ok,
      responseExcerpt: record.responseExcerpt || null, error: record.error,
    }),
  ];
  let retryInSeconds: number | null = null;
  if (record.ok) {
    statements.push(markDelivered.bind(env.DB, { id: delivery.id }));
  } else if (pending) {
    const mine = and(eq(webhookDeliveries.id, delivery.id), eq(webhookDeliveries.attempts, attempt), eq(webhookDeliveries.status, "pending"));
    const next = afterFailedAttempt(attempt, record.startedAt + record.durationMs);
    if (next.retry) {
      retryInSeconds = Math.min(Math.ceil(next.delayMs / 1000), MAX_QUEUE_DELAY_S);
      statements.push(statementOf(env.DB, db.update(webhookDeliveries).set({ nextAttemptAt: next.nextAttemptAt }).where(mine)));
    } else {
      statements.push(statementOf(env.DB, db.update(webhookDeliveries).set({ status: "failed", nextAttemptAt: null }).where(mine)));
    }
  }
  statements.push(...healthStatements(env.DB, webhook, record).map((q) => statementOf(env.DB, q)));
  await env.DB.batch(statements);
  return { record, attempt, retryInSeconds };
}

/** The endpoint's failure streak after an attempt, and its disabling after 5 days of it. */
function healthStatements(d1: D1Database, webhook: WebhookRow, record: AttemptRecord): BatchItem<"sqlite">[] {
  const db = drizzle(d1);
  const health = endpointHealthAfter({ failingSince: webhook.failingSince }, { ok: record.ok, at: record.startedAt });
  if (record.ok) {
    return webhook.failingSince === null ? [] : [db.update(webhooks).set({ failingSince: null }).where(eq(webhooks.id, webhook.id))];
  }
  const out: BatchItem<"sqlite">[] = [
    db.update(webhooks).set({ failingSince: sql`coalesce(${webhooks.failingSince}, ${record.startedAt})` }).where(eq(webhooks.id, webhook.id)),
  ];
  if (health.disable) {
    // Only if no success cleared the streak meanwhile.
    out.push(db.update(webhooks).set({ status: "disabled", disabledReason: health.reason, updatedAt: record.startedAt })
      .where(and(eq(webhooks.id, webhook.id), eq(webhooks.status, "enabled"), lte(webhooks.failingSince, record.startedAt - DISABLE_AFTER_MS))));
  }
  return out;
}

/**
 * The cron's part: events whose queue hint was lost are announced again, and pending
 * deliveries long past their time (lost message, crashed attempt) are enqueued again. Both are
 * harmless twice: fan-out and claims are idempotent.
 */
export async function sweepWebhooks(env: Env, now: number): Promise<{ events: number; deliveries: number }> {
  const db = drizzle(env.DB);
  const events = await db.select({ id: webhookEvents.id }).from(webhookEvents)
    .where(and(isNull(webhookEvents.fannedOutAt), lt(webhookEvents.createdAt, now - UNANNOUNCED_AFTER_MS)))
    .orderBy(webhookEvents.createdAt).limit(500);
  const overdue = await db.select({ id: webhookDeliveries.id }).from(webhookDeliveries)
    .where(and(eq(webhookDeliveries.status, "pending"), lt(webhookDeliveries.nextAttemptAt, now - OVERDUE_AFTER_MS)))
    .orderBy(webhookDeliveries.nextAttemptAt).limit(500);
  const messages: { body: WebhookQueueMessage }[] = [
    ...events.map((e) => ({ body: { kind: "event" as const, eventId: e.id } })),
    ...overdue.map((d) => ({ body: { kind: "delivery" as const, deliveryId: d.id } })),
  ];
  for (let i = 0; i < messages.length; i += 100) await env.WEBHOOK_QUEUE.sendBatch(messages.slice(i, i + 100));
  return { events: events.length, deliveries: overdue.length };
}
