// The request rate of one account (contract 4.4), shared by every key and by SMTP: a token
// bucket that refills `limit` tokens a second and holds at most `limit`. One object per
// account serialises the decisions, so the limit holds across isolates and colos. The bucket
// lives in memory: if the object is evicted it restarts full, which at worst allows one burst.
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

export class RateLimiter extends DurableObject<Env> {
  private tokens = 0;
  private updatedAt = 0;
  private limit = 0;

  take(limit: number, now: number = Date.now()): RateVerdict {
    if (limit !== this.limit) {
      // First use, or the account's limit changed: start from a full bucket of the new size.
      this.limit = limit;
      this.tokens = limit;
      this.updatedAt = now;
    }
    this.tokens = Math.min(limit, this.tokens + ((now - this.updatedAt) / 1000) * limit);
    this.updatedAt = now;
    const allowed = this.tokens >= 1;
    if (allowed) this.tokens -= 1;
    return {
      allowed,
      limit,
      remaining: Math.floor(this.tokens),
      reset: Math.ceil((limit - this.tokens) / limit),
      retryAfter: allowed ? 0 : Math.max(1, Math.ceil((1 - this.tokens) / limit)),
    };
  }
}
