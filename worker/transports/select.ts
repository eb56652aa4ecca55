// Which transport carries a region's mail, as the region table says (worker/regions.ts):
// Cloudflare Email Sending (TRANSPORT_<REGION> = "cloudflare", cloudflare.ts), or the
// region's relay (RELAY_URL_<REGION>, e.g. RELAY_URL_EU_WEST_1) or the default RELAY_URL. With
// neither, mail waits (deferred) and the reason says how to fix it, so nothing is lost while
// an operator configures a relay.
import type { TernConfig } from "../config.ts";
import { createCloudflareTransport } from "./cloudflare.ts";
import { createSmtpTransport, parseRelayUrl } from "./smtp.ts";
import type { OutboundMessage, RecipientResult, Transport } from "./transport.ts";

export function relayUrlFor(_env: Env, config: TernConfig, region: string): string {
  return config.region(region).relayUrl;
}

function waitingTransport(reason: string): Transport {
  return {
    async open() {
      return {
        async deliver(m: OutboundMessage): Promise<RecipientResult[]> {
          return m.recipients.map((recipient) => ({ recipient, status: "deferred" as const, message: reason }));
        },
        async close() {},
      };
    },
  };
}

export function transportFor(env: Env, config: TernConfig, region: string): Transport {
  const settings = config.region(region);
  if (settings.misconfigured) return waitingTransport(`The transport of region ${region} is misconfigured: ${settings.misconfigured}`);
  if (settings.transport === "cloudflare") {
    const binding = (env as { EMAIL?: SendEmail }).EMAIL;
    if (!binding) return waitingTransport(`Region ${region} sends through Cloudflare Email Sending, but the Worker has no send_email binding named EMAIL: add [[send_email]] name = "EMAIL" to wrangler.toml.`);
    return createCloudflareTransport(binding);
  }
  const url = relayUrlFor(env, config, region);
  if (!url) return waitingTransport(`No relay is configured for region ${region}: set RELAY_URL.`);
  try {
    const relay = parseRelayUrl(url, config.heloName);
    // A relay that accepts the connection and then says nothing (blackholed) holds a message
    // this long; the region is then held off (delivery/session-pool.ts).
    return createSmtpTransport({ ...relay, connectTimeoutMs: Math.min(relay.connectTimeoutMs, config.relayTimeoutMs), commandTimeoutMs: config.relayTimeoutMs });
  } catch (err) {
    return waitingTransport(`The relay for region ${region} is misconfigured: ${(err as Error).message}`);
  }
}
