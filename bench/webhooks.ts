// Webhook throughput and latency, end to end: tern runs as `npm start` runs it (wrangler dev,
// its local queues), a webhook points at a loopback receiver that verifies every delivery with
// svix and standardwebhooks, and emails to the simulator's delivered@ address produce
// email.delivered events. Measured: events per second from the first outcome to the last
// receipt, and per event the time from the outcome (the delivered event's created_at) to its
// receipt, p50 and p99. Run alone: `node bench/webhooks.ts` (BENCH_QUICK=1 for a smoke run).
// Writes its block of docs/benchmarks.md between its own markers.
import { rmSync } from "node:fs";
import { cpus } from "node:os";
import { join, resolve } from "node:path";
import { startTern } from "../test/support/processes.ts";
import { startWebhookReceiver } from "../test/support/webhook-receiver.ts";
import { writeDoc } from "./report.ts";

const root = resolve(import.meta.dirname, "..");
const DOC = join(root, "docs", "benchmarks.md");
const BEGIN = "<!-- bench:webhooks:begin (written by bench/webhooks.ts; edit outside these markers) -->";
const END = "<!-- bench:webhooks:end -->";

export interface WebhookBenchResult {
  events: number;
  /** Events received per second, from the first outcome to the last receipt. */
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  verified: number;
  /** The same, with the emails paced (one every 100 ms): latency when the queues are idle. */
  paced: { events: number; p50Ms: number; p99Ms: number; maxMs: number; verified: number };
}

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

export async function runWebhookBench(opts: { quick: boolean; log: (line: string) => void }): Promise<WebhookBenchResult> {
  const events = opts.quick ? 100 : 2000;
  const receiver = await startWebhookReceiver({ timestamps: "real" });
  const tern = await startTern({ env: { TERN_DEV_PLAN: "scale_500k", TERN_DEV_RATE_LIMIT: "10000", TERN_CRON_INTERVAL_MS: "15000" } });
  try {
    const call = async (path: string, body: unknown) => {
      const res = await fetch(`${tern.url}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${tern.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
      return res.json() as Promise<any>;
    };
    const hook = await call("/webhooks", { endpoint: receiver.url("/bench"), events: ["email.delivered"] });
    receiver.setSecrets([hook.signing_secret], "/bench");
    // Paced first: one email every 100 ms, so each event meets idle queues.
    const pacedCount = opts.quick ? 20 : 100;
    opts.log(`paced: ${pacedCount} emails, one every 100 ms`);
    for (let i = 0; i < pacedCount; i++) {
      const t0 = performance.now();
      await call("/emails", { from: `Bench <bench@${tern.domain}>`, to: "delivered@simulator.tern.test", subject: `webhook bench paced ${i}`, text: "x" });
      await new Promise((r) => setTimeout(r, Math.max(0, 100 - (performance.now() - t0))));
    }
    const pacedGot = await receiver.waitForDeliveries(pacedCount, { path: "/bench", timeoutMs: 120_000 });
    const pacedLatencies = pacedGot.map((d) => d.receivedAt - Date.parse((JSON.parse(d.body) as { created_at: string }).created_at)).sort((a, b) => a - b);
    const paced = {
      events: pacedGot.length,
      p50Ms: quantile(pacedLatencies, 0.5),
      p99Ms: quantile(pacedLatencies, 0.99),
      maxMs: pacedLatencies.at(-1)!,
      verified: pacedGot.filter((d) => d.verified).length,
    };
    opts.log(`paced: ${paced.events} events, ${paced.verified} verified, p50 ${paced.p50Ms} ms, p99 ${paced.p99Ms} ms`);
    receiver.reset();

    opts.log(`sending ${events} emails to delivered@simulator.tern.test`);
    for (let i = 0; i < events; i += 100) {
      const n = Math.min(100, events - i);
      await call("/emails/batch", Array.from({ length: n }, (_, k) => ({
        from: `Bench <bench@${tern.domain}>`, to: "delivered@simulator.tern.test", subject: `webhook bench ${i + k}`, text: "x",
      })));
    }
    const got = await receiver.waitForDeliveries(events, { path: "/bench", timeoutMs: events * 200 + 60_000 });
    const latencies: number[] = [];
    let firstOutcome = Infinity;
    let lastReceipt = 0;
    for (const d of got) {
      const outcome = Date.parse((JSON.parse(d.body) as { created_at: string }).created_at);
      firstOutcome = Math.min(firstOutcome, outcome);
      lastReceipt = Math.max(lastReceipt, d.receivedAt);
      latencies.push(d.receivedAt - outcome);
    }
    latencies.sort((a, b) => a - b);
    const result = {
      events: got.length,
      perSecond: got.length / ((lastReceipt - firstOutcome) / 1000),
      p50Ms: quantile(latencies, 0.5),
      p99Ms: quantile(latencies, 0.99),
      maxMs: latencies.at(-1)!,
      verified: got.filter((d) => d.verified).length,
      paced,
    };
    opts.log(`${result.events} events, ${result.verified} verified, ${result.perSecond.toFixed(0)}/s, p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms`);
    if (result.verified !== result.events || paced.verified !== paced.events) throw new Error("some deliveries failed verification");
    return result;
  } finally {
    await tern.stop();
    await receiver.close();
    rmSync(tern.stateDir, { recursive: true, force: true });
  }
}

export function renderWebhooks(r: WebhookBenchResult, when: string, machine: string): string {
  return [
    `Measured ${when} on ${machine}. Command: \`node bench/webhooks.ts\`.`,
    "",
    `${r.events} emails to the simulator's delivered@ address through \`wrangler dev\` (local D1 and`,
    "Queues), each giving an email.delivered event fanned out to one webhook on a loopback receiver",
    "that verifies every delivery with svix and standardwebhooks. Latency runs from the outcome (the",
    "event's created_at) to the receipt of the signed POST. The emails are sent as one burst (batches",
    "of 100), so its latency includes the webhook queue's backlog: the worst case. The paced row is the",
    "idle case: each event meets empty queues (the webhook queue hands a batch over as soon as a message waits: `max_batch_timeout = 0`).",
    "",
    "| load | events | verified | events/s | p50 outcome → receipt | p99 | max |",
    "|---|---|---|---|---|---|---|",
    `| paced, 1 email / 100 ms (idle queues) | ${r.paced.events} | ${r.paced.verified} | - | ${r.paced.p50Ms} ms | ${r.paced.p99Ms} ms | ${r.paced.maxMs} ms |`,
    `| one burst (batches of 100) | ${r.events} | ${r.verified} | ${r.perSecond.toFixed(0)} | ${r.p50Ms} ms | ${r.p99Ms} ms | ${r.maxMs} ms |`,
  ].join("\n");
}

export function writeWebhooksDoc(block: string): void {
  writeDoc(DOC, block, { begin: BEGIN, end: END });
}

if (import.meta.main) {
  const quick = process.env.BENCH_QUICK === "1";
  const started = performance.now();
  const log = (line: string) => console.log(`[webhooks ${((performance.now() - started) / 1000).toFixed(0).padStart(3)}s] ${line}`);
  const result = await runWebhookBench({ quick, log });
  const block = renderWebhooks(result, new Date().toISOString().slice(0, 10), `${cpus().length} cores (${cpus()[0]?.model ?? "unknown CPU"})`);
  console.log(block);
  if (!quick) writeWebhooksDoc(block);
}
