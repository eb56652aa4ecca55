// The broadcast fan-out: pages through the segment's contacts in id order from the broadcast's
// checkpoint, skipping contacts who unsubscribed, opted out of its topic or are suppressed.
// Each page is ONE D1 batch that consumes the quota, records a broadcast_recipients row and an
// email (and its queued event) per recipient, and advances the checkpoint. So a page is
// recorded whole or not at all:
// - a replayed page (a crash after the commit, two runs at once) hits the (broadcast, contact)
//   primary key and fails whole: nobody gets a second email;
// - a canceled broadcast fails its next page (migration 0008's trigger: recipients are only
//   recorded while it is `sending`);
// - a quota that runs out fails the page; the broadcast stops as `failed`, saying why.
// The emails then take the normal path: send queue, consumer (which personalises each from the
// broadcast's one stored body, content.ts), DKIM, tracking, events.
import { and, eq, inArray, lt, or, isNull, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Principal } from "../auth.ts";
import { broadcastProgress, broadcastProgressRows, fanoutPage, fanoutPageRows, insertBroadcastEmails, insertBroadcastRecipients, insertQueuedEvents, statementOf } from "../db/compiled.ts";
import { accounts, broadcasts, topics, type BroadcastRow } from "../db/schema.ts";
import { ApiError, describeFailure } from "../errors.ts";
import { uuidv7 } from "../ids.ts";
import { parseMailbox } from "../mime/address.ts";
import { enqueueEmails } from "../delivery/enqueue.ts";
import { consumeStatements, d1ErrorText, isQuotaViolation, quotaError } from "../sending/quota.ts";
import { authorizeSender, type SendingDomain } from "../sending/sender.ts";
import { healthPauseOn } from "../config.ts";
import { assertSendingAllowed } from "../metrics/health.ts";
import { propertiesByKey, fallbackOf } from "../contacts/properties.ts";
import { receivesTopic, type Subscription } from "../contacts/contacts.ts";
import { contactLookup } from "../templates/render.ts";
import { personalSubject } from "./content.ts";
import { hint, type BroadcastMessage } from "./broadcasts.ts";
import { acceptedRollups } from "../metrics/rollup.ts";
import { runImport, stalledImports, type ImportMessage } from "../contacts/imports.ts";

/** Contacts read per page: one D1 batch of an email insert each, plus a few multi-row inserts.
 * D1 runs one write at a time, so a page's batch is as long as any send may wait behind it:
 * at 50 a page, single sends made during a broadcast had a p99 2.4x their idle one, at 25
 * 1.5x, for about a tenth more CPU per email (docs/benchmarks.md, "Broadcasts"). */
export const PAGE_SIZE = 25;
/** How long a run owns a broadcast without making progress before the cron starts another. */
export const FANOUT_LEASE_MS = 15_000;
/** Pages one queue message runs before handing the rest to a fresh message (and invocation):
 * each invocation stays well inside a Worker's limits on time and D1 calls. */
const PAGES_PER_RUN = 10;

/** Every broadcast email asks for one-click unsubscribe; the consumer fills in each link. */
export const BROADCAST_HEADERS = JSON.stringify({ "List-Unsubscribe": "<{{{RESEND_UNSUBSCRIBE_URL}}}>" });

export interface RunResult {
  /** Recipients recorded by this run. */
  recorded: number;
  /** The broadcast's status when the run stopped. */
  status: string;
  /** Whether the fan-out has more to do. */
  more: boolean;
}

export interface FanoutOptions {
  now?: () => number;
  maxPages?: number;
  pageSize?: number;
}

type FanoutEnv = Pick<Env, "DB" | "BROADCAST_QUEUE" | "HEALTH_PAUSE"> & Partial<Pick<Env, "BROADCAST_RATE">>;

async function load(db: D1Database, id: string): Promise<BroadcastRow | undefined> {
  return drizzle(db).select().from(broadcasts).where(eq(broadcasts.id, id)).get();
}

/** The pace when BROADCAST_RATE is unset, as in a wrangler environment that does not restate it. */
export const DEFAULT_BROADCAST_RATE = 200;

/** BROADCAST_RATE: the most emails a second one run of a fan-out records; 0 when unpaced ("0").
 * Unset or unreadable keeps the default: pacing is a protection, and a typo must neither lift
 * it nor stall broadcasts. */
export function broadcastRateOf(env: Partial<Pick<Env, "BROADCAST_RATE">>): number {
  const value = (env.BROADCAST_RATE ?? "").trim();
  if (value === "0") return 0;
  const n = Number(value);
  return value !== "" && Number.isFinite(n) && n > 0 ? n : DEFAULT_BROADCAST_RATE;
}

async function stop(db: D1Database, id: string, status: "sent" | "failed", reason: string | null, now: number): Promise<void> {
  await drizzle(db).update(broadcasts).set({ status, statusReason: reason, sentAt: status === "sent" ? now : null, leaseUntil: null, updatedAt: now })
    .where(and(eq(broadcasts.id, id), eq(broadcasts.status, "sending")));
}

/** Runs the fan-out of one broadcast for up to `maxPages` pages. */
export async function runFanout(env: FanoutEnv, broadcastId: string, opts: FanoutOptions = {}): Promise<RunResult> {
  const clock = opts.now ?? Date.now;
  const pageSize = opts.pageSize ?? PAGE_SIZE;
  const db = drizzle(env.DB);
  let b = await load(env.DB, broadcastId);
  if (!b || (b.status !== "queued" && b.status !== "sending")) return { recorded: 0, status: b?.status ?? "missing", more: false };

  const account = await db.select({ plan: accounts.plan, rateLimit: accounts.rateLimit }).from(accounts).where(eq(accounts.id, b.accountId)).get();
  const principal: Principal = { accountId: b.accountId, keyId: "broadcast", permission: "full_access", domainId: null, plan: account?.plan ?? "free", rateLimit: account?.rateLimit ?? 10 };
  const fail = async (reason: string): Promise<RunResult> => {
    await db.update(broadcasts).set({ status: "sending" }).where(and(eq(broadcasts.id, b!.id), eq(broadcasts.status, "queued")));
    await stop(env.DB, b!.id, "failed", `Stopped before its end: ${reason}`, clock());
    return { recorded: 0, status: "failed", more: false };
  };
  let domain: SendingDomain;
  try {
    domain = await authorizeSender(env.DB, principal, parseMailbox(b.fromAddress ?? "")?.email ?? "");
    // The bounce/complaint pause covers broadcasts as it covers sends; each run checks it, so
    // an account that goes over the limit mid-broadcast stops at its next run.
    if (healthPauseOn(env)) await assertSendingAllowed(env.DB, b.accountId, clock());
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    return fail(err.message);
  }
  // Its topic deleted (deleteTopic refuses that, but a race or an old row may slip by): without
  // the topic nobody's opt-out could be honoured, so nobody more gets it.
  const topic = b.topicId ? await db.select().from(topics).where(and(eq(topics.id, b.topicId), eq(topics.accountId, b.accountId))).get() : undefined;
  if (b.topicId && !topic) return fail(`its topic ${b.topicId} was deleted, so its opt-outs cannot be honoured.`);
  if (b.status === "queued") {
    await db.update(broadcasts).set({ status: "sending", domainId: domain.id, region: domain.region, leaseUntil: clock() + FANOUT_LEASE_MS, updatedAt: clock() })
      .where(and(eq(broadcasts.id, b.id), eq(broadcasts.status, "queued")));
  }

  const fallbacks = new Map([...(await propertiesByKey(env.DB, b.accountId))].map(([k, p]) => [k, fallbackOf(p)]));
  const rate = broadcastRateOf(env);
  const started = Date.now();
  let recorded = 0;
  for (let page = 0; page < (opts.maxPages ?? PAGES_PER_RUN); page++) {
    // Paced: the next page waits until the run is back under BROADCAST_RATE. A broadcast has
    // no deadline a few seconds matter to; transactional mail sharing D1 and the senders does.
    const due = started + (recorded / (rate || Infinity)) * 1000 - Date.now();
    if (due > 0) await new Promise((r) => setTimeout(r, due));
    // The progress and the page after its checkpoint, in one D1 call (a batch reads one state).
    const [progressRead, pageRead] = await env.DB.batch([
      broadcastProgress.bind(env.DB, { id: broadcastId }),
      fanoutPage.bind(env.DB, { broadcastId, segmentId: b.segmentId ?? "", topicId: b.topicId ?? "", limit: pageSize }),
    ]);
    const p = broadcastProgressRows(progressRead!.results as Record<string, unknown>[])[0];
    if (!p || p.status !== "sending") return { recorded, status: p?.status ?? "missing", more: false };
    b = { ...b, ...p } as BroadcastRow;
    const now = clock();
    const rows = fanoutPageRows(pageRead!.results as Record<string, unknown>[]);
    if (rows.length === 0) {
      await stop(env.DB, b.id, "sent", null, now);
      return { recorded, status: "sent", more: false };
    }
    const eligible = rows.filter((r) => !r.unsubscribed && r.suppressed === null && (!topic || receivesTopic(r.own as Subscription | null, topic.defaultSubscription)));
    const last = rows[rows.length - 1]!.id;
    const statements: D1PreparedStatement[] = [];
    // The page's rows, each kind in one statement whose shared values are bound once. The
    // recipients come first: their primary key and trigger decide whether the page counts.
    const emailIds: string[] = [];
    const recipientRows: unknown[][] = [], emailRows: unknown[][] = [], eventRows: unknown[][] = [];
    for (const [i, c] of eligible.entries()) {
      const emailId = uuidv7(now + i);
      emailIds.push(emailId);
      const lookup = contactLookup({ email: c.email, firstName: c.firstName, lastName: c.lastName, properties: JSON.parse(c.propertiesJson) }, fallbacks);
      const to = JSON.stringify([c.email]);
      recipientRows.push([c.id, emailId, c.email]);
      emailRows.push([emailId, to, to, personalSubject(b.subject, lookup), `${emailId}@${domain.name}`]);
      eventRows.push([uuidv7(now + i), emailId, JSON.stringify({ recipients: [c.email] })]);
    }
    if (eligible.length > 0) {
      // The recipients before the quota: a replayed page (its run's lease lapsed after it
      // committed) fails on their key, not on a quota its first commit may have used up.
      const quota = consumeStatements(env.DB, b.accountId, principal.plan, eligible.length, now);
      statements.push(
        insertBroadcastRecipients.bind(env.DB, { broadcastId: b.id, accountId: b.accountId, createdAt: now }, recipientRows),
        quota.monthly, ...(quota.daily ? [quota.daily] : []),
        insertBroadcastEmails.bind(env.DB, {
          accountId: b.accountId, fromAddress: b.fromAddress!, ccJson: "[]", bccJson: "[]", replyToJson: b.replyToJson,
          // The body is the broadcast's, stored once; the consumer renders it for each contact.
          html: null, text: null, headersJson: BROADCAST_HEADERS, tagsJson: "[]", attachmentsJson: "[]", contentKey: null,
          domainId: domain.id, region: domain.region, state: "queued", lastEvent: "queued", scheduledAt: null,
          attempts: 0, nextAttemptAt: now, leaseUntil: null, attemptJson: null, createdAt: now, broadcastId: b.id,
        }, emailRows),
        insertQueuedEvents.bind(env.DB, { accountId: b.accountId, type: "queued", createdAt: now, dedupeKey: null }, eventRows),
      );
    }
    // The page's emails count as received in the broadcast's metrics, in the page's batch.
    const counted = { accountId: b.accountId, domainId: domain.id, broadcastId: b.id, createdAt: now };
    statements.push(...acceptedRollups(env.DB, eligible.map((c) => ({ ...counted, pendingJson: JSON.stringify([c.email]) }))));
    statements.push(statementOf(env.DB, db.update(broadcasts)
      .set({ checkpoint: last, recipientCount: sql`${broadcasts.recipientCount} + ${eligible.length}`, leaseUntil: now + FANOUT_LEASE_MS, updatedAt: now })
      .where(and(eq(broadcasts.id, b.id), eq(broadcasts.status, "sending"), b.checkpoint === null ? isNull(broadcasts.checkpoint) : eq(broadcasts.checkpoint, b.checkpoint)))));
    try {
      await env.DB.batch(statements);
    } catch (err) {
      const text = d1ErrorText(err);
      if (/broadcast_not_sending/.test(text)) continue; // canceled meanwhile: the next read stops
      if (/UNIQUE constraint failed/i.test(text)) continue; // another run recorded this page: read the checkpoint again
      if (isQuotaViolation(err)) {
        const q = await quotaError(db, b.accountId, principal.plan, eligible.length, now);
        await stop(env.DB, b.id, "failed", `Stopped after ${b.recipientCount} recipients: ${q.message}`, now);
        return { recorded, status: "failed", more: false };
      }
      throw err;
    }
    recorded += eligible.length;
    if (emailIds.length > 0) {
      // Hints only: the cron re-enqueues emails left in `queued`.
      await enqueueEmails(env, emailIds.map((id) => ({ id, region: domain.region }))).catch((e: unknown) => console.error("enqueue failed; the cron will pick these up", describeFailure(e)));
    }
  }
  return { recorded, status: "sending", more: true };
}

/** The broadcast queue's consumer: each message runs a share of one broadcast's fan-out (or of
 * one contact import) and, when there is more, hands the rest to a new message. */
export async function consumeBroadcastBatch(batch: MessageBatch<BroadcastMessage | ImportMessage>, env: Env): Promise<void> {
  for (const msg of batch.messages) {
    try {
      if ("importId" in msg.body) {
        if (await runImport(env, msg.body.importId)) await env.BROADCAST_QUEUE.send({ importId: msg.body.importId } satisfies ImportMessage);
      } else {
        const result = await runFanout(env, msg.body.broadcastId);
        if (result.more) await hint(env, msg.body.broadcastId);
      }
      msg.ack();
    } catch (err) {
      console.error("broadcast queue work failed; will retry", msg.body, describeFailure(err));
      msg.retry({ delaySeconds: 5 });
    }
  }
}

/** The cron's share: queues scheduled broadcasts that are due, and hands a broadcast whose run
 * died (its lease ran out) to a new one. */
export async function sweepBroadcasts(env: Pick<Env, "DB" | "BROADCAST_QUEUE">, now = Date.now()): Promise<number> {
  const db = drizzle(env.DB);
  const due = await db.update(broadcasts).set({ status: "queued", updatedAt: now })
    .where(and(eq(broadcasts.status, "scheduled"), lt(broadcasts.scheduledAt, now + 1))).returning({ id: broadcasts.id });
  const stalled = await db.update(broadcasts).set({ leaseUntil: now + FANOUT_LEASE_MS })
    .where(and(inArray(broadcasts.status, ["queued", "sending"]), or(isNull(broadcasts.leaseUntil), lt(broadcasts.leaseUntil, now))))
    .returning({ id: broadcasts.id });
  const ids = [...new Set([...due, ...stalled].map((r) => r.id))];
  for (const id of ids) await hint(env, id);
  const imports = await stalledImports(env.DB, now);
  for (const importId of imports) await env.BROADCAST_QUEUE.send({ importId } satisfies ImportMessage).catch((e: unknown) => console.error("import hint not sent", describeFailure(e)));
  return ids.length + imports.length;
}
