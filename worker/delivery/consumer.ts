// The send queue's consumer: claim an email, build its message, hand it to the transports
// and record what happened. A claim is a conditional UPDATE from `queued` to `sending`, so a
// redelivered queue message finds nothing to claim and never sends an email twice.
import { and, eq, inArray, lte } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { drizzle, type DrizzleD1Database } from "drizzle-orm/d1";
import { readConfig, type TernConfig } from "../config.ts";
import { unindexed } from "../db/plan.ts";
import { emailEvents, emails, type EmailRow } from "../db/schema.ts";
import { uuidv7 } from "../ids.ts";
import { parseMailbox, toAsciiEmail, type Address } from "../mime/address.ts";
import { buildMessage } from "../mime/build.ts";
import type { QueueMessage } from "../sending/accept.ts";
import { ContentMissingError, loadContent, type EmailContent } from "../sending/content.ts";
import { signMessage } from "../dkim/sign.ts";
import { transportFor } from "../transports/select.ts";
import { NoSigningKeyError, sendingIdentity } from "./sending-identity.ts";
import { isSimulated, simulate } from "../transports/simulator.ts";
import type { Transport, TransportSession } from "../transports/transport.ts";
import { settleAttempt, type AttemptResult, type EventRecord, type Settlement } from "./outcome.ts";
import { announce, emailFacts, emailOutboxEvent, outboxInsert, type OutboxEvent } from "../events/outbox.ts";
import type { Bounce } from "../webhooks/payloads.ts";
import { suppressedAmong, suppressionKey, suppressStatement } from "../suppressions/suppress.ts";
import { linkTokenKey, trackedHtml } from "../tracking/outgoing.ts";
import { asksForUnsubscribe, unsubscribeUrl, withUnsubscribeUrl, type MessageParts } from "../contacts/list-unsubscribe.ts";
import { broadcastContent } from "../broadcasts/content.ts";

/** How long a consumer owns an email it claimed; past this the cron hands it back to the queue. */
export const LEASE_MS = 10 * 60_000;
/** A queue message may arrive a little before its email is due. */
const EARLY_SLACK_MS = 5_000;
/** The longest delay Queues accepts for a retry. */
const MAX_QUEUE_DELAY_S = 12 * 3600;

export interface ConsumerDeps {
  transportFor?: (region: string) => Transport;
  now?: () => number;
}

/** Opens one session per transport for the whole batch, so its messages share a connection. */
class Sessions {
  private open = new Map<string, Promise<TransportSession>>();
  constructor(private readonly make: (region: string) => Transport) {}
  get(region: string): Promise<TransportSession> {
    let s = this.open.get(region);
    if (!s) this.open.set(region, (s = this.make(region).open()));
    return s;
  }
  async closeAll(): Promise<void> {
    await Promise.allSettled([...this.open.values()].map(async (s) => (await s).close()));
  }
}

/** Connections a batch may use at once per region (a Worker invocation may hold 6 sockets). */
const PARALLEL_SESSIONS = 3;

export async function consumeSendBatch(batch: MessageBatch<QueueMessage>, env: Env, deps: ConsumerDeps = {}): Promise<void> {
  const config = readConfig(env);
  const now = deps.now ?? Date.now;
  const makeTransport = deps.transportFor ?? ((region: string) => transportFor(env, config, region));
  const claimed = await claimEmails(env.DB, [...new Set(batch.messages.map((m) => m.body.emailId))], now());
  const suppressed = await suppressedInBatch(env.DB, claimed);
  const outcome = new Map<string, number | null | "error">();

  // A few workers, each with its own connection per region, take the claimed emails in turn;
  // each email is recorded as soon as it is settled, so a crash loses at most one attempt.
  const queue = [...claimed];
  const simulatedWrites: SimulatedWrite[] = [];
  await Promise.all(
    Array.from({ length: Math.min(PARALLEL_SESSIONS, queue.length) }, async () => {
      const sessions = new Sessions(makeTransport);
      try {
        for (let email = queue.shift(); email; email = queue.shift()) {
          try {
            outcome.set(email.id, await deliverEmail(env, config, email, suppressed.get(email.accountId)!, sessions, now, simulatedWrites));
          } catch (err) {
            if (err instanceof UnrecordedDeliveryError) {
              // The mail left tern: handing the claim back would send it again in 30 s. The row
              // stays in `sending` until its lease ends, the longest wait before a resend.
              console.error("delivered but not recorded; left to its lease", email.id, err.cause);
              outcome.set(email.id, null);
              continue;
            }
            console.error("delivery failed unexpectedly; will retry", email.id, err);
            await releaseClaim(env.DB, email.id).catch(() => {});
            outcome.set(email.id, "error");
          }
        }
      } finally {
        await sessions.closeAll();
      }
    }),
  );

  // Simulated outcomes touch nothing outside tern, so they are written together: one D1 batch
  // for all of them instead of one each. If that write fails they are simply simulated again.
  if (simulatedWrites.length > 0) {
    try {
      await drizzle(env.DB).batch(simulatedWrites.flatMap((w) => w.statements) as unknown as [BatchItem<"sqlite">]);
      await announce(env, simulatedWrites.flatMap((w) => w.outbox));
    } catch (err) {
      console.error("recording simulated outcomes failed; will retry", err);
      for (const w of simulatedWrites) {
        await releaseClaim(env.DB, w.emailId).catch(() => {});
        outcome.set(w.emailId, "error");
      }
    }
  }

  const answered = new Set<string>();
  for (const msg of batch.messages) {
    const id = msg.body.emailId;
    const result = outcome.get(id);
    // Done, not claimed (already sent, canceled, not yet due), or a duplicate in this batch.
    if (result === null || result === undefined || answered.has(id)) msg.ack();
    else if (result === "error") msg.retry({ delaySeconds: 30 });
    else msg.retry({ delaySeconds: Math.min(Math.max(result, 0), MAX_QUEUE_DELAY_S) });
    answered.add(id);
  }
}

/** Moves the batch's due emails from queued to sending in one statement; the rows returned
 * are the ones this consumer now owns. */
async function claimEmails(d1: D1Database, ids: string[], t: number): Promise<EmailRow[]> {
  const db = drizzle(d1);
  const owned: EmailRow[] = [];
  for (let i = 0; i < ids.length; i += 90) {
    owned.push(...(await claimQuery(db, ids.slice(i, i + 90), t)));
  }
  return owned;
}

/** The claim of a set of emails by id (exported for the query-plan test). */
export function claimQuery(db: DrizzleD1Database, ids: string[], t: number) {
  return db.update(emails)
    .set({ state: "sending", leaseUntil: t + LEASE_MS })
    // By primary key only: see worker/db/plan.ts.
    .where(and(inArray(emails.id, ids), eq(unindexed(emails.state), "queued"), lte(unindexed(emails.nextAttemptAt), t + EARLY_SLACK_MS)))
    .returning();
}

async function releaseClaim(db: D1Database, emailId: string): Promise<void> {
  await drizzle(db).update(emails).set({ state: "queued", leaseUntil: null })
    .where(and(eq(emails.id, emailId), eq(emails.state, "sending")));
}

/** One attempt for one claimed email. Returns seconds until a retry, or null when it is done. */
interface SimulatedWrite {
  emailId: string;
  statements: BatchItem<"sqlite">[];
  outbox: OutboxEvent[];
}

/** Recording failed after the relay took the mail. */
class UnrecordedDeliveryError extends Error {}

/** Records what happened to mail that already left tern. A transient D1 failure must not turn
 * into a second send, so the write is retried (it is guarded by state = 'sending', so running
 * it twice changes nothing) before giving up. */
async function recordAfterSend(d1: D1Database, emailId: string, statements: BatchItem<"sqlite">[]): Promise<void> {
  let last: unknown;
  for (let attempt = 0; attempt < 4; attempt++) {
    try {
      // A batch that failed on the way back may have committed: then there is nothing to redo.
      if (attempt > 0) {
        const row = await drizzle(d1).select({ state: emails.state }).from(emails).where(eq(emails.id, emailId)).get();
        if (row && row.state !== "sending") return;
      }
      await drizzle(d1).batch(statements as [BatchItem<"sqlite">]);
      return;
    } catch (err) {
      last = err;
      await new Promise((r) => setTimeout(r, 100 * 2 ** attempt));
    }
  }
  throw new UnrecordedDeliveryError("recording the delivery failed", { cause: last });
}

/** The suppressed addresses among the claimed emails' recipients, by account: one read per
 * account for the whole batch rather than one per email. */
async function suppressedInBatch(d1: D1Database, claimed: EmailRow[]): Promise<Map<string, Set<string>>> {
  const byAccount = new Map<string, string[]>();
  for (const e of claimed) {
    let list = byAccount.get(e.accountId);
    if (!list) byAccount.set(e.accountId, (list = []));
    list.push(...(JSON.parse(e.pendingJson) as string[]));
  }
  const out = new Map<string, Set<string>>();
  for (const [accountId, recipients] of byAccount) out.set(accountId, await suppressedAmong(drizzle(d1), accountId, recipients));
  return out;
}

async function deliverEmail(
  env: Env,
  config: TernConfig,
  email: EmailRow,
  suppressedSet: Set<string>,
  sessions: Sessions,
  now: () => number,
  simulatedWrites: SimulatedWrite[],
): Promise<number | null> {
  const attempt = email.attempts + 1;
  const pending = JSON.parse(email.pendingJson) as string[];
  // Suppressed addresses are settled without an attempt; the other recipients go on.
  const suppressed = pending.filter((r) => suppressedSet.has(suppressionKey(r)));
  const toAttempt = pending.filter((r) => !suppressedSet.has(suppressionKey(r)));

  let results: AttemptResult[];
  let retrySchedule = config.retrySchedule;
  try {
    results = await attemptDelivery(env, config, email, toAttempt, attempt, sessions);
  } catch (err) {
    if (!(err instanceof ContentMissingError) && !(err instanceof NoSigningKeyError)) throw err;
    // Its stored content or its domain is gone: no retry can ever send this message.
    console.error("cannot build message", email.id, err.message);
    const message = err instanceof NoSigningKeyError ? err.message : "The stored content of this email is missing.";
    results = toAttempt.map((recipient) => ({ recipient, status: "deferred" as const, final: false, message }));
    retrySchedule = [];
  }
  const settlement = withSuppressed(settleAttempt(results, { attempt, retrySchedule, alreadyDelayed: attempt > 1 }), suppressed);
  const t = now();
  const { statements, outbox } = settlementStatements(env.DB, email, attempt, settlement, t);
  statements.push(...suppressionStatements(env.DB, email, settlement.events, t));
  const leftTern = toAttempt.some((r) => !isSimulated(r, config.simulatorDomains));
  // Mail that left tern is recorded before anything else happens: a crash after this point
  // must not send it again.
  if (leftTern) {
    await recordAfterSend(env.DB, email.id, statements);
    await announce(env, outbox);
  } else {
    simulatedWrites.push({ emailId: email.id, statements, outbox });
  }
  return settlement.state === "queued" ? settlement.retryInSeconds : null;
}

async function attemptDelivery(
  env: Env,
  config: TernConfig,
  email: EmailRow,
  pending: string[],
  attempt: number,
  sessions: Sessions,
): Promise<AttemptResult[]> {
  const simulated = pending.filter((r) => isSimulated(r, config.simulatorDomains));
  const real = pending.filter((r) => !isSimulated(r, config.simulatorDomains));
  const results: AttemptResult[] = simulated.map((r) => ({ ...simulate(r, attempt), final: true }));
  if (real.length > 0) {
    const identity = await sendingIdentity(env.DB, config, email);
    // A broadcast's emails share its one stored body, personalised here for each recipient.
    const content = email.broadcastId ? await broadcastContent(env.DB, email) : await loadContent(env.BLOBS, email);
    const parts: MessageParts = {
      html: await trackedHtml(env, config, email, identity.tracking, content.html),
      text: content.text,
      headers: JSON.parse(email.headersJson) as Record<string, string>,
    };
    const session = await sessions.get(email.region);
    // The envelope carries internationalized domains as A-labels (punycode).
    const deliver = async (recipients: string[], message: MessageParts) => {
      const raw = await signMessage(buildEmailMessage(email, content, message), identity.keys);
      const delivered = await session.deliver({ envelopeFrom: identity.envelopeFrom, recipients: recipients.map(toAsciiEmail), raw, requireTls: identity.requireTls });
      for (const r of delivered) results.push({ ...r, final: r.status === "accepted" && config.relayFinal });
    };
    if (asksForUnsubscribe(parts.headers)) {
      // Each recipient gets a message with its own unsubscribe link.
      const key = config.publicUrl ? await linkTokenKey(config) : null;
      for (const recipient of real) {
        const url = key && (await unsubscribeUrl(key, config.publicUrl, { accountId: email.accountId, emailId: email.id, recipient }));
        await deliver([recipient], withUnsubscribeUrl(parts, url || null));
      }
    } else {
      await deliver(real, parts);
    }
  }
  return results;
}

/** Recipients on the suppression list were not attempted: one `suppressed` event for them. */
function withSuppressed(s: Settlement, suppressed: string[]): RecordedSettlement {
  if (suppressed.length === 0) return s;
  const event: RecordedEvent = {
    type: "suppressed",
    data: { recipients: suppressed, message: "The address is on the account's suppression list; tern did not send to it." },
  };
  return { ...s, events: [event, ...s.events], lastEvent: s.lastEvent ?? "suppressed" };
}

/** Hard bounces and complaints put the address on the account's suppression list. Only a
 * Permanent bounce counts (reports/classify.ts): a full mailbox or a policy block (5.7.x) is
 * the sender's or the moment's problem, and suppressing it would drop a good address. */
function suppressionStatements(d1: D1Database, email: EmailRow, events: RecordedEvent[], now: number): BatchItem<"sqlite">[] {
  const db = drizzle(d1);
  const out: BatchItem<"sqlite">[] = [];
  for (const e of events) {
    const recipients = (e.data.recipients as string[] | undefined) ?? [];
    if (e.type === "bounced") {
      const bounce = e.data.bounce as Bounce;
      if (bounce.type !== "Permanent") continue;
      for (const r of recipients) out.push(suppressStatement(db, { accountId: email.accountId, email: r, reason: "bounce", emailId: email.id, detail: bounce.message, now }));
    } else if (e.type === "complained") {
      for (const r of recipients) out.push(suppressStatement(db, { accountId: email.accountId, email: r, reason: "complaint", emailId: email.id, detail: "abuse", now }));
    }
  }
  return out;
}

function mailboxes(json: string): Address[] {
  return (JSON.parse(json) as string[]).map((a) => parseMailbox(a)!);
}

/** The message as recipients see it. Bcc recipients are only in the envelope, never a header. */
export async function renderMessage(env: Env, email: EmailRow): Promise<Uint8Array> {
  const content = await loadContent(env.BLOBS, email);
  return buildEmailMessage(email, content, { html: content.html, text: content.text, headers: JSON.parse(email.headersJson) as Record<string, string> });
}

/** The message from the stored email with its html, text and headers as they are sent (tracked, personalized). */
function buildEmailMessage(email: EmailRow, content: EmailContent, parts: MessageParts): Uint8Array {
  return buildMessage({
    from: parseMailbox(email.fromAddress)!,
    to: mailboxes(email.toJson),
    cc: mailboxes(email.ccJson),
    replyTo: mailboxes(email.replyToJson),
    subject: email.subject,
    html: parts.html ?? undefined,
    text: parts.text ?? undefined,
    headers: parts.headers,
    attachments: content.attachments,
    messageId: email.messageId,
    date: new Date(email.createdAt),
  });
}

/** A settlement, with the events of recipients that were not attempted. */
type RecordedEvent = EventRecord | { type: "suppressed"; data: Record<string, unknown> };
type RecordedSettlement = Omit<Settlement, "events"> & { events: RecordedEvent[] };

function settlementStatements(d1: D1Database, email: EmailRow, attempt: number, s: RecordedSettlement, now: number): { statements: BatchItem<"sqlite">[]; outbox: OutboxEvent[] } {
  const db = drizzle(d1);
  const update = db.update(emails).set({
    state: s.state,
    attempts: attempt,
    pendingJson: JSON.stringify(s.pending),
    leaseUntil: null,
    nextAttemptAt: s.state === "queued" ? now + (s.retryInSeconds ?? 0) * 1000 : null,
    ...(s.lastEvent ? { lastEvent: s.lastEvent } : {}),
  }).where(and(eq(emails.id, email.id), eq(emails.state, "sending")));
  const inserts = s.events.map((e, i) =>
    db.insert(emailEvents).values({
      id: uuidv7(now + i),
      emailId: email.id,
      accountId: email.accountId,
      type: e.type,
      dataJson: JSON.stringify(e.data),
      createdAt: now,
    }),
  );
  const outbox = webhookEventsOf(email, s.events, now);
  return { statements: [update, ...inserts, ...outbox.map((e) => outboxInsert(db, e))], outbox };
}

/** The webhook events of a settlement, for the outbox. */
function webhookEventsOf(email: EmailRow, events: RecordedEvent[], now: number): OutboxEvent[] {
  const facts = emailFacts(email);
  return events.map((e) => {
    const base = { email: facts, at: now };
    switch (e.type) {
      case "bounced":
        return emailOutboxEvent(email.accountId, { ...base, type: "email.bounced", bounce: e.data.bounce as Bounce }, now);
      case "failed":
        return emailOutboxEvent(email.accountId, { ...base, type: "email.failed", failed: e.data.failed as { reason: string } }, now);
      default:
        return emailOutboxEvent(email.accountId, { ...base, type: `email.${e.type}` }, now);
    }
  });
}
