// Templates (Resend's /templates): create and edit a draft, publish it, duplicate, delete; every
// {id} path takes the id or the alias. Sending with one is POST /emails with `template`.
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App, type Ctx } from "../app.ts";
import type { TemplateRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { readJson, validate } from "../http.ts";
import { isUuid } from "../ids.ts";
import { parseMailbox } from "../mime/address.ts";
import { ListQuery, listSchema, readPage } from "../pagination.ts";
import { createTemplate, deleteTemplate, duplicateTemplate, findTemplate, listTemplates, publishTemplate, updateTemplate, viewOf, type TemplateContent } from "../templates/templates.ts";
import { errorResponses, iso, json, jsonBody, label } from "./schemas.ts";

const Mailbox = (field: string) => z.string({ error: `\`${field}\` must be a string.` }).refine((s) => parseMailbox(s) !== null, `\`${field}\` must be an email address like \`a@example.com\` or \`Name <a@example.com>\`.`);
const Alias = z.string({ error: "`alias` must be a string." })
  .regex(/^[A-Za-z0-9_-]{1,100}$/, "`alias` must be 1 to 100 letters, digits, `-` or `_`.")
  .refine((s) => !isUuid(s), "`alias` must not look like an id.");
const Variable = z.object({
  key: z.string({ error: "must be a string." }).regex(/^[A-Za-z_][A-Za-z0-9_]{0,49}$/, "must be 1 to 50 letters, digits or underscores, not starting with a digit.")
    .refine((k) => k !== "RESEND_UNSUBSCRIBE_URL", "is reserved: tern fills RESEND_UNSUBSCRIBE_URL itself."),
  type: z.enum(["string", "number", "boolean", "object", "list"], { error: "must be string, number, boolean, object or list." }),
  fallback_value: z.unknown().optional().openapi({ description: "Used when a send gives no value; of the variable's type." }),
}).openapi("TemplateVariableInput");
const fields = {
  name: label("name", 256),
  alias: Alias.nullable().optional(),
  from: Mailbox("from").nullable().optional(),
  subject: z.string({ error: "`subject` must be a string." }).max(998).refine((s) => !/[\r\n\0]/.test(s), "`subject` must not contain line breaks.").nullable().optional(),
  reply_to: z.union([Mailbox("reply_to"), z.array(Mailbox("reply_to")).max(50)]).nullable().optional(),
  html: z.string({ error: "`html` must be a string." }).min(1, "`html` must not be empty.").max(2_000_000),
  text: z.string({ error: "`text` must be a string." }).max(2_000_000).nullable().optional(),
  variables: z.array(Variable).max(50, "`variables` may declare at most 50.").optional(),
};
export const CreateTemplateRequest = z.object(fields).openapi("CreateTemplateRequest");
export const UpdateTemplateRequest = z.object({ ...fields, name: fields.name.optional(), html: fields.html.optional() }).openapi("UpdateTemplateRequest");

const TemplateRef = z.object({ object: z.literal("template"), id: z.string() });
const Template = z.object({
  object: z.literal("template"), id: z.string(), current_version_id: z.string(), name: z.string(), alias: z.string().nullable(),
  from: z.string().nullable(), subject: z.string().nullable(), reply_to: z.array(z.string()).nullable(), html: z.string(), text: z.string().nullable(),
  variables: z.array(z.object({ key: z.string(), type: z.string(), fallback_value: z.unknown() })),
  status: z.enum(["draft", "published"]), published_at: z.string().nullable(), has_unpublished_versions: z.boolean(),
  created_at: z.string(), updated_at: z.string(),
}).openapi("Template");
const TemplateListItem = z.object({ id: z.string(), name: z.string(), alias: z.string().nullable(), status: z.enum(["draft", "published"]), published_at: z.string().nullable(), created_at: z.string(), updated_at: z.string() });

function status(r: TemplateRow) {
  return r.publishedJson === null ? ("draft" as const) : ("published" as const);
}
function view(r: TemplateRow) {
  const { draft } = viewOf(r);
  return {
    object: "template" as const, id: r.id, current_version_id: r.currentVersionId, name: r.name, alias: r.alias,
    from: draft.from, subject: draft.subject, reply_to: draft.reply_to, html: draft.html, text: draft.text,
    variables: draft.variables.map((v) => ({ key: v.key, type: v.type, fallback_value: v.fallback_value ?? null })),
    status: status(r), published_at: iso(r.publishedAt), has_unpublished_versions: r.publishedJson !== null && r.publishedJson !== r.draftJson,
    created_at: iso(r.createdAt)!, updated_at: iso(r.updatedAt)!,
  };
}
const listItem = (r: TemplateRow) => ({ id: r.id, name: r.name, alias: r.alias, status: status(r), published_at: iso(r.publishedAt), created_at: iso(r.createdAt)!, updated_at: iso(r.updatedAt)! });

type Body = z.infer<typeof UpdateTemplateRequest>;
export function contentOf(b: Body): Partial<TemplateContent> {
  return {
    from: b.from, subject: b.subject, html: b.html, text: b.text,
    reply_to: b.reply_to === undefined ? undefined : b.reply_to === null ? null : Array.isArray(b.reply_to) ? b.reply_to : [b.reply_to],
    variables: b.variables as TemplateContent["variables"] | undefined,
  };
}

const notFound = () => new ApiError("not_found", "Template not found.");
const account = (c: Ctx) => c.get("principal").accountId;
const REF = "[^/]+";
const RefParam = z.object({ id: z.string().openapi({ param: { name: "id", in: "path", description: "The template's id or alias." } }) });

export function registerTemplateRoutes(app: App): void {
  defineRoute(app, "full", createRoute({
    method: "post", path: "/templates", tags: ["Templates"], summary: "Create a template",
    description: "A draft; publish it before sends can use it.",
    request: jsonBody(CreateTemplateRequest),
    responses: { 201: json(TemplateRef, "The new template"), ...errorResponses(400, 401, 403, 422) },
  }), async (c) => {
    const body = validate(CreateTemplateRequest, await readJson(c.req.raw));
    const content = contentOf(body);
    const row = await createTemplate(c.env.DB, account(c), {
      name: body.name, alias: body.alias,
      content: { from: content.from ?? null, subject: content.subject ?? null, reply_to: content.reply_to ?? null, html: body.html, text: content.text ?? null, variables: content.variables ?? [] },
    });
    return c.json({ object: "template" as const, id: row.id }, 201);
  });

  defineRoute(app, "full", createRoute({
    method: "get", path: "/templates", tags: ["Templates"], summary: "List templates",
    request: { query: ListQuery },
    responses: { 200: json(listSchema(TemplateListItem), "The account's templates, newest first"), ...errorResponses(401, 403, 422) },
  }), async (c) => {
    const list = await listTemplates(c.env.DB, account(c), readPage(c.req.query()));
    return c.json({ ...list, data: list.data.map(listItem) });
  });

  defineRoute(app, "full", createRoute({
    method: "get", path: "/templates/{id}", tags: ["Templates"], summary: "Retrieve a template",
    description: "Its current draft, with its publication status.",
    request: { params: RefParam },
    responses: { 200: json(Template, "The template"), ...errorResponses(401, 403, 404) },
    paramPattern: REF,
  }), async (c) => {
    const row = await findTemplate(c.env.DB, account(c), c.req.param("id")!);
    if (!row) throw notFound();
    return c.json(view(row));
  });

  defineRoute(app, "full", createRoute({
    method: "patch", path: "/templates/{id}", tags: ["Templates"], summary: "Update a template's draft",
    description: "Sends keep using the published version until the next publish.",
    request: { params: RefParam, ...jsonBody(UpdateTemplateRequest) },
    responses: { 200: json(TemplateRef, "Updated"), ...errorResponses(400, 401, 403, 404, 422) },
    paramPattern: REF,
  }), async (c) => {
    const body = validate(UpdateTemplateRequest, await readJson(c.req.raw));
    const row = await updateTemplate(c.env.DB, account(c), c.req.param("id")!, { name: body.name, alias: body.alias, content: contentOf(body) });
    if (!row) throw notFound();
    return c.json({ object: "template" as const, id: row.id });
  });

  defineRoute(app, "full", createRoute({
    method: "delete", path: "/templates/{id}", tags: ["Templates"], summary: "Delete a template",
    request: { params: RefParam },
    responses: { 200: json(z.object({ object: z.literal("template"), id: z.string(), deleted: z.literal(true) }), "Deleted"), ...errorResponses(401, 403, 404) },
    paramPattern: REF,
  }), async (c) => {
    const row = await deleteTemplate(c.env.DB, account(c), c.req.param("id")!);
    if (!row) throw notFound();
    return c.json({ object: "template" as const, id: row.id, deleted: true as const });
  });

  defineRoute(app, "full", createRoute({
    method: "post", path: "/templates/{id}/publish", tags: ["Templates"], summary: "Publish a template",
    description: "The current draft becomes the version sends use. A draft whose body shows nothing (no text or image) is refused with a 422; sends keep the version published before.",
    request: { params: RefParam },
    responses: { 200: json(TemplateRef, "Published"), ...errorResponses(401, 403, 404, 422) },
    paramPattern: REF,
  }), async (c) => {
    const row = await publishTemplate(c.env.DB, account(c), c.req.param("id")!);
    if (!row) throw notFound();
    return c.json({ object: "template" as const, id: row.id });
  });

  defineRoute(app, "full", createRoute({
    method: "post", path: "/templates/{id}/duplicate", tags: ["Templates"], summary: "Duplicate a template",
    description: "A new draft with the same content, named \"<name> (Copy)\", without the alias.",
    request: { params: RefParam },
    responses: { 200: json(TemplateRef, "The copy"), ...errorResponses(401, 403, 404) },
    paramPattern: REF,
  }), async (c) => {
    const row = await duplicateTemplate(c.env.DB, account(c), c.req.param("id")!);
    if (!row) throw notFound();
    return c.json({ object: "template" as const, id: row.id });
  });
}
