// Open and click tracking on the way out: when the email's domain has tracking on, its html is
// rewritten (worker/tracking/rewrite.ts) and the original links are stored before the message
// leaves, so every click token of it can be resolved. The rewrite is deterministic (same
// email, same html, same key: same tokens and links), so a retry stores and sends the same.
import { drizzle } from "drizzle-orm/d1";
import type { TernConfig } from "../config.ts";
import { macKey } from "../crypto/master-key.ts";
import { emailLinks, type EmailRow } from "../db/schema.ts";
import { rewriteHtml } from "./rewrite.ts";

/** The key of tracking and unsubscribe tokens, derived from the master secret for links alone. */
export function linkTokenKey(config: Pick<TernConfig, "masterKey">): Promise<CryptoKey> {
  return macKey(config.masterKey, "link-token") as Promise<CryptoKey>;
}

/** The domain's tracking switches (read with its keys, worker/delivery/sending-identity.ts). */
export interface TrackingSettings {
  openTracking: boolean;
  clickTracking: boolean;
  /** The domain's own verified tracking host (links.example.com), else the links use PUBLIC_URL. */
  host?: string | null;
}

/**
 * The html as it is sent: rewritten when the domain tracks and tern knows its public URL
 * (without one there is nowhere for a pixel or a redirect to point). `untracked` links stay
 * as they are.
 */
export async function trackedHtml(
  env: Pick<Env, "DB">,
  config: Pick<TernConfig, "masterKey" | "publicUrl">,
  email: Pick<EmailRow, "id">,
  settings: TrackingSettings,
  html: string | null,
  untracked: readonly string[] = [],
): Promise<string | null> {
  if (html === null || html === "" || !config.publicUrl) return html;
  if (!settings.openTracking && !settings.clickTracking) return html;
  const rewritten = await rewriteHtml(html, {
    emailId: email.id,
    baseUrl: settings.host ? `https://${settings.host}` : config.publicUrl,
    key: await linkTokenKey(config),
    ...(settings.host ? { host: settings.host } : {}),
    openTracking: settings.openTracking,
    clickTracking: settings.clickTracking,
    untracked,
  });
  if (rewritten.links.length > 0) {
    await drizzle(env.DB).insert(emailLinks).values({ emailId: email.id, linksJson: JSON.stringify(rewritten.links) }).onConflictDoNothing();
  }
  return rewritten.html;
}
