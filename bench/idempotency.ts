// What the Idempotency-Key's Durable Object (durable-objects/idempotency-front.ts) costs and
// saves, on two terns started the way `npm start` starts tern, side by side: one with the
// object in front of the key's D1 row (the default), one with IDEMPOTENCY_FRONT=false (the row
// alone). Rounds are interleaved in ABBA order so that drift in the machine's load favours
// neither side.
//   fresh key  closed loop at 2 connections: POST /emails with a new key on every request vs
//              without a key, on each tern (target: fresh key p50 <= 1.25x the keyless p50 with
//              the object);
//   storm      200 concurrent identical requests with one key (a retry storm), over 200 open
//              keep-alive connections: the time until the last answer, and how they answered.
// Run alone: `node bench/idempotency.ts` (or BENCH_ONLY=idempotency npm run bench);
// BENCH_QUICK=1 is a smoke run that leaves docs/benchmarks.md alone.
import { randomUUID } from "node:crypto";
import { rmSync } from "node:fs";
import { Agent, request } from "node:http";
import { cpus, loadavg } from "node:os";
import { join, resolve } from "node:path";
import { startTern, type TernProcess } from "../test/support/processes.ts";
import { measuredLoad } from "./cpu.ts";
import { median, quantile, runLoad, type LoadResult } from "./load.ts";
import { writeDoc } from "./report.ts";

const root = resolve(import.meta.dirname, "..");
const DOC = join(root, "docs", "benchmarks.md");
const BEGIN = "<!-- bench:idempotency:begin (written by bench/idempotency.ts; edit outside these markers) -->";
const END = "<!-- bench:idempotency:end -->";
export const FRESH_KEY_TARGET = 1.25;
const STORM = 200;

type Side = "object" | "row";
type LoadVariant = "send" | "send+key";

export interface StormRound {
  ms: number;
  fresh: number;
  replayed: number;
  busy: number;
  other: Record<string, number>;
  p50: number;
  p99: number;
}

/** A load run and the Worker runtime's CPU milliseconds per request in its window (null off Linux). */
type Measured = LoadResult & { cpuMs: number | null };

export interface IdempotencyResults {
  load: Record<Side, Record<LoadVariant, Measured[]>>;
  storm: Record<Side, StormRound[]>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function body(tag: string): string {
  return JSON.stringify({ from: "Bench <bench@tern.test>", to: "delivered@simulator.tern.test", subject: `idempotency bench ${tag}`, text: "hello" });
}

/** One POST on the agent; never rejects (status 0 for a transport error). */
function post(agent: Agent, t: TernProcess, payload: string, key: string): Promise<{ status: number; replayed: boolean; name?: string; ms: number }> {
  const url = new URL(`${t.url}/emails`);
  const t0 = performance.now();
  return new Promise((done) => {
    const req = request({ agent, host: url.hostname, port: url.port, path: url.pathname, method: "POST", headers: { authorization: `Bearer ${t.apiKey}`, "content-type": "application/json", "idempotency-key": key, "content-length": Buffer.byteLength(payload) }, timeout: 60_000 }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (text += c));
      res.on("end", () => {
        let name: string | undefined;
        if (res.statusCode !== 200) {
          try {
            name = (JSON.parse(text) as { name?: string }).name;
          } catch {}
        }
        done({ status: res.statusCode ?? 0, replayed: res.headers["idempotent-replayed"] === "true", name, ms: performance.now() - t0 });
      });
    });
    req.on("error", () => done({ status: 0, replayed: false, ms: performance.now() - t0 }));
    req.on("timeout", () => req.destroy());
    req.end(payload);
  });
}

/** Opens `n` keep-alive connections (a burst of GET /health), so a storm does not time connects. */
async function openConnections(agent: Agent, t: TernProcess, n: number): Promise<void> {
  const url = new URL(`${t.url}/health`);
  await Promise.all(Array.from({ length: n }, () => new Promise<void>((done) => {
    const req = request({ agent, host: url.hostname, port: url.port, path: url.pathname }, (res) => {
      res.resume();
      res.on("end", () => done());
    });
    req.on("error", () => done());
    req.end();
  })));
}

async function storm(agent: Agent, t: TernProcess): Promise<StormRound> {
  await openConnections(agent, t, STORM);
  const key = `storm-${randomUUID()}`;
  const payload = body(key);
  const t0 = performance.now();
  const answers = await Promise.all(Array.from({ length: STORM }, () => post(agent, t, payload, key)));
  const ms = performance.now() - t0;
  const other: Record<string, number> = {};
  for (const a of answers) if (a.status !== 200 && a.name !== "concurrent_idempotent_requests") other[`${a.status} ${a.name ?? ""}`.trim()] = (other[`${a.status} ${a.name ?? ""}`.trim()] ?? 0) + 1;
  const lat = answers.map((a) => a.ms).sort((a, b) => a - b);
  return {
    ms,
    fresh: answers.filter((a) => a.status === 200 && !a.replayed).length,
    replayed: answers.filter((a) => a.status === 200 && a.replayed).length,
    busy: answers.filter((a) => a.name === "concurrent_idempotent_requests").length,
    other,
    p50: quantile(lat, 0.5),
    p99: quantile(lat, 0.99),
  };
}

/** Waits until the last email of a run has left `queued`, so its delivery does not load the next run. */
async function drain(t: TernProcess, id: string | null): Promise<void> {
  if (!id) return;
  for (let i = 0; i < 600; i++) {
    const res = await fetch(`${t.url}/emails/${id}`, { headers: { authorization: `Bearer ${t.apiKey}` } });
    const e = (await res.json()) as { last_event?: string };
    if (e.last_event && e.last_event !== "queued") return;
    await sleep(100);
  }
}

export async function runIdempotencyBench(opts: { quick: boolean; log: (line: string) => void }): Promise<IdempotencyResults> {
  const rounds = opts.quick ? 1 : 3;
  const stormRounds = opts.quick ? 2 : 6;
  const window = opts.quick ? { warmupMs: 500, durationMs: 1500 } : { warmupMs: 1500, durationMs: 4000 };
  const env = { X_LOCAL_OBSERVABILITY: "false", WRANGLER_SEND_METRICS: "false", TERN_CRON_INTERVAL_MS: "15000", TERN_DEV_RATE_LIMIT: "1000000", TERN_DEV_PLAN: "scale_2_5m" };
  opts.log("starting two terns: with the per-key object, and with IDEMPOTENCY_FRONT=false");
  const terns: Record<Side, TernProcess> = {
    object: await startTern({ env }),
    row: await startTern({ env: { ...env, TERN_IDEMPOTENCY_FRONT: "false" } }),
  };
  const agent = new Agent({ keepAlive: true, maxSockets: STORM + 8 });
  try {
    const out: IdempotencyResults = { load: { object: { send: [], "send+key": [] }, row: { send: [], "send+key": [] } }, storm: { object: [], row: [] } };
    const run = randomUUID().slice(0, 8);
    let keys = 0;
    const optionsOf = (side: Side, v: LoadVariant) => {
      const t = terns[side];
      return {
        url: `${t.url}/emails`,
        method: "POST" as const,
        headers: { authorization: `Bearer ${t.apiKey}`, "content-type": "application/json" },
        headersFor: v === "send+key" ? () => ({ "idempotency-key": `bench-${run}-${++keys}` }) : undefined,
        body: body(v),
        connections: 2,
      };
    };
    const warm = (side: Side, v: LoadVariant) => runLoad({ ...optionsOf(side, v), warmupMs: 0, durationMs: opts.quick ? 500 : 1500 });
    const measure = async (side: Side, v: LoadVariant, onBody: (b: string) => void): Promise<Measured> => {
      const t = terns[side];
      const { result, cpu } = await measuredLoad(t.child.pid, Number(new URL(t.url).port), { ...optionsOf(side, v), ...window, onBody });
      return { ...result, cpuMs: cpu && result.requests > 0 ? (cpu["worker runtime"] * 1000) / result.requests : null };
    };
    // Each side answers the way it means to: a repeat replays, and the row-only tern has no object.
    for (const side of ["object", "row"] as Side[]) {
      const key = `probe-${randomUUID()}`;
      const a = await post(agent, terns[side], body("probe"), key);
      const b = await post(agent, terns[side], body("probe"), key);
      if (a.status !== 200 || b.status !== 200 || !b.replayed) throw new Error(`${side}: a repeated key did not replay (${a.status}, ${b.status}, replayed ${b.replayed})`);
    }
    opts.log("warming up (not recorded)");
    for (const side of ["object", "row"] as Side[]) for (const v of ["send", "send+key"] as LoadVariant[]) await warm(side, v);
    await storm(agent, terns.object);
    await storm(agent, terns.row);

    for (let round = 1; round <= rounds; round++) {
      const order: [Side, LoadVariant][] = [["object", "send"], ["object", "send+key"], ["row", "send"], ["row", "send+key"]];
      if (round % 2 === 0) order.reverse();
      for (const [side, v] of order) {
        let last: string | null = null;
        const r = await measure(side, v, (b) => (last = (JSON.parse(b) as { id: string }).id));
        out.load[side][v].push(r);
        opts.log(`round ${round}/${rounds}, ${side.padEnd(6)} ${v.padEnd(8)}: p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms, ${r.rps.toFixed(0)} req/s, ${r.errors} errors, worker CPU ${r.cpuMs?.toFixed(2) ?? "?"} ms/request`);
        if (r.errors > 0) throw new Error(`${side} ${v}: ${r.errors} errors ${JSON.stringify(r.statuses)}`);
        await drain(terns[side], last);
      }
    }
    for (let round = 1; round <= stormRounds; round++) {
      for (const side of (round % 2 ? ["object", "row"] : ["row", "object"]) as Side[]) {
        const s = await storm(agent, terns[side]);
        out.storm[side].push(s);
        opts.log(`storm ${round}/${stormRounds}, ${side.padEnd(6)}: ${s.ms.toFixed(0)} ms to the last answer; ${s.fresh} sent, ${s.replayed} replayed, ${s.busy} busy (409)${Object.keys(s.other).length ? `, other ${JSON.stringify(s.other)}` : ""}`);
        await sleep(500);
      }
    }
    return out;
  } finally {
    agent.destroy();
    for (const t of Object.values(terns)) {
      await t.stop();
      rmSync(t.stateDir, { recursive: true, force: true });
    }
  }
}

const f1 = (x: number) => x.toFixed(1);
const f2 = (x: number) => x.toFixed(2);
const range = (xs: number[], f = f2) => `${f(Math.min(...xs))}-${f(Math.max(...xs))}`;

export function summarize(r: IdempotencyResults) {
  const p50 = (side: Side, v: LoadVariant) => median(r.load[side][v].map((x) => x.p50));
  const ratios = (side: Side) => r.load[side]["send+key"].map((k, i) => k.p50 / r.load[side].send[i]!.p50);
  const stormMs = (side: Side) => median(r.storm[side].map((s) => s.ms));
  const cpu = (side: Side, v: LoadVariant) => median(r.load[side][v].map((x) => x.cpuMs ?? NaN));
  return {
    cpu,
    keyRatio: { object: median(ratios("object")), row: median(ratios("row")) },
    keyRatioRange: { object: ratios("object"), row: ratios("row") },
    p50,
    stormMs,
    stormRatio: stormMs("object") / stormMs("row"),
  };
}

export function renderIdempotency(r: IdempotencyResults, facts: string): string {
  const s = summarize(r);
  const lines = [
    `${facts}. Command: \`BENCH_ONLY=idempotency npm run bench\` (or \`node bench/idempotency.ts\`).`,
    "",
    "Two terns as `npm start` runs them (wrangler dev, local D1, Durable Objects and Queues), side by side:",
    "`object` with the per-key Durable Object in front of the key's D1 row (the default), `row` with",
    "`IDEMPOTENCY_FRONT=false` (the D1 row alone). Interleaved rounds in ABBA order.",
    "",
    `**A fresh key** (closed loop, 2 connections, a new \`Idempotency-Key\` on every request vs none; median of ${r.load.object.send.length} rounds):`,
    "",
    "| tern | send p50 | send+key p50 | send+key/send p50 (rounds' range) | target | Worker CPU per request: send, send+key |",
    "|---|---|---|---|---|---|",
    ...(["object", "row"] as Side[]).map((side) =>
      `| ${side} | ${f2(s.p50(side, "send"))} ms | ${f2(s.p50(side, "send+key"))} ms | ${f2(s.keyRatio[side])} (${range(s.keyRatioRange[side])}) | ${side === "object" ? `<= ${FRESH_KEY_TARGET}: ${s.keyRatio.object <= FRESH_KEY_TARGET ? "met" : "MISSED"}` : "-"} | ${f2(s.cpu(side, "send"))}, ${f2(s.cpu(side, "send+key"))} ms |`),
    "",
    `**A retry storm**: ${STORM} identical requests with one key at once, over ${STORM} open keep-alive connections, ${r.storm.object.length} rounds each:`,
    "",
    "| tern | to the last answer (median, range) | per-request p50 / p99 (median) | sent / replayed / 409 busy |",
    "|---|---|---|---|",
    ...(["object", "row"] as Side[]).map((side) => {
      const st = r.storm[side];
      const sum = (k: "fresh" | "replayed" | "busy") => st.reduce((n, x) => n + x[k], 0);
      return `| ${side} | ${f1(s.stormMs(side))} ms (${range(st.map((x) => x.ms), f1)}) | ${f1(median(st.map((x) => x.p50)))} / ${f1(median(st.map((x) => x.p99)))} ms | ${sum("fresh")} / ${sum("replayed")} / ${sum("busy")} |`;
    }),
    "",
    `With the object the storm finishes in **${f2(s.stormRatio)}x** the time of the row alone. What D1 sees is counted in`,
    "test/worker/idempotency-front.test.ts: with the object, 200 concurrent repeats make one D1 batch and no other",
    "D1 call; without it, every repeat makes its own failing batch and then reads the winner's answer.",
  ];
  return lines.join("\n");
}

export function writeIdempotencyDoc(block: string): void {
  writeDoc(DOC, block, { begin: BEGIN, end: END });
}

if (import.meta.main) {
  const quick = process.env.BENCH_QUICK === "1";
  const started = performance.now();
  const log = (line: string) => console.log(`[idempotency ${((performance.now() - started) / 1000).toFixed(0).padStart(3)}s] ${line}`);
  const results = await runIdempotencyBench({ quick, log });
  const block = renderIdempotency(results, `Measured ${new Date().toISOString().slice(0, 10)} on ${cpus().length} cores (${cpus()[0]?.model ?? "unknown CPU"}), load ${loadavg().map((x) => x.toFixed(2)).join(" ")} after`);
  console.log(block);
  if (!quick) writeIdempotencyDoc(block);
}
