// Where the CPU of a metrics bench request goes (a development tool, not part of `npm run
// bench`): starts the metrics bench's Worker (bench/metrics/worker.ts) under `wrangler dev`
// with an inspector, seeds it, then profiles each named request run n times and prints self
// time by function and by file. SQLite work of local D1 shows as "(program)" (native).
// Usage: node bench/metrics-profile.ts <kind>[,<kind>...] [n]
//   kinds: pk, hourly720utc, hourly720ktm, daily30ny, record0, record1, open0, open1, deliver0, deliver1
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import WebSocket from "ws";
import { d1Target, runWrangler, WRANGLER, wranglerEnv } from "../ops/d1.ts";
import { freePort } from "../test/support/processes.ts";

const root = resolve(import.meta.dirname, "..");
const CONFIG = join(root, "bench", "metrics", "wrangler.toml");
const kinds = (process.argv[2] ?? "hourly720ktm").split(",");
const n = Number(process.argv[3] ?? 200);
mkdirSync("/tmp/prof", { recursive: true });

const state = mkdtempSync(join(tmpdir(), "tern-prof-metrics-"));
const persistTo = join(state, "wrangler");
runWrangler(["d1", "migrations", "apply", "DB", ...d1Target(false, persistTo), "--config", CONFIG]);
const port = await freePort();
const inspector = await freePort();
const child = spawn(process.execPath, [WRANGLER, "dev", "-c", CONFIG, "--ip", "127.0.0.1", "--port", String(port), "--inspector-port", String(inspector), "--persist-to", persistTo, "--show-interactive-dev-session=false"], {
  cwd: root, env: wranglerEnv(), stdio: ["ignore", "pipe", "pipe"], detached: true,
});
const stop = () => {
  try {
    process.kill(-child.pid!, "SIGTERM");
  } catch {}
};
process.once("exit", stop);
try {
  const url = `http://127.0.0.1:${port}`;
  for (const deadline = Date.now() + 90_000; !(await fetch(`${url}/health`).then((r) => r.ok, () => false)); ) {
    if (Date.now() > deadline) throw new Error("wrangler dev did not start");
    await new Promise((r) => setTimeout(r, 300));
  }
  console.log("seeded", await (await fetch(`${url}/setup`, { method: "POST" })).json());
  const now = Date.now();
  const iso = (t: number) => new Date(t).toISOString();
  const day = Math.floor(now / 86_400_000) * 86_400_000;
  const hour = Math.floor(now / 3_600_000) * 3_600_000;
  const requests: Record<string, () => Promise<Response>> = {
    pk: () => fetch(`${url}/pk`),
    daily30ny: () => fetch(`${url}/metrics?start_date=${iso(day - 29 * 86_400_000)}&end_date=${iso(day + 86_400_000)}&granularity=daily&dimensions=period&timezone=America/New_York`),
    hourly720utc: () => fetch(`${url}/metrics?start_date=${iso(hour - 719 * 3_600_000)}&end_date=${iso(hour + 3_600_000)}&granularity=hourly&dimensions=period`),
    hourly720ktm: () => fetch(`${url}/metrics?start_date=${iso(hour - 719 * 3_600_000)}&end_date=${iso(hour + 3_600_000)}&granularity=hourly&dimensions=period&timezone=Asia/Kathmandu`),
    record0: () => fetch(`${url}/record?n=1&rollup=0`, { method: "POST" }),
    record1: () => fetch(`${url}/record?n=1&rollup=1`, { method: "POST" }),
    open0: () => fetch(`${url}/open?n=1&rollup=0&pool=${Math.ceil((n + 20) / 4)}`, { method: "POST" }),
    open1: () => fetch(`${url}/open?n=1&rollup=1&pool=${Math.ceil((n + 20) / 4)}`, { method: "POST" }),
    deliver0: () => fetch(`${url}/deliver?n=1&rollup=0`, { method: "POST" }),
    deliver1: () => fetch(`${url}/deliver?n=1&rollup=1`, { method: "POST" }),
  };
  const targets = (await (await fetch(`http://127.0.0.1:${inspector}/json`)).json()) as { title: string; webSocketDebuggerUrl: string }[];
  const target = targets.find((t) => !/proxy/i.test(t.title)) ?? targets[0]!;
  const ws = new WebSocket(target.webSocketDebuggerUrl, { headers: { host: `127.0.0.1:${inspector}` } });
  await new Promise((r, j) => (ws.on("open", r), ws.on("error", j)));
  let id = 0;
  const pending = new Map<number, (v: any) => void>();
  ws.on("message", (m: Buffer) => {
    const d = JSON.parse(String(m));
    if (d.id && pending.has(d.id)) (pending.get(d.id)!(d.result), pending.delete(d.id));
  });
  const call = (method: string, params: object = {}) => new Promise<any>((r) => (pending.set(++id, r), ws.send(JSON.stringify({ id, method, params }))));
  for (const kind of kinds) {
    if (kind.startsWith("deliver")) await fetch(`${url}/sending?n=${n + 20}`, { method: "POST" });
    if (kind.startsWith("open")) await fetch(`${url}/pool?n=${Math.ceil((n + 20) / 4)}`, { method: "POST" });
    for (let i = 0; i < 20; i++) await (await requests[kind]!()).arrayBuffer();
    await call("Profiler.enable");
    await call("Profiler.setSamplingInterval", { interval: 100 });
    await call("Profiler.start");
    for (let i = 0; i < n; i++) {
      const res = await requests[kind]!();
      if (!res.ok) throw new Error(`${kind}: ${res.status} ${await res.text()}`);
      await res.arrayBuffer();
    }
    const { profile } = await call("Profiler.stop");
    writeFileSync(`/tmp/prof/metrics-${kind}.cpuprofile`, JSON.stringify(profile));
    summarize(kind, profile, n);
  }
  ws.close();
} finally {
  stop();
  await new Promise((r) => (child.exitCode !== null ? r(null) : child.once("exit", r)));
  rmSync(state, { recursive: true, force: true });
}

function summarize(title: string, p: any, requests: number) {
  const byId = new Map<number, any>(p.nodes.map((node: any) => [node.id, node]));
  const dt = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) dt.set(p.samples[i], (dt.get(p.samples[i]) ?? 0) + (p.timeDeltas[i] ?? 0));
  const self = new Map<string, number>();
  const byUrl = new Map<string, number>();
  let total = 0;
  for (const [nodeId, us] of dt) {
    const f = byId.get(nodeId).callFrame;
    total += us;
    const key = `${f.functionName || "(anon)"} ${String(f.url).split("/").slice(-2).join("/")}:${f.lineNumber}`;
    self.set(key, (self.get(key) ?? 0) + us);
    const u = f.url ? String(f.url).replace(/.*node_modules\//, "nm/").split("/").slice(-3).join("/") : f.functionName;
    byUrl.set(u, (byUrl.get(u) ?? 0) + us);
  }
  const idle = self.get("(idle) :-1") ?? 0;
  console.log(`\n== ${title}: busy ${((total - idle) / 1000 / requests).toFixed(3)} ms/request (${requests} requests)`);
  for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 25)) if (!k.startsWith("(idle)")) console.log(`${(v / requests).toFixed(0).padStart(7)} us/req  ${k}`);
  console.log("-- by file");
  for (const [k, v] of [...byUrl].sort((a, b) => b[1] - a[1]).slice(0, 12)) if (k !== "(idle)") console.log(`${(v / requests).toFixed(0).padStart(7)} us/req  ${k}`);
}
