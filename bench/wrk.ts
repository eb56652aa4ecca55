// Optional cross-check of the bare route with wrk (a C load generator that needs far less
// CPU than Node). Used only when `wrk` is on PATH; the headline numbers never depend on it.
import { spawn, spawnSync } from "node:child_process";

export interface WrkResult {
  connections: number;
  rps: number;
  p50: number;
  p99: number;
}

export function wrkAvailable(): boolean {
  return spawnSync("wrk", ["--version"], { stdio: "ignore" }).error === undefined;
}

function toMs(value: string, unit: string): number {
  const v = Number(value);
  return unit === "us" ? v / 1000 : unit === "s" ? v * 1000 : unit === "m" ? v * 60_000 : v;
}

export function parseWrk(out: string, connections: number): WrkResult | null {
  const rps = out.match(/Requests\/sec:\s+([\d.]+)/);
  const p50 = out.match(/^\s+50%\s+([\d.]+)(us|ms|s|m)\s*$/m);
  const p99 = out.match(/^\s+99%\s+([\d.]+)(us|ms|s|m)\s*$/m);
  if (!rps || !p50 || !p99) return null;
  return { connections, rps: Number(rps[1]), p50: toMs(p50[1]!, p50[2]!), p99: toMs(p99[1]!, p99[2]!) };
}

/** One wrk run; `track` lets the caller kill it on Ctrl-C. */
export function runWrk(url: string, connections: number, seconds: number, track: (pid: number | undefined, done: boolean) => void): Promise<WrkResult> {
  return new Promise((resolve, reject) => {
    const child = spawn("wrk", ["-t1", `-c${connections}`, `-d${seconds}s`, "--latency", "--timeout", "10s", url], { stdio: ["ignore", "pipe", "pipe"] });
    track(child.pid, false);
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), (seconds + 15) * 1000);
    child.on("error", (err) => {
      clearTimeout(timer);
      track(child.pid, true);
      reject(err);
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      track(child.pid, true);
      const parsed = code === 0 ? parseWrk(out, connections) : null;
      if (parsed) resolve(parsed);
      else reject(new Error(`wrk exited with ${code}:\n${out}`));
    });
  });
}
