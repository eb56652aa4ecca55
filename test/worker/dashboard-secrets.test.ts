// The dashboard's secrets at rest and its weight on the wire, inside workerd:
// - after a password sign-in and a password reset, no cookie token and no link token is
//   anywhere in D1 (every table read whole), only their hashes, and both still work;
// - the JavaScript the sign-in page and the Emails page load before they are usable, as
//   rendered, stays under 200 KB gzipped.
import { env, exports } from "cloudflare:workers";
import { hashPassword } from "better-auth/crypto";
import { drizzle } from "drizzle-orm/d1";
import { describe, expect, it } from "vitest";
import { accounts, authAccounts, authUsers, memberships } from "../../worker/db/schema.ts";
import { AUTH_BASE, authFor } from "../../worker/dashboard/auth.ts";
import { storedSessionToken } from "../../worker/dashboard/session-tokens.ts";
import { uuidv7 } from "../../worker/ids.ts";
import { readConfig } from "../../worker/config.ts";
import { SCRUBBED_TEXT, scrubDashboardMail } from "../../worker/dashboard/mail.ts";
import { sendingIdentity } from "../../worker/delivery/sending-identity.ts";
import { loadEmail } from "../../worker/tracking/record.ts";
import { api, createAccount } from "./fixtures.ts";
import { waitFor } from "./wait.ts";

const BASE = "https://t.tern.test";
const PASSWORD = "correct-horse-battery-staple-42";

/** A verified user with a password and an account they own, as sign-up and confirmation leave them. */
async function user(email: string): Promise<{ userId: string; accountId: string }> {
  const userId = crypto.randomUUID();
  const accountId = uuidv7();
  const at = new Date();
  const db = drizzle(env.DB);
  await db.insert(authUsers).values({ id: userId, name: "Tess", email, emailVerified: true, createdAt: at, updatedAt: at });
  await db.insert(authAccounts).values({ id: crypto.randomUUID(), accountId: userId, providerId: "credential", userId, password: await hashPassword(PASSWORD), createdAt: at, updatedAt: at });
  await db.insert(accounts).values({ id: accountId, name: "Tess's account", createdAt: at.getTime() });
  await db.insert(memberships).values({ accountId, userId, role: "owner", createdAt: at.getTime() });
  return { userId, accountId };
}

async function signIn(email: string, password = PASSWORD): Promise<{ status: number; cookie: string; token: string }> {
  const res = await exports.default.fetch(`${BASE}${AUTH_BASE}/sign-in/email`, {
    method: "POST",
    headers: { origin: BASE, "content-type": "application/json", "cf-connecting-ip": "198.51.100.77" },
    body: JSON.stringify({ email, password }),
  });
  const set = res.headers.getSetCookie().find((c) => /session_token=[^;]/.test(c)) ?? "";
  const pair = set.split(";")[0] ?? "";
  const value = decodeURIComponent(pair.slice(pair.indexOf("=") + 1));
  return { status: res.status, cookie: pair, token: value.split(".")[0] ?? "" };
}

/** Every row of every table of tern's D1, as text. */
async function everything(): Promise<Record<string, string>> {
  const tables = await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' AND name NOT LIKE 'd1_%'").all<{ name: string }>();
  const out: Record<string, string> = {};
  for (const { name } of tables.results) {
    out[name] = JSON.stringify((await env.DB.prepare(`SELECT * FROM "${name}"`).all()).results);
  }
  return out;
}

const holding = (dump: Record<string, string>, secret: string) => Object.entries(dump).filter(([, rows]) => rows.includes(secret)).map(([t]) => t);

describe("the dashboard's tokens at rest", () => {
  it("keeps only a hash of the session token: the cookie's token is nowhere in D1, and the cookie opens the dashboard", async () => {
    await user("tess.session@example.com");
    const s = await signIn("tess.session@example.com");
    expect(s.status).toBe(200);
    expect(s.token).toMatch(/^[A-Za-z0-9]{32}$/);
    expect(holding(await everything(), s.token)).toEqual([]);
    const row = await env.DB.prepare("SELECT token FROM auth_sessions WHERE token = ?").bind(await storedSessionToken(s.token)).first<{ token: string }>();
    expect(row?.token).toMatch(/^sha256:[\w-]{43}$/);
    // The sign-in was recorded (the audit reads the session back by the cookie's token).
    const signedIn = await env.DB.prepare("SELECT count(*) AS n FROM audit_log WHERE actor_email = ? AND action = 'user.signed_in'").bind("tess.session@example.com").first<{ n: number }>();
    expect(signedIn?.n).toBe(1);
    const page = await exports.default.fetch(`${BASE}/dashboard/emails`, { headers: { cookie: s.cookie }, redirect: "manual" });
    expect(page.status).toBe(200);
    // The stored hash is no cookie: sent as one, it opens nothing.
    const forged = s.cookie.replace(s.token, row!.token);
    expect((await exports.default.fetch(`${BASE}/dashboard/emails`, { headers: { cookie: forged }, redirect: "manual" })).status).toBe(303);
  });

  it("keeps only a hash of a reset link's token; the link still resets the password and ends the old sessions", async () => {
    // The dashboard's mail goes through tern from an account nobody signs in to.
    const mail = await createAccount();
    const mailEnv = { ...env, DASHBOARD_MAIL_ACCOUNT: mail.accountId, DASHBOARD_MAIL_FROM: `tern@${mail.domain}` };
    const email = "tess.reset@example.com";
    await user(email);
    const old = await signIn(email);
    expect(old.status).toBe(200);
    const auth = await authFor(mailEnv as Env, BASE);
    const asked = await auth.handler(new Request(`${BASE}${AUTH_BASE}/request-password-reset`, {
      method: "POST",
      headers: { origin: BASE, "content-type": "application/json" },
      body: JSON.stringify({ email, redirectTo: "/dashboard/reset-password" }),
    }));
    expect(asked.status).toBe(200);
    const sent = await env.DB.prepare("SELECT id, text FROM emails WHERE account_id = ?").bind(mail.accountId).first<{ id: string; text: string | null }>();
    const token = sent?.text?.match(/reset-password\/([\w-]+)/)?.[1] ?? "";
    expect(token.length).toBeGreaterThanOrEqual(20);
    // The link's token is in the message that carries it (the mail account's sent email) and
    // nowhere else: not in the verifications, whose identifier is its hash.
    const dump = await everything();
    expect(holding(dump, token)).toEqual(["emails"]);
    const inEmails = await env.DB.prepare("SELECT count(*) AS n FROM emails WHERE (text LIKE ?1 OR html LIKE ?1) AND account_id != ?2").bind(`%${token}%`, mail.accountId).first<{ n: number }>();
    expect(inEmails?.n).toBe(0);
    expect(dump.auth_verifications).not.toContain("reset-password:");

    const reset = await exports.default.fetch(`${BASE}${AUTH_BASE}/reset-password`, {
      method: "POST",
      headers: { origin: BASE, "content-type": "application/json" },
      body: JSON.stringify({ token, newPassword: "another-long-passphrase-77" }),
    });
    expect(reset.status).toBe(200);
    // Used once: the same link is refused now.
    const again = await exports.default.fetch(`${BASE}${AUTH_BASE}/reset-password`, {
      method: "POST",
      headers: { origin: BASE, "content-type": "application/json" },
      body: JSON.stringify({ token, newPassword: "yet-another-passphrase-88" }),
    });
    expect(again.status).toBe(400);
    // revokeSessionsOnPasswordReset: the session from before the reset (found by its hash) is gone.
    expect((await exports.default.fetch(`${BASE}/dashboard/emails`, { headers: { cookie: old.cookie }, redirect: "manual" })).status).toBe(303);
    expect((await signIn(email, "another-long-passphrase-77")).status).toBe(200);

    // Once the mail has left, the cron replaces its body: the link is nowhere in clear any more.
    // Mail of that account not sent yet keeps its body, and so does what it sends by API.
    const later = await api(mail.token, "POST", "/emails", { from: `tern@${mail.domain}`, to: "later@example.com", subject: "later", text: "a link still to send", scheduled_at: "in 1 hour", tags: [{ name: "category", value: "dashboard" }] });
    expect(later.status).toBe(200);
    const own = await api(mail.token, "POST", "/emails", { from: `tern@${mail.domain}`, to: "own@example.com", subject: "own", text: "the account's own mail" });
    expect(own.status).toBe(200);
    const ownId = ((await own.json()) as { id: string }).id;
    const done = async (id: string) => (await env.DB.prepare("SELECT state FROM emails WHERE id = ?").bind(id).first<string>("state")) === "done" || undefined;
    await waitFor("the reset mail sent", () => done(sent!.id));
    await waitFor("the account's own mail sent", () => done(ownId));
    expect(await scrubDashboardMail(mailEnv as Env, Date.now())).toBe(1);
    expect(holding(await everything(), token)).toEqual([]);
    const scrubbed = await env.DB.prepare("SELECT html, text FROM emails WHERE id = ?").bind(sent!.id).first<{ html: string; text: string }>();
    expect(scrubbed!.text).toBe(SCRUBBED_TEXT);
    expect(scrubbed!.html).toContain(SCRUBBED_TEXT);
    const kept = await env.DB.prepare("SELECT text FROM emails WHERE id = ?").bind(((await later.json()) as { id: string }).id).first<string>("text");
    expect(kept).toBe("a link still to send");
    expect(await env.DB.prepare("SELECT text FROM emails WHERE id = ?").bind(ownId).first<string>("text")).toBe("the account's own mail");
    expect(await scrubDashboardMail(mailEnv as Env, Date.now())).toBe(0);
    // Without a dashboard mail account, nothing is touched.
    expect(await scrubDashboardMail({ DB: env.DB, BLOBS: env.BLOBS, DASHBOARD_MAIL_ACCOUNT: "" }, Date.now())).toBe(0);
  });
});

// The rendered pages name their scripts; the files are the ones served from dashboard/public.
const files = import.meta.glob("../../dashboard/public/**/*.js", { query: "?raw", import: "default", eager: true }) as Record<string, string>;

async function gzipped(text: string): Promise<number> {
  const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"));
  return (await new Response(stream).arrayBuffer()).byteLength;
}

/** Gzipped bytes of the scripts a page's HTML loads, and their names. */
async function scriptsOf(html: string): Promise<{ srcs: string[]; bytes: number }> {
  const srcs = [...html.matchAll(/<script\b[^>]*\bsrc="([^"]+)"/g)].map((m) => m[1]!);
  let bytes = 0;
  for (const src of srcs) {
    const text = files[`../../dashboard/public${src}`];
    expect(text, `${src} is a file under dashboard/public`).toBeTypeOf("string");
    bytes += await gzipped(text!);
    // A module script may import more: those count too.
    for (const m of text!.matchAll(/^\s*import\s[^"']*["']([^"']+)["']/gm)) bytes += await gzipped(files[`../../dashboard/public${new URL(m[1]!, `https://x${src}`).pathname}`] ?? "");
  }
  // No inline scripts (the CSP forbids them anyway).
  expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
  return { srcs, bytes };
}

describe("the dashboard's JavaScript before a page is usable", () => {
  it("is at most 200 KB gzipped on the sign-in page and the Emails page, as rendered", async () => {
    const signInPage = await (await exports.default.fetch(`${BASE}/dashboard/sign-in`)).text();
    await user("tess.budget@example.com");
    const s = await signIn("tess.budget@example.com");
    const emailsPage = await (await exports.default.fetch(`${BASE}/dashboard/emails`, { headers: { cookie: s.cookie } })).text();
    expect(emailsPage).toContain("Search emails");
    const a = await scriptsOf(signInPage);
    const b = await scriptsOf(emailsPage);
    console.log(`dashboard JavaScript, gzipped: sign-in page ${a.bytes} B (${a.srcs.join(", ")}); Emails page ${b.bytes} B (${b.srcs.join(", ")})`);
    expect(a.srcs.length).toBeGreaterThan(0);
    expect(b.srcs.length).toBeGreaterThan(0);
    expect(a.bytes).toBeLessThanOrEqual(200 * 1024);
    expect(b.bytes).toBeLessThanOrEqual(200 * 1024);
  });
});

describe("the dashboard's own mail", () => {
  it("is never tracked, whatever its domain's settings: its links are one-time credentials", async () => {
    const mail = await createAccount();
    await env.DB.prepare("UPDATE domains SET open_tracking = 1, click_tracking = 1 WHERE account_id = ?").bind(mail.accountId).run();
    const res = await api(mail.token, "POST", "/emails", { from: `tern@${mail.domain}`, to: "someone@example.com", subject: "Reset", html: '<p><a href="https://t.tern.test/dashboard/reset-password/abc">Reset</a></p>', scheduled_at: "in 1 hour" });
    expect(res.status).toBe(200);
    const email = (await loadEmail(env.DB, ((await res.json()) as { id: string }).id))!;
    const config = readConfig(env);
    expect((await sendingIdentity(env.DB, config, email)).tracking).toMatchObject({ openTracking: true, clickTracking: true });
    expect((await sendingIdentity(env.DB, { ...config, dashboardMailAccount: mail.accountId }, email)).tracking).toEqual({ openTracking: false, clickTracking: false, host: null });
  });
});
