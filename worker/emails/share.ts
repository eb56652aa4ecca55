// Shareable links (POST /emails/{id}/share): a signed, expiring link to a read-only page of a
// sent or received email. The link is the credential, names one email, and stops working
// when it expires (48 hours at most); the page loads nothing from elsewhere.
import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { TernConfig } from "../config.ts";
import { emails, inboundEmails } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { signedQuery, verifyLink, type LinkQuery } from "../inbound/links.ts";
import type { InboundContent } from "../inbound/receive.ts";
import { loadBodies } from "../sending/content.ts";

export const MAX_SHARE_MS = 48 * 3_600_000;

const UNITS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** `10m`, `2 hours`, `1 day`, `48h` -> milliseconds; null when it is not a duration. */
export function parseDuration(text: string): number | null {
  const m = text.trim().toLowerCase().match(/^(\d+(?:\.\d+)?)\s*(s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?|w|weeks?)$/);
  if (!m) return null;
  const unit = m[2]!.startsWith("mi") || m[2] === "m" ? "m" : m[2]![0]!;
  return Math.round(Number(m[1]) * UNITS[unit]!);
}

export interface SharedEmail {
  kind: "sent" | "received";
  from: string;
  to: string[];
  cc: string[];
  subject: string;
  createdAt: number;
  html: string | null;
  text: string | null;
}

async function loadShared(env: Pick<Env, "DB" | "BLOBS">, id: string, accountId: string | null): Promise<SharedEmail | null> {
  const db = drizzle(env.DB);
  const sent = await db.select().from(emails).where(accountId ? and(eq(emails.id, id), eq(emails.accountId, accountId)) : eq(emails.id, id)).get();
  if (sent) {
    const bodies = await loadBodies(env.BLOBS, sent);
    return { kind: "sent", from: sent.fromAddress, to: JSON.parse(sent.toJson), cc: JSON.parse(sent.ccJson), subject: sent.subject, createdAt: sent.createdAt, ...bodies };
  }
  const got = await db.select().from(inboundEmails).where(accountId ? and(eq(inboundEmails.id, id), eq(inboundEmails.accountId, accountId)) : eq(inboundEmails.id, id)).get();
  if (!got) return null;
  const stored = await env.BLOBS.get(got.contentKey);
  const content: InboundContent = stored ? await stored.json() : { html: null, text: null, headers: [] };
  return { kind: "received", from: got.fromAddress, to: JSON.parse(got.toJson), cc: JSON.parse(got.ccJson), subject: got.subject, createdAt: got.createdAt, html: content.html, text: content.text };
}

/** A link to the account's sent or received email `id`, valid `expiresIn` (default 48h). */
export async function shareEmail(env: Pick<Env, "DB" | "BLOBS">, config: TernConfig, accountId: string, keyId: string, id: string, origin: string, expiresIn: string | undefined, now = Date.now()) {
  let ttl = MAX_SHARE_MS;
  if (expiresIn !== undefined) {
    const parsed = parseDuration(expiresIn);
    if (parsed === null || parsed < 1_000) throw new ApiError("validation_error", "`expires_in` must be a duration like `10m`, `2 hours` or `1 day`.");
    if (parsed > MAX_SHARE_MS) throw new ApiError("validation_error", "`expires_in` cannot exceed 48 hours.");
    ttl = parsed;
  }
  if (!(await loadShared(env, id, accountId))) throw new ApiError("not_found", "Email not found.");
  const s = await signedQuery(config.masterKey, `share:${id}`, keyId, now, ttl);
  return { object: "email" as const, id, url: `${origin}/shared/${id}?${s.query}`, expires_at: new Date(s.expiresAt).toISOString() };
}

/** The email a share link names, or null when the link is invalid or expired. */
export async function openShared(env: Pick<Env, "DB" | "BLOBS">, config: TernConfig, id: string, q: LinkQuery, now = Date.now()): Promise<SharedEmail | null> {
  if (!(await verifyLink(env.DB, config.masterKey, `share:${id}`, q, now))) return null;
  return loadShared(env, id, null);
}

const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** The read-only page. The HTML body is shown in a sandboxed frame (no scripts, no same
 * origin, no remote loads: the CSP also covers srcdoc frames), so opening a link cannot run
 * the email's code or count as an open. */
export function sharedPage(e: SharedEmail | null): Response {
  const headers = {
    "content-type": "text/html; charset=utf-8",
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "private, no-store",
  };
  if (!e) {
    return new Response(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Link expired</title></head><body style="font:16px system-ui;margin:3rem auto;max-width:40rem"><h1>This link is invalid or has expired</h1><p>Shared email links work for a limited time. Ask the person who shared it for a new link.</p></body></html>`, { status: 404, headers });
  }
  const rows = [["From", e.from], ["To", e.to.join(", ")], ...(e.cc.length ? [["Cc", e.cc.join(", ")]] : []), ["Date", new Date(e.createdAt).toUTCString()]];
  const body = e.html !== null
    ? `<iframe title="Email content" sandbox="" srcdoc="${esc(e.html)}" style="width:100%;min-height:70vh;border:1px solid #ddd;border-radius:6px;background:#fff"></iframe>`
    : `<pre style="white-space:pre-wrap;font:14px ui-monospace,monospace;background:#f6f6f6;padding:1rem;border-radius:6px">${esc(e.text ?? "")}</pre>`;
  return new Response(`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><meta name="robots" content="noindex"><title>${esc(e.subject || "(no subject)")}</title></head>
<body style="font:15px system-ui,sans-serif;margin:2rem auto;max-width:52rem;padding:0 1rem;color:#111">
<p style="color:#666;font-size:13px">A ${e.kind} email shared from tern (read-only). Remote images are not loaded.</p>
<h1 style="font-size:1.4rem">${esc(e.subject || "(no subject)")}</h1>
<dl style="display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem;margin:0 0 1rem">${rows.map(([k, v]) => `<dt style="color:#666">${k}</dt><dd style="margin:0">${esc(v!)}</dd>`).join("")}</dl>
${body}
</body></html>`, { headers });
}
