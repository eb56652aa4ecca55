// Applying an account's request rate to an API call, and telling the client about it with
// the `ratelimit-*` headers (and `retry-after` on a 429).
import type { RateVerdict } from "../durable-objects/rate-limiter.ts";
import type { Principal } from "./auth.ts";
import { ApiError } from "./errors.ts";

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
export async function takeRequest(env: Env, principal: Principal): Promise<RateVerdict | null> {
  if (principal.rateLimit <= 0) return null;
  const verdict = await env.RATE_LIMITER.getByName(`rate:${principal.accountId}`).take(principal.rateLimit);
  if (!verdict.allowed) {
    throw new ApiError("rate_limit_exceeded", `Too many requests: this account may make ${verdict.limit} requests per second. Retry after ${verdict.retryAfter} second${verdict.retryAfter === 1 ? "" : "s"}.`, 429, rateHeaders(verdict));
  }
  return verdict;
}
