// CSV contact imports (Resend's /contacts/imports): multipart upload with a column map, upsert
// or skip, segments and topics to join; processed in the background, with status and counts.
// The failed rows' reasons are the dashboard's only: Resend's import object has no field for them.
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App, type Ctx } from "../app.ts";
import { createImport, findImport, listImports, MAX_IMPORT_BYTES, type ImportOptions } from "../contacts/imports.ts";
import type { ContactImportRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { refuseProtoKeys, validate } from "../http.ts";
import { fieldBytes, fieldText, formParts, MalformedForm } from "../multipart-form.ts";
import { ListQuery, listSchema, readPage } from "../pagination.ts";
import { errorResponses, IdParam, iso, json } from "./schemas.ts";

const Column = z.string().min(1).max(256);
const ColumnMap = z.object({
  email: Column,
  first_name: Column.optional(),
  last_name: Column.optional(),
  unsubscribed: Column.optional(),
  properties: z.record(z.string().regex(/^[A-Za-z0-9_]{1,50}$/, "must be 1 to 50 letters, digits or underscores."), z.object({ column: Column, type: z.enum(["string", "number", "boolean"]).optional() })).optional(),
});
const Segments = z.array(z.union([z.string().uuid(), z.object({ id: z.string().uuid() })])).max(100);
const Topics = z.array(z.object({ id: z.string().uuid(), subscription: z.enum(["opt_in", "opt_out"]) })).max(100);
const Form = z.object({
  column_map: ColumnMap.optional(),
  on_conflict: z.enum(["upsert", "skip"], { error: "`on_conflict` must be `upsert` or `skip`." }).optional(),
  segments: Segments.optional(),
  topics: Topics.optional(),
});
const CreateImportForm = z.object({
  file: z.string().openapi({ type: "string", format: "binary", description: "The CSV file, with a header row; at most 50 MB." }),
  column_map: z.string().optional().openapi({ description: "JSON: {email, first_name?, last_name?, unsubscribed?, properties?: {key: {column, type?}}}. Default: the columns named email, first_name, last_name, unsubscribed." }),
  on_conflict: z.enum(["upsert", "skip"]).optional(),
  segments: z.string().optional().openapi({ description: "JSON array of segment ids (or {id})." }),
  topics: z.string().optional().openapi({ description: "JSON array of {id, subscription}." }),
}).openapi("CreateContactImportForm");

const ContactImport = z.object({
  object: z.literal("contact_import"), id: z.string(), status: z.enum(["queued", "in_progress", "completed", "failed"]),
  created_at: z.string(), completed_at: z.string().nullable(),
  counts: z.object({ total: z.number().int(), created: z.number().int(), updated: z.number().int(), skipped: z.number().int(), failed: z.number().int() }),
}).openapi("ContactImport");

function view(r: ContactImportRow) {
  return {
    object: "contact_import" as const, id: r.id, status: r.status as "queued", created_at: iso(r.createdAt)!, completed_at: iso(r.completedAt),
    counts: { total: r.total, created: r.created, updated: r.updated, skipped: r.skipped, failed: r.failed },
  };
}

/** The form's fields besides the file. */
const FIELDS = ["column_map", "on_conflict", "segments", "topics"];

/** A field's value (null: it was sent as a file). */
function jsonField(fields: Map<string, string | null>, name: string): unknown {
  const v = fields.get(name);
  if (v === undefined) return undefined;
  if (v === null) throw new ApiError("validation_error", `\`${name}\` must be a JSON string.`);
  if (name === "on_conflict") return v;
  let parsed: unknown;
  try {
    parsed = JSON.parse(v);
  } catch {
    throw new ApiError("validation_error", `\`${name}\` must be JSON.`);
  }
  refuseProtoKeys(v, parsed);
  return parsed;
}

const account = (c: Ctx) => c.get("principal").accountId;

export function registerContactImportRoutes(app: App): void {
  defineRoute(app, "full", createRoute({
    method: "post", path: "/contacts/imports", tags: ["Contacts"], summary: "Import contacts from a CSV file",
    request: { body: { required: true, content: { "multipart/form-data": { schema: CreateImportForm } } } },
    responses: { 201: json(z.object({ object: z.literal("contact_import"), id: z.string() }), "The import, queued"), ...errorResponses(400, 401, 403, 413, 422) },
  }), async (c) => {
    const { file, options } = await readImportForm(c.req.raw);
    const row = await createImport(c.env, account(c), file, options);
    return c.json({ object: "contact_import" as const, id: row.id }, 201);
  });

  defineRoute(app, "full", createRoute({
    method: "get", path: "/contacts/imports", tags: ["Contacts"], summary: "List contact imports",
    request: { query: ListQuery.extend({ status: z.enum(["queued", "in_progress", "completed", "failed"]).optional() }) },
    responses: { 200: json(listSchema(ContactImport), "The account's imports, newest first"), ...errorResponses(401, 403, 422) },
  }), async (c) => {
    const { status } = validate(z.object({ status: z.enum(["queued", "in_progress", "completed", "failed"], { error: "`status` must be queued, in_progress, completed or failed." }).optional() }), { status: c.req.query("status") }, "query");
    const list = await listImports(c.env.DB, account(c), readPage(c.req.query()), status);
    return c.json({ ...list, data: list.data.map(view) });
  });

  defineRoute(app, "full", createRoute({
    method: "get", path: "/contacts/imports/{id}", tags: ["Contacts"], summary: "Retrieve a contact import",
    request: { params: IdParam },
    responses: { 200: json(ContactImport, "The import, with its status and counts"), ...errorResponses(401, 403, 404) },
  }), async (c) => {
    const row = await findImport(c.env.DB, account(c), c.req.param("id")!);
    if (!row) throw new ApiError("not_found", "Contact import not found.");
    return c.json(view(row));
  });
}

/** The multipart upload (the file and its options, defaults not yet applied) as createImport
 * takes it; the dashboard's upload is the same form, read here too. The form is read as it
 * arrives: the file is kept as the body's own pieces, held once, never joined into one buffer. */
export async function readImportForm(req: Request): Promise<{ file: Uint8Array[]; options: Partial<ImportOptions> }> {
  let file: Uint8Array[] | undefined;
  const fields = new Map<string, string | null>();
  try {
    // The file's limit and a megabyte of the rest: a body sent without a length is stopped there.
    for await (const part of formParts(req, MAX_IMPORT_BYTES + 1024 * 1024)) {
      // The first part of each name counts, as FormData.get() reads it; the others are let go.
      if (part.name === "file") {
        // A file sent as a text field (curl -F 'file=<contacts.csv') is read as one: invalid
        // UTF-8 replaced by U+FFFD, as Response.formData() has always decoded it.
        file ??= part.filename === undefined ? fieldBytes(part.content) : part.content;
      } else if (FIELDS.includes(part.name) && !fields.has(part.name)) {
        fields.set(part.name, part.filename === undefined ? fieldText(part.content) : null);
      }
    }
  } catch (err) {
    if (err instanceof MalformedForm) throw new ApiError("validation_error", "The request body must be multipart/form-data with a `file` field.", 400);
    throw err instanceof ApiError && err.status === 413 ? new ApiError("validation_error", "The file must be at most 50 MB.", 413) : err;
  }
  if (file === undefined) throw new ApiError("missing_required_field", "Missing `file` field.");
  const opts = validate(Form, { column_map: jsonField(fields, "column_map"), on_conflict: jsonField(fields, "on_conflict"), segments: jsonField(fields, "segments"), topics: jsonField(fields, "topics") });
  return { file, options: { ...opts, segments: opts.segments?.map((s) => (typeof s === "string" ? s : s.id)) } };
}
