// Sign-in throttling: attempts are counted per address and per IP in fixed windows in D1,
// shared by every isolate. An attempt is counted before it is checked, so parallel guesses
// cannot slip through between a check and a count; a successful sign-in clears its address.
import { sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { authAttempts } from "../db/schema.ts";

export const WINDOW_MS = 15 * 60_000;
/** Attempts allowed in one window: per address (a targeted guess) and per IP (a sweep). */
export const LIMITS = { email: 5, ip: 100 } as const;

export interface Throttled {
  /** Seconds until the window ends. */
  retryAfter: number;
}

function windowKey(kind: "email" | "ip", value: string, now: number): { key: string; expiresAt: number } {
  const start = now - (now % WINDOW_MS);
  return { key: `${kind}:${value.toLowerCase()}@${start}`, expiresAt: start + WINDOW_MS };
}

/** Counts one attempt for each of (address, IP); refuses when either is over its limit. */
export async function countAttempt(db: D1Database, who: { email?: string | undefined; ip: string }, now = Date.now()): Promise<Throttled | null> {
  const d = drizzle(db);
  const keys: { kind: "email" | "ip"; key: string; expiresAt: number }[] = [{ kind: "ip", ...windowKey("ip", who.ip, now) }];
  if (who.email) keys.push({ kind: "email", ...windowKey("email", who.email, now) });
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
    if (count > LIMITS[keys[i]!.kind]) return { retryAfter: Math.max(1, Math.ceil((keys[i]!.expiresAt - now) / 1000)) };
  }
  return null;
}

/** A successful sign-in: the address's count starts again (the IP's does not). */
export async function clearAddress(db: D1Database, email: string, now = Date.now()): Promise<void> {
  await drizzle(db).delete(authAttempts).where(sql`${authAttempts.key} = ${windowKey("email", email, now).key}`).run();
}
