// API keys (contract section 3): create (the token is shown once), list, revoke.
import { createRoute, z } from "@hono/zod-openapi";
import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { defineRoute, type App } from "../app.ts";
import { generateToken, hashToken, tokenPrefix } from "../api-key-token.ts";
import { evictKey } from "../auth.ts";
import { apiKeys, domains } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { readJson, validate } from "../http.ts";
import { uuidv7 } from "../ids.ts";
import { finishPage, ListQuery, listSchema, pageQuery, readPage } from "../pagination.ts";
import { DeletedSchema, errorResponses, IdParam, iso, json, jsonBody } from "./schemas.ts";

export const CreateApiKeyRequest = z
  .object({
    name: z.string().trim().min(1, "`name` must not be empty.").max(50, "`name` must be at most 50 characters."),
    permission: z
      .enum(["full_access", "sending_access"], { error: "`permission` must be `full_access` or `sending_access`." })
      .default("full_access"),
    domain_id: z.string().uuid("`domain_id` must be a domain id.").optional(),
  })
  .openapi("CreateApiKeyRequest");

const CreatedApiKey = z.object({ id: z.string(), token: z.string() }).openapi("CreatedApiKey");
const ApiKeyItem = z
  .object({ id: z.string(), name: z.string(), created_at: z.string(), last_used_at: z.string().nullable() })
  .openapi("ApiKey");

export function registerApiKeyRoutes(app: App): void {
  defineRoute(
    app,
    "full",
    createRoute({
      method: "post",
      path: "/api-keys",
      tags: ["API keys"],
      summary: "Create an API key",
      description: "The token is in this answer only; tern keeps just its SHA-256.",
      request: jsonBody(CreateApiKeyRequest),
      responses: { 201: json(CreatedApiKey, "The new key"), ...errorResponses(400, 401, 403, 422) },
    }),
    async (c) => {
      const body = validate(CreateApiKeyRequest, await readJson(c.req.raw));
      const { accountId } = c.get("principal");
      const db = drizzle(c.env.DB);
      if (body.domain_id) {
        if (body.permission !== "sending_access") {
          throw new ApiError("validation_error", "`domain_id` can only be set on a `sending_access` key.");
        }
        const domain = await db.select({ id: domains.id }).from(domains)
          .where(and(eq(domains.id, body.domain_id), eq(domains.accountId, accountId))).get();
        if (!domain) throw new ApiError("validation_error", "`domain_id` does not name a domain of this account.");
      }
      const token = generateToken();
      const id = uuidv7();
      await db.insert(apiKeys).values({
        id,
        accountId,
        name: body.name,
        permission: body.permission,
        domainId: body.domain_id ?? null,
        tokenHash: await hashToken(token),
        tokenPrefix: tokenPrefix(token),
        createdAt: Date.now(),
      });
      return c.json({ id, token }, 201);
    },
  );
  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/api-keys",
      tags: ["API keys"],
      summary: "List API keys",
      request: { query: ListQuery },
      responses: { 200: json(listSchema(ApiKeyItem), "API keys of the account, newest first"), ...errorResponses(401, 403, 422) },
    }),
    async (c) => {
      const page = readPage(c.req.query());
      const { accountId } = c.get("principal");
      const q = pageQuery(apiKeys.id, page, eq(apiKeys.accountId, accountId));
      const rows = await drizzle(c.env.DB)
        .select({ id: apiKeys.id, name: apiKeys.name, createdAt: apiKeys.createdAt, lastUsedAt: apiKeys.lastUsedAt })
        .from(apiKeys).where(q.where).orderBy(q.orderBy).limit(q.limit);
      const items = rows.map((r) => ({ id: r.id, name: r.name, created_at: iso(r.createdAt)!, last_used_at: iso(r.lastUsedAt) }));
      return c.json(finishPage(items, page));
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "delete",
      path: "/api-keys/{id}",
      tags: ["API keys"],
      summary: "Revoke an API key",
      description: "Takes effect at once.",
      request: { params: IdParam },
      responses: { 200: json(DeletedSchema, "Revoked"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const id = c.req.param("id")!;
      const { accountId } = c.get("principal");
      const deleted = await drizzle(c.env.DB).delete(apiKeys)
        .where(and(eq(apiKeys.id, id), eq(apiKeys.accountId, accountId))).returning({ id: apiKeys.id });
      if (deleted.length === 0) throw new ApiError("not_found", "API key not found.");
      evictKey(id);
      return c.json({ object: "api_key", id, deleted: true as const });
    },
  );
}
