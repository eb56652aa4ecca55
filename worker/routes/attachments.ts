// Attachments of sent emails (Resend's /emails/{id}/attachments): metadata with a signed,
// expiring download link, and the download itself on the same path when the link's signature
// is in the query (the link is the credential, as for received mail).
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App } from "../app.ts";
import { readConfig } from "../config.ts";
import { downloadEmailAttachment, getEmailAttachment, listEmailAttachments } from "../emails/service.ts";
import { ListQuery, listSchema, readPage } from "../pagination.ts";
import { errorResponses, IdParam, json } from "./schemas.ts";

export const Attachment = z
  .object({
    object: z.literal("attachment"),
    id: z.string(),
    filename: z.string().nullable(),
    content_type: z.string(),
    content_id: z.string().nullable(),
    content_disposition: z.string().nullable(),
    size: z.number().int(),
    download_url: z.string().openapi({ description: "Signed; works without a key until expires_at." }),
    expires_at: z.string(),
  })
  .openapi("Attachment");

export const AttachmentParams = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" } }),
  attachment_id: z.string().openapi({ param: { name: "attachment_id", in: "path" } }),
});

export const AttachmentQuery = z.object({
  key: z.string().optional().openapi({ description: "Part of a download link: the API key it was made for (the link ends when that key is revoked)." }),
  expires: z.string().optional().openapi({ description: "Part of a download link." }),
  signature: z.string().optional().openapi({ description: "Part of a download link: with it, the answer is the attachment's bytes and no key is needed." }),
});

export const origin = (url: string) => new URL(url).origin;

/** Attachment bytes as a download, never rendered: content is the sender's, not ours. */
export function attachmentDownload(body: ReadableStream, filename: string | null): Response {
  return new Response(body, {
    headers: {
      "content-type": "application/octet-stream",
      "content-disposition": `attachment; filename*=UTF-8''${encodeURIComponent(filename ?? "attachment")}`,
      "x-content-type-options": "nosniff",
      "cache-control": "private, no-store",
    },
  });
}

export function registerAttachmentRoutes(app: App): void {
  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/emails/{id}/attachments",
      tags: ["Emails"],
      summary: "List a sent email's attachments",
      description: "Each with a download link (signed, valid one hour).",
      request: { params: IdParam, query: ListQuery },
      responses: { 200: json(listSchema(Attachment), "Attachments, in the email's order"), ...errorResponses(401, 403, 404, 422) },
    }),
    async (c) => {
      const page = readPage(c.req.query());
      const { accountId, keyId } = c.get("principal");
      return c.json(await listEmailAttachments(c.env, readConfig(c.env), accountId, keyId, c.req.param("id")!, origin(c.req.url), page));
    },
  );

  defineRoute(
    app,
    "link-or-full",
    createRoute({
      method: "get",
      path: "/emails/{id}/attachments/{attachment_id}",
      tags: ["Emails"],
      summary: "Retrieve a sent email's attachment",
      description: "With a key: the attachment's metadata and a download link. With the link's `expires` and `signature`: the bytes.",
      request: { params: AttachmentParams, query: AttachmentQuery },
      responses: { 200: json(Attachment, "The attachment (or its bytes, through a download link)"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const id = c.req.param("id")!;
      const attachmentId = c.req.param("attachment_id")!;
      const config = readConfig(c.env);
      const signature = c.req.query("signature");
      if (signature !== undefined) {
        const { attachment, body } = await downloadEmailAttachment(c.env, config, id, attachmentId, c.req.query());
        return attachmentDownload(body.body, attachment.filename);
      }
      const { accountId, keyId } = c.get("principal");
      return c.json(await getEmailAttachment(c.env, config, accountId, keyId, id, attachmentId, origin(c.req.url)));
    },
  );
}
