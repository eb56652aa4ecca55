// A bench's own Worker under `wrangler dev` (bench/metrics/, bench/dashboard/): its D1
// migrations applied to a fresh state, started in its own process group so it goes whatever way
// the bench ends, and ready once /health answers. One place for what both benches did alike.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { d1Target, runWrangler, WRANGLER, wranglerEnv } from "../ops/d1.ts";
import { freePort } from "../test/support/processes.ts";

export interface BenchWorker {
  url: string;
  port: number;
  child: ChildProcess;
  /** The last 4 KB wrangler printed, for a failure's message. */
  output(): string;
  /** Stops wrangler's process group and removes the state. */
  stop(): Promise<void>;
}

export async function startBenchWorker(name: string, root: string, config: string): Promise<BenchWorker> {
  const state = mkdtempSync(join(tmpdir(), `tern-bench-${name}-`));
  const persistTo = join(state, "wrangler");
  let output = "";
  let child: ChildProcess | null = null;
  const stop = async () => {
    if (child?.pid) {
      try {
        process.kill(-child.pid, "SIGTERM");
      } catch {}
      const c = child;
      await new Promise((r) => (c.exitCode !== null ? r(null) : c.once("exit", r)));
    }
    rmSync(state, { recursive: true, force: true });
  };
  try {
    runWrangler(["d1", "migrations", "apply", "DB", ...d1Target(false, persistTo), "--config", config]);
    const port = await freePort();
    const started = spawn(process.execPath, [WRANGLER, "dev", "-c", config, "--ip", "127.0.0.1", "--port", String(port), "--persist-to", persistTo, "--show-interactive-dev-session=false"], {
      cwd: root, env: wranglerEnv(), stdio: ["ignore", "pipe", "pipe"], detached: true,
    });
    child = started;
    // However this process ends (bench/run.ts exits on Ctrl-C or its time limit), wrangler goes too.
    const group = started.pid!;
    const stopChild = () => {
      try {
        process.kill(-group, "SIGTERM");
      } catch {}
    };
    process.once("exit", stopChild);
    started.once("exit", () => process.off("exit", stopChild));
    started.stdout!.on("data", (d) => (output = (output + d).slice(-4000)));
    started.stderr!.on("data", (d) => (output = (output + d).slice(-4000)));
    const url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (started.exitCode !== null) throw new Error(`wrangler dev (${name} bench) exited early:\n${output}`);
      if (await fetch(`${url}/health`).then((r) => r.ok, () => false)) break;
      if (Date.now() > deadline) throw new Error(`wrangler dev (${name} bench) did not start:\n${output}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    return { url, port, child: started, output: () => output, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
