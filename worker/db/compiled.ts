// Statements of the accept path, compiled from the drizzle schema once per isolate instead of
// on every request. Drizzle builds a query's SQL each time it is used (walking the table's
// columns, escaping names, merging chunks): a CPU profile of the Worker put that at about 15%
// of its time per send. The SQL still comes from drizzle, so the schema stays the one source;
// the values are named placeholders, and a request only binds them (drizzle's own
// fillPlaceholders). test/worker/compiled.test.ts checks that a compiled statement writes and
// answers exactly what the drizzle query it stands for does.
import { fillPlaceholders, getTableColumns, sql, type SQL } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { drizzle } from "drizzle-orm/d1";
import type { SQLiteInsertValue, SQLiteTable } from "drizzle-orm/sqlite-core";
import { emailEvents, emails, usage } from "./schema.ts";

export interface Compiled<Values> {
  readonly sql: string;
  bind(db: D1Database, values: Values): D1PreparedStatement;
}

/** A query built for its SQL only: drizzle never calls this client to build one. */
const builder = drizzle({} as D1Database);

function compile<Values extends Record<string, unknown>>(query: { toSQL(): { sql: string; params: unknown[] } }): Compiled<Values> {
  const { sql: text, params } = query.toSQL();
  return { sql: text, bind: (db, values) => db.prepare(text).bind(...fillPlaceholders(params, values)) };
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

/** Adds `used` to the account's usage in `period` unless that passes `cap` (the table's CHECK
 * fails the batch); returns the new total as `used`. */
export const consumeUsage: Compiled<{ accountId: string; period: string; used: number; cap: number }> = compile(
  builder
    .insert(usage)
    .values(placeholders(usage))
    .onConflictDoUpdate({ target: [usage.accountId, usage.period], set: { used: sql`${usage.used} + excluded.used`, cap: sql`excluded.cap` } as Record<string, SQL> })
    .returning({ used: usage.used }),
);

/** Any other drizzle query (an insert, update or delete builder) as a plain D1 statement, for
 * a batch that mixes both. */
export function statementOf(db: D1Database, query: BatchItem<"sqlite">): D1PreparedStatement {
  const built = query as unknown as { toSQL?: () => { sql: string; params: unknown[] } };
  if (typeof built.toSQL !== "function") throw new TypeError("statementOf: not a query builder");
  return compile(built as { toSQL(): { sql: string; params: unknown[] } }).bind(db, {}); // a placeholder without a value throws
}
