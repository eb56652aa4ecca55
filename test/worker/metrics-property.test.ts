// A property test of GET /emails/metrics: random events across accounts, domains, broadcasts
// and times chosen at the edges that matter (15-minute buckets, local midnights in +05:30 and
// +05:45, daylight-saving changes in New York, London, St John's and Lord Howe, month ends),
// each written the way the event sites write them (the event row and its rollup in one
// batch, duplicates of a report ignored), then random queries whose every answer is compared
// with counts computed here, from the raw events, with Intl's own reading of local time.
import { env } from "cloudflare:workers";
import { drizzle } from "drizzle-orm/d1";
import { beforeAll, describe, expect, it } from "vitest";
import { emailEvents, emails } from "../../worker/db/schema.ts";
import { uuidv7 } from "../../worker/ids.ts";
import { rollupItem } from "../../worker/metrics/rollup.ts";
import { random } from "../support/random.ts";
import { api, createAccount, insertDomain, type TestAccount } from "./fixtures.ts";

const rnd = random(20261124);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
const int = (lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1));
const subset = <T>(xs: readonly T[]): T[] => xs.filter(() => rnd() < 0.5);

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
const Q = 15 * MIN;

/** Instants where periods of some timezone begin or the offset changes. */
const EDGES = [
  Date.UTC(2026, 2, 8, 7), // New York: EST -> EDT
  Date.UTC(2026, 10, 1, 6), // New York: EDT -> EST (01:00 twice)
  Date.UTC(2026, 2, 29, 1), // London: GMT -> BST
  Date.UTC(2026, 9, 25, 1), // London: BST -> GMT
  Date.UTC(2026, 3, 4, 15), // Lord Howe: +11 -> +10:30
  Date.UTC(2026, 9, 3, 15, 30), // Lord Howe: +10:30 -> +11
  Date.UTC(2026, 2, 8, 5, 30), // St John's: -3:30 -> -2:30
  Date.UTC(2026, 5, 14, 18, 30), // Kolkata midnight
  Date.UTC(2026, 5, 14, 18, 15), // Kathmandu midnight
  Date.UTC(2026, 4, 31, 23, 59, 59, 999), // a month's last millisecond
  Date.UTC(2026, 6, 6), // a Monday
];
const ZONES = ["UTC", "America/New_York", "Europe/London", "Asia/Kolkata", "Asia/Kathmandu", "Australia/Lord_Howe", "America/St_Johns"];
const GRANULARITIES = ["hourly", "daily", "weekly", "monthly"] as const;

interface Email {
  id: string;
  account: TestAccount;
  domainId: string;
  broadcastId: string | null;
}
interface RawEvent {
  email: Email;
  type: string;
  data: Record<string, unknown>;
  at: number;
  /** A second copy of a report: must count nothing. */
  duplicate?: boolean;
}

const COUNTS = ["received", "sent", "delivered", "delivery_delayed", "bounced", "bounced_permanent", "bounced_transient", "bounced_undetermined", "complained", "failed", "suppressed", "opened", "unique_opened", "clicked", "unique_clicked", "unsubscribed"] as const;
type Count = (typeof COUNTS)[number];
const RATES: Record<string, [Count, Count]> = {
  delivery_rate: ["delivered", "received"],
  bounce_rate: ["bounced", "received"],
  complaint_rate: ["complained", "sent"],
  open_rate: ["unique_opened", "sent"],
  click_rate: ["unique_clicked", "sent"],
  unsubscribe_rate: ["unsubscribed", "sent"],
};

/** The definitions, restated from the README rather than imported. */
function expectedCounts(e: RawEvent, firstOfEmail: boolean): Partial<Record<Count, number>> {
  const n = Array.isArray(e.data.recipients) ? (e.data.recipients as unknown[]).length : 1;
  switch (e.type) {
    case "queued":
      return { received: n };
    case "bounced": {
      const t = (e.data.bounce as { type: string }).type;
      return { bounced: n, [t === "Permanent" ? "bounced_permanent" : t === "Transient" ? "bounced_transient" : "bounced_undetermined"]: n };
    }
    case "opened":
      return { opened: 1, unique_opened: firstOfEmail ? 1 : 0 };
    case "clicked":
      return { clicked: 1, unique_clicked: firstOfEmail ? 1 : 0 };
    case "unsubscribed":
      return { unsubscribed: 1 };
    case "sent": case "delivered": case "delivery_delayed": case "complained": case "failed": case "suppressed":
      return { [e.type]: n };
    default:
      return {}; // scheduled (a reschedule), canceled
  }
}

/** Local wall-clock fields of an instant, as Intl reads them. */
function local(tz: string, t: number) {
  const parts = new Intl.DateTimeFormat("en-US", { timeZone: tz, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", timeZoneName: "longOffset" }).formatToParts(t);
  const p = Object.fromEntries(parts.map((x) => [x.type, x.value]));
  return { y: Number(p.year), m: Number(p.month), d: Number(p.day), h: p.hour!, offset: p.timeZoneName! };
}

/** The period an instant falls in, as a key: a local date, ISO week's Monday, month, or an hour
 * with its offset (a repeated hour is two periods). */
function periodKey(tz: string, g: (typeof GRANULARITIES)[number], t: number): string {
  const l = local(tz, t);
  const date = `${l.y}-${String(l.m).padStart(2, "0")}-${String(l.d).padStart(2, "0")}`;
  switch (g) {
    case "hourly":
      return `${date}T${l.h}${l.offset}`;
    case "daily":
      return date;
    case "weekly": {
      const day = Date.UTC(l.y, l.m - 1, l.d) / DAY;
      return new Date((day - ((day + 3) % 7)) * DAY).toISOString().slice(0, 10);
    }
    case "monthly":
      return date.slice(0, 7);
  }
}

let accounts: TestAccount[];
const emailList: Email[] = [];
const events: RawEvent[] = [];
const domainsOf = new Map<string, string[]>();
const broadcastsOf = new Map<string, string[]>();

beforeAll(async () => {
  const db = drizzle(env.DB);
  accounts = [await createAccount(), await createAccount()];
  for (const a of accounts) {
    const second = await insertDomain(a.accountId, `b-${a.domain}`);
    domainsOf.set(a.accountId, [a.domainId, second.domainId]);
    broadcastsOf.set(a.accountId, [uuidv7(), uuidv7()]);
    for (let i = 0; i < 12; i++) {
      const email: Email = { id: uuidv7(), account: a, domainId: pick(domainsOf.get(a.accountId)!), broadcastId: rnd() < 0.5 ? pick(broadcastsOf.get(a.accountId)!) : null };
      emailList.push(email);
      await db.insert(emails).values({
        id: email.id, accountId: a.accountId, fromAddress: `m@${a.domain}`, toJson: "[]", subject: "p", domainId: email.domainId, broadcastId: email.broadcastId,
        state: "done", lastEvent: "sent", pendingJson: "[]", messageId: `${email.id}@x`, createdAt: Date.UTC(2026, 0, 1),
      });
    }
  }
  const types = ["queued", "queued", "sent", "delivered", "delivered", "delivery_delayed", "bounced", "complained", "failed", "suppressed", "opened", "opened", "opened", "clicked", "clicked", "unsubscribed", "scheduled", "canceled"];
  for (let i = 0; i < 700; i++) {
    const type = pick(types);
    const recipients = Array.from({ length: int(1, 3) }, (_, k) => `r${k}@example.com`);
    const data: Record<string, unknown> =
      type === "opened" || type === "clicked" ? {}
      : type === "scheduled" ? { scheduled_at: "2026-12-01T00:00:00.000Z" }
      : type === "canceled" ? {}
      : type === "unsubscribed" ? { recipients: recipients.slice(0, 1) }
      : type === "bounced" ? { recipients, bounce: { type: pick(["Permanent", "Transient", "Undetermined"]) }, status: `5.1.${i}` }
      : { recipients };
    // At an edge, a bucket edge near it, or a millisecond either side of one.
    const at = pick(EDGES) + int(-4 * 24 * 4, 4 * 24 * 4) * Q + pick([0, 0, -1, 1, int(0, Q - 1)]);
    events.push({ email: pick(emailList), type, data, at });
  }
  events.sort((a, b) => a.at - b.at);
  for (const e of events) {
    const id = uuidv7(e.at);
    const report = e.type === "bounced";
    const insert = db.insert(emailEvents).values({ id, emailId: e.email.id, accountId: e.email.account.accountId, type: e.type, dataJson: JSON.stringify(e.data), createdAt: e.at, dedupeKey: report ? JSON.stringify([e.type, e.data.status]) : null });
    const rollup = rollupItem(db, {
      accountId: e.email.account.accountId, domainId: e.email.domainId, broadcastId: e.email.broadcastId, at: e.at, events: [e],
      ...(e.type === "opened" || e.type === "clicked" ? { engagement: { emailId: e.email.id, eventId: id } } : {}),
      ...(report ? { ifRecorded: id } : {}),
    });
    await db.batch([report ? insert.onConflictDoNothing() : insert, ...rollup]);
    if (report && rnd() < 0.3) {
      // The same report again: the dedupe key refuses the event, so nothing may count.
      const again = uuidv7(e.at + 7);
      await db.batch([
        db.insert(emailEvents).values({ id: again, emailId: e.email.id, accountId: e.email.account.accountId, type: e.type, dataJson: JSON.stringify(e.data), createdAt: e.at + 7, dedupeKey: JSON.stringify([e.type, e.data.status]) }).onConflictDoNothing(),
        ...rollupItem(db, { accountId: e.email.account.accountId, domainId: e.email.domainId, broadcastId: e.email.broadcastId, at: e.at + 7, events: [e], ifRecorded: again }),
      ]);
    }
  }
}, 120_000);

interface Query {
  account: TestAccount;
  tz: string;
  g: (typeof GRANULARITIES)[number];
  dims: string[];
  start: number;
  end: number;
  domainIds: string[];
  broadcastIds: string[];
  emailIds: string[];
  metrics: string[];
}

/** Zones whose hours start at :15 and :30 (UTC), read from the shifted hour rows (spans 401
 * and 402): the first queries ask each of them for hours and days, so every run covers them. */
const SHIFTED: [string, (typeof GRANULARITIES)[number]][] = ["Asia/Kathmandu", "Asia/Kolkata", "America/St_Johns"].flatMap((z) => [[z, "hourly"], [z, "daily"]] as [string, (typeof GRANULARITIES)[number]][]);

function randomQuery(n: number): Query {
  const account = pick(accounts);
  const forced = SHIFTED[n];
  const g = forced ? forced[1] : pick(GRANULARITIES);
  const tz = forced ? forced[0] : g === "hourly" ? pick(ZONES.filter((z) => z !== "Australia/Lord_Howe")) : pick(ZONES);
  const base = pick(EDGES);
  // Ranges on UTC days or hours let the answer come from the day or hour rollup rows.
  const align = pick([1, HOUR, DAY]);
  const start = Math.floor((base - int(0, 5 * DAY)) / align) * align;
  const end = Math.ceil((base + int(0, 5 * DAY)) / align) * align;
  const byEmail = rnd() < 0.3;
  const accountEmails = emailList.filter((e) => e.account === account);
  const dims = byEmail ? [...subset(["period", "domain"]), "email"] : subset(["period", "domain", "broadcast"]);
  const metrics = rnd() < 0.4 ? [] : subset([...COUNTS, ...Object.keys(RATES)]);
  const broadcastIds = !byEmail && rnd() < 0.3 ? subset(broadcastsOf.get(account.accountId)!) : [];
  // email_id excludes broadcast filters and the broadcast dimension (the API says so).
  const withEmails = byEmail || (broadcastIds.length === 0 && !dims.includes("broadcast") && rnd() < 0.3);
  return {
    account, tz, g, dims, start, end, metrics, broadcastIds,
    domainIds: rnd() < 0.3 ? domainsOf.get(account.accountId)!.slice(0, 1) : [],
    emailIds: withEmails ? [...subset(accountEmails).map((e) => e.id), ...(rnd() < 0.3 ? [pick(emailList).id] : []), accountEmails[0]!.id] : [],
  };
}

function zero(): Record<Count, number> {
  return Object.fromEntries(COUNTS.map((c) => [c, 0])) as Record<Count, number>;
}

function withRates(c: Record<Count, number>, metrics: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of metrics) {
    const r = RATES[m];
    out[m] = r ? (c[r[1]] === 0 ? 0 : Math.round((c[r[0]] / c[r[1]]) * 1e6) / 1e6) : c[m as Count];
  }
  return out;
}

describe("GET /emails/metrics against counts computed from the raw events", () => {
  it("agrees on every row and total of 150 random queries", async () => {
    const first = new Set<string>();
    const firstOf = new Map<RawEvent, boolean>();
    for (const e of events) {
      const k = `${e.email.id} ${e.type}`;
      firstOf.set(e, !first.has(k));
      first.add(k);
    }
    for (let n = 0; n < 150; n++) {
      const q = randomQuery(n);
      const params = new URLSearchParams({ start_date: new Date(q.start).toISOString(), end_date: new Date(q.end).toISOString(), timezone: q.tz, granularity: q.g });
      if (q.dims.length) params.set("dimensions", q.dims.join(","));
      if (q.metrics.length) params.set("metrics", q.metrics.join(","));
      if (q.domainIds.length) params.set("domain_id", q.domainIds.join(","));
      if (q.broadcastIds.length) params.set("broadcast_id", q.broadcastIds.join(","));
      if (q.emailIds.length) params.set("email_id", q.emailIds.join(","));
      const res = await api(q.account.token, "GET", `/emails/metrics?${params}`);
      const body = (await res.json()) as { start_date: string; end_date: string; metrics: string[]; totals: Record<string, number>; data?: Record<string, string | number | null>[] };
      const label = `query ${n}: ${params}`;
      expect(res.status, `${label} ${JSON.stringify(body)}`).toBe(200);
      // The range, widened to whole 15-minute buckets.
      const S = Math.floor(q.start / Q) * Q;
      const E = Math.ceil(q.end / Q) * Q;
      expect([body.start_date, body.end_date], label).toEqual([new Date(S).toISOString(), new Date(E).toISOString()]);
      const metrics = q.metrics.length ? [...new Set(q.metrics)] : body.metrics;

      // Expected counts by (period key, domain, email, broadcast), from the raw events.
      const groups = new Map<string, Record<Count, number>>();
      const totals = zero();
      for (const e of events) {
        if (e.email.account !== q.account || e.at < S || e.at >= E) continue;
        if (q.domainIds.length && !q.domainIds.includes(e.email.domainId)) continue;
        if (q.broadcastIds.length && !q.broadcastIds.includes(e.email.broadcastId ?? "")) continue;
        if (q.emailIds.length && !q.emailIds.includes(e.email.id)) continue;
        const counts = expectedCounts(e, firstOf.get(e)!);
        for (const [k, v] of Object.entries(counts)) totals[k as Count] += v;
        if (q.dims.includes("broadcast") && !e.email.broadcastId) continue;
        const key = [
          q.dims.includes("period") ? periodKey(q.tz, q.g, e.at) : "",
          q.dims.includes("domain") ? e.email.domainId : "",
          q.dims.includes("email") ? e.email.id : "",
          q.dims.includes("broadcast") ? e.email.broadcastId : "",
        ].join(" ");
        const g = groups.get(key) ?? zero();
        for (const [k, v] of Object.entries(counts)) g[k as Count] += v;
        groups.set(key, g);
      }
      expect(body.totals, label).toEqual(withRates(totals, metrics));
      if (q.dims.length === 0) {
        expect(body.data, label).toBeUndefined();
        continue;
      }
      const seen = new Set<string>();
      for (const row of body.data!) {
        const key = [
          q.dims.includes("period") ? periodKey(q.tz, q.g, Date.parse(String(row.period))) : "",
          q.dims.includes("domain") ? row.domain_id : "",
          q.dims.includes("email") ? row.email_id : "",
          q.dims.includes("broadcast") ? row.broadcast_id : "",
        ].join(" ");
        expect(seen.has(key), `${label}: row ${key} twice`).toBe(false);
        seen.add(key);
        const values = Object.fromEntries(Object.entries(row).filter(([k]) => !["period", "domain_id", "domain_name", "email_id", "broadcast_id"].includes(k)));
        expect(values, `${label}: row ${key}`).toEqual(withRates(groups.get(key) ?? zero(), metrics));
        if (q.dims.includes("period")) {
          // Each period overlaps the range.
          expect(Date.parse(String(row.period)), label).toBeLessThan(E);
        }
      }
      for (const [key, counts] of groups) {
        if (COUNTS.some((c) => counts[c] > 0)) expect(seen.has(key), `${label}: missing row ${key}`).toBe(true);
      }
    }
  }, 120_000);

  it("answers the repeated hour of a daylight-saving change as two hours and its day as one of 25", async () => {
    const a = accounts[0]!;
    const day = await (await api(a.token, "GET", "/emails/metrics?start_date=2026-11-01&end_date=2026-11-01&timezone=America/New_York&dimensions=period&metrics=received")).json() as { data: { period: string }[]; start_date: string; end_date: string };
    expect(day.data.map((r) => r.period)).toEqual(["2026-11-01T04:00:00.000Z"]);
    expect(Date.parse(day.end_date) - Date.parse(day.start_date)).toBe(25 * HOUR);
    const hours = await (await api(a.token, "GET", "/emails/metrics?start_date=2026-11-01T00:00:00&end_date=2026-11-01T03:00:00&timezone=America/New_York&granularity=hourly&dimensions=period&metrics=received")).json() as { data: { period: string }[] };
    expect(hours.data.map((r) => r.period)).toEqual(["2026-11-01T04:00:00.000Z", "2026-11-01T05:00:00.000Z", "2026-11-01T06:00:00.000Z", "2026-11-01T07:00:00.000Z"]);
    const spring = await (await api(a.token, "GET", "/emails/metrics?start_date=2026-03-08T00:00:00&end_date=2026-03-08T04:00:00&timezone=America/New_York&granularity=hourly&dimensions=period&metrics=received")).json() as { data: { period: string }[] };
    expect(spring.data.map((r) => r.period)).toEqual(["2026-03-08T05:00:00.000Z", "2026-03-08T06:00:00.000Z", "2026-03-08T07:00:00.000Z"]);
    const kathmandu = await (await api(a.token, "GET", "/emails/metrics?start_date=2026-06-15&end_date=2026-06-16&timezone=Asia/Kathmandu&dimensions=period&metrics=received")).json() as { data: { period: string }[] };
    expect(kathmandu.data.map((r) => r.period)).toEqual(["2026-06-14T18:15:00.000Z", "2026-06-15T18:15:00.000Z"]);
  });
});
