// Emails (contract section 4): send, batch, read, list, reschedule, cancel, events.
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App, type Ctx } from "../app.ts";
import { cancelEmail, getEmail, listEmailEvents, listEmails, rescheduleEmail } from "../emails/service.ts";
import { ApiError } from "../errors.ts";
import { dropPathId, MAX_REQUEST_BYTES, readJson, validate } from "../http.ts";
import { sendLog } from "../logs/record.ts";
import { MAX_MESSAGE_BYTES } from "../sending/accept.ts";
import { ListQuery, listSchema, readPage } from "../pagination.ts";
import { IdempotencyKeyHeader, sendIdempotently } from "../sending/idempotency.ts";
import { MAX_SCHEDULED_AT_LENGTH } from "../sending/schedule.ts";
import { SendEmailRequest, SendEmailResponse } from "../sending/request.ts";
import { MAX_BATCH, performSend, type Answer, type SendRequest } from "../sending/send.ts";
import { errorResponses, IdParam, json, jsonBody } from "./schemas.ts";


const EmailObject = z
  .object({
    object: z.literal("email"),
    id: z.string(),
    from: z.string(),
    to: z.array(z.string()),
    cc: z.array(z.string()).nullable(),
    bcc: z.array(z.string()).nullable(),
    reply_to: z.array(z.string()).nullable(),
    subject: z.string(),
    html: z.string().nullable(),
    text: z.string().nullable(),
    created_at: z.string(),
    scheduled_at: z.string().nullable(),
    last_event: z.string(),
    tags: z.array(z.object({ name: z.string(), value: z.string() })),
  })
  .openapi("Email");

const EmailListItem = EmailObject.omit({ html: true, text: true, tags: true }).openapi("EmailListItem");

const EmailEvent = z
  .object({ object: z.literal("email_event"), id: z.string(), type: z.string(), created_at: z.string(), data: z.record(z.string(), z.unknown()) })
  .openapi("EmailEvent");

const BatchResponse = z
  .object({
    data: z.array(SendEmailResponse),
    errors: z.array(z.object({ index: z.number().int(), message: z.string() })).optional(),
  })
  .openapi("BatchResponse");

// The length is checked as the time is read (worker/sending/schedule.ts), after the email is found.
const MB = 1024 * 1024;
const sizeLimits = `The request body may be at most ${MAX_REQUEST_BYTES / MB} MB (413 past it), and each email, attachments fetched by \`path\` included, at most ${MAX_MESSAGE_BYTES / MB} MB once encoded.`;

const RescheduleRequest = z.object({ scheduled_at: z.string({ error: "must be a string." }).openapi({ maxLength: MAX_SCHEDULED_AT_LENGTH }) }).openapi("RescheduleRequest");
const EmailRef = z.object({ object: z.literal("email"), id: z.string() });

/** With an Idempotency-Key the send goes through the key's Durable Object; without one it
 * pays nothing for the feature. */
function send(c: Ctx, route: string, req: SendRequest): Promise<Answer> {
  const key = c.req.header("idempotency-key");
  const principal = c.get("principal");
  const defer = (work: Promise<unknown>) => c.executionCtx.waitUntil(work);
  // The log row rides in the send's own batch: no extra D1 round trip on the hot path. (A
  // keyed request that replays instead of sending is logged after its answer, as any request.)
  const log = sendLog(c.env.DB, { req: c.req.raw, principal });
  c.set("sendLog", log);
  if (key !== undefined) return sendIdempotently(c.env, principal, route, key, req, defer, log);
  return performSend(c.env, principal, req, { defer, log });
}

function answer(a: Answer): Response {
  return new Response(a.body, { status: a.status, headers: { ...a.headers, "content-type": "application/json" } });
}

export function registerEmailRoutes(app: App): void {
  defineRoute(
    app,
    "sending",
    createRoute({
      method: "post",
      path: "/emails",
      tags: ["Emails"],
      summary: "Send an email",
      description: sizeLimits,
      request: {
        ...jsonBody(SendEmailRequest),
        headers: z.object({ "idempotency-key": IdempotencyKeyHeader.optional() }),
      },
      responses: { 200: json(SendEmailResponse, "Accepted"), ...errorResponses(400, 401, 403, 409, 413, 422, 429) },
    }),
    async (c) => answer(await send(c, "POST /emails", { kind: "single", body: await readJson(c.req.raw), batchMode: "strict" })),
  );

  defineRoute(
    app,
    "sending",
    createRoute({
      method: "post",
      path: "/emails/batch",
      tags: ["Emails"],
      summary: "Send up to 100 emails at once",
      description:
        `\`x-batch-validation: strict\` (default) accepts all or nothing; \`permissive\` accepts the valid items and lists the errors of the others. Attachments and \`scheduled_at\` are not allowed in batches. ${sizeLimits}`,
      request: {
        ...jsonBody(z.array(SendEmailRequest).min(1).max(MAX_BATCH)),
        headers: z.object({ "x-batch-validation": z.enum(["strict", "permissive"]).optional(), "idempotency-key": IdempotencyKeyHeader.optional() }),
      },
      responses: { 200: json(BatchResponse, "Accepted"), ...errorResponses(400, 401, 403, 413, 422, 429) },
    }),
    async (c) => {
      const mode = (c.req.header("x-batch-validation") ?? "strict").toLowerCase();
      if (mode !== "strict" && mode !== "permissive") {
        throw new ApiError("validation_error", "`x-batch-validation` must be `strict` or `permissive`.");
      }
      return answer(await send(c, "POST /emails/batch", { kind: "batch", body: await readJson(c.req.raw), batchMode: mode }));
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/emails",
      tags: ["Emails"],
      summary: "List emails",
      request: { query: ListQuery },
      responses: { 200: json(listSchema(EmailListItem), "Emails, newest first"), ...errorResponses(401, 403, 422) },
    }),
    async (c) => {
      return c.json(await listEmails(c.env.DB, c.get("principal").accountId, readPage(c.req.query())));
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/emails/{id}",
      tags: ["Emails"],
      summary: "Retrieve an email",
      request: { params: IdParam },
      responses: { 200: json(EmailObject, "The email"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      return c.json(await getEmail(c.env, c.get("principal").accountId, c.req.param("id")!));
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "patch",
      path: "/emails/{id}",
      tags: ["Emails"],
      summary: "Reschedule a scheduled email",
      request: { params: IdParam, ...jsonBody(RescheduleRequest) },
      responses: { 200: json(EmailRef, "Rescheduled"), ...errorResponses(400, 401, 403, 404, 422) },
    }),
    async (c) => {
      const body = validate(RescheduleRequest, dropPathId(await readJson(c.req.raw), c.req.param("id")!, ["id", "email_id"]));
      return c.json(await rescheduleEmail(c.env.DB, c.get("principal").accountId, c.req.param("id")!, body.scheduled_at, Date.now()));
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "post",
      path: "/emails/{id}/cancel",
      tags: ["Emails"],
      summary: "Cancel a scheduled email",
      request: { params: IdParam },
      responses: { 200: json(EmailRef, "Canceled"), ...errorResponses(401, 403, 404, 422) },
    }),
    async (c) => {
      return c.json(await cancelEmail(c.env.DB, c.get("principal").accountId, c.req.param("id")!, Date.now()));
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/emails/{id}/events",
      tags: ["Emails"],
      summary: "List the events of an email, oldest first",
      request: { params: IdParam },
      responses: { 200: json(listSchema(EmailEvent), "Events"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      return c.json(await listEmailEvents(c.env.DB, c.get("principal").accountId, c.req.param("id")!));
    },
  );
}
