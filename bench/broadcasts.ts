// Broadcasts at scale, end to end on one machine (tern as `npm start` runs it): N contacts at the
// simulator's domain are imported from a CSV, then
//   1. a broadcast to all of them: time to fan out (sent), time until every email is settled,
//      emails per second, CPU seconds of the tern processes, peak memory (RSS) of workerd;
//      meanwhile single POST /emails sends, p50 and p99;
//   2. the same N emails sent with POST /emails/batch (100 a request, 4 at a time): the same
//      figures, and the same single sends with nothing else running.
// Targets (issue 17): a broadcast email costs at most half the CPU of a batch-sent one; single
// sends during a broadcast keep a p99 within 2x of idle. Progress is read from the local D1 file
// (read-only). Run alone: `node bench/broadcasts.ts` (BENCH_QUICK=1: 2,000 contacts;
// BENCH_BROADCAST_CONTACTS=N to choose). Writes its block of docs/benchmarks.md when run at the
// default size.
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join, resolve } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { processTree, sampleCpu, type CpuSample } from "./cpu.ts";
import { writeDoc } from "./report.ts";
import { freePort, startTern } from "../test/support/processes.ts";
import { attachProfilers, summarize, type ProfilerSession } from "./inspector.ts";
import { documentToHtml, type DocNode } from "../worker/broadcasts/document.ts";

const root = resolve(import.meta.dirname, "..");
const DOC = join(root, "docs", "benchmarks.md");
const BEGIN = "<!-- bench:broadcasts:begin (written by bench/broadcasts.ts; edit outside these markers) -->";
const END = "<!-- bench:broadcasts:end -->";

export interface PathResult {
  emails: number;
  /** Until every email is recorded (the broadcast's fan-out; the batch requests answered). */
  recordSeconds: number;
  /** Until every email is settled (sent by the consumer). */
  doneSeconds: number;
  perSecond: number;
  /** CPU seconds of tern's processes (workerd, wrangler, npm start) per 1,000 emails. */
  cpuPer1000: number | null;
  /** The same, of the Worker's own workerd process only (API, consumers, local D1 and Queues). */
  workerCpuPer1000: number | null;
  peakRssMb: number | null;
  singles: { p50Ms: number; p99Ms: number; n: number };
}

export interface BroadcastBenchResult {
  contacts: number;
  broadcast: PathResult;
  batch: PathResult;
  idleSingles: { p50Ms: number; p99Ms: number; n: number };
  /** CPU ms of tern's processes per paced single send (subtracted from each path's figure). */
  cpuPerSingleMs: number | null;
  /** CPU seconds per second tern's processes use with nothing to do (subtracted too). */
  restCpuPerSecond: number;
}

/** The email both paths send (BENCH_BROADCAST_BODY=newsletter, the default): a newsletter as a
 * person writes it in the editor (a heading, a greeting with the reader's name, four sections
 * of text with links, a button, an image, two columns, a divider and a footer), rendered by the
 * editor's own renderer: about 5.4 KB of html. BENCH_BROADCAST_BODY=tiny sends one short line
 * instead (what runs before 2026-11-29 measured): every email's cost is then bookkeeping. */
export function benchBody(kind: string): { html: string; personal: (name: string) => string } {
  if (kind === "tiny") return { html: "<p>Hello {{{FIRST_NAME|there}}}</p>", personal: (name) => `<p>Hello ${name}</p>` };
  const text = (t: string, marks?: DocNode["marks"]): DocNode => ({ type: "text", text: t, ...(marks ? { marks } : {}) });
  const link = (t: string, href: string) => text(t, [{ type: "link", attrs: { href } }]);
  const para = (...content: DocNode[]): DocNode => ({ type: "paragraph", content });
  const section = (title: string, slug: string): DocNode[] => [
    { type: "heading", attrs: { level: 2 }, content: [text(title)] },
    para(text("This month we shipped the change many of you asked for, and measured what it does: pages load faster, "), text("exports finish in half the time", [{ type: "bold" }]), text(", and the settings you use most are one click closer. The details, with before-and-after figures, are in "), link("the full write-up", `https://example.com/blog/${slug}`), text(".")),
    para(text("As always, tell us what works and what does not: every reply to this email reaches the team that built it, and we read them all before planning the next release.")),
  ];
  const doc: DocNode = {
    type: "doc",
    content: [
      { type: "heading", attrs: { level: 1 }, content: [text("What's new in November")] },
      para(text("Hi "), { type: "variable", attrs: { key: "FIRST_NAME", fallback: "there" } }, text(", here is what changed this month and what is coming next.")),
      ...section("Faster dashboards", "faster-dashboards"),
      { type: "button", attrs: { label: "Read the changelog", href: "https://example.com/changelog" } },
      { type: "image", attrs: { src: "https://example.com/images/november-hero.png", alt: "The new dashboard", width: 536 } },
      ...section("Exports in half the time", "exports"),
      { type: "columns", content: [
        { type: "column", content: [{ type: "heading", attrs: { level: 3 }, content: [text("For teams")] }, para(text("Shared views, roles per project and an audit log of every change. "), link("Learn more", "https://example.com/teams"))] },
        { type: "column", content: [{ type: "heading", attrs: { level: 3 }, content: [text("For developers")] }, para(text("A new API for bulk updates, webhooks for every event and typed clients. "), link("Read the docs", "https://example.com/docs"))] },
      ] },
      ...section("Coming in December", "december"),
      { type: "horizontalRule" },
      para(text("You get this email because you signed up at example.com. Example Inc., 1 Market Street, San Francisco, CA.")),
    ],
  };
  const html = documentToHtml(doc, { title: "What's new in November" });
  return { html, personal: (name) => html.replaceAll("{{{FIRST_NAME|there}}}", name) };
}

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The pace of the single sends measured beside each path: 20 a second at most. */
const SINGLE_EVERY_MS = 50;
/** Single sends measured during each path: 30 s of them at that pace. */
const SINGLES_DURING = 600;

/** The local D1 file of a `wrangler dev` state directory, read-only. */
export function d1(stateDir: string): DatabaseSync {
  const dir = join(stateDir, "wrangler", "v3", "d1", "miniflare-D1DatabaseObject");
  const file = readdirSync(dir).find((f) => f.endsWith(".sqlite") && f !== "metadata.sqlite");
  return new DatabaseSync(join(dir, file!), { readOnly: true });
}

export function tryGet<T>(db: DatabaseSync, sql: string, ...params: (string | number)[]): T | undefined {
  try {
    return db.prepare(sql).get(...params) as T | undefined;
  } catch {
    return undefined; // busy while a batch commits
  }
}

function cpuOf(s: CpuSample): number | null {
  return s ? s["worker runtime"] + s["dev proxy"] + s.wrangler + s["start+relay"] + s.other : null;
}

function workerdRssMb(pid: number | undefined): number | null {
  if (pid === undefined || process.platform !== "linux") return null;
  let kb = 0;
  for (const p of processTree(pid)) {
    try {
      if (!readFileSync(`/proc/${p}/comm`, "utf8").startsWith("workerd")) continue;
      const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, "utf8"));
      if (m) kb = Math.max(kb, Number(m[1]));
    } catch {}
  }
  return kb / 1024;
}

export async function runBroadcastBench(opts: { quick: boolean; contacts?: number; body?: string; profile?: boolean; log: (line: string) => void }): Promise<BroadcastBenchResult> {
  if (opts.profile) mkdirSync("/tmp/prof", { recursive: true });
  const n = opts.contacts ?? (opts.quick ? 2000 : 100_000);
  const body = benchBody(opts.body ?? "newsletter");
  opts.log(`each email's html: ${body.html.length} bytes (${opts.body ?? "newsletter"})`);
  const inspectorPort = opts.profile ? await freePort() : undefined;
  const tern = await startTern({ env: { TERN_DEV_PLAN: "scale_2_5m", TERN_DEV_RATE_LIMIT: "100000", TERN_CRON_INTERVAL_MS: "5000", ...(process.env.BENCH_BROADCAST_RATE ? { TERN_BROADCAST_RATE: process.env.BENCH_BROADCAST_RATE } : {}), ...(inspectorPort ? { TERN_INSPECTOR_PORT: String(inspectorPort) } : {}) } });
  const db = d1(tern.stateDir);
  const profilers: ProfilerSession[] = inspectorPort ? await attachProfilers(inspectorPort) : [];
  try {
    const call = async (method: string, path: string, body?: unknown, init: RequestInit = {}) => {
      const res = await fetch(`${tern.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${tern.apiKey}`, ...(body === undefined || body instanceof FormData ? {} : { "content-type": "application/json" }) },
        body: body === undefined ? undefined : body instanceof FormData ? body : JSON.stringify(body),
        ...init,
      });
      if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
      return res.json() as Promise<any>;
    };
    const segment = (await call("POST", "/segments", { name: "bench" })).id;
    opts.log(`importing ${n} contacts`);
    const csv = ["email,first_name", ...Array.from({ length: n }, (_, i) => `reader${i}@simulator.tern.test,Reader ${i}`)].join("\n");
    const form = new FormData();
    form.append("file", new Blob([csv], { type: "text/csv" }), "bench.csv");
    form.append("segments", JSON.stringify([segment]));
    const imp = (await call("POST", "/contacts/imports", form)).id;
    for (;;) {
      const s = await call("GET", `/contacts/imports/${imp}`);
      if (s.status === "completed") break;
      if (s.status === "failed") throw new Error("the import failed");
      await sleep(1000);
    }

    const single = async () => {
      const t = performance.now();
      await call("POST", "/emails", { from: `b@${tern.domain}`, to: "single@simulator.tern.test", subject: "single", text: "t" });
      return performance.now() - t;
    };
    /** Single sends, one after another and at most one per SINGLE_EVERY_MS, while `busy()` says
     * the other work goes on (or `count` of them). Paced, so that they are a light, steady
     * transactional load the same in every phase, whose CPU is subtracted from each path's. */
    const singles = async (busy: () => boolean, count = Infinity) => {
      const ms: number[] = [];
      while (busy() && ms.length < count) {
        const t = performance.now();
        ms.push(await single());
        await sleep(Math.max(0, SINGLE_EVERY_MS - (performance.now() - t)));
      }
      ms.sort((a, b) => a - b);
      return { p50Ms: quantile(ms, 0.5), p99Ms: quantile(ms, 0.99), n: ms.length };
    };
    /** Webhook events not yet fanned out (of those written by `before`, when given). */
    const unfanned = (before?: number) =>
      tryGet<{ n: number }>(db, `SELECT COUNT(*) AS n FROM webhook_events WHERE fanned_out_at IS NULL${before === undefined ? "" : " AND created_at <= ?"}`, ...(before === undefined ? [] : [before]))?.n ?? 1;
    const settled = (where: string, ...params: (string | number)[]) =>
      tryGet<{ n: number }>(db, `SELECT COUNT(*) AS n FROM emails WHERE ${where} AND state NOT IN ('queued', 'sending', 'scheduled')`, ...params)?.n ?? 0;

    // What one paced single send costs, measured with nothing else running (its delivery
    // included: the run waits for its settlement), so each path's figure can leave them out.
    const cpuNow = () => sampleCpu(tern.child.pid, Number(new URL(tern.url).port));
    // The import's own work (its contact.created events' webhook fan-out) ends first.
    for (let i = 0; i < 600 && unfanned() > 0; i++) await sleep(500);
    // Then whatever else the import left running must end too, or it is counted as tern's rest
    // and the paths' CPU comes out wrong (once its events no longer waited for a fan-out, a
    // 100,000-contact run measured "rest" at 0.55 s of CPU a second and negative CPU for the
    // broadcast): wait, up to five minutes, until three seconds in a row cost under 0.1 s a second.
    const quiet0 = performance.now();
    for (let i = 0; i < 100; i++) {
      const a = cpuNow();
      await sleep(3000);
      const b = cpuNow();
      if (!a || !b || (cpuOf(b)! - cpuOf(a)!) / 3 < 0.1) break;
    }
    opts.log(`tern at rest after ${((performance.now() - quiet0) / 1000).toFixed(0)} s`);
    // What tern's processes use with nothing to do (the cron, wrangler's own timers), per
    // second: a paced path runs for minutes, and that much of its CPU is not its own. Taken
    // as three windows that must agree (the largest within 1.5x the smallest, or 10 ms a
    // second of each other): leftover work still winding down shows as a falling series, and
    // once made a 100,000-contact run's "rest" 96 ms a second and its broadcast's CPU negative.
    const windowMs = opts.quick ? 1000 : 5000;
    let restRate = 0;
    let workerRestRate = 0;
    for (let attempt = 0; attempt < 20; attempt++) {
      const rates: { all: number; worker: number }[] = [];
      for (let w = 0; w < 3; w++) {
        const a = cpuNow();
        const t0 = performance.now();
        await sleep(windowMs);
        const b = cpuNow();
        const seconds = (performance.now() - t0) / 1000;
        if (a && b) rates.push({ all: (cpuOf(b)! - cpuOf(a)!) / seconds, worker: (b["worker runtime"] - a["worker runtime"]) / seconds });
      }
      if (rates.length < 3) break;
      const all = rates.map((r) => r.all);
      restRate = all.reduce((x, y) => x + y, 0) / 3;
      workerRestRate = rates.reduce((x, r) => x + r.worker, 0) / 3;
      if (Math.max(...all) <= Math.max(1.5 * Math.min(...all), Math.min(...all) + 0.01)) break;
      opts.log(`rest not steady yet (${all.map((r) => (r * 1000).toFixed(0)).join(", ")} ms a second): measuring again`);
    }
    const idleCpu0 = cpuNow();
    const idleT0 = performance.now();
    // As many as during each path: a p99 of 200 is their second slowest, and swung 19-74 ms.
    const idleSingles = await singles(() => true, opts.quick ? 50 : SINGLES_DURING);
    for (let i = 0; i < 50 && settled("to_json = '[\"single@simulator.tern.test\"]'") < idleSingles.n; i++) await sleep(200);
    for (let i = 0, t = Date.now(); i < 50 && unfanned(t) > 0; i++) await sleep(200);
    const idleCpu1 = cpuNow();
    const idleSeconds = (performance.now() - idleT0) / 1000;
    const cpuPerSingle = idleCpu0 && idleCpu1 ? (cpuOf(idleCpu1)! - cpuOf(idleCpu0)! - restRate * idleSeconds) / idleSingles.n : null;
    const workerCpuPerSingle = idleCpu0 && idleCpu1 ? (idleCpu1["worker runtime"] - idleCpu0["worker runtime"] - workerRestRate * idleSeconds) / idleSingles.n : null;

    const measure = async (label: string, start: () => Promise<void>, recorded: () => boolean, done: () => boolean): Promise<PathResult> => {
      opts.log(`${label}: ${n} emails`);
      const s0 = sampleCpu(tern.child.pid, Number(new URL(tern.url).port));
      const cpu0 = cpuOf(s0);
      let peak = workerdRssMb(tern.child.pid) ?? 0;
      const t0 = performance.now();
      let recordAt = 0;
      let finished = false;
      // A path is done when its emails are settled and the webhook events their settlements
      // wrote are fanned out: that work is the path's too, and left over it would be counted
      // in the next phase.
      let settledAt = 0;
      let settledPerf = 0;
      const watcher = (async () => {
        while (!finished) {
          peak = Math.max(peak, workerdRssMb(tern.child.pid) ?? 0);
          if (!recordAt && recorded()) recordAt = performance.now();
          if (recordAt && !settledAt && done()) [settledAt, settledPerf] = [Date.now(), performance.now()];
          if (settledAt && unfanned(settledAt) === 0) finished = true;
          await sleep(200);
        }
      })();
      for (const p of profilers) await p.start();
      await start();
      // Single sends for the path's first SINGLES_DURING sends' worth of time (or all of it,
      // if shorter): enough for a p99, few enough that subtracting their CPU stays a small
      // correction of the path's own figure.
      const during = await singles(() => !finished, opts.quick ? 100 : SINGLES_DURING);
      await watcher;
      const s1 = sampleCpu(tern.child.pid, Number(new URL(tern.url).port));
      const cpu1 = cpuOf(s1);
      const elapsed = (performance.now() - t0) / 1000;
      for (const [i, p] of profilers.entries()) {
        const profile = await p.stop();
        writeFileSync(`/tmp/prof/broadcasts-${label}-${i}.cpuprofile`, JSON.stringify(profile));
        summarize(`${label}: ${p.title}`, profile, n, "email");
      }
      const seconds = (settledPerf - t0) / 1000;
      return {
        emails: n,
        recordSeconds: (recordAt - t0) / 1000,
        doneSeconds: seconds,
        perSecond: n / seconds,
        cpuPer1000: cpu0 !== null && cpu1 !== null && cpuPerSingle !== null ? ((cpu1 - cpu0 - during.n * cpuPerSingle - restRate * elapsed) / n) * 1000 : null,
        workerCpuPer1000: s0 && s1 && workerCpuPerSingle !== null ? ((s1["worker runtime"] - s0["worker runtime"] - during.n * workerCpuPerSingle - workerRestRate * elapsed) / n) * 1000 : null,
        peakRssMb: peak || null,
        singles: during,
      };
    };

    let broadcastId = "";
    const broadcast = await measure(
      "broadcast",
      async () => {
        broadcastId = (await call("POST", "/broadcasts", { segment_id: segment, from: `News <news@${tern.domain}>`, subject: "Hi {{{FIRST_NAME}}}", html: body.html, send: true })).id;
      },
      () => tryGet<{ status: string }>(db, "SELECT status FROM broadcasts WHERE id = ?", broadcastId)?.status === "sent",
      () => settled("broadcast_id = ?", broadcastId) >= n,
    );

    const batchStart = Date.now();
    let answered = 0;
    const batch = await measure(
      "batch",
      async () => {
        const requests = Array.from({ length: Math.ceil(n / 100) }, (_, r) =>
          Array.from({ length: Math.min(100, n - r * 100) }, (_, i) => ({ from: `b@${tern.domain}`, to: `batch${r * 100 + i}@simulator.tern.test`, subject: `Hi Reader ${r * 100 + i}`, html: body.personal(`Reader ${r * 100 + i}`) })));
        // Four requests at a time, in the background while the single sends are measured.
        void (async () => {
          for (let i = 0; i < requests.length; i += 4) {
            await Promise.all(requests.slice(i, i + 4).map((b) => call("POST", "/emails/batch", b)));
            answered += Math.min(4, requests.length - i);
          }
        })();
      },
      () => answered >= Math.ceil(n / 100),
      () => settled("broadcast_id IS NULL AND created_at >= ? AND to_json LIKE '[\"batch%'", batchStart) >= n,
    );
    return { contacts: n, broadcast, batch, idleSingles, cpuPerSingleMs: cpuPerSingle === null ? null : cpuPerSingle * 1000, restCpuPerSecond: restRate };
  } finally {
    for (const p of profilers) p.close();
    db.close();
    await tern.stop();
    rmSync(tern.stateDir, { recursive: true, force: true });
  }
}

export function renderBroadcasts(r: BroadcastBenchResult, date: string, machine: string): string {
  const row = (name: string, p: PathResult) =>
    `| ${name} | ${p.recordSeconds.toFixed(1)} | ${p.doneSeconds.toFixed(1)} | ${p.perSecond.toFixed(0)} | ${p.cpuPer1000?.toFixed(2) ?? "n/a"} (${p.workerCpuPer1000?.toFixed(2) ?? "n/a"}) | ${p.peakRssMb?.toFixed(0) ?? "n/a"} | ${p.singles.p50Ms.toFixed(0)} / ${p.singles.p99Ms.toFixed(0)} (${p.singles.n}) |`;
  const cpuRatio = r.broadcast.cpuPer1000 !== null && r.batch.cpuPer1000 ? r.broadcast.cpuPer1000 / r.batch.cpuPer1000 : null;
  const p99Ratio = r.idleSingles.p99Ms ? r.broadcast.singles.p99Ms / r.idleSingles.p99Ms : null;
  return [
    `### Broadcasts (${date}, ${machine})`,
    "",
    `${r.contacts} contacts at the simulator's domain, imported from a CSV; \`node bench/broadcasts.ts\` (or \`BENCH_ONLY=broadcasts npm run bench\`).`,
    "",
    "| path | recorded (s) | all settled (s) | emails/s | CPU s per 1,000 (of it the Worker's workerd) | peak workerd RSS (MB) | single sends meanwhile p50 / p99 ms (n) |",
    "|---|---|---|---|---|---|---|",
    row("broadcast", r.broadcast),
    row("POST /emails/batch", r.batch),
    "",
    `Single sends (one at a time, at most ${1000 / SINGLE_EVERY_MS} a second, at most ${SINGLES_DURING} during each path) with nothing else running: p50 ${r.idleSingles.p50Ms.toFixed(0)} ms, p99 ${r.idleSingles.p99Ms.toFixed(0)} ms (${r.idleSingles.n}); each costs ${r.cpuPerSingleMs?.toFixed(1) ?? "n/a"} ms of CPU, subtracted from both paths' CPU, as is what tern uses at rest (${(r.restCpuPerSecond * 1000).toFixed(0)} ms a second) for each path's duration.`,
    `CPU of a broadcast email / a batch-sent one: ${cpuRatio?.toFixed(2) ?? "n/a"} (target at most 0.5). p99 of single sends during the broadcast / idle: ${p99Ratio?.toFixed(2) ?? "n/a"} (target at most 2).`,
  ].join("\n");
}

export function writeBroadcastsDoc(block: string): void {
  writeDoc(DOC, block, { begin: BEGIN, end: END });
}

if (import.meta.main) {
  const quick = process.env.BENCH_QUICK === "1";
  const contacts = process.env.BENCH_BROADCAST_CONTACTS ? Number(process.env.BENCH_BROADCAST_CONTACTS) : undefined;
  const started = performance.now();
  const log = (line: string) => console.log(`[broadcasts ${((performance.now() - started) / 1000).toFixed(0).padStart(3)}s] ${line}`);
  const result = await runBroadcastBench({ quick, contacts, body: process.env.BENCH_BROADCAST_BODY, profile: process.env.BENCH_PROFILE === "1", log });
  const block = renderBroadcasts(result, new Date().toISOString().slice(0, 10), `${cpus().length} cores (${cpus()[0]?.model ?? "unknown CPU"})`);
  console.log(block);
  // The block in docs/benchmarks.md is the 100,000-contact run's: a run of another size prints
  // its block and leaves the file alone.
  if (!quick && contacts === undefined) writeBroadcastsDoc(block);
}
