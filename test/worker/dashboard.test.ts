// The dashboard's rules inside workerd: its Emails search finds what it should, the password policy,
// the sign-in throttle, and the doors (origin, session, API keys) in front of every page.
import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { searchEmails, searchQuery, type EmailFilters } from "../../worker/dashboard/email-search.ts";
import { passwordProblem } from "../../worker/dashboard/passwords.ts";
import { LIMITS, countAttempt } from "../../worker/dashboard/throttle.ts";
import { sendDashboardMail } from "../../worker/dashboard/mail.ts";

const ACCOUNT = "00000000-0000-4000-8000-00000000a001";

describe("the Emails page's search", () => {
  // Each filter's query plan is checked in test/worker/query-plans.test.ts.
  it("finds an address's emails through email_recipients (to, cc, bcc, any case or display name) and each status's, newest first", async () => {
    const account = "00000000-0000-4000-8000-00000000a002";
    const other = "00000000-0000-4000-8000-00000000a003";
    const id = (n: number) => `01a20f86-1a38-7307-9dc6-${String(n).padStart(12, "0")}`;
    const rows: [string, string, string, string, string, string][] = [
      [id(1), account, '["Ada <Ada@Example.com>"]', "[]", "[]", "delivered"],
      [id(2), account, '["bob@example.com"]', '["ada@example.com"]', "[]", "bounced"],
      [id(3), account, '["bob@example.com"]', "[]", '["ADA@example.com"]', "delivered"],
      [id(4), account, '["bob@example.com"]', "[]", "[]", "bounced"],
      [id(5), other, '["ada@example.com"]', "[]", "[]", "bounced"],
    ];
    await env.DB.batch([
      env.DB.prepare("INSERT INTO accounts (id, name, created_at) VALUES (?, 'A', 0), (?, 'B', 0)").bind(account, other),
      ...rows.map(([i, a, to, cc, bcc, status]) => env.DB.prepare(
        "INSERT INTO emails (id, account_id, from_address, to_json, cc_json, bcc_json, subject, state, last_event, pending_json, message_id, created_at) VALUES (?, ?, 'x@d.example', ?, ?, ?, 's', 'done', ?, '[]', 'm', 0)",
      ).bind(i, a, to, cc, bcc, status)),
    ]);
    const ids = async (f: EmailFilters, after?: string) => (await searchEmails(env.DB, account, f, { limit: 2, after })).data.map((e) => e.id);
    expect(await ids({ q: "ada@example.com" })).toEqual([id(3), id(2)]);
    expect(await ids({ q: "Ada <ADA@example.COM>" }, id(2))).toEqual([id(1)]);
    expect(await ids({ q: "ada@example.com", status: "bounced" })).toEqual([id(2)]);
    expect(await ids({ status: "bounced" })).toEqual([id(4), id(2)]);
    const page = await searchEmails(env.DB, account, { status: "delivered" }, { limit: 1 });
    expect(page.has_more).toBe(true);
    expect(page.data[0]).toMatchObject({ id: id(3), to: ["bob@example.com"], last_event: "delivered", created_at: new Date(0).toISOString() });
    // Deleting emails (the purge, account deletion) takes their recipients with them.
    await env.DB.prepare("DELETE FROM emails WHERE account_id = ?").bind(account).run();
    const left = await env.DB.prepare("SELECT count(*) AS n FROM email_recipients WHERE account_id = ?").bind(account).first<{ n: number }>();
    expect(left?.n).toBe(0);
  });

  it("refuses malformed dates with a message instead of ignoring them", () => {
    expect(searchQuery(env.DB, ACCOUNT, { from: "24/11/2026" }, { limit: 25 }).error).toBe("Dates must be written YYYY-MM-DD.");
  });
});

describe("passwords", () => {
  it("refuses short, common and trivial passwords and accepts a long uncommon one", () => {
    expect(passwordProblem("short")).toMatch(/at least 10/);
    expect(passwordProblem("password123")).toMatch(/common/);
    expect(passwordProblem("Qwertyuiop")).toMatch(/common/);
    expect(passwordProblem("aaaaaaaaaaaa")).toMatch(/repeated/);
    expect(passwordProblem("ada@example.com", "ada@example.com")).toMatch(/email/);
    expect(passwordProblem("correct-horse-battery-staple-42")).toBeNull();
  });
});

describe("the sign-in throttle", () => {
  it("allows a few attempts per address, then refuses until the window ends; the IP has its own count", async () => {
    const now = Date.UTC(2026, 10, 24, 12, 0, 0);
    const ip = "203.0.113.50";
    for (let i = 0; i < LIMITS.email; i++) expect(await countAttempt(env.DB, { email: "target@example.com", ip }, now)).toBeNull();
    const refused = await countAttempt(env.DB, { email: "Target@Example.com", ip }, now + 1000);
    expect(refused?.retryAfter).toBeGreaterThan(0);
    // Another address from the same IP is still allowed (the IP's limit is larger).
    expect(await countAttempt(env.DB, { email: "other@example.com", ip }, now + 2000)).toBeNull();
    // The next window starts afresh.
    expect(await countAttempt(env.DB, { email: "target@example.com", ip }, now + 16 * 60_000)).toBeNull();
  });
});

describe("the dashboard's doors", () => {
  const base = "https://t.tern.test";
  it("sends people without a session to the sign-in page and answers its endpoints 401, API key or not", async () => {
    const page = await exports.default.fetch(`${base}/dashboard/emails`, { redirect: "manual" });
    expect(page.status).toBe(303);
    expect(page.headers.get("location")).toBe("/dashboard/sign-in");
    const api = await exports.default.fetch(`${base}/dashboard/api/api-keys`, { method: "POST", headers: { origin: base, authorization: "Bearer tern_" + "a".repeat(40), "content-type": "application/json" }, body: "{}" });
    expect(api.status).toBe(401);
  });

  it("refuses state-changing requests from another origin before anything runs", async () => {
    const res = await exports.default.fetch(`${base}/dashboard/api/auth/sign-up/email`, {
      method: "POST",
      headers: { origin: "https://evil.example", "content-type": "application/json" },
      body: JSON.stringify({ name: "Eve", email: "eve@example.com", password: "correct-horse-battery-staple-42" }),
    });
    expect(res.status).toBe(403);
    const users = await env.DB.prepare("SELECT count(*) AS n FROM auth_users WHERE email = 'eve@example.com'").first<{ n: number }>();
    expect(users?.n).toBe(0);
  });

  it("exposes only the better-auth endpoints the dashboard uses", async () => {
    for (const path of ["list-sessions", "get-session", "delete-user", "update-user", "change-email", "list-accounts"]) {
      expect((await exports.default.fetch(`${base}/dashboard/api/auth/${path}`)).status, path).toBe(404);
    }
  });

  it("serves pages with a strict content security policy and no caching", async () => {
    const res = await exports.default.fetch(`${base}/dashboard/sign-in`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-security-policy")).toContain("script-src 'self'");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(await res.text()).toMatch(/^<!doctype html>/);
  });
});

describe("the dashboard's own mail", () => {
  const mail = { to: "x@example.com", subject: "s", text: "t", html: "<p>t</p>" };
  it("needs its account configured, and refuses an account people can open (its Emails hold sign-in links)", async () => {
    await expect(sendDashboardMail({ ...env, DASHBOARD_MAIL_ACCOUNT: "", DASHBOARD_MAIL_FROM: "" }, mail)).rejects.toThrow(/DASHBOARD_MAIL_ACCOUNT and DASHBOARD_MAIL_FROM/);
    const account = "00000000-0000-4000-8000-00000000b001";
    const user = "00000000-0000-4000-8000-00000000b002";
    await env.DB.batch([
      env.DB.prepare("INSERT INTO accounts (id, name, created_at) VALUES (?, 'Shared', 0)").bind(account),
      env.DB.prepare("INSERT INTO auth_users (id, name, email, email_verified, created_at, updated_at) VALUES (?, 'U', 'u@example.com', 1, 0, 0)").bind(user),
      env.DB.prepare("INSERT INTO memberships (account_id, user_id, role, created_at) VALUES (?, ?, 'owner', 0)").bind(account, user),
    ]);
    await expect(sendDashboardMail({ ...env, DASHBOARD_MAIL_ACCOUNT: account, DASHBOARD_MAIL_FROM: "t@tern.test" }, mail)).rejects.toThrow(/no dashboard user belongs to/);
    const sent = await env.DB.prepare("SELECT count(*) AS n FROM emails WHERE account_id = ?").bind(account).first<{ n: number }>();
    expect(sent?.n).toBe(0);
  });
});
