// What one D1 database takes locally: the send's own D1 batch (bench/floor/: a minimal Worker
// under `wrangler dev` whose POST /write is exactly the batch tern's accept path sends for a
// plain send, checked against tern's code first), two ways:
//   over HTTP   one batch per request, closed loop at 1 to 64 connections (what the Worker
//               around the database can feed it, through wrangler dev's proxy);
//   in-Worker   POST /write?n=200: 200 batches back to back inside each request, at 1 and 4
//               connections (the database's own pace: it runs one batch at a time).
// Each batch is 3 row writes (the month's usage row upserted, the email and its first event
// inserted). docs/scaling.md quotes the result.
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
const PER_REQUEST = 200;
const results: { label: string; connections: number; perRequest: number; r: LoadResult }[] = [];
try {
  await runLoad({ url: `${floor.url}/write`, method: "POST", connections: 16, warmupMs: 0, durationMs: quick ? 500 : 2000 });
  const plan: [string, number, number][] = [
    ["over HTTP", 1, 1], ["over HTTP", 4, 1], ["over HTTP", 16, 1], ["over HTTP", 64, 1],
    ["in-Worker", 1, PER_REQUEST], ["in-Worker", 4, PER_REQUEST],
  ];
  for (const [label, connections, perRequest] of plan) {
    const url = perRequest > 1 ? `${floor.url}/write?n=${perRequest}` : `${floor.url}/write`;
    const r = await runLoad({ url, method: "POST", connections, warmupMs: quick ? 300 : 1000, durationMs: quick ? 1500 : 6000, timeoutMs: 60_000 });
    if (r.errors > 0) throw new Error(`${r.errors} errors at ${connections} connections: ${JSON.stringify(r.statuses)}`);
    results.push({ label, connections, perRequest, r });
    log(`${label}, ${connections} connections: ${(r.rps * perRequest).toFixed(0)} batches/s, ${(r.rps * perRequest * rowsPerBatch).toFixed(0)} row writes/s, request p50 ${r.p50.toFixed(2)} ms`);
  }
} finally {
  await stopFloor(log);
}
console.log(`\nMeasured ${new Date().toISOString().slice(0, 10)} on ${cpus().length} cores (${cpus()[0]?.model ?? "unknown CPU"}), load ${loadavg().map((x) => x.toFixed(2)).join(" ")} after. Command: \`node bench/d1-writes.ts\`.\n`);
console.log(`| how | connections | send batches/s | row writes/s (${rowsPerBatch} per batch) | ms per batch (p50 of requests / batches per request) |`);
console.log("|---|---|---|---|---|");
for (const { label, connections, perRequest, r } of results) {
  console.log(`| ${label} | ${connections} | ${(r.rps * perRequest).toFixed(0)} | ${(r.rps * perRequest * rowsPerBatch).toFixed(0)} | ${(r.p50 / perRequest).toFixed(2)} |`);
}
