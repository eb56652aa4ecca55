// Test-only bindings, added in vitest.config.ts.
import type { D1Migration } from "cloudflare:test";

interface TestBindings {
  TEST_MIGRATIONS: D1Migration[];
  /** Ports of the loopback SMTP peers started by test/global-setup.ts, by name. */
  TEST_PEERS: Record<string, number>;
  /** A send_email binding that allows one recipient (vitest.config.ts). */
  EMAIL_RESTRICTED: SendEmail;
}

declare global {
  namespace Cloudflare {
    interface Env extends TestBindings {}
  }
  interface Env extends TestBindings {}
}
