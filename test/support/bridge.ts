// The SMTP bridge as its own process (`node smtp-bridge/main.ts`, as systemd or Docker runs
// it), on free loopback ports with the test run's local certificate, in front of a given API.
import { spawn, type ChildProcess } from "node:child_process";
import { join, resolve } from "node:path";
import { prepareTestCertificates } from "./certificates.ts";
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
  const child = spawn(process.execPath, [join(root, "smtp-bridge", "main.ts")], {
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
      ...o.env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d));
  child.stderr!.on("data", (d: Buffer) => (out += d));
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  await new Promise<void>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`the bridge did not start:\n${out}`)), 20_000);
    const check = () => {
      if (out.includes('"event":"ready"')) {
        clearTimeout(timer);
        child.stdout!.off("data", check);
        res();
      }
    };
    child.stdout!.on("data", check);
    child.once("exit", (code) => {
      clearTimeout(timer);
      rej(new Error(`the bridge exited with ${code}:\n${out}`));
    });
  });
  return {
    tlsPort,
    startTlsPort,
    healthUrl: `http://127.0.0.1:${healthPort}/health`,
    caCertPath: certs.caCertPath,
    child,
    output: () => out,
    async stop(signal: NodeJS.Signals = "SIGTERM") {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
