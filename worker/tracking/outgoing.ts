// Open and click tracking on the way out: when the email's domain has tracking on, its html is
// rewritten (worker/tracking/rewrite.ts) and the original links are stored before the message
// leaves, so every click token of it can be resolved. The rewrite is deterministic (same
// email, same html, same key: same tokens and links), so a retry stores and sends the same.
import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { TernConfig } from "../config.ts";
import { macKey } from "../crypto/master-key.ts";
import { domains, emailLinks, type EmailRow } from "../db/schema.ts";
import { rewriteHtml } from "./rewrite.ts";

/** The key of tracking and unsubscribe tokens, derived from the master secret for links alone. */
export function linkTokenKey(config: Pick<TernConfig, "masterKey">): Promise<CryptoKey> {
  return macKey(config.masterKey, "link-token") as Promise<CryptoKey>;
}

export interface TrackingSettings {
  openTracking: boolean;
  clickTracking: boolean;
}

export async function trackingSettings(d1: D1Database, email: EmailRow): Promise<TrackingSettings> {
  if (!email.domainId) return { openTracking: false, clickTracking: false };
  const row = await drizzle(d1).select({ openTracking: domains.openTracking, clickTracking: domains.clickTracking }).from(domains)
    .where(and(eq(domains.id, email.domainId), eq(domains.accountId, email.accountId))).get();
  return row ?? { openTracking: false, clickTracking: false };
}

/**
 * The html as it is sent: rewritten when the domain tracks and tern knows its public URL
 * (without one there is nowhere for a pixel or a redirect to point). `untracked` links stay
 * as they are.
 */
export async function trackedHtml(
  env: Pick<Env, "DB">,
  config: Pick<TernConfig, "masterKey" | "publicUrl">,
  email: EmailRow,
  html: string | null,
  untracked: readonly string[] = [],
): Promise<string | null> {
  if (html === null || html === "" || !config.publicUrl) return html;
  const settings = await trackingSettings(env.DB, email);
  if (!settings.openTracking && !settings.clickTracking) return html;
  const rewritten = await rewriteHtml(html, {
    emailId: email.id,
    baseUrl: config.publicUrl,
    key: await linkTokenKey(config),
    ...settings,
    untracked,
  });
  if (rewritten.links.length > 0) {
    await drizzle(env.DB).insert(emailLinks).values({ emailId: email.id, linksJson: JSON.stringify(rewritten.links) }).onConflictDoNothing();
  }
  return rewritten.html;
}
