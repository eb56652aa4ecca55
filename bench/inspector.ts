// CPU profiles of the Worker's isolates through wrangler's inspector (dev/start.ts passes
// TERN_INSPECTOR_PORT on): used by bench/profile-worker.ts and, with BENCH_PROFILE=1, by
// bench/broadcasts.ts. Summaries print the heaviest functions by self time; the .cpuprofile
// files open in Chrome DevTools.
import WebSocket from "ws";

export interface ProfilerSession {
  title: string;
  start(): Promise<void>;
  stop(): Promise<unknown>;
  close(): void;
}

/** One session per isolate the inspector lists (the Worker's, and any others wrangler runs). */
export async function attachProfilers(inspectorPort: number): Promise<ProfilerSession[]> {
  const targets = (await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json()) as { title: string; webSocketDebuggerUrl: string }[];
  return Promise.all(targets.map(async (t) => {
    const ws = new WebSocket(t.webSocketDebuggerUrl, { origin: "http://127.0.0.1", headers: { host: `127.0.0.1:${inspectorPort}` } });
    await new Promise((r, j) => { ws.on("open", r); ws.on("error", j); });
    let n = 0;
    const pending = new Map<number, (v: unknown) => void>();
    ws.on("message", (m: Buffer) => { const d = JSON.parse(String(m)); if (d.id && pending.has(d.id)) { pending.get(d.id)!(d.result); pending.delete(d.id); } });
    const call = (method: string, params: object = {}) => new Promise<any>((r) => { const id = ++n; pending.set(id, r); ws.send(JSON.stringify({ id, method, params })); });
    return {
      title: t.title,
      async start() {
        await call("Profiler.enable");
        await call("Profiler.setSamplingInterval", { interval: 100 });
        await call("Profiler.start");
      },
      async stop() {
        return (await call("Profiler.stop")).profile;
      },
      close: () => ws.close(),
    };
  }));
}

/** Samples are taken every 100 us (attachProfilers); a gap of over 1 ms is a pause in sampling. */
const MAX_SAMPLE_US = 1_000;

/** Prints where a profile's samples went, per unit of work (`units`: requests, emails). */
export function summarize(title: string, p: any, units: number, unitName = "req"): void {
  const byId = new Map<number, any>(p.nodes.map((n: any) => [n.id, n]));
  // A sample stands for the time until the next one (as DevTools reads it), but at most
  // MAX_SAMPLE_US: workerd stops sampling while the isolate waits (a timer, a D1 reply), and the
  // whole wait would otherwise be billed to whichever function ran just before or after it.
  const dt = new Map<number, number>();
  let unsampled = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const gap = p.timeDeltas[i + 1] ?? 0;
    dt.set(p.samples[i], (dt.get(p.samples[i]) ?? 0) + Math.min(gap, MAX_SAMPLE_US));
    unsampled += Math.max(0, gap - MAX_SAMPLE_US);
  }
  const total = [...dt.values()].reduce((a, b) => a + b, 0);
  const self = new Map<string, number>();
  const byUrl = new Map<string, number>();
  for (const [id, us] of dt) {
    const n = byId.get(id);
    const f = n.callFrame;
    const key = `${f.functionName || "(anon)"} ${String(f.url).split("/").slice(-2).join("/")}:${f.lineNumber}`;
    self.set(key, (self.get(key) ?? 0) + us);
    const u = f.url ? String(f.url).replace(/.*node_modules\//, "nm/").split("/").slice(0, 3).join("/") : f.functionName;
    byUrl.set(u, (byUrl.get(u) ?? 0) + us);
  }
  const idle = self.get("(idle) :-1") ?? 0;
  console.log(`\n== ${title}: ${(total / 1000).toFixed(0)} ms sampled (${(unsampled / 1000).toFixed(0)} ms waiting unsampled), busy ${((total - idle) / 1000).toFixed(0)} ms = ${((total - idle) / 1000 / units).toFixed(3)} ms/${unitName}`);
  for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log(`${(v / 1000).toFixed(1).padStart(8)} ms  ${(v / 1000 / units * 1000).toFixed(1).padStart(7)} us/${unitName}  ${k}`);
  console.log("-- by file/package");
  for (const [k, v] of [...byUrl].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`${(v / 1000).toFixed(1).padStart(8)} ms  ${k}`);
}
