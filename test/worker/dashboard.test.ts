// The dashboard's rules inside workerd: its Emails search finds what it should, the password policy,
// the sign-in throttle, and the doors (origin, session, API keys) in front of every page.
import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { searchEmails, searchQuery, type EmailFilters } from "../../worker/dashboard/email-search.ts";
import { passwordProblem } from "../../worker/dashboard/passwords.ts";
import { LIMITS, countAttempt } from "../../worker/dashboard/throttle.ts";
import { sendDashboardMail } from "../../worker/dashboard/mail.ts";
import { acceptInvitation, findInvitation, inviteToAccount } from "../../worker/dashboard/invitations.ts";
import worker from "../../worker/index.ts";
import { hashToken } from "../../worker/api-key-token.ts";
import { addKey, api, createAccount } from "./fixtures.ts";
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

/** A signed-in person: the rows better-auth keeps (the token only as its hash) and its signed session cookie, made the way
 * better-call signs it (HMAC-SHA256 of the token with the dashboard's secret). */
async function person(role: "owner" | "admin" | "member", accountId?: string) {
  const { dashboardSecret } = await import("../../worker/dashboard/auth.ts");
  const { csrfToken } = await import("../../worker/dashboard/viewer.ts");
  const { storedSessionToken } = await import("../../worker/dashboard/session-tokens.ts");
  const account = accountId ?? crypto.randomUUID();
  const user = crypto.randomUUID();
  const session = crypto.randomUUID();
  const token = crypto.randomUUID().replace(/-/g, "");
  const now = Date.now();
  await env.DB.batch([
    ...(accountId ? [] : [env.DB.prepare("INSERT INTO accounts (id, name, created_at) VALUES (?, 'Dash', 0)").bind(account)]),
    env.DB.prepare("INSERT INTO auth_users (id, name, email, email_verified, created_at, updated_at) VALUES (?, 'P', ?, 1, ?, ?)").bind(user, `${user}@people.test`, now, now),
    env.DB.prepare("INSERT INTO memberships (account_id, user_id, role, created_at) VALUES (?, ?, ?, 0)").bind(account, user, role),
    env.DB.prepare("INSERT INTO auth_sessions (id, expires_at, token, created_at, updated_at, user_id) VALUES (?, ?, ?, ?, ?, ?)").bind(session, now + 3600_000, await storedSessionToken(token), now, now, user),
  ]);
  const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(await dashboardSecret(env)), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const sig = btoa(String.fromCharCode(...new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(token)))));
  const cookie = `__Secure-tern.session_token=${encodeURIComponent(`${token}.${sig}`)}`;
  const csrf = await csrfToken(env, session);
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
  return { account, user, email: `${user}@people.test`, get, post };
}

const count = async (sql: string, ...args: unknown[]) => (await env.DB.prepare(sql).bind(...args).first<{ n: number }>())!.n;
const eventsOf = async (account: string) =>
  (await env.DB.prepare("SELECT type FROM webhook_events WHERE account_id = ? ORDER BY id").bind(account).all<{ type: string }>()).results.map((r) => r.type);

describe("the Contacts pages' endpoints", () => {
  it("let a member add, edit, file and remove a contact through the services, with the API's events", async () => {
    const owner = await person("owner");
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
    expect(await (await owner.get(`/dashboard/contacts/${id}`)).text()).toContain("Lovelace");

    expect((await member.post(`/contacts/${id}/delete`, {})).status).toBe(200);
    expect(await count("SELECT count(*) AS n FROM contacts WHERE id = ?", id)).toBe(0);
    expect(await eventsOf(owner.account)).toEqual(["contact.created", "contact.updated", "contact.updated", "contact.updated", "contact.deleted"]);
    const audit = (await env.DB.prepare("SELECT action FROM audit_log WHERE account_id = ? AND user_id = ? ORDER BY id").bind(owner.account, member.user).all<{ action: string }>()).results.map((r) => r.action);
    expect(audit).toEqual(["contact.created", "contact.updated", "contact.segments_changed", "contact.topics_changed", "contact.deleted"]);
  });

  it("refuses a missing or forged CSRF token and another account's contact, changing nothing", async () => {
    const a = await person("owner");
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

describe("invitations", () => {
  /** Dashboard mail through an account of its own, as a deployment configures it. */
  async function mailSettings() {
    const mail = await createAccount();
    return { account: mail.accountId, env: { DASHBOARD_MAIL_ACCOUNT: mail.accountId, DASHBOARD_MAIL_FROM: `tern <no-reply@${mail.domain}>` } };
  }
  const mailsTo = (account: string, to: string) => count("SELECT count(*) AS n FROM emails WHERE account_id = ? AND to_json LIKE ?", account, `%${to}%`);

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
