// Passkeys through the dashboard's doors: adding one asks for the password (or a code), signing
// in with one makes a session as any sign-in does, and every way an assertion can be wrong
// (replayed, from another origin, another relying party, without user verification, a cloned
// counter, a removed or unknown credential) is refused. A software authenticator signs here;
// test/e2e/dashboard.test.ts does it in Chromium with its virtual authenticator.
import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { hashPassword } from "better-auth/crypto";
import { describe, expect, it } from "vitest";
import * as OTPAuth from "otpauth";
import worker from "../../worker/index.ts";
import { LIMITS } from "../../worker/dashboard/throttle.ts";
import { storedSessionToken } from "../../worker/dashboard/session-tokens.ts";
import { csrfToken } from "../../worker/dashboard/viewer.ts";
import { softAuthenticator, type SoftAuthenticator } from "../support/authenticator.ts";
import { signedIn } from "./dashboard-session.ts";

const DASH = "https://t.tern.test";
const NOT_SIGNED_IN = "That passkey did not sign you in: it may have been removed from your tern sign-in, or its check failed. Try again, or sign in another way.";

type Json = Record<string, any>;

async function person() {
  const me = await signedIn("owner");
  const post = async (path: string, body: unknown, cookie = me.cookie, csrf: string | null = me.csrf) => {
    const res = await exports.default.fetch(`${DASH}/dashboard/api${path}`, {
      method: "POST",
      headers: { cookie, origin: DASH, "content-type": "application/json", ...(csrf ? { "x-csrf-token": csrf } : {}) },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Json, res };
  };
  return { ...me, post };
}

/** Adds a passkey for `p` (a person without a password, as a Google or GitHub sign-up is). */
async function register(p: { post: (path: string, body: unknown) => Promise<{ status: number; body: Json }> }, auth: SoftAuthenticator, name?: string) {
  const options = await p.post("/auth/passkey/register/options", {});
  expect(options.status, JSON.stringify(options.body)).toBe(200);
  return p.post("/auth/passkey/register/verify", { response: await auth.register(options.body as never, DASH), name });
}

/** A sign-in as a browser makes it (without a session unless `cookie` is given): options (which
 * set the challenge cookie), then the assertion, `times` at once. */
async function signIn(auth: SoftAuthenticator, tweak: { origin?: string; userVerified?: boolean; rpId?: string; extra?: Json; cookie?: string; csrf?: string; times?: number } = {}) {
  const ip = `198.51.100.${Math.floor(Math.random() * 250)}`;
  const base = { origin: DASH, "content-type": "application/json", "cf-connecting-ip": ip, ...(tweak.csrf ? { "x-csrf-token": tweak.csrf } : {}) };
  const opts = await exports.default.fetch(`${DASH}/dashboard/api/auth/passkey/sign-in/options`, {
    method: "POST", headers: { ...base, ...(tweak.cookie ? { cookie: tweak.cookie } : {}) }, body: "{}",
  });
  expect(opts.status).toBe(200);
  const options = (await opts.json()) as { challenge: string; rpId: string };
  const cookie = [tweak.cookie, ...opts.headers.getSetCookie().map((c) => c.split(";")[0])].filter(Boolean).join("; ");
  const response = await auth.assert({ ...options, rpId: tweak.rpId ?? options.rpId }, tweak.origin ?? DASH, { userVerified: tweak.userVerified });
  const verify = () => exports.default.fetch(`${DASH}/dashboard/api/auth/passkey/sign-in/verify`, {
    method: "POST", headers: { ...base, cookie }, body: JSON.stringify({ response, ...tweak.extra }),
  });
  const results = await Promise.all(Array.from({ length: tweak.times ?? 1 }, verify));
  const res = results[0]!;
  return { status: res.status, body: (await res.json()) as Json, res, again: verify, all: results.map((r) => r.status) };
}

/** The session better-auth set in `res`, posting as person() does. */
async function sessionFrom(res: Response) {
  const cookie = sessionOf(res)!.split(";")[0]!;
  const token = decodeURIComponent(cookie.slice(cookie.indexOf("=") + 1)).split(".")[0]!;
  const id = (await env.DB.prepare("SELECT id FROM auth_sessions WHERE token = ?").bind(await storedSessionToken(token)).first<{ id: string }>())!.id;
  const csrf = await csrfToken(env, id);
  const post = async (path: string, body: unknown) => {
    const r = await exports.default.fetch(`${DASH}/dashboard/api${path}`, { method: "POST", headers: { cookie, origin: DASH, "content-type": "application/json", "x-csrf-token": csrf }, body: JSON.stringify(body) });
    return { status: r.status, body: (await r.json()) as Json, res: r };
  };
  return { id, cookie, csrf, post };
}

const sessionOf = (res: Response) => res.headers.getSetCookie().find((c) => /^__Secure-tern\.session_token=[^;]/.test(c));

describe("passkeys", () => {
  it("are added from Settings, sign in without a password or code, and show on the Settings page", async () => {
    const p = await person();
    const auth = await softAuthenticator();
    const added = await register(p, auth, "  Work\u0085 laptop\u0007\u2028 ");
    expect(added).toMatchObject({ status: 200, body: { id: expect.any(String), name: "Work laptop" } });
    const row = await env.DB.prepare("SELECT user_id, credential_id, counter, device_type FROM auth_passkeys WHERE id = ?").bind(added.body.id).first();
    expect(row).toEqual({ user_id: p.user, credential_id: auth.credentialId, counter: 0, device_type: "singleDevice" });

    const signed = await signIn(auth);
    expect(signed.status, JSON.stringify(signed.body)).toBe(200);
    // The token lives in the HttpOnly cookie only, never in the answer.
    expect(signed.body.token).toBeUndefined();
    const cookie = sessionOf(signed.res)!.split(";")[0]!;
    const page = await exports.default.fetch(`${DASH}/dashboard/settings`, { headers: { cookie } });
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain("Work laptop");
    expect(html).toContain("Add a passkey");
    const audit = (await env.DB.prepare("SELECT action, detail_json FROM audit_log WHERE user_id = ? ORDER BY id").bind(p.user).all<{ action: string; detail_json: string | null }>()).results;
    expect(audit.map((a) => a.action)).toEqual(expect.arrayContaining(["passkey.added", "user.signed_in"]));
    expect(JSON.parse(audit.find((a) => a.action === "user.signed_in")!.detail_json!)).toMatchObject({ method: "passkey" });
    const used = await env.DB.prepare("SELECT last_used_at FROM auth_passkeys WHERE id = ?").bind(added.body.id).first<{ last_used_at: number }>();
    expect(used!.last_used_at).toBeGreaterThan(0);
    // Removing the passkey ends the sessions it signed in, and only those.
    const removed = await p.post(`/passkeys/${added.body.id}/delete`, {});
    expect(removed.body).toEqual({ ok: true, notice: "Passkey removed, and the session it signed in was ended." });
    expect((await exports.default.fetch(`${DASH}/dashboard/settings`, { headers: { cookie }, redirect: "manual" })).status).toBe(303);
    expect((await exports.default.fetch(`${DASH}/dashboard/settings`, { headers: { cookie: p.cookie } })).status).toBe(200);
  });

  it("refuse a replayed, foreign, unverified or cloned assertion, and one of a removed passkey", async () => {
    const p = await person();
    const auth = await softAuthenticator(1);
    expect((await register(p, auth)).status).toBe(200);

    const first = await signIn(auth);
    expect(first.status).toBe(200);
    // The same assertion again: its challenge was used up.
    const replay = await first.again();
    expect(replay.status, "replayed").toBe(401);
    expect(((await replay.json()) as Json).message).toMatch(/expired or was already used/);

    // Each refusal says the same to whoever asks (the log keeps the reason).
    for (const [what, tweak] of [
      ["another origin", { origin: "https://evil.example" }],
      ["another relying party", { rpId: "evil.example" }],
      ["no user verification", { userVerified: false }],
    ] as const) {
      const r = await signIn(auth, tweak);
      expect(r.status, what).toBe(401);
      expect(r.body.message, what).toBe(NOT_SIGNED_IN);
      expect(sessionOf(r.res), what).toBeUndefined();
    }

    // A copy of the authenticator that reports the counter tern has already seen.
    const seen = auth.counter;
    const stored = (await env.DB.prepare("SELECT counter FROM auth_passkeys WHERE credential_id = ?").bind(auth.credentialId).first<{ counter: number }>())!.counter;
    expect(stored).toBeGreaterThan(1);
    auth.counter = stored - 1; // the next assertion counts to `stored`
    const cloned = await signIn(auth);
    expect(cloned.status, "cloned").toBe(401);
    expect(cloned.body.message).toBe(NOT_SIGNED_IN);
    auth.counter = seen;
    expect((await signIn(auth)).status).toBe(200);

    // Removed in Settings (by its owner only), it signs nobody in.
    const id = (await env.DB.prepare("SELECT id FROM auth_passkeys WHERE user_id = ?").bind(p.user).first<{ id: string }>())!.id;
    const stranger = await person();
    expect((await stranger.post(`/passkeys/${id}/delete`, {})).status).toBe(404);
    expect((await p.post(`/passkeys/${id}/delete`, {})).status).toBe(200);
    const gone = await signIn(auth);
    expect(gone.status, "removed").toBe(401);
    expect(gone.body.message).toBe(NOT_SIGNED_IN);
  });

  it("ask a person with a password for it before adding one, and count wrong ones against the address", async () => {
    const p = await person();
    const now = Date.now();
    await env.DB.prepare("INSERT INTO auth_accounts (id, account_id, provider_id, user_id, password, created_at, updated_at) VALUES (?, ?, 'credential', ?, ?, ?, ?)")
      .bind(crypto.randomUUID(), p.user, p.user, await hashPassword("correct-horse-battery-staple-42"), now, now).run();
    expect(await p.post("/auth/passkey/register/options", {})).toMatchObject({ status: 400, body: { message: "Enter your password to add a passkey." } });
    expect((await p.post("/auth/passkey/register/options", { password: "wrong-password-guess" })).status).toBe(400);
    const ok = await p.post("/auth/passkey/register/options", { password: "correct-horse-battery-staple-42" });
    expect(ok).toMatchObject({ status: 200, body: { rp: { id: "t.tern.test", name: "tern" }, authenticatorSelection: { residentKey: "required", userVerification: "required" } } });
    const auth = await softAuthenticator();
    expect((await p.post("/auth/passkey/register/verify", { response: await auth.register(ok.body as never, DASH) })).status).toBe(200);
    // The registration's challenge is spent: the same response again is refused.
    const again = await p.post("/auth/passkey/register/verify", { response: await auth.register(ok.body as never, DASH) });
    expect(again).toMatchObject({ status: 400, body: { message: expect.stringMatching(/expired or was already used/) } });
    // A second registration of the same device is refused too (the browser is told to exclude it).
    const next = await p.post("/auth/passkey/register/options", { password: "correct-horse-battery-staple-42" });
    expect(next.body.excludeCredentials).toEqual([expect.objectContaining({ id: auth.credentialId })]);
    expect((await p.post("/auth/passkey/register/verify", { response: await auth.register(next.body as never, DASH) })).body.message).toBe("That passkey is already registered.");
  });

  it("ask someone with neither a password nor a second factor for a recent sign-in, so a stolen session cannot add one", async () => {
    const p = await person();
    const session = (await env.DB.prepare("SELECT id FROM auth_sessions WHERE user_id = ?").bind(p.user).first<{ id: string }>())!.id;
    await env.DB.prepare("UPDATE auth_sessions SET created_at = ? WHERE id = ?").bind(Date.now() - 16 * 60_000, session).run();
    expect(await p.post("/auth/passkey/register/options", {})).toMatchObject({ status: 403, body: { code: "SESSION_NOT_FRESH", message: expect.stringMatching(/To add a passkey, sign out and sign in again first: it needs a sign-in from the last 15 minutes/) } });
    await env.DB.prepare("UPDATE auth_sessions SET created_at = ? WHERE id = ?").bind(Date.now() - 14 * 60_000, session).run();
    expect((await p.post("/auth/passkey/register/options", {})).status).toBe(200);
  });

  it("cannot be added from a stale session by turning TOTP on first: a renewed session keeps its sign-in time", async () => {
    // Without a password, a stale session may not turn TOTP on (whose code would then open the door).
    const stale = await person();
    await env.DB.prepare("UPDATE auth_sessions SET created_at = ? WHERE user_id = ?").bind(Date.now() - 3 * 3600_000, stale.user).run();
    expect(await stale.post("/auth/two-factor/enable", {})).toMatchObject({ status: 403, body: { code: "SESSION_NOT_FRESH" } });
    // A fresh one may; the session better-auth renews when TOTP goes on keeps the old sign-in time,
    // and a passkey then takes a code as well as that fresh sign-in.
    const p = await person();
    const signedInAt = Date.now() - 10 * 60_000;
    await env.DB.prepare("UPDATE auth_sessions SET created_at = ? WHERE user_id = ?").bind(signedInAt, p.user).run();
    const totp = OTPAuth.URI.parse((await p.post("/auth/two-factor/enable", {})).body.totpURI) as OTPAuth.TOTP;
    const on = await p.post("/auth/two-factor/verify-totp", { code: totp.generate() });
    expect(on.status).toBe(200);
    const renewed = await sessionFrom(on.res);
    expect((await env.DB.prepare("SELECT created_at FROM auth_sessions WHERE id = ?").bind(renewed.id).first<{ created_at: number }>())!.created_at).toBe(signedInAt);
    expect((await renewed.post("/auth/passkey/register/options", {})).status).toBe(422);
    expect((await renewed.post("/auth/passkey/register/options", { code: totp.generate() })).status).toBe(200);
    await env.DB.prepare("UPDATE auth_sessions SET created_at = ? WHERE id = ?").bind(Date.now() - 16 * 60_000, renewed.id).run();
    expect(await renewed.post("/auth/passkey/register/options", { code: totp.generate() })).toMatchObject({ status: 403, body: { code: "SESSION_NOT_FRESH" } });
  });

  it("clear the throttle of the person who signed in only, and a sign-in in a browser signed in as someone else is audited", async () => {
    const victim = `victim-${crypto.randomUUID()}@people.test`;
    const guess = (n: number) => exports.default.fetch(`${DASH}/dashboard/api/auth/sign-in/email`, {
      method: "POST", headers: { origin: DASH, "content-type": "application/json", "cf-connecting-ip": `192.0.2.${n}` },
      body: JSON.stringify({ email: victim, password: `guess-number-${n}-xyz` }),
    });
    for (let n = 0; n < LIMITS.email - 1; n++) expect((await guess(n)).status).toBe(401);
    // Someone signs in to their own account with their passkey, naming the victim's address.
    const attacker = await person();
    const key = await softAuthenticator();
    expect((await register(attacker, key)).status).toBe(200);
    expect((await signIn(key, { extra: { email: victim } })).status).toBe(200);
    expect((await guess(LIMITS.email - 1)).status).toBe(401);
    expect((await guess(LIMITS.email)).status).toBe(429);

    // The attacker's browser, signed in as themselves, uses the victim's passkey: a sign-in.
    const owner = await person();
    const theirs = await softAuthenticator();
    expect((await register(owner, theirs)).status).toBe(200);
    const signIns = async () => (await env.DB.prepare("SELECT count(*) AS n FROM audit_log WHERE user_id = ? AND action = 'user.signed_in'").bind(owner.user).first<{ n: number }>())!.n;
    const before = await signIns();
    const r = await signIn(theirs, { cookie: attacker.cookie, csrf: attacker.csrf });
    expect(r.status).toBe(200);
    expect(await signIns()).toBe(before + 1);
  });

  it("sign in once when one assertion is sent four times at once", async () => {
    const p = await person();
    const key = await softAuthenticator();
    expect((await register(p, key)).status).toBe(200);
    const r = await signIn(key, { times: 4 });
    expect(r.all.sort()).toEqual([200, 401, 401, 401]);
  });

  it("need a session to be added and the sign-in's own cookie to sign in; bad input is refused in words", async () => {
    const anonymous = await exports.default.fetch(`${DASH}/dashboard/api/auth/passkey/register/options`, { method: "POST", headers: { origin: DASH, "content-type": "application/json" }, body: "{}" });
    expect(anonymous.status).toBe(403);
    // An assertion without the options call's cookie has no challenge to answer.
    const auth = await softAuthenticator();
    const loose = await exports.default.fetch(`${DASH}/dashboard/api/auth/passkey/sign-in/verify`, {
      method: "POST", headers: { origin: DASH, "content-type": "application/json" },
      body: JSON.stringify({ response: await auth.assert({ challenge: "AAAA" }, DASH) }),
    });
    expect(loose.status).toBe(401);
    expect(((await loose.json()) as Json).message).toMatch(/Choose Sign in with a passkey again/);
    const p = await person();
    for (const body of [{}, { response: "x" }, { response: { id: "a", rawId: "a", type: "password", response: {} } }]) {
      const r = await p.post("/auth/passkey/register/verify", body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(typeof r.body.message).toBe("string");
    }
    expect(await env.DB.prepare("SELECT count(*) AS n FROM auth_passkeys WHERE user_id = ?").bind(p.user).first<{ n: number }>()).toEqual({ n: 0 });
  });

  it("are not offered where the dashboard is at an IP address, with what to do instead", async () => {
    const ip = "http://127.0.0.1:8787";
    const at = { ...env, PUBLIC_URL: ip };
    const me = await signedIn("owner");
    const settings = await worker.fetch(new Request(`${ip}/dashboard/settings`, { headers: { cookie: me.cookie } }), at, createExecutionContext());
    expect(settings.status).toBe(200);
    const html = await settings.text();
    expect(html).toMatch(/Passkeys need the dashboard on a domain name, and this one is at an IP address \(127\.0\.0\.1:8787\)/);
    expect(html).not.toContain("Add a passkey");
    const signInPage = await (await worker.fetch(new Request(`${ip}/dashboard/sign-in`), at, createExecutionContext())).text();
    expect(signInPage).not.toContain("Sign in with a passkey");
    expect(await (await exports.default.fetch(`${DASH}/dashboard/sign-in`)).text()).toContain("Sign in with a passkey");
    const res = await worker.fetch(new Request(`${ip}/dashboard/api/auth/passkey/sign-in/options`, { method: "POST", headers: { origin: ip, "content-type": "application/json" }, body: "{}" }), at, createExecutionContext());
    expect(res.status).toBe(400);
    expect(((await res.json()) as Json).message).toMatch(/not an IP address/);
  });
});
