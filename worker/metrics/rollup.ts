// Metric rollups: the one place that says what an email event counts for, and the statement
// that adds it to its 15-minute bucket. Every site that records an email event (the accept
// path, delivery outcomes, tracking, delivery reports, unsubscribes) puts rollupItem's statement
// in the SAME D1 batch as the event, so a count never disagrees with the events it counts.
//
// Units: delivery outcomes count recipients (a send to three addresses is received three
// times, as the quota counts it); opens, clicks and unsubscribes count one each. Unique opens
// and clicks count an email once: at its first open (or click) ever.
import { eq, getTableColumns, sql, type SQL } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { drizzle, type DrizzleD1Database } from "drizzle-orm/d1";
import { statementOf } from "../db/compiled.ts";
import { emailEvents, metricRollups } from "../db/schema.ts";

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

export function zeroCounters(): Counters {
  return Object.fromEntries(COUNTERS.map((c) => [c, 0])) as Counters;
}

export function bucketOf(ms: number): number {
  return Math.floor(ms / BUCKET_MS);
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
  /** The id of an email event inserted earlier in the batch with ON CONFLICT DO NOTHING: the
   * rollup counts only if that row is there (a duplicate report counts nothing). */
  ifRecorded?: string;
}

/** The schema's property of each counter column ("bounced_permanent" -> bouncedPermanent). */
const COUNTER_KEYS: Record<Counter, keyof typeof metricRollups.$inferInsert> = Object.fromEntries(
  COUNTERS.map((c) => {
    const entry = Object.entries(getTableColumns(metricRollups)).find(([, col]) => col.name === c);
    if (!entry) throw new Error(`metric_rollups has no column ${c}`);
    return [c, entry[0]];
  }),
) as Record<Counter, keyof typeof metricRollups.$inferInsert>;

/** Adding to a row that exists: each counter plus the new row's. */
const ADD_TO_EXISTING = Object.fromEntries(
  COUNTERS.map((c) => [COUNTER_KEYS[c], sql`${sql.identifier(c)} + excluded.${sql.identifier(c)}`]),
) as Record<string, SQL>;
const TARGET = [metricRollups.accountId, metricRollups.bucket, metricRollups.domainId, metricRollups.broadcastId];

/** The rollup upsert of some events; null when they count nothing. */
export function rollupQuery(db: DrizzleD1Database, input: RollupInput) {
  const totals = zeroCounters();
  for (const e of input.events) addCounters(totals, countersOf(e));
  const uniques = new Set<string>(input.events.map((e) => uniqueCounterOf(e.type)).filter((u) => u !== null));
  if (COUNTERS.every((c) => totals[c] === 0) && (uniques.size === 0 || !input.engagement)) return null;
  const values: Record<string, SQL> = {
    accountId: sql`${input.accountId}`,
    bucket: sql`${bucketOf(input.at)}`,
    domainId: sql`${input.domainId ?? ""}`,
    broadcastId: sql`${input.broadcastId ?? ""}`,
  };
  for (const c of COUNTERS) {
    const type = c === "unique_opened" ? "opened" : c === "unique_clicked" ? "clicked" : null;
    values[COUNTER_KEYS[c]] = type && uniques.has(c) && input.engagement
      // 1 when the email has no other event of this type: its first.
      ? sql`(NOT EXISTS (SELECT 1 FROM ${emailEvents} e WHERE e.email_id = ${input.engagement.emailId} AND e.type = ${type} AND e.id <> ${input.engagement.eventId}))`
      : sql`${totals[c]}`;
  }
  if (input.ifRecorded) {
    const columns = getTableColumns(metricRollups) as Record<string, { name: string }>;
    const selected = Object.fromEntries(Object.entries(values).map(([k, v]) => [k, v.as(columns[k]!.name)]));
    // Counted only if the event's row is there: INSERT ... SELECT ... FROM email_events WHERE id.
    return db.insert(metricRollups)
      .select(db.select(selected).from(emailEvents).where(eq(emailEvents.id, input.ifRecorded)) as never)
      .onConflictDoUpdate({ target: TARGET, set: ADD_TO_EXISTING });
  }
  return db.insert(metricRollups).values(values as unknown as typeof metricRollups.$inferInsert).onConflictDoUpdate({ target: TARGET, set: ADD_TO_EXISTING });
}

/** The rollup statement for a drizzle batch: zero or one item, to spread into the batch. */
export function rollupItem(db: DrizzleD1Database, input: RollupInput): BatchItem<"sqlite">[] {
  const q = rollupQuery(db, input);
  return q ? [q] : [];
}

/** The SQL of the plain upsert (counters as values), built once per isolate: the accept path
 * binds it instead of building it on every send (see db/compiled.ts for why). */
let plainUpsertSql: string | null = null;

/** The rollup statement for a plain D1 batch (the accept path's compiled statements). */
export function rollupStatement(d1: D1Database, input: RollupInput): D1PreparedStatement[] {
  if (input.engagement || input.ifRecorded) {
    const q = rollupQuery(drizzle(d1), input);
    return q ? [statementOf(d1, q)] : [];
  }
  const totals = zeroCounters();
  for (const e of input.events) addCounters(totals, countersOf(e));
  if (COUNTERS.every((c) => totals[c] === 0)) return [];
  plainUpsertSql ??= rollupQuery(drizzle({} as D1Database), { ...input, events: [{ type: "sent" }] })!.toSQL().sql;
  // Values in column order: the key, then every counter.
  return [d1.prepare(plainUpsertSql).bind(input.accountId, bucketOf(input.at), input.domainId ?? "", input.broadcastId ?? "", ...COUNTERS.map((c) => totals[c]))];
}

/** The accept path's rollups: one statement per domain, broadcast and bucket of the emails a
 * send records (usually one for a whole batch), counting each email's recipients as received. */
export function acceptedRollups(
  d1: D1Database,
  emails: readonly { accountId: string; domainId: string | null; broadcastId: string | null; createdAt: number; pendingJson: string }[],
): D1PreparedStatement[] {
  const groups = new Map<string, RollupInput>();
  for (const e of emails) {
    const key = `${e.accountId} ${e.domainId ?? ""} ${e.broadcastId ?? ""} ${bucketOf(e.createdAt)}`;
    let group = groups.get(key);
    if (!group) groups.set(key, (group = { accountId: e.accountId, domainId: e.domainId, broadcastId: e.broadcastId, at: e.createdAt, events: [] }));
    (group.events as CountedEvent[]).push({ type: "queued", data: { recipients: JSON.parse(e.pendingJson) as string[] } });
  }
  return [...groups.values()].flatMap((g) => rollupStatement(d1, g));
}
