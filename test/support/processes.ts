// Starting tern the way `npm start` does, as real processes, on free ports and in a temporary
// state directory, for end-to-end tests and benchmarks.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { keepTail } from "./output-tail.ts";

const root = resolve(import.meta.dirname, "..", "..");

const handedOut = new Set<number>();

function bindable(port: number): Promise<boolean> {
  return new Promise((res) => {
    const s = createServer();
    s.once("error", () => res(false));
    s.listen(port, "127.0.0.1", () => s.close(() => res(true)));
  });
}

/** A port nothing listens on, below Linux's ephemeral range (32768-60999): a port the kernel
 * picked (listen on 0) comes from the range outgoing connections use too, and a test making
 * hundreds of connections could take it before the server that was meant to bind it does. */
export async function freePort(): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (handedOut.has(port) || !(await bindable(port))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error("no free port found between 20000 and 32000");
}

export interface TernProcess {
  url: string;
  apiKey: string;
  domain: string;
  relayHttp: string;
  relaySmtpPort: number;
  /** The SMTP bridge: implicit TLS and STARTTLS ports, health endpoint, and the CA its certificate chains to. */
  bridge: { tlsPort: number; startTlsPort: number; healthUrl: string; caCertPath: string };
  stateDir: string;
  output(): string;
  /** Ctrl-C, as a person would; resolves when every process has exited. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /** A crash: SIGKILL to wrangler dev's whole process group (workerd too) and to npm start. */
  kill(): Promise<void>;
  child: ChildProcess;
}

export async function startTern(opts: { stateDir?: string; env?: Record<string, string>; timeoutMs?: number; port?: number } = {}): Promise<TernProcess> {
  // Under vitest, inside the run's own directory, which test/node-global-setup.ts removes at
  // the end (a test may restart tern on the same state, so stop() cannot remove it).
  const stateDir = opts.stateDir ?? mkdtempSync(join(process.env.TERN_TEST_TMP ?? tmpdir(), "tern-e2e-"));
  const [port, smtp, http] = [opts.port ?? (await freePort()), await freePort(), await freePort()];
  const [bridgeTls, bridgeStartTls, bridgeHealth] = [await freePort(), await freePort(), await freePort()];
  const apiKey = "tern_" + "e2e0".repeat(10);
  const child = spawn(process.execPath, [join(root, "dev", "start.ts")], {
    cwd: root,
    env: {
      ...process.env,
      PORT: String(port),
      RELAY_SMTP_PORT: String(smtp),
      RELAY_HTTP_PORT: String(http),
      TERN_STATE_DIR: join(stateDir, "tern"),
      TERN_PERSIST_TO: join(stateDir, "wrangler"),
      TERN_DEV_API_KEY: apiKey,
      TERN_CRON_INTERVAL_MS: "2000",
      TERN_BRIDGE_TLS_PORTS: String(bridgeTls),
      TERN_BRIDGE_STARTTLS_PORTS: String(bridgeStartTls),
      TERN_BRIDGE_HEALTH_PORT: String(bridgeHealth),
      // The dev bridge's spool under the state directory: a tern killed with SIGKILL (a fault
      // test) cannot remove it, and the run removes the state directory at its end.
      TERN_BRIDGE_SPOOL_DIR: stateDir,
      ...opts.env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  // wrangler logs a line per request, and a benchmark makes hundreds of thousands of requests
  const tail = keepTail(child, 128 * 1024);
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  await new Promise<void>((res, rej) => {
    const timer = setTimeout(() => {
      // Take down what did start, so a slow start leaves no wrangler behind: SIGINT lets
      // dev/start.ts stop its children; the kill after it covers a start too stuck to hear it.
      child.kill("SIGINT");
      setTimeout(() => {
        try {
          process.kill(-Number(readFileSync(join(stateDir, "tern", "wrangler.pid"), "utf8")), "SIGKILL");
        } catch {}
        if (child.exitCode === null) child.kill("SIGKILL");
      }, 5_000).unref();
      rej(new Error(`tern did not start in time:\n${tail.text()}`));
    }, opts.timeoutMs ?? 90_000);
    const check = () => {
      if (tail.text().includes("tern is running.")) {
        clearTimeout(timer);
        child.stdout!.off("data", check);
        res();
      }
    };
    child.stdout!.on("data", check);
    child.once("exit", (code) => {
      clearTimeout(timer);
      rej(new Error(`tern exited with ${code} before it was ready:\n${tail.text()}`));
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    apiKey,
    domain: "tern.test",
    relayHttp: `http://127.0.0.1:${http}`,
    relaySmtpPort: smtp,
    bridge: { tlsPort: bridgeTls, startTlsPort: bridgeStartTls, healthUrl: `http://127.0.0.1:${bridgeHealth}/health`, caCertPath: join(stateDir, "tern", "certs", "ca.crt") },
    stateDir,
    output: tail.text,
    child,
    async stop(signal: NodeJS.Signals = "SIGINT") {
      if (child.exitCode === null) child.kill(signal);
      return exited;
    },
    async kill() {
      const wranglerPid = Number(readFileSync(join(stateDir, "tern", "wrangler.pid"), "utf8"));
      try {
        process.kill(-wranglerPid, "SIGKILL");
      } catch {}
      if (child.exitCode === null) child.kill("SIGKILL");
      await exited;
      // Wait until the group is gone, so the next start can bind the same state.
      for (let i = 0; i < 100; i++) {
        try {
          process.kill(-wranglerPid, 0);
        } catch {
          return;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
}
