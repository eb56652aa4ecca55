// Renders one run's numbers as markdown (printed, and written between the markers of
// docs/benchmarks.md; the hand-written text around the markers is kept).
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { PARTS, type CpuSample } from "./cpu.ts";
import type { LoadResult } from "./load.ts";
import { median } from "./load.ts";
import type { DeliveryResult } from "./delivery.ts";
import type { RoundTrips } from "./round-trips.ts";
import type { WrkResult } from "./wrk.ts";

export const BEGIN = "<!-- bench:results:begin (written by `npm run bench`; edit outside these markers) -->";
export const END = "<!-- bench:results:end -->";

export type Variant = "bare" | "send" | "scheduled" | "floor-bare" | "floor-write" | "floor-read";
/** Part 1's variants in the order of a round: tern's (the queue drained after send), then the floor's. */
export const VARIANTS: Variant[] = ["bare", "scheduled", "send", "floor-bare", "floor-write", "floor-read"];
export const TERN_VARIANTS: Variant[] = ["bare", "scheduled", "send"];
export const FLOOR_VARIANTS: Variant[] = ["floor-bare", "floor-write", "floor-read"];
/** The order of part 1's tables. */
const TABLE_ORDER: Variant[] = ["bare", "send", "scheduled", "floor-bare", "floor-write", "floor-read"];
export type OnceVariant = "send" | "send+key" | "auth" | "auth-unlimited";
export const ONCE_VARIANTS: OnceVariant[] = ["send", "send+key", "auth", "auth-unlimited"];
/** The most a fresh Idempotency-Key may cost, as send+key p50 / send p50. */
export const KEY_P50_TARGET = 1.5;

/** Part 4: runs, CPU and queue drains by connections and variant, as in part 1. */
export interface OnceResults {
  runs: Record<number, Record<OnceVariant, LoadResult[]>>;
  cpu: Record<number, Record<OnceVariant, CpuSample[]>>;
  drains: Record<number, number[]>;
}

export interface Settings {
  rounds: number;
  connections: number[];
  warmupMs: number;
  durationMs: number;
  deliveryCount: number;
  deliveryConcurrency: number;
  deliveryRounds: number;
  htmlBytes: number;
}

export interface Facts {
  date: string;
  nproc: string;
  free: string;
  cpu: string;
  loadBefore: string;
  loadAfter: string;
  node: string;
  wrangler: string;
  commit: string;
}

export interface Results {
  facts: Facts;
  settings: Settings;
  /** runs[connections][variant] = one result per round, in order. */
  runs: Record<number, Record<Variant, LoadResult[]>>;
  /** cpu[connections][variant] = CPU seconds by process over each round's measured window. */
  cpu: Record<number, Record<Variant, CpuSample[]>>;
  /** Seconds the queue consumer needed, after each send run, to finish the backlog. */
  drains: Record<number, number[]>;
  wrk: WrkResult[] | null;
  tern: DeliveryResult[];
  direct: DeliveryResult[];
  /** The delivery floor (bench/floor/delivery.ts) into the same relay, in the same rounds. */
  floor: DeliveryResult[];
  /** CPU seconds by process over each delivery phase (including the final check through the relay's API). */
  deliveryCpu: { tern: CpuSample[]; direct: CpuSample[]; floor: CpuSample[] };
  roundTrips: RoundTrips;
  once: OnceResults;
  seconds: number;
}

const f0 = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "n/a");
const f1 = (n: number) => (Number.isFinite(n) ? n.toFixed(1) : "n/a");
const f2 = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : "n/a");

const LABEL: Record<Variant, string> = {
  bare: "`GET /health` (bare route)",
  send: "`POST /emails` (accept a send)",
  scheduled: "`POST /emails` + `scheduled_at` (diagnostic)",
  "floor-bare": "floor: `GET /health` (the same bare route, minimal Worker)",
  "floor-write": "floor: `POST /write` (the send's D1 batch alone)",
  "floor-read": "floor: `GET /read` (one D1 read by primary key)",
};

export interface Summary {
  connections: number;
  bareRps: number;
  sendRps: number;
  bareP50: number;
  sendP50: number;
  rpsRatio: number;
  p50Ratio: number;
  rpsRange: [number, number];
  p50Range: [number, number];
  /** The floor (bench/floor.ts): its write (the send's D1 batch alone) and read over its bare route. */
  floorWrite: Ratio;
  floorRead: Ratio;
  /** tern's scheduled_at diagnostic over tern's bare route. */
  scheduled: Ratio;
  /** The floor's bare route over tern's: whether the two bare routes cost the same. */
  floorBareOverBare: Ratio;
}

/** One variant over another at the same connections: ratio of the rounds' medians, and the
 * range of the per-round ratios. */
export interface Ratio {
  rps: number;
  p50: number;
  rpsRange: [number, number];
  p50Range: [number, number];
}

export function ratioOf(over: LoadResult[], under: LoadResult[]): Ratio {
  const perRoundRps = over.map((s, i) => s.rps / under[i]!.rps);
  const perRoundP50 = over.map((s, i) => s.p50 / under[i]!.p50);
  return {
    rps: median(over.map((x) => x.rps)) / median(under.map((x) => x.rps)),
    p50: median(over.map((x) => x.p50)) / median(under.map((x) => x.p50)),
    rpsRange: [Math.min(...perRoundRps), Math.max(...perRoundRps)],
    p50Range: [Math.min(...perRoundP50), Math.max(...perRoundP50)],
  };
}

export function summarize(r: Results): Summary[] {
  return r.settings.connections.map((c) => {
    const v = r.runs[c]!;
    const bare = v.bare;
    const send = v.send;
    const main = ratioOf(send, bare);
    return {
      connections: c,
      bareRps: median(bare.map((x) => x.rps)),
      sendRps: median(send.map((x) => x.rps)),
      bareP50: median(bare.map((x) => x.p50)),
      sendP50: median(send.map((x) => x.p50)),
      rpsRatio: main.rps,
      p50Ratio: main.p50,
      rpsRange: main.rpsRange,
      p50Range: main.p50Range,
      floorWrite: ratioOf(v["floor-write"], v["floor-bare"]),
      floorRead: ratioOf(v["floor-read"], v["floor-bare"]),
      scheduled: ratioOf(v.scheduled, bare),
      floorBareOverBare: ratioOf(v["floor-bare"], bare),
    };
  });
}

const ONCE_LABEL: Record<OnceVariant, string> = {
  send: "`POST /emails`, no key",
  "send+key": "`POST /emails` + fresh `Idempotency-Key`",
  auth: "`GET /emails/<unknown id>`, rate-limited account",
  "auth-unlimited": "`GET /emails/<unknown id>`, account with rate limit 0",
};

export interface OnceSummary {
  connections: number;
  /** send+key over send: ratios of the rounds' medians, and the range of the per-round ratios. */
  keyP50Ratio: number;
  keyRpsRatio: number;
  keyP50Range: [number, number];
  keyRpsRange: [number, number];
  keyPass: boolean;
  /** auth minus auth-unlimited p50 in ms, and auth over auth-unlimited req/s. */
  limiterP50Ms: number;
  limiterRpsRatio: number;
  limiterP50Range: [number, number];
  limiterRpsRange: [number, number];
}

const range = (xs: number[]): [number, number] => [Math.min(...xs), Math.max(...xs)];

export function summarizeOnce(r: Results): OnceSummary[] {
  return r.settings.connections.map((c) => {
    const v = r.once.runs[c]!;
    const med = (runs: LoadResult[], pick: (x: LoadResult) => number) => median(runs.map(pick));
    const keyP50Ratio = med(v["send+key"], (x) => x.p50) / med(v.send, (x) => x.p50);
    return {
      connections: c,
      keyP50Ratio,
      keyRpsRatio: med(v["send+key"], (x) => x.rps) / med(v.send, (x) => x.rps),
      keyP50Range: range(v["send+key"].map((x, i) => x.p50 / v.send[i]!.p50)),
      keyRpsRange: range(v["send+key"].map((x, i) => x.rps / v.send[i]!.rps)),
      keyPass: keyP50Ratio <= KEY_P50_TARGET,
      limiterP50Ms: med(v.auth, (x) => x.p50) - med(v["auth-unlimited"], (x) => x.p50),
      limiterRpsRatio: med(v.auth, (x) => x.rps) / med(v["auth-unlimited"], (x) => x.rps),
      limiterP50Range: range(v.auth.map((x, i) => x.p50 - v["auth-unlimited"][i]!.p50)),
      limiterRpsRange: range(v.auth.map((x, i) => x.rps / v["auth-unlimited"][i]!.rps)),
    };
  });
}

/** CPU ms per completed request by process, medians of the rounds, and cores busy; null when /proc was not readable. */
function cpuRow(runs: LoadResult[], samples: CpuSample[]): string | null {
  if (samples.some((x) => x === null) || samples.length !== runs.length || runs.length === 0) return null;
  const perRequest = (pick: (x: NonNullable<CpuSample>) => number) => median(samples.map((x, i) => (pick(x!) * 1000) / Math.max(1, runs[i]!.requests)));
  const total = (x: NonNullable<CpuSample>) => PARTS.reduce((a, p) => a + x[p], 0);
  const busy = median(samples.map((x, i) => total(x!) / runs[i]!.seconds));
  return `${PARTS.map((p) => f2(perRequest((x) => x[p]))).join(" | ")} | ${f2(perRequest(total))} | ${f2(busy)}`;
}

function renderOnce(r: Results, L: (x?: string) => void): void {
  const s = r.settings;
  L(`#### 4. Exactly-once and rate limiting`);
  L();
  L(
    `Same generator, rounds and durations as part 1; each cell is the median of ${s.rounds} interleaved rounds of the four variants ` +
      `(in ABBA order: send, send+key, auth, auth-unlimited, then send+key, send, auth-unlimited, auth, ...; the queue drained after each send run). ` +
      `\`send+key\` sends the same body with a new \`Idempotency-Key\` on every request (the worst case: each request claims a new key, ` +
      `a row written with its answer in the send's own D1 batch). \`auth\` is the bare authenticated route: \`GET /emails/<a random UUID>\` (auth from the isolate's cache, ` +
      `the rate limiter, one D1 read, a 404), with the bench's account (limit 1,000,000/s, never refused: each request spends a token ` +
      `its isolate leased from the account's rate limiter object, 20,000 at a time, so few requests call the object) and with an account made by \`ops/admin.ts\` whose limit is 0 (no rate limiter call). 404 is the expected status of the \`auth\` rows.`,
  );
  L();
  L("| connections | request | req/s | p50 ms | p99 ms | requests (all rounds) | unexpected status |");
  L("|---:|---|---:|---:|---:|---:|---:|");
  for (const c of s.connections) {
    for (const v of ONCE_VARIANTS) {
      const runs = r.once.runs[c]![v];
      L(
        `| ${c} | ${ONCE_LABEL[v]} | ${f0(median(runs.map((x) => x.rps)))} | ${f1(median(runs.map((x) => x.p50)))} | ${f1(median(runs.map((x) => x.p99)))} | ` +
          `${f0(runs.reduce((a, x) => a + x.requests, 0))} | ${runs.reduce((a, x) => a + x.errors, 0)} |`,
      );
    }
  }
  L();
  L(
    `| connections | send+key/send p50 (rounds' range) | within the ${KEY_P50_TARGET}x target? | send+key/send req/s (rounds' range) | ` +
      `rate limiter: auth - auth-unlimited p50, ms (rounds' range) | auth/auth-unlimited req/s (rounds' range) | queue drain after a send run, s (median) |`,
  );
  L("|---:|---:|---|---:|---:|---:|---:|");
  for (const x of summarizeOnce(r)) {
    L(
      `| ${x.connections} | ${f2(x.keyP50Ratio)} (${f2(x.keyP50Range[0])}-${f2(x.keyP50Range[1])}) | ${x.keyPass ? "yes" : "**no**"} | ` +
        `${f2(x.keyRpsRatio)} (${f2(x.keyRpsRange[0])}-${f2(x.keyRpsRange[1])}) | ` +
        `${x.limiterP50Ms >= 0 ? "+" : ""}${f1(x.limiterP50Ms)} (${f1(x.limiterP50Range[0])} to ${f1(x.limiterP50Range[1])}) | ` +
        `${f2(x.limiterRpsRatio)} (${f2(x.limiterRpsRange[0])}-${f2(x.limiterRpsRange[1])}) | ${f1(median(r.once.drains[x.connections] ?? []))} |`,
    );
  }
  const rows: string[] = [];
  for (const c of s.connections) {
    for (const v of ONCE_VARIANTS) {
      const row = cpuRow(r.once.runs[c]![v], r.once.cpu[c]![v]);
      if (row) rows.push(`| ${c} | ${ONCE_LABEL[v]} | ${row} |`);
    }
  }
  if (rows.length) {
    L();
    L(`CPU milliseconds per completed request, by process, as in part 1 (in \`wrangler dev\` the Durable Objects run inside "worker runtime"):`);
    L();
    L(`| connections | request | ${PARTS.join(" | ")} | total | cores busy |`);
    L(`|---:|---|${PARTS.map(() => "---:").join("|")}|---:|---:|`);
    for (const row of rows) L(row);
  }
}

export function renderResults(r: Results): string {
  const s = r.settings;
  const lines: string[] = [];
  const L = (x = "") => lines.push(x);
  L(`### Last run: ${r.facts.date}`);
  L();
  L(`Command: \`npm run bench\` (\`node bench/run.ts\`, Node ${r.facts.node}, wrangler ${r.facts.wrangler}, commit \`${r.facts.commit}\`), ${f0(r.seconds)} s in all.`);
  L();
  L(`Machine: \`nproc\` = ${r.facts.nproc}, ${r.facts.cpu}; load average ${r.facts.loadBefore} before, ${r.facts.loadAfter} after.`);
  L();
  L("```");
  L(`$ free -m`);
  L(r.facts.free.trimEnd());
  L("```");
  L();
  L(`#### 1. Accepting an email vs a bare route`);
  L();
  L(
    `Closed loop, Node \`node:http\` generator, one keep-alive connection per worker; each cell is the median of ${s.rounds} ` +
      `interleaved rounds (bare, scheduled, send, then wait for the queue to drain, then the floor's bare, write and read), each ${s.durationMs / 1000} s measured after ` +
      `${s.warmupMs / 1000} s of warm-up. Send body: \`{"from":"Bench <bench@tern.test>","to":"delivered@simulator.tern.test","subject":"bench","text":"hello"}\`. ` +
      `The floor rows are a second, minimal Worker (\`bench/floor/\`) under its own \`wrangler dev\`, started the same way, with tern's schema: ` +
      `\`POST /write\` is one \`env.DB.batch()\` of the statements tern's accept path sends for this body (checked against tern's code before the run), ` +
      `with the same body on the wire and nothing else; tern is idle while the floor is measured and the other way round.`,
  );
  L();
  L("| connections | route | req/s | p50 ms | p99 ms | requests (all rounds) | non-2xx |");
  L("|---:|---|---:|---:|---:|---:|---:|");
  for (const c of s.connections) {
    for (const v of TABLE_ORDER) {
      const runs = r.runs[c]![v];
      L(
        `| ${c} | ${LABEL[v]} | ${f0(median(runs.map((x) => x.rps)))} | ${f1(median(runs.map((x) => x.p50)))} | ${f1(median(runs.map((x) => x.p99)))} | ` +
          `${f0(runs.reduce((a, x) => a + x.requests, 0))} | ${runs.reduce((a, x) => a + x.errors, 0)} |`,
      );
    }
  }
  L();
  const ratioCells = (x: Ratio) => `${f2(x.rps)} (${f2(x.rpsRange[0])}-${f2(x.rpsRange[1])}) | ${f2(x.p50)} (${f2(x.p50Range[0])}-${f2(x.p50Range[1])})`;
  L(
    "| connections | send/bare req/s (rounds' range) | send/bare p50 (rounds' range) | cost of a send in bare requests | within the 2x target? | " +
      "floor write/floor bare req/s (rounds' range) | floor write/floor bare p50 (rounds' range) | the D1 batch alone within the 2x target? | queue drain after a send run, s (median) |",
  );
  L("|---:|---:|---:|---:|---|---:|---:|---|---:|");
  for (const x of summarize(r)) {
    const within = x.rpsRatio >= 0.5 && x.p50Ratio <= 2;
    const floorWithin = x.floorWrite.rps >= 0.5 && x.floorWrite.p50 <= 2;
    L(
      `| ${x.connections} | ${f2(x.rpsRatio)} (${f2(x.rpsRange[0])}-${f2(x.rpsRange[1])}) | ${f2(x.p50Ratio)} (${f2(x.p50Range[0])}-${f2(x.p50Range[1])}) | ` +
        `${f1(1 / x.rpsRatio)}x | ${within ? "yes" : "no"} | ${ratioCells(x.floorWrite)} | ${floorWithin ? "yes" : "no"} | ${f1(median(r.drains[x.connections] ?? []))} |`,
    );
  }
  L();
  L(
    "Diagnostic ratios, same rounds: tern's `scheduled_at` send (auth, validation and the same batch plus a webhook outbox row, no queue) over tern's bare route; " +
      "the floor's one D1 read over the floor's bare route; and the floor's bare route over tern's (near 1 when the two bare routes cost the same, so the two " +
      "ratios share a yardstick).",
  );
  L();
  L("| connections | scheduled/bare req/s (rounds' range) | scheduled/bare p50 (rounds' range) | floor read/floor bare req/s (rounds' range) | floor read/floor bare p50 (rounds' range) | floor bare/tern bare req/s (rounds' range) | floor bare/tern bare p50 (rounds' range) |");
  L("|---:|---:|---:|---:|---:|---:|---:|");
  for (const x of summarize(r)) {
    L(`| ${x.connections} | ${ratioCells(x.scheduled)} | ${ratioCells(x.floorRead)} | ${ratioCells(x.floorBareOverBare)} |`);
  }
  const cpuRows: string[] = [];
  for (const c of s.connections) {
    for (const v of TABLE_ORDER) {
      const row = cpuRow(r.runs[c]![v], r.cpu[c]![v]);
      if (row) cpuRows.push(`| ${c} | ${LABEL[v]} | ${row} |`);
    }
  }
  if (cpuRows.length) {
    L();
    L(
      `Where the CPU goes: CPU milliseconds per completed request, by process, over the measured window (from /proc; medians of the rounds). ` +
        `"worker runtime" is the workerd running tern (with local D1, Queues and R2, and the queue consumer); "dev proxy" is the second workerd ` +
        `that \`wrangler dev\` puts on the public port (it forwards every request; nothing like it exists in production); ` +
        `"wrangler" is wrangler's Node processes (a log call arrives there for every request), "start+relay" is dev/start.ts with the dev relay in it, ` +
        `"generator" is this bench. "cores busy" is all of it over wall time (the machine has ${r.facts.nproc}). ` +
        `In the floor rows the same columns are the floor's own processes (its workerd, its dev proxy, its wrangler; it has no dev/start.ts or relay), ` +
        `and tern's idle processes are not counted.`,
    );
    L();
    L(`| connections | route | ${PARTS.join(" | ")} | total | cores busy |`);
    L(`|---:|---|${PARTS.map(() => "---:").join("|")}|---:|---:|`);
    for (const row of cpuRows) L(row);
  }
  if (r.wrk) {
    L();
    L("Cross-check of the bare route with `wrk -t1 --latency` (C, far less client CPU), run once after the rounds:");
    L();
    L("| connections | wrk req/s | wrk p50 ms | wrk p99 ms | Node generator req/s (median) |");
    L("|---:|---:|---:|---:|---:|");
    for (const w of r.wrk) {
      L(`| ${w.connections} | ${f0(w.rps)} | ${f1(w.p50)} | ${f1(w.p99)} | ${f0(median(r.runs[w.connections]!.bare.map((x) => x.rps)))} |`);
    }
  } else {
    L();
    L("(`wrk` was not installed: no cross-check.)");
  }
  L();
  L(`#### 2. End-to-end delivery into the dev relay vs nodemailer straight to the relay`);
  L();
  L(
    `${s.deliveryCount} emails to \`bench-<i>@example.com\`, ${s.htmlBytes.toLocaleString("en-US")} bytes of html each (tern derives the text part; ` +
      `nodemailer is given the same text), ${s.deliveryConcurrency} in flight; timed from the first request until the relay's ` +
      `mail directory holds all ${s.deliveryCount} (polled every 10 ms), then every recipient checked once through the relay's API. ` +
      `${s.deliveryRounds} interleaved rounds, relay emptied before each phase; medians.`,
  );
  L();
  const tern = r.tern;
  const direct = r.direct;
  L("| path | seconds | emails/s | accepted by the API in, s | mean message bytes |");
  L("|---|---:|---:|---:|---:|");
  L(
    `| tern: \`POST /emails\` -> D1 + queue -> consumer -> SMTP -> relay | ${f2(median(tern.map((x) => x.seconds)))} | ${f0(median(tern.map((x) => x.rate)))} | ` +
      `${f2(median(tern.map((x) => x.acceptSeconds ?? NaN)))} | ${f0(median(tern.map((x) => x.meanBytes)))} |`,
  );
  L(
    `| nodemailer, \`pool: true, maxConnections: 5\` -> relay | ${f2(median(direct.map((x) => x.seconds)))} | ${f0(median(direct.map((x) => x.rate)))} | - | ` +
      `${f0(median(direct.map((x) => x.meanBytes)))} |`,
  );
  const floor = r.floor;
  if (floor.length) {
    L(
      `| floor: a minimal Worker, \`POST /emails\` -> D1 + queue -> consumer -> DKIM, SMTP -> relay | ${f2(median(floor.map((x) => x.seconds)))} | ` +
        `${f0(median(floor.map((x) => x.rate)))} | ${f2(median(floor.map((x) => x.acceptSeconds ?? NaN)))} | ${f0(median(floor.map((x) => x.meanBytes)))} |`,
    );
  }
  L();
  const dcpu = (samples: CpuSample[], runs: DeliveryResult[]) => {
    if (samples.length !== runs.length || samples.some((x) => x === null)) return null;
    const per = (pick: (x: NonNullable<CpuSample>) => number) => median(samples.map((x, i) => (pick(x!) * 1000) / runs[i]!.messages));
    const total = (x: NonNullable<CpuSample>) => PARTS.reduce((a, p) => a + x[p], 0);
    const busy = median(samples.map((x, i) => total(x!) / runs[i]!.seconds));
    return `${PARTS.map((p) => f2(per((x) => x[p]))).join(" | ")} | ${f2(per(total))} | ${f2(busy)}`;
  };
  const ternCpu = dcpu(r.deliveryCpu.tern, tern);
  const directCpu = dcpu(r.deliveryCpu.direct, direct);
  if (ternCpu && directCpu) {
    L("CPU milliseconds per delivered email, by process (as above; \"generator\" is the bench: the HTTP client, or nodemailer):");
    L();
    L(`| path | ${PARTS.join(" | ")} | total | cores busy |`);
    L(`|---|${PARTS.map(() => "---:").join("|")}|---:|---:|`);
    L(`| tern end to end | ${ternCpu} |`);
    L(`| nodemailer direct | ${directCpu} |`);
    const floorCpu = dcpu(r.deliveryCpu.floor, floor);
    if (floor.length && floorCpu) L(`| floor (its own processes, and the relay in start+relay) | ${floorCpu} |`);
    L();
  }
  const logs = tern.map((x) => x.consumer).filter((x) => x !== null && x.batches > 0);
  if (logs.length === tern.length) {
    const busyShare = median(logs.map((x, i) => x!.busySeconds / tern[i]!.seconds));
    L(
      `tern's queue consumer, from wrangler dev's log lines: ${f0(median(logs.map((x) => x!.batches)))} batches per round ` +
        `(${f0(median(logs.map((x) => x!.messages)))} messages), median ${f0(median(logs.map((x) => x!.medianBatchMs)))} ms per batch; ` +
        `the batches' durations add up to ${f0(busyShare * 100)}% of the phase's wall time.`,
    );
    L();
  }
  const ratio = median(tern.map((x) => x.rate)) / median(direct.map((x) => x.rate));
  L(`tern end to end / direct to relay: **${f2(ratio)}** (rounds: ${tern.map((t, i) => f2(t.rate / direct[i]!.rate)).join(", ")}).`);
  if (floor.length) {
    // What any Worker reaches here: tern's ratio is read against it (docs/benchmarks.md).
    L(
      `The floor end to end / direct to relay: **${f2(median(floor.map((x) => x.rate)) / median(direct.map((x) => x.rate)))}** ` +
        `(rounds: ${floor.map((x, i) => f2(x.rate / direct[i]!.rate)).join(", ")}); tern / the floor: **${f2(median(tern.map((x, i) => x.rate / floor[i]!.rate)))}**.`,
    );
  }
  L();
  L(`#### 3. Cost of one accepted email`);
  L();
  const rt = r.roundTrips;
  if (rt.asserted) {
    const a = rt.asserted;
    L(
      `\`${"test/worker/round-trips.test.ts"}\` wraps the real D1, Queue and R2 bindings and counts every call while accepting one email ` +
        `(key and domain already cached in the isolate). It asserts ${Object.entries(a).map(([k, v]) => `${k} = ${v}`).join(", ")}, ` +
        `and it **${rt.status}** in this run (${f1(rt.seconds)} s).`,
    );
  } else {
    L(`\`test/worker/round-trips.test.ts\` is ${rt.status === "missing" ? "missing" : "unreadable (no `expect(counts).toEqual({...})`)"}: no measured figure.`);
  }
  L();
  renderOnce(r, L);
  return lines.join("\n");
}

const SKELETON = `# Benchmarks

Run them with \`npm run bench\` (about 5 minutes; never part of \`npm test\`).

${BEGIN}
${END}
`;

/** Replaces a generated block of the doc (by default the main one), keeping the rest. */
export function writeDoc(path: string, block: string, markers: { begin: string; end: string } = { begin: BEGIN, end: END }): void {
  let doc = existsSync(path) ? readFileSync(path, "utf8") : SKELETON;
  let begin = doc.indexOf(markers.begin);
  let end = doc.indexOf(markers.end);
  if (begin < 0 || end < begin) {
    doc = `${doc.trimEnd()}\n\n${markers.begin}\n${markers.end}\n`;
    begin = doc.indexOf(markers.begin);
    end = doc.indexOf(markers.end);
  }
  writeFileSync(path, `${doc.slice(0, begin + markers.begin.length)}\n${block}\n${doc.slice(end)}`);
}
