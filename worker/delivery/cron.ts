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
import { enqueueEmails } from "./enqueue.ts";
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
    .returning({ id: emails.id, region: emails.region });
  // Leases end only when a consumer died or lost its way: rare, so one batch per email is fine.
  const expired: { id: string; region: string }[] = [];
  const ended = await db.select({ id: emails.id, region: emails.region, accountId: emails.accountId, leaseUntil: emails.leaseUntil, attemptJson: emails.attemptJson })
    .from(emails).where(and(eq(emails.state, "sending"), lte(emails.leaseUntil, now))).limit(MAX_PER_RUN);
  for (const email of ended) {
    const results = await db.batch(expiredLeaseStatements(db, email, now) as [BatchItem<"sqlite">]);
    if (((results.at(-1) as D1Result).meta.changes ?? 0) > 0) expired.push({ id: email.id, region: email.region });
  }
  // Bumping next_attempt_at keeps a slow queue from getting the same email every minute.
  const stuck = await db.update(emails)
    .set({ nextAttemptAt: now })
    .where(and(eq(emails.state, "queued"), lte(emails.nextAttemptAt, now - stuckAfterMs)))
    .returning({ id: emails.id, region: emails.region });
  // Each to its region's queue.
  await enqueueEmails(env, [...due, ...expired, ...stuck].slice(0, MAX_PER_RUN));
  return { scheduled: due.length, leasesExpired: expired.length, stuck: stuck.length };
}
