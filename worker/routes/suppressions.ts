// The suppression list (issue 6): addresses the account does not send to. Hard bounces and
// complaints add themselves; these routes list the list, add an address by hand and remove
// one (by id, or by address with `DELETE /suppressions?email=`), after which mail to it goes
// out again.
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App } from "../app.ts";
import { readJson, validate } from "../http.ts";
import { parseMailbox } from "../mime/address.ts";
import { ListQuery, listSchema, readPage } from "../pagination.ts";
import {
  addSuppression,
  addSuppressions,
  getSuppression,
  listSuppressions,
  MAX_SUPPRESSION_BATCH,
  removeSuppression,
  removeSuppressionByEmail,
  removeSuppressions,
} from "../suppressions/service.ts";
import { DeletedSchema, errorResponses, json, jsonBody } from "./schemas.ts";

const Email = z
  .string({ error: "`email` must be a string." })
  .trim()
  .max(254, "`email` must be at most 254 characters.")
  .refine((s) => !/[<>]/.test(s) && parseMailbox(s) !== null, "`email` must be an email address like `a@example.com`.");

export const CreateSuppressionRequest = z
  .object({
    email: Email,
    detail: z.string({ error: "`detail` must be a string." }).max(1000, "`detail` must be at most 1000 characters.").optional(),
  })
  .openapi("CreateSuppressionRequest");

const SuppressionRef = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" }, description: "The suppression's id or its email address.", example: "a@example.com" }),
});

const ListSuppressionsQuery = ListQuery.extend({
  origin: z.enum(["bounce", "complaint", "manual"], { error: "`origin` must be `bounce`, `complaint` or `manual`." }).optional(),
});

const EmailList = z
  .array(Email, { error: "`emails` must be an array of email addresses." })
  .min(1, "`emails` must have at least one address.")
  .max(MAX_SUPPRESSION_BATCH, `\`emails\` must have at most ${MAX_SUPPRESSION_BATCH} addresses.`);

export const BatchAddSuppressionsRequest = z.object({ emails: EmailList }).openapi("BatchAddSuppressionsRequest");

export const BatchRemoveSuppressionsRequest = z
  .object({
    emails: EmailList.optional(),
    ids: z
      .array(z.string().uuid("must be suppression ids."), { error: "`ids` must be an array of suppression ids." })
      .min(1, "`ids` must have at least one id.")
      .max(MAX_SUPPRESSION_BATCH, `\`ids\` must have at most ${MAX_SUPPRESSION_BATCH} ids.`)
      .optional(),
  })
  .refine((b) => (b.emails === undefined) !== (b.ids === undefined), { message: "Provide either `emails` or `ids`, but not both." })
  .openapi("BatchRemoveSuppressionsRequest");

const RemoveQuery = z.object({ email: Email.openapi({ description: "The address to take off the list." }) });

const Suppression = z
  .object({
    object: z.literal("suppression"),
    id: z.string(),
    email: z.string(),
    reason: z.enum(["bounce", "complaint", "manual"]),
    email_id: z.string().nullable().openapi({ description: "The email whose bounce or complaint added it." }),
    origin: z.enum(["bounce", "complaint", "manual"]).openapi({ description: "Resend's name for `reason`." }),
    source_id: z.string().nullable().openapi({ description: "Resend's name for `email_id`." }),
    detail: z.string().nullable(),
    created_at: z.string(),
  })
  .openapi("Suppression");

export function registerSuppressionRoutes(app: App): void {
  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/suppressions",
      tags: ["Suppressions"],
      summary: "List suppressed addresses",
      request: { query: ListSuppressionsQuery },
      responses: { 200: json(listSchema(Suppression), "Suppressed addresses, newest first"), ...errorResponses(401, 403, 422) },
    }),
    async (c) => {
      const { origin } = validate(ListSuppressionsQuery.pick({ origin: true }), c.req.query(), "query");
      return c.json(await listSuppressions(c.env.DB, c.get("principal").accountId, readPage(c.req.query()), origin));
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "post",
      path: "/suppressions",
      tags: ["Suppressions"],
      summary: "Suppress an address",
      description: "Mail to it is not attempted (email.suppressed) until it is removed. An address already on the list answers 200 with its entry.",
      request: jsonBody(CreateSuppressionRequest),
      responses: { 201: json(Suppression, "Added"), 200: json(Suppression, "Already on the list"), ...errorResponses(400, 401, 403, 422) },
    }),
    async (c) => {
      const body = validate(CreateSuppressionRequest, await readJson(c.req.raw));
      const added = await addSuppression(c.env.DB, c.get("principal").accountId, body.email, body.detail ?? null);
      return c.json(added.suppression, added.created ? 201 : 200);
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/suppressions/{id}",
      paramPattern: "[^/]+",
      tags: ["Suppressions"],
      summary: "Retrieve a suppression by id or address",
      request: { params: SuppressionRef },
      responses: { 200: json(Suppression, "The suppression"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => c.json(await getSuppression(c.env.DB, c.get("principal").accountId, c.req.param("id")!)),
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "delete",
      path: "/suppressions/{id}",
      paramPattern: "[^/]+",
      tags: ["Suppressions"],
      summary: "Remove a suppression by id or address",
      description: "Mail to it is attempted again.",
      request: { params: SuppressionRef },
      responses: { 200: json(DeletedSchema, "Removed"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => c.json(await removeSuppression(c.env.DB, c.get("principal").accountId, c.req.param("id")!)),
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "post",
      path: "/suppressions/batch/add",
      tags: ["Suppressions"],
      summary: "Suppress up to 100 addresses at once",
      description: "Addresses already on the list keep their entry (and its reason); every address answers its entry's id.",
      request: jsonBody(BatchAddSuppressionsRequest),
      responses: { 201: json(z.object({ data: z.array(z.object({ object: z.literal("suppression"), id: z.string() })) }), "Added"), ...errorResponses(400, 401, 403, 422) },
    }),
    async (c) => {
      const body = validate(BatchAddSuppressionsRequest, await readJson(c.req.raw));
      return c.json({ data: await addSuppressions(c.env.DB, c.get("principal").accountId, body.emails) }, 201);
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "post",
      path: "/suppressions/batch/remove",
      tags: ["Suppressions"],
      summary: "Remove up to 100 suppressions at once",
      description: "By `emails` or by `ids` (not both). Answers the entries that were on the list.",
      request: jsonBody(BatchRemoveSuppressionsRequest),
      responses: { 200: json(z.object({ data: z.array(DeletedSchema) }), "Removed"), ...errorResponses(400, 401, 403, 422) },
    }),
    async (c) => {
      const body = validate(BatchRemoveSuppressionsRequest, await readJson(c.req.raw));
      return c.json({ data: await removeSuppressions(c.env.DB, c.get("principal").accountId, body) });
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "delete",
      path: "/suppressions",
      tags: ["Suppressions"],
      summary: "Remove a suppressed address by address",
      description: "`DELETE /suppressions?email=a@example.com`: the same as removing its entry by id.",
      request: { query: RemoveQuery },
      responses: { 200: json(DeletedSchema, "Removed"), ...errorResponses(401, 403, 404, 422) },
    }),
    async (c) => {
      const { email } = validate(RemoveQuery, c.req.query(), "query");
      return c.json(await removeSuppressionByEmail(c.env.DB, c.get("principal").accountId, email));
    },
  );
}
