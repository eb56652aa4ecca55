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

/** An address in one spelling: IPv4 dotted (IPv4-mapped IPv6 too), IPv6 as eight lowercase
 * groups without leading zeros (an embedded IPv4 tail as its two groups, a zone dropped).
 * Node's socket and smtp-server's session write the same address differently. */
export function canonicalAddress(address: string): string {
  const mapped = address.match(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/i);
  if (mapped) return mapped[1]!;
  let a = address.toLowerCase().replace(/%.*$/, "");
  if (isIP(a) !== 6) return address;
  const v4 = a.match(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/);
  if (v4) {
    const [b0, b1, b2, b3] = v4.slice(1).map(Number) as [number, number, number, number];
    a = a.slice(0, v4.index) + ((b0 << 8) | b1).toString(16) + ":" + ((b2 << 8) | b3).toString(16);
  }
  const [head = "", tail = ""] = a.split("::");
  const left = head ? head.split(":") : [];
  const right = tail ? tail.split(":") : [];
  const groups = a.includes("::") ? [...left, ...Array<string>(8 - left.length - right.length).fill("0"), ...right] : left;
  const hex = groups.map((g) => g.replace(/^0+(?=.)/, ""));
  // IPv4-mapped, however it was written (::ffff:a00:1 is 10.0.0.1).
  if (hex.slice(0, 5).every((g) => g === "0") && hex[5] === "ffff") {
    const [hi, lo] = [parseInt(hex[6]!, 16), parseInt(hex[7]!, 16)];
    return [hi >> 8, hi & 255, lo >> 8, lo & 255].join(".");
  }
  return hex.join(":");
}

/** The unit every per-address limit counts by (connections, pending TLS handshakes, failed
 * logins): an IPv4 address, or an IPv6 /64 (one host usually holds a whole /64).
 * IPv4-mapped IPv6 addresses count as IPv4. */
export function clientKey(address: string): string {
  const a = canonicalAddress(address);
  if (isIP(a) !== 6) return a;
  return a.split(":").slice(0, 4).join(":") + "::/64";
}

export interface ThrottleOptions {
  maxFailures: number;
  windowMs: number;
  baseDelayMs: number;
  maxDelayMs: number;
  now?: () => number;
}

export interface LoginAttempt {
  /** The key was wrong: recorded as a failure. Returns how long to wait before answering. */
  fail(): number;
  /** The login succeeded, or could not be checked (the API was unreachable): not a failure. */
  withdraw(): void;
}

/** Failed logins per client address over a sliding window, and logins still being checked.
 * An attempt counts from its start, before the key is checked (asynchronously): counted only
 * once it had failed, any number of parallel attempts would all be checked before the first
 * failure was recorded. Attempts past the limit wait for earlier ones to end, so parallel
 * logins with a good key all get in, and parallel guesses stop at the limit. */
export class FailureThrottle {
  readonly #o: Required<ThrottleOptions>;
  readonly #failures = new Map<string, number[]>();
  readonly #checking = new Map<string, { count: number; waiting: (() => void)[] }>();

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

  /** Starts an attempt from `client` once the failures so far and the attempts still being
   * checked leave room for it; null when the address is blocked. */
  async begin(client: string): Promise<LoginAttempt | null> {
    for (;;) {
      if (this.blocked(client)) return null;
      const checking = this.#checking.get(client) ?? { count: 0, waiting: [] };
      this.#checking.set(client, checking);
      if (this.#recent(client).length + checking.count < this.#o.maxFailures) {
        checking.count++;
        break;
      }
      await new Promise<void>((resolve) => checking.waiting.push(resolve));
    }
    let settled = false;
    const end = () => {
      settled = true;
      const checking = this.#checking.get(client)!;
      checking.count--;
      // Everyone waiting looks again: the one that ended left room, or a block.
      const waiting = checking.waiting.splice(0);
      if (checking.count === 0) this.#checking.delete(client);
      for (const resume of waiting) resume();
    };
    return {
      fail: () => {
        if (settled) return 0;
        if (this.#failures.size > MAX_CACHED) for (const k of [...this.#failures.keys()]) this.#recent(k);
        const list = [...this.#recent(client), this.#o.now()].slice(-this.#o.maxFailures);
        this.#failures.set(client, list);
        end();
        return Math.min(this.#o.maxDelayMs, this.#o.baseDelayMs * 2 ** (list.length - 1));
      },
      withdraw: () => {
        if (!settled) end();
      },
    };
  }
}
