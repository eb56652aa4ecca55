// Mail for a receiving-enabled domain (contract section 8): stored whole in R2, parsed (html,
// text, headers, attachments, the SPF/DKIM/DMARC verdicts of the receiving MX), recorded, and
// announced as email.received with metadata only. Bodies are read through the API.
import PostalMime, { type Address, type Email } from "postal-mime";
import { and, eq, inArray } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { oneLine } from "../../smtp-bridge/header-text.ts";
import type { TernConfig } from "../config.ts";
import { inboundEmails } from "../db/schema.ts";
import { announce, outboxWritten, outboxEvent, outboxInsertIfRow } from "../events/outbox.ts";
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

/** More lines than this are refused before parsing: postal-mime spends about 6 µs on each
 * boundary line, so 25 MiB of them would outrun the Workers 30 s CPU limit. */
export const INBOUND_MAX_LINES = 1_000_000;
/** More attachments than this are refused: D1 takes rows up to 2 MB, and the email's row (and
 * its email.received event) lists every attachment. */
export const INBOUND_MAX_ATTACHMENTS = 100;
/** The longest name, address, subject, Message-ID or filename kept in the row (RFC 5322's line
 * length); the whole value stays in the raw message and its headers. */
const FIELD_MAX = 998;
/** To and Cc each keep addresses up to this many characters in all, for the same 2 MB. */
const ADDRESS_LIST_MAX = 32_768;

/** oneLine, at most `max` characters, cut between code points (half a pair is not text). */
function field(value: string, max = FIELD_MAX): string {
  const line = oneLine(value);
  return line.length <= max ? line : line.slice(0, max).replace(/[\ud800-\udbff]$/, "");
}

function mailboxes(list: Address[] | Address | undefined): string[] {
  const out: string[] = [];
  for (const a of list === undefined ? [] : Array.isArray(list) ? list : [list]) {
    if ("group" in a && Array.isArray(a.group)) out.push(...mailboxes(a.group));
    else if ("address" in a && a.address) {
      const address = field(a.address);
      const name = field(a.name ?? "", Math.max(0, FIELD_MAX - address.length - 3)).trim();
      out.push(name ? `${name} <${address}>` : address);
    }
  }
  return out;
}

function addressList(list: Address[] | Address | undefined): string[] {
  const out: string[] = [];
  let total = 0;
  for (const m of mailboxes(list)) {
    total += m.length;
    if (total > ADDRESS_LIST_MAX) break;
    out.push(m);
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

/** Whether `raw` has more than `max` line feeds (stops counting there). */
export function hasMoreLines(raw: Uint8Array, max: number): boolean {
  let lines = 0;
  for (let i = raw.indexOf(10); i !== -1; i = raw.indexOf(10, i + 1)) if (++lines > max) return true;
  return false;
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

/** One delivery of a message: its envelope recipient, its bytes and their parse, and the key
 * that names it (delivery-key.ts). */
export interface Delivery {
  to: string;
  raw: Uint8Array;
  parsed: Email;
  key: string;
}

/** The ids of the copies of delivery `key` that accounts already hold, by account. */
export async function storedCopies(d1: D1Database, accountIds: string[], key: string): Promise<Map<string, string>> {
  const rows = await drizzle(d1).select({ id: inboundEmails.id, accountId: inboundEmails.accountId }).from(inboundEmails)
    .where(and(inArray(inboundEmails.accountId, accountIds), eq(inboundEmails.dedupeKey, key)));
  return new Map(rows.map((r) => [r.accountId, r.id]));
}

/** Stores, records and announces one received message for one account; answers its copy's id.
 * Two deliveries of the message at once may both get here: the unique (account, key) lets one
 * row in, and the other deletes its objects and answers with that row's id. */
export async function receiveInbound(env: Env, config: TernConfig, delivery: Delivery, rcpt: Recipient, now: number): Promise<string> {
  const { to, raw, parsed } = delivery;
  const id = uuidv7(now);
  const prefix = `inbound/${rcpt.accountId}/${id}`;
  const attachments: StoredAttachment[] = [];
  const puts: Promise<unknown>[] = [env.BLOBS.put(`${prefix}/raw.eml`, raw, { httpMetadata: { contentType: "message/rfc822" } })];
  for (const a of parsed.attachments) {
    const bytes = typeof a.content === "string" ? new TextEncoder().encode(a.content) : new Uint8Array(a.content as ArrayBuffer);
    const attId = uuidv7(now);
    const key = `${prefix}/attachments/${attId}`;
    const contentType = field(a.mimeType, 255);
    attachments.push({
      id: attId, filename: a.filename === null ? null : field(a.filename), content_type: contentType, content_disposition: a.disposition === null ? null : field(a.disposition),
      content_id: a.contentId === undefined ? null : field(a.contentId), size: bytes.byteLength, key,
    });
    puts.push(env.BLOBS.put(key, bytes, { httpMetadata: { contentType } }));
  }
  const content: InboundContent = { html: parsed.html ?? null, text: parsed.text ?? null, headers: parsed.headers.map((h) => ({ name: oneLine(h.originalKey), value: oneLine(h.value) })) };
  puts.push(env.BLOBS.put(`${prefix}/content.json`, JSON.stringify(content), { httpMetadata: { contentType: "application/json" } }));
  const keys = [`${prefix}/raw.eml`, ...attachments.map((a) => a.key), `${prefix}/content.json`];
  // Every upload settled first: one refused while others are under way, those would land after
  // the delete and stay, named by no row.
  const refused = (await Promise.allSettled(puts)).find((p) => p.status === "rejected");
  if (refused) {
    await forget(env, keys);
    throw refused.reason;
  }

  const from = mailboxes(parsed.from)[0] ?? "";
  const toList = addressList(parsed.to);
  const cc = addressList(parsed.cc);
  const subject = field(parsed.subject ?? "");
  const messageId = parsed.messageId === undefined ? null : field(parsed.messageId).replace(/^<|>$/g, "");
  const auth = authenticationResults(parsed.headers, config.inboundAuthservId);
  const event = outboxEvent(rcpt.accountId, receivedEventPayload({
    id, createdAt: now, from, to: toList.length ? toList : [to], cc, subject, messageId,
    attachments: attachments.map((a) => ({ id: a.id, filename: a.filename, contentType: a.content_type, contentDisposition: a.content_disposition, contentId: a.content_id, size: a.size })),
  }, now), now);
  const db = drizzle(env.DB);
  let inserted: boolean;
  let heard = true;
  try {
    const [row, outboxed] = await db.batch([
      db.insert(inboundEmails).values({
        id, accountId: rcpt.accountId, domainId: rcpt.domainId, fromAddress: from, toJson: JSON.stringify(toList.length ? toList : [to]), ccJson: JSON.stringify(cc),
        subject, messageId, rawKey: `${prefix}/raw.eml`, size: raw.byteLength, contentKey: `${prefix}/content.json`,
        attachmentsJson: JSON.stringify(attachments), authJson: JSON.stringify(auth), createdAt: now, dedupeKey: delivery.key,
      }).onConflictDoNothing({ target: [inboundEmails.accountId, inboundEmails.dedupeKey] }),
      outboxInsertIfRow(db, event, inboundEmails, eq(inboundEmails.id, id)),
    ]);
    inserted = (row.meta.changes ?? 0) > 0;
    heard = outboxWritten(outboxed);
  } catch (err) {
    // D1 may have committed the batch and lost its answer: then the row names these objects (the
    // sender's retry will answer with it), and deleting them would leave a copy without its mail.
    const recorded = await db.select({ id: inboundEmails.id }).from(inboundEmails).where(eq(inboundEmails.id, id)).get().then((r) => r !== undefined, () => null);
    // No row names these objects and no sweep looks under inbound/: without this they stay forever.
    if (recorded === false) await forget(env, keys);
    else if (recorded === null) console.error("inbound objects kept: whether a row names them is unknown", keys[0]);
    throw err;
  }
  if (!inserted) {
    // Another delivery of this message stored the account's copy first.
    await forget(env, keys);
    const first = (await storedCopies(env.DB, [rcpt.accountId], delivery.key)).get(rcpt.accountId);
    if (first === undefined) throw new Error("the copy of a message received twice at once is gone");
    return first;
  }
  if (heard) await announce(env, [event]);
  return id;
}

/** Deletes what a failed receive wrote; the thrown error, not this, is what the caller hears. */
async function forget(env: Pick<Env, "BLOBS">, keys: string[]): Promise<void> {
  await env.BLOBS.delete(keys).catch((err: unknown) => console.error("inbound objects left behind", keys[0], err instanceof Error ? err.message : String(err)));
}
