// Received mail of an account: list, read one with its bodies, headers, verdicts and signed
// download links, and the downloads those links point at. The REST routes and the dashboard
// are both thin callers of these.
import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { TernConfig } from "../config.ts";
import { inboundEmails, type InboundEmailRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { finishPage, pageOfList, pageQuery, type Page } from "../pagination.ts";
import { signedQuery, verifyLink, type LinkQuery } from "./links.ts";
import type { AuthResults, InboundContent, StoredAttachment } from "./receive.ts";

const iso = (ms: number): string => new Date(ms).toISOString();

function receivedItem(r: InboundEmailRow) {
  return {
    object: "received_email" as const, id: r.id, from: r.fromAddress, to: JSON.parse(r.toJson) as string[], cc: JSON.parse(r.ccJson) as string[],
    subject: r.subject, message_id: r.messageId, created_at: iso(r.createdAt), size: r.size,
  };
}

export async function listReceived(d1: D1Database, accountId: string, page: Page) {
  const q = pageQuery(inboundEmails.id, page, eq(inboundEmails.accountId, accountId));
  const rows = await drizzle(d1).select().from(inboundEmails).where(q.where).orderBy(q.orderBy).limit(q.limit);
  return finishPage(rows.map((r) => ({ ...receivedItem(r), attachment_count: (JSON.parse(r.attachmentsJson) as unknown[]).length })), page);
}

export async function findReceived(d1: D1Database, accountId: string, id: string): Promise<InboundEmailRow> {
  const row = await drizzle(d1).select().from(inboundEmails).where(and(eq(inboundEmails.id, id), eq(inboundEmails.accountId, accountId))).get();
  if (!row) throw new ApiError("not_found", "Received email not found.");
  return row;
}

/** A signed download link under `origin` (the API's own origin), valid LINK_TTL_MS and while
 * the API key `keyId` that asked for it exists. */
async function link(config: TernConfig, origin: string, keyId: string, emailId: string, subject: string, path: string, now: number) {
  const s = await signedQuery(config.masterKey, subject, keyId, now);
  return { download_url: `${origin}/emails/receiving/${emailId}${path}?${s.query}`, expires_at: iso(s.expiresAt) };
}

export function attachmentLink(config: TernConfig, origin: string, keyId: string, emailId: string, a: StoredAttachment, now: number) {
  return link(config, origin, keyId, emailId, `attachment:${emailId}:${a.id}`, `/attachments/${a.id}`, now);
}

export function storedAttachments(row: InboundEmailRow): StoredAttachment[] {
  return JSON.parse(row.attachmentsJson) as StoredAttachment[];
}

/** Resend's shape: an object of name -> value (resend-go, -rust and -java read a string map);
 * a repeated field (Received) keeps its first name's spelling, its values joined by ", ". */
export function headerMap(headers: { name: string; value: string }[]): Record<string, string> {
  // No prototype: a field named __proto__ is a field like any other, not a prototype to set.
  const out: Record<string, string> = Object.create(null);
  const names = new Map<string, string>();
  for (const h of headers) {
    const first = names.get(h.name.toLowerCase());
    if (first === undefined) { names.set(h.name.toLowerCase(), h.name); out[h.name] = h.value; }
    else out[first] = `${out[first]}, ${h.value}`;
  }
  return out;
}

/** The received email with bodies, headers, verdicts and download links. */
export async function getReceived(env: Pick<Env, "DB" | "BLOBS">, config: TernConfig, accountId: string, keyId: string, id: string, origin: string, now = Date.now()) {
  const row = await findReceived(env.DB, accountId, id);
  const stored = await env.BLOBS.get(row.contentKey);
  const content: InboundContent = stored ? await stored.json() : { html: null, text: null, headers: [] };
  const auth = JSON.parse(row.authJson) as AuthResults;
  return {
    ...receivedItem(row),
    html: content.html, text: content.text, headers: headerMap(content.headers),
    authentication: { spf: auth.spf ?? null, dkim: auth.dkim ?? null, dmarc: auth.dmarc ?? null, authserv_id: auth.authservId ?? null },
    raw: await link(config, origin, keyId, row.id, `raw:${row.id}`, "/raw", now),
    attachments: await Promise.all(storedAttachments(row).map(async (a) => ({
      id: a.id, filename: a.filename, content_type: a.content_type, content_disposition: a.content_disposition, content_id: a.content_id, size: a.size,
      ...(await attachmentLink(config, origin, keyId, row.id, a, now)),
    }))),
  };
}

const invalidLink = () => new ApiError("not_found", "This download link is invalid or has expired.");

export type LinkParams = LinkQuery;

/** The raw message a signed link names; the link is the credential, so no account is asked. */
export async function downloadRaw(env: Pick<Env, "DB" | "BLOBS">, config: TernConfig, id: string, q: LinkParams, now = Date.now()): Promise<R2ObjectBody> {
  if (!(await verifyLink(env.DB, config.masterKey, `raw:${id}`, q, now))) throw invalidLink();
  const row = await drizzle(env.DB).select({ rawKey: inboundEmails.rawKey }).from(inboundEmails).where(eq(inboundEmails.id, id)).get();
  const obj = row ? await env.BLOBS.get(row.rawKey) : null;
  if (!obj) throw invalidLink();
  return obj;
}

export async function downloadAttachment(env: Pick<Env, "DB" | "BLOBS">, config: TernConfig, id: string, attachmentId: string, q: LinkParams, now = Date.now()): Promise<{ attachment: StoredAttachment; body: R2ObjectBody }> {
  if (!(await verifyLink(env.DB, config.masterKey, `attachment:${id}:${attachmentId}`, q, now))) throw invalidLink();
  const row = await drizzle(env.DB).select({ attachmentsJson: inboundEmails.attachmentsJson }).from(inboundEmails).where(eq(inboundEmails.id, id)).get();
  const att = row ? (JSON.parse(row.attachmentsJson) as StoredAttachment[]).find((a) => a.id === attachmentId) : undefined;
  const obj = att ? await env.BLOBS.get(att.key) : null;
  if (!att || !obj) throw invalidLink();
  return { attachment: att, body: obj };
}

function receivedAttachmentView(a: StoredAttachment, link: { download_url: string; expires_at: string }) {
  return {
    object: "attachment" as const,
    id: a.id, filename: a.filename, content_type: a.content_type, content_id: a.content_id,
    // Resend's two values: typed clients (resend-rust, resend-dotnet) refuse anything else.
    content_disposition: a.content_disposition === "inline" ? "inline" : "attachment",
    size: a.size,
    ...link,
  };
}

export async function listReceivedAttachments(d1: D1Database, config: TernConfig, accountId: string, keyId: string, id: string, origin: string, page: Page, now = Date.now()) {
  const row = await findReceived(d1, accountId, id);
  const views = await Promise.all(storedAttachments(row).map(async (a) => receivedAttachmentView(a, await attachmentLink(config, origin, keyId, row.id, a, now))));
  return pageOfList(views, page);
}

export async function getReceivedAttachment(d1: D1Database, config: TernConfig, accountId: string, keyId: string, id: string, attachmentId: string, origin: string, now = Date.now()) {
  const row = await findReceived(d1, accountId, id);
  const a = storedAttachments(row).find((x) => x.id === attachmentId.toLowerCase());
  if (!a) throw new ApiError("not_found", "Attachment not found.");
  return receivedAttachmentView(a, await attachmentLink(config, origin, keyId, row.id, a, now));
}

/** An attachment of the account's received email, for a caller who is already authorised for
 * the account (the dashboard's session): no link, the account is the check. */
export async function openReceivedAttachment(env: Pick<Env, "DB" | "BLOBS">, accountId: string, id: string, attachmentId: string): Promise<{ attachment: StoredAttachment; body: R2ObjectBody }> {
  const row = await findReceived(env.DB, accountId, id);
  const attachment = storedAttachments(row).find((a) => a.id === attachmentId.toLowerCase());
  const body = attachment ? await env.BLOBS.get(attachment.key) : null;
  if (!attachment || !body) throw new ApiError("not_found", "Attachment not found (or no longer kept).");
  return { attachment, body };
}
