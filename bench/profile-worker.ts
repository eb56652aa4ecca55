// Profiles the Worker's isolate (and any other isolates wrangler's inspector lists) while a
// closed-loop load runs: where does the CPU of one request go? A development tool, not part of
// `npm run bench`. Usage: npm run profile -- [send|scheduled|bare|key|relay][,...] [connections] [seconds]
// (relay: bench part 2's email, 5 KB of html to a recipient of the dev relay, so the queue
// consumer's real delivery path is in the profile)
// (PROFILE=0: load only; ROUNDS=n: interleaved rounds). Summaries print; the .cpuprofile files
// go to /tmp/prof/ for Chrome DevTools.
import { mkdirSync, writeFileSync } from "node:fs";
import { attachProfilers, summarize } from "./inspector.ts";
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
  const sessions = await attachProfilers(inspectorPort);
  console.log("inspector targets:", sessions.map((t) => t.title));
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
  if (profile) for (const s of sessions) await s.start();
  const r = await load(kind, seconds * 1000);
  console.log(`${kind} c=${connections}: ${r.rps.toFixed(0)} req/s p50 ${r.p50.toFixed(2)} ms p99 ${r.p99.toFixed(2)}, ${r.requests} requests, errors ${r.errors}`);
  await new Promise((res) => setTimeout(res, 1500)); // let the queue drain
  if (profile) for (const [i, s] of sessions.entries()) {
    const profile = await s.stop();
    writeFileSync(`/tmp/prof/${kind}-${i}.cpuprofile`, JSON.stringify(profile));
    summarize(s.title, profile, r.requests);
  }
  }
  for (const s of sessions) s.close();
} finally {
  await tern.stop();
}

