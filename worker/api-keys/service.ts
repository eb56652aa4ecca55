// API keys of an account: create (the token is answered once; only its hash is kept), list,
// rename, revoke. The REST routes and the dashboard are both thin callers of these.
import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { generateToken, hashToken, tokenPrefix } from "../api-key-token.ts";
import { evictKey, type Permission } from "../auth.ts";
import { apiKeys, domains } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { uuidv7 } from "../ids.ts";
import { finishPage, pageQuery, type Page } from "../pagination.ts";

const iso = (ms: number | null | undefined): string | null => (ms == null ? null : new Date(ms).toISOString());

export interface NewApiKey {
  name: string;
  permission: Permission;
  domainId?: string | null;
}

export async function createApiKey(d1: D1Database, accountId: string, input: NewApiKey, now = Date.now()): Promise<{ id: string; token: string }> {
  const db = drizzle(d1);
  if (input.domainId) {
    if (input.permission !== "sending_access") {
      throw new ApiError("validation_error", "`domain_id` can only be set on a `sending_access` key.");
    }
    const domain = await db.select({ id: domains.id }).from(domains)
      .where(and(eq(domains.id, input.domainId), eq(domains.accountId, accountId))).get();
    if (!domain) throw new ApiError("validation_error", "`domain_id` does not name a domain of this account.");
  }
  const token = generateToken();
  const id = uuidv7(now);
  await db.insert(apiKeys).values({
    id,
    accountId,
    name: input.name,
    permission: input.permission,
    domainId: input.domainId ?? null,
    tokenHash: await hashToken(token),
    tokenPrefix: tokenPrefix(token),
    createdAt: now,
  });
  return { id, token };
}

export async function listApiKeys(d1: D1Database, accountId: string, page: Page) {
  const { data, ...rest } = await listApiKeyDetails(d1, accountId, page);
  return { ...rest, data: data.map(({ id, name, created_at, last_used_at }) => ({ id, name, created_at, last_used_at })) };
}

/** The keys as the dashboard lists them: Resend's fields, and what each key may do and the
 * start of its token (never more of it) so people can tell their keys apart. */
export async function listApiKeyDetails(d1: D1Database, accountId: string, page: Page) {
  const q = pageQuery(apiKeys.id, page, eq(apiKeys.accountId, accountId));
  const rows = await drizzle(d1)
    .select({ id: apiKeys.id, name: apiKeys.name, createdAt: apiKeys.createdAt, lastUsedAt: apiKeys.lastUsedAt, permission: apiKeys.permission, domainId: apiKeys.domainId, tokenPrefix: apiKeys.tokenPrefix })
    .from(apiKeys).where(q.where).orderBy(q.orderBy).limit(q.limit);
  return finishPage(rows.map((r) => ({
    id: r.id, name: r.name, created_at: iso(r.createdAt)!, last_used_at: iso(r.lastUsedAt),
    permission: r.permission, domain_id: r.domainId, token_prefix: r.tokenPrefix,
  })), page);
}

/** Revokes the key at once (here; other isolates within the key cache's lifetime). */
export async function revokeApiKey(d1: D1Database, accountId: string, id: string): Promise<{ object: "api_key"; id: string; deleted: true }> {
  const deleted = await drizzle(d1).delete(apiKeys)
    .where(and(eq(apiKeys.id, id), eq(apiKeys.accountId, accountId))).returning({ id: apiKeys.id });
  if (deleted.length === 0) throw new ApiError("not_found", "API key not found.");
  evictKey(id);
  return { object: "api_key", id, deleted: true };
}

export async function renameApiKey(d1: D1Database, accountId: string, id: string, name: string): Promise<{ object: "api_key"; id: string }> {
  const updated = await drizzle(d1).update(apiKeys).set({ name })
    .where(and(eq(apiKeys.id, id), eq(apiKeys.accountId, accountId))).returning({ id: apiKeys.id });
  if (updated.length === 0) throw new ApiError("not_found", "API key not found.");
  return { object: "api_key", id };
}
