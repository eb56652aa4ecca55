// Domains' own tracking hosts (Resend's tracking_subdomain: links.example.com, a CNAME to the
// deployment's host). Such a host is the tenant's name on tern's Worker, so it serves the open
// pixel and click redirects of that domain's emails and nothing else: not the API, not the
// dashboard (whose cookies a tenant controlling the parent domain could plant there), and not
// another tenant's links.
import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { TernConfig } from "../config.ts";
import { domains } from "../db/schema.ts";
import { CLICK_PATH_PREFIX, OPEN_PATH_PREFIX } from "./tokens.ts";

const CACHE_MS = 60_000;
const hostCache = new Map<string, { tracking: boolean; expires: number }>();

/** The host a request came to, lower case, without a port. */
export function requestHost(url: string): string {
  return new URL(url).hostname.toLowerCase();
}

/** The deployment's own hosts: PUBLIC_URL's, and in dev mode localhost for a PUBLIC_URL on
 * 127.0.0.1 (as the dashboard answers there too). */
function ownHost(config: Pick<TernConfig, "publicUrl" | "devMode">, host: string): boolean {
  if (!config.publicUrl) return true;
  const configured = new URL(config.publicUrl).hostname.toLowerCase();
  return host === configured || (config.devMode && configured === "127.0.0.1" && host === "localhost");
}

/** Whether `host` is some domain's tracking host (kept a minute per isolate: a host that stops
 * being one is at worst refused a minute longer). */
async function isTrackingHost(d1: D1Database, host: string): Promise<boolean> {
  const hit = hostCache.get(host);
  if (hit && hit.expires > Date.now()) return hit.tracking;
  const dot = host.indexOf(".");
  let tracking = false;
  if (dot > 0) {
    const row = await drizzle(d1).select({ id: domains.id }).from(domains)
      .where(and(eq(domains.name, host.slice(dot + 1)), eq(domains.trackingSubdomain, host.slice(0, dot)))).limit(1).get();
    tracking = row !== undefined;
  }
  if (hostCache.size > 10_000) hostCache.clear();
  hostCache.set(host, { tracking, expires: Date.now() + CACHE_MS });
  return tracking;
}

/** Whether a request to `path` may be answered at this host: on a tracking host, only the
 * pixel and click paths are. */
export async function servesPath(d1: D1Database, config: Pick<TernConfig, "publicUrl" | "devMode">, url: string): Promise<boolean> {
  const host = requestHost(url);
  if (ownHost(config, host)) return true;
  const path = new URL(url).pathname;
  if (path.startsWith(OPEN_PATH_PREFIX) || path.startsWith(CLICK_PATH_PREFIX)) return true;
  return !(await isTrackingHost(d1, host));
}

/** Whether a pixel or click of an email of `domainId` may be answered at this host: at the
 * deployment's own host (every email's links went there until its domain had a host of its
 * own), at the domain's own tracking host, and not at any other domain's. */
export async function servesEmail(d1: D1Database, config: Pick<TernConfig, "publicUrl" | "devMode">, url: string, domainId: string | null): Promise<boolean> {
  const host = requestHost(url);
  if (ownHost(config, host)) return true;
  const domain = domainId
    ? await drizzle(d1).select({ name: domains.name, trackingSubdomain: domains.trackingSubdomain, recordStatusJson: domains.recordStatusJson }).from(domains).where(eq(domains.id, domainId)).get()
    : undefined;
  // Its own host, verified; an unverified label counts too, so that links already sent keep
  // working while a record is being rechecked.
  if (domain?.trackingSubdomain && `${domain.trackingSubdomain}.${domain.name}` === host) return true;
  return !(await isTrackingHost(d1, host));
}
