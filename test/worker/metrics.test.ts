// GET /emails/metrics inside workerd: every bad parameter is a 422 that names it; the real
// event-writing sites (accept, the queue consumer with simulator outcomes, opens, clicks, a
// delivery report, one-click unsubscribes) leave rollups that add up to their events; and the
// answer has Resend's shape.
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { handleEmail } from "../../worker/inbound/email-handler.ts";
import { returnPathAddress } from "../../worker/sending/return-path.ts";
import { loadEmail, recordClick, recordOpen, recordUnsubscribe } from "../../worker/tracking/record.ts";
import { METRICS } from "../../worker/metrics/query.ts";
import { mergedRollups, rollupStatement, type RollupInput } from "../../worker/metrics/rollup.ts";
import { api, createAccount, insertDomain, purgeAll, type TestAccount } from "./fixtures.ts";
import { waitFor } from "./wait.ts";

const files = import.meta.glob("../fixtures/reports/*.eml", { query: "?raw", import: "default", eager: true }) as Record<string, string>;

interface Answer {
  object: string;
  start_date: string;
  end_date: string;
  metrics: string[];
  dimensions: string[];
  granularity: string;
  totals: Record<string, number>;
  data?: Record<string, string | number | null>[];
}

async function metrics(acct: TestAccount, query: string): Promise<Answer> {
  const res = await api(acct.token, "GET", `/emails/metrics${query ? `?${query}` : ""}`);
  const body = await res.json();
  expect(res.status, JSON.stringify(body)).toBe(200);
  return body as Answer;
}

async function refused(acct: TestAccount, query: string): Promise<string> {
  const res = await api(acct.token, "GET", `/emails/metrics?${query}`);
  const body = (await res.json()) as { statusCode: number; name: string; message: string };
  expect(res.status, `${query}: ${JSON.stringify(body)}`).toBe(422);
  expect(body).toMatchObject({ statusCode: 422, name: "validation_error" });
  return body.message;
}

let acct: TestAccount;
beforeAll(async () => {
  acct = await createAccount();
});

describe("GET /emails/metrics: parameters", () => {
  it("answers every metric over the last 7 days by default, totals only, on 15-minute edges", async () => {
    const before = Date.now();
    const a = await metrics(acct, "");
    expect(a).toMatchObject({ object: "metrics", metrics: [...METRICS], dimensions: [], granularity: "daily" });
    expect(a.data).toBeUndefined();
    expect(Object.keys(a.totals)).toEqual([...METRICS]);
    const start = Date.parse(a.start_date);
    const end = Date.parse(a.end_date);
    expect(start % 900_000).toBe(0);
    expect(end % 900_000).toBe(0);
    expect(end).toBeGreaterThanOrEqual(before);
    expect(end - before).toBeLessThanOrEqual(900_000 + 5_000);
    expect(end - start).toBeGreaterThanOrEqual(6 * 86_400_000);
    expect(end - start).toBeLessThanOrEqual(6 * 86_400_000 + 1_800_000);
  });

  it("takes lists comma-separated, repeated, or both, each item once", async () => {
    const a = await metrics(acct, "metrics=sent,delivered&metrics=bounce_rate&metrics=sent&dimensions=period&dimensions=domain");
    expect(a.metrics).toEqual(["sent", "delivered", "bounce_rate"]);
    expect(a.dimensions).toEqual(["period", "domain"]);
    expect(Object.keys(a.totals)).toEqual(["sent", "delivered", "bounce_rate"]);
  });

  it("reads dates in the timezone and a date as end_date as that whole day; future end dates are clamped to now", async () => {
    const a = await metrics(acct, "start_date=2026-07-01&end_date=2026-07-07&timezone=America/New_York");
    expect(a.start_date).toBe("2026-07-01T04:00:00.000Z");
    expect(a.end_date).toBe("2026-07-08T04:00:00.000Z");
    const k = await metrics(acct, "start_date=2026-01-01T00:00:00&end_date=2026-01-02T00:00:00&timezone=Asia/Kathmandu");
    expect(k.start_date).toBe("2025-12-31T18:15:00.000Z");
    const z = await metrics(acct, "start_date=2026-01-01T10:07:00%2B05:30&end_date=2026-01-01T12:00:00Z");
    expect(z.start_date).toBe("2026-01-01T04:30:00.000Z"); // 04:37Z, widened to its bucket
    // The same offset written unencoded (curl users do): "+" arrives as a space.
    expect((await metrics(acct, "start_date=2026-01-01T10:07:00+05:30&end_date=2026-01-01T12:00:00Z")).start_date).toBe("2026-01-01T04:30:00.000Z");
    const future = await metrics(acct, "start_date=2026-01-01&end_date=2999-01-01");
    expect(Date.parse(future.end_date)).toBeLessThanOrEqual(Date.now() + 900_000);
  });

  it("refuses each bad parameter with a 422 naming it", async () => {
    const cases: [string, RegExp][] = [
      ["start_date=yesterday", /`start_date`/],
      ["start_date=2026-02-30", /`start_date`/],
      ["end_date=2026-13-01", /`end_date`/],
      ["end_date=2026-01-01T25:00:00Z", /`end_date`/],
      ["start_date=2026-03-01&end_date=2026-02-01", /`start_date` must be on or before `end_date`/],
      ["start_date=2999-01-01", /`start_date` must be on or before/],
      ["start_date=2026-01-01&start_date=2026-01-02", /`start_date` must be given once/],
      ["timezone=Mars/Olympus_Mons", /`timezone`/],
      ["timezone=%2B05:30", /`timezone`/],
      ["granularity=yearly", /`granularity`/],
      ["metrics=sent,bogus", /`metrics` has an unknown value `bogus`/],
      ["metrics=sent,,delivered", /`metrics` has an empty item/],
      ["dimensions=country", /`dimensions` has an unknown value `country`/],
      ["dimensions=email,broadcast&email_id=0193a8a0-1c2d-7000-8000-000000000001", /`dimensions` cannot combine `email` and `broadcast`/],
      ["dimensions=email", /`email_id`/],
      ["domain_id=not-a-uuid", /`domain_id` must list UUIDs/],
      ["email_id=123", /`email_id` must list UUIDs/],
      ["broadcast_id=x", /`broadcast_id` must list UUIDs/],
      ["granularity=%00%1B%5B2J", /`granularity` must be one of .*; `\\u0000\\u001b\[2J` is not one\./],
      ["email_id=0193a8a0-1c2d-7000-8000-000000000001&broadcast_id=0193a8a0-1c2d-7000-8000-000000000002", /`email_id` cannot be combined with `broadcast_id`/],
      ["email_id=0193a8a0-1c2d-7000-8000-000000000001&dimensions=broadcast", /`email_id` cannot be combined with the `broadcast` dimension/],
      ["broadcast_id=0193a8a0-1c2d-7000-8000-000000000002&dimensions=email&email_id=0193a8a0-1c2d-7000-8000-000000000001", /cannot be combined/],
      [`domain_id=${Array.from({ length: 101 }, (_, i) => `0193a8a0-1c2d-7000-8000-${String(i).padStart(12, "0")}`).join(",")}`, /`domain_id` may list at most 100/],
      ["start_date=2020-01-01&end_date=2026-01-01&granularity=hourly&dimensions=period", /`granularity` `hourly` gives more than 10000 periods/],
    ];
    for (const [query, message] of cases) expect(await refused(acct, query), query).toMatch(message);
  });

  it("answers 10,000 periods but not 10,001", async () => {
    // 10,000 hours from a UTC hour edge.
    const start = Date.UTC(2025, 0, 1);
    const iso = (t: number) => new Date(t).toISOString();
    const ok = await metrics(acct, `start_date=${iso(start)}&end_date=${iso(start + 10_000 * 3_600_000)}&granularity=hourly&dimensions=period&metrics=sent`);
    expect(ok.data).toHaveLength(10_000);
    expect(await refused(acct, `start_date=${iso(start)}&end_date=${iso(start + 10_001 * 3_600_000)}&granularity=hourly&dimensions=period`)).toMatch(/`granularity`/);
  });

  it("needs a full-access key, like every read", async () => {
    const res = await api(null, "GET", "/emails/metrics");
    expect(res.status).toBe(401);
  });
});

describe("GET /emails/metrics: counts from the real event sites", () => {
  it("accept, delivery outcomes, opens, clicks, a report and unsubscribes all add up, per domain", async () => {
    const a = await createAccount();
    const second = `two-${a.domain}`;
    const { domainId: secondId } = await insertDomain(a.accountId, second);
    const send = async (from: string, to: string[]) => {
      const res = await api(a.token, "POST", "/emails", { from: `M <m@${from}>`, to, subject: "Metrics", html: "<p>hi</p>" });
      expect(res.status).toBe(200);
      return ((await res.json()) as { id: string }).id;
    };
    const settled = (id: string, last: string) =>
      waitFor(`${id} ${last}`, async () => {
        const e = (await (await api(a.token, "GET", `/emails/${id}`)).json()) as { last_event: string };
        return e.last_event === last ? true : undefined;
      }, 20_000);
    const sim = "simulator.tern.test";
    const delivered = await send(a.domain, [`delivered@${sim}`, `delivered+2@${sim}`]);
    const bounced = await send(a.domain, [`bounced@${sim}`]);
    const complained = await send(second, [`complained@${sim}`]);
    const delayed = await send(second, [`delayed@${sim}`]);
    await Promise.all([settled(delivered, "delivered"), settled(bounced, "bounced"), settled(complained, "complained"), settled(delayed, "delivered")]);

    // Opens: two readings of one email (a minute apart) and one of another; clicks likewise.
    const email = (await loadEmail(env.DB, delivered))!;
    const visitor = { ipAddress: "198.51.100.7", userAgent: "test" };
    const t = Date.now() - 120_000; // in the past: the default range ends now
    expect(await recordOpen(env, email, visitor, t)).toBe(true);
    expect(await recordOpen(env, email, visitor, t + 61_000)).toBe(true);
    expect(await recordOpen(env, email, visitor, t + 62_000)).toBe(false); // the same reading again
    await recordOpen(env, (await loadEmail(env.DB, complained))!, visitor, t);
    await recordClick(env, email, 0, "https://a.example/", visitor, t);
    await recordClick(env, email, 0, "https://a.example/", { ...visitor, ipAddress: "198.51.100.8" }, t + 1); // another reader: counted (the same one again would not be)
    // One-click unsubscribe, twice: one change, counted once.
    await recordUnsubscribe(env, { accountId: a.accountId, emailId: delivered, recipient: `delivered@${sim}` }, t);
    await recordUnsubscribe(env, { accountId: a.accountId, emailId: delivered, recipient: `delivered@${sim}` }, t + 5);

    // A DSN for a real-address email: delivered by the relay, then bounced by report (four
    // copies at once, as MTAs and forwards do): counted once.
    const reported = await send(a.domain, ["nobody@example.org"]);
    await settled(reported, "delivered");
    const returnPath = await returnPathAddress(env.MASTER_KEY, reported, "nobody@example.org", "send", a.domain);
    const dsn = files["../fixtures/reports/postfix-bounce-user-unknown.eml"]!;
    await Promise.all(Array.from({ length: 4 }, () => handleEmail(incomingReport(returnPath, dsn), env)));

    const all = await metrics(a, "");
    expect(all.totals).toMatchObject({
      received: 6, // recipients accepted
      sent: 5, // complained@ and delayed@'s retry, two delivered@, nobody@
      delivered: 5,
      bounced: 2,
      bounced_permanent: 2,
      bounced_transient: 0,
      complained: 1,
      delivery_delayed: 1,
      failed: 0,
      suppressed: 0,
      opened: 3,
      unique_opened: 2,
      clicked: 2,
      unique_clicked: 1,
      unsubscribed: 1,
      delivery_rate: Math.round((5 / 6) * 1e6) / 1e6,
      bounce_rate: Math.round((2 / 6) * 1e6) / 1e6,
      open_rate: 0.4,
      click_rate: 0.2,
      complaint_rate: 0.2,
      unsubscribe_rate: 0.2,
    });

    // The same numbers from the emails' own events (the email_id path).
    const ids = [delivered, bounced, complained, delayed, reported];
    const fromEvents = await metrics(a, `email_id=${ids.join(",")}`);
    expect(fromEvents.totals).toEqual(all.totals);

    const byDomain = await metrics(a, "dimensions=domain&metrics=received,delivered,complained");
    expect(byDomain.data).toEqual([
      { domain_id: a.domainId, domain_name: a.domain, received: 4, delivered: 3, complained: 0 },
      { domain_id: secondId, domain_name: second, received: 2, delivered: 2, complained: 1 },
    ].sort((x, y) => (x.domain_name < y.domain_name ? -1 : 1)));
    const filtered = await metrics(a, `domain_id=${secondId}&metrics=received`);
    expect(filtered.totals).toEqual({ received: 2 });

    const perEmail = await metrics(a, `dimensions=email&email_id=${delivered},${bounced}&metrics=received,unique_opened,opened`);
    expect(perEmail.data).toEqual(
      [
        { email_id: delivered, received: 2, unique_opened: 1, opened: 2 },
        { email_id: bounced, received: 1, unique_opened: 0, opened: 0 },
      ].sort((x, y) => (x.email_id < y.email_id ? -1 : 1)),
    );

    // Another account sees none of it, even naming the ids.
    const other = await createAccount();
    expect((await metrics(other, "metrics=received")).totals).toEqual({ received: 0 });
    expect((await metrics(other, `email_id=${ids.join(",")}&metrics=received`)).totals).toEqual({ received: 0 });
    expect((await metrics(other, `domain_id=${a.domainId}&metrics=received`)).totals).toEqual({ received: 0 });
  });

  it("rollups outlive the retention purge", async () => {
    const a = await createAccount();
    const res = await api(a.token, "POST", "/emails", { from: `m@${a.domain}`, to: "delivered@simulator.tern.test", subject: "Old", text: "x" });
    const { id } = (await res.json()) as { id: string };
    await waitFor("delivered", async () => (((await (await api(a.token, "GET", `/emails/${id}`)).json()) as { last_event: string }).last_event === "delivered" ? true : undefined), 20_000);
    // Purge as if 31 days had passed: the email and its events go, the counts stay.
    await purgeAll(30, Date.now() + 31 * 86_400_000);
    expect((await api(a.token, "GET", `/emails/${id}`)).status).toBe(404);
    expect((await metrics(a, "metrics=received,delivered")).totals).toEqual({ received: 1, delivered: 1 });
  });
});

function incomingReport(to: string, raw: string): ForwardableEmailMessage {
  const bytes = new TextEncoder().encode(raw);
  return {
    from: "",
    to,
    headers: new Headers(),
    raw: new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(bytes);
        c.close();
      },
    }),
    rawSize: bytes.length,
    canBeForwarded: false,
    setReject() {},
    forward: () => Promise.reject(new Error("not used")),
    reply: () => Promise.reject(new Error("not used")),
  } as unknown as ForwardableEmailMessage;
}

describe("rollups of several settlements written as one", () => {
  it("count what one statement per settlement counts", async () => {
    const [one, merged] = [crypto.randomUUID(), crypto.randomUUID()];
    const t = Date.UTC(2026, 10, 20, 10, 7);
    const inputs = (accountId: string): RollupInput[] => [
      { accountId, domainId: "d1", broadcastId: null, at: t, events: [{ type: "sent", data: {} }, { type: "delivered", data: { recipients: ["a@x.test"] } }] },
      { accountId, domainId: "d1", broadcastId: null, at: t + 60_000, events: [{ type: "bounced", data: { recipients: ["b@x.test"], bounce: { type: "Permanent" } } }] },
      { accountId, domainId: "d1", broadcastId: "b1", at: t, events: [{ type: "delivered", data: { recipients: ["c@x.test", "d@x.test"] } }] },
      { accountId, domainId: "d2", broadcastId: null, at: t + 20 * 60_000, events: [{ type: "complained", data: { recipients: ["e@x.test"] } }] },
    ];
    await env.DB.batch(inputs(one).flatMap((i) => rollupStatement(env.DB, i)));
    const statements = mergedRollups(env.DB, inputs(merged));
    expect(statements.length).toBe(3); // d1 in one bucket, d1's broadcast, d2 in the next bucket
    await env.DB.batch(statements);
    const rows = async (accountId: string) =>
      (await env.DB.prepare("SELECT * FROM metric_rollups WHERE account_id = ? ORDER BY domain_id, broadcast_id, span, bucket").bind(accountId).all<Record<string, unknown>>()).results
        .map(({ account_id: _, ...rest }) => rest);
    const expected = await rows(one);
    expect(expected.length).toBeGreaterThan(0);
    expect(await rows(merged)).toEqual(expected);
  });
});

describe("rollups of settlements counted only if their event is recorded, written as one", () => {
  it("count what the recorded ones count alone, in one statement per key", async () => {
    const a = await createAccount();
    const res = await api(a.token, "POST", "/emails", { from: `a@${a.domain}`, to: "delivered@simulator.tern.test", subject: "s", text: "t", scheduled_at: "in 20 days" });
    const { id } = (await res.json()) as { id: string };
    const recorded = (await env.DB.prepare("SELECT id FROM email_events WHERE email_id = ?").bind(id).first<{ id: string }>())!.id;
    const [alone, merged] = [crypto.randomUUID(), crypto.randomUUID()];
    const t = Date.UTC(2026, 10, 20, 10, 7);
    const inputs = (accountId: string): (RollupInput & { ifRecorded: string })[] => [
      { accountId, domainId: "d1", broadcastId: null, at: t, events: [{ type: "sent", data: {} }, { type: "delivered", data: { recipients: ["a@x.test"] } }], ifRecorded: recorded },
      { accountId, domainId: "d1", broadcastId: null, at: t + 60_000, events: [{ type: "delivered", data: {} }, { type: "complained", data: {} }], ifRecorded: crypto.randomUUID() },
      { accountId, domainId: "d1", broadcastId: null, at: t + 120_000, events: [{ type: "bounced", data: { recipients: ["b@x.test", "c@x.test"], bounce: { type: "Permanent" } } }], ifRecorded: recorded },
      { accountId, domainId: "d2", broadcastId: null, at: t, events: [{ type: "failed", data: {} }], ifRecorded: crypto.randomUUID() },
    ];
    await env.DB.batch(inputs(alone).filter((i) => i.ifRecorded === recorded).flatMap(({ ifRecorded: _, ...i }) => rollupStatement(env.DB, i)));
    const statements = mergedRollups(env.DB, inputs(merged));
    expect(statements.length).toBe(2); // d1's three in one, d2's one (which writes nothing)
    await env.DB.batch(statements);
    const rows = async (accountId: string) =>
      (await env.DB.prepare("SELECT * FROM metric_rollups WHERE account_id = ? ORDER BY domain_id, broadcast_id, span, bucket").bind(accountId).all<Record<string, unknown>>()).results
        .map(({ account_id: _, ...rest }) => rest);
    const expected = await rows(alone);
    expect(expected.length).toBe(5);
    expect(expected[0]).toMatchObject({ sent: 1, delivered: 1, bounced: 2, complained: 0 });
    expect(await rows(merged)).toEqual(expected);
  });
});

describe("migration 0014: shifted hour rows for counts recorded before them", () => {
  it("sums the quarter hours into hours from :15 and :30, and sets rows already there to the same sums", async () => {
    const a = await createAccount();
    const { rollupQuery, SPANS } = await import("../../worker/metrics/rollup.ts");
    const before = SPANS.filter((s) => s.id === 1 || s.id === 4 || s.id === 96);
    const at = (h: number, m: number) => Date.UTC(2026, 5, 10, h, m);
    // Counted as the code before the shifted spans counted: quarter hours, UTC hours and days.
    const old = [at(9, 5), at(9, 20), at(9, 50), at(10, 10), at(10, 25), at(10, 40), at(11, 0)];
    for (const t of old) {
      const q = rollupQuery({ accountId: a.accountId, domainId: a.domainId, broadcastId: null, at: t, events: [{ type: "queued", data: { recipients: ["x@example.com"] } }] }, before)!;
      await env.DB.prepare(q.sql).bind(...q.params).run();
    }
    // One event counted by the new code (all spans) before the migration runs.
    const q = rollupQuery({ accountId: a.accountId, domainId: a.domainId, broadcastId: null, at: at(10, 35), events: [{ type: "queued", data: { recipients: ["y@example.com"] } }] })!;
    await env.DB.prepare(q.sql).bind(...q.params).run();
    const migration = env.TEST_MIGRATIONS.find((m) => m.name.includes("shifted_hour_rollups"))!;
    for (let run = 0; run < 2; run++) for (const query of migration.queries) await env.DB.prepare(query).run();
    // Kathmandu's hours start at :15 (span 401), Kolkata's at :30 (402); each as from raw counts.
    const hours = async (tz: string) =>
      (await metrics(a, `start_date=2026-06-10T09:00:00Z&end_date=2026-06-10T12:00:00Z&timezone=${tz}&granularity=hourly&dimensions=period&metrics=received`)).data!.map((r) => [String(r.period).slice(11, 16), r.received]);
    // (The first period is the hour the range's start falls in.)
    expect(await hours("Asia/Kathmandu")).toEqual([["08:15", 1], ["09:15", 3], ["10:15", 4], ["11:15", 0]]);
    expect(await hours("Asia/Kolkata")).toEqual([["08:30", 2], ["09:30", 3], ["10:30", 3], ["11:30", 0]]);
    const rows = await env.DB.prepare("SELECT span, bucket, received FROM metric_rollups WHERE account_id = ? AND span IN (401, 402) ORDER BY span, bucket").bind(a.accountId).all<{ span: number; bucket: number; received: number }>();
    expect(rows.results.map((r) => [r.span, new Date(r.bucket * 900_000).toISOString().slice(11, 16), r.received])).toEqual([
      [401, "08:15", 1], [401, "09:15", 3], [401, "10:15", 4], [402, "08:30", 2], [402, "09:30", 3], [402, "10:30", 3],
    ]);
  });
});
