// How much memory one large message costs the Worker's isolate (issue 20, item 3): tern as
// `npm start` runs it, a local file server for attachment paths (dev mode fetches http and
// loopback), and the resident memory (VmRSS, /proc) of the workerd process that runs the
// Worker, sampled every 10 ms. Linux only. Run: `BENCH_ONLY=memory npm run bench` (part of the
// full `npm run bench`), or `node bench/message-memory.ts`; both write docs/benchmarks.md.
//
// Acceptance and delivery are measured apart, each in a workerd of its own (RSS never
// shrinks, so in one process the second reuses what the first freed and is understated):
//   process 1: small    a 1 KB text email, accepted and delivered (the baseline)
//   process 2: accept   two 14 MB paths (one without a Content-Length), scheduled a day ahead:
//                       acceptance alone (fetch, R2, D1), about 38 MB encoded
//   process 3: inline   a 28 MB attachment as base64 `content` in the JSON body (39 MB of
//                       JSON, about 40 MB encoded), scheduled: acceptance alone
//              inline+key  the same with an Idempotency-Key (the body is hashed)
//   process 4: attack   three 30 MB paths (the issue's probe): refused with 422, nothing stored
//              fetched  three 14 MB paths: two written to R2 (one without a length), the third
//                       refused by its Content-Length, and what was written deleted
//   process 5: deliver  the email `accept` scheduled, made due and delivered to the dev relay:
//                       delivery alone (read from R2, DKIM, SMTP)
//   process 6: r2floor  not tern: a minimal Worker under wrangler dev (bench/r2-floor/)
//                       that puts the same 28 MB straight from a fetch's body into R2, no
//                       JavaScript touching the bytes: what the local R2 simulation itself
//                       costs, which production's R2 (another service) does not put in the
//                       isolate.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { cpus, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { spawn } from "node:child_process";
import { wranglerEnv, WRANGLER } from "../ops/d1.ts";
import { freePort } from "../test/support/processes.ts";
import { startTern } from "../test/support/processes.ts";
import { processTree } from "./cpu.ts";
import { writeDoc } from "./report.ts";
import WS from "ws";

const MB = 1024 * 1024;
const DOC = resolve(import.meta.dirname, "..", "docs", "benchmarks.md");
const BEGIN = "<!-- bench:memory:begin (written by bench/message-memory.ts; edit outside these markers) -->";
const END = "<!-- bench:memory:end -->";

export interface MemoryRow {
  name: string;
  what: string;
  outcome: string;
  /** workerd's RSS, MB. */
  before: number;
  peak: number;
  /** The Worker's isolate (V8 heap in use plus ArrayBuffer backing stores, MB, through the
   * inspector): after a full collection before, the highest sample during, and after a full
   * collection once it is done. Absent for the R2 floor. */
  isolate?: { before: number; peak: number; after: number };
}

/** The Worker's isolate as the inspector sees it (wrangler dev --inspector-port). */
class IsolateHeap {
  private id = 0;
  private readonly ws: WS;
  private constructor(ws: WS) {
    this.ws = ws;
  }

  static async connect(port: number): Promise<IsolateHeap> {
    const targets = (await (await fetch(`http://127.0.0.1:${port}/json`)).json()) as { webSocketDebuggerUrl: string }[];
    // wrangler's inspector proxy wants a devtools origin.
    const ws = new WS(targets[0]!.webSocketDebuggerUrl, { origin: "https://devtools.devprod.cloudflare.dev" });
    await new Promise<void>((res, rej) => {
      ws.once("open", () => res());
      ws.once("error", rej);
    });
    return new IsolateHeap(ws);
  }

  private call(method: string): Promise<Record<string, number>> {
    const id = ++this.id;
    return new Promise((res, rej) => {
      const onMessage = (data: WS.RawData) => {
        const m = JSON.parse(String(data)) as { id?: number; result?: Record<string, number>; error?: { message: string } };
        if (m.id !== id) return;
        this.ws.off("message", onMessage);
        if (m.error) rej(new Error(`${method}: ${m.error.message}`));
        else res(m.result ?? {});
      };
      this.ws.on("message", onMessage);
      this.ws.send(JSON.stringify({ id, method, params: {} }));
    });
  }

  /** MB in use: the V8 heap and the ArrayBuffers' backing stores. */
  async used(): Promise<number> {
    const u = await this.call("Runtime.getHeapUsage");
    return ((u.usedSize ?? 0) + (u.backingStorageSize ?? 0) + (u.embedderHeapUsedSize ?? 0)) / MB;
  }

  async collected(): Promise<number> {
    await this.call("HeapProfiler.collectGarbage");
    return this.used();
  }

  close(): void {
    this.ws.close();
  }
}

/** NaN once the process is gone. */
function rssMb(pid: number): number {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, "utf8");
  } catch {
    return NaN;
  }
  const m = /VmRSS:\s+(\d+) kB/.exec(status);
  return m ? Number(m[1]) / 1024 : NaN;
}

type Tern = Awaited<ReturnType<typeof startTern>>;
const ternEnv = { X_LOCAL_OBSERVABILITY: "false", WRANGLER_SEND_METRICS: "false", TERN_DEV_RATE_LIMIT: "1000" };

function runtimeOf(tern: Tern): number {
  const port = new URL(tern.url).port;
  const runtime = processTree(tern.child.pid!).find((pid) => {
    const comm = readFileSync(`/proc/${pid}/comm`, "utf8").trim();
    const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ");
    return comm === "workerd" && !cmd.includes(`entry=127.0.0.1:${port} `);
  });
  if (runtime === undefined) throw new Error("the Worker's workerd process was not found");
  return runtime;
}

export async function runMessageMemoryBench(log: (line: string) => void = console.log): Promise<MemoryRow[]> {
  const files = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    const total = Number(url.searchParams.get("bytes") ?? 0);
    res.writeHead(200, { "content-type": "application/octet-stream", ...(url.searchParams.has("undeclared") ? {} : { "content-length": total }) });
    const chunk = Buffer.alloc(64 * 1024, 97);
    let sent = 0;
    const pump = () => {
      while (sent < total && !res.destroyed) {
        const piece = chunk.subarray(0, Math.min(chunk.length, total - sent));
        sent += piece.length;
        if (!res.write(piece)) return void res.once("drain", pump);
      }
      if (!res.destroyed) res.end();
    };
    pump();
  });
  await new Promise<void>((r) => files.listen(0, "127.0.0.1", r));
  const filesUrl = `http://127.0.0.1:${(files.address() as AddressInfo).port}`;
  const rows: MemoryRow[] = [];

  let tern: Tern | undefined;
  let heap: IsolateHeap | undefined;
  let stateDir: string | undefined;
  /** A fresh workerd on the same state for each process of the list above. */
  const fresh = async () => {
    heap?.close();
    await tern?.stop();
    const inspector = await freePort();
    tern = await startTern({ env: { ...ternEnv, TERN_INSPECTOR_PORT: String(inspector) }, ...(stateDir ? { stateDir } : {}) });
    stateDir = tern.stateDir;
    const t = tern;
    const runtime = runtimeOf(t);
    const isolate = (heap = await IsolateHeap.connect(inspector));
    const call = async (method: string, path: string, body: Record<string, unknown>, headers: Record<string, string> = {}) => {
      const res = await fetch(`${t.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${t.apiKey}`, "content-type": "application/json", ...headers },
        body: JSON.stringify(body),
      });
      return { status: res.status, json: (await res.json()) as Record<string, unknown> };
    };
    const send = (body: Record<string, unknown>, headers?: Record<string, string>) => call("POST", "/emails", { from: `Mem <mem@${t.domain}>`, subject: "memory", text: "see attached", ...body }, headers);
    const delivered = async (to: string) => {
      for (let i = 0; i < 120; i++) {
        const list = (await (await fetch(`${t.relayHttp}/api/messages?to=${encodeURIComponent(to)}&wait=1000`)).json()) as { data: unknown[] };
        if (list.data.length > 0) return;
      }
      throw new Error(`${to} never reached the relay`);
    };
    const measure = async (name: string, what: string, run: () => Promise<string>) => {
      await new Promise((r) => setTimeout(r, 2_000)); // let the last scenario's garbage go
      const isoBefore = await isolate.collected();
      const before = rssMb(runtime);
      let peak = before;
      let isoPeak = isoBefore;
      const timer = setInterval(() => (peak = Math.max(peak, rssMb(runtime))), 10);
      // The isolate answers the inspector between its tasks: sampled as often as it answers.
      let running = true;
      const sampling = (async () => {
        while (running) {
          isoPeak = Math.max(isoPeak, await isolate.used());
          await new Promise((r) => setTimeout(r, 5));
        }
      })();
      const outcome = await run();
      await new Promise((r) => setTimeout(r, 500));
      running = false;
      await sampling;
      clearInterval(timer);
      if (Number.isNaN(rssMb(runtime))) throw new Error(`the Worker's workerd exited during ${name}:\n${t.output().slice(-4000)}`);
      const isoAfter = await isolate.collected();
      rows.push({ name, what, outcome, before, peak, isolate: { before: isoBefore, peak: isoPeak, after: isoAfter } });
      log(`${name.padEnd(10)} ${outcome.padEnd(36)} isolate ${isoBefore.toFixed(0)} -> peak ${isoPeak.toFixed(0)} MB (+${(isoPeak - isoBefore).toFixed(0)}), ${isoAfter.toFixed(0)} after; workerd RSS ${before.toFixed(0)} -> ${peak.toFixed(0)} MB (+${(peak - before).toFixed(0)})`);
    };
    return { call, send, delivered, measure };
  };

  const later = { id: "", to: `later-${Date.now()}@example.com` };
  try {
    let p = await fresh();
    await p.measure("small", "a 1 KB text email, accepted and delivered", async () => {
      const to = `small-${Date.now()}@example.com`;
      const r = await p.send({ to, text: "x".repeat(1024) });
      await p.delivered(to);
      return `${r.status}, delivered`;
    });

    p = await fresh();
    await p.measure("accept", "two 14 MB paths (one without a length), about 38 MB encoded, scheduled: acceptance alone", async () => {
      const r = await p.send({ to: later.to, scheduled_at: "in 1 day", attachments: [{ path: `${filesUrl}/a.bin?bytes=${14 * MB}` }, { path: `${filesUrl}/b.bin?bytes=${14 * MB}&undeclared` }] });
      later.id = String(r.json.id ?? "");
      return r.status === 200 ? "200, scheduled (accepted, not sent)" : `${r.status} ${JSON.stringify(r.json)}`;
    });

    p = await fresh();
    await p.measure("inline", "one 28 MB attachment as base64 `content` (39 MB of JSON), about 40 MB encoded, scheduled", async () => {
      const content = Buffer.alloc(28 * MB, 97).toString("base64");
      const r = await p.send({ to: "inline@example.com", scheduled_at: "in 1 day", attachments: [{ filename: "inline.bin", content }] });
      return r.status === 200 ? "200, scheduled (accepted, not sent)" : `${r.status} ${JSON.stringify(r.json).slice(0, 200)}`;
    });
    await p.measure("inline+key", "the same with an Idempotency-Key (the body canonicalised and hashed), scheduled", async () => {
      const content = Buffer.alloc(28 * MB, 98).toString("base64");
      const r = await p.send({ to: "inline@example.com", scheduled_at: "in 1 day", attachments: [{ filename: "inline.bin", content }] }, { "idempotency-key": `mem-${Date.now()}` });
      return r.status === 200 ? "200, scheduled (accepted, not sent)" : `${r.status} ${JSON.stringify(r.json).slice(0, 200)}`;
    });

    p = await fresh();
    await p.measure("attack", "three 30 MB paths (the issue's probe)", async () => {
      const r = await p.send({ to: "attack@example.com", attachments: [1, 2, 3].map((i) => ({ path: `${filesUrl}/f${i}?bytes=${30 * MB}` })) });
      return `${r.status} ${String(r.json.name ?? "")}`;
    });
    await p.measure("fetched", "three 14 MB paths: two written to R2, the third refused by its length, all deleted", async () => {
      const r = await p.send({ to: "refused@example.com", attachments: [1, 2, 3].map((i) => ({ path: `${filesUrl}/g${i}?bytes=${14 * MB}${i === 2 ? "&undeclared" : ""}` })) });
      return `${r.status} ${String(r.json.name ?? "")} (28 MB fetched)`;
    });

    p = await fresh();
    await p.measure("deliver", "the email `accept` scheduled, made due and delivered to the dev relay: delivery alone", async () => {
      const r = await p.call("PATCH", `/emails/${later.id}`, { scheduled_at: new Date(Date.now() + 1_000).toISOString() });
      if (r.status !== 200) return `${r.status} ${JSON.stringify(r.json)}`;
      await p.delivered(later.to);
      return "200, delivered (about 38 MB)";
    });
    heap?.close();
    heap = undefined;
    await tern?.stop();
    tern = undefined;
    rows.push(await r2Floor(`${filesUrl}/floor.bin?bytes=${28 * MB}`, log));
  } finally {
    heap?.close();
    await tern?.stop();
    files.close();
    if (stateDir) rmSync(stateDir, { recursive: true, force: true });
  }
  return rows;
}

/** The local R2's own cost for a 28 MB put whose bytes no JavaScript touches (bench/r2-floor/). */
async function r2Floor(url: string, log: (line: string) => void): Promise<MemoryRow> {
  const persist = mkdtempSync(join(tmpdir(), "tern-r2floor-"));
  const port = await freePort();
  const child = spawn(process.execPath,
    [WRANGLER, "dev", "--config", resolve(import.meta.dirname, "r2-floor", "wrangler.toml"), "--ip", "127.0.0.1", "--port", String(port), "--persist-to", persist, "--show-interactive-dev-session=false"],
    { env: { ...wranglerEnv(), X_LOCAL_OBSERVABILITY: "false", WRANGLER_SEND_METRICS: "false" }, stdio: ["ignore", "ignore", "ignore"], detached: true });
  try {
    const base = `http://127.0.0.1:${port}`;
    for (let i = 0; ; i++) {
      if (await fetch(`${base}/health`).then((r) => r.ok, () => false)) break;
      if (i > 300 || child.exitCode !== null) throw new Error("the R2 floor's wrangler dev did not start");
      await new Promise((r) => setTimeout(r, 200));
    }
    const runtime = processTree(child.pid!).find((pid) => {
      const comm = readFileSync(`/proc/${pid}/comm`, "utf8").trim();
      return comm === "workerd" && !readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ").includes(`entry=127.0.0.1:${port} `);
    });
    if (runtime === undefined) throw new Error("the R2 floor's workerd process was not found");
    await new Promise((r) => setTimeout(r, 2_000));
    const before = rssMb(runtime);
    let peak = before;
    const timer = setInterval(() => (peak = Math.max(peak, rssMb(runtime))), 10);
    const res = await fetch(`${base}/?u=${encodeURIComponent(url)}`);
    const outcome = `${res.status}, ${await res.text()} bytes put`;
    await new Promise((r) => setTimeout(r, 500));
    clearInterval(timer);
    log(`${"r2floor".padEnd(10)} ${outcome.padEnd(36)} workerd RSS before ${before.toFixed(0)} MB, peak ${peak.toFixed(0)} MB (+${(peak - before).toFixed(0)} MB)`);
    return { name: "r2floor", what: "not tern: a minimal Worker (bench/r2-floor/) putting 28 MB from a fetch's body straight into the local R2", outcome, before, peak };
  } finally {
    try {
      process.kill(-child.pid!, "SIGINT");
    } catch {
      // Already gone.
    }
    await new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(null) : child.once("exit", r)));
    rmSync(persist, { recursive: true, force: true });
  }
}
export function renderMessageMemory(rows: MemoryRow[], when: string, machine: string): string {
  const mb = (x: number) => `${x.toFixed(0)} MB`;
  return [
    `Measured ${when} on ${machine}. Command: \`BENCH_ONLY=memory npm run bench\` (or \`node bench/message-memory.ts\`). Each group of rows runs in a fresh workerd on the same state. **Isolate**: the Worker's V8 heap in use plus its ArrayBuffers' backing stores, read through the inspector (\`Runtime.getHeapUsage\`): after a full collection before the scenario, its highest sample during it (garbage not yet collected included), and after a full collection at its end. **workerd RSS**: the whole process (it also runs the local R2 and D1 simulations and holds network buffers), peak during the scenario.`,
    "",
    "| scenario | answer | isolate: before -> peak (growth), after | workerd RSS: before -> peak (growth) |",
    "|---|---|---|---|",
    ...rows.map((r) => `| ${r.name}: ${r.what} | ${r.outcome} | ${r.isolate ? `${mb(r.isolate.before)} -> ${mb(r.isolate.peak)} (**+${mb(r.isolate.peak - r.isolate.before)}**), ${mb(r.isolate.after)}` : "n/a"} | ${mb(r.before)} -> ${mb(r.peak)} (+${mb(r.peak - r.before)}) |`),
  ].join("\n");
}

export function writeMessageMemoryDoc(block: string): void {
  writeDoc(DOC, block, { begin: BEGIN, end: END });
}

if (import.meta.main) {
  const rows = await runMessageMemoryBench();
  const block = renderMessageMemory(rows, new Date().toISOString().slice(0, 10), `${cpus().length} cores (${cpus()[0]?.model ?? "unknown CPU"})`);
  console.log(`\n${block}`);
  if (process.env.BENCH_QUICK !== "1") writeMessageMemoryDoc(block);
}
