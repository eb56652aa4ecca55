// Webhooks (contract section 6): endpoints and their subscriptions, each endpoint's event log
// with every attempt, replay, and signing-secret rotation. Delivery itself is the queue
// consumer's (worker/webhooks/consumer.ts).
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App } from "../app.ts";
import { readConfig } from "../config.ts";
import { dropPathId, readJson, validate } from "../http.ts";
import { ListQuery, listSchema, readPage } from "../pagination.ts";
import { MAX_ENDPOINT_LENGTH } from "../webhooks/endpoint.ts";
import { WEBHOOK_EVENT_TYPES, WebhookPayloadSchema } from "../webhooks/payloads.ts";
import {
  createWebhook,
  deleteWebhook,
  findWebhook,
  getWebhookDelivery,
  listWebhookAttempts,
  listWebhookDeliveries,
  listWebhooks,
  replayWebhookDelivery,
  rotateWebhookSecret,
  updateWebhook,
  webhookView,
} from "../webhooks/service.ts";
import { DeletedSchema, errorResponses, IdParam, json, jsonBody } from "./schemas.ts";

const Endpoint = z
  .string({ error: "`endpoint` must be a string." })
  .max(MAX_ENDPOINT_LENGTH, `\`endpoint\` must be at most ${MAX_ENDPOINT_LENGTH} characters.`)
  .openapi({ format: "uri", example: "https://example.com/webhooks/tern", description: "https, on a public host." });

const Events = z
  .array(z.enum(WEBHOOK_EVENT_TYPES, { error: `must be one of ${WEBHOOK_EVENT_TYPES.join(", ")}.` }), { error: "`events` must be an array of event types." })
  .min(1, "`events` must name at least one event type.")
  .max(WEBHOOK_EVENT_TYPES.length, `\`events\` must have at most ${WEBHOOK_EVENT_TYPES.length} items.`)
  .transform((list) => [...new Set(list)])
  // The transform hides the array's checks from the generator, so this states them again.
  .openapi({ type: "array", items: { type: "string", enum: [...WEBHOOK_EVENT_TYPES] }, minItems: 1, maxItems: WEBHOOK_EVENT_TYPES.length, example: ["email.sent", "email.delivered", "email.bounced"] });

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
      return c.json(await createWebhook(c.env.DB, readConfig(c.env), c.get("principal").accountId, body), 201);
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
    async (c) => c.json(await listWebhooks(c.env.DB, c.get("principal").accountId, readPage(c.req.query()))),
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
    async (c) => c.json(webhookView(await findWebhook(c.env.DB, c.get("principal").accountId, c.req.param("id")!))),
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
      const body = validate(UpdateWebhookRequest, dropPathId(await readJson(c.req.raw), c.req.param("id")!, ["id", "webhook_id"]));
      return c.json(await updateWebhook(c.env.DB, readConfig(c.env), c.get("principal").accountId, c.req.param("id")!, body));
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
    async (c) => c.json(await deleteWebhook(c.env.DB, c.get("principal").accountId, c.req.param("id")!)),
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
    async (c) => c.json(await rotateWebhookSecret(c.env.DB, readConfig(c.env), c.get("principal").accountId, c.req.param("id")!)),
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
      return c.json(await listWebhookDeliveries(c.env.DB, c.get("principal").accountId, c.req.param("id")!, page));
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
    async (c) => c.json(await getWebhookDelivery(c.env.DB, c.get("principal").accountId, c.req.param("id")!, c.req.param("event_id")!)),
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
      return c.json(await listWebhookAttempts(c.env.DB, c.get("principal").accountId, c.req.param("id")!, c.req.param("event_id")!, page));
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
    async (c) => c.json(await replayWebhookDelivery(c.env, readConfig(c.env), c.get("principal").accountId, c.req.param("id")!, c.req.param("event_id")!)),
  );
}
