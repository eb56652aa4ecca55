// A signed-in dashboard person for the worker tests: the rows better-auth keeps (the session
// token only as its hash), its session cookie signed the way better-call signs it (HMAC-SHA256
// of the token with the dashboard's secret), and its CSRF token. Each test file wraps it in the
// requests it needs.
import { env } from "cloudflare:workers";
import { dashboardSecret } from "../../worker/dashboard/auth.ts";
import { storedSessionToken } from "../../worker/dashboard/session-tokens.ts";
import { csrfToken } from "../../worker/dashboard/viewer.ts";

export type DashboardRole = "owner" | "admin" | "member";

/** A member of `accountId` with `role`, or the owner of a new account named "Dash". */
export async function signedIn(role: DashboardRole, accountId?: string) {
  const account = accountId ?? crypto.randomUUID();
  const [user, session, token, now] = [crypto.randomUUID(), crypto.randomUUID(), crypto.randomUUID().replace(/-/g, ""), Date.now()];
  const email = `${user}@people.test`;
  await env.DB.batch([
    // Tests post in quick loops: a rate no loop reaches, as createAccount gives (tests of the
    // rate set their own).
    ...(accountId ? [] : [env.DB.prepare("INSERT INTO accounts (id, name, rate_limit, created_at) VALUES (?, 'Dash', 100000, 0)").bind(account)]),
    env.DB.prepare("INSERT INTO auth_users (id, name, email, email_verified, created_at, updated_at) VALUES (?, 'P', ?, 1, ?, ?)").bind(user, email, now, now),
    env.DB.prepare("INSERT INTO memberships (account_id, user_id, role, created_at) VALUES (?, ?, ?, 0)").bind(account, user, role),
    env.DB.prepare("INSERT INTO auth_sessions (id, expires_at, token, created_at, updated_at, user_id) VALUES (?, ?, ?, ?, ?, ?)").bind(session, now + 3600_000, await storedSessionToken(token), now, now, user),
  ]);
  const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(await dashboardSecret(env)), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const sig = btoa(String.fromCharCode(...new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(token)))));
  const cookie = `__Secure-tern.session_token=${encodeURIComponent(`${token}.${sig}`)}`;
  return { account, user, email, cookie, csrf: await csrfToken(env, session) };
}
