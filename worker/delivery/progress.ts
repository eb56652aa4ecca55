// An attempt's progress, written on the email's row as it goes. SMTP has no two-phase commit:
// between the relay's 250 and tern's write of it, a crash leaves the message delivered but not
// recorded, and the email is sent again once its lease ends. This keeps that window to one
// message: before a message goes out its recipient is marked in flight, and each reply is
// recorded (with the next recipient marked) as soon as it arrives. When a lease ends with a
// recipient still in flight, the cron records `outcome_unknown` for it and hands the email back;
// the next attempt sends to that recipient again and skips the ones already answered.
import { and, eq, lte, sql } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import type { DrizzleD1Database } from "drizzle-orm/d1";
import { markInFlight, prepared, recordProgress } from "../db/compiled.ts";
import { emailEvents, emails, type EmailRow } from "../db/schema.ts";
import { uuidv7 } from "../ids.ts";
import type { AttemptResult } from "./outcome.ts";

export interface AttemptProgress {
  /** The recipient whose message may be at the relay without its reply recorded. */
  inFlight: string | null;
  /** What the relay answered for the messages of this attempt so far. */
  results: AttemptResult[];
}

export function progressOf(email: Pick<EmailRow, "attemptJson">): AttemptProgress {
  return email.attemptJson ? (JSON.parse(email.attemptJson) as AttemptProgress) : { inFlight: null, results: [] };
}

/** The email was handed back (its lease ended) while this consumer still worked on it. */
export class LeaseLostError extends Error {}

/** The progress writes of one consumer's attempt at one email. Each write renews the lease and
 * is guarded by it: a consumer that lost its email stops instead of sending beside the next. */
export class AttemptLog {
  private leases: number[];
  constructor(
    private readonly d1: D1Database,
    private readonly emailId: string,
    /** The lease this consumer holds: one value, or two when a write that set the second may or
     * may not have committed. */
    leases: number[],
    private readonly leaseMs: number,
    private readonly now: () => number,
    readonly results: AttemptResult[],
  ) {
    this.leases = leases;
  }

  /** The lease this consumer holds now: the guard of the final write too. */
  get currentLeases(): number[] {
    return this.leases;
  }

  /** Records the results so far and marks `next` in flight. Retried on a D1 failure (the write
   * is the same each time; a retry also matches a lease an earlier try set but did not report). */
  async record(next: string | null): Promise<void> {
    const renewed = this.now() + this.leaseMs;
    const progress: AttemptProgress = { inFlight: next, results: this.results };
    // Compiled once (worker/db/compiled.ts): written once per message that leaves tern.
    const write = prepared(this.d1, recordProgress({ id: this.emailId, attemptJson: JSON.stringify(progress), leaseUntil: renewed, leases: [...this.leases, renewed] }));
    let last: unknown;
    for (let attempt = 0; attempt < 4; attempt++) {
      try {
        const result = await write.run();
        if ((result.meta.changes ?? 0) === 0) throw new LeaseLostError(`email ${this.emailId} is no longer this consumer's`);
        this.leases = [renewed];
        return;
      } catch (err) {
        if (err instanceof LeaseLostError) throw err;
        last = err;
        await new Promise((r) => setTimeout(r, 100 * 2 ** attempt));
      }
    }
    throw new Error("recording the attempt's progress failed", { cause: last });
  }
}

/** An email's first message, marked in flight from outside its own attempt (the consumer writes
 * it with the previous email's settlement), renewing the lease as AttemptLog.record does. */
export interface InFlightMark {
  emailId: string;
  /** The lease as claimed: the guard. */
  lease: number;
  renewTo: number;
  inFlight: string;
  results: AttemptResult[];
}

export function markInFlightStatement(d1: D1Database, m: InFlightMark): D1PreparedStatement {
  const progress: AttemptProgress = { inFlight: m.inFlight, results: m.results };
  return markInFlight.bind(d1, { id: m.emailId, attemptJson: JSON.stringify(progress), leaseUntil: m.renewTo, lease: m.lease });
}

export const OUTCOME_UNKNOWN = "outcome_unknown";

/** What the cron does with an email whose lease ended: back to `queued`, keeping the answered
 * results, and (when a message was in flight) an `outcome_unknown` event naming its recipient,
 * in one transaction guarded by the lease it saw, so a consumer renewing at that moment wins. */
export function expiredLeaseStatements(db: DrizzleD1Database, email: Pick<EmailRow, "id" | "accountId" | "leaseUntil" | "attemptJson">, now: number): BatchItem<"sqlite">[] {
  const progress = progressOf(email);
  const ours = and(eq(emails.id, email.id), eq(emails.state, "sending"), lte(emails.leaseUntil, now), eq(emails.leaseUntil, email.leaseUntil!));
  const statements: BatchItem<"sqlite">[] = [];
  if (progress.inFlight !== null) {
    const data = {
      recipients: [progress.inFlight],
      message: "tern stopped after handing this message to the relay and before recording the relay's reply, so it cannot tell whether it was delivered. It is sent again (same Message-ID): the recipient may receive it twice.",
    };
    // The event is written only if the hand-back below happens (same condition, same transaction).
    statements.push(db.insert(emailEvents).select(
      db.select({
        id: sql`${uuidv7(now)}`.as("id"),
        emailId: sql`${emails.id}`.as("email_id"),
        accountId: sql`${emails.accountId}`.as("account_id"),
        type: sql`${OUTCOME_UNKNOWN}`.as("type"),
        dataJson: sql`${JSON.stringify(data)}`.as("data_json"),
        createdAt: sql`${now}`.as("created_at"),
        dedupeKey: sql`null`.as("dedupe_key"),
      }).from(emails).where(ours),
    ));
  }
  const kept = progress.results.length > 0 ? JSON.stringify({ inFlight: null, results: progress.results } satisfies AttemptProgress) : null;
  statements.push(db.update(emails).set({ state: "queued", leaseUntil: null, nextAttemptAt: now, attemptJson: kept }).where(ours));
  return statements;
}
