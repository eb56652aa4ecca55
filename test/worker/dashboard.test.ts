// The dashboard's rules inside workerd: its Emails search finds what it should, the password policy,
// the sign-in throttle, the doors (origin, session, API keys) in front of every page, and the
// endpoints of the Contacts (imports and their failed rows included), Webhooks and Suppressions pages.
import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { drizzle } from "drizzle-orm/d1";
import * as OTPAuth from "otpauth";
import { describe, expect, it, vi } from "vitest";
import { searchEmails, searchQuery, type EmailFilters } from "../../worker/dashboard/email-search.ts";
import { passwordProblem } from "../../worker/dashboard/passwords.ts";
import { LIMITS, countAttempt, ipKey } from "../../worker/dashboard/throttle.ts";
import { sendDashboardMail } from "../../worker/dashboard/mail.ts";
import { acceptInvitation, findInvitation, inviteToAccount } from "../../worker/dashboard/invitations.ts";
import worker from "../../worker/index.ts";
import { signedIn, type DashboardRole } from "./dashboard-session.ts";
import { INVITATIONS_PER_DAY, withoutTokens } from "../../worker/dashboard/routes.tsx";
import { hashToken } from "../../worker/api-key-token.ts";
import { storedSessionToken } from "../../worker/dashboard/session-tokens.ts";
import { csrfToken } from "../../worker/dashboard/viewer.ts";
import { addKey, api, createAccount, listen } from "./fixtures.ts";
import { rollupItem } from "../../worker/metrics/rollup.ts";
import { failLookups, publishRecords, type DomainRecord } from "./zone.ts";

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
    expect(res.headers.get("cross-origin-opener-policy")).toBe("same-origin");
    expect(res.headers.get("permissions-policy")).toContain("camera=()");
    expect(res.headers.get("strict-transport-security")).toBe("max-age=31536000");
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

// ---- Contacts, suppressions and received mail through the dashboard's endpoints ------------

const DASH = "https://t.tern.test";

/** A signed-in person (test/worker/dashboard-session.ts), with page reads and endpoint posts. */
async function person(role: DashboardRole, accountId?: string) {
  const me = await signedIn(role, accountId);
  const { cookie, csrf } = me;
  const get = (path: string) => exports.default.fetch(`${DASH}${path}`, { headers: { cookie } });
  /** opts.env: the Worker called with these settings over the test's (dashboard mail, say). */
  const post = (path: string, body: unknown, opts: { csrf?: string | null; type?: string; env?: Partial<Env> } = {}) => {
    const init = {
      method: "POST",
      headers: { cookie, origin: DASH, ...(opts.csrf === null ? {} : { "x-csrf-token": opts.csrf ?? csrf }), ...(body instanceof FormData ? {} : { "content-type": "application/json" }) },
      body: body instanceof FormData ? body : JSON.stringify(body),
    };
    if (!opts.env) return exports.default.fetch(`${DASH}/dashboard/api${path}`, init);
    return worker.fetch(new Request(`${DASH}/dashboard/api${path}`, init), { ...env, ...opts.env }, createExecutionContext());
  };
  return { ...me, get, post };
}

/** The session better-auth set in `res` (it renews one when TOTP is turned on), with its CSRF
 * token, posting as person() does. */
async function renewedSession(res: Response) {
  const set = res.headers.getSetCookie().find((c) => /^__Secure-tern\.session_token=[^;]/.test(c))!;
  const cookie = set.split(";")[0]!;
  const token = decodeURIComponent(cookie.slice(cookie.indexOf("=") + 1)).split(".")[0]!;
  const row = (await env.DB.prepare("SELECT id FROM auth_sessions WHERE token = ?").bind(await storedSessionToken(token)).first<{ id: string }>())!;
  const csrf = await csrfToken(env, row.id);
  const post = (path: string, body: unknown) => exports.default.fetch(`${DASH}/dashboard/api${path}`, {
    method: "POST", headers: { cookie, origin: DASH, "x-csrf-token": csrf, "content-type": "application/json" }, body: JSON.stringify(body),
  });
  return { cookie, csrf, post };
}

const count = async (sql: string, ...args: unknown[]) => (await env.DB.prepare(sql).bind(...args).first<{ n: number }>())!.n;
/** The contact events an account's endpoints hear (it gets one that listens to all). */
const heard = async (account: string) => listen({ token: await addKey(account, "full_access") });
const eventsOf = async (account: string) =>
  (await env.DB.prepare("SELECT type FROM webhook_events WHERE account_id = ? ORDER BY id").bind(account).all<{ type: string }>()).results.map((r) => r.type);

describe("the Contacts pages' endpoints", () => {
  it("let a member add, edit, file and remove a contact through the services, with the API's events", async () => {
    const owner = await person("owner");
    await heard(owner.account);
    const member = await person("member", owner.account);
    expect((await owner.post("/segments", { name: "Readers" })).status).toBe(201);
    const segment = (await env.DB.prepare("SELECT id FROM segments WHERE account_id = ?").bind(owner.account).first<{ id: string }>())!.id;
    expect((await owner.post("/topics", { name: "News", default_subscription: "opt_in", visibility: "public" })).status).toBe(201);
    const topic = (await env.DB.prepare("SELECT id FROM topics WHERE account_id = ?").bind(owner.account).first<{ id: string }>())!.id;
    expect((await owner.post("/contact-properties", { key: "plan", type: "number", fallback_value: "1" })).status).toBe(201);

    const created = await member.post("/contacts", { email: "Ada@Example.com", first_name: "Ada", segments: [segment] });
    expect(created.status).toBe(201);
    const { id } = await created.json<{ id: string }>();
    const edited = await member.post(`/contacts/${id}`, { first_name: "Ada", last_name: "Lovelace", unsubscribed: true, "properties.plan": "3" });
    expect(edited.status).toBe(200);
    const row = (await env.DB.prepare("SELECT * FROM contacts WHERE id = ?").bind(id).first<Record<string, unknown>>())!;
    expect(row).toMatchObject({ email: "ada@example.com", last_name: "Lovelace", unsubscribed: 1, properties_json: '{"plan":3}' });
    expect((await member.post(`/contacts/${id}/segments`, { segments: [] })).status).toBe(200);
    expect(await count("SELECT count(*) AS n FROM contact_segments WHERE contact_id = ?", id)).toBe(0);
    expect((await member.post(`/contacts/${id}/topics`, { [`topics.${topic}`]: "opt_out" })).status).toBe(200);
    expect(await count("SELECT count(*) AS n FROM contact_topics WHERE contact_id = ? AND subscription = 'opt_out'", id)).toBe(1);

    // Found by part of its name, and within its segment filter only while it is in it.
    expect(await (await owner.get("/dashboard/contacts?q=lovel")).text()).toContain("ada@example.com");
    expect(await (await owner.get(`/dashboard/contacts?segment=${segment}`)).text()).toContain("No contact matches.");
    const contactPage = await (await owner.get(`/dashboard/contacts/${id}`)).text();
    expect(contactPage).toContain("Lovelace");
    // Its three forms save alike: outlined, as every form that edits something saves.
    for (const save of ["Save changes", "Save segments", "Save topics"]) expect(contactPage).toContain(`<button type="submit" class="secondary">${save}</button>`);
    // The audit log reads the topic choice by the topic's name, not as the JSON it keeps.
    const log = await (await owner.get("/dashboard/audit-log")).text();
    expect(log).toContain("topic News: opted out");
    expect(log).not.toContain("&quot;subscription&quot;");
    expect((await env.DB.prepare("SELECT detail_json FROM audit_log WHERE account_id = ? AND action = 'contact.topics_changed'").bind(owner.account).first<{ detail_json: string }>())!.detail_json)
      .toBe(JSON.stringify({ topics: [{ id: topic, subscription: "opt_out" }] }));

    expect((await member.post(`/contacts/${id}/delete`, {})).status).toBe(200);
    expect(await count("SELECT count(*) AS n FROM contacts WHERE id = ?", id)).toBe(0);
    expect(await eventsOf(owner.account)).toEqual(["contact.created", "contact.updated", "contact.updated", "contact.updated", "contact.deleted"]);
    const audit = (await env.DB.prepare("SELECT action FROM audit_log WHERE account_id = ? AND user_id = ? ORDER BY id").bind(owner.account, member.user).all<{ action: string }>()).results.map((r) => r.action);
    expect(audit).toEqual(["contact.created", "contact.updated", "contact.segments_changed", "contact.topics_changed", "contact.deleted"]);
  });

  it("refuses a missing or forged CSRF token and another account's contact, changing nothing", async () => {
    const a = await person("owner");
    await heard(a.account);
    const b = await person("owner");
    const { id } = await (await a.post("/contacts", { email: "mine@example.com" })).json<{ id: string }>();
    expect((await a.post("/contacts", { email: "x@example.com" }, { csrf: null })).status).toBe(403);
    expect((await a.post("/contacts", { email: "x@example.com" }, { csrf: "forged" })).status).toBe(403);
    for (const path of [`/contacts/${id}`, `/contacts/${id}/topics`, `/contacts/${id}/segments`, `/contacts/${id}/delete`]) {
      const res = await b.post(path, { first_name: "Eve", segments: [] });
      expect(res.status, path).toBe(404);
    }
    expect((await b.get(`/dashboard/contacts/${id}`)).status).toBe(404);
    expect(await (await b.get("/dashboard/contacts?q=mine")).text()).not.toContain("mine@example.com");
    expect(await count("SELECT count(*) AS n FROM contacts WHERE account_id = ?", a.account)).toBe(1);
    expect((await env.DB.prepare("SELECT first_name FROM contacts WHERE id = ?").bind(id).first<{ first_name: string | null }>())!.first_name).toBeNull();
    expect(await eventsOf(a.account)).toEqual(["contact.created"]);
  });

  it("answers bad input with a message that says how to fix it, and changes nothing", async () => {
    const p = await person("member");
    await heard(p.account);
    const bad: [string, unknown, RegExp][] = [
      ["/contacts", { email: "not-an-address" }, /email address like/],
      ["/contacts", { email: "a@example.com", segments: ["00000000-0000-4000-8000-000000000000"] }, /segment .* which this account does not have/],
      ["/contacts", { email: "a@example.com", "first_name": "A\u0000" }, /control character/],
      ["/segments", { name: "  " }, /must not be empty/],
      ["/topics", { name: "T", default_subscription: "sometimes" }, /opt_in/],
      ["/contact-properties", { key: "bad key", type: "string" }, /letters, digits or underscores/],
      ["/contact-properties", { key: "n", type: "number", fallback_value: "many" }, /write a number/],
    ];
    for (const [path, body, message] of bad) {
      const res = await p.post(path, body);
      expect(res.status, path).toBe(422);
      expect((await res.json<{ message: string }>()).message, path).toMatch(message);
    }
    const { id } = await (await p.post("/contacts", { email: "b@example.com" })).json<{ id: string }>();
    await p.post("/contact-properties", { key: "seats", type: "number" });
    const res = await p.post(`/contacts/${id}`, { "properties.seats": "lots" });
    expect(res.status).toBe(422);
    expect((await res.json<{ message: string }>()).message).toMatch(/seats is a number property/);
    const unknown = await p.post(`/contacts/${id}`, { "properties.nope": "x" });
    expect((await unknown.json<{ message: string }>()).message).toMatch(/not a contact property of this account/);
    const topic = await (await p.post("/topics", { name: "T", default_subscription: "opt_out" })).json<{ id: string }>();
    const fixed = await p.post(`/topics/${topic.id}`, { name: "T2", default_subscription: "opt_in" });
    expect(fixed.status).toBe(422);
    expect((await fixed.json<{ message: string }>()).message).toMatch(/fixed when a topic is created/);
    expect(await count("SELECT count(*) AS n FROM contacts WHERE account_id = ?", p.account)).toBe(1);
    expect(await count("SELECT count(*) AS n FROM segments WHERE account_id = ?", p.account)).toBe(0);
    expect(await count("SELECT count(*) AS n FROM topics WHERE account_id = ? AND name = 'T'", p.account)).toBe(1);
    expect(await eventsOf(p.account)).toEqual(["contact.created"]);
  });

  it("imports a CSV file through the imports service, and refuses a map naming a missing column", async () => {
    const p = await person("member");
    const form = (map: unknown) => {
      const f = new FormData();
      f.set("file", new File(["E-mail,Given\nx@example.com,X\ny@example.com,Y\n"], "people.csv", { type: "text/csv" }));
      f.set("column_map", JSON.stringify(map));
      f.set("on_conflict", "upsert");
      return f;
    };
    const wrong = await p.post("/contacts/imports", form({ email: "email" }));
    expect(wrong.status).toBe(422);
    expect((await wrong.json<{ message: string }>()).message).toMatch(/column "email", which the file's header row does not have/);
    expect(await count("SELECT count(*) AS n FROM contact_imports WHERE account_id = ?", p.account)).toBe(0);
    const ok = await p.post("/contacts/imports", form({ email: "E-mail", first_name: "Given" }));
    expect(ok.status).toBe(201);
    const { id } = await ok.json<{ id: string }>();
    const { runImport } = await import("../../worker/contacts/imports.ts");
    while (await runImport(env, id));
    expect(await count("SELECT count(*) AS n FROM contacts WHERE account_id = ? AND first_name IN ('X', 'Y')", p.account)).toBe(2);
    // An imported contact in a segment is removed with its membership.
    const seg = await (await p.post("/segments", { name: "After" })).json<{ id: string }>();
    const x = (await env.DB.prepare("SELECT id FROM contacts WHERE account_id = ? AND email = 'x@example.com'").bind(p.account).first<{ id: string }>())!.id;
    expect((await p.post(`/contacts/${x}/segments`, { segments: [seg.id] })).status).toBe(200);
    const removed = await p.post(`/contacts/${x}/delete`, {});
    expect(removed.status, await removed.clone().text()).toBe(200);
    expect(await count("SELECT count(*) AS n FROM contact_segments WHERE contact_id = ?", x)).toBe(0);
    const html = await (await p.get("/dashboard/contacts/imports")).text();
    expect(html).toContain(`data-import-id="${id}"`);
    expect(html).toMatch(/badge completed/);
  });

  it("shows an import's failed rows with why, downloadable as CSV with no formula left live; other accounts see nothing", async () => {
    const p = await person("member");
    const stranger = await person("owner");
    const { runImport } = await import("../../worker/contacts/imports.ts");
    const upload = (csv: string) => {
      const f = new FormData();
      f.set("file", new File([csv], "people.csv", { type: "text/csv" }));
      return p.post("/contacts/imports", f);
    };
    const res = await upload(["email", "ok@example.com", "=cmd|' /C calc'!A0", "+1 555", "-2", "@SUM(A1)", "\tx", ...Array.from({ length: 110 }, (_, i) => `nope-${i}`)].join("\n"));
    expect(res.status, await res.clone().text()).toBe(201);
    const { id } = await res.json<{ id: string }>();
    while (await runImport(env, id));
    const list = await (await p.get("/dashboard/contacts/imports")).text();
    expect(list).toContain(`href="/dashboard/contacts/imports/${id}#failures"`);
    const html = await (await p.get(`/dashboard/contacts/imports/${id}`)).text();
    expect(html).toContain("116 read: 1 created, 0 updated, 0 skipped, 115 failed");
    expect(html).toMatch(/<td>3<\/td><td class="mono">=cmd\|&#39; \/C calc&#39;!A0<\/td><td>Not a valid email address/);
    expect(html).toContain("And 15 more failed rows");
    const csv = await p.get(`/dashboard/contacts/imports/${id}/failures.csv`);
    expect(csv.headers.get("content-type")).toBe("text/csv; charset=utf-8");
    expect(csv.headers.get("content-disposition")).toMatch(/^attachment; filename="import-.*-failed-rows\.csv"$/);
    const lines = (await csv.text()).split("\r\n");
    expect(lines).toHaveLength(102);
    expect(lines.slice(0, 7)).toEqual([
      "row,value,reason",
      "3,'=cmd|' /C calc'!A0,Not a valid email address (like name@example.com).",
      "4,'+1 555,Not a valid email address (like name@example.com).",
      "5,'-2,Not a valid email address (like name@example.com).",
      "6,'@SUM(A1),Not a valid email address (like name@example.com).",
      "7,x,Not a valid email address (like name@example.com).",
      "8,nope-0,Not a valid email address (like name@example.com).",
    ]);
    const { csvCell } = await import("../../worker/csv.ts");
    expect([csvCell("\tx"), csvCell("\rx"), csvCell('a,"b"'), csvCell(-3), csvCell("plain")]).toEqual(['"\'\tx"', '"\'\rx"', '"a,""b"""', "-3", "plain"]);
    // Split on ";" (Excel in most European locales) or a tab, no piece starts a formula.
    expect([csvCell("x;=cmd|' /C calc'!A0"), csvCell("a,+1;b\t@SUM(1)"), csvCell("a;b"), csvCell("x\n=HYPERLINK(1)")]).toEqual([`"x;'=cmd|' /C calc'!A0"`, `"a,'+1;b\t'@SUM(1)"`, '"a;b"', `"x\n'=HYPERLINK(1)"`]);
    // Another account's import is not there, as a page or as a file.
    expect((await stranger.get(`/dashboard/contacts/imports/${id}`)).status).toBe(404);
    expect((await stranger.get(`/dashboard/contacts/imports/${id}/failures.csv`)).status).toBe(404);
    // Past the retention window the purge lets the failed rows go (test/worker/retention.test.ts):
    // the page keeps the counts and says why the rows are not there.
    await env.DB.prepare("UPDATE contact_imports SET failures_json = NULL WHERE id = ?").bind(id).run();
    const later = await (await p.get(`/dashboard/contacts/imports/${id}`)).text();
    expect(later).toContain("116 read: 1 created, 0 updated, 0 skipped, 115 failed");
    expect(later).toContain("115 rows failed; those rows are no longer kept.");
    expect(later).toContain("as long as it keeps sent mail, 30 days");
  });

  it("reads a chosen file's columns by the upload's rules, refusing a binary file with what to do", async () => {
    const p = await person("member");
    const head = (bytes: string | Uint8Array, partial = false) => {
      const f = new FormData();
      f.set("file", new File([bytes], "x.csv"));
      if (partial) f.set("partial", "1");
      return f;
    };
    const ok = await p.post("/contacts/imports/inspect", head("\ufeffE-mail;First name\nx@example.com;X\n"));
    expect(await ok.json()).toEqual({ columns: ["E-mail", "First name"] });
    // A head cut inside a character is no error.
    const cut = new TextEncoder().encode("email,pr\u00e9nom\n");
    expect(await (await p.post("/contacts/imports/inspect", head(cut.slice(0, 9), true))).json()).toEqual({ columns: ["email", "pr"] });
    const png = await p.post("/contacts/imports/inspect", head(new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0x0d])));
    expect(png.status).toBe(422);
    expect((await png.json<{ message: string }>()).message).toMatch(/not a CSV text file.*CSV UTF-8/);
    expect((await p.post("/contacts/imports/inspect", head("email\n"), { csrf: null })).status).toBe(403);
    // More than a file's head is refused as it is read, never parsed whole.
    const big = await p.post("/contacts/imports/inspect", head("email\n" + "x@example.com\n".repeat(10_000)));
    expect([big.status, (await big.json<{ message: string }>()).message]).toEqual([413, "Send at most the file's first 64 KB."]);
  });

  it("a JSON body past the dashboard's limit is a 413 that changes nothing", async () => {
    const p = await person("owner");
    const before = await count("SELECT count(*) AS n FROM segments WHERE account_id = ?", p.account);
    const res = await p.post("/segments", { name: "Big", padding: "x".repeat(4 * 1024 * 1024) });
    expect([res.status, (await res.json<{ message: string }>()).message]).toEqual([413, "The request body must be at most 4 MB."]);
    expect(await count("SELECT count(*) AS n FROM segments WHERE account_id = ?", p.account)).toBe(before);
    expect((await p.post("/segments", { name: "Small" })).status).toBe(201);
    // A `__proto__` key is refused as the API refuses it, not dropped.
    const proto = await p.post("/contacts", JSON.parse('{"email":"proto@example.com","properties.__proto__":"x","x":{"__proto__":1}}'));
    expect([proto.status, (await proto.json<{ message: string }>()).message]).toEqual([422, "`__proto__` cannot be used as a name (of a property, header, variable or any other key)."]);
  });

  it("lists any number of contacts a page at a time, newest first", async () => {
    const p = await person("member");
    const { createContact } = await import("../../worker/contacts/contacts.ts");
    for (let i = 0; i < 30; i++) await createContact(env, p.account, { email: `c${String(i).padStart(2, "0")}@example.com` }, Date.now() + i);
    const first = await (await p.get("/dashboard/contacts")).text();
    expect(first).toContain("c29@example.com");
    expect(first).not.toContain("c04@example.com");
    const older = first.match(/href="(\/dashboard\/contacts\?after=[^"]+)"/)![1]!;
    const second = await (await p.get(older.replace(/&amp;/g, "&"))).text();
    expect(second).toContain("c04@example.com");
    expect(second).not.toContain("c29@example.com");
  });

  it("walks an index for a search, with or without a segment", async () => {
    const { contactsQuery } = await import("../../worker/contacts/contacts.ts");
    const p = await person("member");
    const seg = await (await p.post("/segments", { name: "S" })).json<{ id: string }>();
    for (const segment of [undefined, seg.id]) {
      const { query } = (await contactsQuery(env.DB, p.account, { limit: 25, after: "01a20f86-1a38-7307-9dc6-c29aa74bf40f" }, segment, "ada"))!;
      const { sql, params } = query.toSQL();
      const plan = (await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`).bind(...params).all<{ detail: string }>()).results.map((r) => r.detail).join("\n");
      expect(plan).toMatch(/SEARCH (contacts|contact_segments) USING (COVERING )?(INDEX contacts_account|INDEX sqlite_autoindex_contact_segments_1)/);
      expect(plan).not.toMatch(/SCAN contacts|SCAN contact_segments|TEMP B-TREE/);
    }
  });
});

describe("the Webhooks pages' edit form", () => {
  const hookRow = (id: string) => env.DB.prepare("SELECT endpoint, events_json, status FROM webhooks WHERE id = ?").bind(id).first<{ endpoint: string; events_json: string; status: string }>();

  it("changes the URL, the events and the status through the API's service, with an audit entry; the pages say 1 event", async () => {
    const owner = await person("owner");
    const created = await owner.post("/webhooks", { endpoint: "https://hooks.example.com/a", events: ["email.sent"] });
    expect(created.status).toBe(201);
    const { id } = await created.json<{ id: string }>();
    expect(await (await owner.get("/dashboard/webhooks")).text()).toContain("1 event<");
    const page = await (await owner.get(`/dashboard/webhooks/${id}`)).text();
    expect(page).toContain(`data-api="/dashboard/api/webhooks/${id}"`);
    expect(page).toContain("All contact events");

    const saved = await owner.post(`/webhooks/${id}`, { endpoint: "https://hooks.example.com/b", events: ["email.bounced", "contact.created", "email.bounced"], enabled: false });
    expect(saved.status, await saved.clone().text()).toBe(200);
    expect(await hookRow(id)).toEqual({ endpoint: "https://hooks.example.com/b", events_json: '["email.bounced","contact.created"]', status: "disabled" });
    expect(await (await owner.get("/dashboard/webhooks")).text()).toContain("2 events<");
    const audit = await env.DB.prepare("SELECT target, detail_json FROM audit_log WHERE account_id = ? AND action = 'webhook.updated'").bind(owner.account).first<{ target: string; detail_json: string }>();
    expect(audit?.target).toBe(id);
    expect(JSON.parse(audit!.detail_json)).toEqual({ endpoint: "https://hooks.example.com/b", events: ["email.bounced", "contact.created"], status: "disabled" });
    // Enabling again from the form.
    expect((await owner.post(`/webhooks/${id}`, { endpoint: "https://hooks.example.com/b", events: ["email.bounced"], enabled: true })).status).toBe(200);
    expect((await hookRow(id))?.status).toBe("enabled");
  });

  it("refuses a private or non-https URL (as production runs) and no events with the API's message, changing nothing", async () => {
    const owner = await person("owner");
    const { id } = await (await owner.post("/webhooks", { endpoint: "https://hooks.example.com/keep", events: ["email.sent"] })).json<{ id: string }>();
    const production = { WEBHOOK_ALLOW_PRIVATE_TARGETS: "false", TERN_DEV_MODE: "false" };
    const bad: [unknown, RegExp][] = [
      [{ endpoint: "https://10.0.0.1/hook", events: ["email.sent"], enabled: true }, /`endpoint` must point to a public host/],
      [{ endpoint: "https://169.254.169.254/latest", events: ["email.sent"], enabled: true }, /public host/],
      [{ endpoint: "http://hooks.example.com/plain", events: ["email.sent"], enabled: true }, /must use https/],
      [{ endpoint: "not a url", events: ["email.sent"], enabled: true }, /endpoint/],
      [{ endpoint: "https://hooks.example.com/x", events: [], enabled: true }, /at least one event type/],
      [{ endpoint: "https://hooks.example.com/x", events: ["email.nope"], enabled: true }, /must be one of/],
    ];
    for (const [input, message] of bad) {
      const res = await owner.post(`/webhooks/${id}`, input, { env: production });
      expect(res.status, JSON.stringify(input)).toBe(422);
      expect((await res.json<{ message: string }>()).message, JSON.stringify(input)).toMatch(message);
    }
    expect(await hookRow(id)).toEqual({ endpoint: "https://hooks.example.com/keep", events_json: '["email.sent"]', status: "enabled" });
    expect(await count("SELECT count(*) AS n FROM audit_log WHERE account_id = ? AND action = 'webhook.updated'", owner.account)).toBe(0);
  });

  it("refuses a missing CSRF token, a member, and another account's webhook id, changing nothing", async () => {
    const owner = await person("owner");
    const member = await person("member", owner.account);
    const stranger = await person("owner");
    const { id } = await (await owner.post("/webhooks", { endpoint: "https://hooks.example.com/mine", events: ["email.sent"] })).json<{ id: string }>();
    const change = { endpoint: "https://evil.example.com/steal", events: ["email.received"], enabled: true };
    expect((await owner.post(`/webhooks/${id}`, change, { csrf: null })).status).toBe(403);
    expect((await owner.post(`/webhooks/${id}`, change, { csrf: "forged" })).status).toBe(403);
    expect((await member.post(`/webhooks/${id}`, change)).status).toBe(403);
    const theirs = await stranger.post(`/webhooks/${id}`, change);
    expect(theirs.status).toBe(404);
    expect((await theirs.json<{ message: string }>()).message).toBe("Webhook not found.");
    expect((await stranger.get(`/dashboard/webhooks/${id}`)).status).toBe(404);
    expect(await hookRow(id)).toEqual({ endpoint: "https://hooks.example.com/mine", events_json: '["email.sent"]', status: "enabled" });
    expect(await count("SELECT count(*) AS n FROM audit_log WHERE action = 'webhook.updated' AND target = ?", id)).toBe(0);
  });
});

describe("the Suppressions page's endpoints", () => {
  it("searches, adds, edits the note and removes for owners and admins; members may not", async () => {
    const owner = await person("owner");
    const member = await person("member", owner.account);
    expect((await member.post("/suppressions", { email: "no@example.com" })).status).toBe(403);
    const added = await owner.post("/suppressions", { email: "gone@example.com", detail: "asked" });
    expect(added.status).toBe(201);
    const { id } = await added.json<{ id: string }>();
    await owner.post("/suppressions", { email: "other@example.com" });
    const found = await (await owner.get("/dashboard/suppressions?q=gone")).text();
    expect(found).toContain("gone@example.com");
    expect(found).not.toContain("other@example.com");
    expect((await member.post(`/suppressions/${id}/note`, { detail: "x" })).status).toBe(403);
    expect((await owner.post(`/suppressions/${id}/note`, { detail: 5 })).status).toBe(422);
    expect((await owner.post(`/suppressions/${id}/note`, { detail: "asked by phone" })).status).toBe(200);
    expect((await env.DB.prepare("SELECT detail FROM suppressions WHERE id = ?").bind(id).first<{ detail: string }>())!.detail).toBe("asked by phone");
    const stranger = await person("owner");
    expect((await stranger.post(`/suppressions/${id}/note`, { detail: "mine now" })).status).toBe(404);
    expect((await stranger.post(`/suppressions/${id}/remove`, {})).status).toBe(404);
    expect((await owner.post(`/suppressions/${id}/remove`, {})).status).toBe(200);
    expect(await count("SELECT count(*) AS n FROM suppressions WHERE account_id = ?", owner.account)).toBe(1);
  });
});

describe("received mail's attachments in the dashboard", () => {
  it("streams an attachment to a signed-in member of its account as a download, and to nobody else", async () => {
    const p = await person("member");
    const id = crypto.randomUUID();
    const att = crypto.randomUUID();
    const key = `inbound/${id}/${att}`;
    await env.BLOBS.put(key, "<script>alert(1)</script>");
    await env.BLOBS.put(`inbound/${id}/content.json`, JSON.stringify({ html: null, text: "hi", headers: [] }));
    await env.DB.prepare("INSERT INTO inbound_emails (id, account_id, from_address, to_json, subject, raw_key, size, content_key, attachments_json, created_at) VALUES (?, ?, 'a@example.org', '[\"in@example.test\"]', 'Files', ?, 10, ?, ?, ?)")
      .bind(id, p.account, `inbound/${id}/raw`, `inbound/${id}/content.json`, JSON.stringify([{ id: att, filename: 'report "final".html', content_type: "text/html", content_disposition: "attachment", content_id: null, size: 25, key }]), Date.now()).run();
    const pageHtml = await (await p.get(`/dashboard/received/${id}`)).text();
    expect(pageHtml).toContain(`/dashboard/api/received/${id}/attachments/${att}`);
    const res = await p.get(`/dashboard/api/received/${id}/attachments/${att}`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/octet-stream");
    expect(res.headers.get("content-disposition")).toBe(`attachment; filename*=UTF-8''${encodeURIComponent('report "final".html')}`);
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(await res.text()).toBe("<script>alert(1)</script>");
    const other = await person("owner");
    const refused = await other.get(`/dashboard/api/received/${id}/attachments/${att}`);
    expect(refused.status).toBe(404);
    expect(await refused.text()).not.toContain("alert");
    expect((await exports.default.fetch(`${DASH}/dashboard/api/received/${id}/attachments/${att}`)).status).toBe(401);
    expect((await p.get(`/dashboard/api/received/${id}/attachments/${crypto.randomUUID()}`)).status).toBe(404);
  });
});

describe("the Logs pages", () => {
  it("show every member the account's API requests, filtered, with the redacted bodies and the email a send made; nobody else", async () => {
    const { api, createAccount } = await import("./fixtures.ts");
    const { waitFor } = await import("./wait.ts");
    const t = await createAccount();
    const member = await person("member", t.accountId);
    const sent = await (await api(t.token, "POST", "/emails", { from: `a@${t.domain}`, to: ["delivered@simulator.tern.test"], subject: "<b>Logged</b>", text: "hi" }, { "user-agent": "resend-node:6.0.0" })).json<{ id: string }>();
    const created = await (await api(t.token, "POST", "/api-keys", { name: "made by a script" })).json<{ token: string }>();
    await api(t.token, "GET", `/emails/${crypto.randomUUID()}`, undefined, { "user-agent": "curl/8.5.0" });
    await waitFor("the three logs", async () => ((await count("SELECT count(*) AS n FROM api_logs WHERE account_id = ?", t.accountId)) >= 3 ? true : undefined));

    const list = await (await member.get("/dashboard/logs")).text();
    expect(list).toContain("POST</strong> /emails");
    expect(list).toContain("test key"); // the fixture key's name
    expect(list).toContain("curl/8.5.0");
    expect(list).toContain("keeps API requests for 30 days");
    const errors = await (await member.get("/dashboard/logs?status=client_error")).text();
    expect(errors).toContain('class="badge s4xx">404<');
    expect(errors).not.toContain("POST</strong> /emails");
    expect(await (await member.get("/dashboard/logs?status=5xx")).text()).toContain("Status is all, success, client_error or server_error.");

    const sendLog = (await env.DB.prepare("SELECT id FROM api_logs WHERE account_id = ? AND endpoint = '/emails' AND method = 'POST'").bind(t.accountId).first<{ id: string }>())!.id;
    const keyLog = (await env.DB.prepare("SELECT id FROM api_logs WHERE account_id = ? AND endpoint = '/api-keys'").bind(t.accountId).first<{ id: string }>())!.id;
    const detail = await member.get(`/dashboard/logs/${sendLog}`);
    expect(detail.status).toBe(200);
    const html = await detail.text();
    expect(html).toContain(`href="/dashboard/emails/${sent.id}"`);
    expect(html).toContain("&quot;subject&quot;: &quot;&lt;b&gt;Logged&lt;/b&gt;&quot;"); // pretty-printed, escaped
    expect(html).not.toContain("<b>Logged</b>");
    expect(html).toContain("data-copy=");
    const keyHtml = await (await member.get(`/dashboard/logs/${keyLog}`)).text();
    expect(keyHtml).toContain("&quot;token&quot;: &quot;[redacted]&quot;");
    expect(keyHtml).not.toContain(created.token);
    // A deleted key's requests stay, and its filter (from a request's page) says whose they are.
    const scriptKey = (await env.DB.prepare("SELECT id FROM api_keys WHERE account_id = ? AND name = 'made by a script'").bind(t.accountId).first<{ id: string }>())!.id;
    await api(created.token, "GET", "/domains");
    await waitFor("the script key's log", async () => ((await count("SELECT count(*) AS n FROM api_logs WHERE key_id = ?", scriptKey)) >= 1 ? true : undefined));
    await env.DB.prepare("DELETE FROM api_keys WHERE id = ?").bind(scriptKey).run();
    const scriptLog = (await env.DB.prepare("SELECT id FROM api_logs WHERE key_id = ?").bind(scriptKey).first<{ id: string }>())!.id;
    expect(await (await member.get(`/dashboard/logs/${scriptLog}`)).text()).toContain(`deleted key</span> · <a href="/dashboard/logs?key=${scriptKey}">its requests</a>`);
    const byKey = await (await member.get(`/dashboard/logs?key=${scriptKey}`)).text();
    expect(byKey).toContain(`<option value="${scriptKey}" selected="">deleted key ${scriptKey.slice(0, 8)}…</option>`);
    expect(byKey).toContain("GET</strong> /domains");
    expect(byKey).not.toContain("POST</strong> /emails");

    // Another account: an id of this one is a 404 that names nothing; its own page is empty and says what to do.
    const stranger = await person("owner");
    const refused = await stranger.get(`/dashboard/logs/${sendLog}`);
    expect(refused.status).toBe(404);
    const refusedHtml = await refused.text();
    expect(refusedHtml).toContain("Log not found.");
    expect(refusedHtml).not.toMatch(/POST \/emails|Logged|test key/);
    const empty = await (await stranger.get("/dashboard/logs")).text();
    expect(empty).toContain("No API requests yet.");
    expect(empty).toContain('href="/dashboard/api-keys"');
    expect(empty).toContain(`curl ${DASH}/domains`);
    expect(empty).not.toContain(sendLog);
    expect((await exports.default.fetch(`${DASH}/dashboard/logs`, { redirect: "manual" })).status).toBe(303);
  });

  it("say where a rare filter's search stopped on a long history, and go on from there", async () => {
    const { SEARCH_WINDOW } = await import("../../worker/logs/search.ts");
    const p = await person("member");
    await env.DB.prepare(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2)
      INSERT INTO api_logs (id, account_id, key_id, method, endpoint, status, created_at)
      SELECT printf('0193a8a3-0000-7000-8000-%012d', i), ?1, NULL, 'GET', '/domains', CASE i WHEN 1 THEN 502 ELSE 200 END, i FROM n`).bind(p.account, SEARCH_WINDOW + 10).run();
    const first = await (await p.get("/dashboard/logs?status=server_error")).text();
    expect(first).toContain(`No match among the ${SEARCH_WINDOW.toLocaleString("en-US")} requests searched`);
    const older = first.match(/href="(\/dashboard\/logs\?[^"]+)">Search older requests</)![1]!.replace(/&amp;/g, "&");
    const next = await (await p.get(older)).text();
    expect(next).toContain('class="badge s5xx">502<');
    expect(next).not.toContain("Search older requests");
  });
});

describe("the sign-in doors, as an outside probe tried them", () => {
  it("refuses an auth request that is not JSON, so no body hides its address from the throttle", async () => {
    const form = await exports.default.fetch(`${DASH}/dashboard/api/auth/sign-in/email`, {
      method: "POST",
      headers: { origin: DASH, "content-type": "application/x-www-form-urlencoded" },
      body: "email=victim%40people.test&password=guess",
    });
    expect(form.status).toBe(415);
    expect(((await form.json()) as { message: string }).message).toMatch(/as JSON/);
    // Nothing was counted or tried for the address.
    expect(await count("SELECT count(*) AS n FROM auth_attempts WHERE key LIKE 'email:victim@people.test@%'")).toBe(0);
  });

  it("reads an auth request's body against 64 KB before anything parses it", async () => {
    const big = await exports.default.fetch(`${DASH}/dashboard/api/auth/sign-in/email`, {
      method: "POST",
      headers: { origin: DASH, "content-type": "application/json" },
      body: JSON.stringify({ email: "victim@people.test", password: "guess", padding: "x".repeat(64 * 1024) }),
    });
    expect([big.status, ((await big.json()) as { message: string }).message]).toEqual([413, "The request body must be at most 64 KB."]);
    expect(await count("SELECT count(*) AS n FROM auth_attempts WHERE key LIKE 'email:victim@people.test@%'")).toBe(0);
    // A normal one still reaches better-auth (a wrong password for an unknown address: 401).
    const small = await exports.default.fetch(`${DASH}/dashboard/api/auth/sign-in/email`, {
      method: "POST",
      headers: { origin: DASH, "content-type": "application/json" },
      body: JSON.stringify({ email: `nobody-${crypto.randomUUID()}@people.test`, password: "guess-guess-guess" }),
    });
    expect(small.status).toBe(401);
  });

  it("counts an IPv6 client by its /64, and an IPv4 one written the IPv6 way as itself", () => {
    expect(ipKey("2001:DB8:1:2:aaaa::1")).toBe("2001:db8:1:2::/64");
    expect(ipKey("2001:db8:1:2:ffff:ffff:ffff:ffff")).toBe("2001:db8:1:2::/64");
    expect(ipKey("2001:db8:1:3::1")).toBe("2001:db8:1:3::/64");
    expect(ipKey("::ffff:203.0.113.9")).toBe("203.0.113.9");
    expect(ipKey("203.0.113.9")).toBe("203.0.113.9");
    expect(ipKey("unknown")).toBe("unknown");
  });

  it("logs a reset or invitation path without its token", () => {
    expect(withoutTokens("/reset-password/abcDEF_123-x")).toBe("/reset-password/[token]");
    expect(withoutTokens("/dashboard/invitations/T0k3n?x=1")).toBe("/dashboard/invitations/[token]?x=1");
    expect(withoutTokens("/dashboard/api/invitations/accept")).toBe("/dashboard/api/invitations/accept");
    expect(withoutTokens("/dashboard/emails")).toBe("/dashboard/emails");
  });

  it("counts password checks of a signed-in user against their address, as sign-ins are", async () => {
    const p = await person("owner");
    const email = `${p.user}@people.test`;
    const statuses: number[] = [];
    for (let i = 0; i <= LIMITS.email; i++) {
      statuses.push((await p.post("/auth/change-password", { currentPassword: `wrong-${i}`, newPassword: "correct-horse-battery-staple-42" })).status);
    }
    expect(statuses.slice(0, LIMITS.email)).not.toContain(429);
    expect(statuses.at(-1)).toBe(429);
    expect(await count("SELECT max(count) AS n FROM auth_attempts WHERE substr(key, 1, length(?1)) = ?1", `email:${email}@`)).toBe(LIMITS.email + 1);
  });

  it("changes a password from Settings, signing out the other sessions into one new session whose token rests hashed", async () => {
    const p = await person("owner");
    const now = Date.now();
    const { hashPassword } = await import("better-auth/crypto");
    await env.DB.prepare("INSERT INTO auth_accounts (id, account_id, provider_id, user_id, password, created_at, updated_at) VALUES (?, ?, 'credential', ?, ?, ?, ?)")
      .bind(crypto.randomUUID(), p.user, p.user, await hashPassword("correct-horse-battery-staple-42"), now, now).run();
    const other = await signedIn("owner", p.account);
    await env.DB.prepare("UPDATE auth_sessions SET user_id = ? WHERE user_id = ?").bind(p.user, other.user).run();
    const changed = await p.post("/auth/change-password", { currentPassword: "correct-horse-battery-staple-42", newPassword: "another-long-passphrase-93", revokeOtherSessions: true });
    expect(changed.status).toBe(200);
    const body = (await changed.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ notice: "Your password is changed." });
    expect(body.token).toBeUndefined();
    const next = await renewedSession(changed);
    expect((await exports.default.fetch(`${DASH}/dashboard/settings`, { headers: { cookie: next.cookie } })).status).toBe(200);
    // Both old sessions are gone; the one left is stored as a hash, never the token itself.
    for (const old of [p.cookie, other.cookie]) expect((await exports.default.fetch(`${DASH}/dashboard/settings`, { headers: { cookie: old }, redirect: "manual" })).status).toBe(303);
    const tokens = (await env.DB.prepare("SELECT token FROM auth_sessions WHERE user_id = ?").bind(p.user).all<{ token: string }>()).results;
    expect(tokens).toEqual([{ token: expect.stringMatching(/^sha256:/) }]);
  });

  it("asks someone without a password for a current code to turn two-factor off or mint recovery codes", async () => {
    // signedIn() makes a person with no password, as a Google or GitHub sign-up is.
    const p = await person("owner");
    const enabled = (await (await p.post("/auth/two-factor/enable", {})).json()) as { totpURI: string; backupCodes: string[] };
    const totp = OTPAuth.URI.parse(enabled.totpURI) as OTPAuth.TOTP;
    const verified = await p.post("/auth/two-factor/verify-totp", { code: totp.generate() });
    expect(verified.status).toBe(200);
    const on = async () => (await env.DB.prepare("SELECT two_factor_enabled AS on_ FROM auth_users WHERE id = ?").bind(p.user).first<{ on_: number }>())!.on_ === 1;
    expect(await on()).toBe(true);
    // better-auth renewed the session when TOTP was turned on; that session alone is not enough.
    const q = await renewedSession(verified);
    // (Each refusal counts against the address as a wrong password does: guesses are throttled.)
    const refusals = [["/auth/two-factor/disable", {}, "CODE_REQUIRED"], ["/auth/two-factor/disable", { code: "000000" }, "INVALID_CODE"],
      ["/auth/two-factor/generate-backup-codes", { code: "not-a-recovery-code" }, "INVALID_CODE"]] as const;
    for (const [path, body, code] of refusals) {
      const res = await q.post(path, body);
      expect(res.status, path).toBe(422);
      expect(await res.json(), path).toMatchObject({ code, message: expect.stringMatching(/authenticator app.*recovery code/) });
    }
    expect(await on()).toBe(true);
    // A recovery code is a code: new ones are minted with it, and the old ones stop working.
    const minted = await q.post("/auth/two-factor/generate-backup-codes", { code: enabled.backupCodes[0] });
    expect(minted.status).toBe(200);
    const fresh = ((await minted.json()) as { backupCodes: string[] }).backupCodes;
    expect(fresh).not.toContain(enabled.backupCodes[1]);
    expect((await q.post("/auth/two-factor/disable", { code: enabled.backupCodes[1] })).status).toBe(422);
    // The app's current code works.
    expect((await q.post("/auth/two-factor/disable", { code: totp.generate() })).status).toBe(200);
    expect(await on()).toBe(false);
  });

  it("checks no code for a signed-in person whose second factor is on, and counts setup's guesses", async () => {
    const p = await person("owner");
    const enabled = (await (await p.post("/auth/two-factor/enable", {})).json()) as { totpURI: string; backupCodes: string[] };
    const totp = OTPAuth.URI.parse(enabled.totpURI) as OTPAuth.TOTP;
    // Setting up: wrong codes count against the person's address, as wrong passwords do.
    for (let i = 0; i < 5; i++) expect((await p.post("/auth/two-factor/verify-totp", { code: "000000" })).status).not.toBe(200);
    const throttled = await p.post("/auth/two-factor/verify-totp", { code: totp.generate() });
    expect(throttled.status).toBe(429);
    expect(await throttled.json()).toMatchObject({ code: "TOO_MANY_ATTEMPTS" });
    await env.DB.prepare("DELETE FROM auth_attempts WHERE substr(key, 1, length(?1)) = ?1").bind(`email:${p.email.toLowerCase()}@`).run();
    const q = await renewedSession(await p.post("/auth/two-factor/verify-totp", { code: totp.generate() }));
    // On: a stolen session cannot use these endpoints to learn whether a guess is right.
    for (const [path, code] of [["/auth/two-factor/verify-totp", totp.generate()], ["/auth/two-factor/verify-backup-code", enabled.backupCodes[0]!]] as const) {
      const res = await q.post(path, { code });
      expect(res.status, path).toBe(409);
      expect(await res.json(), path).toMatchObject({ code: "TWO_FACTOR_ALREADY_ON", message: expect.stringMatching(/already on/) });
    }
    // The recovery code offered there was not spent.
    expect((await q.post("/auth/two-factor/generate-backup-codes", { code: enabled.backupCodes[0] })).status).toBe(200);
  });

  it("gives back a recovery code spent on a change that then failed", async () => {
    const p = await person("owner");
    const enabled = (await (await p.post("/auth/two-factor/enable", {})).json()) as { totpURI: string; backupCodes: string[] };
    const totp = OTPAuth.URI.parse(enabled.totpURI) as OTPAuth.TOTP;
    const q = await renewedSession(await p.post("/auth/two-factor/verify-totp", { code: totp.generate() }));
    // A real fault in D1: turning this person's two-factor off fails.
    const trigger = `fail_disable_${p.user.replace(/\W/g, "")}`;
    await env.DB.prepare(`CREATE TRIGGER ${trigger} BEFORE UPDATE OF two_factor_enabled ON auth_users WHEN NEW.id = '${p.user}' AND NEW.two_factor_enabled = 0 BEGIN SELECT RAISE(ABORT, 'fault'); END`).run();
    try {
      const failed = await q.post("/auth/two-factor/disable", { code: enabled.backupCodes[0] });
      expect(failed.status).toBeGreaterThanOrEqual(400);
    } finally {
      await env.DB.prepare(`DROP TRIGGER ${trigger}`).run();
    }
    const on = await env.DB.prepare("SELECT two_factor_enabled AS on_ FROM auth_users WHERE id = ?").bind(p.user).first<{ on_: number }>();
    expect(on!.on_).toBe(1);
    // The code it was asked with still works, once.
    expect((await q.post("/auth/two-factor/disable", { code: enabled.backupCodes[0] })).status).toBe(200);
    expect((await env.DB.prepare("SELECT two_factor_enabled AS on_ FROM auth_users WHERE id = ?").bind(p.user).first<{ on_: number }>())!.on_).toBe(0);
  });

  it("refuses password and two-factor changes to a session whose person is in no account", async () => {
    const p = await person("owner");
    const enabled = (await (await p.post("/auth/two-factor/enable", {})).json()) as { totpURI: string };
    const totp = OTPAuth.URI.parse(enabled.totpURI) as OTPAuth.TOTP;
    const q = await renewedSession(await p.post("/auth/two-factor/verify-totp", { code: totp.generate() }));
    // Removed from their only account: the session still signs them in, but there is no viewer.
    await env.DB.prepare("DELETE FROM memberships WHERE user_id = ?").bind(p.user).run();
    for (const path of ["/auth/two-factor/disable", "/auth/two-factor/generate-backup-codes", "/auth/two-factor/enable", "/auth/change-password"]) {
      const res = await q.post(path, { currentPassword: "x", newPassword: "correct-horse-battery-staple-42" });
      expect(res.status, path).toBe(403);
      expect(((await res.json()) as { message: string }).message, path).toMatch(/member of an account/);
    }
    const on = await env.DB.prepare("SELECT two_factor_enabled AS on_ FROM auth_users WHERE id = ?").bind(p.user).first<{ on_: number }>();
    expect(on!.on_).toBe(1);
  });

  it("ignores a malformed account cookie instead of failing every page", async () => {
    const p = await person("owner");
    const res = await exports.default.fetch(`${DASH}/dashboard/emails`, { headers: { cookie: `${p.cookie}; tern_account=%E0%A4%A` } });
    expect(res.status).toBe(200);
  });
});

// D1 refuses a LIKE pattern over 50 bytes; the searches use instr(), so any length and any
// characters search for themselves, and the pages never fail on what was typed.
describe("the dashboard's searches take any text", () => {
  const LONG = "Your order 12345 has shipped and is on its way now";
  const ODD = ["50%", "a_b", "back\\slash", "caf\u00e9 \u00fcber \u2709", "\u00e9".repeat(30), `${LONG} and then some more words`];

  it("the Emails page finds subjects and recipients by any text, ASCII letters in any case", async () => {
    const p = await person("member");
    const subjects = [LONG.toUpperCase(), "50% off", "50 percent off", "a_b", "axb", "back\\slash", "caf\u00e9 \u00fcber \u2709", "\u00e9".repeat(31)];
    await env.DB.batch(subjects.map((subject, n) => env.DB.prepare(
      "INSERT INTO emails (id, account_id, from_address, to_json, subject, state, last_event, pending_json, message_id, created_at) VALUES (?, ?, 'Shop <x@Shop.example>', ?, ?, 'done', 'sent', '[]', 'm', 0)",
    ).bind(crypto.randomUUID(), p.account, JSON.stringify([`r${n}@example.com`]), subject)));
    const found = async (f: EmailFilters) => (await searchEmails(env.DB, p.account, f, { limit: 25 })).data.map((e) => e.subject);
    expect(await found({ q: LONG })).toEqual([LONG.toUpperCase()]);
    expect(await found({ q: "50%" })).toEqual(["50% off"]);
    expect(await found({ q: "a_b" })).toEqual(["a_b"]);
    expect(await found({ q: "back\\slash" })).toEqual(["back\\slash"]);
    expect(await found({ q: "\u00fcber \u2709" })).toEqual(["caf\u00e9 \u00fcber \u2709"]);
    expect(await found({ q: "\u00e9".repeat(30) })).toEqual(["\u00e9".repeat(31)]);
    expect(await found({ q: "r4@EXAMPLE" })).toEqual(["axb"]);
    // One mailbox, its domain spelled as Unicode or as A-labels: the search finds both, newest first.
    await env.DB.batch(["x@xn--bcher-kva.example", "X@B\u00fccher.example", "x@bucher.example"].map((to, n) => env.DB.prepare(
      "INSERT INTO emails (id, account_id, from_address, to_json, subject, state, last_event, pending_json, message_id, created_at) VALUES (?, ?, 'Books <b@books.example>', ?, ?, 'done', 'sent', '[]', 'm', 0)",
    ).bind(`019${n}0000-0000-7000-8000-000000000000`, p.account, JSON.stringify([to]), `idn ${n}`)));
    expect(await found({ q: "x@b\u00fccher.example" })).toEqual(["idn 1", "idn 0"]);
    expect(await found({ q: "x@xn--bcher-kva.example" })).toEqual(["idn 1", "idn 0"]);
    expect((await searchEmails(env.DB, p.account, { q: "x@b\u00fccher.example" }, { limit: 1 }))).toMatchObject({ data: [{ subject: "idn 1" }], has_more: true });
    expect(await found({ domain: "shop.example" })).toHaveLength(subjects.length);
    expect(await found({ domain: "op.example" })).toEqual([]);
    expect(await found({ domain: `${"long-label.".repeat(10)}example` })).toEqual([]);
    expect(await found({ tag: `${"t".repeat(60)}:${"%".repeat(60)}` })).toEqual([]);
    for (const q of [...ODD, "x".repeat(300)]) {
      const res = await p.get(`/dashboard/emails?q=${encodeURIComponent(q)}&domain=${encodeURIComponent(q)}&tag=${encodeURIComponent(q)}`);
      expect(res.status, q).toBe(200);
    }
    const page = await (await p.get(`/dashboard/emails?q=${encodeURIComponent(LONG)}`)).text();
    expect(page).toContain(LONG.toUpperCase());
    expect(page).not.toContain("50% off");
    const cut = await (await p.get(`/dashboard/emails?q=${"x".repeat(201)}`)).text();
    expect(cut).toContain("Searches use at most 200 characters");
  });

  it("the Contacts and Suppressions pages do too, and a search changes nothing", async () => {
    const p = await person("owner");
    const { createContact } = await import("../../worker/contacts/contacts.ts");
    await createContact(env, p.account, { email: "ada@example.com", firstName: "Ada", lastName: LONG });
    await createContact(env, p.account, { email: "\u00e9l\u00e8ve@example.com", firstName: "50%", lastName: "a_b" });
    await createContact(env, p.account, { email: "bob@example.com", firstName: "50 percent", lastName: "axb" });
    for (const email of ["Eleve_1@example.com", "elevex1@example.com", "x@example.com"]) expect((await p.post("/suppressions", { email })).status).toBe(201);
    const before = await count("SELECT count(*) AS n FROM contacts WHERE account_id = ?", p.account) + await count("SELECT count(*) AS n FROM suppressions WHERE account_id = ?", p.account);
    const contacts = async (q: string) => (await (await p.get(`/dashboard/contacts?q=${encodeURIComponent(q)}`)).text());
    expect(await contacts(`ada ${LONG.toLowerCase()}`)).toContain("ada@example.com");
    const percent = await contacts("50%");
    expect(percent).toContain("\u00e9l\u00e8ve@example.com");
    expect(percent).not.toContain("bob@example.com");
    expect(await contacts("A_B")).not.toContain("bob@example.com");
    // Addresses are kept lowercased, so any case of any letter finds them.
    expect(await contacts("\u00c9L\u00c8VE")).toContain("\u00e9l\u00e8ve@example.com");
    const suppressions = async (q: string) => (await (await p.get(`/dashboard/suppressions?q=${encodeURIComponent(q)}`)).text());
    const underscore = await suppressions("ELEVE_1");
    expect(underscore).toContain("eleve_1@example.com");
    expect(underscore).not.toContain("elevex1@example.com");
    for (const q of [...ODD, "x".repeat(300)]) {
      for (const path of ["/dashboard/contacts", "/dashboard/suppressions"]) {
        const res = await p.get(`${path}?q=${encodeURIComponent(q)}`);
        expect(res.status, `${path} ${q}`).toBe(200);
      }
    }
    expect(await contacts("y".repeat(201))).toContain("Searches use at most 200 characters");
    expect(await suppressions("y".repeat(201))).toContain("Searches use at most 200 characters");
    expect(await count("SELECT count(*) AS n FROM contacts WHERE account_id = ?", p.account) + await count("SELECT count(*) AS n FROM suppressions WHERE account_id = ?", p.account)).toBe(before);
  });
});

describe("the dashboard's error pages", () => {
  it("show an unexpected failure inside the dashboard's frame, with a reference that is on the log line", async () => {
    const p = await person("member");
    // A row no code path writes (its recipients are not JSON) makes the Emails page fail.
    await env.DB.prepare("INSERT INTO emails (id, account_id, from_address, to_json, subject, state, last_event, pending_json, message_id, created_at) VALUES (?, ?, 'x@d.example', 'not json', 's', 'done', 'sent', '[]', 'm', 0)")
      .bind(crypto.randomUUID(), p.account).run();
    const logged = vi.spyOn(console, "error").mockImplementation(() => {});
    const res = await p.get("/dashboard/emails?status=sent");
    const lines = logged.mock.calls.map(([line, cause]) => [line, String(cause).split("\n")[0]]);
    logged.mockRestore();
    expect(res.status).toBe(500);
    expect(res.headers.get("content-security-policy")).toContain("script-src 'self'");
    const html = await res.text();
    expect(html).toMatch(/^<!doctype html>/);
    expect(html).toContain('<nav class="side" aria-label="Dashboard">');
    expect(html).toContain("<title>Something went wrong · tern</title>");
    expect(html).toContain('<a href="/dashboard/emails?status=sent">Try again</a>');
    expect(html).toContain('back to <a href="/dashboard/emails">Emails</a>');
    const ref = html.match(/this reference: <code>([0-9a-f]{8})<\/code>/)?.[1];
    expect(ref).toBeDefined();
    expect(lines).toContainEqual([`dashboard error GET /dashboard/emails ref=${ref}`, expect.stringMatching(/JSON/)]);
    // Nothing of the cause reaches the page.
    expect(html).not.toMatch(/SyntaxError|JSON\.parse|not json|at .*\.ts/);
  });

  it("shows refusals and unknown pages inside the frame too", async () => {
    const p = await person("member");
    const page = await p.get("/dashboard/no-such-page");
    expect(page.status).toBe(404);
    expect(await page.text()).toContain('<nav class="side" aria-label="Dashboard">');
    const missing = await p.get(`/dashboard/domains/${crypto.randomUUID()}`);
    expect(missing.status).toBe(404);
    const html = await missing.text();
    expect(html).toContain('<nav class="side" aria-label="Dashboard">');
    expect(html).toContain('Go back to <a href="/dashboard/domains">Domains</a>.');
    expect(html).not.toMatch(/Try again|reference/);
    // A form sent before app.js ran: said in the frame, with the way back.
    const early = await exports.default.fetch(`${DASH}/dashboard/contacts`, { method: "POST", headers: { cookie: p.cookie, origin: DASH, "x-csrf-token": p.csrf } });
    expect(early.status).toBe(400);
    const text = await early.text();
    expect(text).toContain('<nav class="side" aria-label="Dashboard">');
    expect(text).toContain("The form was sent before the page finished loading.");
    expect(text).toContain('Go back to <a href="/dashboard/contacts">Contacts</a>.');
    expect(text).not.toContain("Try again");
  });
});

describe("invitations", () => {
  /** Dashboard mail through an account of its own, as a deployment configures it. */
  async function mailSettings() {
    const mail = await createAccount();
    return { account: mail.accountId, env: { DASHBOARD_MAIL_ACCOUNT: mail.accountId, DASHBOARD_MAIL_FROM: `tern <no-reply@${mail.domain}>` } };
  }
  const mailsTo = (account: string, to: string) => count("SELECT count(*) AS n FROM emails WHERE account_id = ? AND to_json LIKE ?", account, `%${to}%`);

  it("caps the invitations a person sends in a day, and takes back one whose mail could not go", async () => {
    const owner = await person("owner");
    const mail = await mailSettings();
    for (let i = 0; i < INVITATIONS_PER_DAY.user; i++) {
      expect((await owner.post("/invitations", { email: `pal${i}@example.com`, role: "member" }, { env: mail.env })).status).toBe(200);
    }
    const over = await owner.post("/invitations", { email: "one-more@example.com", role: "member" }, { env: mail.env });
    expect(over.status).toBe(429);
    expect((await over.json<{ message: string }>()).message).toMatch(/as many invitations as one person may send in a day \(20\)/);
    expect(await mailsTo(mail.account, "one-more@example.com")).toBe(0);
    // Dashboard mail that cannot be sent: a 503 that says so, and no invitation left behind.
    const other = await person("owner");
    const broken = await other.post("/invitations", { email: "lost@example.com", role: "member" }, { env: { DASHBOARD_MAIL_ACCOUNT: "", DASHBOARD_MAIL_FROM: "" } });
    expect(broken.status).toBe(503);
    expect((await broken.json<{ message: string }>()).message).toMatch(/^The invitation could not be sent: /);
    expect(await count("SELECT count(*) AS n FROM invitations WHERE account_id = ?", other.account)).toBe(0);
  });

  it("refuses an account name that is not one line, so no line break reaches an invitation's subject", async () => {
    const owner = await person("owner");
    for (const name of ["Acme\r\nBcc: x@evil.example", "Acme\u0000", "Acme\u2028Inc"]) {
      const res = await owner.post("/account", { name });
      expect(res.status).toBe(422);
      expect((await res.json<{ message: string }>()).message).toBe("The account's name must be one line of text, without control characters.");
    }
    expect((await env.DB.prepare("SELECT name FROM accounts WHERE id = ?").bind(owner.account).first<{ name: string }>())!.name).toBe("Dash");
  });

  it("refuses to invite a member (yourself included), with a message and no mail", async () => {
    const owner = await person("owner");
    const admin = await person("admin", owner.account);
    const mail = await mailSettings();
    for (const email of [owner.email, admin.email.toUpperCase()]) {
      const res = await owner.post("/invitations", { email, role: "member" }, { env: mail.env });
      expect(res.status).toBe(409);
      expect((await res.json<{ message: string }>()).message).toMatch(/is already a member of Dash \((owner|admin)\)/);
    }
    expect(await count("SELECT count(*) AS n FROM invitations WHERE account_id = ?", owner.account)).toBe(0);
    expect(await count("SELECT count(*) AS n FROM emails WHERE account_id = ?", mail.account)).toBe(0);
  });

  it("re-inviting a waiting address renews its one invitation: new link and expiry, the chosen role, the old link dead", async () => {
    const owner = await person("owner");
    const mail = await mailSettings();
    const first = await owner.post("/invitations", { email: "Friend@Example.com", role: "member" }, { env: mail.env });
    expect(first.status, await first.clone().text()).toBe(200);
    expect(await first.json()).toMatchObject({ renewed: false, notice: "Invitation sent to friend@example.com as member, valid for 7 days." });
    const before = (await env.DB.prepare("SELECT * FROM invitations WHERE account_id = ?").bind(owner.account).first<{ id: string; token_hash: string; expires_at: number }>())!;
    await new Promise((r) => setTimeout(r, 5));
    const again = await owner.post("/invitations", { email: "friend@example.com", role: "admin" }, { env: mail.env });
    const body = await again.json<{ id: string; renewed: boolean; notice: string }>();
    expect(body).toMatchObject({ id: before.id, renewed: true });
    expect(body.notice).toMatch(/already invited: a new link went out \(role now admin, was member\), valid for 7 days\. The earlier link no longer works\./);
    const rows = (await env.DB.prepare("SELECT * FROM invitations WHERE account_id = ?").bind(owner.account).all<{ id: string; token_hash: string; expires_at: number; role: string }>()).results;
    expect(rows).toHaveLength(1);
    expect(rows[0]!.token_hash).not.toBe(before.token_hash);
    expect(rows[0]!.expires_at).toBeGreaterThan(before.expires_at);
    expect(rows[0]!.role).toBe("admin");
    expect(await mailsTo(mail.account, "friend@example.com")).toBe(2);
    const audit = (await env.DB.prepare("SELECT action FROM audit_log WHERE account_id = ? ORDER BY id").bind(owner.account).all<{ action: string }>()).results.map((r) => r.action);
    expect(audit).toEqual(["member.invited", "invitation.renewed"]);
  });

  it("counts every invitation mail, renewals too, and only mail that went: five a day to one address from one account, twenty from all", async () => {
    const owner = await person("owner");
    const mail = await mailSettings();
    const victim = `often-${crypto.randomUUID().slice(0, 8)}@example.com`;
    const invite = (who: Awaited<ReturnType<typeof person>>) => who.post("/invitations", { email: victim, role: "member" }, { env: mail.env });
    for (let i = 0; i < INVITATIONS_PER_DAY.address; i++) expect((await invite(owner)).status).toBe(200);
    for (let i = 0; i < 3; i++) {
      const over = await invite(owner);
      expect(over.status).toBe(429);
      expect((await over.json<{ message: string }>()).message).toMatch(new RegExp(`^${victim.replace(/\./g, "\\.")} has been sent as many invitations to Dash as one address may get in a day \\(5\\)\\. Try again in \\d+ hours?, or ask them to use a link already sent\\.$`));
    }
    // The refused ones were not counted: neither this person's allowance nor the address's moved.
    const counted = async (key: string) => count("SELECT coalesce(max(count), 0) AS n FROM auth_attempts WHERE substr(key, 1, length(?1)) = ?1", `${key}@`);
    expect(await counted(`invite-by:${owner.user}`)).toBe(5);
    expect(await counted(`invite-to:${victim}`)).toBe(5);
    // Other accounts may invite the address too, up to twenty mails from all of them.
    for (let a = 0; a < 3; a++) {
      const other = await person("owner");
      for (let i = 0; i < INVITATIONS_PER_DAY.address; i++) expect((await invite(other)).status).toBe(200);
    }
    const late = await invite(await person("owner"));
    expect(late.status).toBe(429);
    expect((await late.json<{ message: string }>()).message).toMatch(/has been sent as many invitations as one address may get in a day from all accounts \(20\)/);
    expect(await mailsTo(mail.account, victim)).toBe(INVITATIONS_PER_DAY.addressAnywhere);
    // An address that is already a member costs nothing either.
    expect((await owner.post("/invitations", { email: owner.email, role: "member" }, { env: mail.env })).status).toBe(409);
    expect(await counted(`invite-by:${owner.user}`)).toBe(5);
    // And renewals count against the person who sends them.
    const sender = await person("owner");
    for (let i = 0; i < INVITATIONS_PER_DAY.user; i++) {
      expect((await sender.post("/invitations", { email: `again-${i % 4}-${sender.account}@example.com`, role: "member" }, { env: mail.env })).status).toBe(200);
    }
    const capped = await sender.post("/invitations", { email: `again-0-${sender.account}@example.com`, role: "member" }, { env: mail.env });
    expect(capped.status).toBe(429);
    expect((await capped.json<{ message: string }>()).message).toMatch(/as many invitations as one person may send in a day \(20\); a renewed invitation counts too\./);
  });

  it("withdraws the open invitations of someone removed, or made a member", async () => {
    const owner = await person("owner");
    const mail = await mailSettings();
    const admin = await person("admin", owner.account);
    const other = await person("admin", owner.account);
    expect((await admin.post("/invitations", { email: `back-door-${owner.account}@example.com`, role: "admin" }, { env: mail.env })).status).toBe(200);
    expect((await other.post("/invitations", { email: `colleague-${owner.account}@example.com`, role: "member" }, { env: mail.env })).status).toBe(200);
    expect((await owner.post(`/members/${admin.user}/remove`, {})).status).toBe(200);
    const open = async () => (await env.DB.prepare("SELECT email FROM invitations WHERE account_id = ? ORDER BY email").bind(owner.account).all<{ email: string }>()).results.map((r) => r.email);
    expect(await open()).toEqual([`colleague-${owner.account}@example.com`]);
    expect((await owner.post(`/members/${other.user}/role`, { role: "member" })).status).toBe(200);
    expect(await open()).toEqual([]);
    const details = (await env.DB.prepare("SELECT action, detail_json FROM audit_log WHERE account_id = ? AND action IN ('member.removed', 'member.role_changed') ORDER BY id").bind(owner.account).all<{ action: string; detail_json: string }>()).results;
    expect(details.map((d) => [d.action, JSON.parse(d.detail_json)])).toEqual([["member.removed", { invitations_withdrawn: 1 }], ["member.role_changed", { role: "member", invitations_withdrawn: 1 }]]);
  });

  it("the rules without HTTP: the earlier token stops working, duplicates from before collapse, accepting twice keeps the role", async () => {
    const owner = await person("owner");
    const now = Date.now();
    const input = { accountId: owner.account, email: "pal@example.com", role: "member" as const, invitedBy: owner.user, now };
    // Two rows for one address, as the dashboard made them before the rule.
    await env.DB.prepare("INSERT INTO invitations (id, account_id, email, role, token_hash, invited_by, created_at, expires_at) VALUES (?, ?, 'pal@example.com', 'member', ?, ?, 0, 1)")
      .bind(crypto.randomUUID(), owner.account, crypto.randomUUID(), owner.user).run();
    const first = await inviteToAccount(env.DB, input);
    expect(first.kind).toBe("renewed"); // the expired one came back to life, once
    const second = await inviteToAccount(env.DB, { ...input, now: now + 1 });
    expect(second.kind).toBe("renewed");
    if (first.kind === "member" || second.kind === "member") throw new Error("unreachable");
    expect(await findInvitation(env.DB, first.token)).toBeNull();
    const inv = (await findInvitation(env.DB, second.token))!;
    expect(inv.email).toBe("pal@example.com");
    expect(await count("SELECT count(*) AS n FROM invitations WHERE account_id = ?", owner.account)).toBe(1);

    // Accepting when already a member: the invitation is used up, the role stays.
    const admin = await person("admin", owner.account);
    const forAdmin = await inviteToAccount(env.DB, { ...input, email: "late@example.com" });
    if (forAdmin.kind === "member") throw new Error("unreachable");
    await env.DB.prepare("UPDATE auth_users SET email = 'late@example.com' WHERE id = ?").bind(admin.user).run();
    const result = await acceptInvitation(env.DB, (await findInvitation(env.DB, forAdmin.token))!, admin.user, now);
    expect(result).toEqual({ kind: "already_member", role: "admin" });
    expect(await count("SELECT count(*) AS n FROM memberships WHERE account_id = ? AND user_id = ? AND role = 'admin'", owner.account, admin.user)).toBe(1);
    expect(await findInvitation(env.DB, forAdmin.token)).toBeNull();
  });

  it("accepting an invitation to an account you are in already says so and keeps your role", async () => {
    const owner = await person("owner");
    const member = await person("member", owner.account);
    const made = await inviteToAccount(env.DB, { accountId: owner.account, email: member.email, role: "member", invitedBy: owner.user, now: Date.now() - 1 });
    // Made directly: the dashboard refuses to invite a member, but one may join after an invitation went out.
    expect(made.kind).toBe("member");
    await env.DB.prepare("INSERT INTO invitations (id, account_id, email, role, token_hash, invited_by, created_at, expires_at) VALUES (?, ?, ?, 'admin', ?, ?, ?, ?)")
      .bind(crypto.randomUUID(), owner.account, member.email, await hashToken("tok-already-member"), owner.user, Date.now(), Date.now() + 3600_000).run();
    const page = await (await member.get("/dashboard/invitations/tok-already-member")).text();
    expect(page).toContain("You are already a member of <strong>Dash</strong> (member)");
    const res = await member.post("/invitations/accept", { token: "tok-already-member" });
    expect(await res.json()).toEqual({ ok: true, notice: "You are already a member of Dash (member); your role is unchanged. The invitation is now used up." });
    expect(await count("SELECT count(*) AS n FROM memberships WHERE account_id = ? AND user_id = ? AND role = 'member'", owner.account, member.user)).toBe(1);
    expect((await member.post("/invitations/accept", { token: "tok-already-member" })).status).toBe(404);
  });
});

describe("a domain's page", () => {
  const domainName = () => `p${crypto.randomUUID().slice(0, 8)}.zone.test`;
  const domainRow = (id: string) => env.DB.prepare("SELECT * FROM domains WHERE id = ?").bind(id).first<{ name: string; last_checked_at: number | null; last_check_json: string | null }>();

  it("answers a new domain's id for the page that opens next, and shows a Unicode name with its A-label", async () => {
    const owner = await person("owner");
    const res = await owner.post("/domains", { name: "Bücher.Example" });
    expect(res.status).toBe(201);
    const { id } = await res.json<{ id: string }>();
    expect((await domainRow(id))!.name).toBe("xn--bcher-kva.example");
    const html = await (await owner.get(`/dashboard/domains/${id}`)).text();
    expect(html).toContain("<h1>bücher.example</h1>");
    expect(html).toContain("xn--bcher-kva.example");
    expect(html).toContain("never: publish the records below, then verify");
    // DMARC is on the page (recommended), not among the API's records (Resend's record kinds).
    expect(html).toContain("v=DMARC1; p=none; rua=mailto:dmarc@xn--bcher-kva.example");
    expect(html).not.toContain("it covers the subdomains too"); // its own organizational domain
    const list = await (await owner.get("/dashboard/domains")).text();
    expect(list).toContain("bücher.example");
    const answer = await (await api(await addKey(owner.account, "full_access"), "GET", `/domains/${id}`)).json<{ name: string; records: DomainRecord[] }>();
    expect(answer.name).toBe("xn--bcher-kva.example");
    expect(answer.records.map((r) => r.record)).not.toContain("DMARC");
  });

  it("says when the resolver could not be reached, when it will retry, and what each record showed", async () => {
    const owner = await person("owner");
    const name = domainName();
    const { id } = await (await owner.post("/domains", { name })).json<{ id: string }>();
    const records = (await (await api(await addKey(owner.account, "full_access"), "GET", `/domains/${id}`)).json<{ records: DomainRecord[] }>()).records;
    const dkim = records.find((r) => r.record === "DKIM")!;
    await failLookups(`${dkim.name}.${name}`, "servfail");
    try {
      const res = await owner.post(`/domains/${id}/verify`, {});
      const body = await res.json<{ status: string; notice: string }>();
      expect(body.status).toBe("not_started");
      expect(body.notice).toBe("Checked just now, but DNS could not be reached: nothing changed. The reason and the next try are on this page.");
      const row = (await domainRow(id))!;
      expect(row.last_checked_at).not.toBeNull();
      const html = await (await owner.get(`/dashboard/domains/${id}`)).text();
      expect(html).toContain("The last check could not reach DNS: resolver status 2");
      expect(html).toContain("unknown: DNS could not be reached");
      expect(html).toMatch(/Last checked<\/dt><dd><time/);
      expect(html).toMatch(/Next check<\/dt><dd><time/);
    } finally {
      await failLookups(`${dkim.name}.${name}`, null);
    }
    // The records published, one with a wrong value: each row says what was found.
    await publishRecords(name, records, (r) => r.record === "DKIM");
    await publishRecords(name, records.map((r) => (r.type === "TXT" && r.record === "SPF" ? { ...r, value: "v=spf1 -all" } : r)), (r) => r.record === "SPF");
    const body = await (await owner.post(`/domains/${id}/verify`, {})).json<{ status: string; notice: string }>();
    expect(body).toEqual({ status: "partially_verified", notice: expect.stringMatching(/^Checked just now: 2 of 3 records found, 1 with a wrong value\./) });
    const html = await (await owner.get(`/dashboard/domains/${id}`)).text();
    expect(html).not.toContain("could not reach DNS");
    expect(html).toContain("wrong value: found <code>v=spf1 -all</code>");
    // A subdomain's DMARC record is recommended at its organizational domain, named in full.
    expect(html).toContain("the full name: at zone.test, it covers the subdomains too");
    expect(html.match(/<span class="ok">found<\/span>/g)).toHaveLength(2);
  });
});

describe("the Settings page", () => {
  it("heads an Actions column only where some row has one: not over a sole owner or a lone session", async () => {
    const owner = await person("owner");
    const actions = async () => ((await (await owner.get("/dashboard/settings")).text()).match(/<th scope="col"><span class="muted">Actions<\/span><\/th>/g) ?? []).length;
    expect(await actions()).toBe(0);
    // A lone session has nothing else to sign out: a line says so instead of the button.
    const alone = await (await owner.get("/dashboard/settings")).text();
    expect(alone).not.toContain("Sign out everywhere");
    expect(alone).not.toContain("/dashboard/api/sessions/revoke-all");
    expect(alone).toContain("No other sessions: you are signed in only here.");
    // Another member (the owner may remove them) and another session of the owner's (revocable).
    await signedIn("member", owner.account);
    expect(await actions()).toBe(1);
    const now = Date.now();
    await env.DB.prepare("INSERT INTO auth_sessions (id, expires_at, token, created_at, updated_at, user_id) VALUES (?, ?, ?, ?, ?, ?)")
      .bind(crypto.randomUUID(), now + 3600_000, `sha256:${crypto.randomUUID()}`, now, now, owner.user).run();
    expect(await actions()).toBe(2);
    const html = await (await owner.get("/dashboard/settings")).text();
    expect(html).toContain(">Remove</button>");
    expect(html).toContain(">Revoke</button>");
    expect(html).toContain(">Sign out everywhere</button>");
    expect(html).not.toContain("No other sessions");
  });
});

describe("the Audit log page", () => {
  it("names a topic of the account's own, and shows the id of one it cannot name", async () => {
    const a = await person("owner");
    const b = await person("owner");
    const now = Date.now();
    const [mine, gone, theirs] = [crypto.randomUUID(), crypto.randomUUID(), crypto.randomUUID()];
    const topic = (id: string, account: string, name: string) =>
      env.DB.prepare("INSERT INTO topics (id, account_id, name, default_subscription, created_at, updated_at) VALUES (?, ?, ?, 'opt_in', ?, ?)").bind(id, account, name, now, now);
    const detail = { topics: [{ id: mine, subscription: "opt_in" }, { id: gone, subscription: "opt_out" }, { id: theirs, subscription: "opt_out" }] };
    await env.DB.batch([
      topic(mine, a.account, "Weekly digest"),
      topic(theirs, b.account, "Their secret topic"),
      env.DB.prepare("INSERT INTO audit_log (id, account_id, user_id, actor_email, action, target, detail_json, ip, user_agent, created_at) VALUES (?, ?, ?, ?, 'contact.topics_changed', 'ada@example.com', ?, '203.0.113.9', '', ?)")
        .bind(crypto.randomUUID(), a.account, a.user, a.email, JSON.stringify(detail), now),
    ]);
    const html = await (await a.get("/dashboard/audit-log")).text();
    expect(html).toContain(`topic Weekly digest: subscribed · topic ${gone}: opted out · topic ${theirs}: opted out`);
    expect(html).not.toContain("Their secret topic");
  });
});

describe("the Metrics page's health", () => {
  it("says once that both rates are over their limits", async () => {
    const p = await person("owner");
    const db = drizzle(env.DB);
    const many = (n: number) => Array.from({ length: n }, (_, i) => `r${i}@example.com`);
    const key = { accountId: p.account, domainId: null, broadcastId: null, at: Date.now() - 86_400_000 };
    // 10 hard bounces of 200 accepted (5%, limit 4%); 1 complaint of 190 sent (0.5%, limit 0.08%).
    await db.batch([
      ...rollupItem(db, { ...key, events: [{ type: "queued", data: { recipients: many(200) } }] }),
      ...rollupItem(db, { ...key, events: [{ type: "bounced", data: { recipients: many(10), bounce: { type: "Permanent" } } }] }),
      ...rollupItem(db, { ...key, events: [{ type: "sent", data: { recipients: many(190) } }] }),
      ...rollupItem(db, { ...key, events: [{ type: "complained", data: { recipients: many(1) } }] }),
    ] as never);
    const html = await (await p.get("/dashboard/metrics")).text();
    expect(html).toContain("The bounce and complaint rates are over their limits.");
    expect(html).not.toContain("rate is over its limit");
  });
});
