// Node-side servers the worker tests talk to over loopback: SMTP peers standing in for
// relays of every kind, an HTTPS file server, a DNS zone served over DNS-over-HTTPS, and
// Cloudflare's API (custom hostnames validated against that zone; tenants' DNS records published
// into it). Their ports reach the workerd tests as the TEST_PEERS binding.
import type { TestProject } from "vitest/node";
import { startCloudflareApi } from "./support/cloudflare-api.ts";
import { startDnsZone } from "./support/dns-zone.ts";
import { startHttpsFiles } from "./support/https-files.ts";
import { startSmtpPeers } from "./support/smtp-peers.ts";
import { startWebhookPeers } from "./support/webhook-control.ts";

declare module "vitest" {
  export interface ProvidedContext {
    peers: Record<string, number>;
  }
}

export default async function setup(project: TestProject) {
  const peers = await startSmtpPeers();
  const httpsFiles = await startHttpsFiles(); // attachment `path` fetches
  const zone = await startDnsZone(); // DNS over HTTPS for domain checks; mailauth verification
  const webhookPeers = await startWebhookPeers(); // webhook receivers verifying every delivery
  // Tracking hosts' custom hostnames (TRACKING_CNAME_TARGET is their fallback origin), and
  // tenants' zones whose records are published into the test zone (auto-configure).
  const cloudflare = await startCloudflareApi(async (name) => (await zone.resolver(name, "CNAME")) as string[], "tracking.tern.test", zone);
  project.provide("peers", { ...peers.ports, https: httpsFiles.port, doh: zone.dohPort, dns: zone.controlPort, cloudflare: cloudflare.port, ...webhookPeers.ports });
  return async () => {
    await zone.close();
    await peers.close();
    await httpsFiles.close();
    await webhookPeers.close();
    await cloudflare.close();
  };
}
