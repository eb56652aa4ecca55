// API keys: `tern_` + 40 base62 characters. Only the SHA-256 of a token is stored. A verified
// key is cached in the isolate for a few seconds so the hot path of a send pays no D1 read;
// revocation evicts it here at once and elsewhere within KEY_CACHE_MS.
import { eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { accounts, apiKeys } from "./db/schema.ts";
import { hashToken, isTokenShape } from "./api-key-token.ts";
import { ApiError } from "./errors.ts";

export const KEY_CACHE_MS = 5_000;
const LAST_USED_EVERY_MS = 60_000;

export type Permission = "full_access" | "sending_access";

/** The key id of the dashboard's own mail (sign-up confirmations, resets, invitations), sent
 * as the operator's DASHBOARD_MAIL_ACCOUNT (worker/dashboard/mail.ts). */
export const DASHBOARD_MAIL_KEY_ID = "dashboard";

export interface Principal {
  accountId: string;
  keyId: string;
  permission: Permission;
  /** A sending_access key restricted to one domain. */
  domainId: string | null;
  /** The account's plan (worker/plans.ts) and API requests per second. */
  plan: string;
  rateLimit: number;
}

interface CacheEntry {
  principal: Principal | null;
  expires: number;
  lastUsedWritten: number;
}
const cache = new Map<string, CacheEntry>();

export function evictKey(keyId: string): void {
  for (const [hash, entry] of cache) if (entry.principal?.keyId === keyId) cache.delete(hash);
}

/** Reads `Authorization: Bearer ...` and returns who is calling, or throws the contract's error. */
export async function authenticate(
  db: D1Database,
  authorization: string | undefined,
  waitUntil: (p: Promise<unknown>) => void,
): Promise<Principal> {
  const match = authorization?.match(/^Bearer\s+(\S+)\s*$/i);
  if (!match) throw new ApiError("missing_api_key", "Missing API key in the authorization header. Include the header `Authorization: Bearer tern_...`.");
  const token = match[1]!;
  if (!isTokenShape(token)) throw new ApiError("invalid_api_key", "API key is invalid.");
  const hash = await hashToken(token);
  const now = Date.now();
  let entry = cache.get(hash);
  if (!entry || entry.expires <= now) {
    const row = await drizzle(db)
      .select({ key: apiKeys, plan: accounts.plan, rateLimit: accounts.rateLimit })
      .from(apiKeys).innerJoin(accounts, eq(accounts.id, apiKeys.accountId))
      .where(eq(apiKeys.tokenHash, hash)).get();
    entry = {
      principal: row
        ? { accountId: row.key.accountId, keyId: row.key.id, permission: row.key.permission, domainId: row.key.domainId, plan: row.plan, rateLimit: row.rateLimit }
        : null,
      expires: now + KEY_CACHE_MS,
      lastUsedWritten: entry?.lastUsedWritten ?? (row?.key.lastUsedAt ?? 0),
    };
    if (cache.size > 10_000) cache.clear();
    cache.set(hash, entry);
  }
  if (!entry.principal) throw new ApiError("invalid_api_key", "API key is invalid.");
  if (now - entry.lastUsedWritten > LAST_USED_EVERY_MS) {
    entry.lastUsedWritten = now;
    const keyId = entry.principal.keyId;
    waitUntil(drizzle(db).update(apiKeys).set({ lastUsedAt: now }).where(eq(apiKeys.id, keyId)).run().catch(() => {}));
  }
  return entry.principal;
}

export function requireFullAccess(p: Principal): void {
  if (p.permission !== "full_access") {
    throw new ApiError("restricted_api_key", "This API key is restricted to only send emails.");
  }
}
