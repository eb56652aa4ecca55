// The dashboard's sign-in: better-auth does the security-critical work (scrypt password hashes
// through node:crypto, sessions, email verification and reset tokens, OAuth with PKCE and
// state, TOTP and recovery codes; passkeys.ts adds passkeys through SimpleWebAuthn). This module configures it on D1 and closes its gaps:
// - its second factor guards password sign-in only: an OAuth sign-in of a user with TOTP
//   enabled is turned into the same pending two-factor step (oauthSecondFactor below);
// - common passwords are refused (passwords.ts), and sign-in attempts are throttled per
//   address and per IP in D1 (throttle.ts, applied by routes.ts), shared by every isolate.
import { betterAuth, type BetterAuthPlugin } from "better-auth";
import { drizzleAdapter } from "@better-auth/drizzle-adapter";
import { APIError, createAuthMiddleware } from "better-auth/api";
import { deleteSessionCookie } from "better-auth/cookies";
import { generateRandomString } from "better-auth/crypto";
import { genericOAuth, type GenericOAuthConfig } from "better-auth/plugins/generic-oauth";
import { twoFactor } from "better-auth/plugins/two-factor";
import { drizzle } from "drizzle-orm/d1";
import { isDevAlias, readConfig } from "../config.ts";
import { macKey } from "../crypto/master-key.ts";
import { toHex } from "../bytes.ts";
import { label, oneLineOf } from "../routes/schemas.ts";
import { accounts, authAccounts, authSessions, authTwoFactors, authUsers, authVerifications, memberships } from "../db/schema.ts";
import { linkMail, sendDashboardMail } from "./mail.ts";
import { passkeys } from "./passkeys.ts";
import { hashingSessionTokens } from "./session-tokens.ts";
import { MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH, passwordProblem } from "./passwords.ts";

export const DASHBOARD = "/dashboard";
export const AUTH_BASE = `${DASHBOARD}/api/auth`;
export const COOKIE_PREFIX = "tern";
export const SESSION_COOKIE = "session_token";

/** The secret better-auth signs cookies and encrypts TOTP secrets with, derived from MASTER_KEY. */
export async function dashboardSecret(env: Env): Promise<string> {
  const key = await macKey(env.MASTER_KEY, "dashboard");
  return toHex(new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode("better-auth-secret"))));
}

export interface Providers {
  google: boolean;
  github: boolean;
}

export function configuredProviders(env: Env): Providers {
  return { google: !!env.GOOGLE_CLIENT_ID, github: !!env.GITHUB_CLIENT_ID };
}

/** The providers' addresses: their own unless set (tests point them at a local OAuth server),
 * so a wrangler environment that does not restate them still signs in. */
export function providerUrls(env: Partial<Pick<Env, "GOOGLE_DISCOVERY_URL" | "GITHUB_AUTHORIZE_URL" | "GITHUB_TOKEN_URL" | "GITHUB_API_URL">>) {
  return {
    googleDiscovery: env.GOOGLE_DISCOVERY_URL || "https://accounts.google.com/.well-known/openid-configuration",
    githubAuthorize: env.GITHUB_AUTHORIZE_URL || "https://github.com/login/oauth/authorize",
    githubToken: env.GITHUB_TOKEN_URL || "https://github.com/login/oauth/access_token",
    githubApi: (env.GITHUB_API_URL || "https://api.github.com").replace(/\/+$/, ""),
  };
}

function oauthConfigs(env: Env): GenericOAuthConfig[] {
  const urls = providerUrls(env);
  const configs: GenericOAuthConfig[] = [];
  if (env.GOOGLE_CLIENT_ID) {
    configs.push({
      providerId: "google",
      name: "Google",
      discoveryUrl: urls.googleDiscovery,
      clientId: env.GOOGLE_CLIENT_ID,
      clientSecret: env.GOOGLE_CLIENT_SECRET,
      scopes: ["openid", "email", "profile"],
      pkce: true,
    });
  }
  if (env.GITHUB_CLIENT_ID) {
    const api = urls.githubApi;
    configs.push({
      providerId: "github",
      name: "GitHub",
      authorizationUrl: urls.githubAuthorize,
      tokenUrl: urls.githubToken,
      clientId: env.GITHUB_CLIENT_ID,
      clientSecret: env.GITHUB_CLIENT_SECRET,
      scopes: ["read:user", "user:email"],
      pkce: true,
      // GitHub is not OIDC: the profile is /user, and the address must be a verified one of
      // /user/emails (the profile's public address may be unverified or absent).
      async getUserInfo(tokens) {
        const headers = { authorization: `Bearer ${tokens.accessToken}`, accept: "application/vnd.github+json", "user-agent": "tern" };
        const [user, emails] = await Promise.all([
          fetch(`${api}/user`, { headers }).then((r) => (r.ok ? (r.json() as Promise<Record<string, unknown>>) : null)),
          fetch(`${api}/user/emails`, { headers }).then((r) => (r.ok ? (r.json() as Promise<{ email: string; primary: boolean; verified: boolean }[]>) : [])),
        ]);
        if (!user) return null;
        const primary = emails.find((e) => e.primary && e.verified) ?? emails.find((e) => e.verified);
        if (!primary) return null;
        return { id: String(user.id), name: String(user.name ?? user.login ?? primary.email), email: primary.email, emailVerified: true, image: (user.avatar_url as string) ?? undefined };
      },
    });
  }
  return configs;
}

/** better-auth's two-factor plugin only intercepts password sign-ins. This does the same for
 * the OAuth callback: the session it just made is deleted and the browser is sent to the
 * second-factor page with the plugin's own pending-sign-in cookie, so the TOTP or recovery
 * code endpoints finish the sign-in exactly as after a password. */
function oauthSecondFactor(): BetterAuthPlugin {
  return {
    id: "tern-oauth-second-factor",
    hooks: {
      after: [
        {
          matcher: (ctx) => ctx.path === "/callback/:id",
          handler: createAuthMiddleware(async (ctx) => {
            const data = ctx.context.newSession;
            if (!data?.user || !(data.user as { twoFactorEnabled?: boolean }).twoFactorEnabled) return;
            deleteSessionCookie(ctx, true);
            await ctx.context.internalAdapter.deleteSession(data.session.token);
            ctx.context.setNewSession(null);
            const maxAge = 600;
            const cookie = ctx.context.createAuthCookie("two_factor", { maxAge });
            const identifier = `2fa-${generateRandomString(20)}`;
            const expiresAt = new Date(Date.now() + maxAge * 1000);
            await ctx.context.internalAdapter.createVerificationValue({ value: data.user.id, identifier, expiresAt });
            await ctx.context.internalAdapter.createVerificationValue({ value: "0", identifier: `2fa-attempts-${identifier}`, expiresAt });
            await ctx.setSignedCookie(cookie.name, identifier, ctx.context.secret, cookie.attributes);
            throw ctx.redirect(`${DASHBOARD}/sign-in/two-factor`);
          }),
        },
      ],
    },
  };
}

/** Refuses weak passwords wherever one is set: sign-up, reset, change. */
function passwordPolicy(): BetterAuthPlugin {
  return {
    id: "tern-password-policy",
    hooks: {
      before: [
        {
          matcher: (ctx) => ["/sign-up/email", "/reset-password", "/change-password"].includes(ctx.path ?? ""),
          handler: createAuthMiddleware(async (ctx) => {
            const body = (ctx.body ?? {}) as { password?: unknown; newPassword?: unknown; email?: unknown };
            const password = typeof body.newPassword === "string" ? body.newPassword : body.password;
            if (typeof password !== "string") return;
            const problem = passwordProblem(password, typeof body.email === "string" ? body.email : undefined);
            if (problem) throw new APIError("BAD_REQUEST", { message: problem, code: "WEAK_PASSWORD" });
          }),
        },
      ],
    },
  };
}

/** The longest name a person may give (the sign-up form's maxlength too). */
export const MAX_PERSON_NAME = 256;
/** The longest account name (the dashboard's rename form, routes.tsx str()). */
const MAX_ACCOUNT_NAME = 200;

/** A person's name is one line, as every label is (routes/schemas.ts): it names their first
 * account, which reaches the subject of invitation mail. The sign-up form's name is refused with
 * a message; a name from an OAuth profile is cleaned (databaseHooks below). */
function oneLineName(): BetterAuthPlugin {
  const Name = label("name", MAX_PERSON_NAME, { mayBeEmpty: true });
  return {
    id: "tern-one-line-name",
    hooks: {
      before: [
        {
          matcher: (ctx) => ctx.path === "/sign-up/email",
          handler: createAuthMiddleware(async (ctx) => {
            const name = ((ctx.body ?? {}) as { name?: unknown }).name;
            if (name === undefined) return; // better-auth's own schema asks for it
            const checked = Name.safeParse(name);
            if (!checked.success) {
              throw new APIError("UNPROCESSABLE_ENTITY", {
                message: checked.error.issues[0]!.code === "too_big"
                  ? `Your name is too long (at most ${MAX_PERSON_NAME} characters).`
                  : "Your name must be one line of text, without tabs, line breaks or other control characters.",
                code: "INVALID_NAME",
              });
            }
          }),
        },
      ],
    },
  };
}

/** A new user gets an account of their own, which they own. */
async function giveAccount(env: Env, user: { id: string; name: string; email: string }): Promise<void> {
  const d = drizzle(env.DB);
  const accountId = crypto.randomUUID();
  const now = Date.now();
  await d.batch([
    d.insert(accounts).values({ id: accountId, name: `${oneLineOf(user.name || user.email.split("@")[0]!, MAX_ACCOUNT_NAME - 10)}'s account`, createdAt: now }),
    d.insert(memberships).values({ accountId, userId: user.id, role: "owner", createdAt: now }),
  ]);
}

function makeAuth(env: Env, origin: string, secret: string, withOAuth: boolean) {
  const devMode = readConfig(env).devMode;
  const db = drizzle(env.DB);
  return betterAuth({
    appName: "tern",
    baseURL: origin,
    basePath: AUTH_BASE,
    secret,
    trustedOrigins: [origin],
    // Tokens never rest in clear: sessions through the adapter (session-tokens.ts), email
    // verification, reset and pending-second-factor identifiers by better-auth's own option.
    database: hashingSessionTokens(drizzleAdapter(db, {
      provider: "sqlite",
      // drizzle's D1 transaction() sends a raw BEGIN, which D1 refuses.
      transaction: false,
      schema: { user: authUsers, session: authSessions, account: authAccounts, verification: authVerifications, twoFactor: authTwoFactors },
    }) as never),
    verification: { storeIdentifier: "hashed" },
    emailAndPassword: {
      enabled: true,
      requireEmailVerification: true,
      minPasswordLength: MIN_PASSWORD_LENGTH,
      maxPasswordLength: MAX_PASSWORD_LENGTH,
      revokeSessionsOnPasswordReset: true,
      async sendResetPassword({ user, url }) {
        await sendDashboardMail(env, linkMail(user.email, "Reset your tern password", "Someone asked to reset the password of your tern account.", "Choose a new password", url));
      },
    },
    emailVerification: {
      sendOnSignUp: true,
      sendOnSignIn: true,
      autoSignInAfterVerification: false,
      async sendVerificationEmail({ user, url }) {
        await sendDashboardMail(env, linkMail(user.email, "Confirm your address for tern", "Confirm this address to finish creating your tern sign-in.", "Confirm my address", url));
      },
    },
    account: {
      encryptOAuthTokens: true,
      // An OAuth sign-in joins the user with the same address only when the provider verified it.
      accountLinking: { enabled: true, trustedProviders: ["google", "github"] },
    },
    // passkeyId: the passkey a session signed in with (passkeys.ts), so removing it ends them.
    session: { expiresIn: 7 * 24 * 3600, updateAge: 24 * 3600, additionalFields: { passkeyId: { type: "string", required: false, input: false } } },
    // Throttling is tern's own (throttle.ts): better-auth's limiter keeps counts per isolate.
    rateLimit: { enabled: false },
    advanced: {
      cookiePrefix: COOKIE_PREFIX,
      useSecureCookies: !devMode,
      defaultCookieAttributes: { httpOnly: true, sameSite: "lax", path: "/", secure: !devMode },
      ipAddress: { ipAddressHeaders: ["cf-connecting-ip", "x-real-ip"] },
    },
    databaseHooks: {
      user: {
        create: {
          // Every way in (an OAuth profile's name too): one line, cleaned rather than refused.
          before: async (user) => ({ data: { ...user, name: oneLineOf(user.name ?? "", MAX_PERSON_NAME) } }),
          after: async (user) => {
            await giveAccount(env, user);
          },
        },
        update: {
          before: async (user) => (typeof user.name === "string" ? { data: { ...user, name: oneLineOf(user.name, MAX_PERSON_NAME) } } : undefined),
        },
      },
    },
    plugins: [
      passwordPolicy(),
      oneLineName(),
      twoFactor({ issuer: "tern", allowPasswordless: true }),
      genericOAuth({ config: withOAuth ? oauthConfigs(env) : [] }),
      oauthSecondFactor(),
      passkeys(env, origin),
    ],
  });
}

export type Auth = ReturnType<typeof makeAuth>;

const instances = new WeakMap<object, Map<string, Auth>>();

/** Paths that talk to an OAuth provider. */
export function isOAuthPath(path: string): boolean {
  return path.startsWith(`${AUTH_BASE}/sign-in/social`) || path.startsWith(`${AUTH_BASE}/callback/`);
}

/** A better-auth instance. Without OAuth it is made once per deployment and origin in an
 * isolate. With OAuth it is made per request: its providers are set up from their discovery
 * documents and JWKS, fetched in the request that uses them (workerd refuses to settle a
 * promise in a request other than the one that created it, so nothing fetched may be shared). */
export async function authFor(env: Env, origin: string, opts: { oauth?: boolean } = {}): Promise<Auth> {
  if (opts.oauth) return makeAuth(env, origin, await dashboardSecret(env), true);
  let byOrigin = instances.get(env);
  if (!byOrigin) instances.set(env, (byOrigin = new Map()));
  let auth = byOrigin.get(origin);
  if (!auth) {
    if (byOrigin.size > 8) byOrigin.clear();
    auth = makeAuth(env, origin, await dashboardSecret(env), false);
    byOrigin.set(origin, auth);
  }
  return auth;
}

/** The origin the dashboard answers on: PUBLIC_URL when set (behind a proxy), else the request's.
 * In dev mode, a PUBLIC_URL on 127.0.0.1 also answers as localhost on its port: passkeys need a
 * domain name, and npm start's address is an IP. */
export function dashboardOrigin(env: Env, requestUrl: string): string {
  const config = readConfig(env);
  const request = new URL(requestUrl);
  if (!config.publicUrl) return request.origin;
  const configured = new URL(config.publicUrl);
  if (isDevAlias(config, configured.hostname, request.hostname) && request.port === configured.port) return request.origin;
  return configured.origin;
}
