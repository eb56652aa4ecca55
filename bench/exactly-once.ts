// Part 4 of `npm run bench`: what exactly-once sending and the rate limiter cost.
//   send           POST /emails without an Idempotency-Key (never touches idempotency_keys);
//   send+key       the same with a fresh key per request: every request claims a new key (two
//                  more statements in the send's D1 batch, worker/sending/idempotency.ts);
//   auth           GET /emails/<unknown id> with the bench's account (limited at 1,000,000/s, so
//                  never refused; its isolate leases 20,000 tokens at a time from the account's
//                  rate limiter object, worker/rate-limit.ts, so few requests call it);
//   auth-unlimited the same with an account whose rate limit is 0: no rate limiter call at all.
// The unlimited account is made while tern runs with the operator command (ops/admin.ts) against
// tern's local state. Interleaved rounds in ABBA order (the second of each pair first on even
// rounds) so that a drift in the machine's load does not favour one side of a pair.
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import type { TernProcess } from "../test/support/processes.ts";
import { measuredLoad } from "./cpu.ts";
import { runLoad, type LoadOptions, type LoadResult } from "./load.ts";
import type { OnceResults, OnceVariant, Settings } from "./report.ts";

export interface PhaseContext {
  root: string;
  t: TernProcess;
  settings: Settings;
  quick: boolean;
  maxErrorShare: number;
  log: (line: string) => void;
  describe: (r: LoadResult) => string;
  drain: (t: TernProcess, id: string | null) => Promise<number>;
  /** Registers a helper process group (negative pid) so that the bench's cleanup can end it. */
  track: (pid: number, done: boolean) => void;
}

const ADMIN_TIMEOUT_MS = 60_000;

/** `node ops/admin.ts ...` in its own process group (it runs wrangler d1 execute under it). */
function admin(c: PhaseContext, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(c.root, "ops", "admin.ts"), ...args, "--persist-to", join(c.t.stateDir, "wrangler")], {
      cwd: c.root,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
    });
    const group = child.pid === undefined ? undefined : -child.pid;
    if (group !== undefined) c.track(group, false);
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    const timer = setTimeout(() => {
      try {
        if (group !== undefined) process.kill(group, "SIGKILL");
      } catch {}
    }, ADMIN_TIMEOUT_MS);
    const done = () => {
      clearTimeout(timer);
      if (group !== undefined) c.track(group, true);
    };
    child.on("error", (e) => {
      done();
      reject(e);
    });
    child.on("exit", (code, signal) => {
      done();
      if (code === 0) resolve(out);
      else reject(new Error(`node ops/admin.ts ${args[0]} exited with ${code ?? signal}:\n${out}${err}`));
    });
  });
}

async function probe(url: string, init: RequestInit): Promise<Response> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(10_000) });
  await res.arrayBuffer();
  return res;
}

/** Makes the unlimited account and checks, once each, that every variant takes the path it means to. */
async function prepare(c: PhaseContext, emailUrl: string, sendBody: string): Promise<string> {
  const { t, log } = c;
  const created = JSON.parse(await admin(c, ["create-account", "bench-unlimited", "--plan", "scale_2_5m"])) as { account_id: string; api_key: string };
  await admin(c, ["set-rate-limit", created.account_id, "0"]);
  log(`  made account ${created.account_id} with rate limit 0 (ops/admin.ts create-account, set-rate-limit)`);

  const limited = await probe(emailUrl, { headers: { authorization: `Bearer ${t.apiKey}` } });
  if (limited.status !== 404 || !limited.headers.has("ratelimit-limit")) {
    throw new Error(`GET unknown email with the bench's key: ${limited.status}, ratelimit-limit ${limited.headers.get("ratelimit-limit")} (expected 404 with the header)`);
  }
  const unlimited = await probe(emailUrl, { headers: { authorization: `Bearer ${created.api_key}` } });
  if (unlimited.status !== 404 || unlimited.headers.has("ratelimit-limit")) {
    throw new Error(`GET unknown email with the unlimited key: ${unlimited.status}, ratelimit-limit ${unlimited.headers.get("ratelimit-limit")} (expected 404 without the header)`);
  }
  const init = { method: "POST", body: sendBody, headers: { authorization: `Bearer ${t.apiKey}`, "content-type": "application/json", "idempotency-key": `bench-probe-${randomUUID()}` } };
  const first = await fetch(`${t.url}/emails`, { ...init, signal: AbortSignal.timeout(10_000) });
  const firstBody = await first.text();
  const again = await fetch(`${t.url}/emails`, { ...init, signal: AbortSignal.timeout(10_000) });
  const againBody = await again.text();
  if (first.status !== 200 || again.status !== 200 || again.headers.get("idempotent-replayed") !== "true" || againBody !== firstBody) {
    throw new Error(`POST /emails with an Idempotency-Key did not replay: ${first.status} ${firstBody} then ${again.status} ${againBody}`);
  }
  return created.api_key;
}

export async function phaseFour(c: PhaseContext): Promise<OnceResults> {
  const { t, settings, log } = c;
  log("phase 4: exactly-once sending and the rate limiter");
  const json = { "content-type": "application/json" };
  const body = JSON.stringify({ from: "Bench <bench@tern.test>", to: "delivered@simulator.tern.test", subject: "bench", text: "hello" });
  const unknownEmail = `${t.url}/emails/${randomUUID()}`;
  const unlimitedKey = await prepare(c, unknownEmail, body);

  const run = randomUUID().slice(0, 8);
  let keys = 0;
  const variants: Record<OnceVariant, Omit<LoadOptions, "connections" | "warmupMs" | "durationMs">> = {
    send: { url: `${t.url}/emails`, method: "POST", headers: { authorization: `Bearer ${t.apiKey}`, ...json }, body },
    "send+key": { url: `${t.url}/emails`, method: "POST", headers: { authorization: `Bearer ${t.apiKey}`, ...json }, headersFor: () => ({ "idempotency-key": `bench-${run}-${++keys}` }), body },
    auth: { url: unknownEmail, headers: { authorization: `Bearer ${t.apiKey}` }, okStatuses: [404] },
    "auth-unlimited": { url: unknownEmail, headers: { authorization: `Bearer ${unlimitedKey}` }, okStatuses: [404] },
  };
  const sends = (v: OnceVariant) => v === "send" || v === "send+key";
  const port = Number(new URL(t.url).port);
  const out: OnceResults = { runs: {}, cpu: {}, drains: {} };
  for (const n of settings.connections) {
    out.runs[n] = { send: [], "send+key": [], auth: [], "auth-unlimited": [] };
    out.cpu[n] = { send: [], "send+key": [], auth: [], "auth-unlimited": [] };
    out.drains[n] = [];
  }

  let lastId: string | null = null;
  const keepId = (b: string) => {
    lastId = (JSON.parse(b) as { id: string }).id;
  };
  log("phase 4: warming up (not recorded)");
  for (const v of ["send+key", "auth", "auth-unlimited"] as OnceVariant[]) {
    lastId = null;
    await runLoad({ ...variants[v], connections: 32, warmupMs: 0, durationMs: c.quick ? 500 : 1500, onBody: sends(v) ? keepId : undefined });
    await c.drain(t, lastId);
  }

  for (let round = 1; round <= settings.rounds; round++) {
    const order: OnceVariant[] = round % 2 ? ["send", "send+key", "auth", "auth-unlimited"] : ["send+key", "send", "auth-unlimited", "auth"];
    for (const n of settings.connections) {
      for (const v of order) {
        lastId = null;
        const { result: r, cpu } = await measuredLoad(t.child.pid, port, { ...variants[v], connections: n, warmupMs: settings.warmupMs, durationMs: settings.durationMs, onBody: sends(v) ? keepId : undefined });
        out.runs[n]![v].push(r);
        out.cpu[n]![v].push(cpu);
        log(`phase 4 round ${round}/${settings.rounds}, ${String(n).padStart(2)} connections, ${v.padEnd(14)}: ${c.describe(r)}`);
        if (r.requests === 0) throw new Error(`${v} at ${n} connections completed no request`);
        if (r.errors / r.requests > c.maxErrorShare) {
          throw new Error(`${v} at ${n} connections: ${r.errors} of ${r.requests} answers were not ${sends(v) ? "2xx" : "404"}: ${JSON.stringify(r.statuses)}`);
        }
        if (sends(v)) {
          const s = await c.drain(t, lastId);
          out.drains[n]!.push(s);
          log(`  queue drained ${s.toFixed(1)} s after the ${v} run`);
        }
      }
    }
  }
  return out;
}
