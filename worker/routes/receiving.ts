// Received mail (contract section 8): list, read one with its bodies, headers, verdicts and
// signed download links, and the downloads those links point at.
import { createRoute, z } from "@hono/zod-openapi";
import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { defineRoute, type App } from "../app.ts";
import { readConfig } from "../config.ts";
import { inboundEmails } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { signedQuery, verifyLink } from "../inbound/links.ts";
import type { AuthResults, InboundContent, StoredAttachment } from "../inbound/receive.ts";
import { finishPage, ListQuery, listSchema, pageQuery, readPage } from "../pagination.ts";
import { errorResponses, IdParam, iso, json } from "./schemas.ts";

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
    async (c) => {
      const page = readPage(c.req.query());
      const q = pageQuery(inboundEmails.id, page, eq(inboundEmails.accountId, c.get("principal").accountId));
      const rows = await drizzle(c.env.DB).select().from(inboundEmails).where(q.where).orderBy(q.orderBy).limit(q.limit);
      return c.json(finishPage(rows.map((r) => ({
        object: "received_email" as const, id: r.id, from: r.fromAddress, to: JSON.parse(r.toJson) as string[], cc: JSON.parse(r.ccJson) as string[],
        subject: r.subject, message_id: r.messageId, created_at: iso(r.createdAt)!, size: r.size, attachment_count: (JSON.parse(r.attachmentsJson) as unknown[]).length,
      })), page));
    },
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
      const row = await drizzle(c.env.DB).select().from(inboundEmails).where(and(eq(inboundEmails.id, c.req.param("id")!), eq(inboundEmails.accountId, accountId))).get();
      if (!row) throw new ApiError("not_found", "Received email not found.");
      const stored = await c.env.BLOBS.get(row.contentKey);
      const content: InboundContent = stored ? await stored.json() : { html: null, text: null, headers: [] };
      const config = readConfig(c.env);
      const now = Date.now();
      const base = `${origin(c.req.url)}/emails/receiving/${row.id}`;
      const link = async (subject: string, path: string) => {
        const s = await signedQuery(config.masterKey, subject, keyId, now);
        return { download_url: `${base}${path}?${s.query}`, expires_at: new Date(s.expiresAt).toISOString() };
      };
      const auth = JSON.parse(row.authJson) as AuthResults;
      const attachments = JSON.parse(row.attachmentsJson) as StoredAttachment[];
      return c.json({
        object: "received_email" as const, id: row.id, from: row.fromAddress, to: JSON.parse(row.toJson) as string[], cc: JSON.parse(row.ccJson) as string[],
        subject: row.subject, message_id: row.messageId, created_at: iso(row.createdAt)!, size: row.size,
        html: content.html, text: content.text, headers: content.headers,
        authentication: { spf: auth.spf ?? null, dkim: auth.dkim ?? null, dmarc: auth.dmarc ?? null, authserv_id: auth.authservId ?? null },
        raw: await link(`raw:${row.id}`, "/raw"),
        attachments: await Promise.all(attachments.map(async (a) => ({
          id: a.id, filename: a.filename, content_type: a.content_type, content_disposition: a.content_disposition, content_id: a.content_id, size: a.size,
          ...(await link(`attachment:${row.id}:${a.id}`, `/attachments/${a.id}`)),
        }))),
      });
    },
  );

  // The downloads: public routes whose signed query is the credential.
  const notFound = () => new ApiError("not_found", "This download link is invalid or has expired.");
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
      const ok = await verifyLink(c.env.DB, readConfig(c.env).masterKey, `raw:${id}`, c.req.query(), Date.now());
      if (!ok) throw notFound();
      const row = await drizzle(c.env.DB).select({ rawKey: inboundEmails.rawKey }).from(inboundEmails).where(eq(inboundEmails.id, id)).get();
      const obj = row ? await c.env.BLOBS.get(row.rawKey) : null;
      if (!obj) throw notFound();
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
      const id = c.req.param("id")!;
      const attachmentId = c.req.param("attachment_id")!;
      const ok = await verifyLink(c.env.DB, readConfig(c.env).masterKey, `attachment:${id}:${attachmentId}`, c.req.query(), Date.now());
      if (!ok) throw notFound();
      const row = await drizzle(c.env.DB).select({ attachmentsJson: inboundEmails.attachmentsJson }).from(inboundEmails).where(eq(inboundEmails.id, id)).get();
      const att = row ? (JSON.parse(row.attachmentsJson) as StoredAttachment[]).find((a) => a.id === attachmentId) : undefined;
      const obj = att ? await c.env.BLOBS.get(att.key) : null;
      if (!att || !obj) throw notFound();
      // Served as a download, never rendered: received content is untrusted.
      return new Response(obj.body, {
        headers: { "content-type": "application/octet-stream", "content-disposition": `attachment; filename*=UTF-8''${encodeURIComponent(att.filename ?? "attachment")}`, "x-content-type-options": "nosniff", "cache-control": "private, no-store" },
      });
    },
  );
}
