// Part 3: what one accepted email costs in D1 round trips and queue sends. The number is
// measured by test/worker/round-trips.test.ts, which wraps the real bindings and counts every
// call; the bench reads what that test asserts and runs it, so the figure it reports is one
// the code was just checked against.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

export const ROUND_TRIP_TEST = "test/worker/round-trips.test.ts";

export interface RoundTrips {
  /** What the test asserts for one accepted email (e.g. { d1Batches: 1, d1Queries: 0, queueSends: 1, r2Calls: 0 }), null when the test is missing or unreadable. */
  asserted: Record<string, number> | null;
  status: "passed" | "failed" | "missing" | "unreadable";
  seconds: number;
  output: string;
}

export function readAssertion(source: string): Record<string, number> | null {
  const m = source.match(/expect\(\s*counts\s*\)\.toEqual\(\s*\{([^}]*)\}\s*\)/);
  if (!m) return null;
  const out: Record<string, number> = {};
  for (const [, key, value] of m[1]!.matchAll(/(\w+)\s*:\s*(\d+)/g)) out[key!] = Number(value);
  return Object.keys(out).length ? out : null;
}

export async function measureRoundTrips(root: string, track: (child: ChildProcess | null) => void, timeoutMs = 120_000): Promise<RoundTrips> {
  const file = join(root, ROUND_TRIP_TEST);
  if (!existsSync(file)) return { asserted: null, status: "missing", seconds: 0, output: "" };
  const asserted = readAssertion(readFileSync(file, "utf8"));
  const started = performance.now();
  const child = spawn(process.execPath, [join(root, "node_modules", "vitest", "vitest.mjs"), "run", "--project", "worker", ROUND_TRIP_TEST], {
    cwd: root,
    env: { ...process.env, CI: "true", FORCE_COLOR: "0", NO_COLOR: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  track(child);
  let output = "";
  child.stdout!.on("data", (d) => (output += d));
  child.stderr!.on("data", (d) => (output += d));
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  const code = await new Promise<number | null>((r) => {
    child.on("error", () => r(-1));
    child.on("exit", (c) => r(c));
  });
  clearTimeout(timer);
  track(null);
  const seconds = (performance.now() - started) / 1000;
  if (!asserted) return { asserted: null, status: "unreadable", seconds, output };
  return { asserted, status: code === 0 ? "passed" : "failed", seconds, output };
}
