// Who is looking at the dashboard: the signed-in user (from the session cookie only: an API
// key never opens the dashboard), the account they are working in, their role there, and the
// CSRF token bound to their session. Plus the audit log every change is written to.
import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { toBase64Url } from "../bytes.ts";
import { macKey } from "../crypto/master-key.ts";
import { accounts, auditLog, memberships } from "../db/schema.ts";
import { uuidv7 } from "../ids.ts";
import { authFor, dashboardOrigin } from "./auth.ts";

export type Role = "owner" | "admin" | "member";

export interface Viewer {
  user: { id: string; email: string; name: string; twoFactorEnabled: boolean };
  session: { id: string; token: string };
  account: { id: string; name: string; plan: string; rateLimit: number };
  role: Role;
  /** Owners and admins manage keys, members and settings. */
  canManage: boolean;
  memberships: { accountId: string; name: string; role: Role }[];
  csrf: string;
  ip: string;
  userAgent: string;
}

export const ACCOUNT_COOKIE = "tern_account";

export function clientIp(req: Request): string {
  return req.headers.get("cf-connecting-ip") ?? req.headers.get("x-real-ip") ?? "unknown";
}

/** The CSRF token of a session: an HMAC of its id, so it needs no storage and dies with it. */
export async function csrfToken(env: Env, sessionId: string): Promise<string> {
  const key = await macKey(env.MASTER_KEY, "dashboard");
  return toBase64Url(new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`csrf:${sessionId}`))));
}

function readCookie(req: Request, name: string): string | undefined {
  const header = req.headers.get("cookie") ?? "";
  for (const part of header.split(/;\s*/)) {
    const i = part.indexOf("=");
    if (i > 0 && part.slice(0, i) === name) {
      // A malformed value (set by anyone who can set a cookie for the domain) is no value.
      try {
        return decodeURIComponent(part.slice(i + 1));
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

export async function loadViewer(env: Env, req: Request): Promise<Viewer | null> {
  const auth = await authFor(env, dashboardOrigin(env, req.url));
  // Only the cookie is passed on: an Authorization header (an API key) means nothing here.
  const headers = new Headers();
  const cookie = req.headers.get("cookie");
  if (!cookie) return null;
  headers.set("cookie", cookie);
  const found = await auth.api.getSession({ headers }).catch(() => null);
  if (!found) return null;
  const d = drizzle(env.DB);
  const rows = await d
    .select({ accountId: memberships.accountId, role: memberships.role, name: accounts.name, plan: accounts.plan, rateLimit: accounts.rateLimit })
    .from(memberships).innerJoin(accounts, eq(accounts.id, memberships.accountId))
    .where(eq(memberships.userId, found.user.id)).all();
  if (rows.length === 0) return null;
  const wanted = readCookie(req, ACCOUNT_COOKIE);
  const current = rows.find((r) => r.accountId === wanted) ?? rows[0]!;
  const user = found.user as typeof found.user & { twoFactorEnabled?: boolean | null };
  return {
    user: { id: user.id, email: user.email, name: user.name, twoFactorEnabled: !!user.twoFactorEnabled },
    session: { id: found.session.id, token: found.session.token },
    account: { id: current.accountId, name: current.name, plan: current.plan, rateLimit: current.rateLimit },
    role: current.role,
    canManage: current.role !== "member",
    memberships: rows.map((r) => ({ accountId: r.accountId, name: r.name, role: r.role })),
    csrf: await csrfToken(env, found.session.id),
    ip: clientIp(req),
    userAgent: req.headers.get("user-agent") ?? "",
  };
}

export async function isMember(env: Env, userId: string, accountId: string): Promise<boolean> {
  const row = await drizzle(env.DB).select({ role: memberships.role }).from(memberships)
    .where(and(eq(memberships.userId, userId), eq(memberships.accountId, accountId))).get();
  return !!row;
}

export interface AuditEntry {
  action: string;
  target?: string | null;
  detail?: Record<string, unknown>;
}

/** Records a change a person made, in the account they made it in. */
export async function audit(env: Env, v: Viewer, e: AuditEntry): Promise<void> {
  await drizzle(env.DB).insert(auditLog).values({
    id: uuidv7(),
    accountId: v.account.id,
    userId: v.user.id,
    actorEmail: v.user.email,
    action: e.action,
    target: e.target ?? null,
    detailJson: e.detail ? JSON.stringify(e.detail) : null,
    ip: v.ip,
    userAgent: v.userAgent.slice(0, 300),
    createdAt: Date.now(),
  }).run();
}

/** Records an event about a user in every account they belong to (sign-ins, MFA changes). */
export async function auditUser(env: Env, user: { id: string; email: string }, req: Request, action: string, detail?: Record<string, unknown>): Promise<void> {
  const d = drizzle(env.DB);
  const rows = await d.select({ accountId: memberships.accountId }).from(memberships).where(eq(memberships.userId, user.id)).all();
  if (rows.length === 0) return;
  const now = Date.now();
  await d.insert(auditLog).values(rows.map((r) => ({
    id: uuidv7(now),
    accountId: r.accountId,
    userId: user.id,
    actorEmail: user.email,
    action,
    detailJson: detail ? JSON.stringify(detail) : null,
    ip: clientIp(req),
    userAgent: (req.headers.get("user-agent") ?? "").slice(0, 300),
    createdAt: now,
  }))).run();
}

/** Sign-in steps as the audit log stores them (better-auth's paths), in words. */
const STEP_WORDS: Record<string, string> = {
  password: "password",
  "verify-totp": "authenticator code",
  "verify-backup-code": "recovery code",
  passkey: "passkey",
};

/** A contact's topic choices as contact.topics_changed stores them, in the contact page's words. */
const SUBSCRIPTION_WORDS: Record<string, string> = { opt_in: "subscribed", opt_out: "opted out" };

/** The `topics` of a contact.topics_changed detail ([{id, subscription}, ...]), or null for any
 * other value (contacts.import_started's `topics` is a count). */
function topicChoices(v: unknown): { id: string; subscription: string }[] | null {
  if (!Array.isArray(v) || v.length === 0) return null;
  const ok = v.every((x) => x && typeof x === "object" && typeof x.id === "string" && typeof x.subscription === "string");
  return ok ? (v as { id: string; subscription: string }[]) : null;
}

function parseDetail(detailJson: string): Record<string, unknown> | null {
  let detail: unknown;
  try {
    detail = JSON.parse(detailJson);
  } catch {
    return null;
  }
  return detail && typeof detail === "object" && !Array.isArray(detail) ? (detail as Record<string, unknown>) : null;
}

/** The topic ids audit entries name, for auditDetailText's names (one lookup for a page). */
export function auditTopicIds(detailJsons: (string | null)[]): string[] {
  const ids = new Set<string>();
  for (const json of detailJsons) {
    const choices = json ? topicChoices(parseDetail(json)?.topics) : null;
    for (const c of choices ?? []) ids.add(c.id);
  }
  return [...ids];
}

/** An audit entry's detail as a person reads it: "role: admin · sessions ended: 2", not JSON.
 * A contact's topic choices read "topic News: opted out", by the name in `topicNames` (a topic
 * deleted since, or not looked up, by its id). */
export function auditDetailText(detailJson: string | null, topicNames: ReadonlyMap<string, string> = new Map()): string | null {
  if (!detailJson) return null;
  const detail = parseDetail(detailJson);
  if (!detail) return detailJson;
  const value = (key: string, v: unknown): string => {
    if (Array.isArray(v)) return v.length ? v.map((x) => value(key, x)).join(", ") : "none";
    if (v && typeof v === "object") return JSON.stringify(v);
    if (key === "method" && typeof v === "string") return v.split("+").map((step) => STEP_WORDS[step] ?? step).join(" + ");
    return String(v);
  };
  return Object.entries(detail).flatMap(([k, v]) => {
    const choices = k === "topics" ? topicChoices(v) : null;
    if (choices) return choices.map((c) => `topic ${topicNames.get(c.id) ?? c.id}: ${SUBSCRIPTION_WORDS[c.subscription] ?? c.subscription}`);
    return [`${k.replace(/_/g, " ")}: ${value(k, v)}`];
  }).join(" · ");
}
