// The bridge as a service: `node smtp-bridge/dist/main.js` (built by `node smtp-bridge/build.ts`;
// `node smtp-bridge/main.ts` runs the sources), configured by environment variables (config.ts;
// README "SMTP bridge"). SIGTERM or SIGINT drains and stops: no new connections, sessions in
// the middle of a message finish it, then the process exits 0. A second signal stops at once.
import { relaunchTuned } from "./runtime.ts";

// First of all, before any module that allocates: the memory settings of runtime.ts (this
// replaces the process when they are not yet in force; the process id stays the same).
relaunchTuned();

const { ConfigError, configFromEnv } = await import("./config.ts");
const { createLogger } = await import("./log.ts");
const { startBridge } = await import("./server.ts");

let config;
try {
  config = configFromEnv(process.env);
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  console.error(`tern-smtp-bridge: ${err.message}`);
  process.exit(2);
}
const log = createLogger(config.logLevel);
const bridge = await startBridge(config, log).catch((err: Error) => {
  log.error("start_failed", { error: err.message });
  process.exit(1);
});
log.info("ready", { api: config.apiUrl, hostname: config.hostname, ports: bridge.ports.map((p) => `${p.port}/${p.tls}`).join(","), health_port: bridge.healthPort });

let signals = 0;
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => {
    if (++signals > 1) {
      log.warn("stopped_hard", { signal });
      process.exit(1);
    }
    log.info("signal", { signal });
    bridge.close().then(() => process.exit(0));
  });
}
