// Broadcasts (Resend's /broadcasts): create (optionally sending at once), edit and delete while a
// draft, send now or at a time, cancel, duplicate, and read who received, opened, clicked...
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App, type Ctx } from "../app.ts";
import {
  cancelBroadcast, clickedLinks, createBroadcast, deleteBroadcast, duplicateBroadcast, findBroadcast, listBroadcasts, listRecipients,
  RECIPIENT_TYPES, sendBroadcast, updateBroadcast, type BroadcastFields,
} from "../broadcasts/broadcasts.ts";
import type { BroadcastRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { readJson, validate } from "../http.ts";
import { parseMailbox } from "../mime/address.ts";
import { MAX_SCHEDULED_AT_LENGTH } from "../sending/schedule.ts";
import { ListQuery, listSchema, readPage } from "../pagination.ts";
import { errorResponses, IdParam, iso, json, jsonBody, label } from "./schemas.ts";

const Mailbox = (field: string) => z.string({ error: `\`${field}\` must be a string.` }).refine((s) => parseMailbox(s) !== null, `\`${field}\` must be an email address like \`a@example.com\` or \`Name <a@example.com>\`.`);
const Id = (field: string) => z.string({ error: `\`${field}\` must be an id.` }).uuid(`\`${field}\` must be an id.`);
const fields = {
  name: label("name", 256, { mayBeEmpty: true }).nullable().optional(),
  segment_id: Id("segment_id").optional(),
  audience_id: Id("audience_id").optional().openapi({ deprecated: true, description: "Use `segment_id`." }),
  from: Mailbox("from").optional(),
  subject: z.string({ error: "`subject` must be a string." }).min(1, "`subject` must not be empty.").max(998).refine((s) => !/[\r\n\0]/.test(s), "`subject` must not contain line breaks.").optional(),
  reply_to: z.union([Mailbox("reply_to"), z.array(Mailbox("reply_to")).max(50)]).nullable().optional(),
  preview_text: z.string({ error: "`preview_text` must be a string." }).max(500).nullable().optional(),
  html: z.string({ error: "`html` must be a string." }).max(2_000_000).nullable().optional(),
  text: z.string({ error: "`text` must be a string." }).max(2_000_000).nullable().optional(),
  topic_id: Id("topic_id").nullable().optional(),
};
/** `audience_id` is the older name of `segment_id`: two different values would leave one
 * silently unused. */
function oneSegment(b: { segment_id?: string; audience_id?: string }, ctx: z.RefinementCtx): void {
  if (b.segment_id && b.audience_id && b.segment_id !== b.audience_id) {
    ctx.addIssue({ code: "custom", path: ["audience_id"], message: "is the older name of `segment_id`; give one of them, or the same id in both." });
  }
}

/** `scheduled_at` on a send: its length is checked as the time is read (worker/sending/schedule.ts),
 * after the broadcast is found and found sendable, so the schema states it rather than enforcing it. */
const ScheduledAt = z.string({ error: "`scheduled_at` must be a string." }).openapi({ maxLength: MAX_SCHEDULED_AT_LENGTH });

// segment_id is not in `required`: audience_id (its older name) may stand in, which `required` cannot say.
export const CreateBroadcastRequest = z.object({
  ...fields,
  segment_id: fields.segment_id.openapi({ description: "Required, unless the older `audience_id` is given instead." }),
  from: Mailbox("from"),
  subject: fields.subject.unwrap(),
  send: z.boolean({ error: "`send` must be a boolean." }).optional(),
  scheduled_at: ScheduledAt.optional().openapi({ description: "With `send`: ISO 8601 or natural language (\"tomorrow at 9am\")." }),
}).superRefine((b, ctx) => {
  if (!b.segment_id && !b.audience_id) ctx.addIssue({ code: "custom", path: [], message: "Missing `segment_id` field.", params: { missing: true } });
  oneSegment(b, ctx);
  if (b.scheduled_at !== undefined && b.send !== true) ctx.addIssue({ code: "custom", path: ["scheduled_at"], message: "can only be given with `send: true`." });
}).openapi("CreateBroadcastRequest", { description: "`from`, `subject` and `segment_id` (or its older name `audience_id`) are required." });
export const UpdateBroadcastRequest = z.object(fields).superRefine(oneSegment).openapi("UpdateBroadcastRequest");
export const SendBroadcastRequest = z.object({ scheduled_at: ScheduledAt.optional() }).openapi("SendBroadcastRequest");

const Broadcast = z.object({
  object: z.literal("broadcast"), id: z.string(), name: z.string().nullable(), segment_id: z.string().nullable(), audience_id: z.string().nullable(),
  from: z.string().nullable(), subject: z.string().nullable(), reply_to: z.array(z.string()).nullable(), preview_text: z.string().nullable(),
  html: z.string().nullable(), text: z.string().nullable(), topic_id: z.string().nullable(),
  status: z.enum(["draft", "scheduled", "queued", "sending", "sent", "canceled", "failed"]),
  status_reason: z.string().nullable().openapi({ description: "tern's own: why a broadcast failed (the quota ran out, the domain is no longer verified)." }),
  recipients: z.number().int().openapi({ description: "tern's own: recipients recorded so far." }),
  created_at: z.string(), scheduled_at: z.string().nullable(), sent_at: z.string().nullable(),
}).openapi("Broadcast");
const Ref = z.object({ object: z.literal("broadcast"), id: z.string() });
const Recipient = z.object({
  id: z.string(), contact_id: z.string().nullable(), email: z.string(), count: z.number().int().optional(),
  bounce_type: z.enum(["permanent", "transient", "undetermined"]).optional(),
  clicked_links: z.array(z.object({ url: z.string(), clicks: z.number().int() })).optional(),
}).openapi("BroadcastRecipient");
const ClickedLink = z.object({ id: z.string(), url: z.string(), clicks: z.number().int(), unique_clicks: z.number().int() }).openapi("BroadcastClickedLink");
const RecipientsQuery = ListQuery.extend({
  type: z.enum(RECIPIENT_TYPES, { error: `\`type\` must be one of ${RECIPIENT_TYPES.join(", ")}.` }),
  email: z.string().max(254).optional(),
  bounce_type: z.enum(["permanent", "transient", "undetermined"], { error: "`bounce_type` must be permanent, transient or undetermined." }).optional(),
});

function view(r: BroadcastRow) {
  return {
    object: "broadcast" as const, id: r.id, name: r.name, segment_id: r.segmentId, audience_id: r.segmentId, from: r.fromAddress, subject: r.subject,
    reply_to: JSON.parse(r.replyToJson) as string[], preview_text: r.previewText, html: r.html, text: r.text, topic_id: r.topicId,
    status: r.status as z.infer<typeof Broadcast>["status"], status_reason: r.statusReason, recipients: r.recipientCount,
    created_at: iso(r.createdAt)!, scheduled_at: iso(r.scheduledAt), sent_at: iso(r.sentAt),
  };
}

export function fieldsOf(b: z.infer<typeof UpdateBroadcastRequest>): BroadcastFields {
  return {
    name: b.name, segmentId: b.segment_id ?? b.audience_id, topicId: b.topic_id, from: b.from, subject: b.subject,
    replyTo: b.reply_to === undefined ? undefined : b.reply_to === null ? [] : Array.isArray(b.reply_to) ? b.reply_to : [b.reply_to],
    previewText: b.preview_text, html: b.html, text: b.text,
  };
}

const notFound = () => new ApiError("not_found", "Broadcast not found.");
const account = (c: Ctx) => c.get("principal").accountId;

export function registerBroadcastRoutes(app: App): void {
  defineRoute(app, "full", createRoute({
    method: "post", path: "/broadcasts", tags: ["Broadcasts"], summary: "Create a broadcast",
    description: "A draft, or with `send: true` sent at once (or at `scheduled_at`). Personalise with {{{FIRST_NAME|fallback}}}, {{{LAST_NAME}}}, {{{EMAIL}}}, contact properties by key and {{{RESEND_UNSUBSCRIBE_URL}}}.",
    request: jsonBody(CreateBroadcastRequest),
    responses: { 201: json(Ref, "The new broadcast"), ...errorResponses(400, 401, 403, 422) },
  }), async (c) => {
    const body = validate(CreateBroadcastRequest, await readJson(c.req.raw));
    const f = fieldsOf(body);
    const row = await createBroadcast(c.env.DB, c.get("principal"), { ...f, segmentId: f.segmentId!, from: body.from, subject: body.subject });
    if (body.send) {
      try {
        await sendBroadcast(c.env, c.get("principal"), row.id, body.scheduled_at);
      } catch (err) {
        // Nothing is kept of a create-and-send that cannot be sent.
        await deleteBroadcast(c.env.DB, account(c), row.id).catch(() => {});
        throw err;
      }
    }
    return c.json({ object: "broadcast" as const, id: row.id }, 201);
  });

  defineRoute(app, "full", createRoute({
    method: "get", path: "/broadcasts", tags: ["Broadcasts"], summary: "List broadcasts",
    request: { query: ListQuery },
    responses: { 200: json(listSchema(Broadcast), "The account's broadcasts, newest first"), ...errorResponses(401, 403, 422) },
  }), async (c) => {
    const list = await listBroadcasts(c.env.DB, account(c), readPage(c.req.query()));
    return c.json({ ...list, data: list.data.map(view) });
  });

  defineRoute(app, "full", createRoute({
    method: "get", path: "/broadcasts/{id}", tags: ["Broadcasts"], summary: "Retrieve a broadcast",
    request: { params: IdParam },
    responses: { 200: json(Broadcast, "The broadcast"), ...errorResponses(401, 403, 404) },
  }), async (c) => {
    const row = await findBroadcast(c.env.DB, account(c), c.req.param("id")!);
    if (!row) throw notFound();
    return c.json(view(row));
  });

  defineRoute(app, "full", createRoute({
    method: "patch", path: "/broadcasts/{id}", tags: ["Broadcasts"], summary: "Update a draft broadcast",
    request: { params: IdParam, ...jsonBody(UpdateBroadcastRequest) },
    responses: { 200: json(Ref, "Updated"), ...errorResponses(400, 401, 403, 404, 422) },
  }), async (c) => {
    const body = validate(UpdateBroadcastRequest, await readJson(c.req.raw));
    const row = await updateBroadcast(c.env.DB, account(c), c.req.param("id")!, fieldsOf(body));
    if (!row) throw notFound();
    return c.json({ object: "broadcast" as const, id: row.id });
  });

  defineRoute(app, "full", createRoute({
    method: "delete", path: "/broadcasts/{id}", tags: ["Broadcasts"], summary: "Delete a draft broadcast",
    description: "A draft; also (beyond Resend) a canceled or failed broadcast that reached nobody. One that recorded any email stays, so its emails and metrics keep their broadcast.",
    request: { params: IdParam },
    responses: { 200: json(z.object({ object: z.literal("broadcast"), id: z.string(), deleted: z.literal(true) }), "Deleted"), ...errorResponses(401, 403, 404, 422) },
  }), async (c) => {
    const row = await deleteBroadcast(c.env.DB, account(c), c.req.param("id")!);
    if (!row) throw notFound();
    return c.json({ object: "broadcast" as const, id: row.id, deleted: true as const });
  });

  defineRoute(app, "full", createRoute({
    method: "post", path: "/broadcasts/{id}/send", tags: ["Broadcasts"], summary: "Send or schedule a broadcast",
    description: "`scheduled_at` takes ISO 8601 or natural language (\"in 1 hour\", \"tomorrow at 9am\"), at most 30 days ahead.",
    request: { params: IdParam, body: { required: false, content: { "application/json": { schema: SendBroadcastRequest } } } },
    responses: { 200: json(z.object({ id: z.string() }), "Sent or scheduled"), ...errorResponses(400, 401, 403, 404, 422) },
  }), async (c) => {
    const raw = c.req.header("content-length") === "0" || !c.req.raw.body ? {} : await readJson(c.req.raw);
    // No body is no options; a body of `null` (or any non-object) is refused: read as none, it sent the broadcast.
    const body = validate(SendBroadcastRequest, raw);
    const row = await sendBroadcast(c.env, c.get("principal"), c.req.param("id")!, body.scheduled_at);
    if (!row) throw notFound();
    return c.json({ id: row.id });
  });

  defineRoute(app, "full", createRoute({
    method: "post", path: "/broadcasts/{id}/cancel", tags: ["Broadcasts"], summary: "Cancel a broadcast",
    description: "A scheduled, queued or sending broadcast stops: contacts the fan-out has not reached get nothing.",
    request: { params: IdParam },
    responses: { 200: json(Ref, "Canceled"), ...errorResponses(401, 403, 404, 422) },
  }), async (c) => {
    const row = await cancelBroadcast(c.env.DB, account(c), c.req.param("id")!);
    if (!row) throw notFound();
    return c.json({ object: "broadcast" as const, id: row.id });
  });

  defineRoute(app, "full", createRoute({
    method: "post", path: "/broadcasts/{id}/duplicate", tags: ["Broadcasts"], summary: "Duplicate a broadcast",
    description: "A new draft with the same content and audience.",
    request: { params: IdParam },
    responses: { 200: json(Ref, "The copy"), ...errorResponses(401, 403, 404) },
  }), async (c) => {
    const row = await duplicateBroadcast(c.env.DB, c.get("principal"), c.req.param("id")!);
    if (!row) throw notFound();
    return c.json({ object: "broadcast" as const, id: row.id });
  });

  defineRoute(app, "full", createRoute({
    method: "get", path: "/broadcasts/{id}/recipients", tags: ["Broadcasts"], summary: "List a broadcast's recipients by event",
    request: { params: IdParam, query: RecipientsQuery },
    responses: { 200: json(listSchema(Recipient), "Recipients with at least one event of the type"), ...errorResponses(401, 403, 404, 422) },
  }), async (c) => {
    const id = c.req.param("id")!;
    const page = readPage(c.req.query());
    const q = validate(RecipientsQuery.pick({ type: true, email: true, bounce_type: true }), { type: c.req.query("type"), email: c.req.query("email"), bounce_type: c.req.query("bounce_type") }, "query");
    if (q.bounce_type && q.type !== "bounced") throw new ApiError("validation_error", "`bounce_type` can only be used with `type=bounced`.");
    if (!(await findBroadcast(c.env.DB, account(c), id))) throw notFound();
    const list = await listRecipients(c.env.DB, account(c), id, q.type, page, q.email);
    const data = list.data.map((r) => {
      const events = JSON.parse(r.dataJson) as Array<{ bounce?: { type?: string }; click?: { link?: string } }>;
      const row: z.infer<typeof Recipient> = { id: r.emailId, contact_id: r.contactId, email: r.email };
      if (q.type === "opened" || q.type === "clicked") row.count = r.count;
      if (q.type === "bounced") row.bounce_type = (events[0]?.bounce?.type ?? "Undetermined").toLowerCase() as "permanent";
      if (q.type === "clicked") {
        const links = new Map<string, number>();
        for (const e of events) if (e.click?.link) links.set(e.click.link, (links.get(e.click.link) ?? 0) + 1);
        row.clicked_links = [...links].map(([url, clicks]) => ({ url, clicks }));
      }
      return row;
    }).filter((r) => !q.bounce_type || r.bounce_type === q.bounce_type);
    return c.json({ ...list, data });
  });

  defineRoute(app, "full", createRoute({
    method: "get", path: "/broadcasts/{id}/clicked-links", tags: ["Broadcasts"], summary: "List a broadcast's clicked links",
    request: { params: IdParam, query: ListQuery },
    responses: { 200: json(listSchema(ClickedLink), "Each clicked URL with its clicks, most clicked first"), ...errorResponses(401, 403, 404, 422) },
  }), async (c) => {
    const id = c.req.param("id")!;
    const page = readPage(c.req.query());
    if (!(await findBroadcast(c.env.DB, account(c), id))) throw notFound();
    const rows = await clickedLinks(c.env.DB, account(c), id);
    // Few links per broadcast: the cursor is the row's position, as Resend's opaque ids are.
    const all = rows.map((r, i) => ({ id: btoa(`offset:${i}`).replace(/=+$/, ""), url: r.url, clicks: r.clicks, unique_clicks: r.unique }));
    return c.json({ object: "list" as const, has_more: all.length > page.limit, data: all.slice(0, page.limit) });
  });
}
