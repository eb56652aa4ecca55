// Which host a request came to. The deployment's own hosts (PUBLIC_URL's, and hosts of the
// same registrable domain or on workers.dev, which no tenant can point at tern) serve
// everything. Any other host may be a domain's own tracking host (Resend's tracking_subdomain:
// links.example.com, a CNAME to tern), which is the tenant's name on tern's Worker: it serves
// the open pixel and click redirects and nothing else, not the API and not the dashboard (whose
// cookies a tenant controlling the parent domain could plant there). An allow-list, not a
// lookup: a host that stops being a tracking host, or one a tenant names without proving it,
// changes nothing. Which email's links a host may answer is bound into each token
// (tokens.ts: a token issued for a tracking host is authentic only there).
import { getDomain } from "tldts";
import { isDevAlias, type TernConfig } from "../config.ts";
import { CLICK_PATH_PREFIX, OPEN_PATH_PREFIX } from "./tokens.ts";

/** The host a request came to: lower case, without a port or a final dot. */
export function requestHost(url: string): string {
  return new URL(url).hostname.toLowerCase().replace(/\.$/, "");
}

function configuredHost(config: Pick<TernConfig, "publicUrl">): string | null {
  try {
    return config.publicUrl ? new URL(config.publicUrl).hostname.toLowerCase() : null;
  } catch {
    return null;
  }
}

/** Whether `host` is one of the deployment's own (see the top of this file). Without a
 * readable PUBLIC_URL nothing is tracked, and every host is the deployment's. */
export function isOwnHost(config: Pick<TernConfig, "publicUrl" | "devMode">, host: string): boolean {
  const own = configuredHost(config);
  if (own === null || host === own || host.endsWith(".workers.dev")) return true;
  if (isDevAlias(config, own, host)) return true;
  const registrable = getDomain(own, { allowPrivateDomains: true });
  return registrable !== null && getDomain(host, { allowPrivateDomains: true }) === registrable;
}

/** Whether a request for `url` may be answered: where the deployment offers tracking hosts
 * (TRACKING_CNAME_TARGET), at any host but its own, only the pixel and click paths are.
 * Without it no tenant's host reaches the Worker, and every host answers as before. */
export function servesPath(config: Pick<TernConfig, "publicUrl" | "devMode" | "trackingCnameTarget">, url: string): boolean {
  if (config.trackingCnameTarget === null) return true;
  const parsed = new URL(url);
  if (isOwnHost(config, requestHost(url))) return true;
  return parsed.pathname.startsWith(OPEN_PATH_PREFIX) || parsed.pathname.startsWith(CLICK_PATH_PREFIX);
}

/** The tracking host a token must have been issued for to be answered at this request's host:
 * undefined at the deployment's own (tokens issued for PUBLIC_URL). */
export function tokenHost(config: Pick<TernConfig, "publicUrl" | "devMode">, url: string): string | undefined {
  const host = requestHost(url);
  return isOwnHost(config, host) ? undefined : host;
}
