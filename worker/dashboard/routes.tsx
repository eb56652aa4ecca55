// The dashboard on the Worker: pages under /dashboard, its JSON endpoints under
// /dashboard/api (better-auth's under /dashboard/api/auth). Pages are server-rendered with
// Hono JSX; app.js (a few KB) turns forms into JSON calls. Every state-changing request must
// come from this origin and, once signed in, carry the session's CSRF token.
import { Hono, type Context } from "hono";
import { renderSVG } from "uqr";
import type { Child } from "hono/jsx";
import { and, desc, eq, gt, isNull, lt, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { constantTimeEqual } from "../bytes.ts";
import { ApiError, logFailure } from "../errors.ts";
import { readBodyLimited, readJson } from "../http.ts";
import { ONE_LINE } from "../routes/schemas.ts";
import { accounts, auditLog, authAccounts, authSessions, authTwoFactors, authUsers, invitations, memberships, topics, usage } from "../db/schema.ts";
import { planLimits } from "../plans.ts";
import { readConfig } from "../config.ts";
import { periodsAt } from "../sending/quota.ts";
import { AUTH_BASE, COOKIE_PREFIX, SESSION_COOKIE, authFor, configuredProviders, dashboardOrigin, isOAuthPath, type Auth } from "./auth.ts";
import { deletePasskey, listPasskeys, relyingParty } from "./passkeys.ts";
import { MIN_PASSWORD_LENGTH } from "./passwords.ts";
import { ForgotPasswordPage, InvitationPage, ResetPasswordPage, SignInPage, SignUpPage, TwoFactorPage } from "./auth-pages.tsx";
import { AuthLayout, Badge, Empty, Layout, NAV, Time } from "./layout.tsx";
import { DashboardMailError, linkMail, sendDashboardMail } from "./mail.ts";
import { clearAddress, countAttempt, countInWindow, uncountInWindow } from "./throttle.ts";
import { storedSessionToken } from "./session-tokens.ts";
import { takeDashboardChange } from "../rate-limit.ts";
import { ACCOUNT_COOKIE, audit, auditDetailText, auditTopicIds, auditUser, clientIp, loadViewer, type Viewer } from "./viewer.ts";
import { registerResourcePages } from "./resources.tsx";
import { registerMetricsPages } from "./metrics.tsx";
import { registerBroadcastPages } from "./broadcasts.tsx";
import { registerTemplatePages } from "./templates.tsx";
import { registerContactPages } from "./contacts.tsx";
import { registerMediaPages } from "./media.tsx";
import { registerLogPages } from "./logs.tsx";
import { userAgentSummary } from "./user-agent.ts";
import { acceptInvitation, findInvitation, inviteToAccount, withdrawInvitations } from "./invitations.ts";
import { deleteAccountData, exportStream } from "../accounts/data.ts";
import { d1Runner, r2Store } from "../accounts/bindings.ts";

export type DashEnv = { Bindings: Env; Variables: { viewer: Viewer } };
export type DashCtx = Context<DashEnv>;

export class DashError extends Error {
  constructor(public status: 400 | 403 | 404 | 409 | 422 | 429, message: string) {
    super(message);
  }
}

const UNSAFE = new Set(["POST", "PUT", "PATCH", "DELETE"]);

function securityHeaders(res: Response): void {
  const h = res.headers;
  // Inline styles are allowed for the few style attributes; scripts only from this origin.
  // Images may come from anywhere: an email's preview shows the images its HTML links to.
  h.set("content-security-policy", "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' https: data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'");
  h.set("x-frame-options", "DENY");
  h.set("referrer-policy", "same-origin");
  h.set("x-content-type-options", "nosniff");
  // No other window keeps a handle on a dashboard page, and pages use no device features.
  h.set("cross-origin-opener-policy", "same-origin");
  h.set("permissions-policy", "camera=(), microphone=(), geolocation=(), payment=(), usb=()");
  // Over HTTPS, browsers keep to it for a year (sent over plain HTTP it means nothing, and the
  // operator's other hosts are left alone: no includeSubDomains).
  h.set("strict-transport-security", "max-age=31536000");
  if (!h.has("cache-control")) h.set("cache-control", "no-store");
}

export function json(data: unknown, status = 200): Response {
  return new Response(JSON.stringify(data), { status, headers: { "content-type": "application/json" } });
}

export function page(c: DashCtx, title: string, body: Child): Response | Promise<Response> {
  return c.html(<Layout viewer={c.get("viewer")} title={title} path={new URL(c.req.url).pathname}>{body}</Layout>);
}

/** The page for a failure: inside the dashboard's frame when someone is signed in (so the
 * navigation is still there), the sign-in frame otherwise. It says what happened and offers
 * a way back to the section the page belongs to; for our own failures, also to try again and
 * the reference of the log line. */
function errorPage(c: DashCtx, title: string, message: string, ref: string | null, missing = false): Response | Promise<Response> {
  const url = new URL(c.req.url);
  const viewer = c.get("viewer");
  const section = NAV.find((n) => url.pathname === n.href || url.pathname.startsWith(`${n.href}/`));
  // Trying again helps with our failures, not with a refusal.
  const again = ref && c.req.method === "GET" ? `${url.pathname}${url.search}` : null;
  // A missing page is often one of another account (a link a teammate shared): say where to look.
  const elsewhere = viewer && missing
    ? viewer.memberships.length > 1
      ? "It may have been deleted, or belong to another of your accounts: switch accounts at the foot of the navigation and open the link again."
      : "It may have been deleted, or belong to an account you are not a member of."
    : null;
  const body = (
    <div class="empty" role="alert">
      <strong>{message}</strong>
      {elsewhere ? <p>{elsewhere}</p> : null}
      <p>
        {again ? <><a href={again}>Try again</a>, or go </> : "Go "}
        {viewer ? <>back to <a href={section?.href ?? "/dashboard/emails"}>{section?.label ?? "Emails"}</a>.</> : <>to <a href="/dashboard/sign-in">sign in</a>.</>}
      </p>
      {ref ? <p>If it keeps happening, give the operator this reference: <code>{ref}</code>. It marks the line in the Worker's log that says what failed.</p> : null}
    </div>
  );
  if (viewer) return c.html(<Layout viewer={viewer} title={title} path={url.pathname}>{body}</Layout>);
  return c.html(<AuthLayout title={title}>{body}</AuthLayout>);
}

export function requireManager(v: Viewer): void {
  if (!v.canManage) throw new DashError(403, "Only owners and admins of this account can do this. Ask one of them.");
}

/** The most a dashboard form's JSON may hold: an editor document (1 MB at most) with its
 * fields, escaped. Read against the limit, so a larger body is never held whole. */
export const MAX_DASHBOARD_JSON_BYTES = 4 * 1024 * 1024;

/** The form's JSON, read as the API reads a body (its limit, JSON, no `__proto__`); the API's
 * errors reach the person as they are (onError). */
export async function body<T = Record<string, unknown>>(c: DashCtx): Promise<T> {
  const value = await readJson(c.req.raw, MAX_DASHBOARD_JSON_BYTES);
  if (value && typeof value === "object" && !Array.isArray(value)) return value as T;
  throw new DashError(400, "Send a JSON object.");
}

export function str(v: unknown, name: string, max = 200): string {
  // `name` is written for the middle of a sentence ("the account's name"); these start with it.
  const Name = `${name[0]!.toUpperCase()}${name.slice(1)}`;
  if (typeof v !== "string" || !v.trim()) throw new DashError(422, `Fill in ${name}.`);
  if (v.length > max) throw new DashError(422, `${Name} is too long (at most ${max} characters).`);
  // One line of text: a line break in an account's name would reach the subject of its mail.
  if (!ONE_LINE.test(v)) throw new DashError(422, `${Name} must be one line of text, without control characters.`);
  return v.trim();
}

/** Invitation mails one person may send in a day, one account may, and one address may get from
 * one account and from all of them: enough for any team, too few to make the operator's mail
 * address a relay for text a stranger chose, or a way to flood somebody's inbox. */
export const INVITATIONS_PER_DAY = { user: 20, account: 50, address: 5, addressAnywhere: 20 } as const;

/** A path as logs may show it: the secret in a reset or invitation link is left out. */
export function withoutTokens(path: string): string {
  return path.replace(/(\/reset-password\/|\/invitations\/)(?!accept\b)[^/?#]+/g, "$1[token]");
}

/** Paths under /dashboard that work without a session. */
const PUBLIC_PAGES = new Set(["/dashboard/sign-in", "/dashboard/sign-up", "/dashboard/sign-in/two-factor", "/dashboard/forgot-password", "/dashboard/reset-password"]);

/** better-auth paths that count as a sign-in attempt, for the throttle. */
const ATTEMPT_PATHS = new Set(["/sign-in/email", "/two-factor/verify-totp", "/two-factor/verify-backup-code", "/request-password-reset", "/sign-up/email", "/passkey/sign-in/options", "/passkey/sign-in/verify"]);
/** Of those, the ones whose body's `email` is the address better-auth acts on; elsewhere (second
 * factor, passkey) an `email` in the body is the caller's own text and names nobody. */
const ADDRESS_PATHS = new Set(["/sign-in/email", "/request-password-reset", "/sign-up/email"]);
/** Changes that add a way in or a factor. Someone without a password has nothing else to be
 * asked, so they need a sign-in of the last FRESH_SIGN_IN_MS: a stolen session must not make
 * itself a lasting way in (a passkey), nor lock its person out (a second factor they lack). */
const FRESH_PATHS = new Set(["/two-factor/enable", "/passkey/register/options"]);
const FRESH_SIGN_IN_MS = 15 * 60_000;
/** Endpoints a signed-in user reaches with their password: guesses through them (a stolen
 * session) count against the user's address as sign-ins do. */
const PASSWORD_PATHS = new Set(["/change-password", "/two-factor/enable", "/two-factor/disable", "/two-factor/generate-backup-codes", "/passkey/register/options"]);

/** Changes to the second factor that need a current code from someone without a password. */
const FACTOR_PATHS = new Set(["/two-factor/disable", "/two-factor/generate-backup-codes", "/passkey/register/options"]);

async function hasPassword(env: Env, userId: string): Promise<boolean> {
  const row = await drizzle(env.DB).select({ id: authAccounts.id }).from(authAccounts)
    .where(and(eq(authAccounts.userId, userId), eq(authAccounts.providerId, "credential"))).get();
  return row !== undefined;
}

/** Checks the request's `code` (from the authenticator app, or an unused recovery code, which
 * it uses up) with better-auth's own verification: an answer to send back when it fails, or a
 * way to give a spent recovery code back if the change it was asked for then fails. */
async function secondFactorCheck(env: Env, auth: Auth, req: Request, userId: string): Promise<{ refused: Response } | { giveBack: () => Promise<void> }> {
  const body = (await req.clone().json().catch(() => ({}))) as { code?: unknown };
  const code = typeof body.code === "string" ? body.code.trim() : "";
  if (!code) return { refused: json({ message: "Enter a current code from your authenticator app, or a recovery code.", code: "CODE_REQUIRED" }, 422) };
  const recovery = !/^\d{6}$/.test(code);
  // better-auth spends a recovery code as it checks it; the codes as they were are kept to be
  // written back, and only over the spent state, so nothing another request did is undone.
  const codes = () => drizzle(env.DB).select({ backupCodes: authTwoFactors.backupCodes }).from(authTwoFactors).where(eq(authTwoFactors.userId, userId)).get();
  const before = recovery ? await codes() : undefined;
  try {
    const headers = new Headers({ cookie: req.headers.get("cookie") ?? "" });
    if (!recovery) await auth.api.verifyTOTP({ body: { code }, headers });
    else await auth.api.verifyBackupCode({ body: { code }, headers });
  } catch {
    return { refused: json({ message: "That code is not right. Enter the code your authenticator app shows now, or an unused recovery code.", code: "INVALID_CODE" }, 422) };
  }
  const after = before ? await codes() : undefined;
  return {
    giveBack: async () => {
      if (!before || !after || before.backupCodes === after.backupCodes) return;
      await drizzle(env.DB).update(authTwoFactors).set({ backupCodes: before.backupCodes })
        .where(and(eq(authTwoFactors.userId, userId), eq(authTwoFactors.backupCodes, after.backupCodes))).run()
        .catch((err: unknown) => logFailure("a spent recovery code was not given back", err));
    },
  };
}

/** The better-auth endpoints the dashboard uses; the rest of its surface (listing sessions with
 * their tokens, changing the address, deleting the user, ...) is not reachable. */
const AUTH_PATHS = [
  /^\/sign-in\/(email|social)$/, /^\/sign-up\/email$/, /^\/callback\/[a-z]+$/, /^\/verify-email$/,
  /^\/request-password-reset$/, /^\/reset-password(\/[\w-]+)?$/, /^\/change-password$/, /^\/error$/,
  /^\/two-factor\/(enable|disable|verify-totp|verify-backup-code|generate-backup-codes)$/,
  /^\/passkey\/(register|sign-in)\/(options|verify)$/,
];

/** Audit actions for better-auth calls a signed-in person makes. */
const AUTH_AUDIT: Record<string, string> = {
  "/two-factor/enable": "mfa.setup_started",
  "/two-factor/disable": "mfa.disabled",
  "/two-factor/generate-backup-codes": "mfa.recovery_codes_regenerated",
  "/change-password": "password.changed",
  "/passkey/register/verify": "passkey.added",
};

/** Which of the user's accounts the dashboard shows (checked against their memberships on
 * every request, so it grants nothing by itself). */
function accountCookie(env: Env, accountId: string, maxAge?: number): string {
  const secure = readConfig(env).devMode ? "" : "; Secure";
  return `${ACCOUNT_COOKIE}=${accountId}; Path=/dashboard; HttpOnly; SameSite=Lax${secure}${maxAge !== undefined ? `; Max-Age=${maxAge}` : ""}`;
}

function sessionTokenFrom(setCookies: string[]): string | null {
  for (const c of setCookies) {
    const m = c.match(new RegExp(`^(?:__Secure-)?${COOKIE_PREFIX}\\.${SESSION_COOKIE}=([^;]*)`));
    if (m && m[1] && !/max-age=0/i.test(c)) return decodeURIComponent(m[1]).split(".")[0] ?? null;
  }
  return null;
}

/** What a sign-in, sign-up or settings request to better-auth may carry: an address, a name,
 * a password, a code. Read against this before anything parses it (these paths need no session). */
const MAX_AUTH_BODY_BYTES = 64 * 1024;

async function authProxy(c: DashCtx, viewer: Viewer | null): Promise<Response> {
  const env = c.env;
  let req = c.req.raw;
  const path = new URL(req.url).pathname.slice(AUTH_BASE.length);
  if (!AUTH_PATHS.some((re) => re.test(path))) return json({ message: "No such dashboard endpoint." }, 404);
  const ip = clientIp(req);
  // The dashboard posts JSON only. better-auth also reads form bodies, which the throttle below
  // would not see an address in: a form post was a way round the per-address limit.
  if (req.method === "POST" && !path.startsWith("/callback/") && !/^application\/json\b/i.test(req.headers.get("content-type") ?? "")) {
    return json({ message: "Send this request as JSON (Content-Type: application/json)." }, 415);
  }
  if (req.method === "POST" && req.body) req = new Request(req, { body: await readBodyLimited(req, MAX_AUTH_BODY_BYTES) }); // a 413 past it (onError)
  // A person's password and second factor change from Settings, as a member of an account: a
  // session without one (its person removed from every account) would pass by what comes with
  // a viewer (the code asked of the passwordless, the throttle, the CSRF token, the audit).
  if (req.method === "POST" && viewer === null && PASSWORD_PATHS.has(path)) {
    return json({ message: "Sign in as a member of an account to change your password or two-factor authentication." }, 403);
  }
  let email: string | undefined;
  const passwordCheck = req.method === "POST" && viewer !== null && PASSWORD_PATHS.has(path);
  // A signed-in person checks a code only to confirm a second factor being set up. Once it is
  // on, a code checked here would be an oracle for a stolen session (its answer says whether a
  // guess was right) that the sign-in's own limits never see: refused, and setup's guesses count.
  const factorGuess = req.method === "POST" && viewer !== null && (path === "/two-factor/verify-totp" || path === "/two-factor/verify-backup-code");
  if (factorGuess && viewer!.user.twoFactorEnabled) {
    return json({ message: "Two-factor authentication is already on. Codes are asked for at sign-in, and to turn it off or make new recovery codes.", code: "TWO_FACTOR_ALREADY_ON" }, 409);
  }
  if (passwordCheck || factorGuess || (req.method === "POST" && ATTEMPT_PATHS.has(path) && !(viewer && path.startsWith("/two-factor/")))) {
    if (passwordCheck || factorGuess) email = viewer!.user.email.toLowerCase();
    else if (ADDRESS_PATHS.has(path)) {
      const parsed = (await req.clone().json().catch(() => ({}))) as { email?: unknown };
      email = typeof parsed.email === "string" ? parsed.email.trim().toLowerCase() : undefined;
    }
    const throttled = await countAttempt(env.DB, { email, ip });
    if (throttled) {
      const res = json({ message: `Too many attempts. Try again in ${Math.ceil(throttled.retryAfter / 60)} minutes.`, code: "TOO_MANY_ATTEMPTS" }, 429);
      res.headers.set("retry-after", String(throttled.retryAfter));
      return res;
    }
  }
  const auth = await authFor(env, dashboardOrigin(env, req.url), { oauth: isOAuthPath(new URL(req.url).pathname) });
  // Someone who signs in with Google or GitHub has no password for better-auth to ask for
  // (allowPasswordless): turning their second factor off, or minting new recovery codes, takes
  // a current code instead, so a stolen session cannot do it alone.
  const passwordless = req.method === "POST" && viewer !== null && (FACTOR_PATHS.has(path) || FRESH_PATHS.has(path)) && !(await hasPassword(env, viewer.user.id));
  let giveBackCode = async () => {};
  if (passwordless && FACTOR_PATHS.has(path) && viewer!.user.twoFactorEnabled) {
    const checked = await secondFactorCheck(env, auth, req, viewer!.user.id);
    if ("refused" in checked) return checked.refused;
    giveBackCode = checked.giveBack;
  }
  // When this person signed in: a session better-auth renews (turning TOTP on, a password
  // change) keeps it, so only a real sign-in makes a session fresh.
  const signedIn = req.method === "POST" && viewer
    ? await drizzle(env.DB).select({ at: authSessions.createdAt, passkeyId: authSessions.passkeyId }).from(authSessions).where(eq(authSessions.id, viewer.session.id)).get()
    : undefined;
  const signedInAt = signedIn?.at;
  if (passwordless && FRESH_PATHS.has(path) && (!signedInAt || Date.now() - signedInAt.getTime() > FRESH_SIGN_IN_MS)) {
    const what = path.startsWith("/passkey/") ? "add a passkey" : "turn on two-factor authentication";
    return json({ message: `To ${what}, sign out and sign in again first: it needs a sign-in from the last ${FRESH_SIGN_IN_MS / 60_000} minutes.`, code: "SESSION_NOT_FRESH" }, 403);
  }
  let res: Response;
  try {
    res = await auth.handler(req);
  } catch (err) {
    await giveBackCode();
    if (err instanceof DashboardMailError) return json({ message: err.message }, 503);
    throw err;
  }
  // The change the code was spent on did not happen: the person keeps that recovery code.
  if (res.status >= 400) await giveBackCode();
  // better-auth answers some refusals with no body (a POST to /verify-email: 404); every
  // dashboard endpoint answers JSON with a message.
  if (res.status >= 400 && !/json/i.test(res.headers.get("content-type") ?? "") && !(await res.clone().text()).trim()) {
    res = json({ message: res.status === 404 ? "No such dashboard endpoint for this method, or the link is no longer valid. Go back to the dashboard and try again." : `The request was refused (HTTP ${res.status}). Reload the page and try again.` }, res.status);
  }
  if (res.status === 500) {
    // A failure to send the verification or reset mail surfaces here: say so plainly.
    console.error("dashboard auth failed", withoutTokens(path), await res.clone().text());
  }
  if ((passwordCheck || factorGuess) && res.status < 400) await clearAddress(env.DB, email!);
  const newToken = sessionTokenFrom(res.headers.getSetCookie());
  // A wrong password for a known address is recorded in that user's accounts (the owner sees
  // someone trying); an unknown address leaves no trace to probe with.
  if (path === "/sign-in/email" && res.status === 401 && email) {
    const user = await drizzle(env.DB).select({ id: authUsers.id, email: authUsers.email }).from(authUsers).where(eq(authUsers.email, email)).get();
    if (user) await auditUser(env, user, req, "user.sign_in_failed");
  }
  const row = newToken && res.status < 400
    ? await drizzle(env.DB).select({ id: authUsers.id, email: authUsers.email, sessionId: authSessions.id }).from(authSessions)
      .innerJoin(authUsers, eq(authUsers.id, authSessions.userId)).where(eq(authSessions.token, await storedSessionToken(newToken))).get()
    : undefined;
  // A session better-auth renews for the person already signed in (turning TOTP on, a password
  // change) is not a sign-in: it keeps the sign-in time, and the passkey, of the one it replaces.
  if (row && viewer && row.id === viewer.user.id) {
    if (signedIn) await drizzle(env.DB).update(authSessions).set({ createdAt: signedIn.at, passkeyId: signedIn.passkeyId }).where(eq(authSessions.id, row.sessionId)).run();
  } else if (row) {
    // A sign-in, perhaps as someone else in a browser signed in already (a passkey it holds).
    // The address cleared is the person's who signed in, not one the request named.
    await clearAddress(env.DB, row.email.toLowerCase());
    const method = path.startsWith("/callback/") ? `oauth:${path.slice("/callback/".length)}` : path.startsWith("/two-factor/") ? `password+${path.slice(12)}` : path.startsWith("/passkey/") ? "passkey" : "password";
    await auditUser(env, row, req, "user.signed_in", { method });
    // A new session starts in the user's first account, not one a previous user chose.
    res = new Response(res.body, res);
    res.headers.append("set-cookie", accountCookie(env, "", 0));
  }
  // The session token lives in the HttpOnly cookie only; better-auth also puts it in the JSON
  // answer, where any script on the page could read it. A TOTP setup gets its QR code here,
  // drawn on the server, so the page needs no QR library.
  if ((res.headers.get("content-type") ?? "").includes("application/json")) {
    const data = (await res.clone().json().catch(() => null)) as Record<string, unknown> | null;
    const qr = path === "/two-factor/enable" && res.ok && typeof data?.totpURI === "string";
    if (data && typeof data === "object" && ("token" in data || qr)) {
      delete data.token;
      // Shown on the page that loads next (app.js), which has the renewed session's token.
      if (path === "/change-password" && res.ok) data.notice = "Your password is changed.";
      if (qr) data.totpQr = `data:image/svg+xml;base64,${btoa(renderSVG(data.totpURI as string, { border: 2 }))}`;
      const headers = new Headers(res.headers);
      headers.delete("content-length");
      res = new Response(JSON.stringify(data), { status: res.status, headers });
    }
  }
  if (viewer && res.status < 400) {
    const action = AUTH_AUDIT[path] ?? (path === "/two-factor/verify-totp" && !viewer.user.twoFactorEnabled ? "mfa.enabled" : undefined);
    if (action) await audit(env, viewer, { action, target: viewer.user.email });
  }
  return res;
}

export function dashboardApp(): Hono<DashEnv> {
  const app = new Hono<DashEnv>();

  app.onError((err, c) => {
    const url = new URL(c.req.url);
    const api = url.pathname.startsWith("/dashboard/api/");
    if (err instanceof DashError || err instanceof ApiError) {
      // The services' errors say what is wrong in the contract's words; a page shows them too.
      const status = err.status as 400 | 404;
      if (api) {
        const res = json({ message: err.message }, status);
        if (err instanceof ApiError) for (const [k, v] of Object.entries(err.headers)) res.headers.set(k, v);
        return res;
      }
      c.status(status);
      return errorPage(c, status === 404 ? "Not found" : "This did not work", err.message, null, status === 404);
    }
    // Anything else is ours: logged in full under a reference the person can quote, which is
    // all they are shown of it.
    const ref = logFailure(`dashboard error ${c.req.method} ${withoutTokens(url.pathname)}`, err);
    if (api) return json({ message: `Something went wrong on our side. Reload the page to see what was saved, then try again; if it keeps happening, give the operator this reference: ${ref}.`, reference: ref }, 500);
    c.status(500);
    return errorPage(c, "Something went wrong", "This page could not be shown because of a problem on our side, not anything you did.", ref);
  });

  app.use("*", async (c, next) => {
    const req = c.req.raw;
    const url = new URL(req.url);
    if (UNSAFE.has(req.method)) {
      // A cross-site form or script cannot make these: the browser names the origin it comes from.
      // Browsers name it in Origin, or (when they leave Origin out of a same-origin request) in
      // Sec-Fetch-Site, which no page can set.
      const origin = req.headers.get("origin");
      const sameSite = origin ? origin === dashboardOrigin(c.env, req.url) : req.headers.get("sec-fetch-site") === "same-origin";
      if (!sameSite) {
        const res = json({ message: "Cross-site requests are refused. Use the dashboard's own pages." }, 403);
        securityHeaders(res);
        return res;
      }
    }
    const viewer = await loadViewer(c.env, req);
    if (viewer) c.set("viewer", viewer);
    if (UNSAFE.has(req.method) && viewer) {
      const sent = req.headers.get("x-csrf-token") ?? "";
      const enc = new TextEncoder();
      if (!constantTimeEqual(enc.encode(sent), enc.encode(viewer.csrf))) {
        const res = json({ message: "The page's security token is missing or wrong. Reload the page and try again." }, 403);
        securityHeaders(res);
        return res;
      }
    }
    if (url.pathname.startsWith(AUTH_BASE + "/")) {
      const res = await authProxy(c, viewer);
      const out = new Response(res.body, res);
      securityHeaders(out);
      return out;
    }
    const isApi = url.pathname.startsWith("/dashboard/api/");
    const open = PUBLIC_PAGES.has(url.pathname) || url.pathname.startsWith("/dashboard/invitations/");
    if (!viewer && !open) {
      if (isApi) {
        const res = json({ message: "Sign in to the dashboard first. (API keys do not open the dashboard.)" }, 401);
        securityHeaders(res);
        return res;
      }
      return c.redirect("/dashboard/sign-in", 303);
    }
    await next();
    securityHeaders(c.res);
  });
  // Every change a signed-in person makes through the dashboard's endpoints spends their own
  // bucket (the sign-in endpoints, answered above without going on, have their throttle). Its
  // 429 is the error handler's, inside the middleware above, so it gets the security headers.
  app.use("/api/*", async (c, next) => {
    const viewer = c.get("viewer");
    if (UNSAFE.has(c.req.method) && viewer) await takeDashboardChange(c.env, viewer.user.id, viewer.account.id, viewer.account.rateLimit);
    await next();
  });

  // ---- pages before sign-in -------------------------------------------------------------
  app.get("/", (c) => c.redirect(c.get("viewer") ? "/dashboard/emails" : "/dashboard/sign-in", 303));
  app.get("/sign-in", (c) => (c.get("viewer") ? c.redirect("/dashboard/emails", 303) : c.html(<SignInPage providers={configuredProviders(c.env)} notice={c.req.query("notice") ?? c.req.query("error")} passkeys={relyingParty(dashboardOrigin(c.env, c.req.url)).usable} />)));
  app.get("/sign-up", (c) => (c.get("viewer") ? c.redirect("/dashboard/emails", 303) : c.html(<SignUpPage providers={configuredProviders(c.env)} />)));
  app.get("/sign-in/two-factor", (c) => c.html(<TwoFactorPage />));
  app.get("/forgot-password", (c) => c.html(<ForgotPasswordPage />));
  app.get("/reset-password", (c) => c.html(<ResetPasswordPage token={c.req.query("token")} error={c.req.query("error")} />));

  // ---- invitations ----------------------------------------------------------------------
  app.get("/invitations/:token", async (c) => {
    const token = c.req.param("token");
    const inv = await findInvitation(c.env.DB, token);
    const account = inv ? await drizzle(c.env.DB).select({ name: accounts.name }).from(accounts).where(eq(accounts.id, inv.accountId)).get() : null;
    const viewer = c.get("viewer");
    const memberAs = inv && viewer ? viewer.memberships.find((m) => m.accountId === inv.accountId)?.role : undefined;
    return c.html(<InvitationPage accountName={account?.name ?? null} token={token} signedIn={!!viewer} memberAs={memberAs} csrf={viewer?.csrf} />);
  });
  app.post("/api/invitations/accept", async (c) => {
    const v = c.get("viewer");
    const b = await body<{ token?: unknown }>(c);
    const inv = await findInvitation(c.env.DB, String(b.token ?? ""));
    if (!inv) throw new DashError(404, "This invitation is invalid, used or expired. Ask the account's owner for a new one.");
    if (inv.email.toLowerCase() !== v.user.email.toLowerCase()) {
      throw new DashError(403, `This invitation is for ${inv.email}. Sign in with that address to accept it.`);
    }
    const result = await acceptInvitation(c.env.DB, inv, v.user.id, Date.now());
    const account = await drizzle(c.env.DB).select({ name: accounts.name }).from(accounts).where(eq(accounts.id, inv.accountId)).get();
    const name = account?.name ?? "the account";
    await audit(c.env, { ...v, account: { ...v.account, id: inv.accountId } }, result.kind === "joined"
      ? { action: "member.joined", target: v.user.email, detail: { role: result.role } }
      : { action: "invitation.used_by_member", target: v.user.email, detail: { role: result.role, invited_as: inv.role } });
    c.header("set-cookie", accountCookie(c.env, inv.accountId));
    return c.json({
      ok: true,
      notice: result.kind === "joined"
        ? `You joined ${name} as ${result.role}.`
        : `You are already a member of ${name} (${result.role}); your role is unchanged. The invitation is now used up.`,
    });
  });

  // ---- session and account ----------------------------------------------------------------
  app.post("/api/sign-out", async (c) => {
    const v = c.get("viewer");
    const auth = await authFor(c.env, dashboardOrigin(c.env, c.req.url));
    const headers = new Headers({ cookie: c.req.header("cookie") ?? "", origin: c.req.header("origin") ?? "" });
    const res = await auth.api.signOut({ headers, asResponse: true });
    await audit(c.env, v, { action: "user.signed_out", target: v.user.email });
    const out = json({ ok: true });
    for (const cookie of res.headers.getSetCookie()) out.headers.append("set-cookie", cookie);
    return out;
  });
  app.post("/api/sessions/revoke-all", async (c) => {
    const v = c.get("viewer");
    await drizzle(c.env.DB).delete(authSessions).where(eq(authSessions.userId, v.user.id)).run();
    await audit(c.env, v, { action: "user.signed_out_everywhere", target: v.user.email });
    return c.json({ ok: true });
  });
  app.post("/api/sessions/:id/revoke", async (c) => {
    const v = c.get("viewer");
    const r = await drizzle(c.env.DB).delete(authSessions).where(and(eq(authSessions.id, c.req.param("id")), eq(authSessions.userId, v.user.id))).returning({ id: authSessions.id });
    if (r.length === 0) throw new DashError(404, "No such session of yours.");
    await audit(c.env, v, { action: "session.revoked", target: c.req.param("id") });
    return c.json({ ok: true });
  });
  app.post("/api/passkeys/:id/delete", async (c) => {
    const v = c.get("viewer");
    const gone = await deletePasskey(c.env.DB, v.user.id, c.req.param("id"));
    if (!gone) throw new DashError(404, "No such passkey of yours.");
    await audit(c.env, v, { action: "passkey.removed", target: v.user.email, detail: { name: gone.passkey.name, sessions_ended: gone.sessions } });
    // This browser's own session may be one of them: the page that loads next is the sign-in.
    return c.json({ ok: true, notice: gone.sessions ? `Passkey removed, and the ${gone.sessions === 1 ? "session it signed in was" : `${gone.sessions} sessions it signed in were`} ended.` : "Passkey removed." });
  });
  app.post("/api/switch-account", async (c) => {
    const v = c.get("viewer");
    const b = await body<{ accountId?: unknown }>(c);
    const target = v.memberships.find((m) => m.accountId === b.accountId);
    if (!target) throw new DashError(404, "You are not a member of that account.");
    c.header("set-cookie", accountCookie(c.env, target.accountId));
    return c.json({ ok: true });
  });
  app.post("/api/account", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    const name = str((await body(c)).name, "the account's name", 100);
    await drizzle(c.env.DB).update(accounts).set({ name }).where(eq(accounts.id, v.account.id)).run();
    await audit(c.env, v, { action: "account.renamed", detail: { name } });
    return c.json({ ok: true });
  });

  // ---- members and invitations -------------------------------------------------------------
  app.post("/api/invitations", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    const b = await body<{ email?: unknown; role?: unknown }>(c);
    const email = str(b.email, "the address to invite", 254).toLowerCase();
    if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(email)) throw new DashError(422, "Enter a valid email address to invite.");
    // Anything but the form's two roles is refused: a mistyped role must not invite as member.
    if (b.role !== undefined && b.role !== "admin" && b.role !== "member") throw new DashError(422, "An invitation's role is admin or member.");
    const role = b.role === "admin" ? "admin" : "member";
    const now = Date.now();
    // Every invitation mail counts, a renewed one too (it is a mail like the first): from one
    // person, from one account, to one address from one account and from anyone, which keeps
    // tern's own mail from being a way to flood an address or to spend the dashboard mail
    // account's quota. Only mail that goes counts: a refusal takes its count back, so nobody's
    // refused attempts use up another's allowance (an address's, an account's).
    const counted = [
      { key: `invite-by:${v.user.id}`, limit: INVITATIONS_PER_DAY.user },
      { key: `invite-account:${v.account.id}`, limit: INVITATIONS_PER_DAY.account },
      { key: `invite-to:${v.account.id}:${email}`, limit: INVITATIONS_PER_DAY.address },
      { key: `invite-to:${email}`, limit: INVITATIONS_PER_DAY.addressAnywhere },
    ];
    const capped = await countInWindow(c.env.DB, counted, 86400_000, now);
    let sent = false;
    let result: Awaited<ReturnType<typeof inviteToAccount>>;
    try {
      if (capped) {
        const hours = Math.ceil(capped.retryAfter / 3600);
        const when = `Try again in ${hours} hour${hours === 1 ? "" : "s"}`;
        if (capped.index === 2) throw new DashError(429, `${email} has been sent as many invitations to ${v.account.name} as one address may get in a day (${INVITATIONS_PER_DAY.address}). ${when}, or ask them to use a link already sent.`);
        if (capped.index === 3) throw new DashError(429, `${email} has been sent as many invitations as one address may get in a day from all accounts (${INVITATIONS_PER_DAY.addressAnywhere}). ${when}.`);
        const who = capped.index === 0 ? "one person" : "one account";
        throw new DashError(429, `That is as many invitations as ${who} may send in a day (${capped.index === 0 ? INVITATIONS_PER_DAY.user : INVITATIONS_PER_DAY.account}); a renewed invitation counts too. ${when}, or ask someone already invited to accept.`);
      }
      result = await inviteToAccount(c.env.DB, { accountId: v.account.id, email, role, invitedBy: v.user.id, now });
      if (result.kind === "member") {
        throw new DashError(409, `${email} is already a member of ${v.account.name} (${result.role}). To give them another role, change it in the Members list.`);
      }
      const url = `${dashboardOrigin(c.env, c.req.url)}/dashboard/invitations/${result.token}`;
      try {
        await sendDashboardMail(c.env, linkMail(email, `Join ${v.account.name} on tern`, `${v.user.name || v.user.email} invited you to the tern account ${v.account.name} as ${role}.`, "Accept the invitation", url));
      } catch (err) {
        if (!(err instanceof DashboardMailError)) throw err;
        // No mail, no invitation: a new one is taken back (a renewed one keeps its new link,
        // which nobody received; inviting again sends another).
        if (result.kind === "invited") await drizzle(c.env.DB).delete(invitations).where(eq(invitations.id, result.id));
        return json({ message: `The invitation could not be sent: ${err.message}` }, 503);
      }
      sent = true;
    } finally {
      // Only mail that went counts: whatever stopped it takes its count back.
      if (!sent) await uncountInWindow(c.env.DB, counted, 86400_000, now);
    }
    if (result.kind === "renewed") {
      await audit(c.env, v, { action: "invitation.renewed", target: email, detail: { role, previous_role: result.previousRole } });
      const roleNote = result.previousRole === role ? `role ${role}` : `role now ${role}, was ${result.previousRole}`;
      return c.json({ id: result.id, renewed: true, notice: `${email} was already invited: a new link went out (${roleNote}), valid for 7 days. The earlier link no longer works.` });
    }
    await audit(c.env, v, { action: "member.invited", target: email, detail: { role } });
    return c.json({ id: result.id, renewed: false, notice: `Invitation sent to ${email} as ${role}, valid for 7 days.` });
  });
  app.post("/api/invitations/:id/revoke", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    const r = await drizzle(c.env.DB).delete(invitations).where(and(eq(invitations.id, c.req.param("id")), eq(invitations.accountId, v.account.id))).returning({ id: invitations.id });
    // Another account's invitation, or none: a 404 and no audit entry for a revocation that did nothing.
    if (r.length === 0) throw new DashError(404, "No such invitation in this account. It may have been used or revoked already.");
    await audit(c.env, v, { action: "invitation.revoked", target: c.req.param("id") });
    return c.json({ ok: true });
  });
  app.post("/api/members/:userId/role", async (c) => {
    const v = c.get("viewer");
    if (v.role !== "owner") throw new DashError(403, "Only an owner changes roles.");
    const role = (await body<{ role?: unknown }>(c)).role;
    if (role !== "owner" && role !== "admin" && role !== "member") throw new DashError(422, "A role is owner, admin or member.");
    const userId = c.req.param("userId");
    if (userId === v.user.id) throw new DashError(409, "Make another owner first; then they can change your role.");
    const d = drizzle(c.env.DB);
    const changed = d.update(memberships).set({ role }).where(and(eq(memberships.accountId, v.account.id), eq(memberships.userId, userId))).returning({ userId: memberships.userId });
    // Someone who may no longer invite leaves no invitation of theirs open behind them (in the
    // same batch: never one without the other).
    const [r, gone] = role === "member"
      ? await d.batch([changed, withdrawInvitations(d, v.account.id, userId)])
      : [await changed, []];
    if (r.length === 0) throw new DashError(404, "That person is not a member of this account.");
    const withdrawn = gone.length;
    await audit(c.env, v, { action: "member.role_changed", target: userId, detail: withdrawn ? { role, invitations_withdrawn: withdrawn } : { role } });
    return c.json({ ok: true });
  });
  app.post("/api/members/:userId/remove", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    const userId = c.req.param("userId");
    const d = drizzle(c.env.DB);
    const target = await d.select({ role: memberships.role, email: authUsers.email }).from(memberships).innerJoin(authUsers, eq(authUsers.id, memberships.userId))
      .where(and(eq(memberships.accountId, v.account.id), eq(memberships.userId, userId))).get();
    if (!target) throw new DashError(404, "That person is not a member of this account.");
    if (target.role === "owner" && v.role !== "owner") throw new DashError(403, "Only an owner can remove an owner.");
    if (target.role === "owner") {
      const owners = await d.select({ n: sql<number>`count(*)` }).from(memberships).where(and(eq(memberships.accountId, v.account.id), eq(memberships.role, "owner"))).get();
      if ((owners?.n ?? 0) <= 1) throw new DashError(409, "An account keeps at least one owner. Make someone else owner first.");
    }
    // An invitation they sent (as admin, to an address they hold) must not bring them back in:
    // withdrawn in the same batch as the membership goes.
    const [, gone] = await d.batch([
      d.delete(memberships).where(and(eq(memberships.accountId, v.account.id), eq(memberships.userId, userId))),
      withdrawInvitations(d, v.account.id, userId),
    ]);
    const withdrawn = gone.length;
    await audit(c.env, v, { action: "member.removed", target: target.email, ...(withdrawn ? { detail: { invitations_withdrawn: withdrawn } } : {}) });
    return c.json({ ok: true });
  });

  // ---- data rights: a copy of everything the account holds ---------------------------------
  app.get("/api/export", async (c) => {
    const v = c.get("viewer");
    if (v.role !== "owner") throw new DashError(403, "Only an owner exports the account's data.");
    await audit(c.env, v, { action: "account.exported" });
    const day = new Date().toISOString().slice(0, 10);
    return new Response(exportStream(d1Runner(c.env.DB), v.account.id), {
      headers: { "content-type": "application/json; charset=utf-8", "content-disposition": `attachment; filename="tern-export-${day}.json"` },
    });
  });

  // Erasure: the owner types the account's name; the request is recorded first (in the log
  // that goes last, so a crash half-way leaves it), then everything goes, then the owner is
  // signed out (a user of no other account is deleted with it, sessions included).
  app.post("/api/account/delete", async (c) => {
    const v = c.get("viewer");
    if (v.role !== "owner") throw new DashError(403, "Only an owner deletes the account. Ask one of its owners.");
    const typed = (await body<{ name?: unknown }>(c)).name;
    if (typeof typed !== "string" || typed.trim() !== v.account.name) {
      throw new DashError(422, `Type the account's name, ${v.account.name}, exactly to confirm the deletion.`);
    }
    await audit(c.env, v, { action: "account.deletion_started", target: v.account.id, detail: { name: v.account.name } });
    const report = await deleteAccountData(d1Runner(c.env.DB), r2Store(c.env.BLOBS), v.account.id);
    console.log(JSON.stringify({ event: "account.deleted", account_id: v.account.id, by: v.user.id, rows: report.rows, blobs: report.blobs, users: report.users }));
    const auth = await authFor(c.env, dashboardOrigin(c.env, c.req.url));
    const headers = new Headers({ cookie: c.req.header("cookie") ?? "", origin: c.req.header("origin") ?? "" });
    const res = await auth.api.signOut({ headers, asResponse: true }).catch(() => null);
    // The session goes even when better-auth could not end it (its user may be gone already).
    await drizzle(c.env.DB).delete(authSessions).where(eq(authSessions.id, v.session.id)).run();
    const out = json({ ok: true });
    for (const cookie of res?.headers.getSetCookie() ?? []) out.headers.append("set-cookie", cookie);
    out.headers.append("set-cookie", accountCookie(c.env, "", 0));
    return out;
  });

  // ---- settings and audit log pages ------------------------------------------------------
  app.get("/settings", async (c) => settingsPage(c));
  app.get("/audit-log", async (c) => auditPage(c));

  registerResourcePages(app);
  registerMetricsPages(app);
  registerBroadcastPages(app);
  registerTemplatePages(app);
  registerContactPages(app);
  registerMediaPages(app);
  registerLogPages(app);

  app.all("*", (c) => {
    if (new URL(c.req.url).pathname.startsWith("/dashboard/api/")) return json({ message: "No such dashboard endpoint." }, 404);
    if (c.req.method === "POST") {
      // A form sent before app.js ran (every form is method=post, so nothing lands in a URL).
      c.status(400);
      return errorPage(c, "Not sent", "The form was sent before the page finished loading. Go back, wait a moment and send it again.", null);
    }
    c.status(404);
    return page(c, "Page not found", <Empty title="There is no page here."><p><a href="/dashboard/emails">Go to Emails</a></p></Empty>);
  });
  return app;
}

async function settingsPage(c: DashCtx): Promise<Response> {
  const v = c.get("viewer");
  const d = drizzle(c.env.DB);
  const now = Date.now();
  const periods = periodsAt(now);
  const limits = planLimits(v.account.plan);
  const [members, pending, sessions, used, credential, keys] = await Promise.all([
    d.select({ userId: memberships.userId, role: memberships.role, email: authUsers.email, name: authUsers.name, since: memberships.createdAt })
      .from(memberships).innerJoin(authUsers, eq(authUsers.id, memberships.userId)).where(eq(memberships.accountId, v.account.id)).all(),
    d.select().from(invitations).where(and(eq(invitations.accountId, v.account.id), isNull(invitations.acceptedAt), gt(invitations.expiresAt, now))).orderBy(desc(invitations.createdAt)).all(),
    d.select().from(authSessions).where(and(eq(authSessions.userId, v.user.id), gt(authSessions.expiresAt, new Date(now)))).orderBy(desc(authSessions.createdAt)).all(),
    d.select({ period: usage.period, used: usage.used }).from(usage).where(and(eq(usage.accountId, v.account.id), sql`${usage.period} in (${periods.month}, ${periods.day})`)).all(),
    hasPassword(c.env, v.user.id),
    listPasskeys(c.env.DB, v.user.id),
  ]);
  const origin = dashboardOrigin(c.env, c.req.url);
  const passkeysUsable = relyingParty(origin).usable;
  const usedIn = (p: string) => used.find((u) => u.period === p)?.used ?? 0;
  const count = (n: number) => n.toLocaleString("en-US");
  // An Actions column only where some row has an action: not over a sole owner or a lone session
  // (whose only way out is Sign out, so no Sign out everywhere under it either).
  const memberActions = v.canManage && members.some((m) => m.userId !== v.user.id);
  const sessionActions = sessions.some((s) => s.id !== v.session.id);
  return page(c, "Settings", (
    <>
      <section class="panel" aria-labelledby="acct">
        <h2 id="acct">Account</h2>
        <dl class="fields">
          <dt>Name</dt><dd>{v.account.name}</dd>
          <dt>Account id</dt><dd class="mono">{v.account.id}</dd>
          <dt>Plan</dt><dd>{v.account.plan}</dd>
          <dt>This month</dt><dd>{count(usedIn(periods.month))} of {count(limits.monthly)} emails</dd>
          {limits.daily !== undefined ? (<><dt>Today</dt><dd>{count(usedIn(periods.day))} of {count(limits.daily)} emails</dd></>) : null}
          <dt>Rate limit</dt><dd>{v.account.rateLimit === 0 ? "not limited" : `${v.account.rateLimit} API requests a second`}</dd>
        </dl>
        {v.canManage ? (
          <form method="post" class="row" data-api="/dashboard/api/account" style="margin-top:12px">
            <label>Rename the account<input name="name" value={v.account.name} maxlength={100} required /></label>
            <button type="submit" class="secondary">Save</button>
          </form>
        ) : null}
      </section>

      {v.role === "owner" ? (
        <section class="panel" aria-labelledby="data">
          <h2 id="data">Your data</h2>
          <p>Download everything this account holds as one JSON file: emails with their events, contacts, segments and topics, suppressions, templates and broadcasts, domains (public keys only), API keys (names, never the keys), webhooks and their deliveries (no secrets), received mail, API logs, usage and the audit log.</p>
          <a class="button secondary" href="/dashboard/api/export" download>Export account data</a>
        </section>
      ) : null}

      <section class="panel" aria-labelledby="members">
        <h2 id="members">Members</h2>
        <table>
          <thead><tr><th scope="col">Name</th><th scope="col">Email</th><th scope="col">Role</th><th scope="col">Since</th>{memberActions ? <th scope="col"><span class="muted">Actions</span></th> : null}</tr></thead>
          <tbody>
            {members.map((m) => (
              <tr>
                <td>{m.name}</td><td>{m.email}</td>
                <td>{v.role === "owner" && m.userId !== v.user.id ? (
                  <form method="post" class="row nowrap" data-api={`/dashboard/api/members/${m.userId}/role`}>
                    <select name="role" aria-label={`Role of ${m.email}`}>
                      {(["owner", "admin", "member"] as const).map((r) => <option value={r} selected={m.role === r}>{r}</option>)}
                    </select>
                    <button type="submit" class="secondary">Change</button>
                  </form>
                ) : m.role}</td>
                <td><Time at={m.since} /></td>
                {memberActions ? <td>{m.userId !== v.user.id ? (
                  <form method="post" class="inline" data-api={`/dashboard/api/members/${m.userId}/remove`} data-confirm={`Remove ${m.email} from ${v.account.name}?`}>
                    <button type="submit" class="danger">Remove</button>
                  </form>
                ) : null}</td> : null}
              </tr>
            ))}
          </tbody>
        </table>
        {v.canManage ? (
          <>
            <h2>Invite someone</h2>
            <form method="post" class="row" data-api="/dashboard/api/invitations">
              <label>Email<input type="email" name="email" required /></label>
              <label>Role<select name="role"><option value="member">member (sees and sends)</option><option value="admin">admin (manages keys and members)</option></select></label>
              <button type="submit">Send invitation</button>
            </form>
            {pending.length ? (
              <table style="margin-top:12px">
                <thead><tr><th scope="col">Invited</th><th scope="col">Role</th><th scope="col">Expires</th><th scope="col"><span class="muted">Actions</span></th></tr></thead>
                <tbody>{pending.map((i) => (
                  <tr><td>{i.email}</td><td>{i.role}</td><td><Time at={i.expiresAt} /></td>
                    <td><form method="post" class="inline" data-api={`/dashboard/api/invitations/${i.id}/revoke`}><button type="submit" class="danger">Revoke</button></form></td></tr>
                ))}</tbody>
              </table>
            ) : <p class="muted">No invitations waiting.</p>}
          </>
        ) : <p class="muted">Only owners and admins invite and remove members.</p>}
      </section>

      <section class="panel" aria-labelledby="password">
        <h2 id="password">Password</h2>
        {credential ? (
          <form method="post" class="row" data-api="/dashboard/api/auth/change-password" data-then="reload">
            <label>Current password<input type="password" name="currentPassword" autocomplete="current-password" required /></label>
            <label>New password (at least {MIN_PASSWORD_LENGTH} characters, not a common one)<input type="password" name="newPassword" autocomplete="new-password" minlength={MIN_PASSWORD_LENGTH} required /></label>
            <label class="check"><input type="checkbox" name="revokeOtherSessions" checked />Sign out my other sessions</label>
            <button type="submit">Change password</button>
          </form>
        ) : <p class="muted">You sign in with Google or GitHub, so you have no tern password to change.</p>}
      </section>

      <section class="panel" aria-labelledby="mfa">
        <h2 id="mfa">Two-factor authentication</h2>
        {v.user.twoFactorEnabled ? (
          <>
            <p><Badge value="enabled" /> Every sign-in asks for a code from your authenticator app (or a recovery code).</p>
            <form method="post" class="row" data-api="/dashboard/api/auth/two-factor/disable" data-confirm="Turn off two-factor authentication?">
              {credential ? <label>Password<input type="password" name="password" autocomplete="current-password" required /></label>
                : <label>Code from the app, or a recovery code<input name="code" autocomplete="one-time-code" required /></label>}
              <button type="submit" class="danger">Turn off</button>
            </form>
            <details style="margin-top:12px">
              <summary>Make new recovery codes</summary>
              <p>For when the old ones are used up or may have been seen: the new ones replace them all.</p>
              <form method="post" class="row" data-api="/dashboard/api/auth/two-factor/generate-backup-codes" data-show="new-codes" data-hide>
                {credential ? <label>Password<input type="password" name="password" autocomplete="current-password" required /></label>
                  : <label>Code from the app, or a recovery code<input name="code" autocomplete="one-time-code" required /></label>}
                <button type="submit" class="secondary">Make new recovery codes</button>
              </form>
              <div id="new-codes" class="secret" hidden>
                <p>Your new recovery codes: each works once, and the old ones no longer work. Keep them somewhere safe; they are shown only now.</p>
                <pre class="codes" id="new-recovery-codes" data-field="backupCodes" aria-label="New recovery codes"></pre>
                <div class="row">
                  <button type="button" class="secondary" data-copy-from="new-recovery-codes">Copy codes</button>
                  <button type="button" class="secondary" data-download-from="new-recovery-codes" data-filename="tern-recovery-codes.txt">Download .txt</button>
                </div>
              </div>
            </details>
          </>
        ) : (
          <>
            <p>Protect your sign-in with a code from an authenticator app, asked at every sign-in, including with Google or GitHub.</p>
            <form method="post" class="row" data-api="/dashboard/api/auth/two-factor/enable" data-show="totp-setup" data-hide>
              {credential ? <label>Password<input type="password" name="password" autocomplete="current-password" required /></label> : null}
              <button type="submit">Set up two-factor authentication</button>
            </form>
            <div id="totp-setup" class="secret" hidden>
              <p>Scan this code with your authenticator app (or copy the link into it, or type the setup key), then enter the code it shows.</p>
              <img data-field="totpQr" alt="QR code of the authenticator link" width="200" height="200" style="background:#fff;border-radius:6px" />
              <div class="row copy-row">
                <label>Setup key<input id="totp-secret" data-field="totpURI" data-param="secret" readonly class="mono" size={56} aria-label="Setup key" /></label>
                <button type="button" class="secondary" data-copy-from="totp-secret">Copy key</button>
              </div>
              <div class="row copy-row">
                <label>Authenticator link<input id="totp-uri" data-field="totpURI" readonly class="mono" size={52} aria-label="Authenticator link" /></label>
                <button type="button" class="secondary" data-copy-from="totp-uri">Copy link</button>
              </div>
              <p>Recovery codes: each works once if you lose your device. Keep them somewhere safe; they are shown only now.</p>
              <pre class="codes" id="recovery-codes" data-field="backupCodes" aria-label="Recovery codes"></pre>
              <div class="row">
                <button type="button" class="secondary" data-copy-from="recovery-codes">Copy codes</button>
                <button type="button" class="secondary" data-download-from="recovery-codes" data-filename="tern-recovery-codes.txt">Download .txt</button>
              </div>
              <form method="post" class="row" data-api="/dashboard/api/auth/two-factor/verify-totp">
                <label>Code from the app<input name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" required /></label>
                <button type="submit">Turn on</button>
              </form>
            </div>
          </>
        )}
      </section>

      <section class="panel" aria-labelledby="passkeys">
        <h2 id="passkeys">Passkeys</h2>
        <p>A passkey signs you in with this device's fingerprint, face or screen lock instead of a password. It works only on this dashboard's address, so it cannot be phished, and it counts as both factors: no code is asked.</p>
        {keys.length ? (
          <table>
            <thead><tr><th scope="col">Name</th><th scope="col">Added</th><th scope="col">Last used</th><th scope="col">Kind</th><th scope="col"><span class="muted">Actions</span></th></tr></thead>
            <tbody>{keys.map((k) => (
              <tr>
                <td>{k.name}</td>
                <td><Time at={k.createdAt} /></td>
                <td>{k.lastUsedAt ? <Time at={k.lastUsedAt} /> : <span class="muted">never</span>}</td>
                <td>{k.deviceType === "multiDevice" ? "synced" : "this device only"}</td>
                <td><form method="post" class="inline" data-api={`/dashboard/api/passkeys/${k.id}/delete`} data-confirm={`Remove the passkey "${k.name}"? It will no longer sign you in.`}><button type="submit" class="danger">Remove</button></form></td>
              </tr>
            ))}</tbody>
          </table>
        ) : <p class="muted">No passkeys yet.{passkeysUsable ? " Add one below to sign in without typing a password." : ""}</p>}
        {passkeysUsable ? (
          <>
            <form method="post" class="row" data-passkey="register" style="margin-top:12px">
              <label>Name (to tell it apart)<input name="name" maxlength={64} placeholder="e.g. Work laptop" autocomplete="off" /></label>
              {credential ? <label>Password<input type="password" name="password" autocomplete="current-password" required /></label>
                : v.user.twoFactorEnabled ? <label>Code from the app, or a recovery code<input name="code" autocomplete="one-time-code" required /></label> : null}
              <button type="submit">Add a passkey</button>
            </form>
            <p class="muted" data-passkey-unsupported hidden>This browser does not support passkeys. Use a current Chrome, Edge, Firefox or Safari.</p>
            <script src="/dashboard/assets/vendor/simplewebauthn-browser.min.js" defer></script>
            <script type="module" src="/dashboard/assets/passkeys.js"></script>
          </>
        ) : (
          <p class="muted">Passkeys need the dashboard on a domain name, and this one is at an IP address ({new URL(origin).host}). {readConfig(c.env).devMode ? <>Open it as <a href={`http://localhost${new URL(origin).port ? `:${new URL(origin).port}` : ""}/dashboard/settings#passkeys`}>localhost</a> to add one.</> : <>Set PUBLIC_URL to the dashboard's domain.</>}</p>
        )}
      </section>

      <section class="panel" aria-labelledby="sessions">
        <h2 id="sessions">Your sessions</h2>
        <table>
          <thead><tr><th scope="col">Signed in</th><th scope="col">From</th><th scope="col">Browser</th>{sessionActions ? <th scope="col"><span class="muted">Actions</span></th> : null}</tr></thead>
          <tbody>{sessions.map((s) => (
            <tr>
              <td><Time at={s.createdAt} />{s.passkeyId ? <span class="muted"> with a passkey</span> : null}{s.id === v.session.id ? <> <Badge value="this_session" /></> : null}</td>
              <td class="mono">{s.ipAddress ?? "unknown"}</td>
              <td title={s.userAgent ?? undefined}>{userAgentSummary(s.userAgent)}</td>
              {sessionActions ? <td>{s.id === v.session.id ? null : (
                <form method="post" class="inline" data-api={`/dashboard/api/sessions/${s.id}/revoke`}><button type="submit" class="danger">Revoke</button></form>
              )}</td> : null}
            </tr>
          ))}</tbody>
        </table>
        {sessionActions ? (
          <form method="post" data-api="/dashboard/api/sessions/revoke-all" data-then="/dashboard/sign-in?notice=signed-out" data-confirm="Sign out of every browser, this one included?" style="margin-top:12px">
            <button type="submit" class="danger">Sign out everywhere</button>
          </form>
        ) : <p class="muted">No other sessions: you are signed in only here.</p>}
      </section>

      {v.role === "owner" ? (
        // Last on the page: what cannot be undone comes after everything else.
        <section class="panel danger-zone" aria-labelledby="delete-account">
          <h2 id="delete-account">Delete this account</h2>
          <p>Deletes the account and everything it holds, at once and for good: emails and their content, events, contacts, domains, keys, webhooks, the audit log. Members who belong to no other account lose their sign-in. <a href="#data">Export first</a> if you want a copy.</p>
          <form method="post" class="row" data-api="/dashboard/api/account/delete" data-then="/dashboard/sign-in?notice=account-deleted" data-confirm={`Delete ${v.account.name} and all its data? This cannot be undone.`} aria-labelledby="delete-account">
            <label><span>Type the account's name, <strong>{v.account.name}</strong>, to confirm</span><input name="name" autocomplete="off" required /></label>
            <button type="submit" class="danger">Delete account</button>
          </form>
        </section>
      ) : null}
    </>
  ));
}

const AUDIT_PAGE = 50;

/** A page of the audit log newest first, older than `before` (test/worker/query-plans.test.ts). */
export function auditQuery(d1: D1Database, accountId: string, before: string | undefined) {
  return drizzle(d1).select().from(auditLog)
    .where(and(eq(auditLog.accountId, accountId), before ? lt(auditLog.id, before) : undefined))
    .orderBy(desc(auditLog.id)).limit(AUDIT_PAGE + 1);
}

/** The names of the account's topics among `ids` (those a page of the audit log names), in one
 * statement however many (test/worker/query-plans.test.ts). */
export function auditTopicNamesQuery(d1: D1Database, accountId: string, ids: string[]) {
  return drizzle(d1).select({ id: topics.id, name: topics.name }).from(topics)
    .where(and(eq(topics.accountId, accountId), sql`${topics.id} IN (SELECT value FROM json_each(${JSON.stringify(ids)}))`));
}

async function auditPage(c: DashCtx): Promise<Response> {
  const v = c.get("viewer");
  const before = c.req.query("before");
  const rows = await auditQuery(c.env.DB, v.account.id, before).all();
  const more = rows.length > AUDIT_PAGE;
  const shown = rows.slice(0, AUDIT_PAGE);
  // A contact's topic choices are stored by topic id; they read by the topic's name.
  const topicIds = auditTopicIds(shown.map((r) => r.detailJson));
  const topicNames = new Map(topicIds.length ? (await auditTopicNamesQuery(c.env.DB, v.account.id, topicIds).all()).map((t) => [t.id, t.name]) : []);
  return page(c, "Audit log", shown.length === 0 ? (
    <Empty title="Nothing recorded yet."><p>Changes people make here (keys, domains, webhooks, members, sign-ins) appear in this log.</p></Empty>
  ) : (
    <>
      <table class="audit">
        <thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">What</th><th scope="col">Target</th><th scope="col">IP</th></tr></thead>
        <tbody>{shown.map((r) => (
          <tr><td><Time at={r.createdAt} /></td><td>{r.actorEmail}</td><td class="mono">{r.action}</td><td class="mono">{r.target ?? ""}{r.detailJson ? <div class="muted">{auditDetailText(r.detailJson, topicNames)}</div> : null}</td><td class="mono">{r.ip}</td></tr>
        ))}</tbody>
      </table>
      {more ? <div class="pager"><a class="button secondary" href={`/dashboard/audit-log?before=${shown[shown.length - 1]!.id}`}>Older</a></div> : null}
    </>
  ));
}
