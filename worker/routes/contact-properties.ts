// Contact properties (Resend's /contact-properties): keys contacts may carry, with a type and a
// fallback. The key and type are fixed once created; the fallback may change.
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App, type Ctx } from "../app.ts";
import { createProperty, deleteProperty, fallbackOf, findProperty, listProperties, MAX_PROPERTY_VALUE_LENGTH, PROPERTY_KEY, updateProperty } from "../contacts/properties.ts";
import type { ContactPropertyRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { readJson, validate } from "../http.ts";
import { ListQuery, listSchema, readPage } from "../pagination.ts";
import { errorResponses, IdParam, iso, json, jsonBody } from "./schemas.ts";

const Fallback = z.union([z.string().max(MAX_PROPERTY_VALUE_LENGTH), z.number().finite()], { error: "`fallback_value` must be a string or a number." }).nullable();
export const CreateContactPropertyRequest = z.object({
  key: z.string({ error: "`key` must be a string." }).regex(PROPERTY_KEY, "`key` must be 1 to 50 letters, digits or underscores."),
  type: z.enum(["string", "number"], { error: "`type` must be `string` or `number`." }),
  fallback_value: Fallback.optional(),
}).openapi("CreateContactPropertyRequest");
export const UpdateContactPropertyRequest = z.object({ fallback_value: Fallback.optional() }).openapi("UpdateContactPropertyRequest");

const ContactProperty = z.object({
  object: z.literal("contact_property"), id: z.string(), key: z.string(), type: z.enum(["string", "number"]),
  fallback_value: z.union([z.string(), z.number()]).nullable(), created_at: z.string(),
}).openapi("ContactProperty");
const Ref = z.object({ object: z.literal("contact_property"), id: z.string() });
const Deleted = z.object({ object: z.literal("contact_property"), id: z.string(), deleted: z.literal(true) });

function view(r: ContactPropertyRow) {
  return { object: "contact_property" as const, id: r.id, key: r.key, type: r.type, fallback_value: fallbackOf(r), created_at: iso(r.createdAt)! };
}

const notFound = () => new ApiError("not_found", "Contact property not found.");
const account = (c: Ctx) => c.get("principal").accountId;

export function registerContactPropertyRoutes(app: App): void {
  defineRoute(
    app,
    "full",
    createRoute({
      method: "post", path: "/contact-properties", tags: ["Contact Properties"], summary: "Create a contact property",
      request: jsonBody(CreateContactPropertyRequest),
      responses: { 201: json(Ref, "The new property"), ...errorResponses(400, 401, 403, 422) },
    }),
    async (c) => {
      const body = validate(CreateContactPropertyRequest, await readJson(c.req.raw));
      const row = await createProperty(c.env.DB, account(c), { key: body.key, type: body.type, fallback: body.fallback_value });
      return c.json({ object: "contact_property" as const, id: row.id }, 201);
    },
  );
  defineRoute(
    app,
    "full",
    createRoute({
      method: "get", path: "/contact-properties", tags: ["Contact Properties"], summary: "List contact properties",
      request: { query: ListQuery },
      responses: { 200: json(listSchema(ContactProperty), "The account's properties, newest first"), ...errorResponses(401, 403, 422) },
    }),
    async (c) => {
      const list = await listProperties(c.env.DB, account(c), readPage(c.req.query()));
      return c.json({ ...list, data: list.data.map(view) });
    },
  );
  defineRoute(
    app,
    "full",
    createRoute({
      method: "get", path: "/contact-properties/{id}", tags: ["Contact Properties"], summary: "Retrieve a contact property",
      request: { params: IdParam },
      responses: { 200: json(ContactProperty, "The property"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const row = await findProperty(c.env.DB, account(c), c.req.param("id")!);
      if (!row) throw notFound();
      return c.json(view(row));
    },
  );
  defineRoute(
    app,
    "full",
    createRoute({
      method: "patch", path: "/contact-properties/{id}", tags: ["Contact Properties"], summary: "Update a contact property's fallback",
      request: { params: IdParam, ...jsonBody(UpdateContactPropertyRequest) },
      responses: { 200: json(Ref, "Updated"), ...errorResponses(400, 401, 403, 404, 422) },
    }),
    async (c) => {
      const body = validate(UpdateContactPropertyRequest, await readJson(c.req.raw));
      const row = await updateProperty(c.env.DB, account(c), c.req.param("id")!, body.fallback_value);
      if (!row) throw notFound();
      return c.json({ object: "contact_property" as const, id: row.id });
    },
  );
  defineRoute(
    app,
    "full",
    createRoute({
      method: "delete", path: "/contact-properties/{id}", tags: ["Contact Properties"], summary: "Delete a contact property",
      description: "Its values are removed from every contact.",
      request: { params: IdParam },
      responses: { 200: json(Deleted, "Deleted"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const row = await deleteProperty(c.env, account(c), c.req.param("id")!);
      if (!row) throw notFound();
      return c.json({ object: "contact_property" as const, id: row.id, deleted: true as const });
    },
  );
}
