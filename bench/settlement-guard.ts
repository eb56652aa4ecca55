// What guarding a settlement's writes by its UPDATE costs (`node bench/settlement-guard.ts`, not
// part of `npm run bench`): the consumer's settlement of a delivered email (settlementStatements
// and its rollup, one D1 batch, as bench/metrics/worker.ts's /deliver runs it) against the same
// settlement written the way it was before (UPDATE first, plain inserts, unconditional rollup),
// in interleaved rounds of 100 settlements each, alternating which goes first. The figures are
// the medians of the rounds' ratios (guarded / unguarded): CPU of the Worker's workerd from
// schedstat, and wall time per settlement.
import { resolve, join } from "node:path";
import { startBenchWorker } from "./bench-worker.ts";
import { workerCpuNs, workerRuntimePid } from "./metrics.ts";

const root = resolve(import.meta.dirname, "..");
const ROUNDS = Number(process.env.ROUNDS ?? 30);
const PER = 100;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const quartiles = (xs: number[]) => [0.25, 0.75].map((q) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * q)]!);

async function post(url: string): Promise<void> {
  const res = await fetch(url, { method: "POST" });
  if (!res.ok) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
}

const worker = await startBenchWorker("settlement-guard", root, join(root, "bench", "metrics", "wrangler.toml"));
try {
  const { url } = worker;
  await post(`${url}/setup`);
  const runtime = workerRuntimePid(worker.child.pid!, worker.port);
  const run = async (guard: 0 | 1) => {
    await post(`${url}/sending?n=${PER}`);
    const c0 = workerCpuNs(runtime);
    const t0 = performance.now();
    await post(`${url}/deliver?n=${PER}&rollup=1&guard=${guard}`);
    const wall = (performance.now() - t0) / PER;
    const c1 = workerCpuNs(runtime);
    return { wall, cpu: c0 !== null && c1 !== null ? (c1 - c0) / 1e6 / PER : NaN };
  };
  for (const g of [0, 1, 0, 1] as const) await run(g); // warm-up
  const cpu: number[] = [], wall: number[] = [], base: number[] = [], guarded: number[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const order = round % 2 ? ([0, 1] as const) : ([1, 0] as const);
    const got: Record<number, { wall: number; cpu: number }> = {};
    for (const g of order) got[g] = await run(g);
    cpu.push(got[1]!.cpu / got[0]!.cpu);
    wall.push(got[1]!.wall / got[0]!.wall);
    base.push(got[0]!.cpu);
    guarded.push(got[1]!.cpu);
  }
  const fmt = (xs: number[]) => `${median(xs).toFixed(3)} (IQR ${quartiles(xs).map((x) => x.toFixed(3)).join("-")})`;
  console.log(`${ROUNDS} rounds of ${PER} settlements each way`);
  console.log(`CPU per settlement: unguarded ${median(base).toFixed(3)} ms, guarded ${median(guarded).toFixed(3)} ms`);
  console.log(`guarded / unguarded: CPU ${fmt(cpu)}, wall ${fmt(wall)}`);
} finally {
  await worker.stop();
}
