// The send queue's consumer: claim an email, build its message, hand it to the transports
// and record what happened. A claim is a conditional UPDATE from `queued` to `sending`, so a
// redelivered queue message finds nothing to claim and never sends an email twice.
import { and, eq, lte } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { readConfig, type TernConfig } from "../config.ts";
import { emailEvents, emails, type EmailRow } from "../db/schema.ts";
import { uuidv7 } from "../ids.ts";
import { parseMailbox, toAsciiEmail, type Address } from "../mime/address.ts";
import { buildMessage } from "../mime/build.ts";
import type { QueueMessage } from "../sending/accept.ts";
import { ContentMissingError, loadContent } from "../sending/content.ts";
import { transportFor } from "../transports/select.ts";
import { isSimulated, simulate } from "../transports/simulator.ts";
import type { Transport, TransportSession } from "../transports/transport.ts";
import { settleAttempt, type AttemptResult, type Settlement } from "./outcome.ts";

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

export async function consumeSendBatch(batch: MessageBatch<QueueMessage>, env: Env, deps: ConsumerDeps = {}): Promise<void> {
  const config = readConfig(env);
  const now = deps.now ?? Date.now;
  const sessions = new Sessions(deps.transportFor ?? ((region) => transportFor(env, config, region)));
  try {
    // Serially: messages of a batch share one SMTP connection per region.
    for (const msg of batch.messages) {
      try {
        const retryIn = await deliverEmail(env, config, msg.body.emailId, sessions, now);
        if (retryIn === null) msg.ack();
        else msg.retry({ delaySeconds: Math.min(Math.max(retryIn, 0), MAX_QUEUE_DELAY_S) });
      } catch (err) {
        console.error("delivery failed unexpectedly; will retry", msg.body.emailId, err);
        await releaseClaim(env.DB, msg.body.emailId).catch(() => {});
        msg.retry({ delaySeconds: 30 });
      }
    }
  } finally {
    await sessions.closeAll();
  }
}

async function releaseClaim(db: D1Database, emailId: string): Promise<void> {
  await drizzle(db).update(emails).set({ state: "queued", leaseUntil: null })
    .where(and(eq(emails.id, emailId), eq(emails.state, "sending")));
}

/** One attempt for one email. Returns seconds until a retry, or null when the message is done. */
async function deliverEmail(env: Env, config: TernConfig, emailId: string, sessions: Sessions, now: () => number): Promise<number | null> {
  const db = drizzle(env.DB);
  const t = now();
  const claimed = await db.update(emails)
    .set({ state: "sending", leaseUntil: t + LEASE_MS })
    .where(and(eq(emails.id, emailId), eq(emails.state, "queued"), lte(emails.nextAttemptAt, t + EARLY_SLACK_MS)))
    .returning();
  const email = claimed[0];
  if (!email) return null; // already sent, canceled, scheduled, or not due: nothing to do here
  const attempt = email.attempts + 1;
  const pending = JSON.parse(email.pendingJson) as string[];

  let results: AttemptResult[];
  let retrySchedule = config.retrySchedule;
  try {
    results = await attemptDelivery(env, config, email, pending, attempt, sessions);
  } catch (err) {
    if (!(err instanceof ContentMissingError)) throw err;
    // Its stored content is gone: no retry can ever build this message.
    console.error("cannot build message", emailId, err.message);
    results = pending.map((recipient) => ({ recipient, status: "deferred" as const, final: false, message: "The stored content of this email is missing." }));
    retrySchedule = [];
  }
  const settlement = settleAttempt(results, { attempt, retrySchedule, alreadyDelayed: attempt > 1 });
  await recordSettlement(env.DB, email, attempt, settlement, now());
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
    const raw = await renderMessage(env, email);
    const from = parseMailbox(email.fromAddress)!;
    const session = await sessions.get(email.region);
    // The envelope carries internationalized domains as A-labels (punycode).
    const delivered = await session.deliver({ envelopeFrom: toAsciiEmail(from.email), recipients: real.map(toAsciiEmail), raw });
    for (const r of delivered) results.push({ ...r, final: r.status === "accepted" && config.relayFinal });
  }
  return results;
}

function mailboxes(json: string): Address[] {
  return (JSON.parse(json) as string[]).map((a) => parseMailbox(a)!);
}

/** The message as recipients see it. Bcc recipients are only in the envelope, never a header. */
export async function renderMessage(env: Env, email: EmailRow): Promise<Uint8Array> {
  const content = await loadContent(env.BLOBS, email);
  return buildMessage({
    from: parseMailbox(email.fromAddress)!,
    to: mailboxes(email.toJson),
    cc: mailboxes(email.ccJson),
    replyTo: mailboxes(email.replyToJson),
    subject: email.subject,
    html: content.html ?? undefined,
    text: content.text ?? undefined,
    headers: JSON.parse(email.headersJson) as Record<string, string>,
    attachments: content.attachments,
    messageId: email.messageId,
    date: new Date(email.createdAt),
  });
}

async function recordSettlement(d1: D1Database, email: EmailRow, attempt: number, s: Settlement, now: number): Promise<void> {
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
  await db.batch([update, ...inserts]);
}
