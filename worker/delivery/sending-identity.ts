// Who a message goes out as: the DKIM keys that sign it and the envelope senders (VERP, one per
// recipient) on the domain's return-path subdomain. Read from D1 per domain and kept for a few seconds per
// isolate; opened private keys are kept by key id (a key's material never changes).
import { and, eq, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { TernConfig } from "../config.ts";
import { dkimKeys, domains, trackingHostnames, type EmailRow } from "../db/schema.ts";
import { openPrivateKey } from "../dkim/keys.ts";
import type { SigningKey } from "../dkim/sign.ts";
import type { RecordStatus } from "../domains/verification.ts";
import { domainOf, parseMailbox, toAsciiDomain } from "../mime/address.ts";
import { returnPathAddress } from "../sending/return-path.ts";
import type { TrackingSettings } from "../tracking/outgoing.ts";
import type { CertificateState } from "../tracking/custom-hostnames.ts";
import { certificateOf, trackingRecordStatus } from "../tracking/hostnames.ts";

export interface SendingIdentity {
  keys: SigningKey[];
  /** The envelope sender of the message for one recipient: its own return path. */
  envelopeFrom(recipient: string): Promise<string>;
  /** The domain's `tls: enforced`. */
  requireTls: boolean;
  tracking: TrackingSettings;
}

/** The email's domain is gone (deleted) or has no key: tern does not send unsigned mail. */
export class NoSigningKeyError extends Error {}

interface DomainKeys {
  domainId: string;
  name: string;
  returnPath: string;
  tls: "opportunistic" | "enforced";
  tracking: Omit<TrackingSettings, "host">;
  /** What decides the tracking host (with the deployment's config, in sendingIdentity). */
  trackingDomain: TrackingDomain;
  keys: { id: string; selector: string; algorithm: "rsa" | "ed25519"; privateKeySealed: string }[];
}

const DOMAIN_CACHE_MS = 10_000;
const domainCache = new Map<string, { value: DomainKeys | null; expires: number }>();

/** After a domain is deleted or changed: this isolate forgets what it read of the account's
 * domains, so no message is signed with a destroyed key. */
export function forgetSendingIdentities(accountId: string): void {
  for (const key of domainCache.keys()) if (key.startsWith(`${accountId}:`)) domainCache.delete(key);
}
const openedKeys = new Map<string, Promise<CryptoKey>>();

type TrackingDomain = { name: string; trackingSubdomain: string | null; recordStatusJson: string; hostname: { status: string | null; sslStatus: string | null; validationError: string | null } | null };

async function domainKeys(d1: D1Database, email: EmailRow): Promise<DomainKeys | null> {
  const name = toAsciiDomain(domainOf(parseMailbox(email.fromAddress)!.email));
  const cacheKey = `${email.accountId}:${email.domainId ?? name}`;
  const hit = domainCache.get(cacheKey);
  if (hit && hit.expires > Date.now()) return hit.value;
  const db = drizzle(d1);
  const domain = await db.select({
    id: domains.id, name: domains.name, returnPath: domains.returnPath, tls: domains.tls, openTracking: domains.openTracking, clickTracking: domains.clickTracking,
    trackingSubdomain: domains.trackingSubdomain, recordStatusJson: domains.recordStatusJson,
    hostStatus: trackingHostnames.status, hostSslStatus: trackingHostnames.sslStatus, hostValidationError: trackingHostnames.validationError,
  }).from(domains)
    // The custom hostname's state, where tern manages them (worker/tracking/hostnames.ts).
    .leftJoin(trackingHostnames, sql`${trackingHostnames.hostname} = ${domains.trackingSubdomain} || '.' || ${domains.name}`)
    .where(and(eq(domains.accountId, email.accountId), email.domainId ? eq(domains.id, email.domainId) : eq(domains.name, name)))
    .get();
  let value: DomainKeys | null = null;
  if (domain) {
    const keys = await db.select({ id: dkimKeys.id, selector: dkimKeys.selector, algorithm: dkimKeys.algorithm, privateKeySealed: dkimKeys.privateKeySealed })
      .from(dkimKeys).where(and(eq(dkimKeys.domainId, domain.id), eq(dkimKeys.state, "active")));
    const tracking = { openTracking: domain.openTracking, clickTracking: domain.clickTracking };
    const hostname = domain.hostStatus === null && domain.hostSslStatus === null ? null : { status: domain.hostStatus, sslStatus: domain.hostSslStatus, validationError: domain.hostValidationError };
    const trackingDomain = { name: domain.name, trackingSubdomain: domain.trackingSubdomain, recordStatusJson: domain.recordStatusJson, hostname };
    value = { domainId: domain.id, name: domain.name, returnPath: domain.returnPath, tls: domain.tls, tracking, trackingDomain, keys };
  }
  if (domainCache.size > 5_000) domainCache.clear();
  domainCache.set(cacheKey, { value, expires: Date.now() + DOMAIN_CACHE_MS });
  return value;
}

/** The domain's own tracking host, once its Tracking record counts as verified (and while it
 * stays so): its CNAME is verified and, where tern manages custom hostnames, Cloudflare serves
 * it with an active certificate (`certificate`; null where they are not managed). */
export function trackingHost(d: { name: string; trackingSubdomain: string | null; recordStatusJson: string }, certificate: CertificateState | null): string | null {
  if (!d.trackingSubdomain) return null;
  const statuses = JSON.parse(d.recordStatusJson) as Record<string, RecordStatus>;
  return trackingRecordStatus(statuses["tracking_cname"], certificate) === "verified" ? `${d.trackingSubdomain}.${d.name}` : null;
}

function opened(config: TernConfig, domainId: string, k: DomainKeys["keys"][number]): Promise<CryptoKey> {
  let key = openedKeys.get(k.id);
  if (!key) {
    if (openedKeys.size > 5_000) openedKeys.clear();
    key = openPrivateKey(config.masterKey, { domainId, selector: k.selector, algorithm: k.algorithm, privateKeySealed: k.privateKeySealed });
    key.catch(() => openedKeys.delete(k.id));
    openedKeys.set(k.id, key);
  }
  return key;
}

export async function sendingIdentity(d1: D1Database, config: TernConfig, email: EmailRow): Promise<SendingIdentity> {
  const d = await domainKeys(d1, email);
  if (!d || d.keys.length === 0) throw new NoSigningKeyError("The sending domain of this email was deleted; tern does not send unsigned mail.");
  const keys = await Promise.all(
    d.keys.map(async (k) => ({ domain: d.name, selector: k.selector, algorithm: k.algorithm, privateKey: await opened(config, d.domainId, k) })),
  );
  return {
    keys,
    envelopeFrom: (recipient) => returnPathAddress(config.masterKey, email.id, recipient, d.returnPath, d.name),
    requireTls: d.tls === "enforced",
    // The dashboard's own mail is never tracked: its links are one-time credentials, which a
    // click redirect would keep in clear (email_links) and an open pixel would not need.
    tracking: email.accountId === config.dashboardMailAccount
      ? { openTracking: false, clickTracking: false, host: null }
      // A deployment that stopped offering tracking hosts stops using them at once, not at the
      // domain's next check.
      : { ...d.tracking, host: config.trackingCnameTarget ? trackingHost(d.trackingDomain, certificateOf(config, d.trackingDomain.hostname)) : null },
  };
}
