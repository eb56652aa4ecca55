// Received mail (contract section 8): list, read one with its bodies, headers, verdicts and
// signed download links, and the downloads those links point at.
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App } from "../app.ts";
import { readConfig } from "../config.ts";
import { downloadAttachment, downloadRaw, getReceived, listReceived } from "../inbound/service.ts";
import { ListQuery, listSchema, readPage } from "../pagination.ts";
import { errorResponses, IdParam, json } from "./schemas.ts";

const ReceivedItem = z
  .object({ object: z.literal("received_email"), id: z.string(), from: z.string(), to: z.array(z.string()), cc: z.array(z.string()), subject: z.string(), message_id: z.string().nullable(), created_at: z.string(), size: z.number().int(), attachment_count: z.number().int() })
  .openapi("ReceivedEmailListItem");

const Download = z.object({ download_url: z.string(), expires_at: z.string() });

const ReceivedEmail = ReceivedItem.omit({ attachment_count: true })
  .extend({
    html: z.string().nullable(),
    text: z.string().nullable(),
    headers: z.array(z.object({ name: z.string(), value: z.string() })),
    authentication: z.object({ spf: z.string().nullable(), dkim: z.string().nullable(), dmarc: z.string().nullable(), authserv_id: z.string().nullable() }),
    raw: Download,
    attachments: z.array(
      z.object({ id: z.string(), filename: z.string().nullable(), content_type: z.string(), content_disposition: z.string().nullable(), content_id: z.string().nullable(), size: z.number().int() }).merge(Download),
    ),
  })
  .openapi("ReceivedEmail");

const AttachmentParams = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" } }),
  attachment_id: z.string().openapi({ param: { name: "attachment_id", in: "path" } }),
});
const LinkQuery = z.object({ key: z.string().optional(), expires: z.string().optional(), signature: z.string().optional() });

function origin(url: string): string {
  return new URL(url).origin;
}

export function registerReceivingRoutes(app: App): void {
  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/emails/receiving",
      tags: ["Receiving"],
      summary: "List received emails",
      request: { query: ListQuery },
      responses: { 200: json(listSchema(ReceivedItem), "Received emails, newest first"), ...errorResponses(401, 403, 422) },
    }),
    async (c) => c.json(await listReceived(c.env.DB, c.get("principal").accountId, readPage(c.req.query()))),
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/emails/receiving/{id}",
      tags: ["Receiving"],
      summary: "Retrieve a received email",
      description: "Bodies, headers, the receiving MX's SPF/DKIM/DMARC verdicts, and download links for the raw message and each attachment (signed, valid one hour, and only while the API key that asked for them exists).",
      request: { params: IdParam },
      responses: { 200: json(ReceivedEmail, "The received email"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const { accountId, keyId } = c.get("principal");
      return c.json(await getReceived(c.env, readConfig(c.env), accountId, keyId, c.req.param("id")!, origin(c.req.url)));
    },
  );

  // The downloads: public routes whose signed query is the credential.
  defineRoute(
    app,
    "none",
    createRoute({
      method: "get",
      path: "/emails/receiving/{id}/raw",
      tags: ["Receiving"],
      summary: "Download a received email (signed link)",
      request: { params: IdParam, query: LinkQuery },
      responses: { 200: { description: "The message as received (message/rfc822)" }, ...errorResponses(404) },
    }),
    async (c) => {
      const id = c.req.param("id")!;
      const obj = await downloadRaw(c.env, readConfig(c.env), id, c.req.query());
      return new Response(obj.body, { headers: { "content-type": "message/rfc822", "content-disposition": `attachment; filename="${id}.eml"`, "cache-control": "private, no-store" } });
    },
  );
  defineRoute(
    app,
    "none",
    createRoute({
      method: "get",
      path: "/emails/receiving/{id}/attachments/{attachment_id}",
      tags: ["Receiving"],
      summary: "Download an attachment of a received email (signed link)",
      request: { params: AttachmentParams, query: LinkQuery },
      responses: { 200: { description: "The attachment's bytes" }, ...errorResponses(404) },
    }),
    async (c) => {
      const { attachment: att, body } = await downloadAttachment(c.env, readConfig(c.env), c.req.param("id")!, c.req.param("attachment_id")!, c.req.query());
      // Served as a download, never rendered: received content is untrusted.
      return new Response(body.body, {
        headers: { "content-type": "application/octet-stream", "content-disposition": `attachment; filename*=UTF-8''${encodeURIComponent(att.filename ?? "attachment")}`, "x-content-type-options": "nosniff", "cache-control": "private, no-store" },
      });
    },
  );
}
