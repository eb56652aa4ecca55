// Mail the dashboard sends (address verification, password reset, invitations) goes through
// tern itself: the same send path as POST /emails, from the account and address the operator
// configures (DASHBOARD_MAIL_ACCOUNT, DASHBOARD_MAIL_FROM), so it is signed, recorded and
// delivered by the region's transport like any other. That account must have no dashboard
// members: its Emails hold other people's sign-in links.
import { and, eq, gte, inArray, isNotNull, ne, or } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { DASHBOARD_MAIL_KEY_ID, type Principal } from "../auth.ts";
import { accounts, emails, memberships } from "../db/schema.ts";
import { uuidv7Floor } from "../ids.ts";
import { bodyKey } from "../sending/content.ts";
import { performSend } from "../sending/send.ts";

export class DashboardMailError extends Error {}

/** Every dashboard mail's tags: how its emails are told from anything else the account sends. */
const DASHBOARD_TAGS = [{ name: "category", value: "dashboard" }];

export interface DashboardMail {
  to: string;
  subject: string;
  text: string;
  html: string;
}

export async function sendDashboardMail(env: Env, mail: DashboardMail): Promise<void> {
  const accountId = env.DASHBOARD_MAIL_ACCOUNT;
  const from = env.DASHBOARD_MAIL_FROM;
  if (!accountId || !from) {
    throw new DashboardMailError("This deployment cannot send dashboard mail: set DASHBOARD_MAIL_ACCOUNT and DASHBOARD_MAIL_FROM (README, Dashboard).");
  }
  const account = await drizzle(env.DB).select().from(accounts).where(eq(accounts.id, accountId)).get();
  if (!account) throw new DashboardMailError(`DASHBOARD_MAIL_ACCOUNT names no account (${accountId}).`);
  // This mail carries sign-in links (confirmation, reset, invitation). In an account people can
  // open in the dashboard, they could read other people's links in its Emails page.
  const member = await drizzle(env.DB).select({ userId: memberships.userId }).from(memberships).where(eq(memberships.accountId, accountId)).limit(1).get();
  if (member) throw new DashboardMailError("DASHBOARD_MAIL_ACCOUNT must be an account no dashboard user belongs to (its Emails would show other people's sign-in links): create one with npm run admin -- create-account.");
  const principal: Principal = { accountId, keyId: DASHBOARD_MAIL_KEY_ID, permission: "full_access", domainId: null, plan: account.plan, rateLimit: account.rateLimit };
  const answer = await performSend(env, principal, {
    kind: "single",
    batchMode: "strict",
    body: { from, to: [mail.to], subject: mail.subject, text: mail.text, html: mail.html, tags: DASHBOARD_TAGS },
  });
  if (answer.status !== 200) throw new DashboardMailError(`tern refused the dashboard's mail to ${mail.to}: ${answer.body}`);
}

const escape = (s: string) => s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);

/** A short message with one button: what every dashboard mail is. */
export function linkMail(to: string, subject: string, intro: string, action: string, url: string, footer = "If you did not ask for this, ignore this message."): DashboardMail {
  return {
    to,
    subject,
    text: `${intro}\n\n${action}: ${url}\n\n${footer}`,
    html: `<p>${escape(intro)}</p><p><a href="${escape(url)}">${escape(action)}</a></p><p style="color:#666">${escape(footer)}</p>`,
  };
}

/** What a sent dashboard mail's body becomes: its link was a credential (a reset, a confirmation,
 * an invitation), and once the mail has left, nothing needs it in clear. */
export const SCRUBBED_TEXT = "(This message carried a one-time link. tern removes such a message's body once it has been sent.)";
const SCRUBBED_HTML = `<p>${SCRUBBED_TEXT}</p>`;

/** The longest a dashboard link is good for (an invitation: 7 days), and a day more. */
const SCRUB_WINDOW_MS = 8 * 86400_000;

/** Replaces the bodies of the dashboard's sent mail (the cron, every tick; mail the account sends
 * through its API is its own): whoever can read the
 * mail account's emails (its API keys, a backup) must not find live sign-in links there. Reads
 * the last 8 days of that account's emails by id; older links have all expired. A body kept in
 * R2 (an INLINE_CONTENT_LIMIT below the message's size) is deleted there. The mail is never
 * click-tracked (sending-identity.ts), so no copy of its links is kept in email_links. */
export async function scrubDashboardMail(env: Pick<Env, "DB" | "BLOBS" | "DASHBOARD_MAIL_ACCOUNT">, now: number): Promise<number> {
  const accountId = env.DASHBOARD_MAIL_ACCOUNT;
  if (!accountId) return 0;
  const db = drizzle(env.DB);
  const due = and(
    eq(emails.accountId, accountId),
    gte(emails.id, uuidv7Floor(now - SCRUB_WINDOW_MS)),
    // Only the dashboard's own mail (it has no attachments: a stored body is its only object).
    eq(emails.tagsJson, JSON.stringify(DASHBOARD_TAGS)),
    inArray(emails.state, ["done", "canceled"]),
    or(isNotNull(emails.contentKey), and(isNotNull(emails.html), ne(emails.html, SCRUBBED_HTML)), and(isNotNull(emails.text), ne(emails.text, SCRUBBED_TEXT))),
  );
  const rows = await db.select({ id: emails.id, contentKey: emails.contentKey }).from(emails).where(due).limit(500).all();
  if (rows.length === 0) return 0;
  const stored = rows.filter((r) => r.contentKey !== null).map((r) => bodyKey(r.id));
  if (stored.length > 0) await env.BLOBS.delete(stored);
  await db.update(emails).set({ html: SCRUBBED_HTML, text: SCRUBBED_TEXT, contentKey: null })
    .where(and(eq(emails.accountId, accountId), inArray(emails.id, rows.map((r) => r.id)))).run();
  return rows.length;
}
