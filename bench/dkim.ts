// The cost of DKIM signing, measured in workerd: a small Worker (bench/dkim/worker.ts) renders
// a message the way the send consumer does and signs it with rsa-sha256, ed25519-sha256 or
// both, or not at all. Messages per second for 5 KB and 1 MB messages, each mode interleaved
// with the unsigned baseline in every round, so the ratios compare like with like on a noisy
// machine. Run alone: `node bench/dkim.ts` (BENCH_QUICK=1 for a smoke run); `npm run bench`
// runs it too. Writes its block of docs/benchmarks.md between its own markers.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { WRANGLER, wranglerEnv } from "../ops/d1.ts";
import { freePort } from "../test/support/processes.ts";
import { writeDoc } from "./report.ts";

const root = resolve(import.meta.dirname, "..");
const DOC = join(root, "docs", "benchmarks.md");
const BEGIN = "<!-- bench:dkim:begin (written by bench/dkim.ts; edit outside these markers) -->";
const END = "<!-- bench:dkim:end -->";

const MODES = ["unsigned", "rsa", "ed25519", "rsa+ed25519"] as const;
type Mode = (typeof MODES)[number];
const SIZES = [
  { label: "5 KB", bytes: 5 * 1024, perRequest: 40 },
  { label: "1 MB", bytes: 1024 * 1024, perRequest: 2 },
];

export interface DkimResult {
  size: string;
  messageBytes: number;
  /** Median messages per second over the rounds, per mode. */
  rate: Record<Mode, number>;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function waitUp(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error("wrangler dev (dkim bench) exited early");
    try {
      if ((await fetch(`${url}/?bytes=1&n=1&mode=unsigned`)).ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error("wrangler dev (dkim bench) did not start");
}

/** Messages per second for one cell: requests back to back for `ms`. */
async function measure(url: string, bytes: number, perRequest: number, mode: Mode, ms: number): Promise<number> {
  let messages = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    const res = await fetch(`${url}/?bytes=${bytes}&n=${perRequest}&mode=${encodeURIComponent(mode)}`);
    if (!res.ok) throw new Error(`dkim bench: ${res.status} ${await res.text()}`);
    messages += ((await res.json()) as { n: number }).n;
  }
  return messages / ((performance.now() - t0) / 1000);
}

export async function runDkimBench(opts: { quick: boolean; log: (line: string) => void }): Promise<DkimResult[]> {
  const port = await freePort();
  const state = mkdtempSync(join(tmpdir(), "tern-bench-dkim-"));
  const child = spawn(
    process.execPath,
    [WRANGLER, "dev", "-c", join(root, "bench", "dkim", "wrangler.toml"), "--ip", "127.0.0.1", "--port", String(port), "--persist-to", state, "--show-interactive-dev-session=false"],
    { cwd: root, env: wranglerEnv(), stdio: ["ignore", "pipe", "pipe"], detached: true },
  );
  let output = "";
  child.stdout!.on("data", (d) => (output = (output + d).slice(-4000)));
  child.stderr!.on("data", (d) => (output = (output + d).slice(-4000)));
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitUp(url, child);
    const rounds = opts.quick ? 1 : 3;
    const ms = opts.quick ? 400 : 2000;
    const results: DkimResult[] = [];
    for (const size of SIZES) {
      // Warm up: keys generated, code paths compiled.
      for (const mode of MODES) await measure(url, size.bytes, size.perRequest, mode, 300);
      const samples: Record<Mode, number[]> = { unsigned: [], rsa: [], ed25519: [], "rsa+ed25519": [] };
      for (let round = 1; round <= rounds; round++) {
        for (const mode of MODES) {
          const rate = await measure(url, size.bytes, size.perRequest, mode, ms);
          samples[mode].push(rate);
          opts.log(`dkim ${size.label} round ${round}/${rounds} ${mode.padEnd(11)} ${rate.toFixed(1)} messages/s`);
        }
      }
      const sizeRes = await (await fetch(`${url}/?bytes=${size.bytes}&n=1&mode=unsigned`)).json() as { size: number };
      results.push({
        size: size.label,
        messageBytes: sizeRes.size,
        rate: Object.fromEntries(MODES.map((m) => [m, median(samples[m])])) as Record<Mode, number>,
      });
    }
    return results;
  } catch (err) {
    opts.log(`dkim bench failed; wrangler said:\n${output}`);
    throw err;
  } finally {
    try {
      process.kill(-child.pid!, "SIGTERM");
    } catch {}
    await new Promise((r) => (child.exitCode !== null ? r(null) : child.once("exit", r)));
    rmSync(state, { recursive: true, force: true });
  }
}

export function renderDkim(results: DkimResult[], when: string, machine: string): string {
  const lines = [
    `Measured ${when} on ${machine}. Command: \`npm run bench\` (or \`node bench/dkim.ts\` alone).`,
    "",
    "Messages rendered (MIME, as the send consumer does) and signed per second by one workerd",
    "isolate, median of 3 interleaved rounds; the cost is per message, over the unsigned baseline.",
    "",
    "| message | unsigned /s | rsa-sha256 /s | ed25519-sha256 /s | both /s | rsa cost | ed25519 cost | both cost |",
    "|---|---|---|---|---|---|---|---|",
  ];
  for (const r of results) {
    const ms = (rate: number) => 1000 / rate;
    const cost = (m: Mode) => `+${(ms(r.rate[m]) - ms(r.rate.unsigned)).toFixed(2)} ms (${(r.rate[m] / r.rate.unsigned).toFixed(2)}x rate)`;
    lines.push(
      `| ${r.size} (${(r.messageBytes / 1024).toFixed(0)} KiB) | ${r.rate.unsigned.toFixed(0)} | ${r.rate.rsa.toFixed(0)} | ${r.rate.ed25519.toFixed(0)} | ${r.rate["rsa+ed25519"].toFixed(0)} | ${cost("rsa")} | ${cost("ed25519")} | ${cost("rsa+ed25519")} |`,
    );
  }
  return lines.join("\n");
}

export function writeDkimDoc(block: string): void {
  writeDoc(DOC, block, { begin: BEGIN, end: END });
}

if (import.meta.main) {
  const quick = process.env.BENCH_QUICK === "1";
  const started = performance.now();
  const log = (line: string) => console.log(`[dkim ${((performance.now() - started) / 1000).toFixed(0).padStart(3)}s] ${line}`);
  const results = await runDkimBench({ quick, log });
  const { cpus } = await import("node:os");
  const block = renderDkim(results, new Date().toISOString().slice(0, 10), `${cpus().length} cores (${cpus()[0]?.model ?? "unknown CPU"})`);
  console.log(block);
  if (!quick) writeDkimDoc(block);
}
