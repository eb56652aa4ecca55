// Test fixtures: real rows written the way tern writes them, one fresh account per call so
// tests never see each other's data.
import { env, exports } from "cloudflare:workers";
import { drizzle } from "drizzle-orm/d1";
import { generateToken, hashToken, tokenPrefix } from "../../worker/api-key-token.ts";
import type { Permission } from "../../worker/auth.ts";
import { accounts, apiKeys, dkimKeys, domains } from "../../worker/db/schema.ts";
import { generateDkimKey, newSelector, sealPrivateKey, type GeneratedKey } from "../../worker/dkim/keys.ts";
import { uuidv7 } from "../../worker/ids.ts";
import { purgeExpired, type PurgeCounts } from "../../worker/retention/purge.ts";
import { WEBHOOK_EVENT_TYPES } from "../../worker/webhooks/payloads.ts";

export interface TestAccount {
  accountId: string;
  token: string;
  domain: string;
  domainId: string;
}

// One RSA pair per test file: generating 2048-bit keys for every account would dominate the run.
let sharedKey: Promise<GeneratedKey> | null = null;

/** A verified domain as tern keeps one: the row and its active DKIM key, sealed. */
export async function insertDomain(accountId: string, name: string, opts: { status?: string; region?: string } = {}): Promise<{ domainId: string; selector: string; publicKey: string }> {
  const domainId = uuidv7();
  const key = await (sharedKey ??= generateDkimKey("rsa"));
  const selector = newSelector();
  const db = drizzle(env.DB);
  await db.insert(domains).values({
    id: domainId, accountId, name, region: opts.region ?? "us-east-1",
    status: opts.status ?? "verified", createdAt: Date.now(),
  });
  await db.insert(dkimKeys).values({
    id: uuidv7(), domainId, accountId, selector, algorithm: "rsa", publicKey: key.publicKey,
    privateKeySealed: await sealPrivateKey(env.MASTER_KEY, domainId, selector, key.pkcs8),
    state: "active", status: opts.status === "verified" || !opts.status ? "verified" : "not_started", createdAt: Date.now(),
  });
  return { domainId, selector, publicKey: key.publicKey };
}

/** Test accounts get a high request rate unless a test is about the rate itself. */
export async function createAccount(opts: { domainStatus?: string; region?: string; rateLimit?: number; listening?: boolean } = {}): Promise<TestAccount> {
  const db = drizzle(env.DB);
  const accountId = uuidv7();
  const domain = `d${accountId.slice(-12)}.example.test`;
  await db.insert(accounts).values({ id: accountId, name: "Test", rateLimit: opts.rateLimit ?? 100_000, createdAt: Date.now() });
  const { domainId } = await insertDomain(accountId, domain, { status: opts.domainStatus, region: opts.region });
  const token = await addKey(accountId, "full_access");
  if (opts.listening) await listen({ token });
  return { accountId, token, domain, domainId };
}

/** An endpoint of the account that hears every event type, on the test webhook receiver. tern
 * writes an event to its outbox only while an endpoint subscribes to it, so a test that reads
 * webhook_events reads what such an endpoint is sent. */
export async function listen(t: Pick<TestAccount, "token">): Promise<void> {
  const endpoint = `http://127.0.0.1:${env.TEST_PEERS.webhooks}/listener-${crypto.randomUUID()}`;
  const res = await api(t.token, "POST", "/webhooks", { endpoint, events: [...WEBHOOK_EVENT_TYPES] });
  if (res.status !== 201) throw new Error(`webhook not created: ${res.status} ${await res.text()}`);
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

/** An API call as the account's key, with the answer's status and parsed JSON body. */
export async function call(t: TestAccount, method: string, path: string, body?: unknown) {
  const res = await api(t.token, method, path, body);
  return { status: res.status, body: (await res.json()) as any };
}

export async function countRows(table: string, accountId: string): Promise<number> {
  const r = await env.DB.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE account_id = ?`).bind(accountId).first<{ n: number }>();
  return r!.n;
}

/** Runs the retention purge until a run removes nothing, summing what each removed: the worker
 * test files share one database, so one budgeted run may spend itself on other files' rows. */
export async function purgeAll(retentionDays: number, now: number): Promise<PurgeCounts> {
  const total = { emails: 0, webhookDeliveries: 0, webhookEvents: 0, inboundEmails: 0, apiLogs: 0, importFailures: 0, blobs: 0 };
  for (;;) {
    const counts = await purgeExpired(env, retentionDays, now);
    for (const k of Object.keys(total) as (keyof typeof total)[]) total[k] += counts[k];
    if (Object.values(counts).every((n) => n === 0)) return total;
  }
}
