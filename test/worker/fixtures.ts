// Test fixtures: real rows written the way tern writes them, one fresh account per call so
// tests never see each other's data.
import { env, exports } from "cloudflare:workers";
import { drizzle } from "drizzle-orm/d1";
import { generateToken, hashToken, tokenPrefix } from "../../worker/api-key-token.ts";
import type { Permission } from "../../worker/auth.ts";
import { accounts, apiKeys, domains } from "../../worker/db/schema.ts";
import { uuidv7 } from "../../worker/ids.ts";

export interface TestAccount {
  accountId: string;
  token: string;
  domain: string;
  domainId: string;
}

/** Test accounts get a high request rate unless a test is about the rate itself. */
export async function createAccount(opts: { domainStatus?: string; region?: string; rateLimit?: number } = {}): Promise<TestAccount> {
  const db = drizzle(env.DB);
  const accountId = uuidv7();
  const domainId = uuidv7();
  const domain = `d${accountId.slice(-12)}.example.test`;
  await db.insert(accounts).values({ id: accountId, name: "Test", rateLimit: opts.rateLimit ?? 100_000, createdAt: Date.now() });
  await db.insert(domains).values({
    id: domainId, accountId, name: domain, region: opts.region ?? "us-east-1",
    status: opts.domainStatus ?? "verified", createdAt: Date.now(),
  });
  const token = await addKey(accountId, "full_access");
  return { accountId, token, domain, domainId };
}

export async function addKey(accountId: string, permission: Permission, domainId: string | null = null): Promise<string> {
  const token = generateToken();
  await drizzle(env.DB).insert(apiKeys).values({
    id: uuidv7(), accountId, name: "test key", permission, domainId,
    tokenHash: await hashToken(token), tokenPrefix: tokenPrefix(token), createdAt: Date.now(),
  });
  return token;
}

export function api(token: string | null, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const h: Record<string, string> = { ...headers };
  if (token) h.authorization = `Bearer ${token}`;
  let payload: string | undefined;
  if (body !== undefined) {
    h["content-type"] = "application/json";
    payload = typeof body === "string" ? body : JSON.stringify(body);
  }
  return exports.default.fetch(new Request(`http://tern.test${path}`, { method, headers: h, body: payload }));
}

export async function countRows(table: string, accountId: string): Promise<number> {
  const r = await env.DB.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE account_id = ?`).bind(accountId).first<{ n: number }>();
  return r!.n;
}
