// The metrics benchmark (issue 16), measured in workerd under `wrangler dev` with a small
// Worker that calls tern's own modules (bench/metrics/worker.ts):
//   1. rollups: the cost they add to recording an event, with and without the rollup statement
//      in the batch, interleaved rounds: an open through the pixel route's steps, a delivered
//      outcome through the consumer's settlement, and the stripped 3-statement batch of an open;
//      then the rollup statement's own cost four ways (none, values in its text, bound, quarter
//      hour only). Many short rounds of both variants back to back; the median of the rounds'
//      ratios and its interquartile range. Wall time per event from here, CPU per event of the
//      worker's workerd from schedstat (ns). Target: under 10% more CPU per event.
//   2. GET /emails/metrics for 30 daily periods (UTC, New York) and 720 hourly periods (UTC,
//      Kathmandu) over an account whose rollups hold 1,000,000 events, next to a primary-key
//      read (an email by id and account), p50 and p99 of sequential requests in interleaved
//      rounds. Target: at most 5x the read.
//   3. insights: the checks of a 100 KB html email, per email (n per request minus n = 0).
// Run alone: `node bench/metrics.ts` (BENCH_QUICK=1 for a smoke run), or BENCH_ONLY=metrics npm
// run bench. Writes its block of docs/benchmarks.md between its own markers.
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join, resolve } from "node:path";
import { startBenchWorker } from "./bench-worker.ts";
import { sampleCpu } from "./cpu.ts";
import { writeDoc } from "./report.ts";

const root = resolve(import.meta.dirname, "..");
const DOC = join(root, "docs", "benchmarks.md");
const CONFIG = join(root, "bench", "metrics", "wrangler.toml");
const BEGIN = "<!-- bench:metrics:begin (written by bench/metrics.ts; edit outside these markers) -->";
const END = "<!-- bench:metrics:end -->";

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))]!;

const RECORD_PATHS = ["stripped", "open", "delivered"] as const;
type RecordPath = (typeof RECORD_PATHS)[number];
/** The median and the interquartile range of per-round figures. */
type Spread = { median: number; q1: number; q3: number };
type RecordFigures = {
  rounds: number;
  events: number;
  plainMs: number;
  rollupMs: number;
  wallRatio: Spread;
  plainCpuMs: number | null;
  rollupCpuMs: number | null;
  /** Per round: CPU with / CPU without. */
  cpuRatio: Spread | null;
  /** Per round: ms CPU per event with minus without. */
  cpuExtra: Spread | null;
};

const ratios = (a: number[], b: number[]) => a.map((x, i) => x / b[i]!);
// Quartiles by linear interpolation between order statistics.
const at = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  const i = (s.length - 1) * q;
  const lo = Math.floor(i);
  return s[lo]! + (s[Math.min(lo + 1, s.length - 1)]! - s[lo]!) * (i - lo);
};
const spread = (xs: number[]): Spread => ({ median: at(xs, 0.5), q1: at(xs, 0.25), q3: at(xs, 0.75) });

async function post0(url: string): Promise<void> {
  const res = await fetch(url, { method: "POST" });
  if (!res.ok) throw new Error(`metrics bench: ${url} answered ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
}

type QueryCase = "pk" | "daily30utc" | "daily30ny" | "hourly720utc" | "hourly720ktm";

export interface MetricsBenchResult {
  seeded: { rows: number; events: number };
  record: Record<RecordPath, RecordFigures>;
  /** ms CPU per event of the stripped batch as plain D1 statements, by how the rollup is written. */
  statement: Record<"none" | "inline" | "bound" | "quarter", { cpuMs: number; extra: Spread; ratio: Spread } | null>;
  queries: Record<QueryCase, { p50: number; p99: number; cpuMs: number | null }>;
  insights: { perEmailMs: number; cpuPerEmailMs: number | null; htmlBytes: number; checks: number };
}

/** CPU seconds so far of the Worker's own workerd (not wrangler's dev proxy in front of it). */
function workerCpu(pid: number, port: number): number | null {
  return sampleCpu(pid, port)?.["worker runtime"] ?? null;
}

/** The pid of the Worker's own workerd under wrangler dev (`wranglerPid`'s tree): the workerd
 * that does not listen on the public port (that one is the dev proxy). */
export function workerRuntimePid(wranglerPid: number, publicPort: number): number | null {
  if (process.platform !== "linux") return null;
  const children = new Map<number, number[]>();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const s = readFileSync(`/proc/${d}/stat`, "utf8");
      const ppid = Number(s.slice(s.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(d)]);
    } catch {}
  }
  const queue = [wranglerPid];
  while (queue.length) {
    const pid = queue.shift()!;
    try {
      const comm = readFileSync(`/proc/${pid}/comm`, "utf8").trim();
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ");
      if (comm === "workerd" && !cmd.includes(`entry=127.0.0.1:${publicPort} `)) return pid;
    } catch {}
    queue.push(...(children.get(pid) ?? []));
  }
  return null;
}

/** Nanoseconds on CPU so far of all of a process's threads (schedstat: the scheduler's own
 * account, not /proc/<pid>/stat's 10 ms ticks, which a 100-event block of ~1 ms events would
 * see as 10 +/- 1 ticks). Null where schedstat is missing. */
export function workerCpuNs(pid: number | null): number | null {
  if (pid === null) return null;
  try {
    let ns = 0;
    for (const t of readdirSync(`/proc/${pid}/task`)) ns += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, "utf8").split(" ")[0]);
    return ns;
  } catch {
    return null;
  }
}

async function timed(url: string): Promise<number> {
  const t0 = performance.now();
  const res = await fetch(url);
  if (!res.ok) throw new Error(`metrics bench: ${url} answered ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
  return performance.now() - t0;
}

export async function runMetricsBench(opts: { quick: boolean; log: (line: string) => void }): Promise<MetricsBenchResult> {
  const worker = await startBenchWorker("metrics", root, CONFIG);
  const { url, port, child } = worker;
  try {
    const seeded = (await (await fetch(`${url}/setup`, { method: "POST" })).json()) as { rows: number; events: number };
    opts.log(`metrics: seeded ${seeded.rows} rollup rows holding ${seeded.events} events`);
    if (process.env.METRICS_TRACE === "1") {
      // What each variant runs: the statements one event prepares and the batches it sends.
      for (const path of RECORD_PATHS) {
        for (const r of [0, 1]) opts.log(`metrics: trace ${path} rollup=${r}:\n  ${((await (await fetch(`${url}/trace?path=${path}&rollup=${r}`)).json()) as string[]).join("\n  ")}`);
      }
      opts.log(`metrics: plans ${JSON.stringify(await (await fetch(`${url}/plan`)).json())}`);
    }
    // 1. Recording an event, with and without its rollup: the stripped batch, then the real
    // paths (the open pixel's steps, the consumer's delivered outcome). Many short rounds, each
    // both variants back to back in alternating order; the figure is the median of the rounds'
    // ratios (with and without, same round, so a drift of the machine's load cancels out), with
    // its interquartile range. CPU from schedstat (nanoseconds), not /proc's 10 ms ticks.
    const perBlock = opts.quick ? 20 : 100;
    const recordRounds = opts.quick ? 2 : Number(process.env.METRICS_ROUNDS ?? 40);
    const record: MetricsBenchResult["record"] = {} as MetricsBenchResult["record"];
    const runtime = workerRuntimePid(child.pid!, port);
    const wranglerPid = child.pid!;
    // The CPU of the Worker's workerd: schedstat where the kernel has it, else /proc's ticks.
    const cpuSeconds = () => {
      const ns = workerCpuNs(runtime);
      return ns === null ? workerCpu(wranglerPid, port) : ns / 1e9;
    };
    // METRICS_PATHS=open,stripped: only those paths (a development run, with METRICS_PARTS=record).
    const only = process.env.METRICS_PATHS?.split(",");
    for (const path of RECORD_PATHS.filter((p) => !only || only.includes(p))) {
      const route = path === "stripped" ? "record" : path === "open" ? "open" : "deliver";
      // Before each block, out of its CPU window: the emails it records on (a fresh email in
      // `sending` for each delivery; for opens, a pool that gets four opens an email).
      const prepare = (events: number) =>
        path === "delivered" ? post0(`${url}/sending?n=${events}`) : path === "open" ? post0(`${url}/pool?n=${events / 4}`) : Promise.resolve();
      const query = (events: number) => (path === "open" ? `&pool=${events / 4}` : "");
      for (const r of [0, 1, 0, 1] as const) {
        await prepare(20);
        await post0(`${url}/${route}?n=20&rollup=${r}${query(20)}`);
      }
      const wall: Record<string, number[]> = { plain: [], rollup: [] };
      const cpu: Record<string, number[]> = { plain: [], rollup: [] };
      for (let round = 1; round <= recordRounds; round++) {
        // The order alternates, so which variant goes first favours neither.
        for (const variant of round % 2 ? (["plain", "rollup"] as const) : (["rollup", "plain"] as const)) {
          await prepare(perBlock);
          const c0 = workerCpuNs(runtime);
          const t0 = performance.now();
          await post0(`${url}/${route}?n=${perBlock}&rollup=${variant === "rollup" ? 1 : 0}${query(perBlock)}`);
          wall[variant]!.push((performance.now() - t0) / perBlock);
          const c1 = workerCpuNs(runtime);
          if (c0 !== null && c1 !== null) cpu[variant]!.push((c1 - c0) / 1e6 / perBlock);
        }
        if (round % 6 === 0 || round === recordRounds) {
          const last = (xs: number[]) => xs.slice(-6);
          opts.log(`metrics: record ${path} round ${round}/${recordRounds}: CPU ratio of the last rounds ${ratios(last(cpu.rollup!), last(cpu.plain!)).map((x) => x.toFixed(3)).join(" ")}`);
        }
      }
      record[path] = {
        rounds: recordRounds,
        events: perBlock,
        plainMs: median(wall.plain!),
        rollupMs: median(wall.rollup!),
        wallRatio: spread(ratios(wall.rollup!, wall.plain!)),
        plainCpuMs: cpu.plain!.length ? median(cpu.plain!) : null,
        rollupCpuMs: cpu.rollup!.length ? median(cpu.rollup!) : null,
        cpuRatio: cpu.plain!.length ? spread(ratios(cpu.rollup!, cpu.plain!)) : null,
        cpuExtra: cpu.plain!.length ? spread(cpu.rollup!.map((x, i) => x - cpu.plain![i]!)) : null,
      };
    }
    if (process.env.METRICS_PARTS === "record") return { seeded, record } as MetricsBenchResult;
    const rounds = opts.quick ? 1 : 5;

    // 1b. The rollup statement's own cost, in the stripped batch as plain D1 statements: none,
    // values written into its text (as now), bound parameters, bound and the quarter hour only.
    const hows = ["none", "inline", "bound", "quarter"] as const;
    for (const how of hows) await post0(`${url}/record-how?n=20&how=${how}`);
    const howCpu: Record<string, number[]> = Object.fromEntries(hows.map((h) => [h, []]));
    const howRounds = opts.quick ? 2 : recordRounds;
    for (let round = 1; round <= howRounds; round++) {
      // The order rotates each round; each round's figures are compared with its own "none".
      for (const how of [...hows.slice(round % hows.length), ...hows.slice(0, round % hows.length)]) {
        const c0 = cpuSeconds();
        await post0(`${url}/record-how?n=${perBlock}&how=${how}`);
        const c1 = cpuSeconds();
        if (c0 !== null && c1 !== null) howCpu[how]!.push(((c1 - c0) * 1000) / perBlock);
      }
      if (round % 10 === 0 || round === howRounds) opts.log(`metrics: rollup statement round ${round}/${howRounds} ${hows.map((h) => `${h} ${howCpu[h]!.at(-1)?.toFixed(3) ?? "n/a"}`).join(", ")} ms CPU/event`);
    }
    const statement = Object.fromEntries(hows.map((h) => {
      const xs = howCpu[h]!;
      const none = howCpu.none!;
      return [h, xs.length && none.length ? { cpuMs: median(xs), extra: spread(xs.map((x, i) => x - none[i]!)), ratio: spread(ratios(xs, none)) } : null];
    })) as MetricsBenchResult["statement"];

    // 2. Metrics queries next to a primary-key read.
    const now = Date.now();
    const iso = (t: number) => new Date(t).toISOString();
    // Whole days and hours, as a dashboard asks: "the last 30 days", "the last 720 hours".
    const day = Math.floor(now / 86_400_000) * 86_400_000;
    const hour = Math.floor(now / 3_600_000) * 3_600_000;
    const urls: Record<QueryCase, string> = {
      pk: `${url}/pk`,
      daily30utc: `${url}/metrics?start_date=${iso(day - 29 * 86_400_000)}&end_date=${iso(day + 86_400_000)}&granularity=daily&dimensions=period`,
      daily30ny: `${url}/metrics?start_date=${iso(day - 29 * 86_400_000)}&end_date=${iso(day + 86_400_000)}&granularity=daily&dimensions=period&timezone=America/New_York`,
      hourly720utc: `${url}/metrics?start_date=${iso(hour - 719 * 3_600_000)}&end_date=${iso(hour + 3_600_000)}&granularity=hourly&dimensions=period`,
      hourly720ktm: `${url}/metrics?start_date=${iso(hour - 719 * 3_600_000)}&end_date=${iso(hour + 3_600_000)}&granularity=hourly&dimensions=period&timezone=Asia/Kathmandu`,
    };
    for (const u of Object.values(urls)) for (let i = 0; i < 10; i++) await timed(u);
    const samples: Record<QueryCase, number[]> = { pk: [], daily30utc: [], daily30ny: [], hourly720utc: [], hourly720ktm: [] };
    const cpuPerRequest: Record<QueryCase, number[]> = { pk: [], daily30utc: [], daily30ny: [], hourly720utc: [], hourly720ktm: [] };
    const perRound = opts.quick ? 20 : 100;
    for (let round = 1; round <= rounds; round++) {
      for (const k of Object.keys(urls) as QueryCase[]) {
        const c0 = cpuSeconds();
        for (let i = 0; i < perRound; i++) samples[k].push(await timed(urls[k]));
        const c1 = cpuSeconds();
        if (c0 !== null && c1 !== null) cpuPerRequest[k].push(((c1 - c0) * 1000) / perRound);
      }
      opts.log(`metrics: query round ${round}/${rounds} p50 ${Object.entries(samples).map(([k, xs]) => `${k} ${quantile(xs, 0.5).toFixed(2)} ms`).join(", ")}`);
    }
    const check = (await (await fetch(urls.hourly720ktm)).json()) as { rows: number };
    if (check.rows < 720) throw new Error(`the hourly query answered ${check.rows} periods`);

    // 3. Insights of a 100 KB html email.
    const n = opts.quick ? 10 : 40;
    for (let i = 0; i < 3; i++) await timed(`${url}/insights?n=${n}`);
    const info = (await (await fetch(`${url}/insights?n=1`)).json()) as { checks: number; htmlBytes: number };
    const base: number[] = [];
    const full: number[] = [];
    const cpuPer: number[] = [];
    for (let round = 1; round <= rounds; round++) {
      base.push(await timed(`${url}/insights?n=0`));
      const c0 = cpuSeconds();
      full.push(await timed(`${url}/insights?n=${n}`));
      const c1 = cpuSeconds();
      if (c0 !== null && c1 !== null) cpuPer.push(((c1 - c0) * 1000) / n);
    }
    return {
      seeded,
      record,
      statement,
      queries: Object.fromEntries(Object.entries(samples).map(([k, xs]) => {
        const cpu = cpuPerRequest[k as QueryCase];
        return [k, { p50: quantile(xs, 0.5), p99: quantile(xs, 0.99), cpuMs: cpu.length ? median(cpu) : null }];
      })) as MetricsBenchResult["queries"],
      insights: { perEmailMs: (median(full) - median(base)) / n, cpuPerEmailMs: cpuPer.length ? median(cpuPer) : null, htmlBytes: info.htmlBytes, checks: info.checks },
    };
  } catch (err) {
    opts.log(`metrics bench failed; wrangler said:\n${worker.output()}`);
    throw err;
  } finally {
    await worker.stop();
  }
}

const RECORD_LABELS = [
  ["open", "an open, through the pixel route's steps (token, email read, dedupe read, batch, webhook hint), four opens an email"],
  ["delivered", "a delivered outcome, through the consumer's settlement (sent + delivered events, outbox rows, webhook hint)"],
  ["stripped", "stripped: only the open's 3-statement batch (the first bench)"],
] as const;

export function recordTable(r: Pick<MetricsBenchResult, "record">): string {
  const f = (x: number | null, d = 3) => (x === null ? "n/a" : x.toFixed(d));
  const s = (x: Spread | null, d = 3, unit = "") => (x === null ? "n/a" : `${x.median.toFixed(d)}${unit} (${x.q1.toFixed(d)} to ${x.q3.toFixed(d)})`);
  const first = Object.values(r.record)[0]!;
  return [
    `${first.rounds} rounds per path, each both variants back to back (order alternating), ${first.events} events a variant a round; per-round figures, median (interquartile range). CPU: the Worker's workerd, schedstat (ns).`,
    "",
    "| recording an event (one D1 batch each) | ms CPU per event, without / with its rollup (medians) | CPU ratio with / without, per round | rollup's ms CPU per event, per round | ms per event (wall), without / with | wall ratio, per round |",
    "|---|---|---|---|---|---|",
    ...RECORD_LABELS.filter(([k]) => r.record[k]).map(([k, label]) => {
      const x = r.record[k];
      return `| ${label} | ${f(x.plainCpuMs)} / ${f(x.rollupCpuMs)} | ${s(x.cpuRatio)} | ${s(x.cpuExtra)} | ${f(x.plainMs)} / ${f(x.rollupMs)} | ${s(x.wallRatio)} |`;
    }),
  ].join("\n");
}

export function renderMetrics(r: MetricsBenchResult, when: string, machine: string): string {
  const f = (x: number | null, d = 3) => (x === null ? "n/a" : x.toFixed(d));
  const ratio = (a: number | null, b: number | null) => (a === null || b === null || b === 0 ? "n/a" : `${(a / b).toFixed(3)}x`);
  const q = r.queries;
  return [
    `Measured ${when} on ${machine}. Command: \`BENCH_ONLY=metrics npm run bench\` (or \`node bench/metrics.ts\`).`,
    "",
    `Rollups seeded: ${r.seeded.rows} quarter-hour rows (5 domains x 30 days) holding ${r.seeded.events.toLocaleString("en-US")} events, with the hour, UTC-day and shifted-hour (from :15, from :30) rows that sum them, among 20 other accounts' rows of the same shape.`,
    "",
    recordTable(r),
    "",
    "| the stripped batch as plain D1 statements, its rollup written as | ms CPU per event (median) | rollup's ms CPU per event, per round | ratio to none, per round |",
    "|---|---|---|---|",
    ...([
      ["none", "no rollup"],
      ["inline", "values written into its text (rollupItem's first version)"],
      ["bound", "the same statement, bound parameters (rollupItem now)"],
      ["quarter", "bound, the quarter-hour row only (no hour and day rows)"],
    ] as const).map(([k, label]) => {
      const x = r.statement[k];
      const s = (y: Spread | undefined) => (y === undefined ? "n/a" : `${y.median.toFixed(3)} (${y.q1.toFixed(3)} to ${y.q3.toFixed(3)})`);
      return `| ${label} | ${f(x?.cpuMs ?? null)} | ${k === "none" ? "0" : s(x?.extra)} | ${k === "none" ? "1" : s(x?.ratio)} |`;
    }),
    "",
    "| request (sequential, all rounds pooled) | p50 ms | p99 ms | p50 / primary-key read | ms CPU per request (worker's workerd) | CPU / primary-key read |",
    "|---|---|---|---|---|---|",
    `| primary-key read (an email by id and account) | ${f(q.pk.p50, 2)} | ${f(q.pk.p99, 2)} | 1 | ${f(q.pk.cpuMs, 2)} | 1 |`,
    ...([
      ["daily30utc", "30 daily periods, UTC (day rows)"],
      ["daily30ny", "30 daily periods, America/New_York (hour rows)"],
      ["hourly720utc", "720 hourly periods, UTC (hour rows)"],
      ["hourly720ktm", "720 hourly periods, Asia/Kathmandu (hour rows from :15)"],
    ] as const).map(([k, label]) => `| metrics: ${label} | ${f(q[k].p50, 2)} | ${f(q[k].p99, 2)} | ${ratio(q[k].p50, q.pk.p50)} | ${f(q[k].cpuMs, 2)} | ${ratio(q[k].cpuMs, q.pk.cpuMs)} |`),
    "",
    `Insights of a ${(r.insights.htmlBytes / 1024).toFixed(0)} KB html email (${r.insights.checks} checks): ${f(r.insights.perEmailMs, 2)} ms per email (wall), ${f(r.insights.cpuPerEmailMs, 2)} ms CPU.`,
  ].join("\n");
}

export function writeMetricsDoc(block: string): void {
  writeDoc(DOC, block, { begin: BEGIN, end: END });
}

if (import.meta.main) {
  const quick = process.env.BENCH_QUICK === "1";
  const started = performance.now();
  const log = (line: string) => console.log(`[metrics ${((performance.now() - started) / 1000).toFixed(0).padStart(3)}s] ${line}`);
  const result = await runMetricsBench({ quick, log });
  if (process.env.METRICS_PARTS === "record") {
    // Part 1 alone (a development run): printed, not written to the doc.
    console.log(recordTable(result));
    process.exit(0);
  }
  let commit = "";
  try {
    commit = `, commit ${execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: root, encoding: "utf8" }).trim()}`;
  } catch {}
  const block = renderMetrics(result, `${new Date().toISOString().slice(0, 19)}Z`, `${cpus().length} cores (${cpus()[0]?.model ?? "unknown CPU"}), load ${loadavg().map((x) => x.toFixed(2)).join(" ")} after${commit}`);
  console.log(block);
  if (!quick) writeMetricsDoc(block);
}
