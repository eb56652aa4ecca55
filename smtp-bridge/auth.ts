// Logging in with an API key: the verdict on a key comes from tern's API and is kept for a few
// seconds (so a busy sender does not ask on every session, and a revoked key stops working
// within that bound), concurrent checks of one key share one request, and wrong credentials
// are slowed down and, when repeated from one address, refused for a while.
import { createHash } from "node:crypto";
import { isIP } from "node:net";

export type Verdict = "valid" | "invalid";
/** "unknown": the API could not say (unreachable, 5xx): the client should try again later. */
export type CheckResult = Verdict | "unknown";

/** SHA-256 of the key: what the verdict cache is keyed by. */
export function keyHash(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

/** What logs may say about a key: a short fingerprint that does not reveal it. */
export function keyFingerprint(key: string): string {
  return keyHash(key).slice(0, 12);
}

/** Printable ASCII of a sane length: anything else is not a key, and never reaches an HTTP header. */
export function isPlausibleKey(key: string): boolean {
  return /^[\x21-\x7e]{1,512}$/.test(key);
}

const MAX_CACHED = 10_000;

export class KeyVerdicts {
  readonly #check: (key: string) => Promise<CheckResult>;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #cache = new Map<string, { verdict: Verdict; expires: number }>();
  readonly #pending = new Map<string, Promise<CheckResult>>();

  constructor(check: (key: string) => Promise<CheckResult>, ttlMs: number, now: () => number = Date.now) {
    this.#check = check;
    this.#ttlMs = ttlMs;
    this.#now = now;
  }

  async verdict(key: string): Promise<CheckResult> {
    if (!isPlausibleKey(key)) return "invalid";
    const id = keyHash(key);
    const cached = this.#cache.get(id);
    if (cached && cached.expires > this.#now()) return cached.verdict;
    const inFlight = this.#pending.get(id);
    if (inFlight) return inFlight;
    const asking = this.#check(key)
      .catch((): CheckResult => "unknown")
      .then((result) => {
        if (result !== "unknown" && this.#ttlMs > 0) this.#remember(id, result);
        return result;
      })
      .finally(() => this.#pending.delete(id));
    this.#pending.set(id, asking);
    return asking;
  }

  /** Forgets a key's verdict (the API refused it at submission: it was revoked). */
  forget(key: string): void {
    this.#cache.delete(keyHash(key));
  }

  #remember(id: string, verdict: Verdict): void {
    const now = this.#now();
    if (this.#cache.size >= MAX_CACHED) {
      for (const [k, v] of this.#cache) if (v.expires <= now) this.#cache.delete(k);
      if (this.#cache.size >= MAX_CACHED) this.#cache.clear();
    }
    this.#cache.set(id, { verdict, expires: now + this.#ttlMs });
  }
}

/** The unit throttling and connection limits count by: an IPv4 address, or an IPv6 /64
 * (one host usually holds a whole /64). IPv4-mapped IPv6 addresses count as IPv4. */
export function clientKey(address: string): string {
  const mapped = address.match(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/i);
  if (mapped) return mapped[1]!;
  if (isIP(address) !== 6) return address;
  const [head = "", tail = ""] = address.toLowerCase().split("::");
  const left = head ? head.split(":") : [];
  const right = tail ? tail.split(":") : [];
  const groups = address.includes("::") ? [...left, ...Array(8 - left.length - right.length).fill("0"), ...right] : left;
  return groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, "")).join(":") + "::/64";
}

export interface ThrottleOptions {
  maxFailures: number;
  windowMs: number;
  baseDelayMs: number;
  maxDelayMs: number;
  now?: () => number;
}

/** Failed logins per client address, over a sliding window. */
export class FailureThrottle {
  readonly #o: Required<ThrottleOptions>;
  readonly #failures = new Map<string, number[]>();

  constructor(o: ThrottleOptions) {
    this.#o = { now: Date.now, ...o };
  }

  #recent(client: string): number[] {
    const since = this.#o.now() - this.#o.windowMs;
    const list = (this.#failures.get(client) ?? []).filter((t) => t > since);
    if (list.length) this.#failures.set(client, list);
    else this.#failures.delete(client);
    return list;
  }

  /** True while the address has failed too often: it gets no further tries until the window passes. */
  blocked(client: string): boolean {
    return this.#recent(client).length >= this.#o.maxFailures;
  }

  /** Records a failure; returns how long to wait before answering it. */
  fail(client: string): number {
    if (this.#failures.size > MAX_CACHED) for (const k of [...this.#failures.keys()]) this.#recent(k);
    const list = [...this.#recent(client), this.#o.now()].slice(-this.#o.maxFailures);
    this.#failures.set(client, list);
    return Math.min(this.#o.maxDelayMs, this.#o.baseDelayMs * 2 ** (list.length - 1));
  }
}
