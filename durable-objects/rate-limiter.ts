// The request rate of one account (contract 4.4), shared by every key and by SMTP: a token
// bucket that refills `limit` tokens a second and holds at most `limit`. One object per
// account serialises the decisions, so the limit holds across isolates and colos. The bucket
// lives in memory: if the object is evicted it restarts full, which at worst allows one burst.
// An isolate may take several tokens at once (a lease, worker/rate-limit.ts) and spend them
// without calling again; every request still spends a token this object handed out.
import { DurableObject } from "cloudflare:workers";

export interface RateVerdict {
  allowed: boolean;
  limit: number;
  /** Whole requests left right now. */
  remaining: number;
  /** Seconds until the bucket is full again. */
  reset: number;
  /** Seconds until one more request is allowed (when refused). */
  retryAfter: number;
}

export interface RateGrant extends RateVerdict {
  /** Tokens handed out: 0 when refused, else 1 to the number asked for. */
  granted: number;
}

export class RateLimiter extends DurableObject<Env> {
  private tokens = 0;
  private updatedAt = 0;
  private limit = 0;

  /** Takes up to `want` tokens (at least one, or none and a refusal). */
  take(limit: number, want = 1, now: number = Date.now()): RateGrant {
    if (limit !== this.limit) {
      // First use, or the account's limit changed: start from a full bucket of the new size.
      this.limit = limit;
      this.tokens = limit;
      this.updatedAt = now;
    }
    this.tokens = Math.min(limit, this.tokens + (Math.max(0, now - this.updatedAt) / 1000) * limit);
    this.updatedAt = now;
    const granted = this.tokens >= 1 ? Math.min(Math.max(1, Math.floor(want)), Math.floor(this.tokens)) : 0;
    this.tokens -= granted;
    return {
      allowed: granted > 0,
      granted,
      limit,
      remaining: Math.floor(this.tokens),
      reset: Math.ceil((limit - this.tokens) / limit),
      retryAfter: granted > 0 ? 0 : Math.max(1, Math.ceil((1 - this.tokens) / limit)),
    };
  }
}
