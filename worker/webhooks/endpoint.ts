// Where webhooks may be delivered (contract section 6): https to a public host, checked with
// the same address rules as every other outbound fetch (worker/net/outbound.ts). The operator
// may allow http and local targets: dev mode does, so a receiver on loopback works offline.
import { checkOutboundUrl, type OutboundUrlPolicy } from "../net/outbound.ts";
import type { Result } from "../result.ts";

/** Longer URLs are refused: they are stored per endpoint and shown in every attempt log. */
export const MAX_ENDPOINT_LENGTH = 2048;

/** The policy for webhook targets: production refuses http and non-public hosts; any port is fine. */
export function endpointPolicy(options: { allowLocalTargets: boolean }): OutboundUrlPolicy {
  return { allowHttp: options.allowLocalTargets, allowPrivate: options.allowLocalTargets, allowAnyPort: true };
}

/**
 * Checks an endpoint URL when it is created or changed, and again before every attempt (the
 * operator's policy may have changed since). The message names the problem for the API caller.
 */
export function checkEndpoint(url: string, policy: OutboundUrlPolicy): Result<URL> {
  if (typeof url !== "string" || url.length > MAX_ENDPOINT_LENGTH) {
    return { ok: false, message: `The endpoint must be a URL of at most ${MAX_ENDPOINT_LENGTH} characters.` };
  }
  return checkOutboundUrl(url, policy, "The endpoint");
}
