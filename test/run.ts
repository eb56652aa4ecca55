// `npm test`'s runner: the two vitest projects side by side, each in its own vitest process.
// One vitest on 2 cores runs one file at a time (its default is a worker per core but one), and
// the worker project's one workerd keeps about one core busy: run one after the other, the
// suite took 1,193 s on this 2-core machine, with the second core mostly idle while the worker
// project ran (docs/benchmarks.md, "The test suite's wall time"). Arguments (files, a -t
// filter) run one vitest as given instead.
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

const children = args.length > 0 ? [run(args)] : [run(["--project", "worker"]), run(["--project", "node"])];
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    for (const c of children) c.kill(signal);
  });
}
const codes = await Promise.all(children.map((c) => new Promise<number>((res) => c.on("exit", (code, signal) => res(code ?? (signal ? 1 : 0))))));
const failed = codes.find((c) => c !== 0);
if (failed === undefined && children.length > 1) console.log("\nBoth projects passed: worker (test/worker) and node (test/node, test/e2e).");
process.exit(failed ?? 0);
