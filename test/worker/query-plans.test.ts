// The hot statements that look rows up by a list of ids must use the primary key, not a
// secondary index on another column of their WHERE clause: with many rows in that state (a
// backlog of queued emails, of events not yet fanned out) the index would walk all of them on
// every queue batch. SQLite decides per statement, so the plans are checked here, on D1, with
// the very statements the consumers run.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { claimQuery } from "../../worker/delivery/consumer.ts";
import { recipientContactsQuery } from "../../worker/broadcasts/content.ts";
import { fanoutPage, insertSettlementEvent, insertWebhookEventIfRecorded, markFannedOut, pendingEvents, type Query } from "../../worker/db/compiled.ts";
import { guardedMergeQuery } from "../../worker/metrics/rollup.ts";
import { uuidv7Floor } from "../../worker/ids.ts";
import { PURGE_SQL } from "../../worker/retention/purge.ts";
import { parseMetricsQuery } from "../../worker/metrics/query.ts";
import { rollupSumQuery } from "../../worker/metrics/service.ts";
import { periodStarts } from "../../worker/metrics/periods.ts";
import { searchEmails, type EmailFilters } from "../../worker/dashboard/email-search.ts";
import { auditQuery, auditTopicNamesQuery } from "../../worker/dashboard/routes.tsx";
import { storedCopies } from "../../worker/inbound/receive.ts";
import { listReceived } from "../../worker/inbound/service.ts";
import { listSuppressions } from "../../worker/suppressions/service.ts";
import { listContacts } from "../../worker/contacts/contacts.ts";
import { listDomains } from "../../worker/domains/service.ts";
import { listApiKeys } from "../../worker/api-keys/service.ts";
import { listWebhookAttempts, listWebhookDeliveries, listWebhooks } from "../../worker/webhooks/service.ts";
import { logSearchQuery, windowEndQuery, type LogFilters } from "../../worker/logs/search.ts";

async function plan({ sql, params }: Query): Promise<string> {
  const rows = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`).bind(...params).all<{ detail: string }>();
  return rows.results.map((r) => r.detail).join("\n");
}

const ids = Array.from({ length: 90 }, (_, i) => `00000000-0000-7000-8000-${String(i).padStart(12, "0")}`);

// The statements are the compiled ones the consumers run (worker/db/compiled.ts), one id and a
// full chunk of them.
describe("query plans of the consumers' lookups by id", () => {
  it.each([
    ["claiming queued emails", claimQuery(ids, Date.now(), 600_000), "emails"],
    ["claiming one queued email", claimQuery(ids.slice(0, 1), Date.now(), 600_000), "emails"],
    ["reading events not yet fanned out", pendingEvents(ids), "webhook_events"],
    ["marking events fanned out", markFannedOut(ids, Date.now()), "webhook_events"],
    ["a settlement's event, guarded by its email's lease", insertSettlementEvent({ id: ids[0]!, emailId: ids[1]!, type: "sent", dataJson: "{}", createdAt: 1, leases: [1, 2] }), "emails"],
    ["a settlement's outbox row, guarded by its event", insertWebhookEventIfRecorded.query({ id: ids[0]!, accountId: "a", type: "email.sent", payloadJson: "{}", createdAt: 1, emailEventId: ids[1]! }), "email_events"],
  ])("%s uses the primary key", async (_name, query, table) => {
    const detail = await plan(query);
    expect(detail).toMatch(new RegExp(`SEARCH ${table} USING (COVERING )?INDEX sqlite_autoindex_${table}_1 \\(id=\\?\\)`));
    // The outbox row's own condition reads the account's webhooks (as every outbox insert does).
    expect(detail).not.toMatch(/emails_due|webhook_events_pending|SCAN (?!json_each)/);
  });

  it("a merged settlement rollup looks each settlement's event up by the primary key", async () => {
    const at = Date.now();
    const part = (ifRecorded: string) => ({ accountId: "a", domainId: null, broadcastId: null, at, events: [{ type: "delivered", data: {} }], ifRecorded });
    const detail = await plan(guardedMergeQuery(ids.slice(0, 10).map(part))!);
    expect(detail).toMatch(/SEARCH email_events EXISTS USING (COVERING )?INDEX sqlite_autoindex_email_events_1 \(id=\?\)/);
    expect(detail).not.toMatch(/SCAN (email_events|emails|metric_rollups)/);
  });
});

// A fan-out page reads the segment's next contacts from the checkpoint: a range of the
// contact_segments primary key, whatever the segment's size, never the whole segment.
describe("query plan of a broadcast's fan-out page", () => {
  it("walks the segment from its checkpoint by the primary key, each contact by its own", async () => {
    const detail = await plan(fanoutPage.query({ broadcastId: "b", segmentId: "s", topicId: "t", limit: 25 }));
    expect(detail).toMatch(/SEARCH contact_segments USING (COVERING )?INDEX sqlite_autoindex_contact_segments_1 \(segment_id=\? AND contact_id>\?\)/);
    expect(detail).toMatch(/SEARCH contacts USING INDEX sqlite_autoindex_contacts_1 \(id=\?\)/);
    expect(detail).not.toMatch(/SCAN|TEMP B-TREE/);
  });
});

// A consumer batch reads its broadcast emails' contacts by their email ids: each through the
// recipients' email_id index and the contact's primary key, never a walk of the broadcast.
describe("query plan of a consumer batch's broadcast contacts", () => {
  it("finds each email's recipient row by its index and its contact by the primary key", async () => {
    const detail = await plan(recipientContactsQuery(env.DB, ids).toSQL());
    expect(detail).toMatch(/SEARCH broadcast_recipients USING INDEX broadcast_recipients_email \(email_id=\?\)/);
    expect(detail).toMatch(/SEARCH contacts USING INDEX sqlite_autoindex_contacts_1 \(id=\?\)/);
    expect(detail).not.toMatch(/SCAN/);
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
    ["importFailures", /SEARCH contact_imports USING (COVERING )?INDEX sqlite_autoindex_contact_imports_1 \(id<\?\)/, /TEMP B-TREE|SCAN contact_imports/],
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

// Every list the dashboard shows reads an index range of the account, newest first, and stops
// at its page: never a scan of a big table, never a sort of everything that matched. The list
// functions run for real on a D1 binding that records what they send, and each statement's
// plan is read back (the Emails page's own timings over 1,000,000 emails: bench/dashboard.ts).
async function plansOf(run: (db: D1Database) => Promise<unknown>): Promise<string[]> {
  const seen: { sql: string; params: unknown[] }[] = [];
  const wrap = (stmt: D1PreparedStatement, sql: string, params: unknown[]): D1PreparedStatement =>
    new Proxy(stmt, {
      get(target, prop) {
        if (prop === "bind") return (...args: unknown[]) => wrap(target.bind(...args), sql, args);
        if (prop === "run" || prop === "all" || prop === "first" || prop === "raw") seen.push({ sql, params });
        const v = Reflect.get(target, prop, target);
        return typeof v === "function" ? v.bind(target) : v;
      },
    });
  const recording = new Proxy(env.DB, {
    get(target, prop) {
      if (prop === "prepare") return (sql: string) => wrap(target.prepare(sql), sql, []);
      if (prop === "batch") throw new Error("a list does not batch");
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
  await run(recording);
  expect(seen.length).toBeGreaterThan(0);
  const out: string[] = [];
  for (const s of seen) {
    const rows = await env.DB.prepare(`EXPLAIN QUERY PLAN ${s.sql}`).bind(...s.params).all<{ detail: string }>();
    out.push(rows.results.map((r) => r.detail).join("\n"));
  }
  return out;
}

const ACCOUNT = "0193a8a0-1c2d-7000-8000-00000000ac01";
const AN_ID = "01a20f86-1a38-7307-9dc6-c29aa74bf40f";

describe("query plans of the dashboard's lists", () => {
  // Each filter the Emails page offers, alone, combined, and on a later page. The expected
  // index is the walk that page takes: a whole address walks its recipients, a status its
  // range of (account_id, last_event, id), the rest (account_id, id).
  const byAccount = /SEARCH emails USING INDEX emails_account \(account_id=\?( AND id[<>=?]+)*( AND id[<>=?]+)?\)/;
  const byStatus = /SEARCH emails USING INDEX emails_account_status \(account_id=\? AND last_event=\?( AND id[<>=?]+)*( AND id[<>=?]+)?\)/;
  const byRecipient = /SEARCH email_recipients USING (COVERING )?INDEX sqlite_autoindex_email_recipients_1 \(account_id=\? AND address=\?( AND email_id[<>=?]+)*( AND email_id[<>=?]+)?\)[\s\S]*SEARCH emails USING INDEX sqlite_autoindex_emails_1 \(id=\?\)/;
  const byId = /SEARCH emails USING INDEX sqlite_autoindex_emails_1 \(id=\?\)/;
  it.each<[string, EmailFilters, string | undefined, RegExp]>([
    ["the first page", {}, undefined, byAccount],
    ["a later page", {}, AN_ID, byAccount],
    ["by status", { status: "bounced" }, undefined, byStatus],
    ["by status, a later page", { status: "bounced" }, AN_ID, byStatus],
    ["by status and dates", { status: "delivered", from: "2026-11-01", to: "2026-11-24" }, undefined, byStatus],
    ["by recipient (a whole address)", { q: "Someone@Example.com" }, undefined, byRecipient],
    ["by recipient with a display name, a later page", { q: "Some One <someone@example.com>" }, AN_ID, byRecipient],
    ["by recipient and status", { q: "someone@example.com", status: "bounced" }, undefined, byRecipient],
    ["by recipient, domain, tag and dates", { q: "someone@example.com", domain: "example.com", tag: "kind:welcome", from: "2026-11-01", to: "2026-11-24" }, undefined, byRecipient],
    ["by words of the subject or a part of an address", { q: "invoice" }, undefined, byAccount],
    ["by id", { q: AN_ID }, undefined, byId],
    ["by domain", { domain: "example.com" }, undefined, byAccount],
    ["by tag", { tag: "kind:welcome" }, undefined, byAccount],
    ["by dates", { from: "2026-11-01", to: "2026-11-24" }, undefined, byAccount],
    ["by everything but an address", { q: "invoice", status: "delivered", domain: "example.com", tag: "kind", from: "2026-11-01", to: "2026-11-24" }, AN_ID, byStatus],
    // Searches of any length (D1 caps a LIKE pattern at 50 bytes; these are instr()).
    ["by a long phrase with %, _ and \\", { q: "Your order 12345 has shipped: 50% off_now \\ \u00e9\u00e9\u00e9 and is on its way" }, undefined, byAccount],
    ["by a long phrase, status and domain", { q: "x".repeat(200), status: "sent", domain: "a-rather-long-subdomain.of-a-long-domain.example" }, undefined, byStatus],
  ])("emails %s", async (_name, f, after, expected) => {
    const [detail] = await plansOf((db) => searchEmails(db, ACCOUNT, f, { limit: 25, after }));
    expect(detail).toMatch(expected);
    expect(detail).not.toMatch(/SCAN|TEMP B-TREE|emails_due/);
  });

  it.each<[string, (db: D1Database) => Promise<unknown>, RegExp]>([
    ["received mail", (db) => listReceived(db, ACCOUNT, { limit: 50 }), /SEARCH inbound_emails USING INDEX inbound_emails_account \(account_id=\?\)/],
    ["received mail, a later page", (db) => listReceived(db, ACCOUNT, { limit: 50, after: AN_ID }), /SEARCH inbound_emails USING INDEX inbound_emails_account \(account_id=\? AND id<\?\)/],
    // Each delivery of inbound mail asks whether its owners already hold it (a sender's retry).
    ["received mail, a delivery's stored copies", (db) => storedCopies(db, [ACCOUNT, AN_ID], "a".repeat(64)), /SEARCH inbound_emails USING (COVERING )?INDEX inbound_emails_dedupe \(account_id=\? AND dedupe_key=\?\)/],
    ["suppressions", (db) => listSuppressions(db, ACCOUNT, { limit: 50 }), /SEARCH suppressions USING INDEX suppressions_account \(account_id=\?\)/],
    ["suppressions, a later page", (db) => listSuppressions(db, ACCOUNT, { limit: 50, after: AN_ID }), /SEARCH suppressions USING INDEX suppressions_account \(account_id=\? AND id<\?\)/],
    ["the audit log", (db) => auditQuery(db, ACCOUNT, undefined).all(), /SEARCH audit_log USING INDEX audit_log_account \(account_id=\?\)/],
    ["the audit log, a later page", (db) => auditQuery(db, ACCOUNT, AN_ID).all(), /SEARCH audit_log USING INDEX audit_log_account \(account_id=\? AND id<\?\)/],
    ["contacts", (db) => listContacts(db, ACCOUNT, { limit: 50 }), /SEARCH contacts USING INDEX contacts_account \(account_id=\?\)/],
    ["contacts, a later page", (db) => listContacts(db, ACCOUNT, { limit: 50, after: AN_ID }), /SEARCH contacts USING INDEX contacts_account \(account_id=\? AND id<\?\)/],
    ["contacts, searched by a long phrase", (db) => listContacts(db, ACCOUNT, { limit: 50 }, undefined, "Ada Lovelace of the Analytical Engine, 50% \u00e9\u00e9"), /SEARCH contacts USING INDEX contacts_account \(account_id=\?\)/],
    ["suppressions, searched by a long phrase", (db) => listSuppressions(db, ACCOUNT, { limit: 50, after: AN_ID }, undefined, "a-very-long-local-part_with%signs@example.com"), /SEARCH suppressions USING INDEX suppressions_account \(account_id=\? AND id<\?\)/],
    ["API keys", (db) => listApiKeys(db, ACCOUNT, { limit: 100 }), /SEARCH api_keys USING INDEX \w+ \(account_id=\?\)/],
    ["webhooks", (db) => listWebhooks(db, ACCOUNT, { limit: 100 }), /SEARCH webhooks USING INDEX webhooks_account \(account_id=\?\)/],
    ["a webhook's deliveries, a later page", (db) => listWebhookDeliveries(db, ACCOUNT, HOOK, { limit: 50, after: AN_ID }), /SEARCH webhook_deliveries USING INDEX webhook_deliveries_webhook \(webhook_id=\? AND id<\?\)/],
  ])("%s", async (_name, run, expected) => {
    await seedHook();
    const plans = await plansOf(run);
    expect(plans.join("\n")).toMatch(expected);
    for (const detail of plans) expect(detail).not.toMatch(/SCAN|TEMP B-TREE/);
  });

  it("the names of the topics a page of the audit log names: each by its key, not all the account's", async () => {
    const detail = await plan(auditTopicNamesQuery(env.DB, ACCOUNT, ids).toSQL());
    expect(detail).toMatch(/SEARCH topics USING INDEX (sqlite_autoindex_topics_1 \(id=\?\)|topics_account \(account_id=\? AND id=\?\))/);
    expect(detail).not.toMatch(/SCAN (?!json_each)|TEMP B-TREE/);
  });

  it("domains", async () => {
    const plans = await plansOf((db) => listDomains(db, ACCOUNT, { limit: 100 }));
    expect(plans.join("\n")).toMatch(/SEARCH domains USING INDEX domains_account_name \(account_id=\?\)/);
    // Sorted by id: the account's domains only (a handful), not worth an index of their own.
    for (const detail of plans) expect(detail).not.toMatch(/SCAN/);
  });

  it("a delivery's attempts", async () => {
    await seedHook();
    const plans = await plansOf((db) => listWebhookAttempts(db, ACCOUNT, HOOK, DELIVERY, { limit: 100 }));
    const all = plans.join("\n");
    expect(all).toMatch(/SEARCH webhook_attempts USING INDEX webhook_attempts_delivery \(delivery_id=\?\)/);
    // The sort by id is of one delivery's attempts (at most the retry schedule's length).
    for (const detail of plans) expect(detail).not.toMatch(/SCAN/);
  });
});

// The Logs page reads a window of the account's (account_id, id) range newest first (a
// co-routine that stops when the page fills), each match's row by its primary key and its key
// by the key's; whatever the filters, no scan and no sort (worker/logs/search.ts).
describe("query plans of the Logs page", () => {
  it.each<[string, LogFilters, string | undefined]>([
    ["the first page", {}, undefined],
    ["a later page", {}, AN_ID],
    ["every filter, a later page", { status: "server_error", method: "POST", endpoint: "/emails", keyId: AN_ID }, AN_ID],
    ["by key", { keyId: AN_ID }, undefined],
  ])("%s walks the account's index newest first", async (_name, f, after) => {
    const detail = await plan(logSearchQuery(env.DB, ACCOUNT, f, { limit: 50, after }).toSQL());
    expect(detail).toMatch(after ? /SEARCH api_logs USING INDEX api_logs_account \(account_id=\? AND id<\?\)/ : /SEARCH api_logs USING INDEX api_logs_account \(account_id=\?\)/);
    expect(detail).toMatch(/SEARCH api_logs USING INDEX sqlite_autoindex_api_logs_1 \(id=\?\)/);
    expect(detail).toMatch(/SEARCH api_keys USING INDEX \w+ \(.*id=\?\)/);
    expect(detail).not.toMatch(/TEMP B-TREE|SCAN api_logs|SCAN api_keys/);
  });

  it("finds where a window ends on the index alone", async () => {
    const detail = await plan(windowEndQuery(env.DB, ACCOUNT, AN_ID).toSQL());
    expect(detail).toMatch(/SEARCH api_logs USING INDEX api_logs_account \(account_id=\? AND id<\?\)/);
    expect(detail).not.toMatch(/TEMP B-TREE|SCAN/);
  });
});

const HOOK = "0193a8a0-1c2d-7000-8000-00000000ac02";
const DELIVERY = "0193a8a0-1c2d-7000-8000-00000000ac03";

async function seedHook(): Promise<void> {
  await env.DB.batch([
    env.DB.prepare("INSERT OR IGNORE INTO accounts (id, name, created_at) VALUES (?, 'Plans', 0)").bind(ACCOUNT),
    env.DB.prepare("INSERT OR IGNORE INTO webhooks (id, account_id, endpoint, events_json, secret_sealed, created_at, updated_at) VALUES (?, ?, 'https://h.example/', '[]', 'x', 0, 0)").bind(HOOK, ACCOUNT),
    env.DB.prepare("INSERT OR IGNORE INTO webhook_deliveries (id, webhook_id, account_id, event_id, event_type, status, created_at) VALUES (?, ?, ?, 'e', 'email.sent', 'delivered', 0)").bind(DELIVERY, HOOK, ACCOUNT),
  ]);
}
