// Sign-in throttling: attempts are counted per address and per IP in fixed windows in D1 (and,
// with countInWindow, other actions with a daily limit), shared by every isolate. An attempt
// is counted before it is checked, so parallel guesses cannot slip through between a check and
// a count; a successful sign-in clears its address.
import { inArray, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { authAttempts } from "../db/schema.ts";
import { parseIpv6 } from "../net/outbound.ts";

export const WINDOW_MS = 15 * 60_000;
/** Attempts allowed in one window: per address (a targeted guess) and per IP (a sweep). */
export const LIMITS = { email: 5, ip: 100 } as const;

export interface Throttled {
  /** Seconds until the window ends. */
  retryAfter: number;
}

function windowKey(kind: "email" | "ip", value: string, now: number): { key: string; expiresAt: number } {
  const start = now - (now % WINDOW_MS);
  return { key: `${kind}:${kind === "ip" ? ipKey(value) : value.toLowerCase()}@${start}`, expiresAt: start + WINDOW_MS };
}

/** An IPv6 client is counted by its /64: one subscriber usually holds a whole /64, so counting
 * each address would give a sweep as many windows as it cares to use. */
export function ipKey(ip: string): string {
  if (!ip.includes(":")) return ip.toLowerCase();
  const groups = parseIpv6(ip.replace(/^\[|\]$/g, "").replace(/%.*$/, ""));
  if (!groups) return ip.toLowerCase();
  // An IPv4 client written the IPv6 way is that IPv4 client.
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) return `${groups[6]! >> 8}.${groups[6]! & 255}.${groups[7]! >> 8}.${groups[7]! & 255}`;
  return `${groups.slice(0, 4).map((g) => g.toString(16)).join(":")}::/64`;
}

/** Counts one attempt for each of (address, IP); refuses when either is over its limit. */
export async function countAttempt(db: D1Database, who: { email?: string | undefined; ip: string }, now = Date.now()): Promise<Throttled | null> {
  const keys: { key: string; expiresAt: number; limit: number }[] = [{ ...windowKey("ip", who.ip, now), limit: LIMITS.ip }];
  if (who.email) keys.push({ ...windowKey("email", who.email, now), limit: LIMITS.email });
  return countUnder(db, keys, now);
}

/** One event counted under each key of a fixed window of `windowMs`: the counts of sends and
 * other actions that must not outrun a daily or hourly limit, shared by every isolate. */
export function countInWindow(db: D1Database, counts: { key: string; limit: number }[], windowMs: number, now = Date.now()): Promise<(Throttled & { index: number }) | null> {
  const start = now - (now % windowMs);
  return countUnder(db, counts.map((c) => ({ key: `${c.key}@${start}`, limit: c.limit, expiresAt: start + windowMs })), now);
}

/** Takes back what countInWindow added under these keys (the action it counted did not
 * happen: refused, or failed), so refused attempts never use up anybody's allowance. */
export async function uncountInWindow(db: D1Database, counts: { key: string }[], windowMs: number, now: number): Promise<void> {
  const start = now - (now % windowMs);
  const keys = counts.map((c) => `${c.key}@${start}`);
  await drizzle(db).update(authAttempts).set({ count: sql`max(${authAttempts.count} - 1, 0)` }).where(inArray(authAttempts.key, keys)).run();
}

/** Past its limit: the first key that is, by its index in `keys`. */
async function countUnder(db: D1Database, keys: { key: string; limit: number; expiresAt: number }[], now: number): Promise<(Throttled & { index: number }) | null> {
  const d = drizzle(db);
  const rows = await d.batch(
    keys.map((k) =>
      d.insert(authAttempts).values({ key: k.key, count: 1, expiresAt: k.expiresAt })
        .onConflictDoUpdate({ target: authAttempts.key, set: { count: sql`${authAttempts.count} + 1` } })
        .returning({ count: authAttempts.count }),
    ) as [ReturnType<typeof d.insert> extends never ? never : any],
  ) as { count: number }[][];
  // Expired windows are dropped now and then, on the write path that makes them.
  if (Math.random() < 0.01) await d.delete(authAttempts).where(sql`${authAttempts.expiresAt} < ${now}`).run();
  for (let i = 0; i < keys.length; i++) {
    const count = rows[i]?.[0]?.count ?? 0;
    if (count > keys[i]!.limit) return { retryAfter: Math.max(1, Math.ceil((keys[i]!.expiresAt - now) / 1000)), index: i };
  }
  return null;
}

/** A successful sign-in: the address's count starts again (the IP's does not). */
export async function clearAddress(db: D1Database, email: string, now = Date.now()): Promise<void> {
  await drizzle(db).delete(authAttempts).where(sql`${authAttempts.key} = ${windowKey("email", email, now).key}`).run();
}
