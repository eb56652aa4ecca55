// The insights of one stored email: its row, its bodies (inline or in R2) and its domain's
// state, handed to the pure checks. Read on demand, never on the accept path.
import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { TernConfig } from "../config.ts";
import { domains, emails } from "../db/schema.ts";
import type { DmarcInfo } from "../domains/verification.ts";
import { loadBodies } from "../sending/content.ts";
import { deliverabilityInsights, type Insight } from "./checks.ts";
import { trackingHost as domainTrackingHost } from "../delivery/sending-identity.ts";
import { certificateOf, loadHostname, trackingHostname } from "../tracking/hostnames.ts";

/** The email's checks; null when the account has no such email. */
export async function emailInsights(env: Pick<Env, "DB" | "BLOBS">, config: Pick<TernConfig, "publicUrl" | "trackingCnameTarget" | "customHostnames">, accountId: string, emailId: string): Promise<Insight[] | null> {
  const db = drizzle(env.DB);
  const row = await db.select().from(emails).where(and(eq(emails.id, emailId), eq(emails.accountId, accountId))).get();
  if (!row) return null;
  const [bodies, domain] = await Promise.all([
    loadBodies(env.BLOBS, row).catch(() => ({ html: row.html, text: row.text })),
    row.domainId ? db.select().from(domains).where(and(eq(domains.id, row.domainId), eq(domains.accountId, accountId))).get() : undefined,
  ]);
  // The domain's own verified tracking host when it has one, else the deployment's.
  const hostname = domain && config.trackingCnameTarget ? await loadHostname(env.DB, trackingHostname(domain)) : null;
  let trackingHost: string | null = domain && config.trackingCnameTarget ? domainTrackingHost(domain, certificateOf(config, hostname)) : null;
  try {
    trackingHost ??= config.publicUrl ? new URL(config.publicUrl).hostname : null;
  } catch {}
  return deliverabilityInsights(
    {
      from: row.fromAddress,
      replyTo: JSON.parse(row.replyToJson) as string[],
      subject: row.subject,
      html: bodies.html,
      text: bodies.text,
      headers: JSON.parse(row.headersJson) as Record<string, string>,
      attachments: JSON.parse(row.attachmentsJson) as { filename?: string | null }[],
      broadcast: row.broadcastId !== null,
    },
    domain
      ? { name: domain.name, status: domain.status, dmarc: domain.dmarcJson ? (JSON.parse(domain.dmarcJson) as DmarcInfo) : null, openTracking: domain.openTracking, clickTracking: domain.clickTracking }
      : null,
    { trackingHost },
  );
}
