// When a webhook delivery is tried again, and when an endpoint has failed long enough to be
// disabled (contract section 6). Pure: times in, decisions out, so the schedule is tested
// without a queue or a clock.

/** Seconds to wait after each failed attempt before the next: after the first (immediate)
 * attempt 5 s, then 5 min, 30 min, 2 h, 5 h, 10 h, 10 h. Eight attempts over about 27.5 hours. */
export const RETRY_DELAYS_SECONDS: readonly number[] = [5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600, 10 * 3600];
export const MAX_ATTEMPTS = RETRY_DELAYS_SECONDS.length + 1;

/** An endpoint whose every attempt has failed for this long is disabled. */
export const DISABLE_AFTER_MS = 5 * 24 * 3600 * 1000;

/** A receiver must answer within this, or the attempt fails. */
export const ATTEMPT_TIMEOUT_MS = 10_000;

/** Any 2xx acknowledges a delivery; everything else (3xx included: redirects are not followed) is a failure. */
export function isAcknowledged(status: number): boolean {
  return status >= 200 && status <= 299;
}

export type AfterFailure =
  | { retry: true; /** The attempt number of the next try, from 1. */ nextAttempt: number; delayMs: number; nextAttemptAt: number }
  | { retry: false; reason: string };

/**
 * What follows a failed attempt. `attempt` is the number of the attempt that failed (the
 * first, immediate one is 1); `failedAt` is when it failed (Unix ms). The delay counts from
 * the failure, not from the start, so a slow receiver does not eat into its next try.
 */
export function afterFailedAttempt(attempt: number, failedAt: number): AfterFailure {
  if (!Number.isInteger(attempt) || attempt < 1) throw new RangeError("attempt numbers start at 1");
  const delay = RETRY_DELAYS_SECONDS[attempt - 1];
  if (delay === undefined) {
    return { retry: false, reason: `All ${MAX_ATTEMPTS} attempts failed.` };
  }
  const delayMs = delay * 1000;
  return { retry: true, nextAttempt: attempt + 1, delayMs, nextAttemptAt: failedAt + delayMs };
}

/** The moments of every attempt of one event whose every attempt fails instantly: for tests and documentation. */
export function attemptTimes(firstAt: number): number[] {
  const times = [firstAt];
  for (const delay of RETRY_DELAYS_SECONDS) times.push(times[times.length - 1]! + delay * 1000);
  return times;
}

/** What tern remembers about an endpoint's health: since when it has failed without a success in between. */
export interface EndpointHealth {
  /** Unix ms of the first failed attempt since the last success; null while healthy. */
  failingSince: number | null;
}

export type HealthUpdate = EndpointHealth & { disable: false } | EndpointHealth & { disable: true; reason: string };

/**
 * The endpoint's health after one attempt. A success clears the failure streak; a failure
 * starts it, or disables the endpoint once it has lasted DISABLE_AFTER_MS. Any success in
 * between (for any event) keeps an endpoint alive: only an endpoint that never answers is cut off.
 */
export function endpointHealthAfter(health: EndpointHealth, attempt: { ok: boolean; at: number }): HealthUpdate {
  if (attempt.ok) return { failingSince: null, disable: false };
  const failingSince = health.failingSince ?? attempt.at;
  if (attempt.at - failingSince >= DISABLE_AFTER_MS) {
    return {
      failingSince,
      disable: true,
      reason: `Disabled automatically: every delivery attempt since ${new Date(failingSince).toISOString()} failed (5 days without a successful delivery).`,
    };
  }
  return { failingSince, disable: false };
}
