import { defineConfig } from "vitest/config";
import { prepareTestCertificates } from "./test/support/certificates.ts";
import { TEST_API_TOKEN, TEST_ZONE_ID } from "./test/support/cloudflare-api.ts";

// workerd verifies every TLS peer; the local CA must be trusted before miniflare starts it.
// Miniflare reads NODE_EXTRA_CA_CERTS when it is loaded, so the plugin is imported after this.
const certs = prepareTestCertificates();
process.env.NODE_EXTRA_CA_CERTS = certs.bundlePath;
const { cloudflareTest, readD1Migrations } = await import("@cloudflare/vitest-plugin");

export default defineConfig({
  test: {
    projects: [
      {
        // Worker tests: run inside workerd with the real bindings (D1, R2, Queues, DOs).
        plugins: [
          cloudflareTest(async ({ inject }) => {
            const peers = inject("peers");
            return {
              wrangler: { configPath: "./wrangler.toml" },
              miniflare: {
                // Cloudflare Email Sending as wrangler simulates it: EMAIL (wrangler.toml) and a
                // binding restricted to one recipient, for the transport's refusals.
                email: { send_email: [{ name: "EMAIL" }, { name: "EMAIL_RESTRICTED", allowed_destination_addresses: ["allowed@cf.example"] }] },
                bindings: {
                  TEST_MIGRATIONS: await readD1Migrations("./migrations"),
                  TEST_PEERS: peers,
                  TERN_DEV_MODE: "false",
                  // The background queue consumer delivers to a loopback peer that captures mail.
                  RELAY_URL: `smtp+plain://127.0.0.1:${peers.plain}`,
                  RELAY_FINAL: "true",
                  // ap-northeast-1's relay is blackholed (accepts TCP, never answers): its mail
                  // waits while every other region's goes (test/worker/region-sender.test.ts).
                  // No other test sends through that region.
                  RELAY_URL_AP_NORTHEAST_1: `smtp+plain://127.0.0.1:${peers.silent}`,
                  RELAY_TIMEOUT_SECONDS: "5",
                  RETRY_SCHEDULE: "1,1,1",
                  // Domains are checked against the test zone (test/support/dns-zone.ts).
                  DOH_URL: `https://localhost:${peers.doh}/dns-query`,
                  BOUNCE_HOST: "bounces.tern.test",
                  SPF_INCLUDE: "_spf.tern.test",
                  INBOUND_MX_HOST: "inbound.tern.test",
                  // Open pixels, click redirects and unsubscribe links point here.
                  PUBLIC_URL: "https://t.tern.test",
                  // Domains' own tracking hosts are CNAMEs of this (test/worker/tracking-host.test.ts).
                  TRACKING_CNAME_TARGET: "tracking.tern.test",
                  // tern creates their custom hostnames at the local stand-in for Cloudflare's API
                  // (test/support/cloudflare-api.ts; test/worker/custom-hostnames.test.ts).
                  CLOUDFLARE_API_URL: `http://127.0.0.1:${peers.cloudflare}/client/v4`,
                  CLOUDFLARE_ZONE_ID: TEST_ZONE_ID,
                  CLOUDFLARE_API_TOKEN: TEST_API_TOKEN,
                  // The operator allows loopback webhook targets: the test receivers listen there.
                  WEBHOOK_ALLOW_PRIVATE_TARGETS: "true",
                  // A test-only master secret: DKIM private keys in the test database are sealed with it.
                  MASTER_KEY: "test-master-key-0123456789abcdef0123456789",
                },
              },
            };
          }),
        ],
        test: {
          name: "worker",
          include: ["test/worker/**/*.test.ts"],
          // One workerd for all the files instead of one each: starting one and loading tern's
          // modules into it cost about 4 s of CPU a file (412 s of 1,032 in a full run). The
          // files share its D1, R2 and queues, so each test keeps to its own account and rows.
          isolate: false,
          setupFiles: ["./test/worker/setup.ts"],
          globalSetup: ["./test/global-setup.ts"],
          testTimeout: 20_000,
        },
      },
      {
        // Node tests: the dev relay, the SMTP bridge, and end-to-end runs against real processes.
        test: {
          name: "node",
          include: ["test/node/**/*.test.ts", "test/e2e/**/*.test.ts"],
          environment: "node",
          globalSetup: ["./test/node-global-setup.ts"],
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
