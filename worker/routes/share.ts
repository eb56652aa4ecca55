// Shareable links to emails (Resend's POST /emails/{id}/share) and the read-only page they open.
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App } from "../app.ts";
import { readConfig } from "../config.ts";
import { openShared, sharedPage, shareEmail } from "../emails/share.ts";
import { dropPathId, readJson, validate } from "../http.ts";
import { origin } from "./attachments.ts";
import { errorResponses, IdParam, json } from "./schemas.ts";

export const ShareEmailRequest = z
  .object({
    expires_in: z.string({ error: "`expires_in` must be a string such as `2 hours`." }).optional()
      .openapi({ description: "How long the link works: `10m`, `2 hours`, `1 day`... Default and maximum 48 hours." }),
  })
  .strict()
  .openapi("ShareEmailRequest");

const ShareEmailResponse = z
  .object({ object: z.literal("email"), id: z.string(), url: z.string(), expires_at: z.string() })
  .openapi("ShareEmailResponse");

export function registerShareRoutes(app: App): void {
  defineRoute(
    app,
    "full",
    createRoute({
      method: "post",
      path: "/emails/{id}/share",
      tags: ["Emails"],
      summary: "Create a shareable link to a sent or received email",
      description: "Anyone with the link sees a read-only page of the email (scripts and remote images are not loaded) until it expires.",
      request: { params: IdParam, body: { required: false, content: { "application/json": { schema: ShareEmailRequest } } } },
      responses: { 200: json(ShareEmailResponse, "The link"), ...errorResponses(400, 401, 403, 404, 422) },
    }),
    async (c) => {
      const id = c.req.param("id")!;
      const hasBody = (c.req.header("content-length") ?? "0") !== "0" || c.req.header("transfer-encoding");
      const body = hasBody ? validate(ShareEmailRequest, dropPathId(await readJson(c.req.raw), id, ["id", "email_id"])) : {};
      const { accountId, keyId } = c.get("principal");
      return c.json(await shareEmail(c.env, readConfig(c.env), accountId, keyId, id, origin(c.req.url), body.expires_in));
    },
  );

  defineRoute(
    app,
    "none",
    createRoute({
      hidden: true,
      method: "get",
      path: "/shared/{id}",
      request: { params: IdParam },
      responses: { 200: { description: "The read-only page" } },
    }),
    async (c) => sharedPage(await openShared(c.env, readConfig(c.env), c.req.param("id")!, c.req.query())),
  );
}
