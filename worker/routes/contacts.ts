// Contacts (issue 6, Resend's contacts API shape): an address per account with a name and
// whether it unsubscribed. Create answers 201 {object, id}; every change emits contact.*.
import { createRoute, z } from "@hono/zod-openapi";
import { eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { defineRoute, type App } from "../app.ts";
import { createContact, deleteContact, findContact, updateContact } from "../contacts/contacts.ts";
import { contacts, type ContactRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { readJson, validate } from "../http.ts";
import { parseMailbox } from "../mime/address.ts";
import { finishPage, ListQuery, listSchema, pageQuery, readPage } from "../pagination.ts";
import { DeletedSchema, errorResponses, iso, json, jsonBody } from "./schemas.ts";

const Name = (field: string) =>
  z.string({ error: `\`${field}\` must be a string.` }).max(256, `\`${field}\` must be at most 256 characters.`).nullable().optional();

const Email = z
  .string({ error: "`email` must be a string." })
  .trim()
  .max(254, "`email` must be at most 254 characters.")
  .refine((s) => !/[<>]/.test(s) && parseMailbox(s) !== null, "`email` must be an email address like `a@example.com`.");

export const CreateContactRequest = z
  .object({
    email: Email,
    first_name: Name("first_name"),
    last_name: Name("last_name"),
    unsubscribed: z.boolean({ error: "`unsubscribed` must be a boolean." }).optional(),
  })
  .openapi("CreateContactRequest");

export const UpdateContactRequest = z
  .object({
    first_name: Name("first_name"),
    last_name: Name("last_name"),
    unsubscribed: z.boolean({ error: "`unsubscribed` must be a boolean." }).optional(),
  })
  .openapi("UpdateContactRequest");

const ContactRef = z.object({ object: z.literal("contact"), id: z.string() }).openapi("ContactRef");
const Contact = z
  .object({
    object: z.literal("contact"),
    id: z.string(),
    email: z.string(),
    first_name: z.string().nullable(),
    last_name: z.string().nullable(),
    unsubscribed: z.boolean(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi("Contact");

function contactView(r: ContactRow) {
  return {
    object: "contact" as const,
    id: r.id,
    email: r.email,
    first_name: r.firstName,
    last_name: r.lastName,
    unsubscribed: r.unsubscribed,
    created_at: iso(r.createdAt)!,
    updated_at: iso(r.updatedAt)!,
  };
}

const notFound = () => new ApiError("not_found", "Contact not found.");

/** Resend's contact routes take the contact's id or its email address: a path segment of either. */
const CONTACT_REF = "[^/]+";
const ContactParam = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path", description: "The contact's id, or its email address." }, example: "ada@example.com" }),
});

export function registerContactRoutes(app: App): void {
  defineRoute(
    app,
    "full",
    createRoute({
      method: "post",
      path: "/contacts",
      tags: ["Contacts"],
      summary: "Create a contact",
      description: "One contact per address and account (addresses are kept in lower case).",
      request: jsonBody(CreateContactRequest),
      responses: { 201: json(ContactRef, "The new contact"), ...errorResponses(400, 401, 403, 422) },
    }),
    async (c) => {
      const body = validate(CreateContactRequest, await readJson(c.req.raw));
      const row = await createContact(c.env, c.get("principal").accountId, {
        email: body.email,
        firstName: body.first_name,
        lastName: body.last_name,
        unsubscribed: body.unsubscribed,
      });
      return c.json({ object: "contact" as const, id: row.id }, 201);
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/contacts",
      tags: ["Contacts"],
      summary: "List contacts",
      request: { query: ListQuery },
      responses: { 200: json(listSchema(Contact), "Contacts of the account, newest first"), ...errorResponses(401, 403, 422) },
    }),
    async (c) => {
      const page = readPage(c.req.query());
      const q = pageQuery(contacts.id, page, eq(contacts.accountId, c.get("principal").accountId));
      const rows = await drizzle(c.env.DB).select().from(contacts).where(q.where).orderBy(q.orderBy).limit(q.limit);
      return c.json(finishPage(rows.map(contactView), page));
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/contacts/{id}",
      tags: ["Contacts"],
      summary: "Retrieve a contact",
      request: { params: ContactParam },
      responses: { 200: json(Contact, "The contact"), ...errorResponses(401, 403, 404) },
      paramPattern: CONTACT_REF,
    }),
    async (c) => {
      const row = await findContact(c.env.DB, c.get("principal").accountId, c.req.param("id")!);
      if (!row) throw notFound();
      return c.json(contactView(row));
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "patch",
      path: "/contacts/{id}",
      tags: ["Contacts"],
      summary: "Update a contact",
      description: "Names and `unsubscribed`; a change emits contact.updated.",
      request: { params: ContactParam, ...jsonBody(UpdateContactRequest) },
      responses: { 200: json(ContactRef, "Updated"), ...errorResponses(400, 401, 403, 404, 422) },
      paramPattern: CONTACT_REF,
    }),
    async (c) => {
      const body = validate(UpdateContactRequest, await readJson(c.req.raw));
      const row = await updateContact(c.env, c.get("principal").accountId, c.req.param("id")!, {
        firstName: body.first_name,
        lastName: body.last_name,
        unsubscribed: body.unsubscribed,
      });
      if (!row) throw notFound();
      return c.json({ object: "contact" as const, id: row.id });
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "delete",
      path: "/contacts/{id}",
      tags: ["Contacts"],
      summary: "Delete a contact",
      request: { params: ContactParam },
      responses: { 200: json(DeletedSchema, "Deleted"), ...errorResponses(401, 403, 404) },
      paramPattern: CONTACT_REF,
    }),
    async (c) => {
      const deleted = await deleteContact(c.env, c.get("principal").accountId, c.req.param("id")!);
      if (!deleted) throw notFound();
      return c.json({ object: "contact", id: deleted.id, deleted: true as const });
    },
  );
}
