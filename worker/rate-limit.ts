// Applying an account's request rate to an API call, and telling the client about it with
// the `ratelimit-*` headers (and `retry-after` on a 429).
//
// Every request spends a token from the account's RateLimiter object, so the limit holds
// across isolates. To keep that object off the hot path of busy accounts, an isolate takes a
// lease of several tokens at once, 2% of the per-second limit (at least 1: an account at the
// default 10/s still calls the object on every request), and spends them locally for up to a
// second; what it does not spend in that second is dropped, never returned or reused. Only one
// lease is asked for at a time per account and isolate: requests that find none while one is
// on its way ask for a single token, as without leases, so a burst of concurrent requests
// cannot take (and waste) many leases at once. So the limit is never exceeded; the price is
// that tokens leased by one isolate and left unspent are lost to the others, about 2% of a
// second's worth per isolate.
import type { RateGrant, RateVerdict } from "../durable-objects/rate-limiter.ts";
import type { Principal } from "./auth.ts";
import { ApiError } from "./errors.ts";
import { inJurisdiction } from "./regions.ts";

/** The share of the per-second limit one lease takes. */
export const LEASE_DIVISOR = 50;
export const LEASE_MS = 1_000;

export function leaseSize(limit: number): number {
  return Math.max(1, Math.floor(limit / LEASE_DIVISOR));
}

interface Lease {
  limit: number;
  tokens: number;
  expires: number;
  /** What the object said when it granted the lease. */
  remaining: number;
  reset: number;
}

/** One isolate's leases, by account. */
export class TokenLeases {
  private leases = new Map<string, Lease>();
  /** Accounts whose lease is being asked for. */
  private asking = new Set<string>();

  async take(accountId: string, limit: number, ask: (want: number) => Promise<RateGrant>, now = Date.now()): Promise<RateVerdict> {
    const lease = this.leases.get(accountId);
    if (lease && lease.limit === limit && lease.tokens > 0 && lease.expires > now) {
      lease.tokens--;
      return { allowed: true, limit, remaining: lease.remaining + lease.tokens, reset: lease.reset, retryAfter: 0 };
    }
    const leasing = !this.asking.has(accountId);
    let grant: RateGrant;
    if (leasing) this.asking.add(accountId);
    try {
      grant = await ask(leasing ? leaseSize(limit) : 1);
    } finally {
      if (leasing) this.asking.delete(accountId);
    }
    if (grant.granted > 1) {
      if (this.leases.size > 10_000) this.leases.clear();
      // Tokens still held (spent meanwhile by single-token requests' neighbours) are kept.
      const held = lease && lease.limit === limit && lease.expires > now ? lease.tokens : 0;
      this.leases.set(accountId, { limit, tokens: held + grant.granted - 1, expires: now + LEASE_MS, remaining: grant.remaining, reset: grant.reset });
    }
    return { allowed: grant.allowed, limit, remaining: grant.remaining + Math.max(0, grant.granted - 1), reset: grant.reset, retryAfter: grant.retryAfter };
  }
}

const leases = new TokenLeases();

export function rateHeaders(v: RateVerdict | null): Record<string, string> {
  if (!v) return {};
  const h: Record<string, string> = {
    "ratelimit-limit": String(v.limit),
    "ratelimit-remaining": String(v.remaining),
    "ratelimit-reset": String(v.reset),
  };
  if (!v.allowed) h["retry-after"] = String(v.retryAfter);
  return h;
}

/** Takes one request from the account's bucket; throws the contract's 429 when it is empty.
 * An account whose limit is 0 is not limited (an operator's choice, e.g. an internal system). */
export function takeRequest(env: Env, principal: Principal): Promise<RateVerdict | null> {
  return takeFrom(env, principal.accountId, principal.rateLimit, (n) => `this account may make ${n} request${n === 1 ? "" : "s"} per second`);
}

/** Takes one change a person makes in the dashboard from a bucket of their own, at their
 * account's rate: a script driving a stolen or scripted session is held to what the API allows,
 * without spending the account's own bucket (a busy integration must not lock people out). */
export function takeDashboardChange(env: Env, userId: string, accountId: string, rateLimit: number): Promise<RateVerdict | null> {
  // One bucket per person and account: the limit is the account's, and a bucket whose limit
  // changed starts full, so a person in two accounts alternating them must not share one.
  return takeFrom(env, `user:${userId}:${accountId}`, rateLimit, (n) => `each person may make ${n} change${n === 1 ? "" : "s"} per second in the dashboard`);
}

async function takeFrom(env: Env, bucket: string, limit: number, what: (limit: number) => string): Promise<RateVerdict | null> {
  if (limit <= 0) return null;
  const stub = inJurisdiction(env, env.RATE_LIMITER).getByName(`rate:${bucket}`);
  const verdict = await leases.take(bucket, limit, (want) => stub.take(limit, want));
  if (!verdict.allowed) {
    throw new ApiError("rate_limit_exceeded", `Too many requests: ${what(verdict.limit)}. Retry after ${verdict.retryAfter} second${verdict.retryAfter === 1 ? "" : "s"}.`, 429, rateHeaders(verdict));
  }
  return verdict;
}
