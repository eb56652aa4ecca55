// The cron's share of delivery: send scheduled emails when due, hand back emails whose
// consumer died mid-send (lease expired; a message in flight is recorded as outcome_unknown and
// sent again, see progress.ts), and re-enqueue emails left in `queued` (a crash
// between recording and enqueueing, or a lost queue message). Queue messages are only hints:
// the consumer's claim decides, so enqueueing an email twice never sends it twice.
import { and, eq, lte } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { drizzle } from "drizzle-orm/d1";
import { readConfig } from "../config.ts";
import { emails } from "../db/schema.ts";
import type { QueueMessage } from "../sending/accept.ts";
import { expiredLeaseStatements } from "./progress.ts";

const MAX_PER_RUN = 1_000;

export interface SweepResult {
  scheduled: number;
  leasesExpired: number;
  stuck: number;
}

export async function sweepDelivery(env: Env, now: number = Date.now()): Promise<SweepResult> {
  const db = drizzle(env.DB);
  const { stuckAfterMs } = readConfig(env);
  const due = await db.update(emails)
    .set({ state: "queued", nextAttemptAt: now })
    .where(and(eq(emails.state, "scheduled"), lte(emails.nextAttemptAt, now)))
    .returning({ id: emails.id });
  // Leases end only when a consumer died or lost its way: rare, so one batch per email is fine.
  const expired: { id: string }[] = [];
  const ended = await db.select({ id: emails.id, accountId: emails.accountId, leaseUntil: emails.leaseUntil, attemptJson: emails.attemptJson })
    .from(emails).where(and(eq(emails.state, "sending"), lte(emails.leaseUntil, now))).limit(MAX_PER_RUN);
  for (const email of ended) {
    const results = await db.batch(expiredLeaseStatements(db, email, now) as [BatchItem<"sqlite">]);
    if (((results.at(-1) as D1Result).meta.changes ?? 0) > 0) expired.push({ id: email.id });
  }
  // Bumping next_attempt_at keeps a slow queue from getting the same email every minute.
  const stuck = await db.update(emails)
    .set({ nextAttemptAt: now })
    .where(and(eq(emails.state, "queued"), lte(emails.nextAttemptAt, now - stuckAfterMs)))
    .returning({ id: emails.id });
  const ids = [...due, ...expired, ...stuck].map((r) => r.id).slice(0, MAX_PER_RUN);
  for (let i = 0; i < ids.length; i += 100) {
    await env.SEND_QUEUE.sendBatch(ids.slice(i, i + 100).map((emailId) => ({ body: { emailId } satisfies QueueMessage })));
  }
  return { scheduled: due.length, leasesExpired: expired.length, stuck: stuck.length };
}
