// Query-plan guards. SQLite (and so D1) has no statistics unless ANALYZE ran, and with an
// `id IN (...)` list of more than one id it prefers a secondary index on another column of the
// WHERE clause, such as emails_due (state, next_attempt_at) for "the claimable ones among
// these ids". That turns a lookup of N rows by primary key into a walk over every row in that
// state: every queued email, every event not yet fanned out, a cost that grows with the
// backlog exactly when the system is busiest. A unary + in front of a column makes it
// ineligible for an index, so the primary key is the only way in.
import { sql, type Column, type SQL } from "drizzle-orm";

/** The column as an expression no index can serve (SQLite's `+column`). */
export function unindexed(column: Column): SQL {
  return sql`+${column}`;
}
