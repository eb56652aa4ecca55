// API keys (contract section 3): create (the token is shown once), list, revoke.
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App } from "../app.ts";
import { createApiKey, listApiKeys, renameApiKey, revokeApiKey } from "../api-keys/service.ts";
import { dropPathId, readJson, validate } from "../http.ts";
import { ListQuery, listSchema, readPage } from "../pagination.ts";
import { DeletedSchema, errorResponses, IdParam, json, jsonBody, label } from "./schemas.ts";

export const CreateApiKeyRequest = z
  .object({
    name: label("name", 50),
    permission: z
      .enum(["full_access", "sending_access"], { error: "`permission` must be `full_access` or `sending_access`." })
      .default("full_access"),
    domain_id: z.string().uuid("`domain_id` must be a domain id.").optional(),
  })
  .openapi("CreateApiKeyRequest");

export const UpdateApiKeyRequest = z.object({ name: CreateApiKeyRequest.shape.name }).strict().openapi("UpdateApiKeyRequest");

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
      const created = await createApiKey(c.env.DB, c.get("principal").accountId, { name: body.name, permission: body.permission, domainId: body.domain_id });
      return c.json(created, 201);
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
      return c.json(await listApiKeys(c.env.DB, c.get("principal").accountId, readPage(c.req.query())));
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "patch",
      path: "/api-keys/{id}",
      tags: ["API keys"],
      summary: "Rename an API key",
      description: "Only the name changes; the token, permission and domain stay.",
      request: { params: IdParam, ...jsonBody(UpdateApiKeyRequest) },
      responses: { 200: json(z.object({ object: z.literal("api_key"), id: z.string() }), "Renamed"), ...errorResponses(400, 401, 403, 404, 422) },
    }),
    async (c) => {
      const id = c.req.param("id")!;
      const body = validate(UpdateApiKeyRequest, dropPathId(await readJson(c.req.raw), id, ["id", "api_key_id"]));
      return c.json(await renameApiKey(c.env.DB, c.get("principal").accountId, id, body.name));
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
      return c.json(await revokeApiKey(c.env.DB, c.get("principal").accountId, c.req.param("id")!));
    },
  );
}
