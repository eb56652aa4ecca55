// The metrics benchmark's Worker (run by bench/metrics.ts with `wrangler dev -c
// bench/metrics/wrangler.toml`). Its routes call tern's own modules:
//   POST /setup            an account, its domains and emails, and the rollup rows 1,000,000
//                          events over 30 days leave behind (plus other accounts' rows);
//   POST /record?n&rollup  n opens recorded as worker/tracking/record.ts records one (event row,
//                          last_event, outbox row), each its own D1 batch, with or without the
//                          rollup statement in that batch;
//   GET /metrics?<query>   worker/metrics/ answering a GET /emails/metrics query (no auth);
//   GET /pk                one email by primary key and account, as GET /emails/{id} reads it;
//   GET /insights?n        the deliverability checks of a 100 KB html email, n times.
// Timing is taken outside (Node): inside workerd the clock only moves on I/O.
import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { accounts, domains, emailEvents, emails } from "../../worker/db/schema.ts";
import { emailFacts, emailOutboxEvent, outboxInsert } from "../../worker/events/outbox.ts";
import { uuidv7 } from "../../worker/ids.ts";
import { deliverabilityInsights } from "../../worker/insights/checks.ts";
import { parseMetricsQuery } from "../../worker/metrics/query.ts";
import { BUCKET_MS, rollupItem } from "../../worker/metrics/rollup.ts";
import { emailMetrics } from "../../worker/metrics/service.ts";

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
    // What 1,000,000 events over 30 days leave in the rollups: a row per domain and 15-minute
    // bucket (5 x 2,880), whose counters add up to 1,000,000 events. 20 other accounts share
    // the table with the same shape, so the account's rows are a range among others'.
    const last = Math.floor(now / BUCKET_MS);
    const first = last - DAYS * 96;
    const rows = DAYS * 96 * DOMAINS.length;
    const per = Math.round(EVENTS / rows / 7); // 7 counters below
    for (const [a, account] of [ACCOUNT, ...Array.from({ length: 20 }, (_, i) => `0193a8a0-1c2d-7000-8000-0000000a${String(i).padStart(4, "0")}`)].entries()) {
      for (const [d, domain] of DOMAINS.entries()) {
        // The 15-minute rows, then the hour and UTC-day rows that sum them, as the rollup
        // statement writes all three.
        const dom = a === 0 ? domain : `${account}:${d}`;
        await env.DB.prepare(
          `WITH RECURSIVE b(x) AS (SELECT ?1 UNION ALL SELECT x + 1 FROM b WHERE x + 1 < ?2)
           INSERT INTO metric_rollups (account_id, span, bucket, domain_id, broadcast_id, received, sent, delivered, opened, unique_opened, clicked, unique_clicked)
           SELECT ?3, 1, x, ?4, '', ?5, ?5, ?5, ?5, ?5, ?5, ?5 FROM b`,
        ).bind(first, last, account, dom, per).run();
        for (const span of [4, 96]) {
          await env.DB.prepare(
            `INSERT INTO metric_rollups (account_id, span, bucket, domain_id, broadcast_id, received, sent, delivered, opened, unique_opened, clicked, unique_clicked)
             SELECT account_id, ?1, bucket - bucket % ?1, domain_id, '', SUM(received), SUM(sent), SUM(delivered), SUM(opened), SUM(unique_opened), SUM(clicked), SUM(unique_clicked)
             FROM metric_rollups WHERE account_id = ?2 AND span = 1 AND domain_id = ?3 GROUP BY bucket - bucket % ?1`,
          ).bind(span, account, dom).run();
        }
      }
    }
  }
  const row = await env.DB.prepare("SELECT COUNT(*) AS rows, SUM(received + sent + delivered + opened + unique_opened + clicked + unique_clicked) AS events FROM metric_rollups WHERE account_id = ? AND span = 1").bind(ACCOUNT).first();
  return Response.json(row);
}

async function record(env: { DB: D1Database }, n: number, withRollup: boolean): Promise<Response> {
  const db = drizzle(env.DB);
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

export default {
  async fetch(req: Request, env: { DB: D1Database }): Promise<Response> {
    const url = new URL(req.url);
    const now = Date.now();
    switch (url.pathname) {
      case "/health":
        return Response.json({ ok: true });
      case "/setup":
        return setup(env, now);
      case "/record":
        return record(env, Number(url.searchParams.get("n") ?? 1), url.searchParams.get("rollup") === "1");
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
