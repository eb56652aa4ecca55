// Profiles the Worker's isolate (and any other isolates wrangler's inspector lists) while a
// closed-loop load runs: where does the CPU of one request go? A development tool, not part of
// `npm run bench`. Usage: npm run profile -- [send|scheduled|bare|key|relay][,...] [connections] [seconds]
// (relay: bench part 2's email, 5 KB of html to a recipient of the dev relay, so the queue
// consumer's real delivery path is in the profile)
// (PROFILE=0: load only; ROUNDS=n: interleaved rounds). Summaries print; the .cpuprofile files
// go to /tmp/prof/ for Chrome DevTools.
import { mkdirSync, writeFileSync } from "node:fs";
import WebSocket from "ws";
import { runLoad } from "./load.ts";
import { htmlOfSize } from "./delivery.ts";
import { freePort, startTern } from "../test/support/processes.ts";

const kinds = (process.argv[2] ?? "send").split(",");
const profile = process.env.PROFILE !== "0";
const connections = Number(process.argv[3] ?? 2);
const seconds = Number(process.argv[4] ?? 6);
// A port of its own: wrangler's default (9229) may be another session's wrangler on a shared
// machine, whose isolate would then be profiled instead of this one.
const inspectorPort = await freePort();
mkdirSync("/tmp/prof", { recursive: true });

const tern = await startTern({ env: { TERN_INSPECTOR_PORT: String(inspectorPort), X_LOCAL_OBSERVABILITY: "false", WRANGLER_SEND_METRICS: "false", TERN_CRON_INTERVAL_MS: "15000", TERN_DEV_RATE_LIMIT: "1000000", TERN_DEV_PLAN: "scale_2_5m" } });
try {
  const auth = { authorization: `Bearer ${tern.apiKey}`, "content-type": "application/json" };
  const targets = (await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json()) as { id: string; title: string; webSocketDebuggerUrl: string }[];
  console.log("inspector targets:", targets.map((t) => t.title));
  const sessions = await Promise.all(targets.map(async (t) => {
    console.log(t.webSocketDebuggerUrl);
    const ws = new WebSocket(t.webSocketDebuggerUrl, { origin: "http://127.0.0.1" , headers: { host: `127.0.0.1:${inspectorPort}` } });
    await new Promise((r, j) => { ws.on("open", r); ws.on("error", j); });
    let n = 0;
    const pending = new Map<number, (v: unknown) => void>();
    ws.on("message", (m: Buffer) => { const d = JSON.parse(String(m)); if (d.id && pending.has(d.id)) { pending.get(d.id)!(d.result); pending.delete(d.id); } });
    const call = (method: string, params: object = {}) => new Promise<any>((r) => { const id = ++n; pending.set(id, r); ws.send(JSON.stringify({ id, method, params })); });
    return { t, ws, call };
  }));
  const load = (kind: string, durationMs: number) => runLoad({
    url: kind === "bare" ? `${tern.url}/health` : `${tern.url}/emails`,
    method: kind === "bare" ? "GET" : "POST",
    headers: auth,
    headersFor: kind === "key" ? () => ({ "idempotency-key": crypto.randomUUID() }) : undefined,
    body: kind === "bare" ? undefined
      : kind === "relay" ? JSON.stringify({ from: "Bench <bench@tern.test>", to: "bench-profile@example.com", subject: "bench", html: htmlOfSize(5 * 1024) })
      : JSON.stringify({ from: "Bench <bench@tern.test>", to: "delivered@simulator.tern.test", subject: "bench", text: "hello", ...(kind === "scheduled" ? { scheduled_at: new Date(Date.now() + 86400_000).toISOString() } : {}) }),
    connections, warmupMs: 1000, durationMs,
  });
  for (const kind of kinds) await load(kind, 2000); // warm
  for (let round = 0; round < Number(process.env.ROUNDS ?? 1); round++) for (const kind of kinds) {
  if (profile) for (const s of sessions) { await s.call("Profiler.enable"); await s.call("Profiler.setSamplingInterval", { interval: 100 }); await s.call("Profiler.start"); }
  const r = await load(kind, seconds * 1000);
  console.log(`${kind} c=${connections}: ${r.rps.toFixed(0)} req/s p50 ${r.p50.toFixed(2)} ms p99 ${r.p99.toFixed(2)}, ${r.requests} requests, errors ${r.errors}`);
  await new Promise((res) => setTimeout(res, 1500)); // let the queue drain
  if (profile) for (const [i, s] of sessions.entries()) {
    const { profile } = await s.call("Profiler.stop");
    writeFileSync(`/tmp/prof/${kind}-${i}.cpuprofile`, JSON.stringify(profile));
    summarize(s.t.title, profile, r.requests);
  }
  }
  for (const s of sessions) s.ws.close();
} finally {
  await tern.stop();
}

function summarize(title: string, p: any, requests: number) {
  const byId = new Map<number, any>(p.nodes.map((n: any) => [n.id, n]));
  const dt = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) dt.set(p.samples[i], (dt.get(p.samples[i]) ?? 0) + (p.timeDeltas[i] ?? 0));
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
  console.log(`\n== ${title}: ${(total / 1000).toFixed(0)} ms sampled, busy ${((total - idle) / 1000).toFixed(0)} ms = ${((total - idle) / 1000 / requests).toFixed(3)} ms/request`);
  for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log(`${(v / 1000).toFixed(1).padStart(8)} ms  ${(v / 1000 / requests * 1000).toFixed(1).padStart(7)} us/req  ${k}`);
  console.log("-- by file/package");
  for (const [k, v] of [...byUrl].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`${(v / 1000).toFixed(1).padStart(8)} ms  ${k}`);
}
