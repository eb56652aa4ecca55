// The SMTP bridge under `npm start`: in the same process, on loopback, with the local
// certificate (dev/certs.ts), in front of the local API. Its settings are the service's own
// TERN_BRIDGE_* variables (smtp-bridge/config.ts) with dev defaults: 2465 (TLS) and 2587
// (STARTTLS), and 465, 587 and 25 when the process may bind them.
import { join } from "node:path";
import { configFromEnv } from "../smtp-bridge/config.ts";
import { createLogger } from "../smtp-bridge/log.ts";
import { startBridge, type Bridge } from "../smtp-bridge/server.ts";
import { ensureLocalCertificates } from "./certs.ts";

export interface DevBridge extends Bridge {
  /** The local CA that signed the bridge's certificate: what clients must trust. */
  caCertPath: string;
}

/** The TERN_BRIDGE_* variables of an environment. */
export function bridgeSettings(env: Record<string, string | undefined>): Record<string, string | undefined> {
  return Object.fromEntries(Object.entries(env).filter(([k]) => k.startsWith("TERN_BRIDGE_")));
}

export async function startDevBridge(o: { apiUrl: string; stateDir: string; settings: Record<string, string | undefined>; log: (line: string) => void }): Promise<DevBridge> {
  const certs = ensureLocalCertificates(join(o.stateDir, "certs"));
  const config = configFromEnv({
    TERN_BRIDGE_HOST: "127.0.0.1",
    TERN_BRIDGE_HOSTNAME: "localhost",
    TERN_BRIDGE_TLS_PORTS: "2465,465?",
    TERN_BRIDGE_STARTTLS_PORTS: "2587,587?,25?",
    TERN_BRIDGE_HEALTH_PORT: "2580",
    TERN_BRIDGE_CERT_FILE: certs.certPath,
    TERN_BRIDGE_KEY_FILE: certs.keyPath,
    ...o.settings,
    TERN_API_URL: o.apiUrl,
  });
  const bridge = await startBridge(config, createLogger(config.logLevel, (line) => o.log(line)));
  return Object.assign(bridge, { caCertPath: certs.caCertPath });
}
