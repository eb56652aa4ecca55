// The operator commands act on a real local D1 state, through wrangler.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
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
