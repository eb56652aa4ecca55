// `npm run bench`: tern's benchmarks in one run, started the way `npm start` starts tern.
//   1. POST /emails vs GET /health, closed loop at 2 and 32 connections, interleaved rounds,
//      with the floor beside it: a minimal Worker whose POST /write is the send's D1 batch alone
//      (bench/floor.ts, bench/floor/);
//   2. K emails end to end into the dev relay vs the same K sent straight to it by nodemailer;
//   3. D1 round trips and queue sends per accepted email, from test/worker/round-trips.test.ts;
//   4. (run after 1) POST /emails with a fresh Idempotency-Key vs without, and the rate limiter's
//      cost on a bare authenticated route (bench/exactly-once.ts);
//      BENCH_ONLY=core runs parts 1-4 alone;
//   5. the SMTP bridge: messages/s at 100 sessions vs the API and vs Postfix, its memory
//      (bench/bridge.ts). BENCH_ONLY=bridge runs this part alone;
//   6. DKIM signing in workerd: messages signed per second, 5 KB and 1 MB, RSA and Ed25519, next
//      to unsigned (bench/dkim.ts), once tern has stopped. BENCH_ONLY=dkim runs it alone;
//   7. webhooks: events per second from delivered emails to a verified webhook at a loopback
//      receiver, and outcome-to-receipt latency (bench/webhooks.ts, its own tern). BENCH_ONLY=webhooks.
//   8. idempotency: a fresh key vs none, and 200 concurrent repeats of one key, with and without
//      the per-key Durable Object (bench/idempotency.ts, two terns of its own). BENCH_ONLY=idempotency.
//   9. metrics: the rollup's cost per recorded event, GET /emails/metrics over 1,000,000 events
//      next to a primary-key read, insights per 100 KB email (bench/metrics.ts). BENCH_ONLY=metrics.
//  10. broadcasts: a broadcast to 100,000 contacts next to the same emails by /emails/batch
//      (bench/broadcasts.ts, its own tern; about 15 minutes). BENCH_ONLY=broadcasts runs it;
//      the full run leaves it out for its length.
//  11. dashboard: the Emails page's list over 1,000,000 emails next to a primary-key read, and a
//      password sign-in's CPU (bench/dashboard.ts). BENCH_ONLY=dashboard.
//  12. memory of one large message: workerd's RSS while a message near the 40 MB bound is
//      accepted and while it is delivered, each in a fresh workerd (bench/message-memory.ts,
//      its own terns; Linux). BENCH_ONLY=memory runs it alone.
// Prints the results and writes them into docs/benchmarks.md. Stops everything it started,
// also on failure, Ctrl-C or its own time limit. BENCH_QUICK=1 is a short smoke run that
// does not touch the doc.
import { execFileSync, type ChildProcess } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join, resolve } from "node:path";
import { startTern, type TernProcess } from "../test/support/processes.ts";
import { BRIDGE_BEGIN, BRIDGE_END, BRIDGE_OVERHEAD_TARGET, JUDGED_PLACEMENT, bridgeSummary, renderBridge, runBridgeBench, stopBridgeBench, type BridgeSettings } from "./bridge.ts";
import { cpuDelta, measuredLoad, sampleCpu, type CpuSample } from "./cpu.ts";
import { checkFloorStatements, floorDeliveryCpu, startFloor, stopFloor, type FloorProcess } from "./floor.ts";
import { renderDkim, runDkimBench, writeDkimDoc } from "./dkim.ts";
import { renderWebhooks, runWebhookBench, writeWebhooksDoc } from "./webhooks.ts";
import { renderMetrics, runMetricsBench, writeMetricsDoc } from "./metrics.ts";
import { renderBroadcasts, runBroadcastBench, writeBroadcastsDoc } from "./broadcasts.ts";
import { renderDashboard, runDashboardBench, writeDashboardDoc } from "./dashboard.ts";
import { renderMessageMemory, runMessageMemoryBench, writeMessageMemoryDoc } from "./message-memory.ts";
import { phaseFour } from "./exactly-once.ts";
import { renderIdempotency, runIdempotencyBench, writeIdempotencyDoc } from "./idempotency.ts";
import { clearRelay, directToRelay, htmlOfSize, throughTern, type DeliveryResult, type Target } from "./delivery.ts";
import { runLoad, type LoadOptions, type LoadResult } from "./load.ts";
import { FLOOR_VARIANTS, KEY_P50_TARGET, VARIANTS, renderResults, summarize, summarizeOnce, writeDoc, type Facts, type Results, type Settings, type Variant } from "./report.ts";
import { measureRoundTrips, type RoundTrips } from "./round-trips.ts";
import { runWrk, wrkAvailable, type WrkResult } from "./wrk.ts";

const root = resolve(import.meta.dirname, "..");
const DOC = join(root, "docs", "benchmarks.md");
const QUICK = process.env.BENCH_QUICK === "1";
const ONLY = process.env.BENCH_ONLY ?? "";
if (!["", "core", "bridge", "dkim", "webhooks", "idempotency", "metrics", "broadcasts", "dashboard", "memory"].includes(ONLY)) throw new Error(`BENCH_ONLY may only be "core", "bridge", "dkim", "webhooks", "idempotency", "metrics", "broadcasts", "dashboard" or "memory", not ${JSON.stringify(ONLY)}`);
/** Parts 1-4 (BENCH_ONLY=core runs only these). */
const CORE = ONLY === "" || ONLY === "core";
const TIME_LIMIT_MS = (CORE ? 720_000 : ONLY === "broadcasts" ? 2_400_000 : 60_000) + 900_000;
const DRAIN_LIMIT_MS = 60_000;
const MAX_ERROR_SHARE = 0.001;

const bridgeSettings: BridgeSettings = QUICK
  ? { sessions: 100, rounds: 1, small: { warmupMs: 1000, durationMs: 3000 }, large: { warmupMs: 4000, durationMs: 4000 }, bigMessage: false }
  : { sessions: 100, rounds: 4, small: { warmupMs: 2000, durationMs: 6000 }, large: { warmupMs: 8000, durationMs: 12000 }, bigMessage: true };

const settings: Settings = QUICK
  ? { rounds: 1, connections: [2, 32], warmupMs: 500, durationMs: 1500, deliveryCount: 100, deliveryConcurrency: 16, deliveryRounds: 1, htmlBytes: 5 * 1024 }
  : { rounds: 3, connections: [2, 32], warmupMs: 1500, durationMs: 4000, deliveryCount: 500, deliveryConcurrency: 16, deliveryRounds: 2, htmlBytes: 5 * 1024 };

const started = performance.now();
const log = (line: string) => console.log(`[bench ${((performance.now() - started) / 1000).toFixed(0).padStart(3)}s] ${line}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------
// Everything started here, so that every exit path can stop it.

let tern: TernProcess | null = null;
// vitest (ChildProcess), wrk (pid), ops/admin.ts (-pid: its process group, wrangler d1 under it)
const helpers = new Set<ChildProcess | number>();
let cleaning: Promise<void> | null = null;

function exitOf(child: ChildProcess): Promise<number | null> {
  return new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(child.exitCode) : child.once("exit", (code) => r(code))));
}

function cleanup(): Promise<void> {
  return (cleaning ??= (async () => {
    await stopBridgeBench();
    await stopFloor(log);
    for (const h of helpers) {
      try {
        if (typeof h === "number") process.kill(h, "SIGTERM");
        else h.kill("SIGTERM");
      } catch {}
    }
    helpers.clear();
    const t = tern;
    if (!t) return;
    log("stopping tern...");
    // A Ctrl-C in the terminal reaches dev/start.ts too (same process group), and a second
    // SIGINT makes it exit at once (its exit hook then SIGKILLs wrangler instead of stopping
    // it): signal it only if it is not already on its way out.
    await sleep(300);
    const stopping = t.child.exitCode !== null || t.child.signalCode !== null || t.output().includes("\nstopping...");
    const slow = setTimeout(() => log("tern is slow to stop (waiting for wrangler dev and the relay)..."), 15_000);
    const code = stopping ? await exitOf(t.child) : await t.stop("SIGINT");
    clearTimeout(slow);
    // wrangler dev runs in its own process group: make sure it is gone, not just its parent.
    const stillUp = await fetch(`${t.url}/health`, { signal: AbortSignal.timeout(1_000) }).then(
      () => true,
      () => false,
    );
    if (stillUp) log(`WARNING: ${t.url} still answers after tern exited (${code}); wrangler dev may be left running`);
    else log(`tern stopped (exit ${code})`);
    rmSync(t.stateDir, { recursive: true, force: true });
    tern = null;
  })());
}

let interrupted = false;
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.on(sig, () => {
    if (interrupted) return;
    interrupted = true;
    log(`${sig}: stopping`);
    void cleanup().finally(() => process.exit(130));
  });
}
const watchdog = setTimeout(() => {
  log(`the bench exceeded ${TIME_LIMIT_MS / 1000} s: stopping`);
  void cleanup().finally(() => process.exit(1));
}, TIME_LIMIT_MS);

// ---------------------------------------------------------------------------------------

function sh(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trimEnd();
  } catch {
    return "n/a";
  }
}

function facts(): Facts {
  const dirty = sh("git", ["status", "--porcelain"]) ? "+uncommitted changes" : "";
  return {
    date: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
    nproc: sh("nproc", []),
    free: sh("free", ["-m"]),
    cpu: `${cpus()[0]?.model ?? "unknown CPU"}`,
    loadBefore: loadavg().map((x) => x.toFixed(2)).join(" "),
    loadAfter: "",
    node: process.version,
    wrangler: (JSON.parse(readFileSync(join(root, "node_modules", "wrangler", "package.json"), "utf8")) as { version: string }).version,
    commit: `${sh("git", ["rev-parse", "--short", "HEAD"])}${dirty ? ` ${dirty}` : ""}`,
  };
}

function describe(r: LoadResult): string {
  return `${r.rps.toFixed(0)} req/s, p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms${r.errors ? `, ${r.errors} unexpected ${JSON.stringify(r.statuses)}` : ""}`;
}

async function api(t: TernProcess, path: string, init: RequestInit = {}): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${t.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${t.apiKey}`, "content-type": "application/json", ...(init.headers ?? {}) },
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, json: (await res.json().catch(() => ({}))) as Record<string, unknown> };
}

/** Waits until the consumer has handled the last email of a send run (the queue is FIFO in wrangler dev). */
async function drain(t: TernProcess, id: string | null): Promise<number> {
  if (!id) return 0;
  const from = performance.now();
  for (;;) {
    const { status, json } = await api(t, `/emails/${id}`);
    if (status !== 200) throw new Error(`GET /emails/${id} answered ${status}`);
    if (json.last_event !== "queued" && json.last_event !== "sending") return (performance.now() - from) / 1000;
    if (performance.now() - from > DRAIN_LIMIT_MS) throw new Error(`the send queue did not drain within ${DRAIN_LIMIT_MS / 1000} s (email ${id} is ${String(json.last_event)})`);
    await sleep(100);
  }
}

async function phaseOne(t: TernProcess, floor: FloorProcess): Promise<Pick<Results, "runs" | "drains" | "cpu">> {
  const auth = { authorization: `Bearer ${t.apiKey}`, "content-type": "application/json" };
  const send = { from: "Bench <bench@tern.test>", to: "delivered@simulator.tern.test", subject: "bench", text: "hello" };
  const variants: Record<Variant, Omit<LoadOptions, "connections" | "warmupMs" | "durationMs">> = {
    bare: { url: `${t.url}/health` },
    send: { url: `${t.url}/emails`, method: "POST", headers: auth, body: JSON.stringify(send) },
    // Diagnostic: the same request without the queue send and the consumer's work behind it.
    scheduled: { url: `${t.url}/emails`, method: "POST", headers: auth, body: JSON.stringify({ ...send, scheduled_at: new Date(Date.now() + 86_400_000).toISOString() }) },
    // The floor: the same bare route, and the send's D1 batch alone (the same body on the wire,
    // which the floor does not read), and one D1 read by primary key.
    "floor-bare": { url: `${floor.url}/health` },
    "floor-write": { url: `${floor.url}/write`, method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(send) },
    "floor-read": { url: `${floor.url}/read` },
  };
  const ternPort = Number(new URL(t.url).port);
  /** Whose processes a variant's CPU is sampled from: tern's tree, or the floor's. */
  const tree = (v: Variant) => (FLOOR_VARIANTS.includes(v) ? { pid: floor.pid, port: floor.port } : { pid: t.child.pid, port: ternPort });
  const runs: Results["runs"] = {};
  const drains: Results["drains"] = {};
  const cpu: Results["cpu"] = {};
  const empty = <T,>() => Object.fromEntries(VARIANTS.map((v) => [v, [] as T[]])) as Record<Variant, T[]>;
  for (const c of settings.connections) {
    runs[c] = empty<LoadResult>();
    cpu[c] = empty<CpuSample>();
    drains[c] = [];
  }

  log("phase 1: warming up the Worker (not recorded)");
  let lastId: string | null = null;
  const keepId = (body: string) => {
    lastId = (JSON.parse(body) as { id: string }).id;
  };
  await runLoad({ ...variants.bare, connections: 32, warmupMs: 0, durationMs: QUICK ? 500 : 2000 });
  await runLoad({ ...variants.send, connections: 32, warmupMs: 0, durationMs: QUICK ? 500 : 2000, onBody: keepId });
  await drain(t, lastId);
  await runLoad({ ...variants["floor-bare"], connections: 32, warmupMs: 0, durationMs: QUICK ? 500 : 2000 });
  await runLoad({ ...variants["floor-write"], connections: 32, warmupMs: 0, durationMs: QUICK ? 500 : 2000 });
  await runLoad({ ...variants["floor-read"], connections: 32, warmupMs: 0, durationMs: QUICK ? 500 : 1000 });

  for (let round = 1; round <= settings.rounds; round++) {
    for (const c of settings.connections) {
      for (const v of VARIANTS) {
        lastId = null;
        const { pid, port } = tree(v);
        const { result: r, cpu: used } = await measuredLoad(pid, port, { ...variants[v], connections: c, warmupMs: settings.warmupMs, durationMs: settings.durationMs, onBody: v === "send" ? keepId : undefined });
        runs[c]![v].push(r);
        cpu[c]![v].push(used);
        log(`phase 1 round ${round}/${settings.rounds}, ${String(c).padStart(2)} connections, ${v.padEnd(11)}: ${describe(r)}`);
        if (r.requests === 0) throw new Error(`${v} at ${c} connections completed no request`);
        if (r.errors / r.requests > MAX_ERROR_SHARE) throw new Error(`${v} at ${c} connections: ${r.errors} of ${r.requests} answers were not 2xx: ${JSON.stringify(r.statuses)}`);
        if (v === "send") {
          const s = await drain(t, lastId);
          drains[c]!.push(s);
          log(`  queue drained ${s.toFixed(1)} s after the send run`);
        }
      }
    }
  }
  return { runs, drains, cpu };
}

async function crossCheck(t: TernProcess): Promise<WrkResult[] | null> {
  if (!wrkAvailable()) {
    log("wrk is not installed: skipping the cross-check (apt-get install -y wrk)");
    return null;
  }
  const out: WrkResult[] = [];
  for (const c of settings.connections) {
    const w = await runWrk(`${t.url}/health`, c, QUICK ? 2 : 4, (pid, done) => {
      if (pid === undefined) return;
      if (done) helpers.delete(pid);
      else helpers.add(pid);
    });
    log(`wrk, ${String(c).padStart(2)} connections, GET /health: ${w.rps.toFixed(0)} req/s, p50 ${w.p50.toFixed(1)} ms, p99 ${w.p99.toFixed(1)} ms`);
    out.push(w);
  }
  return out;
}

async function phaseTwo(t: TernProcess, floorProcess: FloorProcess): Promise<Pick<Results, "tern" | "direct" | "floor" | "deliveryCpu">> {
  const target: Target = { url: t.url, apiKey: t.apiKey, relayHttp: t.relayHttp, relaySmtpPort: t.relaySmtpPort, mailDir: join(t.stateDir, "tern", "mailbox") };
  const o = { count: settings.deliveryCount, concurrency: settings.deliveryConcurrency, html: htmlOfSize(settings.htmlBytes), timeoutMs: 90_000 };
  const port = Number(new URL(t.url).port);
  const tern: DeliveryResult[] = [];
  const direct: DeliveryResult[] = [];
  const floor: DeliveryResult[] = [];
  const deliveryCpu: Results["deliveryCpu"] = { tern: [], direct: [], floor: [] };
  const measured = async (into: CpuSample[], work: () => Promise<DeliveryResult>) => {
    const before = sampleCpu(t.child.pid, port);
    const result = await work();
    into.push(cpuDelta(before, sampleCpu(t.child.pid, port)));
    return result;
  };
  const floorCpu = () => floorDeliveryCpu(floorProcess, { pid: t.child.pid, port });
  for (let round = 1; round <= settings.deliveryRounds; round++) {
    await clearRelay(t.relayHttp, target.mailDir);
    const a = await measured(deliveryCpu.tern, () => throughTern(target, o, () => t.output()));
    tern.push(a);
    log(`phase 2 round ${round}/${settings.deliveryRounds}, tern end to end: ${a.messages} in ${a.seconds.toFixed(2)} s = ${a.rate.toFixed(0)}/s (all accepted after ${a.acceptSeconds!.toFixed(2)} s)`);
    await clearRelay(t.relayHttp, target.mailDir);
    const b = await measured(deliveryCpu.direct, () => directToRelay(target, o));
    direct.push(b);
    log(`phase 2 round ${round}/${settings.deliveryRounds}, nodemailer direct: ${b.messages} in ${b.seconds.toFixed(2)} s = ${b.rate.toFixed(0)}/s`);
    await clearRelay(t.relayHttp, target.mailDir);
    const before = floorCpu();
    const c = await throughTern({ ...target, url: floorProcess.url, apiKey: "" }, o, () => floorProcess.output());
    deliveryCpu.floor.push(cpuDelta(before, floorCpu()));
    floor.push(c);
    log(`phase 2 round ${round}/${settings.deliveryRounds}, the floor end to end: ${c.messages} in ${c.seconds.toFixed(2)} s = ${c.rate.toFixed(0)}/s`);
  }
  await clearRelay(t.relayHttp, target.mailDir);
  return { tern, direct, floor, deliveryCpu };
}


async function main(): Promise<number> {
  const f = facts();
  log(`${QUICK ? "QUICK smoke run; " : ""}nproc ${f.nproc}, load ${f.loadBefore}, node ${f.node}, wrangler ${f.wrangler}`);
  if (ONLY === "dkim") {
    await dkimPart(f);
    return 0;
  }
  if (ONLY === "webhooks") {
    await webhooksPart(f);
    return 0;
  }
  if (ONLY === "idempotency") {
    await idempotencyPart(f);
    return 0;
  }
  if (ONLY === "metrics") {
    await metricsPart(f);
    return 0;
  }
  if (ONLY === "dashboard") {
    await dashboardPart(f);
    return 0;
  }
  if (ONLY === "memory") {
    await memoryPart(f);
    return 0;
  }
  if (ONLY === "broadcasts") {
    log("phase 10: a broadcast next to /emails/batch (bench/broadcasts.ts)");
    const block = renderBroadcasts(await runBroadcastBench({ quick: QUICK, log }), f.date, `${f.nproc} cores (${f.cpu}), commit ${f.commit}`);
    console.log(`\n${block}\n`);
    if (!QUICK) writeBroadcastsDoc(block);
    return 0;
  }

  let roundTrips: RoundTrips | null = null;
  if (CORE) {
    log("phase 3: running test/worker/round-trips.test.ts (before tern starts, so it does not compete)");
    roundTrips = await measureRoundTrips(root, (child) => {
      for (const h of helpers) if (typeof h !== "number") helpers.delete(h);
      if (child) helpers.add(child);
    });
    log(`  ${roundTrips.status}${roundTrips.asserted ? `: asserts ${JSON.stringify(roundTrips.asserted)}` : ""}`);
    if (roundTrips.status === "failed") console.log(roundTrips.output.split("\n").slice(-40).join("\n"));
  }

  log("starting tern as npm start does (dev/start.ts: migrations, dev relay, wrangler dev)...");
  tern = await startTern({ env: { X_LOCAL_OBSERVABILITY: "false", WRANGLER_SEND_METRICS: "false", TERN_CRON_INTERVAL_MS: "15000", TERN_DEV_RATE_LIMIT: "1000000", TERN_DEV_PLAN: "scale_2_5m" } });
  const t = tern;
  log(`tern is up at ${t.url} (relay smtp ${t.relaySmtpPort}, http ${t.relayHttp})`);

  const health = await fetch(`${t.url}/health`);
  if (!health.ok) throw new Error(`GET /health answered ${health.status}`);
  const probe = await api(t, "/emails", { method: "POST", body: JSON.stringify({ from: "Bench <bench@tern.test>", to: "delivered@simulator.tern.test", subject: "probe", text: "hello" }) });
  if (probe.status !== 200) throw new Error(`POST /emails answered ${probe.status}: ${JSON.stringify(probe.json)}`);

  if (CORE) await coreParts(t, f, roundTrips!);
  if (ONLY === "core") {
    await cleanup();
    return roundTrips?.status === "failed" ? 1 : 0;
  }
  log("phase 5: the SMTP bridge (its own process) vs the API and vs Postfix, and its memory");
  const bridge = await runBridgeBench(t, bridgeSettings, log);
  await cleanup();
  const bridgeBlock = renderBridge(bridge, { date: f.date, commit: f.commit, node: f.node, nproc: f.nproc, load: `${f.loadBefore} before, ${loadavg().map((x) => x.toFixed(2)).join(" ")} after` });
  console.log(`\n${bridgeBlock}\n`);
  for (const x of bridgeSummary(bridge)) {
    const target = x.placement === JUDGED_PLACEMENT ? ` (target >= ${(1 / (1 + BRIDGE_OVERHEAD_TARGET)).toFixed(2)})` : "";
    log(`bridge ${x.label}, ${x.placement}: bridge/API throughput sustained ${x.sustained.median.toFixed(2)}${target}, accepted in the window ${x.accepted.median.toFixed(2)}, CPU per message bridge path/API path ${x.cpuOverApi.toFixed(2)}${x.bridgeOverPostfix === null ? "" : `, bridge/Postfix ${x.bridgeOverPostfix.toFixed(2)}`}, peak RSS ${x.peakRssMb.toFixed(0)} MB`);
  }
  if (QUICK) log("quick run: docs/benchmarks.md left as it is");
  else {
    writeDoc(DOC, bridgeBlock, { begin: BRIDGE_BEGIN, end: BRIDGE_END });
    log(`wrote the SMTP bridge section of ${DOC}`);
  }
  if (CORE) {
    await dkimPart(f);
    await webhooksPart(f);
    await idempotencyPart(f);
    await metricsPart(f);
    await dashboardPart(f);
    await memoryPart(f);
  }
  if (roundTrips?.status === "failed") {
    log("FAILED: test/worker/round-trips.test.ts fails, so its figure is not what the code does");
    return 1;
  }
  return 0;
}

/** Part 8: idempotency keys with and without their Durable Object, on two terns of its own. */
async function idempotencyPart(f: Facts): Promise<void> {
  log("phase 8: idempotency keys with and without the per-key object (bench/idempotency.ts)");
  const results = await runIdempotencyBench({ quick: QUICK, log });
  const block = renderIdempotency(results, `Measured ${f.date} on ${f.nproc} cores (${f.cpu}), load ${loadavg().map((x) => x.toFixed(2)).join(" ")} after, commit ${f.commit}`);
  console.log(`\n${block}\n`);
  if (!QUICK) {
    writeIdempotencyDoc(block);
    log(`wrote the idempotency section of ${DOC}`);
  }
}

/** Part 7: webhooks, on a tern of their own (bench/webhooks.ts starts and stops it). */
async function webhooksPart(f: Facts): Promise<void> {
  log("phase 7: webhooks from delivered emails to a loopback receiver (bench/webhooks.ts)");
  const result = await runWebhookBench({ quick: QUICK, log });
  const block = renderWebhooks(result, f.date, `${f.nproc} cores (${f.cpu}), commit ${f.commit}`);
  console.log(`\n${block}\n`);
  if (!QUICK) {
    writeWebhooksDoc(block);
    log(`wrote the webhooks section of ${DOC}`);
  }
}

/** Part 9: metrics, in a workerd of their own (bench/metrics.ts starts and stops it). */
async function metricsPart(f: Facts): Promise<void> {
  log("phase 8: metrics rollups, GET /emails/metrics over 1,000,000 events, insights (bench/metrics.ts)");
  const result = await runMetricsBench({ quick: QUICK, log });
  const block = renderMetrics(result, f.date, `${f.nproc} cores (${f.cpu}), load ${loadavg().map((x) => x.toFixed(2)).join(" ")} after, commit ${f.commit}`);
  console.log(`\n${block}\n`);
  if (!QUICK) {
    writeMetricsDoc(block);
    log(`wrote the metrics section of ${DOC}`);
  }
}

/** Part 11: the dashboard, in a workerd of its own (bench/dashboard.ts starts and stops it). */
async function dashboardPart(f: Facts): Promise<void> {
  log("phase 11: the Emails page's list over 1,000,000 emails, a password sign-in's CPU (bench/dashboard.ts)");
  const result = await runDashboardBench({ quick: QUICK, log });
  const block = renderDashboard(result, f.date, `${f.nproc} cores (${f.cpu}), load ${loadavg().map((x) => x.toFixed(2)).join(" ")} after, commit ${f.commit}`);
  console.log(`\n${block}\n`);
  if (!QUICK) {
    writeDashboardDoc(block);
    log(`wrote the dashboard section of ${DOC}`);
  }
}

/** Part 12: the memory of one large message, accepted and delivered (its own terns). */
async function memoryPart(f: Facts): Promise<void> {
  log("phase 12: workerd memory of a message near the 40 MB bound, accepted and delivered (bench/message-memory.ts)");
  const rows = await runMessageMemoryBench(log);
  const block = renderMessageMemory(rows, f.date, `${f.nproc} cores (${f.cpu}), commit ${f.commit}`);
  console.log(`\n${block}\n`);
  if (!QUICK) {
    writeMessageMemoryDoc(block);
    log(`wrote the memory section of ${DOC}`);
  }
}

/** Part 6: DKIM signing in its own workerd, after tern has stopped. */
async function dkimPart(f: Facts): Promise<void> {
  log("phase 6: DKIM signing in workerd (bench/dkim.ts), 5 KB and 1 MB, signed vs unsigned");
  const results = await runDkimBench({ quick: QUICK, log });
  const block = renderDkim(results, f.date, `${f.nproc} cores (${f.cpu}), load ${loadavg().map((x) => x.toFixed(2)).join(" ")} after, commit ${f.commit}`);
  console.log(`\n${block}\n`);
  if (!QUICK) {
    writeDkimDoc(block);
    log(`wrote the DKIM section of ${DOC}`);
  }
}

/** Parts 1, 4 and 2 on the running tern, then their report. */
async function coreParts(t: TernProcess, f: Facts, roundTrips: RoundTrips): Promise<void> {
  const checked = await checkFloorStatements();
  log(`floor: its batch is the one tern's accept path sends for a plain send (${checked.send.length} statements: ${checked.send.map((s) => s.sql.split(" (")[0]).join("; ")}); its read is GET /emails/<id>'s`);
  log("starting the floor (bench/floor/: a minimal Worker with tern's schema) under wrangler dev, as tern is started...");
  // RELAY_PORT: part 2's delivery floor sends to tern's dev relay.
  const floor = await startFloor(log, { RELAY_PORT: String(t.relaySmtpPort) });
  log(`the floor is up at ${floor.url}`);
  const one = await phaseOne(t, floor);
  const wrk = await crossCheck(t);
  const once = await phaseFour({
    root, t, settings, quick: QUICK, maxErrorShare: MAX_ERROR_SHARE, log, describe, drain,
    track: (pid, done) => void (done ? helpers.delete(pid) : helpers.add(pid)),
  });
  log("phase 2: end-to-end delivery into the dev relay vs nodemailer straight to it");
  const two = await phaseTwo(t, floor);
  await stopFloor(log);

  f.loadAfter = loadavg().map((x) => x.toFixed(2)).join(" ");
  const results: Results = { facts: f, settings, ...one, wrk, ...two, roundTrips, once, seconds: (performance.now() - started) / 1000 };
  const block = renderResults(results);
  console.log(`\n${block}\n`);
  for (const s of summarize(results)) {
    log(`${s.connections} connections: send/bare throughput ${s.rpsRatio.toFixed(2)}, p50 ${s.p50Ratio.toFixed(2)} (target: >= 0.50 and <= 2.00)`);
    log(
      `${s.connections} connections: floor write/floor bare throughput ${s.floorWrite.rps.toFixed(2)}, p50 ${s.floorWrite.p50.toFixed(2)}; ` +
        `floor read/floor bare ${s.floorRead.rps.toFixed(2)}, p50 ${s.floorRead.p50.toFixed(2)}; floor bare/tern bare throughput ${s.floorBareOverBare.rps.toFixed(2)}`,
    );
  }
  for (const s of summarizeOnce(results)) {
    log(
      `${s.connections} connections: send+key/send p50 ${s.keyP50Ratio.toFixed(2)} (target <= ${KEY_P50_TARGET.toFixed(2)}): ${s.keyPass ? "PASS" : "MISS"}; ` +
        `throughput ${s.keyRpsRatio.toFixed(2)}. Rate limiter: auth - auth-unlimited p50 ${s.limiterP50Ms >= 0 ? "+" : ""}${s.limiterP50Ms.toFixed(2)} ms, throughput ${s.limiterRpsRatio.toFixed(2)}`,
    );
  }
  if (!QUICK) {
    writeDoc(DOC, block);
    log(`wrote ${DOC}`);
  }
}

let code = 1;
try {
  code = await main();
} catch (err) {
  log(`FAILED: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  const out = (tern as TernProcess | null)?.output();
  if (out) console.log(`--- last lines from tern ---\n${out.split("\n").slice(-30).join("\n")}`);
  code = 1;
} finally {
  await cleanup();
  clearTimeout(watchdog);
}
if (!interrupted) process.exit(code);
