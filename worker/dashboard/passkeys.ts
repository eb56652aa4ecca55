// Passkeys (WebAuthn) for the dashboard's sign-in. SimpleWebAuthn does the protocol's
// security-critical work (challenges, attestation and assertion parsing, signatures, origin and
// relying-party checks, counters); this module is a better-auth plugin around it, so a passkey
// sign-in makes the same session, cookie and audit entry as any other, and keeps each
// ceremony's challenge in better-auth's verification table (hashed identifiers, single use).
// better-auth's own passkey plugin pins peer versions this better-auth does not have.
//
// A passkey asks for user verification (a PIN or biometric on the device): it is two factors
// in one, so a passkey sign-in does not ask for the TOTP code as a password sign-in does.
import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type AuthenticationResponseJSON,
  type AuthenticatorTransport,
  type RegistrationResponseJSON,
} from "@simplewebauthn/server";
import { isoBase64URL } from "@simplewebauthn/server/helpers";
import type { BetterAuthPlugin } from "better-auth";
import { APIError, createAuthEndpoint, sessionMiddleware } from "better-auth/api";
import { expireCookie, setSessionCookie } from "better-auth/cookies";
import { generateRandomString } from "better-auth/crypto";
import { and, asc, eq, lt } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import * as z from "zod";
import { authPasskeys, authSessions, authVerifications, type PasskeyRow } from "../db/schema.ts";
import { oneLineOf } from "../routes/schemas.ts";
import { linkMail, sendDashboardMail } from "./mail.ts";
import { MAX_PASSWORD_LENGTH } from "./passwords.ts";

/** How long a ceremony (the browser's passkey prompt) may take. */
const CEREMONY_MS = 5 * 60_000;
/** Passkeys one person may register: enough for every device they own. */
export const MAX_PASSKEYS = 20;
const CHALLENGE_COOKIE = "passkey_challenge";

/** The relying party: the dashboard's own host. A passkey is bound to it, so one made on
 * localhost does not work on the deployed domain, and none can be made on an IP address. */
export function relyingParty(origin: string): { id: string; origin: string; usable: boolean } {
  const host = new URL(origin).hostname;
  return { id: host, origin, usable: !/^\d+\.\d+\.\d+\.\d+$/.test(host) && !host.startsWith("[") };
}

/** A user's passkeys, oldest first. */
export async function listPasskeys(db: D1Database, userId: string): Promise<PasskeyRow[]> {
  return drizzle(db).select().from(authPasskeys).where(eq(authPasskeys.userId, userId)).orderBy(asc(authPasskeys.createdAt));
}

/** Removes one of the user's passkeys and ends the sessions it signed in (a passkey removed
 * because it was lost or taken keeps no way in); null when they have none by that id. */
export async function deletePasskey(db: D1Database, userId: string, id: string): Promise<{ passkey: PasskeyRow; sessions: number } | null> {
  const d = drizzle(db);
  const [gone, ended] = await d.batch([
    d.delete(authPasskeys).where(and(eq(authPasskeys.userId, userId), eq(authPasskeys.id, id))).returning(),
    d.delete(authSessions).where(and(eq(authSessions.userId, userId), eq(authSessions.passkeyId, id))).returning({ id: authSessions.id }),
  ]);
  return gone[0] ? { passkey: gone[0], sessions: ended.length } : null;
}

const ResponseJson = z.object({ id: z.string().min(1).max(1024), rawId: z.string().max(1024), type: z.literal("public-key"), response: z.record(z.string(), z.unknown()) }).passthrough();

const refuse = (status: "BAD_REQUEST" | "UNAUTHORIZED", message: string, code: string) => new APIError(status, { message, code });

export function passkeys(env: Env, origin: string): BetterAuthPlugin {
  const rp = relyingParty(origin);
  const unusable = () => {
    if (!rp.usable) throw refuse("BAD_REQUEST", `Passkeys need the dashboard on a domain name, not an IP address (${new URL(origin).host}). Open it as http://localhost${new URL(origin).port ? `:${new URL(origin).port}` : ""} or on its domain.`, "PASSKEY_NEEDS_DOMAIN");
  };
  const registration = (sessionId: string) => `passkey-registration-${sessionId}`;
  return {
    id: "tern-passkeys",
    endpoints: {
      passkeyRegisterOptions: createAuthEndpoint("/passkey/register/options", {
        method: "POST",
        use: [sessionMiddleware],
        body: z.object({ password: z.string().max(MAX_PASSWORD_LENGTH).optional(), code: z.string().max(64).optional() }),
      }, async (ctx) => {
        unusable();
        const { user, session } = ctx.context.session;
        // Adding a way in is as sensitive as changing the password: it asks for the password
        // (or, without one, the routes ask for a current second-factor code).
        if (await ctx.context.internalAdapter.findCredentialAccount(user.id)) {
          if (!ctx.body.password) throw refuse("BAD_REQUEST", "Enter your password to add a passkey.", "PASSWORD_REQUIRED");
          await ctx.context.password.checkPassword(user.id, ctx);
        }
        // Without a password, the auth proxy (routes.tsx) asks for a sign-in of the last minutes,
        // and with two-factor on, a current code too.
        const existing = await listPasskeys(env.DB, user.id);
        if (existing.length >= MAX_PASSKEYS) throw refuse("BAD_REQUEST", `You have ${MAX_PASSKEYS} passkeys, the most one person may have. Remove one you no longer use first.`, "TOO_MANY_PASSKEYS");
        const options = await generateRegistrationOptions({
          rpName: "tern",
          rpID: rp.id,
          userName: user.email,
          userDisplayName: user.name || user.email,
          userID: new Uint8Array(new TextEncoder().encode(user.id)),
          attestationType: "none",
          excludeCredentials: existing.map((p) => ({ id: p.credentialId, transports: transportsOf(p) })),
          // Discoverable, so signing in needs no address; verified, so it is two factors.
          authenticatorSelection: { residentKey: "required", userVerification: "required" },
          timeout: CEREMONY_MS,
        });
        // One registration at a time per session: a newer request replaces an older one.
        await ctx.context.internalAdapter.consumeVerificationValue(registration(session.id)).catch(() => null);
        await ctx.context.internalAdapter.createVerificationValue({ identifier: registration(session.id), value: options.challenge, expiresAt: new Date(Date.now() + CEREMONY_MS) });
        return ctx.json(options);
      }),

      passkeyRegisterVerify: createAuthEndpoint("/passkey/register/verify", {
        method: "POST",
        use: [sessionMiddleware],
        body: z.object({ response: ResponseJson, name: z.string().max(200).optional() }),
      }, async (ctx) => {
        unusable();
        const { user, session } = ctx.context.session;
        const challenge = await ctx.context.internalAdapter.consumeVerificationValue(registration(session.id)).catch(() => null);
        if (!challenge || challenge.expiresAt.getTime() < Date.now()) throw refuse("BAD_REQUEST", "The passkey request expired or was already used. Start again with Add a passkey.", "PASSKEY_CHALLENGE_EXPIRED");
        let verified;
        try {
          verified = await verifyRegistrationResponse({
            response: ctx.body.response as unknown as RegistrationResponseJSON,
            expectedChallenge: challenge.value,
            expectedOrigin: rp.origin,
            expectedRPID: rp.id,
            requireUserVerification: true,
          });
        } catch (err) {
          throw refuse("BAD_REQUEST", `The passkey could not be verified: ${err instanceof Error ? err.message : String(err)}`, "PASSKEY_NOT_VERIFIED");
        }
        if (!verified.verified) throw refuse("BAD_REQUEST", "The passkey could not be verified. Try again.", "PASSKEY_NOT_VERIFIED");
        const info = verified.registrationInfo;
        const now = Date.now();
        // Cleaned, not refused: the authenticator holds the credential by now.
        const name = oneLineOf(ctx.body.name ?? "", 64) || `Passkey added ${new Date(now).toISOString().slice(0, 10)}`;
        const row: PasskeyRow = {
          id: crypto.randomUUID(), userId: user.id, credentialId: info.credential.id, publicKey: isoBase64URL.fromBuffer(info.credential.publicKey),
          counter: info.credential.counter, transportsJson: info.credential.transports ? JSON.stringify(info.credential.transports) : null,
          deviceType: info.credentialDeviceType, backedUp: info.credentialBackedUp, aaguid: info.aaguid, name, createdAt: now, lastUsedAt: null,
        };
        const added = await drizzle(env.DB).insert(authPasskeys).values(row).onConflictDoNothing().returning({ id: authPasskeys.id });
        if (added.length === 0) throw refuse("BAD_REQUEST", "That passkey is already registered.", "PASSKEY_EXISTS");
        // A new way in is told to its owner's inbox: if it was not them, they can remove it at once.
        const when = new Date(now).toISOString().replace("T", " ").slice(0, 16);
        await sendDashboardMail(env, linkMail(user.email, "A passkey was added to your tern sign-in",
          `A passkey named "${row.name}" was added to your tern sign-in on ${when} UTC. It signs in as you without a password.`,
          "Review your passkeys", `${rp.origin}/dashboard/settings#passkeys`,
          "If you did not add it, remove it there and choose Sign out everywhere."))
          .catch((err: unknown) => console.error("the passkey notice was not sent", err instanceof Error ? err.message : String(err)));
        return ctx.json({ id: row.id, name: row.name });
      }),

      passkeySignInOptions: createAuthEndpoint("/passkey/sign-in/options", {
        method: "POST",
        body: z.object({}).passthrough().optional(),
      }, async (ctx) => {
        unusable();
        // No address and no list of credentials: the browser offers the passkeys it holds for
        // this site, so nobody learns from this call whether an address has any.
        const options = await generateAuthenticationOptions({ rpID: rp.id, userVerification: "required", timeout: CEREMONY_MS });
        const token = generateRandomString(32);
        const expiresAt = new Date(Date.now() + CEREMONY_MS);
        await ctx.context.internalAdapter.createVerificationValue({ identifier: `passkey-sign-in-${token}`, value: options.challenge, expiresAt });
        const cookie = ctx.context.createAuthCookie(CHALLENGE_COOKIE, { maxAge: CEREMONY_MS / 1000 });
        await ctx.setSignedCookie(cookie.name, token, ctx.context.secret, cookie.attributes);
        // Ceremonies never finished leave rows behind: dropped now and then, as the throttle's are.
        if (Math.random() < 0.01) await drizzle(env.DB).delete(authVerifications).where(lt(authVerifications.expiresAt, new Date())).run();
        return ctx.json(options);
      }),

      passkeySignInVerify: createAuthEndpoint("/passkey/sign-in/verify", {
        method: "POST",
        body: z.object({ response: ResponseJson }),
      }, async (ctx) => {
        unusable();
        const cookie = ctx.context.createAuthCookie(CHALLENGE_COOKIE);
        const token = await ctx.getSignedCookie(cookie.name, ctx.context.secret);
        expireCookie(ctx, cookie);
        const challenge = token ? await ctx.context.internalAdapter.consumeVerificationValue(`passkey-sign-in-${token}`).catch(() => null) : null;
        if (!challenge || challenge.expiresAt.getTime() < Date.now()) throw refuse("UNAUTHORIZED", "The passkey sign-in expired or was already used. Choose Sign in with a passkey again.", "PASSKEY_CHALLENGE_EXPIRED");
        const response = ctx.body.response as unknown as AuthenticationResponseJSON;
        const db = drizzle(env.DB);
        // Whoever asks learns only that it failed: the reason (an unknown credential, a counter it
        // has seen) would tell a stranger holding a credential id which ones exist and how often
        // they are used. The log keeps the reason.
        const failed = (why: string) => {
          console.warn("passkey sign-in refused:", why);
          return refuse("UNAUTHORIZED", "That passkey did not sign you in: it may have been removed from your tern sign-in, or its check failed. Try again, or sign in another way.", "PASSKEY_NOT_VERIFIED");
        };
        const passkey = await db.select().from(authPasskeys).where(eq(authPasskeys.credentialId, response.id)).get();
        if (!passkey) throw failed("no such credential");
        let verified;
        try {
          verified = await verifyAuthenticationResponse({
            response,
            expectedChallenge: challenge.value,
            expectedOrigin: rp.origin,
            expectedRPID: rp.id,
            credential: { id: passkey.credentialId, publicKey: isoBase64URL.toBuffer(passkey.publicKey), counter: passkey.counter, transports: transportsOf(passkey) },
            requireUserVerification: true,
          });
        } catch (err) {
          throw failed(err instanceof Error ? err.message : String(err));
        }
        if (!verified.verified) throw failed("not verified");
        // The counter only moves forward (a copied authenticator would repeat one): the update
        // is guarded by the value just checked, so two uses of one assertion cannot both pass.
        const moved = await db.update(authPasskeys)
          .set({ counter: verified.authenticationInfo.newCounter, backedUp: verified.authenticationInfo.credentialBackedUp, lastUsedAt: Date.now() })
          .where(and(eq(authPasskeys.id, passkey.id), eq(authPasskeys.counter, passkey.counter))).returning({ id: authPasskeys.id });
        if (moved.length === 0) throw failed("the counter moved under another sign-in");
        const user = await ctx.context.internalAdapter.findUserById(passkey.userId);
        if (!user) throw failed("its user is gone");
        const session = await ctx.context.internalAdapter.createSession(user.id, false, { passkeyId: passkey.id });
        await setSessionCookie(ctx, { session, user });
        return ctx.json({ token: session.token, user: { id: user.id, email: user.email, name: user.name } });
      }),
    },
  };
}

function transportsOf(p: PasskeyRow): AuthenticatorTransport[] | undefined {
  return p.transportsJson ? (JSON.parse(p.transportsJson) as AuthenticatorTransport[]) : undefined;
}
