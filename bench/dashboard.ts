// The dashboard benchmark (issue 15), measured in workerd under `wrangler dev` with a small
// Worker that calls tern's own modules (bench/dashboard/worker.ts):
//   1. the Emails page's list query (searchEmails, the function the page calls) over an
//      account of 1,000,000 emails among 200,000 of other accounts: the first and second page,
//      by status (common, rare, very rare, with a day's range), by recipient, by recipient and
//      status; p50 and p99 of sequential requests in interleaved rounds, next to a primary-key
//      read (an email by id and account) in the same rounds. Target: at most 3x the read.
//   2. a password sign-in: better-auth's /sign-in/email as the dashboard configures it (scrypt
//      through node:crypto), CPU per sign-in of the Worker's workerd from /proc, next to a bare
//      request's. Target: under 100 ms.
// The dashboard's JavaScript size is a test, not a bench: test/node/dashboard-assets.test.ts.
// Run alone: `node bench/dashboard.ts` (BENCH_QUICK=1 for a smoke run), or BENCH_ONLY=dashboard
// npm run bench. Writes its block of docs/benchmarks.md between its own markers.
import { cpus, loadavg } from "node:os";
import { join, resolve } from "node:path";
import { startBenchWorker } from "./bench-worker.ts";
import { sampleCpu } from "./cpu.ts";
import { writeDoc } from "./report.ts";
import { CASES, TOTAL } from "./dashboard/cases.ts";

const root = resolve(import.meta.dirname, "..");
const DOC = join(root, "docs", "benchmarks.md");
const CONFIG = join(root, "bench", "dashboard", "wrangler.toml");
const BEGIN = "<!-- bench:dashboard:begin (written by bench/dashboard.ts; edit outside these markers) -->";
const END = "<!-- bench:dashboard:end -->";
export const LIST_TARGET = 3;
export const SIGN_IN_CPU_TARGET_MS = 100;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))]!;

type Stat = { p50: number; p99: number; cpuMs: number | null };
export interface DashboardBenchResult {
  seeded: { account: number; total: number; seconds: number };
  queries: Record<string, Stat & { rows: number }>;
  /** Microseconds of D1 per email inserted, with and without the recipients trigger. */
  insert: { withUs: number; withoutUs: number; n: number };
  signIn: { wallP50: number; cpuMs: number | null; bareCpuMs: number | null; wrongCpuMs: number | null; n: number };
}

function workerCpu(pid: number, port: number): number | null {
  return sampleCpu(pid, port)?.["worker runtime"] ?? null;
}

async function timed(url: string, init?: RequestInit): Promise<{ ms: number; body: Record<string, unknown> }> {
  const t0 = performance.now();
  const res = await fetch(url, init);
  const text = await res.text();
  const ms = performance.now() - t0;
  if (!res.ok) throw new Error(`dashboard bench: ${url} answered ${res.status} ${text}`);
  return { ms, body: JSON.parse(text) as Record<string, unknown> };
}

export async function runDashboardBench(opts: { quick: boolean; log: (line: string) => void }): Promise<DashboardBenchResult> {
  const worker = await startBenchWorker("dashboard", root, CONFIG);
  const { url, port, child } = worker;
  try {

    // 1,000,000 emails (plus others'), in statements of 50,000 rows; the triggers fill
    // email_recipients as they would for sent mail.
    const now = Date.now();
    const total = opts.quick ? 120_000 : TOTAL;
    const t0 = performance.now();
    let account = 0;
    for (let from = 0; from < total; from += 50_000) {
      // INSERT OR IGNORE: a chunk is repeated once if wrangler dev restarts the Worker under it.
      const seedOnce = () => fetch(`${url}/seed?from=${from}&n=${Math.min(50_000, total - from)}&total=${total}&now=${now}`, { method: "POST" });
      let r = await seedOnce();
      if (r.status === 503) r = await seedOnce();
      if (!r.ok) throw new Error(`seed: ${r.status} ${(await r.text()).slice(0, 500)}`);
      account = ((await r.json()) as { account: number }).account;
      if (from % 200_000 === 0) opts.log(`dashboard: seeded ${(from + 50_000).toLocaleString("en-US")} emails`);
    }
    const seeded = { account, total, seconds: (performance.now() - t0) / 1000 };
    opts.log(`dashboard: ${account.toLocaleString("en-US")} emails in the bench account, ${total.toLocaleString("en-US")} in all, seeded in ${seeded.seconds.toFixed(0)} s`);

    // A primary-key read of an email in the middle of the account's history.
    const probe = (await timed(`${url}/list?case=first&now=${now}`)).body;
    if (probe.rows !== 25) throw new Error(`the first page has ${String(probe.rows)} rows`);
    const urls: Record<string, string> = { pk: "" };
    for (const k of Object.keys(CASES)) urls[k] = `${url}/list?case=${k}&now=${now}`;
    // The read's id: an email half way through the account's history (g % 6 != 5: the account's).
    const g = opts.quick ? 60_001 : 600_001;
    const t = now - 30 * 86_400_000 + Math.floor((g * 30 * 86_400_000) / total);
    urls.pk = `${url}/pk?id=${Math.floor(t / 65536).toString(16).padStart(8, "0")}-${(t % 65536).toString(16).padStart(4, "0")}-7000-8000-${g.toString(16).padStart(12, "0")}`;
    if ((await timed(urls.pk)).body.found !== true) throw new Error("the primary-key read found nothing");

    const rows: Record<string, number> = {};
    for (const [k, u] of Object.entries(urls)) {
      for (let i = 0; i < 5; i++) {
        const { body } = await timed(u);
        if (k !== "pk") rows[k] = Number(body.rows);
      }
    }
    opts.log(`dashboard: rows per page ${JSON.stringify(rows)}`);
    const rounds = opts.quick ? 1 : 5;
    const perRound = opts.quick ? 10 : 60;
    const samples: Record<string, number[]> = Object.fromEntries(Object.keys(urls).map((k) => [k, []]));
    const cpu: Record<string, number[]> = Object.fromEntries(Object.keys(urls).map((k) => [k, []]));
    for (let round = 1; round <= rounds; round++) {
      for (const [k, u] of Object.entries(urls)) {
        const c0 = workerCpu(child.pid!, port);
        for (let i = 0; i < perRound; i++) samples[k]!.push((await timed(u)).ms);
        const c1 = workerCpu(child.pid!, port);
        if (c0 !== null && c1 !== null) cpu[k]!.push(((c1 - c0) * 1000) / perRound);
      }
      opts.log(`dashboard: list round ${round}/${rounds} p50 ${Object.entries(samples).map(([k, xs]) => `${k} ${quantile(xs, 0.5).toFixed(2)}`).join(", ")} ms`);
    }
    const queries = Object.fromEntries(Object.entries(samples).map(([k, xs]) => [k, { p50: quantile(xs, 0.5), p99: quantile(xs, 0.99), cpuMs: cpu[k]!.length ? median(cpu[k]!) : null, rows: rows[k] ?? 1 }]));

    // What the recipients trigger adds to inserting an email: the same statement with it and
    // without it, interleaved (one row of one recipient each, as a single send writes).
    const insertN = opts.quick ? 5_000 : 20_000;
    const insertMs: Record<"with" | "without", number[]> = { with: [], without: [] };
    for (let round = 0; round <= rounds; round++) {
      for (const k of ["with", "without"] as const) {
        const { body } = await timed(`${url}/insert-cost?n=${insertN}&trigger=${k === "with" ? 1 : 0}&now=${now}`, { method: "POST" });
        if (round > 0) insertMs[k].push((Number(body.ms) * 1000) / insertN);
      }
    }
    const insert = { withUs: median(insertMs.with), withoutUs: median(insertMs.without), n: insertN };
    opts.log(`dashboard: inserting an email: ${insert.withUs.toFixed(1)} us with the recipients trigger, ${insert.withoutUs.toFixed(1)} us without`);

    // A password sign-in's CPU, next to a bare request's and a wrong password's.
    await timed(`${url}/user`, { method: "POST" });
    const first = await timed(`${url}/sign-in`, { method: "POST" });
    if (first.body.status !== 200 || first.body.cookie !== true) throw new Error(`sign-in answered ${JSON.stringify(first.body)}`);
    const n = opts.quick ? 5 : 20;
    const variants = { bare: `${url}/health`, signIn: `${url}/sign-in`, wrong: `${url}/sign-in?wrong=1` } as const;
    const signCpu: Record<keyof typeof variants, number[]> = { bare: [], signIn: [], wrong: [] };
    const signWall: number[] = [];
    for (let round = 1; round <= rounds; round++) {
      for (const [k, u] of Object.entries(variants) as [keyof typeof variants, string][]) {
        const c0 = workerCpu(child.pid!, port);
        for (let i = 0; i < n; i++) {
          const r = await timed(u, { method: k === "bare" ? "GET" : "POST" });
          if (k === "signIn") {
            signWall.push(r.ms);
            if (r.body.status !== 200) throw new Error(`sign-in answered ${JSON.stringify(r.body)}`);
          }
          if (k === "wrong" && r.body.status !== 401) throw new Error(`a wrong password answered ${JSON.stringify(r.body)}`);
        }
        const c1 = workerCpu(child.pid!, port);
        if (c0 !== null && c1 !== null) signCpu[k].push(((c1 - c0) * 1000) / n);
      }
      opts.log(`dashboard: sign-in round ${round}/${rounds}: CPU per request ${Object.entries(signCpu).map(([k, xs]) => `${k} ${xs.at(-1)?.toFixed(1) ?? "n/a"} ms`).join(", ")}`);
    }
    const med = (xs: number[]) => (xs.length ? median(xs) : null);
    return {
      seeded,
      queries,
      insert,
      signIn: { wallP50: quantile(signWall, 0.5), cpuMs: med(signCpu.signIn), bareCpuMs: med(signCpu.bare), wrongCpuMs: med(signCpu.wrong), n: n * rounds },
    };
  } catch (err) {
    opts.log(`dashboard bench failed; wrangler said:\n${worker.output()}`);
    throw err;
  } finally {
    await worker.stop();
  }
}

export function renderDashboard(r: DashboardBenchResult, when: string, machine: string): string {
  const f = (x: number | null, d = 2) => (x === null ? "n/a" : x.toFixed(d));
  const pk = r.queries.pk!;
  const verdict = (x: number) => (x / pk.p50 <= LIST_TARGET ? "yes" : "**no**");
  const s = r.signIn;
  const own = s.cpuMs === null || s.bareCpuMs === null ? null : s.cpuMs - s.bareCpuMs;
  return [
    `Measured ${when} on ${machine}. Command: \`BENCH_ONLY=dashboard npm run bench\` (or \`node bench/dashboard.ts\`).`,
    "",
    `The Emails page's query (worker/dashboard/email-search.ts \`searchEmails\`, 25 rows a page) over ${r.seeded.account.toLocaleString("en-US")} emails of one account among ${r.seeded.total.toLocaleString("en-US")} (four other accounts' interleaved), 30 days of history, 50,000 distinct recipients (seeded in ${r.seeded.seconds.toFixed(0)} s). Sequential requests to a Worker in workerd under \`wrangler dev\`, interleaved rounds, all rounds pooled; the primary-key read is an email by id and account, in the same rounds. Target: p50 at most ${LIST_TARGET}x the read.`,
    "",
    "| query | rows | p50 ms | p99 ms | p50 / read | p99 / read | ms CPU per request (worker's workerd) | within 3x |",
    "|---|---|---|---|---|---|---|---|",
    `| primary-key read | 1 | ${f(pk.p50)} | ${f(pk.p99)} | 1 | 1 | ${f(pk.cpuMs)} | |`,
    ...Object.entries(CASES).map(([k, c]) => {
      const q = r.queries[k]!;
      return `| ${c.label} | ${q.rows} | ${f(q.p50)} | ${f(q.p99)} | ${(q.p50 / pk.p50).toFixed(2)}x | ${(q.p99 / pk.p99).toFixed(2)}x | ${f(q.cpuMs)} | ${verdict(q.p50)} |`;
    }),
    "",
    `What the index of recipients costs a send: inserting an email (one recipient) takes ${r.insert.withUs.toFixed(1)} us of D1 with the trigger that fills \`email_recipients\`, ${r.insert.withoutUs.toFixed(1)} us without it (+${(r.insert.withUs - r.insert.withoutUs).toFixed(1)} us, ${(r.insert.withUs / r.insert.withoutUs).toFixed(2)}x; ${r.insert.n.toLocaleString("en-US")} rows a statement, medians of interleaved rounds, the statement's time inside the Worker).`,
    "",
    `A password sign-in (better-auth's \`/sign-in/email\` as worker/dashboard/auth.ts configures it: scrypt N=16384, r=16, p=1 through node:crypto; a verified user; session row written; ${s.n} sign-ins): **${f(own, 1)} ms CPU** in the Worker's workerd beyond a bare request (${f(s.cpuMs, 1)} ms per sign-in, ${f(s.bareCpuMs, 1)} ms per bare request), target under ${SIGN_IN_CPU_TARGET_MS} ms; a wrong password ${f(s.wrongCpuMs, 1)} ms; wall p50 ${f(s.wallP50, 1)} ms per sign-in.`,
  ].join("\n");
}

export function writeDashboardDoc(block: string): void {
  writeDoc(DOC, block, { begin: BEGIN, end: END });
}

if (import.meta.main) {
  const quick = process.env.BENCH_QUICK === "1";
  const started = performance.now();
  const log = (line: string) => console.log(`[dashboard ${((performance.now() - started) / 1000).toFixed(0).padStart(3)}s] ${line}`);
  const result = await runDashboardBench({ quick, log });
  const block = renderDashboard(result, new Date().toISOString().replace(/\.\d+Z$/, "Z"), `${cpus().length} cores (${cpus()[0]?.model ?? "unknown CPU"}), load ${loadavg().map((x) => x.toFixed(2)).join(" ")} after`);
  console.log(block);
  if (!quick) writeDashboardDoc(block);
}
