// Webhooks (contract section 6): endpoints and their subscriptions, each endpoint's event log
// with every attempt, replay, and signing-secret rotation. Delivery itself is the queue
// consumer's (worker/webhooks/consumer.ts).
import { createRoute, z } from "@hono/zod-openapi";
import { and, eq, or } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { defineRoute, type App, type Ctx } from "../app.ts";
import { readConfig, type TernConfig } from "../config.ts";
import { webhookAttempts, webhookDeliveries, webhookEvents, webhooks, type WebhookDeliveryRow, type WebhookRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { readJson, validate } from "../http.ts";
import { uuidv7 } from "../ids.ts";
import { finishPage, ListQuery, listSchema, pageQuery, readPage } from "../pagination.ts";
import { claimAndAttempt, SecretCache } from "../webhooks/consumer.ts";
import { checkEndpoint, endpointPolicy, MAX_ENDPOINT_LENGTH } from "../webhooks/endpoint.ts";
import { WEBHOOK_EVENT_TYPES, WebhookPayloadSchema } from "../webhooks/payloads.ts";
import { ROTATION_OVERLAP_MS, sealWebhookSecret } from "../webhooks/secrets.ts";
import { generateWebhookSecret } from "../webhooks/signing.ts";
import { DeletedSchema, errorResponses, IdParam, iso, json, jsonBody } from "./schemas.ts";

const Endpoint = z
  .string({ error: "`endpoint` must be a string." })
  .max(MAX_ENDPOINT_LENGTH, `\`endpoint\` must be at most ${MAX_ENDPOINT_LENGTH} characters.`)
  .openapi({ format: "uri", example: "https://example.com/webhooks/tern", description: "https, on a public host." });

const Events = z
  .array(z.enum(WEBHOOK_EVENT_TYPES, { error: `must be one of ${WEBHOOK_EVENT_TYPES.join(", ")}.` }), { error: "`events` must be an array of event types." })
  .min(1, "`events` must name at least one event type.")
  .max(WEBHOOK_EVENT_TYPES.length, `\`events\` must have at most ${WEBHOOK_EVENT_TYPES.length} items.`)
  .transform((list) => [...new Set(list)])
  .openapi({ type: "array", items: { type: "string", enum: [...WEBHOOK_EVENT_TYPES] }, example: ["email.sent", "email.delivered", "email.bounced"] });

export const CreateWebhookRequest = z.object({ endpoint: Endpoint, events: Events }).openapi("CreateWebhookRequest");

export const UpdateWebhookRequest = z
  .object({
    endpoint: Endpoint.optional(),
    events: Events.optional(),
    status: z.enum(["enabled", "disabled"], { error: "`status` must be `enabled` or `disabled`." }).optional(),
  })
  .strict()
  .openapi("UpdateWebhookRequest");

const CreatedWebhook = z
  .object({ object: z.literal("webhook"), id: z.string(), signing_secret: z.string().openapi({ example: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" }) })
  .openapi("CreatedWebhook");

const RotatedSecret = z
  .object({
    object: z.literal("webhook"),
    id: z.string(),
    signing_secret: z.string(),
    previous_secret_expires_at: z.string().openapi({ description: "Until then the previous secret signs too." }),
  })
  .openapi("RotatedWebhookSecret");

const Webhook = z
  .object({
    object: z.literal("webhook"),
    id: z.string(),
    endpoint: z.string(),
    events: z.array(z.string()),
    status: z.enum(["enabled", "disabled"]),
    disabled_reason: z.string().nullable().openapi({ description: "Why it is disabled: by the account, or automatically after 5 days of failed attempts." }),
    failing_since: z.string().nullable().openapi({ description: "When its current run of failed attempts began; null while deliveries succeed." }),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi("Webhook");

const DeliveryStatus = z.enum(["pending", "delivered", "failed"]);

const WebhookDelivery = z
  .object({
    object: z.literal("webhook_event"),
    id: z.string().openapi({ description: "The webhook-id (svix-id) header: the same on every attempt." }),
    event_id: z.string(),
    webhook_id: z.string(),
    type: z.string(),
    status: DeliveryStatus,
    attempts: z.number().int(),
    created_at: z.string(),
    last_attempt_at: z.string().nullable(),
    next_attempt_at: z.string().nullable(),
  })
  .openapi("WebhookEvent");

const WebhookDeliveryDetail = WebhookDelivery.extend({ payload: WebhookPayloadSchema }).openapi("WebhookEventDetail");

const WebhookAttempt = z
  .object({
    object: z.literal("webhook_attempt"),
    id: z.string(),
    attempt: z.number().int().openapi({ description: "1 for the first attempt." }),
    started_at: z.string(),
    duration_ms: z.number().int(),
    status_code: z.number().int().nullable().openapi({ description: "null when there was no answer (timeout, refused)." }),
    ok: z.boolean(),
    response_excerpt: z.string().nullable().openapi({ description: "At most 1 KB of the answer." }),
    error: z.string().nullable(),
  })
  .openapi("WebhookAttempt");

const EventParams = z.object({
  id: IdParam.shape.id,
  event_id: z.string().openapi({ param: { name: "event_id", in: "path" }, description: "The delivery's id (webhook-id header) or the event's id." }),
});

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

function deliveryView(row: WebhookDeliveryRow) {
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

async function webhookOr404(c: Ctx): Promise<WebhookRow> {
  const row = await drizzle(c.env.DB).select().from(webhooks)
    .where(and(eq(webhooks.id, c.req.param("id")!), eq(webhooks.accountId, c.get("principal").accountId))).get();
  if (!row) throw new ApiError("not_found", "Webhook not found.");
  return row;
}

async function deliveryOr404(c: Ctx, webhook: WebhookRow): Promise<WebhookDeliveryRow> {
  const ref = c.req.param("event_id")!;
  const row = await drizzle(c.env.DB).select().from(webhookDeliveries)
    .where(and(eq(webhookDeliveries.webhookId, webhook.id), or(eq(webhookDeliveries.id, ref), eq(webhookDeliveries.eventId, ref)))).get();
  if (!row) throw new ApiError("not_found", "Webhook event not found.");
  return row;
}

export function registerWebhookRoutes(app: App): void {
  defineRoute(
    app,
    "full",
    createRoute({
      method: "post",
      path: "/webhooks",
      tags: ["Webhooks"],
      summary: "Create a webhook",
      description: "Subscribes an endpoint to event types. The signing secret is in this answer (and a rotation's) only.",
      request: jsonBody(CreateWebhookRequest),
      responses: { 201: json(CreatedWebhook, "The new webhook and its signing secret"), ...errorResponses(400, 401, 403, 422) },
    }),
    async (c) => {
      const body = validate(CreateWebhookRequest, await readJson(c.req.raw));
      const config = readConfig(c.env);
      const endpoint = acceptedEndpoint(body.endpoint, config);
      const id = uuidv7();
      const secret = generateWebhookSecret();
      const secretSealed = await sealWebhookSecret(config.masterKey, id, secret);
      const now = Date.now();
      await drizzle(c.env.DB).insert(webhooks).values({
        id, accountId: c.get("principal").accountId, endpoint, eventsJson: JSON.stringify(body.events),
        status: "enabled", secretSealed, createdAt: now, updatedAt: now,
      });
      return c.json({ object: "webhook" as const, id, signing_secret: secret }, 201);
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/webhooks",
      tags: ["Webhooks"],
      summary: "List webhooks",
      request: { query: ListQuery },
      responses: { 200: json(listSchema(Webhook), "Webhooks of the account, newest first"), ...errorResponses(401, 403, 422) },
    }),
    async (c) => {
      const page = readPage(c.req.query());
      const q = pageQuery(webhooks.id, page, eq(webhooks.accountId, c.get("principal").accountId));
      const rows = await drizzle(c.env.DB).select().from(webhooks).where(q.where).orderBy(q.orderBy).limit(q.limit);
      return c.json(finishPage(rows.map(webhookView), page));
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/webhooks/{id}",
      tags: ["Webhooks"],
      summary: "Retrieve a webhook",
      description: "Its endpoint, subscriptions and health; never its signing secret.",
      request: { params: IdParam },
      responses: { 200: json(Webhook, "The webhook"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => c.json(webhookView(await webhookOr404(c))),
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "patch",
      path: "/webhooks/{id}",
      tags: ["Webhooks"],
      summary: "Update a webhook",
      description: "Change the endpoint or the event types, or disable and enable it. Enabling clears the failure streak.",
      request: { params: IdParam, ...jsonBody(UpdateWebhookRequest) },
      responses: { 200: json(Webhook, "The updated webhook"), ...errorResponses(400, 401, 403, 404, 422) },
    }),
    async (c) => {
      const body = validate(UpdateWebhookRequest, await readJson(c.req.raw));
      const current = await webhookOr404(c);
      const config = readConfig(c.env);
      const changes: Partial<WebhookRow> = { updatedAt: Date.now() };
      if (body.endpoint !== undefined) changes.endpoint = acceptedEndpoint(body.endpoint, config);
      if (body.events !== undefined) changes.eventsJson = JSON.stringify(body.events);
      if (body.status === "enabled") Object.assign(changes, { status: "enabled", disabledReason: null, failingSince: null });
      if (body.status === "disabled" && current.status !== "disabled") Object.assign(changes, { status: "disabled", disabledReason: "Disabled by the account." });
      const [row] = await drizzle(c.env.DB).update(webhooks).set(changes).where(eq(webhooks.id, current.id)).returning();
      if (!row) throw new ApiError("not_found", "Webhook not found.");
      return c.json(webhookView(row));
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "delete",
      path: "/webhooks/{id}",
      tags: ["Webhooks"],
      summary: "Delete a webhook",
      description: "Nothing more is delivered to it; its event log goes with it.",
      request: { params: IdParam },
      responses: { 200: json(DeletedSchema, "Deleted"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const current = await webhookOr404(c);
      const db = drizzle(c.env.DB);
      await db.batch([
        db.delete(webhookAttempts).where(eq(webhookAttempts.webhookId, current.id)),
        db.delete(webhookDeliveries).where(eq(webhookDeliveries.webhookId, current.id)),
        db.delete(webhooks).where(eq(webhooks.id, current.id)),
      ]);
      return c.json({ object: "webhook", id: current.id, deleted: true as const });
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "post",
      path: "/webhooks/{id}/signing-secret/rotate",
      tags: ["Webhooks"],
      summary: "Rotate the signing secret",
      description: "Answers a new secret. For 24 hours every delivery is signed with both the new and the previous secret, so receivers can switch without missing one.",
      request: { params: IdParam },
      responses: { 200: json(RotatedSecret, "The new secret"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const current = await webhookOr404(c);
      const config = readConfig(c.env);
      const secret = generateWebhookSecret();
      const sealed = await sealWebhookSecret(config.masterKey, current.id, secret);
      const now = Date.now();
      const expires = now + ROTATION_OVERLAP_MS;
      // Sealed under the same context (the webhook's id), so the current value moves over as is.
      const [row] = await drizzle(c.env.DB).update(webhooks)
        .set({ secretSealed: sealed, previousSecretSealed: current.secretSealed, previousSecretExpiresAt: expires, updatedAt: now })
        .where(and(eq(webhooks.id, current.id), eq(webhooks.secretSealed, current.secretSealed))).returning({ id: webhooks.id });
      if (!row) throw new ApiError("validation_error", "The secret was rotated concurrently; try again.", 409);
      return c.json({ object: "webhook" as const, id: current.id, signing_secret: secret, previous_secret_expires_at: iso(expires)! });
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/webhooks/{id}/events",
      tags: ["Webhooks"],
      summary: "List a webhook's events",
      description: "Every event sent (or being sent) to this endpoint, newest first, with its delivery status and number of attempts.",
      request: { params: IdParam, query: ListQuery },
      responses: { 200: json(listSchema(WebhookDelivery), "Events of the webhook, newest first"), ...errorResponses(401, 403, 404, 422) },
    }),
    async (c) => {
      const page = readPage(c.req.query());
      const hook = await webhookOr404(c);
      const q = pageQuery(webhookDeliveries.id, page, eq(webhookDeliveries.webhookId, hook.id));
      const rows = await drizzle(c.env.DB).select().from(webhookDeliveries).where(q.where).orderBy(q.orderBy).limit(q.limit);
      return c.json(finishPage(rows.map(deliveryView), page));
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/webhooks/{id}/events/{event_id}",
      tags: ["Webhooks"],
      summary: "Retrieve a webhook event",
      description: "The delivery of one event to this endpoint, with the exact payload it is sent.",
      request: { params: EventParams },
      responses: { 200: json(WebhookDeliveryDetail, "The event and its delivery status"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const delivery = await deliveryOr404(c, await webhookOr404(c));
      const event = await drizzle(c.env.DB).select({ body: webhookEvents.payloadJson }).from(webhookEvents).where(eq(webhookEvents.id, delivery.eventId)).get();
      return c.json({ ...deliveryView(delivery), payload: event ? JSON.parse(event.body) : null });
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/webhooks/{id}/events/{event_id}/attempts",
      tags: ["Webhooks"],
      summary: "List a webhook event's attempts",
      description: "Each attempt, newest first: when, the answer's status, how long it took, an excerpt of the answer, and why it failed.",
      request: { params: EventParams, query: ListQuery },
      responses: { 200: json(listSchema(WebhookAttempt), "Attempts, newest first"), ...errorResponses(401, 403, 404, 422) },
    }),
    async (c) => {
      const page = readPage(c.req.query());
      const delivery = await deliveryOr404(c, await webhookOr404(c));
      const q = pageQuery(webhookAttempts.id, page, eq(webhookAttempts.deliveryId, delivery.id));
      const rows = await drizzle(c.env.DB).select().from(webhookAttempts).where(q.where).orderBy(q.orderBy).limit(q.limit);
      return c.json(finishPage(rows.map((a) => ({
        object: "webhook_attempt" as const,
        id: a.id,
        attempt: a.attempt,
        started_at: iso(a.startedAt)!,
        duration_ms: a.durationMs,
        status_code: a.statusCode,
        ok: a.ok,
        response_excerpt: a.responseExcerpt,
        error: a.error,
      })), page));
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "post",
      path: "/webhooks/{id}/events/{event_id}/replay",
      tags: ["Webhooks"],
      summary: "Replay a webhook event",
      description:
        "Sends the event to the endpoint again now, with the same webhook-id, and answers the event after the attempt. A replay of a delivered or failed event is one attempt; of a pending one, it is its next attempt and the schedule continues from it.",
      request: { params: EventParams },
      responses: { 200: json(WebhookDelivery, "The event after the new attempt"), ...errorResponses(401, 403, 404, 422) },
    }),
    async (c) => {
      const hook = await webhookOr404(c);
      const delivery = await deliveryOr404(c, hook);
      const config = readConfig(c.env);
      const event = await drizzle(c.env.DB).select({ body: webhookEvents.payloadJson }).from(webhookEvents).where(eq(webhookEvents.id, delivery.eventId)).get();
      if (!event) throw new ApiError("validation_error", "This event is no longer kept, so it cannot be replayed.");
      const outcome = await claimAndAttempt(c.env, config, { delivery, webhook: hook, body: event.body }, "replay", new SecretCache(config.masterKey), {});
      if (outcome === null) throw new ApiError("validation_error", "This event is being attempted right now; try again in a moment.", 409);
      if (outcome.retryInSeconds !== null) {
        await c.env.WEBHOOK_QUEUE.send({ kind: "delivery", deliveryId: delivery.id }, { delaySeconds: outcome.retryInSeconds }).catch(() => {});
      }
      const after = await deliveryOr404(c, hook);
      return c.json(deliveryView(after));
    },
  );
}
