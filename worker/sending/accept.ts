// Accepting a send: turn a validated request into a prepared email (every rule that needs the
// account, the clock or the network), then record a whole set of them with one D1 batch and
// one queue send. Nothing is stored for a request that fails any rule.
import { enqueueEmails } from "../delivery/enqueue.ts";
import { drizzle } from "drizzle-orm/d1";
import { DASHBOARD_MAIL_KEY_ID, type Principal } from "../auth.ts";
import type { TernConfig } from "../config.ts";
import { insertEmail, insertEmailEvent } from "../db/compiled.ts";
import { ApiError, describeFailure } from "../errors.ts";
import { uuidv7 } from "../ids.ts";
import { parseMailbox } from "../mime/address.ts";
import { attachmentBound, isValidContentId, largestAttachmentWithin, messageBaseBound } from "../mime/build.ts";
import { htmlToText } from "../mime/html-to-text.ts";
import type { FetchLimit, OutboundFetcher } from "../net/outbound.ts";
import { resolveAttachment, type ContentStore } from "./attachments.ts";
import { attachmentKey, byteLength, contentKeys, storeContent, storeDecoded, storeFetched, type AttachmentBytes } from "./content.ts";
import { asList, type SendEmailRequest } from "./request.ts";
import { consumeStatements, isQuotaViolation, quotaError, type QuotaUse } from "./quota.ts";
import { parseScheduledAt } from "./schedule.ts";
import { authorizeSender } from "./sender.ts";
import { announce, emailFacts, emailOutboxEvent, outboxStatement, eventsToFanOut } from "../events/outbox.ts";
import { claimBound, isKeyTaken, KeyTaken, type KeyClaim } from "./key-claim.ts";
import { acceptedRollups } from "../metrics/rollup.ts";
import { assertSendingAllowed } from "../metrics/health.ts";

/** Work that may finish after the answer (`ctx.waitUntil`). */
export type Defer = (work: Promise<unknown>) => void;

export interface RecordOptions {
  /** An idempotency key to claim in the recording batch, with the answer to store. */
  key?: KeyRecord;
  /** Where the queue hints go once the emails are recorded (see recordEmails); without it
   * they are awaited. */
  defer?: Defer;
  /** A statement committed with the emails (the request's API log row, worker/logs). */
  extra?: D1PreparedStatement;
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
  /** Where content goes: a fetched `path` is written here as it arrives. */
  blobs: R2Bucket;
  config: TernConfig;
  fetcher: OutboundFetcher;
  now: number;
}

export interface QueueMessage {
  emailId: string;
}

/** The largest message tern sends, once encoded, attachments fetched by `path` included:
 * Resend's limit (40 MB after base64). */
export const MAX_MESSAGE_BYTES = 40 * 1024 * 1024;
const MAX_MESSAGE_MB = MAX_MESSAGE_BYTES / (1024 * 1024);

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

  const html = req.html && req.html.length > 0 ? req.html : null;
  // text absent: derived from html; text "" opts out of a text part.
  const text = req.text !== undefined ? (req.text.length > 0 ? req.text : null) : html ? htmlToText(html) : null;
  // The id comes first: fetched attachments are written under it as they arrive.
  const id = uuidv7(deps.now);
  let attachments: AttachmentBytes[];
  try {
    attachments = await resolveWithin(deps, id, req, where, messageBaseBound({
      subject: req.subject, headers: req.headers ?? {}, html, text, addresses: [req.from, ...to, ...cc, ...asList(req.reply_to)],
    }));
    for (const [i, a] of attachments.entries()) {
      if (a.contentId !== undefined && !isValidContentId(a.contentId)) {
        throw new ApiError("validation_error", prefix(where, `\`attachments[${i}].content_id\` must be printable ASCII without spaces or angle brackets.`));
      }
    }
    const cids = attachments.map((a) => a.contentId).filter(Boolean);
    if (new Set(cids).size !== cids.length) {
      throw new ApiError("validation_error", prefix(where, "Each `content_id` must be unique within an email."));
    }
  } catch (err) {
    // Nothing is kept of a refused email, not even the files fetched before the refusal.
    await discardContent(deps.blobs, [{ id, attachments: req.attachments ?? [] }]);
    throw err;
  }

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

/**
 * Resolves the attachments of an email whose other parts take `size` octets, holding the whole
 * message to MAX_MESSAGE_BYTES once encoded. What is known without the network (the bodies,
 * `content` attachments) counts first, so an email already over the bound fetches nothing;
 * then each `path` may bring only the room left: a declared Content-Length over it is refused
 * before the body is read, and a body that grows past it is cut off while it streams. A fetched
 * body is written to R2 as it arrives (sending/content.ts), so the isolate holds a piece of it,
 * not the file; the caller deletes what was written when the email is refused.
 */
async function resolveWithin(deps: SendDeps, id: string, req: SendEmailRequest, where: string, size: number): Promise<AttachmentBytes[]> {
  const tooLarge = (what: string, used: number) => new ApiError("validation_error", prefix(where,
    `${what}${what ? "the" : "The"} email would be larger than ${MAX_MESSAGE_MB} MB once encoded (attachments count in base64): ` +
    `about ${(used / (1024 * 1024)).toFixed(1)} MB. Send fewer or smaller attachments, or link to large files.`));
  if (size > MAX_MESSAGE_BYTES) throw tooLarge("", size);
  const inputs = req.attachments ?? [];
  const fetches = (a: unknown) => {
    const f = (typeof a === "object" && a !== null ? a : {}) as { content?: unknown; path?: unknown };
    return (f.content === undefined || f.content === null) && f.path !== undefined && f.path !== null;
  };
  const resolved: AttachmentBytes[] = new Array(inputs.length);
  for (const fetching of [false, true]) {
    for (const [i, a] of inputs.entries()) {
      if (fetches(a) !== fetching) continue;
      let limit: FetchLimit | undefined;
      if (fetching) {
        // The name is not known before the fetch: the bound counts the longest one.
        const meta = { filename: undefined, contentType: "application/octet-stream" };
        const room = MAX_MESSAGE_BYTES - size;
        if (room < attachmentBound(0, meta)) throw tooLarge(`\`attachments[${i}].path\`: `, size);
        const maxBytes = largestAttachmentWithin(room, meta);
        limit = { maxBytes, message: `the email would be larger than ${MAX_MESSAGE_MB} MB once encoded with this file; ${maxBytes} bytes were left for it. Send fewer or smaller attachments, or link to large files.` };
      }
      // A fetched file goes to R2 as it arrives, counted against the room while it streams.
      // Base64 `content` goes to R2 a slice at a time once it is known to fit.
      const storeInline: ContentStore = async (content, meta) => {
        const after = size + attachmentBound(content.size, meta);
        if (after > MAX_MESSAGE_BYTES) throw tooLarge(`\`attachments[${i}]\`: `, after);
        return storeDecoded(deps.blobs, attachmentKey(id, i), content);
      };
      const r = await resolveAttachment(a, i, deps.fetcher, limit, (body) => storeFetched(deps.blobs, attachmentKey(id, i), body), storeInline);
      if (!r.ok) throw new ApiError(r.code, prefix(where, r.message));
      size += attachmentBound(byteLength(r.value.content), r.value);
      if (size > MAX_MESSAGE_BYTES) throw tooLarge(`\`attachments[${i}]\`: `, size);
      resolved[i] = r.value;
    }
  }
  return resolved;
}

/** Deletes whatever R2 objects emails that were not recorded may have written (their bodies
 * and attachments, fetched or stored); an error is logged, never thrown over the refusal. */
export async function discardContent(bucket: R2Bucket, emails: { id: string; attachments: unknown[] }[]): Promise<void> {
  const keys = emails.flatMap((e) => contentKeys(e.id, e.attachments.length));
  if (keys.length === 0) return;
  await bucket.delete(keys).catch((e: unknown) => console.error("could not delete the content of a refused send", describeFailure(e)));
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
  const progress = { committed: false };
  try {
    return await recordPrepared(env, config, principal, prepared, now, opts, progress);
  } catch (err) {
    // Nothing of this send is recorded, so nothing may keep what its emails put in R2,
    // fetched attachments included. Once the batch committed, the content is the emails'.
    if (!progress.committed) await discardContent(env.BLOBS, prepared);
    throw err;
  }
}

async function recordPrepared(env: Env, config: TernConfig, principal: Principal, prepared: PreparedEmail[], now: number, opts: RecordOptions, progress: { committed: boolean }): Promise<QuotaUse | null> {
  const { key, defer, extra } = opts;
  // The dashboard's own mail (sign-up confirmations, resets) is not paused: bogus sign-ups
  // would otherwise bounce the operator's account into a pause that locks everyone out.
  if (config.healthPause && prepared.length > 0 && principal.keyId !== DASHBOARD_MAIL_KEY_ID) await assertSendingAllowed(env.DB, principal.accountId, now);
  const db = drizzle(env.DB);
  const keyStatements = key ? claimBound(env.DB, key.claim, key, now) : [];
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
          broadcastId: null,
          region: p.region,
          state: first,
          lastEvent: first,
          scheduledAt: p.scheduledAt,
          pendingJson: JSON.stringify(p.recipients),
          attempts: 0,
          nextAttemptAt: p.scheduledAt ?? p.createdAt,
          leaseUntil: null,
          attemptJson: null,
          messageId: p.messageId,
          createdAt: p.createdAt,
        },
        event: {
          id: uuidv7(p.createdAt),
          emailId: p.id,
          accountId: p.accountId,
          type: first,
          // The recipients it accepted: what the metrics count as received.
          dataJson: JSON.stringify(scheduled ? { scheduled_at: new Date(p.scheduledAt!).toISOString(), recipients: p.recipients } : { recipients: p.recipients }),
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
    ...outbox.map((e) => outboxStatement(env.DB, e)),
    ...(extra ? [extra] : []),
    ...acceptedRollups(env.DB, rows.map((r) => r.email)),
  ];
  let results: D1Result[];
  let statements: D1PreparedStatement[];
  try {
    // The key first: a key already taken fails the batch before the quota is looked at, so a
    // replay still replays when the quota is full.
    statements = [...keyStatements, quota.monthly, ...(quota.daily ? [quota.daily] : []), ...records];
    results = await env.DB.batch(statements);
    progress.committed = true;
  } catch (err) {
    // recordEmails deletes what the emails put in R2.
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
    announce(env, eventsToFanOut(statements, results)),
    due.length === 0
      ? undefined
      : enqueueEmails(env, due).catch((err: unknown) => {
          // Recorded mail is never lost: the cron re-enqueues rows left in `queued`.
          console.error("enqueue failed; the cron will pick these up", due.map((p) => p.id), describeFailure(err));
        }),
  ]);
  if (defer) defer(hints);
  else await hints;
  return use;
}
