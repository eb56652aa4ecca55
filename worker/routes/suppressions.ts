// The suppression list (issue 6): addresses the account does not send to. Hard bounces and
// complaints add themselves; these routes list the list, add an address by hand and remove
// one (by id, or by address with `DELETE /suppressions?email=`), after which mail to it goes
// out again.
import { createRoute, z } from "@hono/zod-openapi";
import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { defineRoute, type App } from "../app.ts";
import { suppressions, type SuppressionRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { readJson, validate } from "../http.ts";
import { parseMailbox } from "../mime/address.ts";
import { finishPage, ListQuery, listSchema, pageQuery, readPage } from "../pagination.ts";
import { suppressionKey, suppressStatement } from "../suppressions/suppress.ts";
import { DeletedSchema, errorResponses, IdParam, iso, json, jsonBody } from "./schemas.ts";

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

function suppressionView(r: SuppressionRow) {
  return {
    object: "suppression" as const,
    id: r.id,
    email: r.email,
    reason: r.reason,
    email_id: r.emailId,
    detail: r.detail,
    created_at: iso(r.createdAt)!,
  };
}

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
      const page = readPage(c.req.query());
      const q = pageQuery(suppressions.id, page, eq(suppressions.accountId, c.get("principal").accountId));
      const rows = await drizzle(c.env.DB).select().from(suppressions).where(q.where).orderBy(q.orderBy).limit(q.limit);
      return c.json(finishPage(rows.map(suppressionView), page));
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
      const { accountId } = c.get("principal");
      const db = drizzle(c.env.DB);
      const email = suppressionKey(body.email);
      const before = await db.select().from(suppressions).where(and(eq(suppressions.accountId, accountId), eq(suppressions.email, email))).get();
      if (before) return c.json(suppressionView(before), 200);
      await db.batch([suppressStatement(db, { accountId, email, reason: "manual", detail: body.detail ?? null, now: Date.now() })]);
      const row = (await db.select().from(suppressions).where(and(eq(suppressions.accountId, accountId), eq(suppressions.email, email))).get())!;
      return c.json(suppressionView(row), 201);
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
      const id = c.req.param("id")!;
      const deleted = await drizzle(c.env.DB).delete(suppressions)
        .where(and(eq(suppressions.id, id), eq(suppressions.accountId, c.get("principal").accountId))).returning({ id: suppressions.id });
      if (deleted.length === 0) throw new ApiError("not_found", "Suppression not found.");
      return c.json({ object: "suppression", id, deleted: true as const });
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
      const deleted = await drizzle(c.env.DB).delete(suppressions)
        .where(and(eq(suppressions.email, suppressionKey(email)), eq(suppressions.accountId, c.get("principal").accountId))).returning({ id: suppressions.id });
      if (deleted.length === 0) throw new ApiError("not_found", "This address is not suppressed.");
      return c.json({ object: "suppression", id: deleted[0]!.id, deleted: true as const });
    },
  );
}
