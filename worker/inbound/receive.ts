// Mail for a receiving-enabled domain (contract section 8): stored whole in R2, parsed (html,
// text, headers, attachments, the SPF/DKIM/DMARC verdicts of the receiving MX), recorded, and
// announced as email.received with metadata only. Bodies are read through the API.
import PostalMime, { type Address, type Email } from "postal-mime";
import { drizzle } from "drizzle-orm/d1";
import type { TernConfig } from "../config.ts";
import { inboundEmails } from "../db/schema.ts";
import { announce, outboxEvent, outboxInsert } from "../events/outbox.ts";
import { uuidv7 } from "../ids.ts";
import { receivedEventPayload } from "../webhooks/payloads.ts";

/** Cloudflare Email Routing takes messages up to 25 MiB. */
export const INBOUND_MAX_BYTES = 25 * 1024 * 1024;

export interface AuthResults {
  spf: string | null;
  dkim: string | null;
  dmarc: string | null;
  /** The receiving MX that vouched for these (authserv-id). */
  authservId: string | null;
}

export interface StoredAttachment {
  id: string;
  filename: string | null;
  content_type: string;
  content_disposition: string | null;
  content_id: string | null;
  size: number;
  key: string;
}

export interface InboundContent {
  html: string | null;
  text: string | null;
  headers: { name: string; value: string }[];
}

export class MalformedMessageError extends Error {}

function mailboxes(list: Address[] | Address | undefined): string[] {
  const out: string[] = [];
  for (const a of list === undefined ? [] : Array.isArray(list) ? list : [list]) {
    if ("group" in a && Array.isArray(a.group)) out.push(...mailboxes(a.group));
    else if ("address" in a && a.address) out.push(a.name ? `${a.name} <${a.address}>` : a.address);
  }
  return out;
}

/** The verdicts of the MX that received the message, from its own Authentication-Results
 * field only (RFC 8601 5: trust the fields of your own boundary, not what a sender wrote). */
export function authenticationResults(headers: { key: string; value: string }[], authservId: string): AuthResults {
  // The authserv-id is the first token, ended by ";" (or the end): "mx.cloudflare.net.evil" is not ours.
  const id = new RegExp(`^\\s*${authservId.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\s*(;|$)`, "i");
  const ours = headers.find((h) => h.key === "authentication-results" && id.test(h.value));
  const result = (method: string) => ours?.value.match(new RegExp(`(?:^|[;\\s])${method}\\s*=\\s*([a-z]+)`, "i"))?.[1]?.toLowerCase() ?? null;
  return { spf: result("spf"), dkim: result("dkim"), dmarc: result("dmarc"), authservId: ours ? authservId : null };
}

export async function parseInbound(raw: Uint8Array): Promise<Email> {
  let parsed: Email;
  try {
    parsed = await PostalMime.parse(raw, { attachmentEncoding: "arraybuffer", maxNestingDepth: 50, maxHeadersSize: 1024 * 1024 });
  } catch (err) {
    throw new MalformedMessageError(err instanceof Error ? err.message : String(err));
  }
  if (parsed.headers.length === 0 || (!parsed.from && mailboxes(parsed.to).length === 0)) {
    throw new MalformedMessageError("no From or To header");
  }
  return parsed;
}

export interface Recipient {
  accountId: string;
  domainId: string;
}

/** Stores, records and announces one received message for one account. */
export async function receiveInbound(env: Env, config: TernConfig, to: string, raw: Uint8Array, parsed: Email, rcpt: Recipient, now: number): Promise<string> {
  const id = uuidv7(now);
  const prefix = `inbound/${rcpt.accountId}/${id}`;
  const attachments: StoredAttachment[] = [];
  const puts: Promise<unknown>[] = [env.BLOBS.put(`${prefix}/raw.eml`, raw, { httpMetadata: { contentType: "message/rfc822" } })];
  for (const a of parsed.attachments) {
    const bytes = typeof a.content === "string" ? new TextEncoder().encode(a.content) : new Uint8Array(a.content as ArrayBuffer);
    const attId = uuidv7(now);
    const key = `${prefix}/attachments/${attId}`;
    attachments.push({ id: attId, filename: a.filename, content_type: a.mimeType, content_disposition: a.disposition, content_id: a.contentId ?? null, size: bytes.byteLength, key });
    puts.push(env.BLOBS.put(key, bytes, { httpMetadata: { contentType: a.mimeType } }));
  }
  const content: InboundContent = { html: parsed.html ?? null, text: parsed.text ?? null, headers: parsed.headers.map((h) => ({ name: h.originalKey, value: h.value })) };
  puts.push(env.BLOBS.put(`${prefix}/content.json`, JSON.stringify(content), { httpMetadata: { contentType: "application/json" } }));
  await Promise.all(puts);

  const from = mailboxes(parsed.from)[0] ?? "";
  const toList = mailboxes(parsed.to);
  const cc = mailboxes(parsed.cc);
  const messageId = parsed.messageId?.replace(/^<|>$/g, "") ?? null;
  const auth = authenticationResults(parsed.headers, config.inboundAuthservId);
  const event = outboxEvent(rcpt.accountId, receivedEventPayload({
    id, createdAt: now, from, to: toList.length ? toList : [to], cc, subject: parsed.subject ?? "", messageId,
    attachments: attachments.map((a) => ({ id: a.id, filename: a.filename, contentType: a.content_type, contentDisposition: a.content_disposition, contentId: a.content_id, size: a.size })),
  }, now), now);
  const db = drizzle(env.DB);
  await db.batch([
    db.insert(inboundEmails).values({
      id, accountId: rcpt.accountId, domainId: rcpt.domainId, fromAddress: from, toJson: JSON.stringify(toList.length ? toList : [to]), ccJson: JSON.stringify(cc),
      subject: parsed.subject ?? "", messageId, rawKey: `${prefix}/raw.eml`, size: raw.byteLength, contentKey: `${prefix}/content.json`,
      attachmentsJson: JSON.stringify(attachments), authJson: JSON.stringify(auth), createdAt: now,
    }),
    outboxInsert(db, event),
  ]);
  await announce(env, [event]);
  return id;
}
