// Quota (contract 4.4): every envelope recipient counts once, per UTC month and, on plans that
// have one, per UTC day. The increment rides in the same D1 batch that records the emails, so
// a refused send consumes nothing and an accepted one is counted exactly once; concurrent
// sends at the boundary are serialised by D1 and the CHECK on `usage` never lets one overshoot.
import { and, eq, inArray } from "drizzle-orm";
import type { DrizzleD1Database } from "drizzle-orm/d1";
import { consumeUsage } from "../db/compiled.ts";
import { usage } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { planLimits } from "../plans.ts";

export interface QuotaPeriods {
  month: string;
  day: string;
}

export function periodsAt(now: number): QuotaPeriods {
  const iso = new Date(now).toISOString();
  return { month: iso.slice(0, 7), day: iso.slice(0, 10) };
}

export interface QuotaUse {
  monthlyUsed: number;
  dailyUsed?: number;
}

/** The statements that consume `count` emails of the account's quota, each returning the new
 * total. Put them first in the batch that records the emails. */
export function consumeStatements(db: D1Database, accountId: string, plan: string, count: number, now: number) {
  const limits = planLimits(plan);
  const p = periodsAt(now);
  const consume = (period: string, cap: number) => consumeUsage.bind(db, { accountId, period, used: count, cap });
  return { monthly: consume(p.month, limits.monthly), daily: limits.daily !== undefined ? consume(p.day, limits.daily) : undefined };
}

/** D1 reports SQLite's message on the error or on its cause. */
export function d1ErrorText(err: unknown): string {
  return String((err as Error)?.message ?? err) + String((err as { cause?: unknown })?.cause ?? "");
}

export function isQuotaViolation(err: unknown): boolean {
  return /CHECK constraint failed/i.test(d1ErrorText(err));
}

/** Which limit a refused send would have passed, as the contract's 429. */
export async function quotaError(db: DrizzleD1Database, accountId: string, plan: string, count: number, now: number): Promise<ApiError> {
  const limits = planLimits(plan);
  const p = periodsAt(now);
  const rows = await db.select().from(usage).where(and(eq(usage.accountId, accountId), inArray(usage.period, [p.month, p.day])));
  const used = (period: string) => rows.find((r) => r.period === period)?.used ?? 0;
  const headers: Record<string, string> = { "x-tern-monthly-quota": String(used(p.month)) };
  if (limits.daily !== undefined) headers["x-tern-daily-quota"] = String(used(p.day));
  if (used(p.month) + count > limits.monthly) {
    return new ApiError("monthly_quota_exceeded", `This send of ${count} email${count === 1 ? "" : "s"} would pass your plan's monthly quota of ${limits.monthly} (${used(p.month)} used this month).`, 429, { ...headers, "retry-after": String(secondsUntilNextMonth(now)) });
  }
  return new ApiError("daily_quota_exceeded", `This send of ${count} email${count === 1 ? "" : "s"} would pass your plan's daily quota of ${limits.daily} (${used(p.day)} used today).`, 429, { ...headers, "retry-after": String(secondsUntilNextDay(now)) });
}

export function quotaHeaders(use: QuotaUse): Record<string, string> {
  const h: Record<string, string> = { "x-tern-monthly-quota": String(use.monthlyUsed) };
  if (use.dailyUsed !== undefined) h["x-tern-daily-quota"] = String(use.dailyUsed);
  return h;
}

function secondsUntilNextDay(now: number): number {
  const d = new Date(now);
  return Math.ceil((Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1) - now) / 1000);
}

function secondsUntilNextMonth(now: number): number {
  const d = new Date(now);
  return Math.ceil((Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) - now) / 1000);
}
