// Emails (contract section 4): send, batch, read, list, reschedule, cancel, events.
import { createRoute, z } from "@hono/zod-openapi";
import { and, asc, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { defineRoute, type App, type Ctx } from "../app.ts";
import { emailEvents, emails, type EmailRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { readJson, validate } from "../http.ts";
import { uuidv7 } from "../ids.ts";
import { finishPage, ListQuery, listSchema, pageQuery, readPage } from "../pagination.ts";
import { loadBodies } from "../sending/content.ts";
import { sendIdempotently } from "../sending/idempotency.ts";
import { SendEmailRequest, SendEmailResponse } from "../sending/request.ts";
import { MAX_BATCH, performSend, type Answer, type SendRequest } from "../sending/send.ts";
import { parseScheduledAt } from "../sending/schedule.ts";
import { errorResponses, IdParam, iso, json, jsonBody } from "./schemas.ts";


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

const RescheduleRequest = z.object({ scheduled_at: z.string({ error: "must be a string." }) }).openapi("RescheduleRequest");
const EmailRef = z.object({ object: z.literal("email"), id: z.string() });

/** With an Idempotency-Key the send goes through the key's Durable Object; without one it
 * pays nothing for the feature. */
function send(c: Ctx, route: string, req: SendRequest): Promise<Answer> {
  const key = c.req.header("idempotency-key");
  const principal = c.get("principal");
  const defer = (work: Promise<unknown>) => c.executionCtx.waitUntil(work);
  return key === undefined ? performSend(c.env, principal, req, { defer }) : sendIdempotently(c.env, principal, route, key, req, defer);
}

function answer(a: Answer): Response {
  return new Response(a.body, { status: a.status, headers: { ...a.headers, "content-type": "application/json" } });
}

function nullableList(json: string): string[] | null {
  const list = JSON.parse(json) as string[];
  return list.length > 0 ? list : null;
}

function listItem(row: EmailRow) {
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

async function findEmail(c: Ctx, id: string): Promise<EmailRow> {
  const row = await drizzle(c.env.DB)
    .select().from(emails)
    .where(and(eq(emails.id, id), eq(emails.accountId, c.get("principal").accountId)))
    .get();
  if (!row) throw new ApiError("not_found", "Email not found.");
  return row;
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
      request: {
        ...jsonBody(SendEmailRequest),
        headers: z.object({ "idempotency-key": z.string().optional().openapi({ description: "Sends at most once per key for 24 hours." }) }),
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
        "`x-batch-validation: strict` (default) accepts all or nothing; `permissive` accepts the valid items and lists the errors of the others. Attachments and `scheduled_at` are not allowed in batches.",
      request: {
        ...jsonBody(z.array(SendEmailRequest).min(1).max(MAX_BATCH)),
        headers: z.object({ "x-batch-validation": z.enum(["strict", "permissive"]).optional() }),
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
      const page = readPage(c.req.query());
      const q = pageQuery(emails.id, page, eq(emails.accountId, c.get("principal").accountId));
      const rows = await drizzle(c.env.DB).select().from(emails).where(q.where).orderBy(q.orderBy).limit(q.limit);
      return c.json(finishPage(rows.map(listItem), page));
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
      const row = await findEmail(c, c.req.param("id")!);
      const bodies = await loadBodies(c.env.BLOBS, row);
      return c.json({ ...listItem(row), html: bodies.html, text: bodies.text, tags: JSON.parse(row.tagsJson) });
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
      const id = c.req.param("id")!;
      const body = validate(RescheduleRequest, await readJson(c.req.raw));
      const row = await findEmail(c, id);
      const now = Date.now();
      const when = parseScheduledAt(body.scheduled_at, new Date(now));
      if (!when.ok) throw new ApiError("validation_error", when.message);
      const at = when.value.getTime();
      const db = drizzle(c.env.DB);
      const updated = await db.update(emails).set({ scheduledAt: at, nextAttemptAt: at })
        .where(and(eq(emails.id, row.id), eq(emails.state, "scheduled"))).returning({ id: emails.id });
      if (updated.length === 0) throw notScheduled(row.state, "rescheduled");
      await db.insert(emailEvents).values({
        id: uuidv7(now), emailId: row.id, accountId: row.accountId, type: "scheduled",
        dataJson: JSON.stringify({ scheduled_at: new Date(at).toISOString() }), createdAt: now,
      });
      return c.json({ object: "email" as const, id: row.id });
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
      const row = await findEmail(c, c.req.param("id")!);
      const now = Date.now();
      const db = drizzle(c.env.DB);
      // The state check and the change are one statement, so the cron cannot send it in between.
      const updated = await db.update(emails).set({ state: "canceled", lastEvent: "canceled", nextAttemptAt: null })
        .where(and(eq(emails.id, row.id), eq(emails.state, "scheduled"))).returning({ id: emails.id });
      if (updated.length === 0) throw notScheduled(row.state, "canceled");
      await db.insert(emailEvents).values({ id: uuidv7(now), emailId: row.id, accountId: row.accountId, type: "canceled", createdAt: now });
      return c.json({ object: "email" as const, id: row.id });
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
      const row = await findEmail(c, c.req.param("id")!);
      const rows = await drizzle(c.env.DB).select().from(emailEvents)
        .where(eq(emailEvents.emailId, row.id)).orderBy(asc(emailEvents.id));
      return c.json({
        object: "list" as const,
        has_more: false,
        data: rows.map((e) => ({ object: "email_event" as const, id: e.id, type: e.type, created_at: iso(e.createdAt)!, data: JSON.parse(e.dataJson) })),
      });
    },
  );
}

function notScheduled(state: string, verb: "rescheduled" | "canceled"): ApiError {
  const why = state === "canceled" ? "it was canceled" : "it is not scheduled (it has already been sent or is being sent)";
  return new ApiError("validation_error", `This email cannot be ${verb}: ${why}.`);
}
