// The hot statements that look rows up by a list of ids must use the primary key, not a
// secondary index on another column of their WHERE clause: with many rows in that state (a
// backlog of queued emails, of events not yet fanned out) the index would walk all of them on
// every queue batch. SQLite decides per statement, so the plans are checked here, on D1, with
// the very statements the consumers run.
import { env } from "cloudflare:workers";
import { drizzle } from "drizzle-orm/d1";
import { describe, expect, it } from "vitest";
import { claimQuery } from "../../worker/delivery/consumer.ts";
import { markFannedOutQuery, pendingEventsQuery } from "../../worker/webhooks/consumer.ts";
import { uuidv7Floor } from "../../worker/ids.ts";
import { PURGE_SQL } from "../../worker/retention/purge.ts";
import { parseMetricsQuery } from "../../worker/metrics/query.ts";
import { rollupSumQuery } from "../../worker/metrics/service.ts";
import { periodStarts } from "../../worker/metrics/periods.ts";

async function plan(q: { toSQL(): { sql: string; params: unknown[] } }): Promise<string> {
  const { sql, params } = q.toSQL();
  const rows = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`).bind(...params).all<{ detail: string }>();
  return rows.results.map((r) => r.detail).join("\n");
}

const ids = Array.from({ length: 90 }, (_, i) => `00000000-0000-7000-8000-${String(i).padStart(12, "0")}`);

describe("query plans of the consumers' lookups by id", () => {
  const db = drizzle(env.DB);
  it.each([
    ["claiming queued emails", claimQuery(db, ids, Date.now(), 600_000), "emails"],
    ["reading events not yet fanned out", pendingEventsQuery(db, ids), "webhook_events"],
    ["marking events fanned out", markFannedOutQuery(db, ids, Date.now()), "webhook_events"],
  ])("%s uses the primary key", async (_name, query, table) => {
    const detail = await plan(query);
    expect(detail).toContain(`SEARCH ${table} USING INDEX sqlite_autoindex_${table}_1 (id=?)`);
    expect(detail).not.toMatch(/emails_due|webhook_events_pending|SCAN/);
  });
});

// The purge walks each table from its oldest id and stops at the batch: a plan that reads a
// whole table (all settled emails, all pending deliveries) would grow with the history it keeps.
describe("query plans of the retention purge", () => {
  it.each([
    ["emails", /SEARCH emails USING (COVERING )?INDEX sqlite_autoindex_emails_1 \(id<\?\)/, /emails_due|TEMP B-TREE|SCAN/],
    ["deliveries", /SEARCH webhook_deliveries USING (COVERING )?INDEX sqlite_autoindex_webhook_deliveries_1 \(id<\?\)/, /webhook_deliveries_due|TEMP B-TREE|SCAN/],
    ["events", /SEARCH d USING (COVERING )?INDEX webhook_deliveries_event \(webhook_id=\? AND event_id=\?\)/, /webhook_events_pending|webhook_deliveries_due|TEMP B-TREE|SCAN/],
    ["inbound", /SEARCH inbound_emails USING (COVERING )?INDEX sqlite_autoindex_inbound_emails_1 \(id<\?\)/, /TEMP B-TREE|SCAN/],
    ["apiLogs", /SEARCH api_logs USING (COVERING )?INDEX sqlite_autoindex_api_logs_1 \(id<\?\)/, /TEMP B-TREE|SCAN api_logs/],
  ] as const)("%s walks the primary key", async (name, expected, never) => {
    const rows = await env.DB.prepare(`EXPLAIN QUERY PLAN ${PURGE_SQL[name]}`).bind(uuidv7Floor(Date.now()), 500).all<{ detail: string }>();
    const detail = rows.results.map((r) => r.detail).join("\n");
    expect(detail).toMatch(expected);
    if (name === "events") expect(detail).toMatch(/SEARCH w USING (COVERING )?INDEX sqlite_autoindex_webhook_events_1 \(id<\?\)/);
    expect(detail).not.toMatch(never);
  });
});

// GET /emails/metrics reads a range of the rollups' primary key (account, bucket, ...): its
// cost follows the range asked for, never the table's size or the account's history.
describe("query plans of the metrics", () => {
  it.each([
    ["totals", ""],
    ["by period and domain, filtered", "dimensions=period,domain&domain_id=0193a8a0-1c2d-7000-8000-000000000001"],
    ["by broadcast", "dimensions=broadcast,period&granularity=hourly&broadcast_id=0193a8a0-1c2d-7000-8000-000000000002"],
  ])("%s searches the primary key by account, span and bucket range", async (_name, query) => {
    const q = parseMetricsQuery(new URLSearchParams(query), Date.now());
    const starts = q.dimensions.includes("period") ? periodStarts(q.timezone, q.granularity, q.start, q.end)! : [];
    const { sql, params } = rollupSumQuery("0193a8a0-1c2d-7000-8000-00000000000a", q, starts);
    const rows = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`).bind(...params).all<{ detail: string }>();
    const detail = rows.results.map((r) => r.detail).join("\n");
    // One search per part (the coarse middle, the fine head and tail), each a key range.
    expect(detail).toMatch(/SEARCH metric_rollups USING PRIMARY KEY \(account_id=\? AND span=\? AND bucket>\? AND bucket<\?\)/);
    expect(detail.match(/SEARCH metric_rollups/g)!.length).toBe(detail.match(/SEARCH metric_rollups USING PRIMARY KEY \(account_id=\? AND span=\? AND bucket>\? AND bucket<\?\)/g)!.length);
    expect(detail).not.toMatch(/SCAN metric_rollups/);
  });
});
