// A small closed-loop HTTP load generator: N workers, each with its own keep-alive connection,
// send requests back to back; after a warm-up, every completed request's latency is recorded
// for a fixed duration. Built on node:http (no extra dependency, and far less client CPU than
// fetch, which matters when the generator shares two cores with the server).
import { Agent, request, type OutgoingHttpHeaders } from "node:http";

export interface LoadOptions {
  url: string;
  method?: "GET" | "POST";
  headers?: OutgoingHttpHeaders;
  /** Extra headers for each request, merged over `headers` (e.g. a fresh Idempotency-Key). */
  headersFor?: () => OutgoingHttpHeaders;
  body?: string;
  /** The statuses that count as a success (default: any 2xx); anything else is an error. */
  okStatuses?: number[];
  connections: number;
  warmupMs: number;
  durationMs: number;
  /** Called with each successful response body completed in the measured window (e.g. to keep an id). */
  onBody?: (body: string) => void;
  /** Per-request timeout; a timeout counts as an error. */
  timeoutMs?: number;
  /** Called when the measured window opens and when it closes (e.g. to sample CPU time). */
  onWindow?: (edge: "start" | "end") => void;
}

export interface LoadResult {
  connections: number;
  /** Completed requests in the measured window (any status). */
  requests: number;
  /** Answers with a status other than the successful ones (non-2xx by default), plus
   * transport errors and timeouts, in the measured window. */
  errors: number;
  statuses: Record<string, number>;
  seconds: number;
  rps: number;
  p50: number;
  p99: number;
  mean: number;
  max: number;
}

/** The q-quantile (0..1) of sorted values, nearest rank. */
export function quantile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank]!;
}

export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** One request on `agent`; never rejects (a transport error or timeout is status 0). */
export function once(agent: Agent, url: URL, o: Pick<LoadOptions, "method" | "headers" | "headersFor" | "body" | "timeoutMs">): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const headers: OutgoingHttpHeaders = { ...o.headers, ...o.headersFor?.() };
    if (o.body !== undefined) headers["content-length"] = Buffer.byteLength(o.body);
    const req = request(
      { agent, host: url.hostname, port: url.port, path: url.pathname + url.search, method: o.method ?? "GET", headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", () => resolve({ status: 0, body: "" }));
      },
    );
    req.setTimeout(o.timeoutMs ?? 10_000, () => req.destroy(new Error("timeout")));
    req.on("error", () => resolve({ status: 0, body: "" }));
    req.end(o.body);
  });
}

export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const url = new URL(o.url);
  const start = performance.now();
  const measureFrom = start + o.warmupMs;
  const measureTo = measureFrom + o.durationMs;
  let latencies = new Float64Array(1 << 16);
  let n = 0;
  let errors = 0;
  const statuses: Record<string, number> = {};
  const agents: Agent[] = [];

  async function worker(): Promise<void> {
    // One connection per worker: a true closed loop of `connections` outstanding requests.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    agents.push(agent);
    while (performance.now() < measureTo) {
      const t0 = performance.now();
      const { status, body } = await once(agent, url, o);
      const t1 = performance.now();
      // Counted when it completes inside the measured window (throughput = completions / time).
      if (t1 < measureFrom || t1 > measureTo) continue;
      if (n === latencies.length) {
        const bigger = new Float64Array(latencies.length * 2);
        bigger.set(latencies);
        latencies = bigger;
      }
      latencies[n++] = t1 - t0;
      statuses[status] = (statuses[status] ?? 0) + 1;
      if (o.okStatuses ? !o.okStatuses.includes(status) : status < 200 || status > 299) errors++;
      else o.onBody?.(body);
    }
  }

  const timers = o.onWindow
    ? [setTimeout(() => o.onWindow!("start"), o.warmupMs), setTimeout(() => o.onWindow!("end"), o.warmupMs + o.durationMs)]
    : [];
  try {
    await Promise.all(Array.from({ length: o.connections }, () => worker()));
  } finally {
    for (const a of agents) a.destroy();
  }
  // The last worker can finish a moment before its timer fires.
  await new Promise((r) => setTimeout(r, Math.max(0, measureTo - performance.now()) + 1));
  for (const t of timers) clearTimeout(t);
  const sorted = latencies.subarray(0, n).sort();
  let sum = 0;
  for (let i = 0; i < n; i++) sum += sorted[i]!;
  const seconds = o.durationMs / 1000;
  return {
    connections: o.connections,
    requests: n,
    errors,
    statuses,
    seconds,
    rps: n / seconds,
    p50: quantile(sorted, 0.5),
    p99: quantile(sorted, 0.99),
    mean: n ? sum / n : NaN,
    max: n ? sorted[n - 1]! : NaN,
  };
}
