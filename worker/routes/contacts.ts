// Contacts (Resend's contacts API shape): an address per account with a name, whether it
// unsubscribed, property values, segments and topic choices; also the audience-scoped paths
// older clients call (/audiences/{id}/contacts...). Create answers 201 {object, id}; every
// change emits contact.*. The rules and queries live in worker/contacts/.
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App, type Ctx } from "../app.ts";
import {
  addContactToSegment,
  contactProperties,
  createContact,
  deleteContact,
  findContact,
  listContacts,
  listContactSegments,
  listContactTopics,
  removeContactFromSegment,
  updateContact,
  updateContactTopics,
  type MembershipResult,
} from "../contacts/contacts.ts";
import { type ContactRow } from "../db/schema.ts";
import { MAX_PROPERTIES_PER_REQUEST, MAX_PROPERTY_VALUE_LENGTH, type PropertyValues } from "../contacts/properties.ts";
import { registerContactImportRoutes } from "./contact-imports.ts";
import { ApiError } from "../errors.ts";
import { readJson, validate } from "../http.ts";
import { parseMailbox } from "../mime/address.ts";
import { ListQuery, listSchema, readPage } from "../pagination.ts";
import { DeletedSchema, errorResponses, iso, json, jsonBody } from "./schemas.ts";

const Name = (field: string) =>
  z.string({ error: `\`${field}\` must be a string.` }).max(256, `\`${field}\` must be at most 256 characters.`).nullable().optional();

const Email = z
  .string({ error: "`email` must be a string." })
  .trim()
  .max(254, "`email` must be at most 254 characters.")
  .refine((s) => !/[<>]/.test(s) && parseMailbox(s) !== null, "`email` must be an email address like `a@example.com`.");

// Keys and value lengths are checked against the account's properties (worker/contacts/
// properties.ts), after the schema: a value's limit is stated here, enforced there.
const Properties = z.record(z.string(), z.union([z.string().openapi({ maxLength: MAX_PROPERTY_VALUE_LENGTH }), z.number(), z.null()]), { error: "`properties` must be an object of strings and numbers." })
  // zod has no size check for records: the refinement enforces it, maxProperties states it.
  .refine((o) => Object.keys(o).length <= MAX_PROPERTIES_PER_REQUEST, `\`properties\` may set at most ${MAX_PROPERTIES_PER_REQUEST} keys.`)
  .openapi({ maxProperties: MAX_PROPERTIES_PER_REQUEST, description: "Values of the account's contact properties (POST /contact-properties), by key; null removes one." });
const Uuid = (what: string) => z.string({ error: `must be a ${what} id.` }).uuid(`must be a ${what} id.`);
export const TopicChoice = z.object({
  id: Uuid("topic"),
  subscription: z.enum(["opt_in", "opt_out"], { error: "must be `opt_in` or `opt_out`." }),
});

export const CreateContactRequest = z
  .object({
    email: Email,
    first_name: Name("first_name"),
    last_name: Name("last_name"),
    unsubscribed: z.boolean({ error: "`unsubscribed` must be a boolean." }).optional(),
    properties: Properties.optional(),
    // Ids (as the OpenAPI document has them) or {id} objects (as the Node client sends them).
    segments: z.array(z.union([Uuid("segment"), z.object({ id: Uuid("segment") })])).max(100).optional(),
    topics: z.array(TopicChoice).max(100).optional(),
    audience_id: Uuid("segment").optional().openapi({ deprecated: true, description: "Use `segments`." }),
  })
  .openapi("CreateContactRequest");

export const UpdateContactRequest = z
  .object({
    first_name: Name("first_name"),
    last_name: Name("last_name"),
    unsubscribed: z.boolean({ error: "`unsubscribed` must be a boolean." }).optional(),
    properties: Properties.optional(),
  })
  .openapi("UpdateContactRequest");

const UpdateContactTopicsRequest = z.union([z.array(TopicChoice).max(100), z.object({ topics: z.array(TopicChoice).max(100) })]).openapi("UpdateContactTopicsRequest");

const ContactRef = z.object({ object: z.literal("contact"), id: z.string() }).openapi("ContactRef");
const Contact = z
  .object({
    object: z.literal("contact"),
    id: z.string(),
    email: z.string(),
    first_name: z.string().nullable(),
    last_name: z.string().nullable(),
    unsubscribed: z.boolean(),
    properties: z.record(z.string(), z.object({ type: z.enum(["string", "number"]), value: z.union([z.string(), z.number()]) }))
      .openapi({ description: "Each property the contact has, as Resend answers it: `{type, value}`." }),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi("Contact");
const ContactSegment = z.object({ id: z.string(), name: z.string(), created_at: z.string() }).openapi("ContactSegment");
// `id` repeats segment_id: resend-rust reads the answer as `{ id: SegmentId }`.
const ContactSegmentChange = z.object({ object: z.literal("contact_segment"), id: z.string(), contact_id: z.string(), segment_id: z.string(), deleted: z.boolean().optional() });
const ContactTopic = z.object({ id: z.string(), name: z.string(), description: z.string().nullable(), subscription: z.enum(["opt_in", "opt_out"]), created_at: z.string() }).openapi("ContactTopic");
// `contact` repeats id: resend-rust reads a removal as `{ contact: ContactId, deleted }`.
const ContactDeleted = DeletedSchema.extend({ contact: z.string() });
const ContactTopicsChange = z.object({ object: z.literal("contact_topics"), id: z.string(), contact_id: z.string(), topics: z.array(TopicChoice) });

/** Resend's form of a contact's properties, `{key: {type, value}}` (resend-node's fixtures;
 * resend-java and resend-rust read it into typed values). Values were checked against their
 * property's type when written, so the JSON type is the property's. */
function propertyView(values: PropertyValues) {
  return Object.fromEntries(Object.entries(values).map(([k, v]) => [k, { type: typeof v === "number" ? ("number" as const) : ("string" as const), value: v }]));
}

function contactView(r: ContactRow) {
  return {
    object: "contact" as const,
    id: r.id,
    email: r.email,
    first_name: r.firstName,
    last_name: r.lastName,
    unsubscribed: r.unsubscribed,
    properties: propertyView(contactProperties(r)),
    created_at: iso(r.createdAt)!,
    updated_at: iso(r.updatedAt)!,
  };
}

const notFound = () => new ApiError("not_found", "Contact not found.");
const segmentNotFound = () => new ApiError("not_found", "Segment not found.");

/** Resend's contact routes take the contact's id or its email address: a path segment of either,
 * but not `imports` alone, so /contacts/imports is its own path (a DELETE there is a 405, not a
 * search for a contact called "imports"). */
const CONTACT_REF = "(?!imports$)[^/]+";
const ContactParam = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path", description: "The contact's id, or its email address." }, example: "ada@example.com" }),
});
const ContactSegmentParams = z.object({
  contact_id: z.string().openapi({ param: { name: "contact_id", in: "path", description: "The contact's id, or its email address." } }),
  segment_id: z.string().openapi({ param: { name: "segment_id", in: "path" } }),
});
const ContactIdParam = z.object({ contact_id: z.string().openapi({ param: { name: "contact_id", in: "path", description: "The contact's id, or its email address." } }) });
const AudienceParam = z.object({ audience_id: z.string().openapi({ param: { name: "audience_id", in: "path" } }) });
const AudienceContactParams = z.object({
  audience_id: z.string().openapi({ param: { name: "audience_id", in: "path" } }),
  id: z.string().openapi({ param: { name: "id", in: "path", description: "The contact's id, or its email address." } }),
});
const SegmentListQuery = ListQuery.extend({ segment_id: z.string().uuid("must be a segment id.").optional() });

const principal = (c: Ctx) => c.get("principal").accountId;

function membershipAnswer(r: MembershipResult, deleted: boolean) {
  if (!r.ok) throw r.missing === "contact" ? notFound() : segmentNotFound();
  return { object: "contact_segment" as const, id: r.segmentId, contact_id: r.contact.id, segment_id: r.segmentId, ...(deleted ? { deleted: true } : {}) };
}

export function createFrom(body: z.infer<typeof CreateContactRequest>, segments: string[] = []) {
  return {
    email: body.email,
    firstName: body.first_name,
    lastName: body.last_name,
    unsubscribed: body.unsubscribed,
    properties: body.properties,
    segments: [...(body.segments ?? []).map((s) => (typeof s === "string" ? s : s.id)), ...(body.audience_id ? [body.audience_id] : []), ...segments],
    topics: body.topics,
  };
}

export function patchFrom(body: z.infer<typeof UpdateContactRequest>) {
  return { firstName: body.first_name, lastName: body.last_name, unsubscribed: body.unsubscribed, properties: body.properties };
}

export function registerContactRoutes(app: App): void {
  // Before /contacts/{id}, whose parameter would also match "imports".
  registerContactImportRoutes(app);
  defineRoute(
    app,
    "full",
    createRoute({
      method: "post",
      path: "/contacts",
      tags: ["Contacts"],
      summary: "Create a contact",
      description: "One contact per address and account (addresses are kept in lower case); it may join segments and choose topics at once.",
      request: jsonBody(CreateContactRequest),
      responses: { 201: json(ContactRef, "The new contact"), ...errorResponses(400, 401, 403, 422) },
    }),
    async (c) => {
      const body = validate(CreateContactRequest, await readJson(c.req.raw));
      const row = await createContact(c.env, principal(c), createFrom(body));
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
      request: { query: SegmentListQuery },
      responses: { 200: json(listSchema(Contact), "Contacts of the account (or of one segment), newest first"), ...errorResponses(401, 403, 404, 422) },
    }),
    async (c) => {
      const page = readPage(c.req.query());
      const { segment_id } = validate(z.object({ segment_id: SegmentListQuery.shape.segment_id }), { segment_id: c.req.query("segment_id") }, "query");
      const list = await listContacts(c.env.DB, principal(c), page, segment_id);
      if (!list) throw segmentNotFound();
      return c.json({ ...list, data: list.data.map(contactView) });
    },
  );

  for (const [path, tag] of [["/segments/{audience_id}/contacts", "Segments"], ["/audiences/{audience_id}/contacts", "Audiences"]] as const) {
    defineRoute(
      app,
      "full",
      createRoute({
        method: "get",
        path,
        tags: [tag],
        summary: "List a segment's contacts",
        request: { params: AudienceParam, query: ListQuery },
        responses: { 200: json(listSchema(Contact), "The segment's contacts, newest first"), ...errorResponses(401, 403, 404, 422) },
      }),
      async (c) => {
        const list = await listContacts(c.env.DB, principal(c), readPage(c.req.query()), c.req.param("audience_id")!);
        if (!list) throw segmentNotFound();
        return c.json({ ...list, data: list.data.map(contactView) });
      },
    );
  }

  // The older audience-scoped paths: the contact joins (or must be in) the audience.
  defineRoute(
    app,
    "full",
    createRoute({
      method: "post",
      path: "/audiences/{audience_id}/contacts",
      tags: ["Audiences"],
      summary: "Create a contact in an audience",
      description: "Deprecated by Resend in favour of POST /contacts with `segments`; an audience is a segment.",
      request: { params: AudienceParam, ...jsonBody(CreateContactRequest) },
      responses: { 201: json(ContactRef, "The new contact"), ...errorResponses(400, 401, 403, 404, 422) },
    }),
    async (c) => {
      const body = validate(CreateContactRequest, await readJson(c.req.raw));
      const audienceId = c.req.param("audience_id")!;
      if (!(await listContacts(c.env.DB, principal(c), { limit: 1 }, audienceId))) throw segmentNotFound();
      const row = await createContact(c.env, principal(c), createFrom(body, [audienceId]));
      return c.json({ object: "contact" as const, id: row.id }, 201);
    },
  );

  /** The contact by id or address, only if it is in the audience. */
  async function audienceContact(c: Ctx): Promise<ContactRow> {
    const row = await findContact(c.env.DB, principal(c), c.req.param("id")!);
    if (!row) throw notFound();
    const segments = await listContactSegments(c.env.DB, principal(c), row.id, { limit: 100 });
    if (!segments!.data.some((s) => s.id === c.req.param("audience_id"))) throw notFound();
    return row;
  }

  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/audiences/{audience_id}/contacts/{id}",
      tags: ["Audiences"],
      summary: "Retrieve a contact of an audience",
      request: { params: AudienceContactParams },
      responses: { 200: json(Contact, "The contact"), ...errorResponses(401, 403, 404) },
      paramPattern: CONTACT_REF,
    }),
    async (c) => c.json(contactView(await audienceContact(c))),
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "patch",
      path: "/audiences/{audience_id}/contacts/{id}",
      tags: ["Audiences"],
      summary: "Update a contact of an audience",
      request: { params: AudienceContactParams, ...jsonBody(UpdateContactRequest) },
      responses: { 200: json(ContactRef, "Updated"), ...errorResponses(400, 401, 403, 404, 422) },
      paramPattern: CONTACT_REF,
    }),
    async (c) => {
      const body = validate(UpdateContactRequest, await readJson(c.req.raw));
      const row = await audienceContact(c);
      const after = await updateContact(c.env, principal(c), row.id, patchFrom(body));
      if (!after) throw notFound();
      return c.json({ object: "contact" as const, id: after.id });
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "delete",
      path: "/audiences/{audience_id}/contacts/{id}",
      tags: ["Audiences"],
      summary: "Delete a contact of an audience",
      description: "Deletes the contact, as the audience-scoped API always did (a contact then belonged to one audience).",
      request: { params: AudienceContactParams },
      responses: { 200: json(ContactDeleted, "Deleted"), ...errorResponses(401, 403, 404) },
      paramPattern: CONTACT_REF,
    }),
    async (c) => {
      const row = await audienceContact(c);
      const deleted = await deleteContact(c.env, principal(c), row.id);
      if (!deleted) throw notFound();
      return c.json({ object: "contact", id: deleted.id, contact: deleted.id, deleted: true as const });
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/contacts/{contact_id}/segments",
      tags: ["Contacts"],
      summary: "List a contact's segments",
      request: { params: ContactIdParam, query: ListQuery },
      responses: { 200: json(listSchema(ContactSegment), "The segments, with when the contact joined each"), ...errorResponses(401, 403, 404, 422) },
      paramPattern: CONTACT_REF,
    }),
    async (c) => {
      const list = await listContactSegments(c.env.DB, principal(c), c.req.param("contact_id")!, readPage(c.req.query()));
      if (!list) throw notFound();
      return c.json({ ...list, data: list.data.map((s) => ({ id: s.id, name: s.name, created_at: iso(s.createdAt)! })) });
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "post",
      path: "/contacts/{contact_id}/segments/{segment_id}",
      tags: ["Contacts"],
      summary: "Add a contact to a segment",
      description: "Adding a contact that is already in the segment changes nothing. Emits contact.updated.",
      request: { params: ContactSegmentParams },
      responses: { 200: json(ContactSegmentChange, "Added"), ...errorResponses(401, 403, 404) },
      paramPattern: CONTACT_REF,
    }),
    async (c) => c.json(membershipAnswer(await addContactToSegment(c.env, principal(c), c.req.param("contact_id")!, c.req.param("segment_id")!), false)),
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "delete",
      path: "/contacts/{contact_id}/segments/{segment_id}",
      tags: ["Contacts"],
      summary: "Remove a contact from a segment",
      description: "Emits contact.updated.",
      request: { params: ContactSegmentParams },
      responses: { 200: json(ContactSegmentChange, "Removed"), ...errorResponses(401, 403, 404) },
      paramPattern: CONTACT_REF,
    }),
    async (c) => c.json(membershipAnswer(await removeContactFromSegment(c.env, principal(c), c.req.param("contact_id")!, c.req.param("segment_id")!), true)),
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/contacts/{contact_id}/topics",
      tags: ["Contacts"],
      summary: "List a contact's topic subscriptions",
      description: "Every topic of the account, with the contact's own choice or else the topic's default.",
      request: { params: ContactIdParam, query: ListQuery },
      responses: { 200: json(listSchema(ContactTopic), "The topics"), ...errorResponses(401, 403, 404, 422) },
      paramPattern: CONTACT_REF,
    }),
    async (c) => {
      const list = await listContactTopics(c.env.DB, principal(c), c.req.param("contact_id")!, readPage(c.req.query()));
      if (!list) throw notFound();
      return c.json(list);
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "patch",
      path: "/contacts/{contact_id}/topics",
      tags: ["Contacts"],
      summary: "Update a contact's topic subscriptions",
      description: "The body is `{topics: [{id, subscription}]}` or the array itself (as the Node client sends it). Emits contact.updated when a choice changes.",
      request: { params: ContactIdParam, ...jsonBody(UpdateContactTopicsRequest) },
      responses: { 200: json(ContactTopicsChange, "The choices"), ...errorResponses(400, 401, 403, 404, 422) },
      paramPattern: CONTACT_REF,
    }),
    async (c) => {
      const body = validate(UpdateContactTopicsRequest, await readJson(c.req.raw));
      const choices = Array.isArray(body) ? body : body.topics;
      const result = await updateContactTopics(c.env, principal(c), c.req.param("contact_id")!, choices);
      if (!result) throw notFound();
      // `id` too: the Node client reads the contact's id from it.
      return c.json({ object: "contact_topics" as const, id: result.contact.id, contact_id: result.contact.id, topics: result.topics });
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
      const row = await findContact(c.env.DB, principal(c), c.req.param("id")!);
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
      description: "Names, `unsubscribed` and `properties` (null removes a key); a change emits contact.updated.",
      request: { params: ContactParam, ...jsonBody(UpdateContactRequest) },
      responses: { 200: json(ContactRef, "Updated"), ...errorResponses(400, 401, 403, 404, 422) },
      paramPattern: CONTACT_REF,
    }),
    async (c) => {
      const body = validate(UpdateContactRequest, await readJson(c.req.raw));
      const row = await updateContact(c.env, principal(c), c.req.param("id")!, patchFrom(body));
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
      responses: { 200: json(ContactDeleted, "Deleted"), ...errorResponses(401, 403, 404) },
      paramPattern: CONTACT_REF,
    }),
    async (c) => {
      const deleted = await deleteContact(c.env, principal(c), c.req.param("id")!);
      if (!deleted) throw notFound();
      return c.json({ object: "contact", id: deleted.id, contact: deleted.id, deleted: true as const });
    },
  );
}
