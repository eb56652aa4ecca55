// `npm test`'s runner: two lanes of vitest processes side by side. One vitest on 2 cores runs
// one file at a time (its default is a worker per core but one), and the worker project's one
// workerd keeps about one core busy: run one after the other, the suite took 1,193 s on this
// 2-core machine, with the second core mostly idle while the worker project ran
// (docs/benchmarks.md, "The test suite's wall time"). One lane runs the worker project, then
// the Node tests (test/node); the other the end-to-end files (test/e2e), which are about as
// long. Arguments (files, a -t filter) run one vitest as given instead.
import { spawn, type ChildProcess } from "node:child_process";
import { resolve } from "node:path";
import { prepareTestCertificates } from "./support/certificates.ts";

const root = resolve(import.meta.dirname, "..");
const vitest = resolve(root, "node_modules", "vitest", "vitest.mjs");
const args = process.argv.slice(2);

// Both processes read vitest.config.ts, which makes the local CA on a fresh clone: made once
// here first, so they do not race to write it.
prepareTestCertificates();

function run(extra: string[]): ChildProcess {
  return spawn(process.execPath, [vitest, "run", ...extra], { cwd: root, stdio: "inherit" });
}

const running = new Set<ChildProcess>();
let stopping = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    stopping = true;
    for (const c of running) c.kill(signal);
  });
}

/** Runs each vitest of a lane in turn (all of them, whatever one answers); its exit codes. */
async function lane(steps: string[][]): Promise<number[]> {
  const codes: number[] = [];
  for (const step of steps) {
    if (stopping) break;
    const child = run(step);
    running.add(child);
    codes.push(await new Promise<number>((res) => child.on("exit", (code, signal) => res(code ?? (signal ? 1 : 0)))));
    running.delete(child);
  }
  return codes;
}

const lanes = args.length > 0
  ? [[args]]
  : [[["--project", "worker"], ["--project", "node", "test/node/"]], [["--project", "node", "test/e2e/"]]];
const codes = (await Promise.all(lanes.map(lane))).flat();
// Interrupted: the shell's own code for Ctrl-C (128 + SIGINT).
const failed = stopping ? 130 : codes.find((c) => c !== 0);
if (failed === undefined && args.length === 0) console.log("\nEvery test passed: test/worker, test/node and test/e2e.");
process.exit(failed ?? 0);
