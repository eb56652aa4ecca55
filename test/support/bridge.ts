// The SMTP bridge as its own process (`node smtp-bridge/dist/main.js`, built from the sources
// first, as systemd or Docker runs it), on free loopback ports with the test run's local
// certificate, in front of a given API.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { buildBridge } from "../../smtp-bridge/build.ts";
import { prepareTestCertificates } from "./certificates.ts";
import { keepTail } from "./output-tail.ts";
import { freePort } from "./processes.ts";

const root = resolve(import.meta.dirname, "..", "..");

export interface BridgeProcess {
  tlsPort: number;
  startTlsPort: number;
  healthUrl: string;
  caCertPath: string;
  child: ChildProcess;
  /** Everything it logged (JSON lines). */
  output(): string;
  /** Sends the signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export async function startBridgeProcess(o: { apiUrl: string; env?: Record<string, string> }): Promise<BridgeProcess> {
  const certs = prepareTestCertificates();
  const [tlsPort, startTlsPort, healthPort] = [await freePort(), await freePort(), await freePort()];
  const spoolBase = mkdtempSync(join(process.env.TERN_TEST_TMP ?? tmpdir(), "tern-bridge-spool-"));
  const child = spawn(process.execPath, [buildBridge()], {
    cwd: root,
    env: {
      ...process.env,
      TERN_API_URL: o.apiUrl,
      TERN_BRIDGE_HOST: "127.0.0.1",
      TERN_BRIDGE_HOSTNAME: "localhost",
      TERN_BRIDGE_TLS_PORTS: String(tlsPort),
      TERN_BRIDGE_STARTTLS_PORTS: String(startTlsPort),
      TERN_BRIDGE_HEALTH_PORT: String(healthPort),
      TERN_BRIDGE_CERT_FILE: certs.certPath,
      TERN_BRIDGE_KEY_FILE: certs.keyPath,
      TERN_BRIDGE_SPOOL_DIR: spoolBase,
      ...o.env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const tail = keepTail(child, 256 * 1024); // at the default level it logs a line per message
  // The bridge's spool goes under a directory of this process's own, removed when it exits:
  // a bridge stopped with SIGKILL (a fault test) cannot remove its spool itself.
  const exited = new Promise<number | null>((r) =>
    child.once("exit", (code) => {
      rmSync(spoolBase, { recursive: true, force: true });
      r(code);
    }),
  );
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the bridge exited with ${child.exitCode ?? child.signalCode}:\n${tail.text()}`);
    const up = await fetch(`http://127.0.0.1:${healthPort}/health`).then((r) => r.ok, () => false);
    if (up) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`the bridge did not start:\n${tail.text()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    tlsPort,
    startTlsPort,
    healthUrl: `http://127.0.0.1:${healthPort}/health`,
    caCertPath: certs.caCertPath,
    child,
    output: tail.text,
    async stop(signal: NodeJS.Signals = "SIGTERM") {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
