// Statements of the hot paths (accept, delivery, webhook fan-out), compiled from the drizzle
// schema once per isolate instead of on every request or email. Drizzle builds a query's SQL
// each time it is used (walking the table's columns, escaping names, merging chunks): a CPU
// profile of the Worker put that at about 15% of its time per send. The SQL still comes from
// drizzle, so the schema stays the one source; the values are named placeholders, and a call
// only binds them (as drizzle's fillPlaceholders does). A statement whose text depends on its
// shape (an IN list's length) is compiled once per shape. test/worker/compiled.test.ts checks
// that a compiled statement writes and answers exactly what the drizzle query it stands for
// does.
import { and, eq, getTableColumns, gt, inArray, is, isNull, lte, Param, Placeholder, SQL, sql, type Column } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { drizzle } from "drizzle-orm/d1";
import type { SQLiteInsertValue, SQLiteTable } from "drizzle-orm/sqlite-core";
import { unindexed } from "./plan.ts";
import { apiLogs, broadcastRecipients, broadcasts, contactSegments, contactTopics, contacts, emailEvents, emails, idempotencyKeys, suppressions, usage, webhookAttempts, webhookDeliveries, webhookEvents, webhooks, type EmailRow } from "./schema.ts";

/** A statement's SQL and its parameters, as drizzle's toSQL() answers them. */
export type Query = { sql: string; params: unknown[] };

export interface Compiled<Values> {
  readonly sql: string;
  /** The SQL and the parameters bound for these values (what drizzle's toSQL() answers). */
  query(values: Values): Query;
  bind(db: D1Database, values: Values): D1PreparedStatement;
}

/** A query built for its SQL only: drizzle never calls this client to build one. */
const builder = drizzle({} as D1Database);

function compile<Values extends Record<string, unknown>>(query: { toSQL(): { sql: string; params: unknown[] } }): Compiled<Values> {
  const { sql: text, params } = query.toSQL();
  const fill = filler(params);
  return {
    sql: text,
    query: (values) => ({ sql: text, params: fill(values) }),
    bind: (db, values) => db.prepare(text).bind(...fill(values)),
  };
}

/** drizzle's fillPlaceholders, with what each parameter is (a placeholder, a placeholder with
 * its column's encoder, a value) decided once: fillPlaceholders asks drizzle's `is` for every
 * parameter on every call, which walks class chains, about 115 us a send in the Worker's CPU
 * profile. A parameter is filled exactly as fillPlaceholders fills it. */
function filler(params: unknown[]): (values: Record<string, unknown>) => unknown[] {
  const slots = params.map((p): { name: string; encoder?: Param["encoder"] } | { value: unknown } => {
    if (is(p, Placeholder)) return { name: p.name };
    if (is(p, Param) && is(p.value, Placeholder)) return { name: p.value.name, encoder: p.encoder };
    return { value: p };
  });
  return (values) => slots.map((slot) => {
    if ("value" in slot) return slot.value;
    if (!(slot.name in values)) throw new Error(`No value for placeholder "${slot.name}" was provided`);
    const v = values[slot.name];
    return slot.encoder ? slot.encoder.mapToDriverValue(v) : v;
  });
}

/** A statement whose text depends on its shape (how many values an IN list has, whether an
 * optional column is set): compiled on its first use in each shape, then kept. The shapes are
 * few and bounded (lists are chunked), so the cache is too. */
function perShape<Shape, Values extends Record<string, unknown>>(build: (shape: Shape) => { toSQL(): { sql: string; params: unknown[] } }): (shape: Shape) => Compiled<Values> {
  const cache = new Map<Shape, Compiled<Values>>();
  return (shape) => {
    let c = cache.get(shape);
    if (!c) cache.set(shape, (c = compile<Values>(build(shape))));
    return c;
  };
}

/** An IN list of `n` placeholders, `${name}0` to `${name}${n - 1}`. */
function listOf(name: string, n: number): Placeholder<string>[] {
  return Array.from({ length: n }, (_, i) => sql.placeholder(`${name}${i}`));
}

/** The names listOf gives, made once. */
const listNames = new Map<string, string[]>();

/** The values of a list of placeholders named by listOf. */
function listValues(name: string, values: readonly unknown[]): Record<string, unknown> {
  let names = listNames.get(name);
  if (!names) listNames.set(name, (names = []));
  for (let i = names.length; i < values.length; i++) names.push(`${name}${i}`);
  const out: Record<string, unknown> = {};
  for (let i = 0; i < values.length; i++) out[names[i]!] = values[i];
  return out;
}

/** Rows as drizzle answers them: D1's raw rows (one array per row, in the order the fields were
 * selected) keyed by the fields' names and read by their columns. */
function rowsOf<Row>(fields: Record<string, Column>): (raw: unknown[][]) => Row[] {
  const keys = Object.keys(fields);
  const columns = Object.values(fields);
  return (raw) => raw.map((values) => {
    const row: Record<string, unknown> = {};
    for (let i = 0; i < keys.length; i++) row[keys[i]!] = values[i] === null ? null : columns[i]!.mapFromDriverValue(values[i]);
    return row as Row;
  });
}

/** Rows as drizzle answers them, from rows keyed by column name (what a D1 batch answers; its
 * statements cannot ask for raw rows), read by their columns. The fields' names must differ. */
function namedRowsOf<Row>(fields: Record<string, Column | SQL.Aliased>): (rows: readonly Record<string, unknown>[]) => Row[] {
  const read = Object.entries(fields).map(([key, f]) => is(f, SQL.Aliased)
    ? { key, name: f.fieldAlias, map: (v: unknown) => v }
    : { key, name: (f as Column).name, map: (v: unknown) => (f as Column).mapFromDriverValue(v) });
  return (rows) => rows.map((r) => {
    const row: Record<string, unknown> = {};
    for (const c of read) row[c.key] = r[c.name] === null || r[c.name] === undefined ? null : c.map(r[c.name]);
    return row as Row;
  });
}

/** Every column of `table` as a placeholder of its own name: an insert that names them all. */
function placeholders<T extends SQLiteTable>(table: T): SQLiteInsertValue<T> {
  return Object.fromEntries(Object.keys(getTableColumns(table)).map((k) => [k, sql.placeholder(k)])) as unknown as SQLiteInsertValue<T>;
}

/** Every column, the ones with defaults too (a compiled insert names them all). */
type Row<T extends SQLiteTable> = { [K in keyof T["$inferInsert"]]-?: T["$inferInsert"][K] };

/** INSERT INTO emails, every column bound. */
export const insertEmail: Compiled<Row<typeof emails>> = compile(builder.insert(emails).values(placeholders(emails)));

/** INSERT INTO email_events, every column bound. */
export const insertEmailEvent: Compiled<Row<typeof emailEvents>> = compile(builder.insert(emailEvents).values(placeholders(emailEvents)));

/** INSERT of any number of rows into `table` in one statement, for rows that share most of their
 * values (a fan-out page's emails: one sender, domain, body and state): the `perRow` columns come
 * from one JSON array bound once (each row an array of their values, in perRow's order), every
 * other column is bound once for all rows. Per email, a page's batch carried 27 bound values and
 * the insert's text (about 0.7 KB) through D1 once per email; now a few values in one string. */
function jsonRowsInsert<T extends SQLiteTable, K extends keyof Row<T> & string>(table: T, perRow: readonly K[]) {
  const fields = Object.fromEntries(Object.entries(getTableColumns(table)).map(([key, column]) => {
    const i = perRow.indexOf(key as K);
    return [key, (i >= 0 ? sql`json_extract(value, ${sql.raw(`'$[${i}]'`)})` : sql`${sql.placeholder(key)}`).as(column.name)];
  }));
  const compiled = compile<Record<string, unknown>>(builder.insert(table).select(builder.select(fields).from(sql`json_each(${sql.placeholder("rows")})`) as never));
  return {
    sql: compiled.sql,
    /** `rows`: each row's perRow values, in order; their values must be what the column stores
     * (text, numbers, null: no column encoders run on them). */
    bind: (d1: D1Database, shared: Omit<Row<T>, K>, rows: readonly (readonly unknown[])[]): D1PreparedStatement =>
      compiled.bind(d1, { ...shared, rows: JSON.stringify(rows) }),
  };
}

/** A fan-out page's emails: each its id, recipients (to and pending) and subject. */
export const insertBroadcastEmails = jsonRowsInsert(emails, ["id", "toJson", "pendingJson", "subject", "messageId"]);
/** A fan-out page's broadcast_recipients rows. */
export const insertBroadcastRecipients = jsonRowsInsert(broadcastRecipients, ["contactId", "emailId", "email"]);
/** A fan-out page's queued events. */
export const insertQueuedEvents = jsonRowsInsert(emailEvents, ["id", "emailId", "dataJson"]);

/** What a fan-out page needs to know again of its broadcast (a cancel, another run's checkpoint). */
const broadcastProgressFields = { status: broadcasts.status, checkpoint: broadcasts.checkpoint, recipientCount: broadcasts.recipientCount };
export const broadcastProgress: Compiled<{ id: string }> = compile(builder.select(broadcastProgressFields).from(broadcasts).where(eq(broadcasts.id, sql.placeholder("id"))));
export const broadcastProgressRows = namedRowsOf<{ status: string; checkpoint: string | null; recipientCount: number }>(broadcastProgressFields);

/** A fan-out page: the segment's next contacts after the broadcast's checkpoint (read in the same
 * statement, so one D1 batch reads the progress and the page that follows it), with what decides
 * whether each gets the broadcast: unsubscribed, their choice for its topic, a suppression. */
const fanoutPageFields = {
  id: contacts.id, email: contacts.email, firstName: contacts.firstName, lastName: contacts.lastName,
  unsubscribed: contacts.unsubscribed, propertiesJson: contacts.propertiesJson, own: contactTopics.subscription,
  // Named apart from contacts.id: a batch answers rows as objects keyed by column name.
  suppressed: sql<string | null>`${suppressions.id}`.as("suppressed"),
};
export const fanoutPage: Compiled<{ broadcastId: string; segmentId: string; topicId: string; limit: number }> = compile(builder.select(fanoutPageFields).from(contactSegments)
  .innerJoin(contacts, eq(contacts.id, contactSegments.contactId))
  .leftJoin(contactTopics, and(eq(contactTopics.contactId, contactSegments.contactId), eq(contactTopics.topicId, sql.placeholder("topicId"))))
  .leftJoin(suppressions, and(eq(suppressions.accountId, contacts.accountId), eq(suppressions.email, contacts.email)))
  .where(and(
    eq(contactSegments.segmentId, sql.placeholder("segmentId")),
    gt(contactSegments.contactId, sql`coalesce((select ${broadcasts.checkpoint} from ${broadcasts} where ${broadcasts.id} = ${sql.placeholder("broadcastId")}), '')`),
  ))
  .orderBy(contactSegments.contactId).limit(sql.placeholder("limit")));
export const fanoutPageRows = namedRowsOf<{ id: string; email: string; firstName: string | null; lastName: string | null; unsubscribed: boolean; propertiesJson: string; own: string | null; suppressed: string | null }>(fanoutPageFields);

/** The claim of an Idempotency-Key in a send's batch (sending/key-claim.ts claimBound):
 * its row deleted if its 24 hours are over, then inserted with the answer (a live row fails the
 * insert, and with it the batch). */
export const deleteExpiredKey: Compiled<{ accountId: string; scope: string; key: string; now: number }> = compile(builder.delete(idempotencyKeys).where(and(
  and(eq(idempotencyKeys.accountId, sql.placeholder("accountId")), eq(idempotencyKeys.scope, sql.placeholder("scope")), eq(idempotencyKeys.key, sql.placeholder("key"))),
  lte(idempotencyKeys.expiresAt, sql.placeholder("now")),
)));
export const insertKey: Compiled<Row<typeof idempotencyKeys>> = compile(builder.insert(idempotencyKeys).values(placeholders(idempotencyKeys)));

/** INSERT INTO api_logs, every column bound: a send's log row, in the send's batch. */
export const insertApiLog: Compiled<Row<typeof apiLogs>> = compile(builder.insert(apiLogs).values(placeholders(apiLogs)));

/** Adds `used` to the account's usage in `period` unless that passes `cap` (the table's CHECK
 * fails the batch); returns the new total as `used`. */
export const consumeUsage: Compiled<{ accountId: string; period: string; used: number; cap: number }> = compile(
  builder
    .insert(usage)
    .values(placeholders(usage))
    .onConflictDoUpdate({ target: [usage.accountId, usage.period], set: { used: sql`${usage.used} + excluded.used`, cap: sql`excluded.cap` } as Record<string, SQL> })
    .returning({ used: usage.used }),
);

// The delivery consumer's statements (worker/delivery/consumer.ts, progress.ts). Every write to
// an email being sent is guarded by state = 'sending' and the consumer's lease, which is one
// value or, when a write that moved it may or may not have committed, several.

/** Claims emails by id: queued ones due by `due`, moved to sending until `leaseUntil`; answers
 * the rows claimed. By primary key only: see worker/db/plan.ts. */
const claimShapes = perShape<number, { leaseUntil: number; due: number }>((n) => builder.update(emails)
  .set({ state: "sending", leaseUntil: sql.placeholder("leaseUntil") as unknown as number })
  .where(and(inArray(emails.id, listOf("id", n)), eq(unindexed(emails.state), "queued"), lte(unindexed(emails.nextAttemptAt), sql.placeholder("due"))))
  .returning());
export function claimEmails(ids: readonly string[], values: { leaseUntil: number; due: number }): Query {
  return claimShapes(ids.length).query({ ...values, ...listValues("id", ids) });
}
export const emailRows = rowsOf<EmailRow>(getTableColumns(emails));

/** The final write of an attempt: its state, what is left to send, when it is due again, and
 * its last event when it has one. */
export interface SettleValues {
  id: string;
  state: string;
  attempts: number;
  pendingJson: string;
  nextAttemptAt: number | null;
  lastEvent: string | null;
  leases: readonly number[];
}
const settleShapes = perShape<string, Record<string, unknown>>((shape) => {
  const [withLastEvent, leases] = shape.split(":");
  const p = (name: string) => sql.placeholder(name) as unknown as string;
  return builder.update(emails).set({
    state: p("state"),
    attempts: p("attempts") as unknown as number,
    pendingJson: p("pendingJson"),
    leaseUntil: null,
    attemptJson: null,
    nextAttemptAt: p("nextAttemptAt") as unknown as number,
    ...(withLastEvent === "1" ? { lastEvent: p("lastEvent") } : {}),
  }).where(leaseHeld("id", Number(leases)));
});
export function settleEmail(v: SettleValues): Query {
  return settleShapes(`${v.lastEvent === null ? 0 : 1}:${v.leases.length}`).query({ ...v, ...listValues("lease", v.leases) });
}

/** The guard of a settlement: email `idName` still sending under one of `n` leases. */
function leaseHeld(idName: string, n: number): SQL {
  return and(eq(emails.id, sql.placeholder(idName)), eq(emails.state, "sending"), inArray(emails.leaseUntil, listOf("lease", n)))!;
}

/** An event of a settlement, written only under the settlement's own guard (its email id and
 * account read from the row it guards). The batch puts the events before the UPDATE, the one
 * write that changes what the guard reads, so they are written exactly when the UPDATE is;
 * the settlement's other writes follow its events (outbox.ts, rollup.ts). */
const settlementEventShapes = perShape<number, Record<string, unknown>>((n) => builder.insert(emailEvents).select(builder.select({
  id: sql`${sql.placeholder("id")}`.as("id"),
  emailId: sql`${emails.id}`.as("email_id"),
  accountId: sql`${emails.accountId}`.as("account_id"),
  type: sql`${sql.placeholder("type")}`.as("type"),
  dataJson: sql`${sql.placeholder("dataJson")}`.as("data_json"),
  createdAt: sql`${sql.placeholder("createdAt")}`.as("created_at"),
  dedupeKey: sql`null`.as("dedupe_key"),
}).from(emails).where(leaseHeld("emailId", n))));
export function insertSettlementEvent(v: { id: string; emailId: string; type: string; dataJson: string; createdAt: number; leases: readonly number[] }): Query {
  return settlementEventShapes(v.leases.length).query({ ...v, ...listValues("lease", v.leases) });
}

/** An attempt's progress (its answered results, the message in flight) with its lease renewed
 * to `leaseUntil`, guarded by the leases it may hold. */
const progressShapes = perShape<number, Record<string, unknown>>((n) => builder.update(emails)
  .set({ attemptJson: sql.placeholder("attemptJson") as unknown as string, leaseUntil: sql.placeholder("leaseUntil") as unknown as number })
  .where(and(eq(emails.id, sql.placeholder("id")), eq(emails.state, "sending"), inArray(emails.leaseUntil, listOf("lease", n)))));
export function recordProgress(v: { id: string; attemptJson: string; leaseUntil: number; leases: readonly number[] }): Query {
  return progressShapes(v.leases.length).query({ ...v, ...listValues("lease", v.leases) });
}

/** An email's first message marked in flight from outside its attempt, guarded by the lease as
 * claimed (one value). */
export const markInFlight: Compiled<{ id: string; attemptJson: string; leaseUntil: number; lease: number }> = compile(builder.update(emails)
  .set({ attemptJson: sql.placeholder("attemptJson") as unknown as string, leaseUntil: sql.placeholder("leaseUntil") as unknown as number })
  .where(and(eq(emails.id, sql.placeholder("id")), eq(emails.state, "sending"), eq(emails.leaseUntil, sql.placeholder("lease")))));

// The webhook outbox and its fan-out (worker/events/outbox.ts, worker/webhooks/consumer.ts).

/** INSERT INTO webhook_events: an outbox row, written only while an enabled endpoint of the
 * account subscribes to its type. An event nobody listens for is not written at all: nothing
 * would ever read it (email_events keeps the email's own record), and on D1, where every row
 * and index entry written is billed, its row and two index entries were about a third of what
 * an email wrote. The statement answers a row only when it wrote one, which says the event
 * needs a hint: bind it through outbox.ts's outboxStatement, whose statements eventsToFanOut
 * knows (one bound here directly is never hinted, and waits for the cron's sweep). */
export const insertWebhookEvent: Compiled<{ id: string; accountId: string; type: string; payloadJson: string; createdAt: number }> = compile(
  builder.insert(webhookEvents).select(builder.select(outboxColumns()).from(sql`(select 1)`)
    .where(subscribedTo(sql.placeholder("accountId"), sql.placeholder("type")))).returning({ fannedOutAt: webhookEvents.fannedOutAt }),
);

/** The same outbox row for an email event inserted earlier in the batch, written only if that
 * event is there (a settlement's, which a lost lease leaves out). The text is drizzle's
 * outboxInsertIfRecorded (events/outbox.ts), answering a row as insertWebhookEvent does. */
export const insertWebhookEventIfRecorded: Compiled<{ id: string; accountId: string; type: string; payloadJson: string; createdAt: number; emailEventId: string }> = compile(
  builder.insert(webhookEvents).select(builder.select(outboxColumns()).from(emailEvents)
    .where(and(eq(emailEvents.id, sql.placeholder("emailEventId")), subscribedTo(sql.placeholder("accountId"), sql.placeholder("type"))))).returning({ fannedOutAt: webhookEvents.fannedOutAt }),
);

/** An outbox row's columns as the SELECT of an INSERT ... SELECT, from placeholders or values;
 * fanned_out_at is null: the row is written only to be fanned out. */
export function outboxColumns(v: { id: Placeholder | string; accountId: Placeholder | string; type: Placeholder | string; payloadJson: Placeholder | string; createdAt: Placeholder | number } = {
  id: sql.placeholder("id"), accountId: sql.placeholder("accountId"), type: sql.placeholder("type"), payloadJson: sql.placeholder("payloadJson"), createdAt: sql.placeholder("createdAt"),
}) {
  return {
    id: sql`${v.id}`.as("id"), accountId: sql`${v.accountId}`.as("account_id"), type: sql`${v.type}`.as("type"),
    payloadJson: sql`${v.payloadJson}`.as("payload_json"), createdAt: sql`${v.createdAt}`.as("created_at"), fannedOutAt: sql`null`.as("fanned_out_at"),
  };
}

/** Whether an enabled endpoint of the account subscribes to events of this type (the condition
 * of every outbox row; the fan-out matches endpoints the same way, webhooks/consumer.ts). */
export function subscribedTo(accountId: Placeholder | string, type: Placeholder | string): SQL {
  return sql`exists (select 1 from ${webhooks}, json_each(${webhooks.eventsJson}) where ${webhooks.accountId} = ${accountId} and ${webhooks.status} = 'enabled' and json_each.value = ${type})`;
}

/** The events among some ids not yet fanned out. By primary key only: see worker/db/plan.ts. */
const pendingEventFields = { id: webhookEvents.id, accountId: webhookEvents.accountId, type: webhookEvents.type };
const pendingEventShapes = perShape<number, Record<string, unknown>>((n) => builder.select(pendingEventFields)
  .from(webhookEvents).where(and(inArray(webhookEvents.id, listOf("id", n)), isNull(unindexed(webhookEvents.fannedOutAt)))));
export function pendingEvents(ids: readonly string[]): Query {
  return pendingEventShapes(ids.length).query(listValues("id", ids));
}
export const pendingEventRows = rowsOf<{ id: string; accountId: string; type: string }>(pendingEventFields);

/** The enabled endpoints of some accounts, with the event types each is subscribed to. */
const enabledHookFields = { id: webhooks.id, accountId: webhooks.accountId, eventsJson: webhooks.eventsJson };
const enabledHookShapes = perShape<number, Record<string, unknown>>((n) => builder.select(enabledHookFields)
  .from(webhooks).where(and(inArray(webhooks.accountId, listOf("account", n)), eq(webhooks.status, "enabled"))));
export function enabledHooks(accountIds: readonly string[]): Query {
  return enabledHookShapes(accountIds.length).query(listValues("account", accountIds));
}
export const enabledHookRows = rowsOf<{ id: string; accountId: string; eventsJson: string }>(enabledHookFields);

/** Marks events fanned out at `at` (the ones not yet marked). */
const markFannedOutShapes = perShape<number, Record<string, unknown>>((n) => builder.update(webhookEvents)
  .set({ fannedOutAt: sql.placeholder("at") as unknown as number })
  .where(and(inArray(webhookEvents.id, listOf("id", n)), isNull(unindexed(webhookEvents.fannedOutAt)))));
export function markFannedOut(ids: readonly string[], at: number): Query {
  return markFannedOutShapes(ids.length).query({ at, ...listValues("id", ids) });
}

/** A new pending delivery of an event to an endpoint; ignored when one exists (a concurrent
 * fan-out made it). */
export const insertWebhookDelivery: Compiled<{ id: string; webhookId: string; accountId: string; eventId: string; eventType: string; at: number }> = compile(
  builder.insert(webhookDeliveries).values({
    id: sql.placeholder("id"), webhookId: sql.placeholder("webhookId"), accountId: sql.placeholder("accountId"), eventId: sql.placeholder("eventId"),
    eventType: sql.placeholder("eventType"), status: "pending", attempts: 0, nextAttemptAt: sql.placeholder("at"), createdAt: sql.placeholder("at"),
  }).onConflictDoNothing(),
);

/** Claims one attempt of a webhook delivery: counts it, guarded by the attempts read with it
 * (and, for a scheduled attempt, by the delivery being pending and due); a pending delivery is
 * leased until `lease`. Answers the new count and the status, or no row when the claim is lost.
 * Compiled per shape: scheduled or a replay, pending or settled. */
const claimDeliveryShapes = perShape<string, Record<string, unknown>>((shape) => {
  const [scheduled, pending] = [shape.includes("scheduled"), shape.includes("pending")];
  return builder.update(webhookDeliveries)
    .set({ attempts: sql`${webhookDeliveries.attempts} + 1`, lastAttemptAt: sql.placeholder("t") as unknown as number, ...(pending ? { nextAttemptAt: sql.placeholder("lease") as unknown as number } : {}) })
    .where(and(
      eq(webhookDeliveries.id, sql.placeholder("id")),
      eq(webhookDeliveries.attempts, sql.placeholder("attempts")),
      scheduled ? and(eq(webhookDeliveries.status, "pending"), lte(webhookDeliveries.nextAttemptAt, sql.placeholder("due"))) : undefined,
    ))
    .returning({ attempts: webhookDeliveries.attempts, status: webhookDeliveries.status });
});
export function claimDelivery(mode: "scheduled" | "replay", pending: boolean, v: { id: string; attempts: number; t: number; lease: number; due: number }): Query {
  const values: Record<string, unknown> = { id: v.id, attempts: v.attempts, t: v.t };
  if (pending) values.lease = v.lease;
  if (mode === "scheduled") values.due = v.due;
  return claimDeliveryShapes(`${mode}:${pending ? "pending" : "settled"}`).query(values);
}

/** INSERT INTO webhook_attempts, every column bound. */
export const insertWebhookAttempt: Compiled<Row<typeof webhookAttempts>> = compile(builder.insert(webhookAttempts).values(placeholders(webhookAttempts)));

/** A delivery the endpoint took: settled whoever else is attempting it. */
export const markDelivered: Compiled<{ id: string }> = compile(builder.update(webhookDeliveries).set({ status: "delivered", nextAttemptAt: null }).where(eq(webhookDeliveries.id, sql.placeholder("id"))));

/** A compiled query as a D1 statement. */
export function prepared(db: D1Database, q: Query): D1PreparedStatement {
  return db.prepare(q.sql).bind(...q.params);
}

/** Any other drizzle query (an insert, update or delete builder) as a plain D1 statement, for
 * a batch that mixes both. */
export function statementOf(db: D1Database, query: BatchItem<"sqlite">): D1PreparedStatement {
  const built = query as unknown as { toSQL?: () => { sql: string; params: unknown[] } };
  if (typeof built.toSQL !== "function") throw new TypeError("statementOf: not a query builder");
  return compile(built as { toSQL(): { sql: string; params: unknown[] } }).bind(db, {}); // a placeholder without a value throws
}
