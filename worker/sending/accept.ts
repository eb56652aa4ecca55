// Accepting a send: turn a validated request into a prepared email (every rule that needs the
// account, the clock or the network), then record a whole set of them with one D1 batch and
// one queue send. Nothing is stored for a request that fails any rule.
import { drizzle } from "drizzle-orm/d1";
import type { Principal } from "../auth.ts";
import type { TernConfig } from "../config.ts";
import { insertEmail, insertEmailEvent, statementOf } from "../db/compiled.ts";
import { ApiError } from "../errors.ts";
import { uuidv7 } from "../ids.ts";
import { parseMailbox } from "../mime/address.ts";
import { isValidContentId } from "../mime/build.ts";
import { htmlToText } from "../mime/html-to-text.ts";
import type { OutboundFetcher } from "../net/outbound.ts";
import { resolveAttachment } from "./attachments.ts";
import { storeContent, type AttachmentBytes } from "./content.ts";
import { asList, type SendEmailRequest } from "./request.ts";
import { consumeStatements, isQuotaViolation, quotaError, type QuotaUse } from "./quota.ts";
import { parseScheduledAt } from "./schedule.ts";
import { authorizeSender } from "./sender.ts";
import { announce, emailFacts, emailOutboxEvent, outboxInsert } from "../events/outbox.ts";
import { claimStatements, isKeyTaken, KeyTaken, type KeyClaim } from "./key-claim.ts";

/** Work that may finish after the answer (`ctx.waitUntil`). */
export type Defer = (work: Promise<unknown>) => void;

export interface RecordOptions {
  /** An idempotency key to claim in the recording batch, with the answer to store. */
  key?: KeyRecord;
  /** Where the queue hints go once the emails are recorded (see recordEmails); without it
   * they are awaited. */
  defer?: Defer;
}

/** An idempotency key to claim, with the answer to store under it, in the recording batch. */
export interface KeyRecord {
  claim: KeyClaim;
  status: number;
  body: string;
}

export interface PreparedEmail {
  id: string;
  accountId: string;
  from: string;
  to: string[];
  cc: string[];
  bcc: string[];
  replyTo: string[];
  subject: string;
  html: string | null;
  text: string | null;
  headers: Record<string, string>;
  tags: { name: string; value: string }[];
  attachments: AttachmentBytes[];
  scheduledAt: number | null;
  domainId: string;
  region: string;
  /** Envelope recipients: to, cc and bcc, each once (case-insensitively). */
  recipients: string[];
  messageId: string;
  createdAt: number;
}

export interface SendDeps {
  db: D1Database;
  config: TernConfig;
  fetcher: OutboundFetcher;
  now: number;
}

export interface QueueMessage {
  emailId: string;
}

/** Applies the rules beyond the schema; `where` prefixes messages in a batch ("`[3].to`"). */
export async function prepareEmail(deps: SendDeps, principal: Principal, req: SendEmailRequest, where = ""): Promise<PreparedEmail> {
  const fromBox = parseMailbox(req.from)!;
  const domain = await authorizeSender(deps.db, principal, fromBox.email);
  const to = asList(req.to);
  const cc = asList(req.cc);
  const bcc = asList(req.bcc);
  const recipients: string[] = [];
  const seen = new Set<string>();
  for (const a of [...to, ...cc, ...bcc]) {
    const email = parseMailbox(a)!.email;
    if (!seen.has(email.toLowerCase())) {
      seen.add(email.toLowerCase());
      recipients.push(email);
    }
  }

  let scheduledAt: number | null = null;
  if (req.scheduled_at !== undefined) {
    const parsed = parseScheduledAt(req.scheduled_at, new Date(deps.now));
    if (!parsed.ok) throw new ApiError("validation_error", prefix(where, parsed.message));
    scheduledAt = parsed.value.getTime();
  }

  const attachments: AttachmentBytes[] = [];
  for (const [i, a] of (req.attachments ?? []).entries()) {
    const resolved = await resolveAttachment(a, i, deps.fetcher);
    if (!resolved.ok) throw new ApiError(resolved.code, prefix(where, resolved.message));
    attachments.push(resolved.value);
  }
  for (const [i, a] of attachments.entries()) {
    if (a.contentId !== undefined && !isValidContentId(a.contentId)) {
      throw new ApiError("validation_error", prefix(where, `\`attachments[${i}].content_id\` must be printable ASCII without spaces or angle brackets.`));
    }
  }
  const cids = attachments.map((a) => a.contentId).filter(Boolean);
  if (new Set(cids).size !== cids.length) {
    throw new ApiError("validation_error", prefix(where, "Each `content_id` must be unique within an email."));
  }

  const html = req.html && req.html.length > 0 ? req.html : null;
  // text absent: derived from html; text "" opts out of a text part.
  const text = req.text !== undefined ? (req.text.length > 0 ? req.text : null) : html ? htmlToText(html) : null;
  const id = uuidv7(deps.now);
  return {
    id,
    accountId: principal.accountId,
    from: req.from,
    to,
    cc,
    bcc,
    replyTo: asList(req.reply_to),
    subject: req.subject,
    html,
    text,
    headers: req.headers ?? {},
    tags: req.tags ?? [],
    attachments,
    scheduledAt,
    domainId: domain.id,
    region: domain.region,
    recipients,
    messageId: `${id}@${domain.name}`,
    createdAt: deps.now,
  };
}

function prefix(where: string, message: string): string {
  return where ? `${where} ${message}` : message;
}

/** Records emails and their first event in one D1 batch that also consumes the quota (and
 * claims the idempotency key, if any), then enqueues the ones due now. A send over the quota
 * throws the contract's 429 and records nothing; so does a key another request holds
 * (KeyTaken). A crash between recording and enqueueing leaves rows in `queued`; the cron finds
 * and sends them. */
export async function recordEmails(env: Env, config: TernConfig, principal: Principal, prepared: PreparedEmail[], now: number, opts: RecordOptions = {}): Promise<QuotaUse | null> {
  const { key, defer } = opts;
  const db = drizzle(env.DB);
  const keyStatements = key ? claimStatements(db, key.claim, key, now).map((q) => statementOf(env.DB, q)) : [];
  if (prepared.length === 0) {
    if (keyStatements.length > 0) {
      try {
        await env.DB.batch(keyStatements);
      } catch (err) {
        if (isKeyTaken(err)) throw new KeyTaken();
        throw err;
      }
    }
    return null;
  }
  const count = prepared.reduce((n, p) => n + p.recipients.length, 0);
  const quota = consumeStatements(env.DB, principal.accountId, principal.plan, count, now);
  const rows = await Promise.all(
    prepared.map(async (p) => {
      const stored = await storeContent(env.BLOBS, p.id, { html: p.html, text: p.text, attachments: p.attachments }, config.inlineContentLimit);
      const scheduled = p.scheduledAt !== null;
      const first = scheduled ? "scheduled" : "queued";
      return {
        /** What this email put in R2. */
        blobs: [stored.contentKey, ...stored.attachments.map((a) => a.key)].filter((k): k is string => k !== null),
        email: {
          id: p.id,
          accountId: p.accountId,
          fromAddress: p.from,
          toJson: JSON.stringify(p.to),
          ccJson: JSON.stringify(p.cc),
          bccJson: JSON.stringify(p.bcc),
          replyToJson: JSON.stringify(p.replyTo),
          subject: p.subject,
          html: stored.html,
          text: stored.text,
          headersJson: JSON.stringify(p.headers),
          tagsJson: JSON.stringify(p.tags),
          attachmentsJson: JSON.stringify(stored.attachments),
          contentKey: stored.contentKey,
          domainId: p.domainId,
          region: p.region,
          state: first,
          lastEvent: first,
          scheduledAt: p.scheduledAt,
          pendingJson: JSON.stringify(p.recipients),
          attempts: 0,
          nextAttemptAt: p.scheduledAt ?? p.createdAt,
          leaseUntil: null,
          messageId: p.messageId,
          createdAt: p.createdAt,
          broadcastId: null,
        },
        event: {
          id: uuidv7(p.createdAt),
          emailId: p.id,
          accountId: p.accountId,
          type: first,
          dataJson: scheduled ? JSON.stringify({ scheduled_at: new Date(p.scheduledAt!).toISOString() }) : "{}",
          createdAt: p.createdAt,
          dedupeKey: null,
        },
      };
    }),
  );
  // A scheduled email is a webhook event (email.scheduled); a queued one is not.
  const outbox = rows
    .filter((r) => r.email.state === "scheduled")
    .map((r) => emailOutboxEvent(r.email.accountId, { type: "email.scheduled", email: emailFacts(r.email), at: r.email.createdAt }, r.email.createdAt));
  // The hot statements are compiled once (db/compiled.ts); the rarer ones are built here.
  const records = [
    ...rows.flatMap((r) => [insertEmail.bind(env.DB, r.email), insertEmailEvent.bind(env.DB, r.event)]),
    ...outbox.map((e) => statementOf(env.DB, outboxInsert(db, e))),
  ];
  let results: D1Result[];
  try {
    // The key first: a key already taken fails the batch before the quota is looked at, so a
    // replay still replays when the quota is full.
    results = await env.DB.batch([...keyStatements, quota.monthly, ...(quota.daily ? [quota.daily] : []), ...records]);
  } catch (err) {
    // Nothing of this send is recorded, so nothing may point at what it put in R2.
    const stored = rows.flatMap((r) => r.blobs);
    if (stored.length > 0) await env.BLOBS.delete(stored).catch((e) => console.error("could not delete the content of a refused send", e));
    if (isKeyTaken(err)) throw new KeyTaken();
    if (isQuotaViolation(err)) throw await quotaError(db, principal.accountId, principal.plan, count, now);
    throw err;
  }
  const used = (r: D1Result | undefined) => (r!.results[0] as { used: number }).used;
  const use: QuotaUse = { monthlyUsed: used(results[keyStatements.length]) };
  if (quota.daily) use.dailyUsed = used(results[keyStatements.length + 1]);

  // Once the batch has committed the emails are accepted: the queue messages are only hints
  // (the consumer's claim decides, and the cron re-enqueues rows left in `queued`), so the
  // answer need not wait for them.
  const due = prepared.filter((p) => p.scheduledAt === null);
  const hints = Promise.all([
    announce(env, outbox),
    due.length === 0
      ? undefined
      : env.SEND_QUEUE.sendBatch(due.map((p) => ({ body: { emailId: p.id } satisfies QueueMessage }))).catch((err: unknown) => {
          // Recorded mail is never lost: the cron re-enqueues rows left in `queued`.
          console.error("enqueue failed; the cron will pick these up", due.map((p) => p.id), err);
        }),
  ]);
  if (defer) defer(hints);
  else await hints;
  return use;
}
