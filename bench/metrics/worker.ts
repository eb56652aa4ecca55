// The metrics benchmark's Worker (run by bench/metrics.ts with `wrangler dev -c
// bench/metrics/wrangler.toml`). Its routes call tern's own modules:
//   POST /setup            an account, its domains and emails, and the rollup rows 1,000,000
//                          events over 30 days leave behind (plus other accounts' rows);
//   POST /record?n&rollup  n opens recorded as worker/tracking/record.ts records one (event row,
//                          last_event, outbox row), each its own D1 batch, with or without the
//                          rollup statement in that batch;
//   POST /pool?n           n fresh delivered emails to open;
//   POST /open?n&rollup&pool  n opens of the newest `pool` of those in turn, through the pixel
//                          route's own steps (the token checked, the email loaded, recordOpen:
//                          its dedupe read, its batch with the rollup, the webhook hint on the
//                          queue), each a minute apart on a clock of its own so none is a repeat;
//   POST /sending?n        n fresh emails in `sending`, as the consumer's claim leaves them;
//   POST /deliver?n&rollup n of those settled as delivered by the consumer's own code
//                          (settleAttempt, settlementStatements, one D1 batch, announce);
//   (rollup=0 on /open and /deliver: the same code with the rollup statement taken out of its
//   batch by a D1 wrapper that both variants go through);
//   GET /metrics?<query>   worker/metrics/ answering a GET /emails/metrics query (no auth);
//   GET /pk                one email by primary key and account, as GET /emails/{id} reads it;
//   GET /insights?n        the deliverability checks of a 100 KB html email, n times.
// Timing is taken outside (Node): inside workerd the clock only moves on I/O.
import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { accounts, domains, emailEvents, emails } from "../../worker/db/schema.ts";
import { emailFacts, emailOutboxEvent, outboxInsert, outboxStatement } from "../../worker/events/outbox.ts";
import { insertEmailEvent } from "../../worker/db/compiled.ts";
import { uuidv7 } from "../../worker/ids.ts";
import { deliverabilityInsights } from "../../worker/insights/checks.ts";
import { parseMetricsQuery } from "../../worker/metrics/query.ts";
import { BUCKET_MS, rollupItem, rollupQuery, rollupStatement, SPANS, type RollupInput } from "../../worker/metrics/rollup.ts";
import { emailMetrics } from "../../worker/metrics/service.ts";
import { settlementStatements } from "../../worker/delivery/consumer.ts";
import { settleAttempt } from "../../worker/delivery/outcome.ts";
import { announce } from "../../worker/events/outbox.ts";
import { linkTokenKey } from "../../worker/tracking/outgoing.ts";
import { loadEmail, recordOpen } from "../../worker/tracking/record.ts";
import { signOpenToken, verifyOpenToken } from "../../worker/tracking/tokens.ts";
import type { EmailRow } from "../../worker/db/schema.ts";

interface BenchEnv {
  DB: D1Database;
  WEBHOOK_QUEUE: Queue;
}

/** A bench-only key for the open tokens (not a secret: the bench's own local state). */
const MASTER = { masterKey: "bench-metrics-master-key-0000000000000000000000" };
const OPENER = "0193a8a0-1c2d-7000-8000-0000000e0002";

/** The D1 binding both variants go through; with `drop`, a batch's rollup statement is taken
 * out before D1 sees it and an empty result put in its place, so the code around it runs as is. */
function wrapD1(real: D1Database, drop: boolean, trace?: string[]): D1Database {
  const isRollup = (s: D1PreparedStatement) => {
    const text = (s as unknown as { statement?: string }).statement;
    if (typeof text !== "string") throw new Error("bench: D1PreparedStatement has no statement text to look at");
    return text.startsWith(`INSERT INTO "metric_rollups"`);
  };
  return new Proxy(real, {
    get(target, prop) {
      if (prop === "prepare" && trace) return (text: string) => (trace.push(text), target.prepare(text));
      if (prop === "batch") {
        return async (statements: D1PreparedStatement[]) => {
          trace?.push(`batch of ${statements.length}${drop ? `, ${statements.filter(isRollup).length} dropped` : ""}`);
          if (!drop) return target.batch(statements);
          const keep = statements.filter((s) => !isRollup(s));
          const results = await target.batch(keep);
          const out: D1Result[] = [];
          let i = 0;
          for (const s of statements) out.push(isRollup(s) ? ({ success: true, results: [], meta: {} } as unknown as D1Result) : results[i++]!);
          return out;
        };
      }
      const v = Reflect.get(target, prop) as unknown;
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

/** The opens' clock: a minute apart, so the dedupe window never drops one. */
let openClock = Date.now();

let opened = 0;

async function opens(env: BenchEnv, n: number, withRollup: boolean, pool: number, trace?: string[]): Promise<Response> {
  const e = { DB: wrapD1(env.DB, !withRollup, trace), WEBHOOK_QUEUE: env.WEBHOOK_QUEUE };
  // The newest `pool` emails made by /pool, opened in turn: a few opens each, as mail is read
  // (an email's opens are what its unique-open check reads).
  const { results } = await env.DB.prepare("SELECT id FROM emails WHERE account_id = ? AND subject = 'open pool' ORDER BY created_at DESC, id LIMIT ?").bind(ACCOUNT, pool).all<{ id: string }>();
  const tokens = await Promise.all(results.map(async (r) => signOpenToken(await linkTokenKey(MASTER), r.id)));
  if (tokens.length < pool) throw new Error(`bench: ${tokens.length} pool emails, ${pool} asked`);
  let recorded = 0;
  for (let i = 0; i < n; i++) {
    // The pixel route's steps (worker/routes/tracking.ts).
    const claim = await verifyOpenToken(await linkTokenKey(MASTER), tokens[opened++ % tokens.length]!);
    const email = claim.ok ? await loadEmail(e.DB, claim.value.emailId) : undefined;
    if (email && (await recordOpen(e, email, { ipAddress: "198.51.100.1", userAgent: "bench" }, (openClock += 61_000)))) recorded++;
  }
  if (recorded !== n) throw new Error(`bench: ${recorded} of ${n} opens recorded`);
  return Response.json({ n: recorded });
}

/** n fresh delivered emails to open (/open's pool). */
async function openPool(env: BenchEnv, n: number): Promise<Response> {
  await env.DB.prepare(
    `WITH RECURSIVE k(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM k WHERE x < ?1)
     INSERT INTO emails (id, account_id, from_address, to_json, subject, domain_id, state, last_event, pending_json, message_id, created_at)
     SELECT lower(hex(randomblob(4))) || '-0000-7000-8000-' || lower(hex(randomblob(6))), account_id, from_address, to_json, 'open pool', domain_id, 'done', 'delivered', '[]', message_id, ?2 + x
     FROM emails, k WHERE emails.id = ?3`,
  ).bind(n, Date.now(), OPENER).run();
  return Response.json({ n });
}

async function sending(env: BenchEnv, n: number): Promise<Response> {
  // Copies of the bench email in `sending` with lease 1, as claimEmails leaves them.
  await env.DB.prepare(
    `WITH RECURSIVE k(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM k WHERE x < ?1)
     INSERT INTO emails (id, account_id, from_address, to_json, subject, domain_id, state, last_event, pending_json, message_id, created_at, lease_until)
     SELECT lower(hex(randomblob(4))) || '-0000-7000-8000-' || lower(hex(randomblob(6))), account_id, from_address, to_json, subject, domain_id, 'sending', 'queued', to_json, message_id, ?2, 1
     FROM emails, k WHERE emails.id = ?3`,
  ).bind(n, Date.now(), EMAIL).run();
  return Response.json({ n });
}

/** A settlement as it was written before its writes followed its UPDATE (the baseline of
 * bench/settlement-guard.ts): the UPDATE first, then plain inserts and an unconditional rollup. */
function unguarded(d1: D1Database, built: ReturnType<typeof settlementStatements>, email: EmailRow): ReturnType<typeof settlementStatements> {
  const { statements, settled, eventIds, outbox, rollup } = built;
  const events = eventIds.map((id, i) => insertEmailEvent.bind(d1, {
    id, emailId: email.id, accountId: email.accountId, type: rollup.events[i]!.type, dataJson: JSON.stringify(rollup.events[i]!.data), createdAt: rollup.at, dedupeKey: null,
  }));
  const { ifRecorded: _, ...plain } = rollup;
  return { statements: [statements[settled]!, ...events, ...outbox.map((e) => outboxStatement(d1, e))], settled: 0, eventIds, outbox, rollup: plain };
}

async function deliveries(env: BenchEnv, n: number, withRollup: boolean, trace?: string[], guarded = true): Promise<Response> {
  const d1 = wrapD1(env.DB, !withRollup, trace);
  const db = drizzle(d1);
  // What the consumer's claim returns: the emails to settle.
  const claimed = await db.select().from(emails).where(and(eq(emails.accountId, ACCOUNT), eq(emails.state, "sending"), eq(emails.leaseUntil, 1))).limit(n).all() as EmailRow[];
  if (claimed.length < n) throw new Error(`bench: ${claimed.length} emails in sending, ${n} asked`);
  for (const email of claimed) {
    const now = Date.now();
    const s = settleAttempt([{ recipient: "a@example.com", status: "accepted", code: 250, message: "250 2.0.0 OK", final: true }], { attempt: 1, retrySchedule: [60], alreadyDelayed: false });
    const built = settlementStatements(d1, email, 1, s, now, [1]);
    const { statements, settled, outbox, rollup } = guarded ? built : unguarded(d1, built, email);
    const results = await d1.batch([...statements, ...rollupStatement(d1, rollup)]);
    if ((results[settled] as unknown as { meta?: { changes?: number } }).meta?.changes !== 1) throw new Error("bench: the settlement did not update its email");
    await announce(env, outbox);
  }
  return Response.json({ n });
}

const ACCOUNT = "0193a8a0-1c2d-7000-8000-00000000be01";
const DOMAINS = Array.from({ length: 5 }, (_, i) => `0193a8a0-1c2d-7000-8000-00000000d0${String(i).padStart(2, "0")}`);
const EMAIL = "0193a8a0-1c2d-7000-8000-0000000e0001";
const DAYS = 30;
const EVENTS = 1_000_000;

/** A 100 KB newsletter: product cells with links, images and text, as email builders emit. */
function newsletter(): string {
  const cell = (i: number) => `<tr><td style="padding:8px;font-family:Arial,sans-serif"><a href="https://shop.bench.example/p/${i}?utm_source=news">Product ${i}</a>
<img src="https://cdn.bench.example/${i}.jpg" alt="Product ${i}" width="120"><p>Great product number ${i}, on sale this week only, while stocks last.</p></td></tr>`;
  let html = "<html><head><style>td{color:#333}</style></head><body><table>";
  for (let i = 0; html.length < 100 * 1024; i++) html += cell(i);
  return `${html}</table></body></html>`;
}
const HTML = newsletter();

async function setup(env: { DB: D1Database }, now: number): Promise<Response> {
  const db = drizzle(env.DB);
  const existing = await db.select().from(accounts).where(eq(accounts.id, ACCOUNT)).get();
  if (!existing) {
    await db.insert(accounts).values({ id: ACCOUNT, name: "bench", createdAt: now });
    await db.insert(domains).values(DOMAINS.map((id, i) => ({ id, accountId: ACCOUNT, name: `d${i}.bench.example`, status: "verified", createdAt: now })));
    await db.insert(emails).values({
      id: EMAIL, accountId: ACCOUNT, fromAddress: "news@d0.bench.example", toJson: '["a@example.com"]', subject: "bench", domainId: DOMAINS[0]!,
      state: "done", lastEvent: "delivered", pendingJson: "[]", messageId: "bench@d0.bench.example", createdAt: now,
    });
    await db.insert(emails).values({
      id: OPENER, accountId: ACCOUNT, fromAddress: "news@d0.bench.example", toJson: '["a@example.com"]', subject: "bench", domainId: DOMAINS[0]!,
      state: "done", lastEvent: "delivered", pendingJson: "[]", messageId: "bench2@d0.bench.example", createdAt: now,
    });
    // What 1,000,000 events over 30 days leave in the rollups: a row per domain and 15-minute
    // bucket (5 x 2,880), whose counters add up to 1,000,000 events. 20 other accounts share
    // the table with the same shape, so the account's rows are a range among others'.
    const last = Math.floor(now / BUCKET_MS);
    const first = last - DAYS * 96;
    const rows = DAYS * 96 * DOMAINS.length;
    const per = Math.round(EVENTS / rows / 7); // 7 counters below
    for (const [a, account] of [ACCOUNT, ...Array.from({ length: 20 }, (_, i) => `0193a8a0-1c2d-7000-8000-0000000a${String(i).padStart(4, "0")}`)].entries()) {
      for (const [d, domain] of DOMAINS.entries()) {
        // The 15-minute rows, then the hour, UTC-day and shifted-hour rows that sum them, as
        // the rollup statement writes them all.
        const dom = a === 0 ? domain : `${account}:${d}`;
        await env.DB.prepare(
          `WITH RECURSIVE b(x) AS (SELECT ?1 UNION ALL SELECT x + 1 FROM b WHERE x + 1 < ?2)
           INSERT INTO metric_rollups (account_id, span, bucket, domain_id, broadcast_id, received, sent, delivered, opened, unique_opened, clicked, unique_clicked)
           SELECT ?3, 1, x, ?4, '', ?5, ?5, ?5, ?5, ?5, ?5, ?5 FROM b`,
        ).bind(first, last, account, dom, per).run();
        for (const span of SPANS.filter((s) => s.id !== 1)) {
          await env.DB.prepare(
            `INSERT INTO metric_rollups (account_id, span, bucket, domain_id, broadcast_id, received, sent, delivered, opened, unique_opened, clicked, unique_clicked)
             SELECT account_id, ?1, bucket - (((bucket - ?4) % ?5) + ?5) % ?5 AS start, domain_id, '', SUM(received), SUM(sent), SUM(delivered), SUM(opened), SUM(unique_opened), SUM(clicked), SUM(unique_clicked)
             FROM metric_rollups WHERE account_id = ?2 AND span = 1 AND domain_id = ?3 GROUP BY start`,
          ).bind(span.id, account, dom, span.phase, span.length).run();
        }
      }
    }
  }
  const row = await env.DB.prepare("SELECT COUNT(*) AS rows, SUM(received + sent + delivered + opened + unique_opened + clicked + unique_clicked) AS events FROM metric_rollups WHERE account_id = ? AND span = 1").bind(ACCOUNT).first();
  return Response.json(row);
}

async function record(env: { DB: D1Database }, n: number, withRollup: boolean, trace?: string[]): Promise<Response> {
  const db = drizzle(trace ? wrapD1(env.DB, false, trace) : env.DB);
  const email = (await db.select().from(emails).where(eq(emails.id, EMAIL)).get())!;
  for (let i = 0; i < n; i++) {
    const now = Date.now();
    const eventId = uuidv7(now);
    const visitor = { ipAddress: "198.51.100.1", userAgent: "bench" };
    const event = emailOutboxEvent(email.accountId, { email: emailFacts(email), at: now, type: "email.opened", open: visitor }, now);
    await db.batch([
      db.insert(emailEvents).values({ id: eventId, emailId: email.id, accountId: email.accountId, type: "opened", dataJson: JSON.stringify({ open: visitor }), createdAt: now }),
      db.update(emails).set({ lastEvent: "opened" }).where(eq(emails.id, email.id)),
      outboxInsert(db, event),
      ...(withRollup ? rollupItem(db, { accountId: email.accountId, domainId: email.domainId, broadcastId: email.broadcastId, at: now, events: [{ type: "opened" }], engagement: { emailId: email.id, eventId } }) : []),
    ]);
  }
  return Response.json({ n });
}

/** The stripped batch as plain D1 statements (drizzle's builders turned into text once per
 * event, as drizzle does), with the rollup: none, its text with the values written in (what
 * rollupItem gave a drizzle batch at first), the same statement with bound parameters (what it
 * gives now), or bound and only the quarter-hour row. An experiment of the rollup's own cost (docs/benchmarks.md). */
async function recordHow(env: { DB: D1Database }, n: number, how: string): Promise<Response> {
  const db = drizzle(env.DB);
  const email = (await db.select().from(emails).where(eq(emails.id, EMAIL)).get())!;
  const bound = (q: { sql: string; params: unknown[] }) => env.DB.prepare(q.sql).bind(...q.params);
  for (let i = 0; i < n; i++) {
    const now = Date.now();
    const eventId = uuidv7(now);
    const visitor = { ipAddress: "198.51.100.1", userAgent: "bench" };
    const event = emailOutboxEvent(email.accountId, { email: emailFacts(email), at: now, type: "email.opened", open: visitor }, now);
    const statements = [
      bound(db.insert(emailEvents).values({ id: eventId, emailId: email.id, accountId: email.accountId, type: "opened", dataJson: JSON.stringify({ open: visitor }), createdAt: now }).toSQL()),
      bound(db.update(emails).set({ lastEvent: "opened" }).where(eq(emails.id, email.id)).toSQL()),
      bound((outboxInsert(db, event) as unknown as { toSQL(): { sql: string; params: unknown[] } }).toSQL()),
    ];
    const input: RollupInput = { accountId: email.accountId, domainId: email.domainId, broadcastId: email.broadcastId, at: now, events: [{ type: "opened" }], engagement: { emailId: email.id, eventId } };
    if (how === "inline") {
      // The first version's statement: the values written into the text as SQL literals.
      const q = rollupQuery(input)!;
      let k = 0;
      const literal = (v: string | number) => (typeof v === "number" ? String(v) : `'${v.replace(/'/g, "''")}'`);
      statements.push(env.DB.prepare(q.sql.replace(/\?/g, () => literal(q.params[k++]!))));
    } else if (how === "bound" || how === "quarter") {
      statements.push(bound(rollupQuery(input, how === "quarter" ? SPANS.filter((s) => s.id === 1) : undefined)!));
    }
    await env.DB.batch(statements);
  }
  return Response.json({ n });
}

export default {
  async fetch(req: Request, env: BenchEnv): Promise<Response> {
    const url = new URL(req.url);
    const now = Date.now();
    switch (url.pathname) {
      case "/health":
        return Response.json({ ok: true });
      case "/setup":
        return setup(env, now);
      case "/record-how":
        return recordHow(env, Number(url.searchParams.get("n") ?? 1), url.searchParams.get("how") ?? "none");
      case "/record":
        return record(env, Number(url.searchParams.get("n") ?? 1), url.searchParams.get("rollup") === "1");
      case "/open":
        return opens(env, Number(url.searchParams.get("n") ?? 1), url.searchParams.get("rollup") === "1", Number(url.searchParams.get("pool") ?? 1));
      case "/pool":
        return openPool(env, Number(url.searchParams.get("n") ?? 1));
      case "/sending":
        return sending(env, Number(url.searchParams.get("n") ?? 1));
      case "/deliver":
        return deliveries(env, Number(url.searchParams.get("n") ?? 1), url.searchParams.get("rollup") === "1", undefined, url.searchParams.get("guard") !== "0");
      case "/trace": {
        // The statements one event of a path prepares (in order) and the batches it sends: what
        // the with and without variants each run (docs/benchmarks.md, metrics).
        const trace: string[] = [];
        const path = url.searchParams.get("path");
        const withRollup = url.searchParams.get("rollup") === "1";
        if (path === "open") {
          await openPool(env, 1);
          await opens(env, 1, withRollup, 1, trace);
        } else if (path === "delivered") {
          await sending(env, 1);
          await deliveries(env, 1, withRollup, trace);
        } else await record(env, 1, withRollup, trace);
        return Response.json(trace);
      }
      case "/plan": {
        // SQLite's plan of the unique-open check and the open's dedupe read.
        const plans: Record<string, unknown> = {};
        const unique = `SELECT NOT EXISTS (SELECT 1 FROM "email_events" e WHERE e."email_id" = ? AND e."type" = ? AND e."id" <> ?)`;
        const dedupe = `SELECT "id" FROM "email_events" WHERE ("email_id" = ? AND "type" = ? AND "created_at" > ?) ORDER BY "id" DESC LIMIT 1`;
        for (const [k, q] of Object.entries({ unique, dedupe })) {
          plans[k] = (await env.DB.prepare(`EXPLAIN QUERY PLAN ${q}`).bind(OPENER, "opened", k === "unique" ? "x" : 0).all()).results;
        }
        return Response.json(plans);
      }
      case "/metrics": {
        const answer = await emailMetrics(env.DB, ACCOUNT, parseMetricsQuery(url.searchParams, now));
        return Response.json({ rows: answer.data?.length ?? 0, received: answer.totals.received });
      }
      case "/pk": {
        const row = await drizzle(env.DB).select().from(emails).where(and(eq(emails.id, EMAIL), eq(emails.accountId, ACCOUNT))).get();
        return Response.json({ found: !!row });
      }
      case "/insights": {
        const n = Number(url.searchParams.get("n") ?? 1);
        let checks = 0;
        for (let i = 0; i < n; i++) {
          checks += deliverabilityInsights(
            { from: "News <news@mail.bench.example>", replyTo: [], subject: "This week's products", html: HTML, text: null, headers: {}, attachments: [], broadcast: true },
            { name: "mail.bench.example", status: "verified", dmarc: { found: true, policy: "quarantine", record: "v=DMARC1; p=quarantine", inherited: true }, openTracking: true, clickTracking: true },
            { trackingHost: "t.bench.example" },
          ).length;
        }
        return Response.json({ n, checks, htmlBytes: HTML.length });
      }
    }
    return new Response("not found", { status: 404 });
  },
};
