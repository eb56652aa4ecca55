// Metric rollups: the one place that says what an email event counts for, and the statement
// that adds it to its 15-minute bucket, its UTC hour and its UTC day (and its hours shifted to
// :15 and :30: see SPANS). Every site that records
// an email event (the accept path, delivery outcomes, tracking, delivery reports, unsubscribes)
// puts rollupItem's statement in the SAME D1 batch as the event, so a count never disagrees
// with the events it counts.
//
// Units: delivery outcomes count recipients (a send to three addresses is received three
// times, as the quota counts it); opens, clicks and unsubscribes count one each. Unique opens
// and clicks count an email once: at its first open (or click) ever.
import { getTableColumns } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import type { DrizzleD1Database } from "drizzle-orm/d1";
import { metricRollups } from "../db/schema.ts";

/** Bucket width: every UTC offset in use is a multiple of 15 minutes. */
export const BUCKET_MS = 15 * 60_000;

/** The counters a rollup row keeps, by their wire (and column) names. */
export const COUNTERS = [
  "received",
  "sent",
  "delivered",
  "delivery_delayed",
  "bounced",
  "bounced_permanent",
  "bounced_transient",
  "bounced_undetermined",
  "complained",
  "failed",
  "suppressed",
  "opened",
  "unique_opened",
  "clicked",
  "unique_clicked",
  "unsubscribed",
] as const;
export type Counter = (typeof COUNTERS)[number];
export type Counters = Record<Counter, number>;

const ZERO = Object.freeze(Object.fromEntries(COUNTERS.map((c) => [c, 0])) as Counters);

export function zeroCounters(): Counters {
  return { ...ZERO };
}

export function bucketOf(ms: number): number {
  return Math.floor(ms / BUCKET_MS);
}

/** A span rows are kept at: its id (the rows' `span` column), its length in buckets and where
 * its rows start (buckets b with b mod length = phase). */
export interface Span {
  id: number;
  length: number;
  phase: number;
}

/** The spans each event is counted at: its 15 minutes, its UTC hour, its UTC day, and its hour
 * shifted to start at :15 and at :30, where the hours (and days) of +05:45 and +05:30 zones
 * start (Kathmandu, Kolkata; St John's at -03:30): their periods then read hour rows, not four
 * times as many quarter hours (docs/benchmarks.md, metrics). No zone in use has hours starting
 * at :45. */
export const SPANS: readonly Span[] = [
  { id: 1, length: 1, phase: 0 },
  { id: 4, length: 4, phase: 0 },
  { id: 96, length: 96, phase: 0 },
  { id: 401, length: 4, phase: 1 },
  { id: 402, length: 4, phase: 2 },
];

/** The first bucket of a span's row that holds bucket b. */
export function spanStart(span: Span, b: number): number {
  return b - ((((b - span.phase) % span.length) + span.length) % span.length);
}

/** The coarsest span whose rows never straddle any of these edges (buckets): every edge is
 * where one of its rows starts. No edge: the UTC day. */
export function spanFor(edges: readonly number[]): Span {
  const fits = (s: Span) => edges.every((e) => spanStart(s, e) === e);
  return [...SPANS].sort((a, b) => b.length - a.length).find(fits)!;
}

/** An email event as stored: its type and data (email_events.type, data_json). */
export interface CountedEvent {
  type: string;
  data?: Record<string, unknown> | null;
}

function recipientCount(data: Record<string, unknown> | null | undefined): number {
  const r = data?.recipients;
  return Array.isArray(r) && r.length > 0 ? r.length : 1;
}

/**
 * What one event counts for, except the unique counters (they depend on the email's other
 * events: see uniqueCounterOf). The accept path's first event (queued or scheduled) names the
 * recipients it accepted: that is `received`; a reschedule's `scheduled` event names none and
 * counts nothing. canceled counts nothing.
 */
export function countersOf(e: CountedEvent): Partial<Counters> {
  const n = recipientCount(e.data);
  switch (e.type) {
    case "queued":
    case "scheduled":
      return Array.isArray(e.data?.recipients) ? { received: (e.data.recipients as unknown[]).length } : {};
    case "sent":
      return { sent: n };
    case "delivered":
      return { delivered: n };
    case "delivery_delayed":
      return { delivery_delayed: n };
    case "bounced": {
      const type = (e.data?.bounce as { type?: string } | undefined)?.type;
      const kind = type === "Permanent" ? "bounced_permanent" : type === "Transient" ? "bounced_transient" : "bounced_undetermined";
      return { bounced: n, [kind]: n };
    }
    case "complained":
      return { complained: n };
    case "failed":
      return { failed: n };
    case "suppressed":
      return { suppressed: n };
    case "opened":
      return { opened: 1 };
    case "clicked":
      return { clicked: 1 };
    case "unsubscribed":
      return { unsubscribed: 1 };
    default:
      return {};
  }
}

/** The unique counter an event may add to when it is its email's first of its type. */
export function uniqueCounterOf(type: string): "unique_opened" | "unique_clicked" | null {
  return type === "opened" ? "unique_opened" : type === "clicked" ? "unique_clicked" : null;
}

export function addCounters(into: Counters, add: Partial<Counters>): Counters {
  for (const k in add) into[k as Counter] += add[k as Counter]!;
  return into;
}

/** Where the events belong: the email's account, domain and broadcast, and when they happened. */
export interface RollupKey {
  accountId: string;
  domainId: string | null;
  broadcastId: string | null;
  at: number;
}

export interface RollupInput extends RollupKey {
  events: readonly CountedEvent[];
  /** For an open or a click: its email and the new event's id; the unique counter then counts
   * only if the email has no other event of that type (so each email counts once). */
  engagement?: { emailId: string; eventId: string };
  /** The id of an email event inserted earlier in the batch that may not have been (a report
   * ignored as a duplicate, a settlement whose lease was lost): the rollup counts only if that
   * row is there. */
  ifRecorded?: string;
}

// The statement is written here as text, once, rather than built by drizzle per event: drizzle
// took about 0.6 ms of CPU to build this 20-column upsert, which was most of what a rollup
// added to recording an event (docs/benchmarks.md, metrics). The columns are checked against
// the drizzle schema when the module loads, so the schema stays the one source.
for (const c of COUNTERS) {
  if (!Object.values(getTableColumns(metricRollups)).some((col) => col.name === c)) throw new Error(`metric_rollups has no column ${c}`);
}
const KEY_COLUMNS = `"account_id", "span", "bucket", "domain_id", "broadcast_id"`;

/** The statement's text around its values, for the counters an event touches (the others keep
 * their default 0 or their value): an open writes and adds two columns, not sixteen. One per
 * set of counters, built once. */
const shapes = new Map<string, { head: string; tail: string }>();
function shapeOf(touched: readonly Counter[]): { head: string; tail: string } {
  const key = touched.join(",");
  let shape = shapes.get(key);
  if (!shape) {
    shape = {
      head: `INSERT INTO "metric_rollups" (${KEY_COLUMNS}, ${touched.map((c) => `"${c}"`).join(", ")}) `,
      tail: ` ON CONFLICT (${KEY_COLUMNS}) DO UPDATE SET ${touched.map((c) => `"${c}" = "${c}" + excluded."${c}"`).join(", ")}`,
    };
    shapes.set(key, shape);
  }
  return shape;
}

/** The rollup upsert of some events as SQL text with `?` parameters; null when they count
 * nothing. */
export function rollupQuery(input: RollupInput, spans: readonly Span[] = SPANS): { sql: string; params: (string | number)[] } | null {
  const totals = zeroCounters();
  for (const e of input.events) addCounters(totals, countersOf(e));
  const uniques = new Set<string>(input.events.map((e) => uniqueCounterOf(e.type)).filter((u) => u !== null));
  const isUnique = (c: Counter) => uniques.has(c) && input.engagement !== undefined;
  const touched = COUNTERS.filter((c) => totals[c] !== 0 || isUnique(c));
  if (touched.length === 0) return null;
  const params: (string | number)[] = [input.accountId, input.domainId ?? "", input.broadcastId ?? ""];
  const values = touched.map((c) => {
    if (isUnique(c)) {
      // 1 when the email has no other event of this type: its first.
      params.push(input.engagement!.emailId, c === "unique_opened" ? "opened" : "clicked", input.engagement!.eventId);
      return `(NOT EXISTS (SELECT 1 FROM "email_events" e WHERE e."email_id" = ? AND e."type" = ? AND e."id" <> ?))`;
    }
    params.push(totals[c]);
    return "?";
  });
  const shape = shapeOf(touched);
  // One row per span: the event's 15-minute bucket, its UTC hour and day, its shifted hours.
  const b = bucketOf(input.at);
  let text = `${shape.head}SELECT ?, column1, column2, ?, ?, ${values.join(", ")} FROM (VALUES ${spans.map(() => "(?, ?)").join(", ")})`;
  for (const span of spans) params.push(span.id, spanStart(span, b));
  if (input.ifRecorded) {
    // Counted only if the event's row is there.
    text += ` WHERE EXISTS (SELECT 1 FROM "email_events" WHERE "id" = ?)`;
    params.push(input.ifRecorded);
  } else {
    // SQLite needs a WHERE between INSERT ... SELECT and ON CONFLICT to read the upsert.
    text += " WHERE true";
  }
  return { sql: text + shape.tail, params };
}

/**
 * The rollup statement for a drizzle batch: zero or one item, to spread into the batch, its
 * values bound as parameters. drizzle's batch binds parameters only for its builders' prepared
 * queries (a raw `sql` item with parameters has no statement to bind them to), so this item
 * answers the batch as those do: `_prepare()` gives the query, its D1 statement and a result
 * mapper. The first version wrote the values into the text instead: every event a new text
 * for SQLite to parse, most of what the rollup cost (docs/benchmarks.md, metrics). The real
 * event sites' batches go through it in test/worker/metrics.test.ts.
 */
export function rollupItem(db: DrizzleD1Database, input: RollupInput): BatchItem<"sqlite">[] {
  const q = rollupQuery(input);
  if (!q) return [];
  const d1 = (db as unknown as { $client: D1Database }).$client;
  const prepared = { getQuery: () => ({ sql: q.sql, params: q.params, method: "run" }), stmt: d1.prepare(q.sql), mapResult: (result: unknown) => result };
  return [{ _prepare: () => prepared } as unknown as BatchItem<"sqlite">];
}

/** The rollup statement for a plain D1 batch (the accept path's compiled statements). */
export function rollupStatement(d1: D1Database, input: RollupInput): D1PreparedStatement[] {
  const q = rollupQuery(input);
  return q ? [d1.prepare(q.sql).bind(...q.params)] : [];
}

/** Several rollups as one statement per domain, broadcast and bucket: counters add, so
 * counting their events together counts the same as one statement each (a send's emails, the
 * simulated outcomes of a queue batch). Inputs counted only if their event is recorded merge
 * into a statement that adds only theirs that are (guardedMergeQuery); inputs with an
 * engagement keep their own. */
export function mergedRollups(d1: D1Database, inputs: readonly RollupInput[]): D1PreparedStatement[] {
  const groups = new Map<string, RollupInput>();
  const guarded = new Map<string, RollupInput[]>();
  const own: RollupInput[] = [];
  for (const input of inputs) {
    if (input.engagement) {
      own.push(input);
      continue;
    }
    const key = `${input.accountId} ${input.domainId ?? ""} ${input.broadcastId ?? ""} ${bucketOf(input.at)}`;
    if (input.ifRecorded) {
      const list = guarded.get(key);
      if (list) list.push(input);
      else guarded.set(key, [input]);
      continue;
    }
    const group = groups.get(key);
    if (group) (group.events as CountedEvent[]).push(...input.events);
    else groups.set(key, { ...input, events: [...input.events] });
  }
  const merged = [...guarded.values()].map((parts) => (parts.length === 1 ? rollupQuery(parts[0]!) : guardedMergeQuery(parts)));
  return [
    ...[...groups.values(), ...own].flatMap((g) => rollupStatement(d1, g)),
    ...merged.flatMap((q) => (q ? [d1.prepare(q.sql).bind(...q.params)] : [])),
  ];
}

/**
 * The rollup of several inputs of one key, each counted only if its `ifRecorded` event is there
 * (a settlement's first event: absent when the settlement lost its lease). One statement for
 * all: each input's counts are a row of a JSON array bound once, [event id, counts...], and
 * the rows whose event exists are summed (nothing is written when none does).
 */
export function guardedMergeQuery(parts: readonly RollupInput[], spans: readonly Span[] = SPANS): { sql: string; params: (string | number)[] } | null {
  const totals = parts.map((p) => {
    const t = zeroCounters();
    for (const e of p.events) addCounters(t, countersOf(e));
    return t;
  });
  const touched = COUNTERS.filter((c) => totals.some((t) => t[c] !== 0));
  if (touched.length === 0) return null;
  const first = parts[0]!;
  const params: (string | number)[] = [first.accountId, first.domainId ?? "", first.broadcastId ?? ""];
  const b = bucketOf(first.at);
  for (const span of spans) params.push(span.id, spanStart(span, b));
  params.push(JSON.stringify(parts.map((p, i) => [p.ifRecorded!, ...touched.map((c) => totals[i]![c])])));
  const shape = shapeOf(touched);
  const sums = touched.map((c, i) => `sum(json_extract(value, '$[${i + 1}]')) AS "${c}"`).join(", ");
  const text = `${shape.head}SELECT ?, column1, column2, ?, ?, ${touched.map((c) => `w."${c}"`).join(", ")} FROM (VALUES ${spans.map(() => "(?, ?)").join(", ")}), `
    + `(SELECT ${sums}, count(*) AS "n" FROM json_each(?) WHERE EXISTS (SELECT 1 FROM "email_events" WHERE "id" = json_extract(value, '$[0]'))) AS w WHERE w."n" > 0`;
  return { sql: text + shape.tail, params };
}

/** The accept path's rollups: one statement per domain, broadcast and bucket of the emails a
 * send records (usually one for a whole batch), counting each email's recipients as received. */
export function acceptedRollups(
  d1: D1Database,
  emails: readonly { accountId: string; domainId: string | null; broadcastId: string | null; createdAt: number; pendingJson: string }[],
): D1PreparedStatement[] {
  return mergedRollups(d1, emails.map((e) => ({
    accountId: e.accountId, domainId: e.domainId, broadcastId: e.broadcastId, at: e.createdAt,
    events: [{ type: "queued", data: { recipients: JSON.parse(e.pendingJson) as string[] } }],
  })));
}
