// What one D1 database takes locally: the send's own D1 batch (bench/floor/: a minimal Worker
// under `wrangler dev` whose POST /write is exactly the batch tern's accept path sends for a
// plain send, checked against tern's code first) in a closed loop at 1 to 64 connections.
// Reported per connection count: batches per second (accepted emails), rows written per second
// (each batch upserts the month's usage row and inserts the email and its first event), and the
// latency. docs/scaling.md quotes the result.
// Run: `node bench/d1-writes.ts` (BENCH_QUICK=1 for a smoke run).
import { cpus, loadavg } from "node:os";
import { checkFloorStatements, startFloor, stopFloor } from "./floor.ts";
import { runLoad, type LoadResult } from "./load.ts";

const quick = process.env.BENCH_QUICK === "1";
const started = performance.now();
const log = (line: string) => console.log(`[d1-writes ${((performance.now() - started) / 1000).toFixed(0).padStart(3)}s] ${line}`);

const checked = await checkFloorStatements();
const rowsPerBatch = checked.send.length;
log(`the floor's batch is tern's: ${checked.send.map((s) => s.sql.split(" (")[0]).join("; ")}`);
const floor = await startFloor(log);
const results: { connections: number; r: LoadResult }[] = [];
try {
  await runLoad({ url: `${floor.url}/write`, method: "POST", connections: 16, warmupMs: 0, durationMs: quick ? 500 : 2000 });
  for (const connections of [1, 4, 16, 64]) {
    const r = await runLoad({ url: `${floor.url}/write`, method: "POST", connections, warmupMs: quick ? 300 : 1000, durationMs: quick ? 1000 : 5000 });
    if (r.errors > 0) throw new Error(`${r.errors} errors at ${connections} connections: ${JSON.stringify(r.statuses)}`);
    results.push({ connections, r });
    log(`${connections} connections: ${r.rps.toFixed(0)} batches/s, ${(r.rps * rowsPerBatch).toFixed(0)} rows/s, p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms`);
  }
} finally {
  await stopFloor(log);
}
console.log(`\nMeasured ${new Date().toISOString().slice(0, 10)} on ${cpus().length} cores (${cpus()[0]?.model ?? "unknown CPU"}), load ${loadavg().map((x) => x.toFixed(2)).join(" ")} after. Command: \`node bench/d1-writes.ts\`.\n`);
console.log("| connections | send batches/s | rows written/s | p50 | p99 |");
console.log("|---|---|---|---|---|");
for (const { connections, r } of results) console.log(`| ${connections} | ${r.rps.toFixed(0)} | ${(r.rps * rowsPerBatch).toFixed(0)} | ${r.p50.toFixed(2)} ms | ${r.p99.toFixed(2)} ms |`);
