// The suppression list (issue 6): addresses the account does not send to. Hard bounces and
// complaints add themselves; these routes list the list, add an address by hand and remove
// one (by id, or by address with `DELETE /suppressions?email=`), after which mail to it goes
// out again.
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App } from "../app.ts";
import { readJson, validate } from "../http.ts";
import { parseMailbox } from "../mime/address.ts";
import { ListQuery, listSchema, readPage } from "../pagination.ts";
import { addSuppression, listSuppressions, removeSuppressionByEmail, removeSuppressionById } from "../suppressions/service.ts";
import { DeletedSchema, errorResponses, IdParam, json, jsonBody } from "./schemas.ts";

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

const RemoveQuery = z.object({ email: Email.openapi({ description: "The address to take off the list." }) });

const Suppression = z
  .object({
    object: z.literal("suppression"),
    id: z.string(),
    email: z.string(),
    reason: z.enum(["bounce", "complaint", "manual"]),
    email_id: z.string().nullable().openapi({ description: "The email whose bounce or complaint added it." }),
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
      request: { query: ListQuery },
      responses: { 200: json(listSchema(Suppression), "Suppressed addresses, newest first"), ...errorResponses(401, 403, 422) },
    }),
    async (c) => {
      return c.json(await listSuppressions(c.env.DB, c.get("principal").accountId, readPage(c.req.query())));
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
      method: "delete",
      path: "/suppressions/{id}",
      tags: ["Suppressions"],
      summary: "Remove a suppressed address",
      description: "Mail to it is attempted again.",
      request: { params: IdParam },
      responses: { 200: json(DeletedSchema, "Removed"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      return c.json(await removeSuppressionById(c.env.DB, c.get("principal").accountId, c.req.param("id")!));
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
