// Answers a metrics query. Without email filters the counts are sums of rollup rows (never a
// scan of emails or events): one grouped read over the account's buckets in the range. With
// `email_id` they come from those emails' own events, mapped by the same countersOf, so both
// ways count alike. Rates are fractions (0.25 is 25%) computed from the summed counts.
import { addCounters, BUCKET_MS, countersOf, COUNTERS, spanFor, uniqueCounterOf, zeroCounters, type Counter, type Counters } from "./rollup.ts";
import { periodIndex, periodStarts } from "./periods.ts";
import { MAX_PERIODS, RATE_METRICS, type Dimension, type Metric, type MetricsQuery } from "./query.ts";
import { ApiError } from "../errors.ts";

export type MetricsRow = Partial<Record<Metric, number>> & {
  period?: string;
  domain_id?: string;
  domain_name?: string | null;
  email_id?: string;
  broadcast_id?: string;
};

export interface MetricsAnswer {
  object: "metrics";
  start_date: string;
  end_date: string;
  metrics: Metric[];
  dimensions: Dimension[];
  granularity: MetricsQuery["granularity"];
  totals: Partial<Record<Metric, number>>;
  data?: MetricsRow[];
}

/** A rate's numerator and denominator. delivered and bounced are shares of what tern accepted;
 * engagement and complaints are shares of what receiving servers took (sent), which is known
 * even when the relay is not the final hop. */
export const RATES: Record<(typeof RATE_METRICS)[number], readonly [Counter, Counter]> = {
  delivery_rate: ["delivered", "received"],
  bounce_rate: ["bounced", "received"],
  complaint_rate: ["complained", "sent"],
  open_rate: ["unique_opened", "sent"],
  click_rate: ["unique_clicked", "sent"],
  unsubscribe_rate: ["unsubscribed", "sent"],
};

/** Most rows an answer may hold (periods times the other dimensions' values). */
export const MAX_ROWS = 50_000;

export function rate(numerator: number, denominator: number): number {
  return denominator === 0 ? 0 : Math.round((numerator / denominator) * 1e6) / 1e6;
}

/** How each metric is read from counters: a counter, or a rate of two. */
type MetricPlan = readonly (readonly [Metric, Counter, Counter | null])[];

function metricPlan(metrics: readonly Metric[]): MetricPlan {
  return metrics.map((m) => {
    const r = RATES[m as keyof typeof RATES];
    return r ? ([m, r[0], r[1]] as const) : ([m, m as Counter, null] as const);
  });
}

/** Writes the metrics' values onto a row (an answer's rows are many: no object in between). */
function fillMetrics(into: Partial<Record<Metric, number>>, c: Counters, plan: MetricPlan): Partial<Record<Metric, number>> {
  for (const [m, a, b] of plan) into[m] = b === null ? c[a] : rate(c[a], c[b]);
  return into;
}

/** The counters a query needs read: its count metrics and its rates' terms. */
function neededCounters(metrics: readonly Metric[]): Counter[] {
  const need = new Set<Counter>();
  for (const m of metrics) {
    const r = RATES[m as keyof typeof RATES];
    if (r) r.forEach((c) => need.add(c));
    else need.add(m as Counter);
  }
  return COUNTERS.filter((c) => need.has(c));
}

function gcd(a: number, b: number): number {
  while (b) [a, b] = [b, a % b];
  return a;
}

/** A group of counts before it becomes a row: its period index and dimension values. */
interface Group {
  period: number;
  domainId: string;
  emailId: string;
  broadcastId: string;
  counters: Counters;
}

export async function emailMetrics(d1: D1Database, accountId: string, q: MetricsQuery): Promise<MetricsAnswer> {
  const byPeriod = q.dimensions.includes("period");
  const starts = byPeriod ? periodStarts(q.timezone, q.granularity, q.start, q.end, MAX_PERIODS) : [];
  if (starts === null) {
    throw new ApiError("validation_error", `\`granularity\` \`${q.granularity}\` gives more than ${MAX_PERIODS} periods for this date range; choose a coarser granularity or a shorter range.`);
  }
  const groups = q.emailIds.length > 0 ? await fromEvents(d1, accountId, q, starts) : await fromRollups(d1, accountId, q, starts);

  const totals = zeroCounters();
  for (const g of groups.values()) addCounters(totals, g.counters);
  const plan = metricPlan(q.metrics);
  const answer: MetricsAnswer = {
    object: "metrics",
    start_date: new Date(q.start).toISOString(),
    end_date: new Date(q.end).toISOString(),
    metrics: q.metrics,
    dimensions: q.dimensions,
    granularity: q.granularity,
    totals: fillMetrics({}, totals, plan),
  };
  if (q.dimensions.length === 0) return answer;

  // Every period of the range, for each combination of the other dimensions that has counts
  // (with period alone: every period, counts or not), so a chart has no holes.
  const combos = new Map<string, Omit<Group, "period" | "counters">>();
  for (const g of groups.values()) {
    // Mail without a domain or a broadcast is in the totals, never a row of its own.
    if ((q.dimensions.includes("domain") && g.domainId === "") || (q.dimensions.includes("broadcast") && g.broadcastId === "")) continue;
    combos.set(`${g.domainId} ${g.emailId} ${g.broadcastId}`, { domainId: g.domainId, emailId: g.emailId, broadcastId: g.broadcastId });
  }
  if (byPeriod && q.dimensions.length === 1 && combos.size === 0) combos.set("  ", { domainId: "", emailId: "", broadcastId: "" });
  const periods = byPeriod ? starts.map((_, i) => i) : [-1];
  if (periods.length * combos.size > MAX_ROWS) {
    throw new ApiError("validation_error", `This query would answer more than ${MAX_ROWS} rows; narrow the date range, use a coarser \`granularity\` or filter by \`domain_id\`.`);
  }
  const names = q.dimensions.includes("domain") ? await domainNames(d1, accountId, [...new Set([...combos.values()].map((c) => c.domainId))]) : new Map<string, string>();
  // Rows by period, then by domain name and ids: the combinations are sorted once, and each
  // period's rows are laid out in that order (no sort of every row).
  const ordered = [...combos.values()].map((combo) => ({ combo, sort: `${names.get(combo.domainId) ?? ""} ${combo.domainId} ${combo.emailId} ${combo.broadcastId}` }));
  ordered.sort((a, b) => (a.sort < b.sort ? -1 : a.sort > b.sort ? 1 : 0));
  const zero = zeroCounters();
  const days = new Map<number, string>();
  const data: MetricsRow[] = [];
  for (const p of periods) {
    const period = byPeriod ? isoOf(starts[p]!, days) : undefined;
    for (const { combo } of ordered) {
      const g = groups.get(groupKey(p, combo.domainId, combo.emailId, combo.broadcastId));
      const row: MetricsRow = {};
      if (period !== undefined) row.period = period;
      if (q.dimensions.includes("domain")) {
        row.domain_id = combo.domainId;
        row.domain_name = names.get(combo.domainId) ?? null;
      }
      if (q.dimensions.includes("email")) row.email_id = combo.emailId;
      if (q.dimensions.includes("broadcast")) row.broadcast_id = combo.broadcastId;
      fillMetrics(row, g?.counters ?? zero, plan);
      data.push(row);
    }
  }
  answer.data = data;
  return answer;
}

const DAY_MS = 86_400_000;
const pad2 = (n: number) => (n < 10 ? `0${n}` : `${n}`);

/** Date#toISOString of an instant, the date part formatted once a day: 720 hourly periods
 * spent about 1 ms in toISOString, five times this. */
function isoOf(t: number, days: Map<number, string>): string {
  const day = Math.floor(t / DAY_MS);
  let prefix = days.get(day);
  if (prefix === undefined) days.set(day, (prefix = new Date(day * DAY_MS).toISOString().slice(0, 11)));
  const ms = t - day * DAY_MS;
  const milli = ms % 1000;
  return `${prefix}${pad2(Math.floor(ms / 3_600_000))}:${pad2(Math.floor(ms / 60_000) % 60)}:${pad2(Math.floor(ms / 1000) % 60)}.${milli < 10 ? `00${milli}` : milli < 100 ? `0${milli}` : milli}Z`;
}

function groupKey(period: number, domainId: string, emailId: string, broadcastId: string): string {
  return `${period} ${domainId} ${emailId} ${broadcastId}`;
}

function addTo(groups: Map<string, Group>, period: number, domainId: string, emailId: string, broadcastId: string, add: Partial<Counters>): void {
  const key = groupKey(period, domainId, emailId, broadcastId);
  let g = groups.get(key);
  if (!g) groups.set(key, (g = { period, domainId, emailId, broadcastId, counters: zeroCounters() }));
  addCounters(g.counters, add);
}

/** Sums of rollup rows. The periods' edges inside the range pick the span: UTC days when every
 * edge is a UTC midnight, hours when every edge is on the hour, quarter hours otherwise
 * (+05:30, +05:45). The range's own ends need not be on those edges ("the last 30 days" ends
 * now): the whole spans inside it come from the coarse rows, the quarter hours before and after
 * from the fine ones. Rows of a span are grouped in SQL by the largest run of buckets that
 * never straddles an edge, so a 30-day daily answer reads about 30 rows per domain. */
async function fromRollups(d1: D1Database, accountId: string, q: MetricsQuery, starts: number[]): Promise<Map<string, Group>> {
  const { sql: text, params, counters } = rollupSumQuery(accountId, q, starts);
  // Rows as arrays (b0, domain_id, broadcast_id, then the counters): D1 turning each row into
  // an object was the largest part of a 720-period answer's CPU (docs/benchmarks.md, metrics).
  const rows = await d1.prepare(text).bind(...params).raw<(number | string)[]>();
  const groups = new Map<string, Group>();
  for (const r of rows) {
    const period = starts.length > 0 ? periodIndex(starts, Number(r[0]) * BUCKET_MS) : -1;
    const add: Partial<Counters> = {};
    for (let i = 0; i < counters.length; i++) add[counters[i]!] = Number(r[3 + i] ?? 0);
    addTo(groups, period, String(r[1]), "", String(r[2]), add);
  }
  return groups;
}

/** The grouped sums over the account's rollup rows in the range, as one statement of up to
 * three parts (the coarse middle, the fine head and tail), each a range of the primary key
 * (account_id, span, bucket, ...): checked in test/worker/query-plans.test.ts. Each row of the
 * answer is a group of rows lying within one period, b0 its first bucket. Groups are runs of k
 * buckets from a phase: every edge is the phase plus a multiple of k, so a run never straddles
 * one (Kathmandu's hours start at :15, phase 1 and k 4: one row per hour, not four). */
export function rollupSumQuery(accountId: string, q: MetricsQuery, starts: readonly number[]): { sql: string; params: unknown[]; counters: Counter[] } {
  const first = q.start / BUCKET_MS;
  const last = q.end / BUCKET_MS;
  const edges = starts.map((s) => Math.floor(s / BUCKET_MS)).filter((e) => e > first && e < last);
  // The coarsest span whose rows fit between the edges (no edge inside: totals, or one period).
  const span = spanFor(edges);
  // Its rows wholly inside the range: from a to b.
  const a = first + ((span.phase - first) % span.length + span.length) % span.length;
  const b = last - ((last - span.phase) % span.length + span.length) % span.length;
  // The runs: k divides the distance between any two edges; the phase is where they start.
  // With one edge or none, runs as long as the whole range.
  let k = 0;
  for (const e of edges) k = gcd(k, e - edges[0]!);
  if (k === 0) k = Math.max(1, last - first);
  const phase = edges.length > 0 ? ((edges[0]! % k) + k) % k : first % k;
  const parts: { span: number; length: number; from: number; to: number }[] = [];
  if (a < b) {
    parts.push({ span: span.id, length: span.length, from: a, to: b });
    if (first < a) parts.push({ span: 1, length: 1, from: first, to: a });
    if (b < last) parts.push({ span: 1, length: 1, from: b, to: last });
  } else if (first < last) {
    parts.push({ span: 1, length: 1, from: first, to: last });
  }
  const byDomain = q.dimensions.includes("domain");
  const byBroadcast = q.dimensions.includes("broadcast");
  const counters = neededCounters(q.metrics);
  const params: unknown[] = [];
  // k and the phase are computed integers, written into the SQL so the division stays an
  // integer one (buckets are past the phase: no negative division).
  const run = `(bucket - ${Math.trunc(phase)}) / ${Math.trunc(k)}`;
  const selects = parts.map((part) => {
    const select = [
      "MIN(bucket) AS b0",
      byDomain ? "domain_id" : "'' AS domain_id",
      byBroadcast ? "broadcast_id" : "'' AS broadcast_id",
      ...counters.map((c) => `SUM(${c}) AS ${c}`),
    ];
    const where = ["account_id = ?", "span = ?", "bucket >= ?", "bucket < ?"];
    params.push(accountId, part.span, part.from, part.to);
    if (q.domainIds.length > 0) {
      where.push("domain_id IN (SELECT value FROM json_each(?))");
      params.push(JSON.stringify(q.domainIds));
    }
    if (q.broadcastIds.length > 0) {
      where.push("broadcast_id IN (SELECT value FROM json_each(?))");
      params.push(JSON.stringify(q.broadcastIds));
    }
    // When each row is a run of its own (720 hours read from hour rows), grouping by the
    // bucket itself follows the key's order: SQLite sums as it reads, with no sort.
    const ownRun = part.length === k && (((part.from - phase) % k) + k) % k === 0;
    const groupBy = [ownRun ? "bucket" : run, ...(byDomain ? ["domain_id"] : []), ...(byBroadcast ? ["broadcast_id"] : [])];
    return `SELECT ${select.join(", ")} FROM metric_rollups WHERE ${where.join(" AND ")} GROUP BY ${groupBy.join(", ")}`;
  });
  // An empty range still answers one statement (with no rows).
  const sql = selects.length > 0 ? selects.join(" UNION ALL ") : "SELECT 0 AS b0, '' AS domain_id, '' AS broadcast_id WHERE false";
  return { sql, params, counters };
}

/** Counts from the named emails' own events. Every event of those emails is read (a unique
 * open is the email's first open ever), counted when it falls in the range. */
async function fromEvents(d1: D1Database, accountId: string, q: MetricsQuery, starts: number[]): Promise<Map<string, Group>> {
  const domainFilter = q.domainIds.length > 0 ? " AND domain_id IN (SELECT value FROM json_each(?3))" : "";
  const { results: found } = await d1.prepare(`SELECT id, domain_id FROM emails WHERE account_id = ?1 AND id IN (SELECT value FROM json_each(?2))${domainFilter}`)
    .bind(accountId, JSON.stringify(q.emailIds), ...(q.domainIds.length > 0 ? [JSON.stringify(q.domainIds)] : []))
    .all<{ id: string; domain_id: string | null }>();
  const groups = new Map<string, Group>();
  if (found.length === 0) return groups;
  const domainOf = new Map(found.map((e) => [e.id, e.domain_id ?? ""]));
  const { results: events } = await d1.prepare(
    "SELECT email_id, type, data_json, created_at FROM email_events WHERE email_id IN (SELECT value FROM json_each(?1)) AND account_id = ?2 ORDER BY email_id, id",
  ).bind(JSON.stringify(found.map((e) => e.id)), accountId).all<{ email_id: string; type: string; data_json: string; created_at: number }>();
  const byDomain = q.dimensions.includes("domain");
  const byEmail = q.dimensions.includes("email");
  const seen = new Set<string>();
  for (const e of events) {
    const unique = uniqueCounterOf(e.type);
    const firstOfEmail = unique !== null && !seen.has(`${e.email_id} ${e.type}`);
    if (unique) seen.add(`${e.email_id} ${e.type}`);
    if (e.created_at < q.start || e.created_at >= q.end) continue;
    const domainId = domainOf.get(e.email_id)!;
    const add = countersOf({ type: e.type, data: JSON.parse(e.data_json) as Record<string, unknown> });
    if (unique && firstOfEmail) add[unique] = 1;
    const period = starts.length > 0 ? periodIndex(starts, e.created_at) : -1;
    addTo(groups, period, byDomain ? domainId : "", byEmail ? e.email_id : "", "", add);
  }
  return groups;
}

async function domainNames(d1: D1Database, accountId: string, ids: string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map();
  const { results } = await d1.prepare("SELECT id, name FROM domains WHERE account_id = ?1 AND id IN (SELECT value FROM json_each(?2))")
    .bind(accountId, JSON.stringify(ids)).all<{ id: string; name: string }>();
  return new Map(results.map((r) => [r.id, r.name]));
}
