// Webhook endpoints of an account and their event logs: create, list, read, change, delete,
// rotate the signing secret, list deliveries and attempts, replay. The REST routes and the
// dashboard are both thin callers of these; delivery itself is consumer.ts's.
import { and, eq, or } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { TernConfig } from "../config.ts";
import { webhookAttempts, webhookDeliveries, webhookEvents, webhooks, type WebhookDeliveryRow, type WebhookRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { uuidv7 } from "../ids.ts";
import { finishPage, pageQuery, type Page } from "../pagination.ts";
import { claimAndAttempt, SecretCache } from "./consumer.ts";
import { checkEndpoint, endpointPolicy } from "./endpoint.ts";
import type { WebhookEventType } from "./payloads.ts";
import { ROTATION_OVERLAP_MS, sealWebhookSecret } from "./secrets.ts";
import { generateWebhookSecret } from "./signing.ts";

const iso = (ms: number | null | undefined): string | null => (ms == null ? null : new Date(ms).toISOString());

export function webhookView(row: WebhookRow) {
  return {
    object: "webhook" as const,
    id: row.id,
    endpoint: row.endpoint,
    events: JSON.parse(row.eventsJson) as string[],
    status: row.status,
    disabled_reason: row.disabledReason,
    failing_since: iso(row.failingSince),
    created_at: iso(row.createdAt)!,
    updated_at: iso(row.updatedAt)!,
  };
}

export function deliveryView(row: WebhookDeliveryRow) {
  return {
    object: "webhook_event" as const,
    id: row.id,
    event_id: row.eventId,
    webhook_id: row.webhookId,
    type: row.eventType,
    status: row.status,
    attempts: row.attempts,
    created_at: iso(row.createdAt)!,
    last_attempt_at: iso(row.lastAttemptAt),
    next_attempt_at: row.status === "pending" ? iso(row.nextAttemptAt) : null,
  };
}

/** The endpoint must pass the operator's policy (https and public unless allowed); 422 names it. */
function acceptedEndpoint(url: string, config: TernConfig): string {
  const checked = checkEndpoint(url, endpointPolicy({ allowLocalTargets: config.webhookAllowPrivateTargets }));
  if (!checked.ok) throw new ApiError("validation_error", checked.message.replace(/^The endpoint/, "`endpoint`"));
  return checked.value.href;
}

export async function findWebhook(d1: D1Database, accountId: string, id: string): Promise<WebhookRow> {
  const row = await drizzle(d1).select().from(webhooks).where(and(eq(webhooks.id, id), eq(webhooks.accountId, accountId))).get();
  if (!row) throw new ApiError("not_found", "Webhook not found.");
  return row;
}

/** A delivery of the webhook, by its own id (the webhook-id header) or its event's id. */
async function findDelivery(d1: D1Database, webhook: WebhookRow, ref: string): Promise<WebhookDeliveryRow> {
  const row = await drizzle(d1).select().from(webhookDeliveries)
    .where(and(eq(webhookDeliveries.webhookId, webhook.id), or(eq(webhookDeliveries.id, ref), eq(webhookDeliveries.eventId, ref)))).get();
  if (!row) throw new ApiError("not_found", "Webhook event not found.");
  return row;
}

/** The signing secret is in this answer (and a rotation's) only. */
export async function createWebhook(d1: D1Database, config: TernConfig, accountId: string, input: { endpoint: string; events: WebhookEventType[] }, now = Date.now()) {
  const endpoint = acceptedEndpoint(input.endpoint, config);
  const id = uuidv7(now);
  const secret = generateWebhookSecret();
  const secretSealed = await sealWebhookSecret(config.masterKey, id, secret);
  await drizzle(d1).insert(webhooks).values({
    id, accountId, endpoint, eventsJson: JSON.stringify(input.events),
    status: "enabled", secretSealed, createdAt: now, updatedAt: now,
  });
  return { object: "webhook" as const, id, signing_secret: secret };
}

export async function listWebhooks(d1: D1Database, accountId: string, page: Page) {
  const q = pageQuery(webhooks.id, page, eq(webhooks.accountId, accountId));
  const rows = await drizzle(d1).select().from(webhooks).where(q.where).orderBy(q.orderBy).limit(q.limit);
  return finishPage(rows.map(webhookView), page);
}

export interface WebhookPatch {
  endpoint?: string;
  events?: WebhookEventType[];
  status?: "enabled" | "disabled";
}

/** Enabling clears the failure streak. */
export async function updateWebhook(d1: D1Database, config: TernConfig, accountId: string, id: string, patch: WebhookPatch, now = Date.now()) {
  const current = await findWebhook(d1, accountId, id);
  const changes: Partial<WebhookRow> = { updatedAt: now };
  if (patch.endpoint !== undefined) changes.endpoint = acceptedEndpoint(patch.endpoint, config);
  if (patch.events !== undefined) changes.eventsJson = JSON.stringify(patch.events);
  if (patch.status === "enabled") Object.assign(changes, { status: "enabled", disabledReason: null, failingSince: null });
  if (patch.status === "disabled" && current.status !== "disabled") Object.assign(changes, { status: "disabled", disabledReason: "Disabled by the account." });
  const [row] = await drizzle(d1).update(webhooks).set(changes).where(eq(webhooks.id, current.id)).returning();
  if (!row) throw new ApiError("not_found", "Webhook not found.");
  return webhookView(row);
}

/** Nothing more is delivered to it; its event log goes with it. */
export async function deleteWebhook(d1: D1Database, accountId: string, id: string) {
  const current = await findWebhook(d1, accountId, id);
  const db = drizzle(d1);
  await db.batch([
    db.delete(webhookAttempts).where(eq(webhookAttempts.webhookId, current.id)),
    db.delete(webhookDeliveries).where(eq(webhookDeliveries.webhookId, current.id)),
    db.delete(webhooks).where(eq(webhooks.id, current.id)),
  ]);
  return { object: "webhook" as const, id: current.id, deleted: true as const };
}

/** A new secret; for ROTATION_OVERLAP_MS the previous one signs too. */
export async function rotateWebhookSecret(d1: D1Database, config: TernConfig, accountId: string, id: string, now = Date.now()) {
  const current = await findWebhook(d1, accountId, id);
  const secret = generateWebhookSecret();
  const sealed = await sealWebhookSecret(config.masterKey, current.id, secret);
  const expires = now + ROTATION_OVERLAP_MS;
  // Sealed under the same context (the webhook's id), so the current value moves over as is.
  const [row] = await drizzle(d1).update(webhooks)
    .set({ secretSealed: sealed, previousSecretSealed: current.secretSealed, previousSecretExpiresAt: expires, updatedAt: now })
    .where(and(eq(webhooks.id, current.id), eq(webhooks.secretSealed, current.secretSealed))).returning({ id: webhooks.id });
  if (!row) throw new ApiError("validation_error", "The secret was rotated concurrently; try again.", 409);
  return { object: "webhook" as const, id: current.id, signing_secret: secret, previous_secret_expires_at: iso(expires)! };
}

export async function listWebhookDeliveries(d1: D1Database, accountId: string, id: string, page: Page) {
  const hook = await findWebhook(d1, accountId, id);
  const q = pageQuery(webhookDeliveries.id, page, eq(webhookDeliveries.webhookId, hook.id));
  const rows = await drizzle(d1).select().from(webhookDeliveries).where(q.where).orderBy(q.orderBy).limit(q.limit);
  return finishPage(rows.map(deliveryView), page);
}

/** The delivery with the exact payload it is sent (null once the event is no longer kept). */
export async function getWebhookDelivery(d1: D1Database, accountId: string, id: string, ref: string) {
  const delivery = await findDelivery(d1, await findWebhook(d1, accountId, id), ref);
  const event = await drizzle(d1).select({ body: webhookEvents.payloadJson }).from(webhookEvents).where(eq(webhookEvents.id, delivery.eventId)).get();
  return { ...deliveryView(delivery), payload: event ? (JSON.parse(event.body) as unknown) : null };
}

export async function listWebhookAttempts(d1: D1Database, accountId: string, id: string, ref: string, page: Page) {
  const delivery = await findDelivery(d1, await findWebhook(d1, accountId, id), ref);
  const q = pageQuery(webhookAttempts.id, page, eq(webhookAttempts.deliveryId, delivery.id));
  const rows = await drizzle(d1).select().from(webhookAttempts).where(q.where).orderBy(q.orderBy).limit(q.limit);
  return finishPage(rows.map((a) => ({
    object: "webhook_attempt" as const,
    id: a.id,
    attempt: a.attempt,
    started_at: iso(a.startedAt)!,
    duration_ms: a.durationMs,
    status_code: a.statusCode,
    ok: a.ok,
    response_excerpt: a.responseExcerpt,
    error: a.error,
  })), page);
}

/** Sends the event again now, with the same webhook-id, and answers the delivery after it. */
export async function replayWebhookDelivery(env: Env, config: TernConfig, accountId: string, id: string, ref: string) {
  const hook = await findWebhook(env.DB, accountId, id);
  const delivery = await findDelivery(env.DB, hook, ref);
  const event = await drizzle(env.DB).select({ body: webhookEvents.payloadJson }).from(webhookEvents).where(eq(webhookEvents.id, delivery.eventId)).get();
  if (!event) throw new ApiError("validation_error", "This event is no longer kept, so it cannot be replayed.");
  const outcome = await claimAndAttempt(env, config, { delivery, webhook: hook, body: event.body }, "replay", new SecretCache(config.masterKey), {});
  if (outcome === null) throw new ApiError("validation_error", "This event is being attempted right now; try again in a moment.", 409);
  if (outcome.retryInSeconds !== null) {
    await env.WEBHOOK_QUEUE.send({ kind: "delivery", deliveryId: delivery.id }, { delaySeconds: outcome.retryInSeconds }).catch(() => {});
  }
  return deliveryView(await findDelivery(env.DB, hook, ref));
}
