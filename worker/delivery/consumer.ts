// The send queue's consumer: claim an email, build its message, hand it to the transports
// and record what happened. A claim is a conditional UPDATE from `queued` to `sending`, so a
// redelivered queue message finds nothing to claim and never sends an email twice. Each
// recipient gets its own message (its own return path, sending/return-path.ts), and each
// message's reply is recorded as soon as it arrives (progress.ts), so a crash can send again
// only the one message whose reply it had not yet recorded, and says so (outcome_unknown).
import { and, eq, inArray, sql } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { drizzle } from "drizzle-orm/d1";
import { readConfig, type TernConfig } from "../config.ts";
import { claimEmails as claimEmailsQuery, emailRows, insertSettlementEvent, prepared, settleEmail, statementOf, type Query } from "../db/compiled.ts";
import { emails, type EmailRow } from "../db/schema.ts";
import { uuidv7 } from "../ids.ts";
import { domainOf, parseMailbox, toAsciiEmail, type Address } from "../mime/address.ts";
import { composeMessage, UnbuildableMessageError, type ComposedMessage, type MimeMessageInput } from "../mime/build.ts";
import type { QueueMessage } from "../sending/accept.ts";
import { ContentMissingError, loadContent, type EmailContent } from "../sending/content.ts";
import { bodyHash, signComposed } from "../dkim/sign.ts";
import { transportFor } from "../transports/select.ts";
import { NoSigningKeyError, sendingIdentity } from "./sending-identity.ts";
import { isSimulated, simulate } from "../transports/simulator.ts";
import { rateLimited, SENDER_POOL_DEFAULTS, SessionPool } from "./session-pool.ts";
import { HintBuffer } from "./hints.ts";
import { joinedBytes, type MessageChunks, type Transport, type TransportSession } from "../transports/transport.ts";
import { settleAttempt, type AttemptResult, type EventRecord, type Settlement } from "./outcome.ts";
import { AttemptLog, LeaseLostError, markInFlightStatement, progressOf, type InFlightMark } from "./progress.ts";
import { canonicalRecipient } from "../sending/return-path.ts";
import { announce, emailFacts, emailOutboxEvent, outboxStatementIfRecorded, eventsToFanOut, type OutboxEvent } from "../events/outbox.ts";
import type { Bounce } from "../webhooks/payloads.ts";
import { suppressedAmong, suppressionKey, suppressStatement } from "../suppressions/suppress.ts";
import { linkTokenKey, trackedHtml } from "../tracking/outgoing.ts";
import { mergedRollups, rollupStatement, type RollupInput } from "../metrics/rollup.ts";
import { asksForUnsubscribe, UNSUBSCRIBE_PLACEHOLDER, unsubscribeUrl, withUnsubscribeUrl, type MessageParts } from "../contacts/list-unsubscribe.ts";
import { broadcastContent, primeBroadcastContacts } from "../broadcasts/content.ts";
import { describeFailure } from "../errors.ts";

/** A queue message may arrive a little before its email is due. */
const EARLY_SLACK_MS = 5_000;
/** The longest delay Queues accepts for a retry. */
const MAX_QUEUE_DELAY_S = 12 * 3600;

export interface ConsumerDeps {
  transportFor?: (region: string) => Transport;
  now?: () => number;
}

/** What became of each email of a batch: seconds until its retry, null when there is nothing
 * more for this queue message to do, "error" for a quick retry. */
export type DeliveryOutcome = number | null | "error";

/** Workers that deliver a batch's claimed emails at once: one per connection the pool may open
 * for a region, each borrowing one at a time. */
const PARALLEL_SESSIONS = SENDER_POOL_DEFAULTS.perRegion;

/** The in-process consumer: a queue batch delivered here, on connections opened for it and
 * closed at its end. The Worker's send queues go through their region's sender object instead
 * (consumeRegionBatch), which runs the same deliverBatch on connections it keeps warm. */
export async function consumeSendBatch(batch: MessageBatch<QueueMessage>, env: Env, deps: ConsumerDeps = {}): Promise<void> {
  const config = readConfig(env);
  const pool = new SessionPool(deps.transportFor ?? ((region: string) => transportFor(env, config, region)));
  try {
    answerBatch(batch, await deliverBatch(env, batch.messages.map((m) => m.body.emailId), pool, deps.now));
  } finally {
    await pool.closeAll();
  }
}

/** Acknowledges or retries each queue message as its email's outcome says. */
export function answerBatch(batch: MessageBatch<QueueMessage>, outcome: Map<string, DeliveryOutcome>): void {
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

/** Claims the given emails and delivers the ones it claimed, borrowing connections from `pool`. */
export async function deliverBatch(env: Env, emailIds: string[], pool: SessionPool, clock?: () => number): Promise<Map<string, DeliveryOutcome>> {
  const config = readConfig(env);
  const now = clock ?? Date.now;
  const claimed = await claimEmails(env.DB, [...new Set(emailIds)], now(), config.leaseMs);
  const suppressed = await suppressedInBatch(env.DB, claimed);
  // The contacts of broadcast emails bound for a relay, in one read for the batch (a failed
  // read only means each email reads its own).
  const rendered = claimed.filter((e) => e.broadcastId !== null && (JSON.parse(e.pendingJson) as string[]).some((r) => !isSimulated(r, config.simulatorDomains)));
  await primeBroadcastContacts(env.DB, rendered).catch((err: unknown) => console.error("reading the batch's broadcast contacts failed", describeFailure(err)));
  const outcome = new Map<string, DeliveryOutcome>();

  // A few workers take the claimed emails in turn; each message's reply is recorded as soon as
  // it arrives (progress.ts), so a crash leaves at most one message per connection whose
  // outcome tern does not know. Each worker takes its next email before settling the current
  // one: the settlement's D1 batch also marks the next email's first message in flight, which
  // saves that email a write of its own.
  const queue = [...claimed];
  const simulatedWrites: SimulatedWrite[] = [];
  const hints = new HintBuffer(env);
  await Promise.all(
    Array.from({ length: Math.min(PARALLEL_SESSIONS, queue.length) }, async () => {
      let carried: Carried | null = null;
      let email = queue.shift();
      while (email) {
        // The next email is taken early only while the other connections have work of their own.
        const next = queue.length >= PARALLEL_SESSIONS ? queue.shift() : undefined;
        const first: Carried = carried ?? { marked: false, leases: [email.leaseUntil!] };
        carried = null;
        const held: Held = {};
        try {
          const nextMark = next ? firstMessageMark(next, suppressed.get(next.accountId)!, config) : null;
          const done = await deliverEmail(env, config, email, suppressed.get(email.accountId)!, pool, now, simulatedWrites, hints, { first, nextMark }, held);
          outcome.set(email.id, done.retryIn);
          carried = done.next;
        } catch (err) {
          if (err instanceof LeaseLostError) {
            // The cron handed it back (the lease ran out): its next owner sends the rest.
            console.error("lease lost mid-send; left to its next owner", email.id);
            outcome.set(email.id, null);
          } else if (err instanceof UnrecordedDeliveryError) {
            // The mail left tern: handing the claim back would send it again in 30 s. The row
            // stays in `sending` until its lease ends, the longest wait before a resend.
            console.error("delivered but not recorded; left to its lease", email.id, describeFailure(err.cause));
            outcome.set(email.id, null);
          } else {
            console.error("delivery failed unexpectedly; will retry", email.id, describeFailure(err));
            await releaseClaim(env.DB, email.id, held.log?.currentLeases ?? first.leases).catch(() => {});
            outcome.set(email.id, "error");
          }
        }
        email = next ?? queue.shift();
      }
    }),
  );
  await hints.close();

  // Simulated outcomes touch nothing outside tern, so they are written together, their rollups
  // counted in one statement, SIMULATED_PER_WRITE emails to a D1 batch: D1 runs one write at a
  // time, and a batch of a whole queue batch's settlements (300 statements) held every other
  // write, a send's included, for its whole length. If a write fails its emails are simply
  // simulated again.
  for (let i = 0; i < simulatedWrites.length; i += SIMULATED_PER_WRITE) {
    const chunk = simulatedWrites.slice(i, i + SIMULATED_PER_WRITE);
    try {
      const statements = [...chunk.flatMap((w) => w.statements), ...mergedRollups(env.DB, chunk.map((w) => w.rollup))];
      const written = await env.DB.batch(statements);
      await announce(env, eventsToFanOut(statements, written));
      // A settlement that lost its lease wrote nothing: the email is its next owner's.
      for (const w of chunk) {
        if ((written[statements.indexOf(w.settle)]!.meta.changes ?? 0) > 0) continue;
        console.error("lease lost before the settlement; left to its next owner", w.emailId);
        outcome.set(w.emailId, null);
      }
    } catch (err) {
      console.error("recording simulated outcomes failed; will retry", describeFailure(err));
      for (const w of chunk) {
        await releaseClaim(env.DB, w.emailId, w.leases).catch(() => {});
        outcome.set(w.emailId, "error");
      }
    }
  }
  return outcome;
}

/** Moves the batch's due emails from queued to sending in one statement; the rows returned
 * are the ones this consumer now owns. */
async function claimEmails(d1: D1Database, ids: string[], t: number, leaseMs: number): Promise<EmailRow[]> {
  const owned: EmailRow[] = [];
  for (let i = 0; i < ids.length; i += 90) {
    owned.push(...emailRows(await prepared(d1, claimQuery(ids.slice(i, i + 90), t, leaseMs)).raw()));
  }
  return owned;
}

/** The claim of a set of emails by id (exported for the query-plan test). */
export function claimQuery(ids: string[], t: number, leaseMs: number): Query {
  return claimEmailsQuery(ids, { leaseUntil: t + leaseMs, due: t + EARLY_SLACK_MS });
}

/** Hands an email back for a quick retry. Results already recorded stay (the next attempt
 * skips their recipients); nothing can be in flight when this runs. Only while this consumer
 * still holds it (one of `leases`): if the cron took it back and another consumer claimed it
 * meanwhile, it is that consumer's, mid-send. */
export async function releaseClaim(db: D1Database, emailId: string, leases: readonly number[]): Promise<void> {
  await drizzle(db).update(emails).set({ state: "queued", leaseUntil: null, attemptJson: sql`json_set(${emails.attemptJson}, '$.inFlight', json('null'))` })
    .where(and(eq(emails.id, emailId), eq(emails.state, "sending"), inArray(emails.leaseUntil, [...leases])));
}

interface SimulatedWrite {
  emailId: string;
  /** Its settlement, without the rollup: the chunk's rollups are written as one. */
  statements: D1PreparedStatement[];
  /** The settlement's UPDATE, among `statements`. */
  settle: D1PreparedStatement;
  rollup: RollupInput;
  /** The leases the settlement is guarded by: a failed write hands the email back under them. */
  leases: number[];
}

/** Simulated settlements written per D1 batch (about 6 statements each). */
const SIMULATED_PER_WRITE = 10;

/** Recording failed after the relay took the mail. */
class UnrecordedDeliveryError extends Error {}

/** Records what happened to mail that already left tern. A transient D1 failure must not turn
 * into a second send, so the write is retried (it is guarded by state = 'sending' and the
 * lease, so running it twice changes nothing) before giving up. */
async function recordAfterSend(d1: D1Database, emailId: string, statements: D1PreparedStatement[]): Promise<D1Result[] | null> {
  let last: unknown;
  for (let attempt = 0; attempt < 4; attempt++) {
    try {
      // A batch that failed on the way back may have committed: then there is nothing to redo
      // (and what it did is not known: null).
      if (attempt > 0) {
        const row = await drizzle(d1).select({ state: emails.state }).from(emails).where(eq(emails.id, emailId)).get();
        if (row && row.state !== "sending") return null;
      }
      return await d1.batch(statements);
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

/** Who an email's attempt is for: the replies an interrupted attempt already recorded (not sent
 * again), the suppressed recipients (settled without an attempt) and the rest, in order; the
 * first of those that is not simulated gets the first message that leaves tern. */
interface AttemptPlan {
  answered: AttemptResult[];
  suppressed: string[];
  toAttempt: string[];
  firstReal: string | null;
}

function planAttempt(email: EmailRow, suppressedSet: Set<string>, config: TernConfig): AttemptPlan {
  const answered = progressOf(email).results;
  const done = new Set(answered.map((r) => canonicalRecipient(r.recipient)));
  const open = (JSON.parse(email.pendingJson) as string[]).filter((r) => !done.has(canonicalRecipient(r)));
  const toAttempt = open.filter((r) => !suppressedSet.has(suppressionKey(r)));
  return {
    answered,
    suppressed: open.filter((r) => suppressedSet.has(suppressionKey(r))),
    toAttempt,
    firstReal: toAttempt.find((r) => !isSimulated(r, config.simulatorDomains)) ?? null,
  };
}

/** The in-flight mark of an email's first message, to ride along with the previous email's
 * settlement (null when the email sends nothing outside tern). */
function firstMessageMark(email: EmailRow, suppressedSet: Set<string>, config: TernConfig): Omit<InFlightMark, "renewTo"> | null {
  const plan = planAttempt(email, suppressedSet, config);
  return plan.firstReal === null ? null : { emailId: email.id, lease: email.leaseUntil!, inFlight: plan.firstReal, results: plan.answered };
}

/** What the previous settlement did for an email: whether it marked its first message in flight,
 * and the lease the email's own writes are guarded by (both values when that is not known). */
interface Carried {
  marked: boolean;
  leases: number[];
}

interface Handoff {
  first: Carried;
  /** The mark of the next email's first message, written with this settlement if it is written now. */
  nextMark: Omit<InFlightMark, "renewTo"> | null;
}

/** One attempt for one claimed email: seconds until a retry (null when it is done), and
 * whether the next email's first message was marked in flight with this settlement. */
async function deliverEmail(
  env: Env,
  config: TernConfig,
  email: EmailRow,
  suppressedSet: Set<string>,
  pool: SessionPool,
  now: () => number,
  simulatedWrites: SimulatedWrite[],
  hints: HintBuffer,
  handoff: Handoff,
  held: Held,
): Promise<{ retryIn: number | null; next: Carried | null }> {
  // The connection the email's messages went out on is given back only once its last reply is
  // recorded: another worker (of this batch or of another batch sharing the region's sender)
  // must not send on it while that reply is unwritten (README, "Delivery guarantees").
  try {
    return await deliverOnHeld(env, config, email, suppressedSet, pool, now, simulatedWrites, hints, handoff, held);
  } finally {
    if (held.session) pool.release(email.region, held.session);
  }
}

/** The session an email's attempt borrowed, held until its settlement is written, and the
 * attempt's log (the leases its writes renewed). */
interface Held {
  session?: TransportSession;
  log?: AttemptLog;
}

async function deliverOnHeld(
  env: Env,
  config: TernConfig,
  email: EmailRow,
  suppressedSet: Set<string>,
  pool: SessionPool,
  now: () => number,
  simulatedWrites: SimulatedWrite[],
  hints: HintBuffer,
  handoff: Handoff,
  held: Held,
): Promise<{ retryIn: number | null; next: Carried | null }> {
  const attempt = email.attempts + 1;
  const plan = planAttempt(email, suppressedSet, config);
  const log = (held.log = new AttemptLog(env.DB, email.id, handoff.first.leases, config.leaseMs, now, [...plan.answered]));

  let retrySchedule = config.retrySchedule;
  // Results made up here for recipients no message went to: they never left tern.
  const unsent = new Set<AttemptResult>();
  try {
    await attemptDelivery(env, config, email, plan.toAttempt, attempt, pool, log, handoff.first.marked, held);
  } catch (err) {
    // Mail that may have left tern, or an email that is no longer ours: the caller's to handle.
    if (err instanceof LeaseLostError || err instanceof UnrecordedDeliveryError) throw err;
    const unbuildable = err instanceof ContentMissingError || err instanceof NoSigningKeyError || err instanceof UnbuildableMessageError;
    let message: string;
    if (unbuildable) {
      // Its stored content or its domain is gone, or its fields cannot make a message: no retry
      // can ever send it, so it fails now (a retry loop would cost the consumer for ever).
      console.error("cannot build message", email.id, err.message);
      message = err instanceof NoSigningKeyError ? err.message
        : err instanceof UnbuildableMessageError ? `tern could not build this message: ${err.message}.`
        : "The stored content of this email is missing.";
      retrySchedule = [];
    } else {
      // Anything else may pass (a D1 or R2 hiccup) or may not (a bug, a broken setting): it
      // counts as an attempt and follows the retry schedule, so it fails in the end instead of
      // coming back every 30 s for ever.
      console.error("delivery failed unexpectedly; retried on the schedule", email.id, describeFailure(err));
      message = `tern hit an unexpected error while delivering: ${err instanceof Error ? err.message : String(err)}`;
    }
    const unanswered = plan.toAttempt.filter((r) => !log.results.some((x) => canonicalRecipient(x.recipient) === canonicalRecipient(r)));
    for (const recipient of unanswered) {
      const result: AttemptResult = { recipient, status: "deferred", final: false, message };
      unsent.add(result);
      log.results.push(result);
    }
  }
  const settlement = withSuppressed(settleAttempt(log.results, { attempt, retrySchedule, alreadyDelayed: attempt > 1 }), plan.suppressed);
  const t = now();
  const { statements, settled, eventIds, outbox, rollup } = settlementStatements(env.DB, email, attempt, settlement, t, log.currentLeases);
  statements.push(...suppressionStatements(env.DB, email, settlement.events, eventIds, t));
  const retryAfter = settlement.state === "queued" ? settlement.retryInSeconds : null;
  // Only a message that went out needs its outcome written before anything else happens.
  const leftTern = log.results.some((r) => !unsent.has(r) && !isSimulated(r.recipient, config.simulatorDomains));
  if (!leftTern) {
    simulatedWrites.push({ emailId: email.id, statements, settle: statements[settled]!, rollup, leases: log.currentLeases });
    return { retryIn: retryAfter, next: null };
  }
  statements.push(...rollupStatement(env.DB, rollup));
  // Mail that left tern is recorded before anything else happens: a crash after this point
  // must not send it again.
  const mark = handoff.nextMark && { ...handoff.nextMark, renewTo: t + config.leaseMs };
  if (mark) statements.push(markInFlightStatement(env.DB, mark));
  const written = await recordAfterSend(env.DB, email.id, statements);
  // A batch that may have committed on an earlier try says nothing of its rows: every event is
  // hinted (a hint for a row not written finds nothing to fan out).
  hints.add(written === null ? outbox : eventsToFanOut(statements, written));
  // A settlement that lost its lease wrote nothing of its own (the mark is the next email's).
  const lost = written !== null && (written[settled]!.meta.changes ?? 0) === 0;
  if (lost) console.error("lease lost before the settlement; left to its next owner", email.id);
  const retryIn = lost ? null : retryAfter;
  if (!mark) return { retryIn, next: null };
  // A batch retried after it may have committed does not say whether the mark was written.
  if (written === null) return { retryIn, next: { marked: false, leases: [mark.lease, mark.renewTo] } };
  const marked = (written.at(-1)!.meta.changes ?? 0) > 0;
  return { retryIn, next: marked ? { marked, leases: [mark.renewTo] } : { marked, leases: [mark.lease] } };
}

/** Sends to each recipient in turn, adding each result to the attempt's log as it comes. */
async function attemptDelivery(
  env: Env,
  config: TernConfig,
  email: EmailRow,
  pending: string[],
  attempt: number,
  pool: SessionPool,
  log: AttemptLog,
  firstMarked: boolean,
  held: Held,
): Promise<void> {
  const real = pending.filter((r) => !isSimulated(r, config.simulatorDomains));
  for (const r of pending) if (isSimulated(r, config.simulatorDomains)) log.results.push({ ...simulate(r, attempt), final: true });
  if (real.length === 0) return;
  const identity = await sendingIdentity(env.DB, config, email);
  // A broadcast's emails share its one stored body, personalised here for each recipient.
  const content = email.broadcastId ? await broadcastContent(env.DB, email) : await loadContent(env.BLOBS, email);
  const parts: MessageParts = {
    html: await trackedHtml(env, config, email, identity.tracking, content.html),
    text: content.text,
    headers: JSON.parse(email.headersJson) as Record<string, string>,
  };
  // Every recipient reads the same signed message, unless each gets its own unsubscribe link.
  // A message is never built whole: it is composed (its attachments kept as they were read,
  // about 0.75 of its size) and made in 64 KB pieces as DKIM hashes it and as the transport
  // writes it, so one message near the 40 MB bound costs its attachments and a few pieces.
  const personal = asksForUnsubscribe(parts.headers);
  const key = personal && config.publicUrl ? await linkTokenKey(config) : null;
  // A link named only in the headers leaves every recipient's body the same bytes (the
  // boundaries are seeded by the email): its hash is computed once for all of them.
  const sameBody = !(parts.html ?? "").includes(UNSUBSCRIBE_PLACEHOLDER) && !(parts.text ?? "").includes(UNSUBSCRIBE_PLACEHOLDER);
  let shared: MessageChunks | undefined;
  let sharedHash: string | undefined;
  const messageFor = async (recipient: string): Promise<MessageChunks> => {
    if (!personal) return (shared ??= await signComposed(composeEmailMessage(email, content, parts), identity.keys));
    const url = key && (await unsubscribeUrl(key, config.publicUrl, { accountId: email.accountId, emailId: email.id, recipient }));
    const composed = composeEmailMessage(email, content, withUnsubscribeUrl(parts, url || null));
    if (sameBody && identity.keys.length > 0) sharedHash ??= await bodyHash(composed.body.chunks());
    return signComposed(composed, identity.keys, { bodyHash: sameBody ? sharedHash : undefined });
  };

  // One message per recipient, each with its own return path. The first is marked in flight
  // before it leaves (by the previous email's settlement, or here); each reply is recorded with
  // the next recipient marked, and the last one with the settlement (deliverEmail).
  if (!firstMarked) await log.record(real[0]!);
  // The connection is borrowed for this email's messages and its settlement only (deliverEmail
  // gives it back): a worker never holds two, so batches sharing the region's sender wait their
  // turn for one instead of deadlocking.
  const session = (held.session = await pool.acquire(email.region));
  for (const [i, recipient] of real.entries()) {
    const domain = domainOf(recipient);
    const throttled = pool.throttled(email.region, domain);
    if (throttled) {
      // The relay asked to slow down for this domain: its mail waits for a retry unsent,
      // while mail to other domains goes on.
      log.results.push({ recipient, status: "deferred", message: throttled, final: false });
      const next = real[i + 1];
      if (next !== undefined) await recordOrLeave(log, next);
      continue;
    }
    const raw = await messageFor(recipient);
    // The envelope carries internationalized domains as A-labels (punycode).
    const envelopeFrom = await identity.envelopeFrom(recipient);
    const delivered = await session.deliver({ envelopeFrom, recipients: [toAsciiEmail(recipient)], raw, requireTls: identity.requireTls }).catch((err: unknown) => {
      // A transport never throws for a delivery problem; if it does anyway, the message may
      // have left: the email waits for its lease, and its recipient is sent again visibly.
      throw new UnrecordedDeliveryError("the transport failed mid-message", { cause: err });
    });
    for (const r of delivered) {
      if (rateLimited(r)) pool.throttle(email.region, domain, r.message);
      log.results.push({ ...r, final: r.status === "accepted" && (r.final ?? config.relayFinal) });
    }
    const next = real[i + 1];
    if (next !== undefined) await recordOrLeave(log, next);
  }
}

/** A progress write after mail left tern: if D1 fails for good, the email waits for its lease
 * (the recipient still marked in flight is then sent again, visibly) instead of a quick retry. */
async function recordOrLeave(log: AttemptLog, next: string): Promise<void> {
  try {
    await log.record(next);
  } catch (err) {
    if (err instanceof LeaseLostError) throw err;
    throw new UnrecordedDeliveryError("recording the attempt's progress failed", { cause: err });
  }
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
function suppressionStatements(d1: D1Database, email: EmailRow, events: RecordedEvent[], eventIds: string[], now: number): D1PreparedStatement[] {
  if (!events.some((e) => e.type === "bounced" || e.type === "complained")) return [];
  const db = drizzle(d1);
  const out: BatchItem<"sqlite">[] = [];
  // Each written only with its event, so only if the settlement applied (settlementStatements).
  for (const [i, e] of events.entries()) {
    const recorded = eventIds[i]!;
    const recipients = (e.data.recipients as string[] | undefined) ?? [];
    if (e.type === "bounced") {
      const bounce = e.data.bounce as Bounce;
      if (bounce.type !== "Permanent") continue;
      for (const r of recipients) out.push(suppressStatement(db, { accountId: email.accountId, email: r, reason: "bounce", emailId: email.id, detail: bounce.message, now }, recorded));
    } else if (e.type === "complained") {
      for (const r of recipients) out.push(suppressStatement(db, { accountId: email.accountId, email: r, reason: "complaint", emailId: email.id, detail: "abuse", now }, recorded));
    }
  }
  // Rare (a hard bounce or a complaint): built by drizzle when it happens.
  return out.map((q) => statementOf(d1, q));
}

function mailboxes(json: string): Address[] {
  return (JSON.parse(json) as string[]).map((a) => parseMailbox(a)!);
}

/** The message as recipients see it, joined (its attachments read from R2). Bcc recipients are
 * only in the envelope, never a header. */
export async function renderMessage(env: Env, email: EmailRow): Promise<Uint8Array> {
  const content = await loadContent(env.BLOBS, email);
  const parts = { html: content.html, text: content.text, headers: JSON.parse(email.headersJson) as Record<string, string> };
  return joinedBytes(await signComposed(composeEmailMessage(email, content, parts), []));
}

/** The same message composed, not built: made in pieces as it is read (mime/build.ts). */
function composeEmailMessage(email: EmailRow, content: EmailContent, parts: MessageParts): ComposedMessage {
  return composeMessage(messageInput(email, content, parts));
}

function messageInput(email: EmailRow, content: EmailContent, parts: MessageParts): MimeMessageInput {
  return {
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
    // The same boundaries on every render of this email: the bodies of its recipients (and
    // of a retry) are then the same bytes whenever their html and text are.
    boundarySeed: email.id,
  };
}

/** A settlement, with the events of recipients that were not attempted. (Exported with
 * settlementStatements for bench/metrics: what recording an outcome costs.) */
type RecordedEvent = EventRecord | { type: "suppressed"; data: Record<string, unknown> };
export type RecordedSettlement = Omit<Settlement, "events"> & { events: RecordedEvent[] };

// Its statements are compiled once (worker/db/compiled.ts), not built by drizzle per email: a
// CPU profile of 10,000 deliveries put drizzle's building at about 170 us an email here. The
// rollup is answered, not written: the caller writes it alone or merged with others'.
//
// Only the UPDATE can tell whether the consumer still holds the email (the cron may have handed
// it back, and another consumer settled it): everything else follows it, or a lost lease would
// record the outcome twice, webhooks and counts included. The events come first, under the
// UPDATE's own guard; the outbox rows, the rollup (`ifRecorded`) and the suppressions then
// follow the events. `settled` is the UPDATE's index in `statements`.
export function settlementStatements(
  d1: D1Database, email: EmailRow, attempt: number, s: RecordedSettlement, now: number, leases: number[],
): { statements: D1PreparedStatement[]; settled: number; eventIds: string[]; outbox: OutboxEvent[]; rollup: RollupInput } {
  const update = prepared(d1, settleEmail({
    id: email.id,
    state: s.state,
    attempts: attempt,
    pendingJson: JSON.stringify(s.pending),
    nextAttemptAt: s.state === "queued" ? now + (s.retryInSeconds ?? 0) * 1000 : null,
    lastEvent: s.lastEvent || null,
    leases,
  }));
  const eventIds = s.events.map((_, i) => uuidv7(now + i));
  const inserts = s.events.map((e, i) => prepared(d1, insertSettlementEvent({
    id: eventIds[i]!,
    emailId: email.id,
    type: e.type,
    dataJson: JSON.stringify(e.data),
    createdAt: now,
    leases,
  })));
  const outbox = webhookEventsOf(email, s.events, now);
  const rollup: RollupInput = { accountId: email.accountId, domainId: email.domainId, broadcastId: email.broadcastId, at: now, events: s.events };
  if (eventIds.length > 0) rollup.ifRecorded = eventIds[0];
  return {
    statements: [...inserts, update, ...outbox.map((e, i) => outboxStatementIfRecorded(d1, e, eventIds[i]!))],
    settled: inserts.length,
    eventIds,
    outbox,
    rollup,
  };
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
