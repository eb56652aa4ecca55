// Received mail (contract section 8): list, read one with its bodies, headers, verdicts and
// signed download links, and the downloads those links point at.
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App } from "../app.ts";
import { readConfig } from "../config.ts";
import { downloadAttachment, downloadRaw, getReceived, getReceivedAttachment, listReceived, listReceivedAttachments } from "../inbound/service.ts";
import { ListQuery, listSchema, readPage } from "../pagination.ts";
import { Attachment, attachmentDownload, AttachmentParams, AttachmentQuery, origin } from "./attachments.ts";
import { errorResponses, IdParam, json } from "./schemas.ts";

const ReceivedItem = z
  .object({ object: z.literal("received_email"), id: z.string(), from: z.string(), to: z.array(z.string()), cc: z.array(z.string()), subject: z.string(), message_id: z.string().nullable(), created_at: z.string(), size: z.number().int(), attachment_count: z.number().int() })
  .openapi("ReceivedEmailListItem");

const Download = z.object({ download_url: z.string(), expires_at: z.string() });

const ReceivedEmail = ReceivedItem.omit({ attachment_count: true })
  .extend({
    html: z.string().nullable(),
    text: z.string().nullable(),
    headers: z.record(z.string(), z.string()).openapi({ description: "Header name -> value; a repeated field's values joined by \", \"." }),
    authentication: z.object({ spf: z.string().nullable(), dkim: z.string().nullable(), dmarc: z.string().nullable(), authserv_id: z.string().nullable() }),
    raw: Download,
    attachments: z.array(
      z.object({ id: z.string(), filename: z.string().nullable(), content_type: z.string(), content_disposition: z.string().nullable(), content_id: z.string().nullable(), size: z.number().int() }).merge(Download),
    ),
  })
  .openapi("ReceivedEmail");

const LinkQuery = z.object({ key: z.string().optional(), expires: z.string().optional(), signature: z.string().optional() });


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
      return new Response(obj.body, { headers: { "content-type": "message/rfc822", "content-disposition": `attachment; filename="${id}.eml"`, "cache-control": "private, no-store", "x-content-type-options": "nosniff" } });
    },
  );
  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/emails/receiving/{id}/attachments",
      tags: ["Receiving"],
      summary: "List a received email's attachments",
      description: "Each with a download link (signed, valid one hour).",
      request: { params: IdParam, query: ListQuery },
      responses: { 200: json(listSchema(Attachment), "Attachments, in the message's order"), ...errorResponses(401, 403, 404, 422) },
    }),
    async (c) => {
      const page = readPage(c.req.query());
      const { accountId, keyId } = c.get("principal");
      return c.json(await listReceivedAttachments(c.env.DB, readConfig(c.env), accountId, keyId, c.req.param("id")!, origin(c.req.url), page));
    },
  );

  defineRoute(
    app,
    "link-or-full",
    createRoute({
      method: "get",
      path: "/emails/receiving/{id}/attachments/{attachment_id}",
      tags: ["Receiving"],
      summary: "Retrieve a received email's attachment",
      description: "With a key: the attachment's metadata and a download link. With the link's `expires` and `signature`: the bytes (no key needed).",
      request: { params: AttachmentParams, query: AttachmentQuery },
      responses: { 200: json(Attachment, "The attachment (or its bytes, through a download link)"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const id = c.req.param("id")!;
      const attachmentId = c.req.param("attachment_id")!;
      const signature = c.req.query("signature");
      if (signature !== undefined) {
        const { attachment: att, body } = await downloadAttachment(c.env, readConfig(c.env), id, attachmentId, c.req.query());
        // Served as a download, never rendered: received content is untrusted.
        return attachmentDownload(body.body, att.filename);
      }
      const { accountId, keyId } = c.get("principal");
      return c.json(await getReceivedAttachment(c.env.DB, readConfig(c.env), accountId, keyId, id, attachmentId, origin(c.req.url)));
    },
  );
}
