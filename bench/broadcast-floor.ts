// The floor of issue 17's CPU target (`node bench/broadcast-floor.ts`, not part of `npm run
// bench`): N emails recorded by a broadcast's fan-out, and the same N recorded by POST
// /emails/batch, in a minimal Worker (bench/floor/broadcast.ts) that does the least each path
// needs and settles both through the same least consumer, under `wrangler dev` as tern runs.
// CPU seconds per 1,000 emails of the floor's processes from start until every email is settled,
// less what they use at rest; rounds in ABBA order. Each round then measures the consumer's
// share alone: N batch-sent emails recorded without queueing, then queued and settled. Its ratio is how low "a broadcast email / a
// batch-sent one" can go here when both share one consumer and its events; tern's own figure is
// bench/broadcasts.ts's (docs/benchmarks.md, "Broadcasts").
import { benchBody, d1, tryGet } from "./broadcasts.ts";
import { sampleCpu, type CpuSample } from "./cpu.ts";
import { startFloor, stopFloor } from "./floor.ts";

const N = Number(process.env.BENCH_BROADCAST_CONTACTS ?? 10_000);
const ROUNDS = Number(process.env.ROUNDS ?? 2);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const started = performance.now();
const log = (line: string) => console.log(`[broadcast-floor ${((performance.now() - started) / 1000).toFixed(0).padStart(3)}s] ${line}`);
const total = (s: CpuSample) => (s ? s["worker runtime"] + s["dev proxy"] + s.wrangler + s.other : NaN);

const floor = await startFloor(log);
try {
  const db = d1(floor.stateDir);
  const post = async (path: string, body?: unknown) => {
    const res = await fetch(`${floor.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
    if (!res.ok) throw new Error(`POST ${path}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<any>;
  };
  await post(`/seed?n=${N}`);
  log(`${N} contacts seeded`);
  const body = benchBody(process.env.BENCH_BROADCAST_BODY ?? "newsletter");
  const cpu = () => total(sampleCpu(floor.pid, floor.port));
  const done = (where: string, ...params: (string | number)[]) => tryGet<{ n: number }>(db, `SELECT COUNT(*) AS n FROM emails WHERE state = 'done' AND ${where}`, ...params)?.n ?? 0;

  // What the floor's processes use with nothing to do, per second.
  const restRate = async () => {
    const a = cpu();
    await sleep(5000);
    return (cpu() - a) / 5;
  };
  const measure = async (label: string, start: () => Promise<(() => boolean)>) => {
    await sleep(2000);
    const rest = await restRate();
    const c0 = cpu();
    const t0 = performance.now();
    const finished = await start();
    while (!finished()) await sleep(250);
    const seconds = (performance.now() - t0) / 1000;
    const perThousand = ((cpu() - c0 - rest * seconds) / N) * 1000;
    log(`${label}: ${N} emails settled in ${seconds.toFixed(1)} s, ${perThousand.toFixed(3)} CPU s per 1,000 (rest ${(rest * 1000).toFixed(0)} ms a second)`);
    return perThousand;
  };
  const broadcast = () =>
    measure("broadcast", async () => {
      const { id } = await post("/broadcasts", { from: "News <news@tern.test>", subject: "Hi {{{FIRST_NAME}}}", html: body.html });
      return () => done("broadcast_id = ?", id) >= N;
    });
  /** N personalised emails to `tag`-prefixed simulator addresses, 100 to a request. */
  const batchRequests = (tag: string) =>
    Array.from({ length: Math.ceil(N / 100) }, (_, r) =>
      Array.from({ length: Math.min(100, N - r * 100) }, (_, i) => ({ from: "b@tern.test", to: `${tag}${r * 100 + i}@simulator.tern.test`, subject: `Hi Reader ${r * 100 + i}`, html: body.personal(`Reader ${r * 100 + i}`) })));
  let batches = 0;
  const batch = () =>
    measure("batch", async () => {
      const tag = `b${batches++}-`;
      const requests = batchRequests(tag);
      for (let i = 0; i < requests.length; i += 4) await Promise.all(requests.slice(i, i + 4).map((b) => post("/emails/batch", b)));
      return () => done("broadcast_id IS NULL AND substr(to_json, 1, ?) = ?", tag.length + 2, `["${tag}`) >= N;
    });
  // The consumer's share alone: N batch-sent emails recorded without a queue message (not
  // measured), then measured from their queueing (100 ids a request) until all are settled.
  const consumerAlone = async () => {
    const tag = `b${batches++}-`;
    const ids: string[] = [];
    for (const emails of batchRequests(tag)) ids.push(...((await post("/emails/batch?hold=1", emails)).data as { id: string }[]).map((e) => e.id));
    return measure("consumer alone", async () => {
      for (let i = 0; i < ids.length; i += 400) await Promise.all([0, 100, 200, 300].map((o) => (ids.length > i + o ? post("/enqueue", ids.slice(i + o, i + o + 100)) : null)));
      return () => done("broadcast_id IS NULL AND substr(to_json, 1, ?) = ?", tag.length + 2, `["${tag}`) >= N;
    });
  };
  const ratios: number[] = [];
  const shares: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const [a, b] = round % 2 ? [await batch(), await broadcast()] : [await broadcast(), await batch()];
    const [broadcastCpu, batchCpu] = round % 2 ? [b, a] : [a, b];
    const consumer = await consumerAlone();
    ratios.push(broadcastCpu / batchCpu);
    shares.push(consumer / batchCpu);
    log(`round ${round + 1}: broadcast / batch-sent ${ratios.at(-1)!.toFixed(2)}; the consumer alone / batch-sent ${shares.at(-1)!.toFixed(2)}`);
  }
  // Every email recorded once and settled once, with its events: the floor did the work.
  const count = (sql: string) => tryGet<{ n: number }>(db, sql)?.n ?? -1;
  // (Not the one email startFloor's check of POST /write records.)
  const ours = `SELECT id FROM emails WHERE to_json LIKE '["reader%' OR to_json LIKE '["b%'`;
  const emails = count(`SELECT COUNT(*) AS n FROM (${ours})`);
  const events = ["queued", "sent", "delivered"].map((type) => count(`SELECT COUNT(*) AS n FROM email_events WHERE type = '${type}' AND email_id IN (${ours})`));
  if (emails !== ROUNDS * 3 * N || events.some((n) => n !== emails)) throw new Error(`expected ${ROUNDS * 3 * N} emails, each with one queued, sent and delivered event; found ${emails} emails and ${events.join(", ")} events`);
  db.close();
  console.log(JSON.stringify({ contacts: N, body: body.html.length, ratios: ratios.map((r) => Number(r.toFixed(3))), consumerShares: shares.map((r) => Number(r.toFixed(3))) }));
} finally {
  await stopFloor(log);
}
