// Starting tern the way `npm start` does, as real processes, on free ports and in a temporary
// state directory, for end-to-end tests and benchmarks.
import { spawn, type ChildProcess } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
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

// wrangler dev runs in its own process group (dev/start.ts spawns it detached), so nothing
// takes it down with npm start or with this process: every tern started here that may still
// be running is killed, synchronously, when this process exits (a failed bench calling
// process.exit, vitest ending a worker), since no timer or promise runs after 'exit'.
const live = new Set<{ stateDir: string; child: ChildProcess }>();
let exitHook = false;

/** wrangler dev's pid (its group's id), as dev/start.ts wrote it; null before it is spawned. */
function wranglerPid(stateDir: string): number | null {
  try {
    const pid = Number(readFileSync(join(stateDir, "tern", "wrangler.pid"), "utf8"));
    return pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** SIGKILL to wrangler dev's whole group (workerd too) and to npm start; synchronous. */
function killHard(stateDir: string, child: ChildProcess): number | null {
  const pid = wranglerPid(stateDir);
  if (pid) {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {}
  }
  if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  return pid;
}

/** Resolves once no process of the group is left (at most 5 s), so the state can be reused. */
async function groupGone(pid: number | null): Promise<void> {
  for (let i = 0; pid && i < 100; i++) {
    try {
      process.kill(-pid, 0);
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
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
  // A restart on the same state: the last run's pid file names a group that is gone.
  rmSync(join(stateDir, "tern", "wrangler.pid"), { force: true });
  // A fresh state starts from the run's migrated database (test/node-global-setup.ts); npm
  // start still applies migrations, and finds none left to apply.
  const template = process.env.TERN_TEST_MIGRATED_STATE;
  if (template && !existsSync(join(stateDir, "wrangler"))) cpSync(template, join(stateDir, "wrangler"), { recursive: true });
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
  const entry = { stateDir, child };
  live.add(entry);
  if (!exitHook) {
    exitHook = true;
    process.on("exit", () => {
      for (const t of live) killHard(t.stateDir, t.child);
    });
  }
  const exited = new Promise<number | null>((r) =>
    child.once("exit", (code) => {
      // npm start stops wrangler dev before it exits; if it died instead, this is the last
      // resort (a no-op after a clean stop: the group is gone).
      killHard(stateDir, child);
      live.delete(entry);
      r(code);
    }),
  );
  // A failed start takes everything down before it is reported: npm start may be dead (a
  // crash) or deaf to SIGINT (it handles signals only once tern is running).
  const fail = async (message: string): Promise<never> => {
    const pid = killHard(stateDir, child);
    await exited;
    await groupGone(pid);
    throw new Error(`${message}:\n${tail.text()}`);
  };
  const outcome = await new Promise<string | null>((res) => {
    const timer = setTimeout(() => res("tern did not start in time"), opts.timeoutMs ?? 90_000);
    const check = () => {
      if (tail.text().includes("tern is running.")) {
        clearTimeout(timer);
        child.stdout!.off("data", check);
        res(null);
      }
    };
    child.stdout!.on("data", check);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      res(`tern exited with ${code ?? signal} before it was ready`);
    });
  });
  if (outcome) await fail(outcome);
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
      const pid = killHard(stateDir, child);
      await exited;
      // Wait until the group is gone, so the next start can bind the same state.
      await groupGone(pid);
    },
  };
}
