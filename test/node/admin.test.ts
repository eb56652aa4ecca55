// The operator commands act on a real local D1 state, through wrangler.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";

const root = resolve(import.meta.dirname, "..", "..");
const wrangler = join(root, "node_modules/wrangler/bin/wrangler.js");
const persist = mkdtempSync(join(process.env.TERN_TEST_TMP ?? tmpdir(), "tern-admin-"));
const env = { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "true" };

function admin(...args: string[]) {
  return spawnSync(process.execPath, [join(root, "ops/admin.ts"), ...args, "--persist-to", persist], { cwd: root, encoding: "utf8", env });
}
function query(sql: string): Record<string, unknown>[] {
  const out = execFileSync(process.execPath, [wrangler, "d1", "execute", "DB", "--local", "--persist-to", persist, "--json", "--command", sql], { cwd: root, encoding: "utf8", env });
  return (JSON.parse(out) as { results: Record<string, unknown>[] }[])[0]!.results;
}

beforeAll(() => {
  execFileSync(process.execPath, [wrangler, "d1", "migrations", "apply", "DB", "--local", "--persist-to", persist], { cwd: root, env, stdio: "pipe" });
}, 60_000);

describe("npm run admin", () => {
  it("creates an account with a key stored only as a hash, and sets its plan and rate limit", () => {
    const created = admin("create-account", "Acme Inc", "--plan", "pro_50k");
    expect(created.status, created.stderr).toBe(0);
    const { account_id, api_key } = JSON.parse(created.stdout) as { account_id: string; api_key: string };
    expect(api_key).toMatch(/^tern_[0-9A-Za-z]{40}$/);
    expect(JSON.stringify(query("SELECT * FROM api_keys"))).not.toContain(api_key);
    expect(query(`SELECT plan, rate_limit FROM accounts WHERE id = '${account_id}'`)).toEqual([{ plan: "pro_50k", rate_limit: 10 }]);

    expect(admin("set-plan", account_id, "scale_1m").status).toBe(0);
    expect(admin("set-rate-limit", account_id, "50").status).toBe(0);
    expect(query(`SELECT plan, rate_limit FROM accounts WHERE id = '${account_id}'`)).toEqual([{ plan: "scale_1m", rate_limit: 50 }]);
  }, 60_000);

  it("refuses unknown plans and accounts with a clear message, changing nothing", () => {
    const badPlan = admin("set-plan", "nope", "platinum");
    expect(badPlan.status).toBe(2);
    expect(badPlan.stderr).toMatch(/unknown plan platinum; plans: free, pro_50k/);
    const noAccount = admin("set-plan", "00000000-0000-0000-0000-000000000000", "free");
    expect(noAccount.status).toBe(2);
    expect(noAccount.stderr).toMatch(/no account/);
  }, 60_000);

  it("creates a dashboard user for an account, storing only a scrypt hash of the password", async () => {
    const { account_id } = JSON.parse(admin("create-account", "Team").stdout) as { account_id: string };
    const weak = admin("create-user", account_id, "pat@example.com", "--password", "password123");
    expect(weak.status).toBe(2);
    expect(weak.stderr).toMatch(/common/);
    // "--password -" reads it from standard input (out of shell history and the process list).
    const piped = spawnSync(process.execPath, [join(root, "ops/admin.ts"), "create-user", account_id, "pat@example.com", "--password", "-", "--persist-to", persist], { cwd: root, encoding: "utf8", env, input: "password123\n" });
    expect(piped.status).toBe(2);
    expect(piped.stderr).toMatch(/--password refused: .*common/);
    const made = admin("create-user", account_id, "Pat@Example.com", "--role", "admin", "--name", "Pat");
    expect(made.status, made.stderr).toBe(0);
    const { user_id, password, role } = JSON.parse(made.stdout) as { user_id: string; password: string; role: string };
    expect(role).toBe("admin");
    expect(password.length).toBeGreaterThanOrEqual(20);
    expect(query(`SELECT email, email_verified FROM auth_users WHERE id = '${user_id}'`)).toEqual([{ email: "pat@example.com", email_verified: 1 }]);
    expect(query(`SELECT role FROM memberships WHERE user_id = '${user_id}' AND account_id = '${account_id}'`)).toEqual([{ role: "admin" }]);
    const stored = query(`SELECT password FROM auth_accounts WHERE user_id = '${user_id}' AND provider_id = 'credential'`);
    expect(stored).toHaveLength(1);
    expect(String(stored[0]!.password)).not.toContain(password);
    const { verifyPassword } = await import("better-auth/crypto");
    expect(await verifyPassword({ hash: String(stored[0]!.password), password })).toBe(true);
    const again = admin("create-user", account_id, "pat@example.com");
    expect(again.status).toBe(2);
    expect(again.stderr).toMatch(/exists already/);
  }, 60_000);
});

describe("npm run admin: an account's data", () => {
  /** The local state's R2 bucket through a real binding, for one step (the admin command
   * opens the state itself in between). */
  async function withBucket<T>(fn: (bucket: { put(k: string, v: string): Promise<unknown>; head(k: string): Promise<unknown> }) => Promise<T>): Promise<T> {
    process.env.WRANGLER_LOG ??= "error";
    const { getPlatformProxy } = await import("wrangler");
    const proxy = await getPlatformProxy<{ BLOBS: { put(k: string, v: string): Promise<unknown>; head(k: string): Promise<unknown> } }>({ configPath: join(root, "wrangler.toml"), persist: { path: join(persist, "v3") } });
    try {
      return await fn(proxy.env.BLOBS);
    } finally {
      await proxy.dispose();
    }
  }

  it("exports an account without its secrets, then deletes it with its R2 objects and its user, leaving another account whole", async () => {
    const a = JSON.parse(admin("create-account", "Doomed").stdout) as { account_id: string; api_key: string };
    const b = JSON.parse(admin("create-account", "Kept").stdout) as { account_id: string };
    const user = JSON.parse(admin("create-user", a.account_id, "gone@example.com").stdout) as { user_id: string; password: string };
    const now = Date.now();
    const rows = (acct: string) => [
      `INSERT INTO domains (id, account_id, name, created_at) VALUES ('dom-${acct}', '${acct}', 'd-${acct}.example', ${now})`,
      `INSERT INTO dkim_keys (id, domain_id, account_id, selector, algorithm, public_key, private_key_sealed, state, created_at) VALUES ('dk-${acct}', 'dom-${acct}', '${acct}', 's1', 'rsa', 'PUBLIC-${acct}', 'SEALED-PRIVATE-${acct}', 'active', ${now})`,
      `INSERT INTO emails (id, account_id, from_address, to_json, subject, content_key, attachments_json, state, last_event, pending_json, message_id, created_at) VALUES ('em-${acct}', '${acct}', 'a@d.example', '["r@x.example"]', 'Hello ${acct}', 'emails/em-${acct}/body.json', '[{"key":"emails/em-${acct}/attachments/0"}]', 'done', 'delivered', '[]', 'm@d', ${now})`,
      `INSERT INTO email_events (id, email_id, account_id, type, created_at) VALUES ('ev-${acct}', 'em-${acct}', '${acct}', 'delivered', ${now})`,
      `INSERT INTO webhooks (id, account_id, endpoint, events_json, secret_sealed, created_at, updated_at) VALUES ('wh-${acct}', '${acct}', 'https://h.example/', '["email.sent"]', 'SEALED-WHSEC-${acct}', ${now}, ${now})`,
      `INSERT INTO suppressions (id, account_id, email, reason, created_at) VALUES ('sp-${acct}', '${acct}', 'no@x.example', 'manual', ${now})`,
      `INSERT INTO inbound_emails (id, account_id, from_address, to_json, subject, raw_key, size, content_key, created_at) VALUES ('in-${acct}', '${acct}', 'f@x.example', '["me@d.example"]', 'In', 'inbound/${acct}/in/raw.eml', 3, 'inbound/${acct}/in/content.json', ${now})`,
    ];
    query([...rows(a.account_id), ...rows(b.account_id)].join("; "));
    const keys = (acct: string) => [`emails/em-${acct}/body.json`, `emails/em-${acct}/attachments/0`, `inbound/${acct}/in/raw.eml`, `inbound/${acct}/in/content.json`];
    await withBucket(async (bucket) => {
      for (const k of [...keys(a.account_id), ...keys(b.account_id), `inbound/${a.account_id}/orphan/raw.eml`]) await bucket.put(k, `object ${k}`);
    });

    const file = join(persist, "export.json");
    const exported = admin("export-account", a.account_id, "--out", file);
    expect(exported.status, exported.stderr).toBe(0);
    const bytes = readFileSync(file, "utf8");
    const doc = JSON.parse(bytes) as { account: { name: string }; members: { email: string }[]; tables: Record<string, Record<string, unknown>[]> };
    expect(doc.account.name).toBe("Doomed");
    expect(doc.members.map((m) => m.email)).toEqual(["gone@example.com"]);
    expect(doc.tables.emails!.map((e) => e.subject)).toEqual([`Hello ${a.account_id}`]);
    expect(doc.tables.email_events).toHaveLength(1);
    expect(doc.tables.dkim_keys![0]!.public_key).toBe(`PUBLIC-${a.account_id}`);
    const token_hash = String(query(`SELECT token_hash FROM api_keys WHERE account_id = '${a.account_id}'`)[0]!.token_hash);
    const hash = String(query(`SELECT password FROM auth_accounts WHERE user_id = '${user.user_id}'`)[0]!.password);
    for (const secret of [`SEALED-PRIVATE-${a.account_id}`, `SEALED-WHSEC-${a.account_id}`, token_hash, hash, a.api_key, user.password, b.account_id]) expect(bytes.includes(secret), secret).toBe(false);

    const deleted = admin("delete-account", a.account_id);
    expect(deleted.status, deleted.stderr).toBe(0);
    expect(JSON.parse(deleted.stdout)).toMatchObject({ deleted: a.account_id, users: 1 });
    const { accountTables } = await import("../../worker/accounts/data.ts");
    // Every table's count of the account's rows in one statement (each wrangler call costs seconds).
    const tables = accountTables().filter((t) => !["email_links", "webhook_attempts"].includes(t));
    const count = (acct: string) => query(`SELECT ${tables.map((t) => `(SELECT COUNT(*) FROM ${t} WHERE ${t === "accounts" ? "id" : "account_id"} = '${acct}') AS ${t}`).join(", ")}`)[0]!;
    expect(Object.values(count(a.account_id)).every((n) => n === 0), JSON.stringify(count(a.account_id))).toBe(true);
    expect(query(`SELECT (SELECT COUNT(*) FROM auth_users WHERE id = '${user.user_id}') + (SELECT COUNT(*) FROM auth_accounts WHERE user_id = '${user.user_id}') AS n`)).toEqual([{ n: 0 }]);
    const kept = count(b.account_id);
    expect(kept).toMatchObject({ accounts: 1, api_keys: 1, emails: 1, email_events: 1, webhooks: 1, domains: 1, dkim_keys: 1, suppressions: 1, inbound_emails: 1 });
    await withBucket(async (bucket) => {
      for (const k of [...keys(a.account_id), `inbound/${a.account_id}/orphan/raw.eml`]) expect(await bucket.head(k), k).toBeNull();
      for (const k of keys(b.account_id)) expect(await bucket.head(k), k).not.toBeNull();
    });
  }, 300_000);

  it("writes values into statements for wrangler as SQL literals", async () => {
    const { inlineParams } = await import("../../ops/d1.ts");
    expect(inlineParams("SELECT ?, ?2, ?1, ?", ["it's", 2])).toBe("SELECT 'it''s', 2, 'it''s', 2");
    expect(inlineParams("DELETE FROM t WHERE a = ? AND b IS ?", ["x", null])).toBe("DELETE FROM t WHERE a = 'x' AND b IS NULL");
    expect(() => inlineParams("SELECT ?", [])).toThrow(/parameter 1/);
  });

  it("runs statements and deletes objects through wrangler, the seams --remote uses", async () => {
    const { wranglerRunner, wranglerBlobs } = await import("../../ops/admin.ts");
    const target = ["--local", "--persist-to", persist];
    expect(await wranglerRunner(target).all("SELECT ? AS v, ?2 AS n", ["it's", 7])).toEqual([{ v: "it's", n: 7 }]);
    await withBucket(async (bucket) => {
      await bucket.put("seam/one", "x");
    });
    await wranglerBlobs(target).delete(["seam/one"]);
    await withBucket(async (bucket) => expect(await bucket.head("seam/one")).toBeNull());
  }, 120_000);
});
