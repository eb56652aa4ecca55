// Account health as Amazon SES and Resend watch it: the hard-bounce rate of the recipients an
// account had accepted and the complaint rate of those it sent (taken by receiving servers),
// over a rolling 7 days, against 4% and 0.08%, with a warning at three quarters of each. The
// complaint rate is the Metrics page's and GET /emails/metrics' complaint_rate (service.ts'
// RATES): complaints come only from mail a receiving server took, as SES and Resend count them. Read from the rollups (one indexed sum). Going over a
// limit refuses new sends only when the operator sets HEALTH_PAUSE = "true": pausing someone's
// mail is a policy for the operator to choose, and a self-hosted tern's operator is usually its
// only sender. Mail already accepted is still delivered: accepted mail is never lost.
import { ApiError } from "../errors.ts";
import { BUCKET_MS } from "./rollup.ts";
import { rate, RATES } from "./service.ts";

export const HEALTH_WINDOW_DAYS = 7;
const HOUR_MS = 3_600_000;
/** Below this many recipients in the window a rate says little (one bounce of ten is 10%):
 * the rates are shown, the status stays healthy. */
export const MIN_VOLUME = 100;
export const THRESHOLDS = {
  bounce_rate: { warning: 0.03, limit: 0.04 },
  complaint_rate: { warning: 0.0006, limit: 0.0008 },
} as const;

export type HealthStatus = "healthy" | "warning" | "over_limit";

export interface RateHealth {
  value: number;
  warning: number;
  limit: number;
  status: HealthStatus;
}

export interface AccountHealth {
  object: "account_health";
  window_start: string;
  window_end: string;
  window_days: number;
  /** Recipients accepted in the window (the bounce rate's denominator, and the volume judged). */
  received: number;
  /** Recipients taken by receiving servers in the window (the complaint rate's denominator). */
  sent: number;
  bounced_permanent: number;
  complained: number;
  enough_volume: boolean;
  bounce_rate: RateHealth;
  complaint_rate: RateHealth;
  status: HealthStatus;
  /** Whether the operator turned pausing on, and whether new sends are refused now. */
  pause_enabled: boolean;
  sending_paused: boolean;
}

export function judge(value: number, t: { warning: number; limit: number }, enoughVolume: boolean): HealthStatus {
  if (!enoughVolume) return "healthy";
  return value >= t.limit ? "over_limit" : value >= t.warning ? "warning" : "healthy";
}

const ORDER: HealthStatus[] = ["healthy", "warning", "over_limit"];

/** The complaint rate's terms, as the metrics API computes complaint_rate. */
const COMPLAINT = RATES.complaint_rate;

export async function accountHealth(d1: D1Database, accountId: string, now: number, pauseEnabled: boolean): Promise<AccountHealth> {
  // Whole UTC hours: the hourly rollup rows (168 a domain) rather than 672 quarter hours.
  const end = Math.ceil(now / HOUR_MS) * HOUR_MS;
  const start = end - HEALTH_WINDOW_DAYS * 86_400_000;
  const row = await d1.prepare(
    `SELECT COALESCE(SUM(received), 0) AS received, COALESCE(SUM(bounced_permanent), 0) AS bounced, COALESCE(SUM(${COMPLAINT[0]}), 0) AS complained, COALESCE(SUM(${COMPLAINT[1]}), 0) AS sent FROM metric_rollups WHERE account_id = ?1 AND span = 4 AND bucket >= ?2 AND bucket < ?3`,
  ).bind(accountId, start / BUCKET_MS, end / BUCKET_MS).first<{ received: number; bounced: number; complained: number; sent: number }>();
  const received = row?.received ?? 0;
  const sent = row?.sent ?? 0;
  const enough = received >= MIN_VOLUME;
  const bounceValue = rate(row?.bounced ?? 0, received);
  const complaintValue = rate(row?.complained ?? 0, sent);
  const bounce: RateHealth = { value: bounceValue, ...THRESHOLDS.bounce_rate, status: judge(bounceValue, THRESHOLDS.bounce_rate, enough) };
  const complaint: RateHealth = { value: complaintValue, ...THRESHOLDS.complaint_rate, status: judge(complaintValue, THRESHOLDS.complaint_rate, enough) };
  const status = ORDER[Math.max(ORDER.indexOf(bounce.status), ORDER.indexOf(complaint.status))]!;
  return {
    object: "account_health",
    window_start: new Date(start).toISOString(),
    window_end: new Date(end).toISOString(),
    window_days: HEALTH_WINDOW_DAYS,
    received,
    sent,
    bounced_permanent: row?.bounced ?? 0,
    complained: row?.complained ?? 0,
    enough_volume: enough,
    bounce_rate: bounce,
    complaint_rate: complaint,
    status,
    pause_enabled: pauseEnabled,
    sending_paused: pauseEnabled && status === "over_limit",
  };
}

/** Health read for the accept path is kept a minute per isolate: a send must not pay a read
 * each time, and rates over 7 days do not move in a minute. */
const CACHE_MS = 60_000;
const cache = new Map<string, { until: number; health: AccountHealth }>();

/** Throws the 403 a paused account's send gets (only called when HEALTH_PAUSE is on). */
export async function assertSendingAllowed(d1: D1Database, accountId: string, now: number): Promise<void> {
  let entry = cache.get(accountId);
  if (!entry || entry.until <= now) {
    entry = { until: now + CACHE_MS, health: await accountHealth(d1, accountId, now, true) };
    cache.set(accountId, entry);
    if (cache.size > 10_000) cache.delete(cache.keys().next().value!);
  }
  const h = entry.health;
  if (!h.sending_paused) return;
  const over = h.bounce_rate.status === "over_limit"
    ? `its hard-bounce rate over the last ${h.window_days} days is ${(h.bounce_rate.value * 100).toFixed(2)}%, at or over the ${h.bounce_rate.limit * 100}% limit`
    : `its complaint rate over the last ${h.window_days} days is ${(h.complaint_rate.value * 100).toFixed(3)}%, at or over the ${h.complaint_rate.limit * 100}% limit`;
  throw new ApiError(
    "validation_error",
    `Sending is paused for this account: ${over}. Clean your lists (bounced and complaining addresses are on GET /suppressions); sending resumes when the 7-day rate is under the limit again (GET /account/health shows it), or when the operator turns HEALTH_PAUSE off.`,
    403,
  );
}

/** Forgets cached health (tests, and an operator tool that clears a pause). */
export function forgetHealth(accountId?: string): void {
  if (accountId) cache.delete(accountId);
  else cache.clear();
}
