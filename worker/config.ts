// Typed configuration read from the Worker's environment (wrangler.toml [vars] and secrets).
// One reader, so every module sees the same defaults.
import { resolveRegion, type Region } from "./regions.ts";

export interface TernConfig {
  devMode: boolean;
  relayUrl: string;
  relayFinal: boolean;
  heloName: string;
  /** How long tern waits for a relay to connect and for each of its replies (the greeting
   * included) before it gives up on the connection and defers the message. */
  relayTimeoutMs: number;
  simulatorDomains: string[];
  inlineContentLimit: number;
  /** Seconds to wait before each retry of a deferred delivery; its length is the attempt budget. */
  retrySchedule: number[];
  /** How long a queued email may wait for its queue message before the cron enqueues it again. */
  stuckAfterMs: number;
  /** How long a consumer owns an email it claimed (LEASE_SECONDS); renewed before each message.
   * Past it the cron hands the email back, and an unrecorded message is sent again. */
  leaseMs: number;
  /** DNS-over-HTTPS resolver (JSON API) used to check domains. */
  dohUrl: string;
  /** The MX target of every domain's return-path subdomain: where bounces arrive. */
  bounceHost: string;
  /** The domain senders include in their return-path SPF record. */
  spfInclude: string;
  /** The MX of receiving-enabled domains. */
  inboundMxHost: string;
  /** The authserv-id of the MX that receives inbound mail: only its Authentication-Results count. */
  inboundAuthservId: string;
  /** The operator secret that keys are derived from (undefined when not configured). */
  masterKey: string | undefined;
  /** Where the Worker answers on the internet (open pixel, click redirects, unsubscribe
   * links); "" when not set: mail then goes out untracked and without tern's unsubscribe URL. */
  publicUrl: string;
  /** TRACKING_CNAME_TARGET: what a domain's own tracking host must be a CNAME of (a host of the
   * deployment that serves such hosts: Cloudflare for SaaS's fallback origin). Null: the
   * deployment serves none, and every domain's links use PUBLIC_URL. */
  trackingCnameTarget: string | null;
  /** Where tern creates and deletes domains' tracking hosts as Cloudflare custom hostnames
   * (worker/tracking/custom-hostnames.ts); null: the operator manages them by hand. Set only
   * with TRACKING_CNAME_TARGET, CLOUDFLARE_ZONE_ID and CLOUDFLARE_API_TOKEN all given. */
  customHostnames: CustomHostnamesConfig | null;
  /** CLOUDFLARE_API_URL without a final slash: custom hostnames and a domain's DNS set-up
   * (worker/domains/auto-configure.ts) reach Cloudflare there. */
  cloudflareApiUrl: string;
  /** TRACKING_HOSTS_PER_ACCOUNT: at most this many domains of an account may have a tracking
   * subdomain where tracking hosts are offered; null: no limit ("0"). */
  trackingHostsPerAccount: number | null;
  /** The operator allows webhook endpoints on http and on private or loopback hosts (dev mode always does). */
  webhookAllowPrivateTargets: boolean;
  /** Days sent and received mail and webhook history are kept (worker/retention/purge.ts);
   * null: kept for ever (RETENTION_DAYS = "0"). */
  retentionDays: number | null;
  /** A sending region as this deployment configured it (worker/regions.ts). */
  region(name: string): Region;
  /** Refuse new sends while the account's bounce or complaint rate is over its limit
   * (worker/metrics/health.ts); off unless HEALTH_PAUSE = "true". */
  healthPause: boolean;
  /** The account the dashboard's own mail is sent from (DASHBOARD_MAIL_ACCOUNT), or null. */
  dashboardMailAccount: string | null;
}

export interface CustomHostnamesConfig {
  /** CLOUDFLARE_API_URL, without a final slash. */
  apiUrl: string;
  /** CLOUDFLARE_ZONE_ID: the zone of the fallback origin (TRACKING_CNAME_TARGET). */
  zoneId: string;
  /** CLOUDFLARE_API_TOKEN (a secret): sent as a Bearer token, never logged or stored. */
  token: string;
}

/** null: no limit (the setting is "0"). */
export interface MediaLimits {
  bytes: number | null;
  images: number | null;
}

// 1 min, 5 min, 15 min, 30 min, 1 h, 2 h, 4 h, 8 h, 8 h: about a day, like an MTA's queue.
const DEFAULT_RETRY_SCHEDULE = [60, 300, 900, 1800, 3600, 7200, 14400, 28800, 28800];

/** HEALTH_PAUSE, for callers (the broadcast fan-out) that need no other setting. */
export function healthPauseOn(env: Pick<Env, "HEALTH_PAUSE">): boolean {
  return env.HEALTH_PAUSE === "true";
}

/** The simulator's domains when SIMULATOR_DOMAINS is unset (wrangler.toml states the same). */
export const DEFAULT_SIMULATOR_DOMAINS = "simulator.tern.test,resend.dev";

/** In dev the browser may reach the deployment at `localhost` though PUBLIC_URL says
 * 127.0.0.1 (`npm start` prints both): the same deployment, never outside dev. The dashboard's
 * origin and the tracking host gate both ask this. */
export function isDevAlias(config: Pick<TernConfig, "devMode">, configuredHost: string, requestHost: string): boolean {
  return config.devMode && configuredHost === "127.0.0.1" && requestHost === "localhost";
}

export function readConfig(env: Env): TernConfig {
  const retry = env.RETRY_SCHEDULE;
  const trackingCnameTarget = (env.TRACKING_CNAME_TARGET ?? "").trim().toLowerCase().replace(/\.$/, "") || null;
  // What every region falls back to (worker/regions.ts).
  const regionDefaults = {
    relayUrl: env.RELAY_URL ?? "",
    bounceHost: (env.BOUNCE_HOST || "bounces.tern.localhost").toLowerCase(),
    spfInclude: (env.SPF_INCLUDE || "_spf.tern.localhost").toLowerCase(),
  };
  return {
    devMode: env.TERN_DEV_MODE === "true",
    relayUrl: regionDefaults.relayUrl,
    relayFinal: env.RELAY_FINAL === "true",
    heloName: env.SMTP_HELO_NAME || "tern.localhost",
    relayTimeoutMs: (Number(env.RELAY_TIMEOUT_SECONDS) || 30) * 1000,
    // Unset (a wrangler environment that does not restate it) keeps the simulator: mail to its
    // addresses must never leave for real. An empty string turns it off.
    simulatorDomains: (env.SIMULATOR_DOMAINS ?? DEFAULT_SIMULATOR_DOMAINS)
      .split(",")
      .map((d) => d.trim().toLowerCase())
      .filter(Boolean),
    inlineContentLimit: Number(env.INLINE_CONTENT_LIMIT) || 65536,
    retrySchedule: retry ? retry.split(",").map((s) => Number(s.trim())).filter((n) => n >= 0) : DEFAULT_RETRY_SCHEDULE,
    stuckAfterMs: (Number(env.STUCK_AFTER_SECONDS) || 120) * 1000,
    leaseMs: (Number(env.LEASE_SECONDS) || 600) * 1000,
    dohUrl: env.DOH_URL || "https://cloudflare-dns.com/dns-query",
    bounceHost: regionDefaults.bounceHost,
    spfInclude: regionDefaults.spfInclude,
    inboundMxHost: (env.INBOUND_MX_HOST || "inbound.tern.localhost").toLowerCase(),
    masterKey: env.MASTER_KEY || undefined,
    publicUrl: (env.PUBLIC_URL ?? "").replace(/\/+$/, ""),
    trackingCnameTarget,
    customHostnames: trackingCnameTarget ? customHostnamesOf(env) : null,
    cloudflareApiUrl: cloudflareApiUrlOf(env),
    trackingHostsPerAccount: limitOf("TRACKING_HOSTS_PER_ACCOUNT", env.TRACKING_HOSTS_PER_ACCOUNT, 25),
    webhookAllowPrivateTargets: env.TERN_DEV_MODE === "true" || env.WEBHOOK_ALLOW_PRIVATE_TARGETS === "true",
    inboundAuthservId: env.INBOUND_AUTHSERV_ID || "mx.cloudflare.net",
    retentionDays: retentionDaysOf(env.RETENTION_DAYS),
    region: (name) => resolveRegion(env, regionDefaults, name),
    healthPause: healthPauseOn(env),
    dashboardMailAccount: env.DASHBOARD_MAIL_ACCOUNT || null,
  };
}

function cloudflareApiUrlOf(env: Partial<Pick<Env, "CLOUDFLARE_API_URL">>): string {
  return ((env.CLOUDFLARE_API_URL ?? "").trim() || "https://api.cloudflare.com/client/v4").replace(/\/+$/, "");
}

/** Custom hostnames are managed only with both the zone and a token: either alone is a
 * half-done setup, and the hosts stay the operator's to add by hand. */
function customHostnamesOf(env: Partial<Pick<Env, "CLOUDFLARE_ZONE_ID" | "CLOUDFLARE_API_URL">> & { CLOUDFLARE_API_TOKEN?: string }): CustomHostnamesConfig | null {
  const zoneId = (env.CLOUDFLARE_ZONE_ID ?? "").trim();
  const token = (env.CLOUDFLARE_API_TOKEN ?? "").trim();
  if (!zoneId || !token) return null;
  const apiUrl = cloudflareApiUrlOf(env);
  // The token is not enumerable: a config logged or serialised whole does not carry it (nor
  // does a spread copy of this object: hand the object itself on).
  const config = { apiUrl, zoneId } as CustomHostnamesConfig;
  Object.defineProperty(config, "token", { value: token, enumerable: false });
  return config;
}

/** MEDIA_ACCOUNT_LIMIT_MB and MEDIA_ACCOUNT_LIMIT_IMAGES, for the upload that needs no other
 * setting. 500 MB holds thousands of email images (best under 500 KB each); the count bounds an
 * account of many tiny files, each an R2 object and a row. An unreadable value keeps the default. */
export function mediaLimitsOf(env: Partial<Pick<Env, "MEDIA_ACCOUNT_LIMIT_MB" | "MEDIA_ACCOUNT_LIMIT_IMAGES">>): MediaLimits {
  const mb = limitOf("MEDIA_ACCOUNT_LIMIT_MB", env.MEDIA_ACCOUNT_LIMIT_MB, 500);
  return { bytes: mb === null ? null : Math.floor(mb * 1024 * 1024), images: limitOf("MEDIA_ACCOUNT_LIMIT_IMAGES", env.MEDIA_ACCOUNT_LIMIT_IMAGES, 10_000) };
}

function limitOf(name: string, value: string | undefined, fallback: number): number | null {
  if (value === undefined || value.trim() === "") return fallback;
  const n = Number(value);
  if (n === 0) return null;
  if (!Number.isFinite(n) || n < 0) return warnOnce(`${name}=${JSON.stringify(value)} is not a positive number: keeping ${fallback}`, fallback);
  return n;
}

/** Days (fractions allowed), at least MIN_RETENTION_DAYS; "0" (or "Infinity") for ever; unset:
 * 30. An unreadable value keeps the default rather than purging on a typo. */
function retentionDaysOf(value: string | undefined): number | null {
  if (value === undefined || value.trim() === "") return DEFAULT_RETENTION_DAYS;
  const n = Number(value);
  if (n === 0 || n === Infinity) return null;
  if (!Number.isFinite(n) || n < 0) return warnOnce(`RETENTION_DAYS=${JSON.stringify(value)} is not a number of days: keeping ${DEFAULT_RETENTION_DAYS}`, DEFAULT_RETENTION_DAYS);
  if (n < MIN_RETENTION_DAYS) return warnOnce(`RETENTION_DAYS=${value} is under ${MIN_RETENTION_DAYS}: keeping ${MIN_RETENTION_DAYS}`, MIN_RETENTION_DAYS);
  return n;
}

/** Delivery reports (DSNs, complaints) are matched to their email by its row: a shorter window
 * would drop the late ones, and with them the suppression of a bounced or complaining address.
 * MTAs give up on a message within about five days, and feedback loops report within days. */
export const MIN_RETENTION_DAYS = 7;
const DEFAULT_RETENTION_DAYS = 30;

const warned = new Set<string>();
function warnOnce<T>(message: string, value: T): T {
  if (!warned.has(message)) console.error(message);
  warned.add(message);
  return value;
}
