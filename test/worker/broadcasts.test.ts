// Broadcasts in Resend's shapes, and their fan-out: drafts, sending to a segment (skipping the
// unsubscribed, those opted out of the topic and suppressed addresses), personalised messages
// with one-click unsubscribe and a preference page, and the fan-out's guarantees: a replayed or
// concurrent page sends nobody twice, a cancel stops the rest, a quota that runs out stops the
// broadcast with a clear status.
import { env, exports } from "cloudflare:workers";
import PostalMime from "postal-mime";
import { beforeAll, describe, expect, it } from "vitest";
import { broadcastRateOf, runFanout } from "../../worker/broadcasts/fanout.ts";
import { readConfig } from "../../worker/config.ts";
import { deliverBatch } from "../../worker/delivery/consumer.ts";
import { SessionPool } from "../../worker/delivery/session-pool.ts";
import { transportFor } from "../../worker/transports/select.ts";
import { api, call, createAccount, type TestAccount } from "./fixtures.ts";
import { address, bytesOf, capturedFor, rawText } from "./peers.ts";
import { waitFor } from "./wait.ts";
import { authenticateCaptured, publish, publishRecords, type DomainRecord } from "./zone.ts";

let a: TestAccount;
let other: TestAccount;
beforeAll(async () => {
  a = await createAccount();
  other = await createAccount();
});

async function segmentWith(t: TestAccount, emails: (string | Record<string, unknown>)[]): Promise<{ segment: string; contacts: string[] }> {
  const segment = (await call(t, "POST", "/segments", { name: "Readers" })).body.id;
  const contacts: string[] = [];
  for (const e of emails) {
    const body = typeof e === "string" ? { email: e } : e;
    const res = await call(t, "POST", "/contacts", { ...body, segments: [segment] });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    contacts.push(res.body.id);
  }
  return { segment, contacts };
}
async function recipientsOf(broadcastId: string): Promise<string[]> {
  const rows = await env.DB.prepare("SELECT email FROM broadcast_recipients WHERE broadcast_id = ? ORDER BY email").bind(broadcastId).all<{ email: string }>();
  return rows.results.map((r) => r.email);
}
async function emailsOf(broadcastId: string) {
  return (await env.DB.prepare("SELECT id, to_json, subject, html, text, state FROM emails WHERE broadcast_id = ?").bind(broadcastId).all<{ id: string; to_json: string; subject: string; html: string | null; text: string | null; state: string }>()).results;
}
/** A broadcast put straight into `queued`, with no queue hint: only the test runs its fan-out. */
async function queuedBroadcast(t: TestAccount, segment: string, extra: Record<string, unknown> = {}): Promise<string> {
  const id = (await call(t, "POST", "/broadcasts", { segment_id: segment, from: `News <news@${t.domain}>`, subject: "Hi {{{FIRST_NAME|there}}}", html: "<p>Hello</p>", ...extra })).body.id;
  await env.DB.prepare("UPDATE broadcasts SET status = 'queued' WHERE id = ?").bind(id).run();
  return id;
}

describe("the broadcasts API", () => {
  it("creates a draft, reads, lists, updates, duplicates and deletes it", async () => {
    const { segment } = await segmentWith(a, []);
    const created = await call(a, "POST", "/broadcasts", { segment_id: segment, from: `News <news@${a.domain}>`, subject: "November", html: "<p>Hi</p>", name: "Nov", reply_to: "reply@example.com", preview_text: "What's new" });
    expect(created).toMatchObject({ status: 201, body: { object: "broadcast", id: expect.any(String) } });
    const id = created.body.id;
    expect((await call(a, "GET", `/broadcasts/${id}`)).body).toMatchObject({
      object: "broadcast", id, name: "Nov", segment_id: segment, audience_id: segment, from: `News <news@${a.domain}>`, subject: "November",
      reply_to: ["reply@example.com"], preview_text: "What's new", html: "<p>Hi</p>", text: null, topic_id: null, status: "draft",
      scheduled_at: null, sent_at: null, created_at: expect.any(String),
    });
    expect((await call(a, "PATCH", `/broadcasts/${id}`, { subject: "December", audience_id: segment })).body).toEqual({ object: "broadcast", id });
    expect((await call(a, "GET", "/broadcasts")).body.data.find((b: any) => b.id === id)).toMatchObject({ subject: "December", status: "draft" });
    const copy = (await call(a, "POST", `/broadcasts/${id}/duplicate`)).body.id;
    expect((await call(a, "GET", `/broadcasts/${copy}`)).body).toMatchObject({ name: "Nov (Copy)", subject: "December", status: "draft" });
    expect((await call(a, "DELETE", `/broadcasts/${id}`)).body).toEqual({ object: "broadcast", id, deleted: true });
    expect((await call(a, "GET", `/broadcasts/${id}`)).status).toBe(404);
  });

  it("schedules in natural language, refuses changes once it left draft, and cancels", async () => {
    const { segment } = await segmentWith(a, [address("sched")]);
    const id = (await call(a, "POST", "/broadcasts", { segment_id: segment, from: `news@${a.domain}`, subject: "Later", text: "Hi", send: true, scheduled_at: "tomorrow at 9am" })).body.id;
    const got = (await call(a, "GET", `/broadcasts/${id}`)).body;
    expect(got.status).toBe("scheduled");
    expect(Date.parse(got.scheduled_at)).toBeGreaterThan(Date.now());
    expect((await call(a, "PATCH", `/broadcasts/${id}`, { subject: "x" })).body).toMatchObject({ statusCode: 422, message: expect.stringMatching(/draft.*scheduled/) });
    expect((await call(a, "DELETE", `/broadcasts/${id}`)).status).toBe(422);
    expect((await call(a, "POST", `/broadcasts/${id}/send`)).status).toBe(422);
    expect((await call(a, "POST", `/broadcasts/${id}/cancel`)).body).toEqual({ object: "broadcast", id });
    expect((await call(a, "GET", `/broadcasts/${id}`)).body.status).toBe("canceled");
    expect((await call(a, "POST", `/broadcasts/${id}/cancel`)).status).toBe(422);
    expect(await recipientsOf(id)).toEqual([]);
    // Canceled before it reached anyone: nothing refers to it, so it may go (tern's own).
    expect((await call(a, "DELETE", `/broadcasts/${id}`)).body).toEqual({ object: "broadcast", id, deleted: true });
  });

  it("refuses bad broadcasts with the contract's errors and records nothing", async () => {
    const { segment } = await segmentWith(a, []);
    const theirs = (await call(other, "POST", "/segments", { name: "x" })).body.id;
    const base = { segment_id: segment, from: `news@${a.domain}`, subject: "S", html: "<p>Hi</p>" };
    expect((await call(a, "POST", "/broadcasts", { from: base.from, subject: "S" })).body).toMatchObject({ statusCode: 422, name: "missing_required_field" });
    expect((await call(a, "POST", "/broadcasts", { ...base, segment_id: theirs })).body.message).toMatch(/segment_id/);
    expect((await call(a, "POST", "/broadcasts", { ...base, audience_id: theirs })).body).toMatchObject({ statusCode: 422, message: "`audience_id` is the older name of `segment_id`; give one of them, or the same id in both." });
    expect((await call(a, "POST", "/broadcasts", { ...base, audience_id: segment })).status).toBe(201);
    expect((await call(a, "POST", "/broadcasts", { ...base, scheduled_at: "in 1 hour" })).body.message).toMatch(/scheduled_at.*send/);
    expect((await call(a, "POST", "/broadcasts", { ...base, from: "news@unverified.example", send: true })).status).toBe(403);
    expect((await call(a, "POST", "/broadcasts", { ...base, send: true, scheduled_at: "last year" })).status).toBe(422);
    const before = (await call(a, "GET", "/broadcasts?limit=100")).body.data.length;
    const noBody = (await call(a, "POST", "/broadcasts", { segment_id: segment, from: base.from, subject: "S", send: true })).body;
    expect(noBody).toMatchObject({ statusCode: 422, name: "missing_required_field" });
    // A body within the 2,000,000 characters the API takes but over what one database row holds
    // in bytes ("€" is three): a 422 saying how to fit, on create and on update, not a 500.
    const big = "€".repeat(700_000);
    const tooBig = (await call(a, "POST", "/broadcasts", { ...base, html: big })).body;
    expect(tooBig).toMatchObject({ statusCode: 422, name: "validation_error", message: expect.stringMatching(/html, text and editor document would take 2\.1 MB; tern keeps at most 1\.8 MB.*link images/) });
    expect((await call(a, "GET", "/broadcasts?limit=100")).body.data.length).toBe(before);
    const draft = (await call(a, "POST", "/broadcasts", { ...base, html: "€".repeat(300_000) })).body;
    const grown = await call(a, "PATCH", `/broadcasts/${draft.id}`, { text: "€".repeat(400_000) });
    expect(grown.body).toMatchObject({ statusCode: 422, message: expect.stringMatching(/would take 2\.1 MB/) });
    expect((await call(a, "GET", `/broadcasts/${draft.id}`)).body.text).toBeNull();
    // A send's body is optional, but one of `null` is not none: refused, and the draft stays one.
    const sendNull = await api(a.token, "POST", `/broadcasts/${draft.id}/send`, "null");
    expect([sendNull.status, await sendNull.json()]).toEqual([400, { statusCode: 400, name: "validation_error", message: "The request body must be a JSON object." }]);
    expect((await call(a, "GET", `/broadcasts/${draft.id}`)).body.status).toBe("draft");
  });

  it("another account gets 404 for every path and changes nothing", async () => {
    const { segment } = await segmentWith(a, []);
    const id = (await call(a, "POST", "/broadcasts", { segment_id: segment, from: `news@${a.domain}`, subject: "Mine", html: "<p>Hi</p>" })).body.id;
    for (const [m, p, b] of [["GET", ""], ["PATCH", "", { subject: "theirs" }], ["DELETE", ""], ["POST", "/send"], ["POST", "/cancel"], ["POST", "/duplicate"], ["GET", "/recipients?type=sent"], ["GET", "/clicked-links"]] as const) {
      expect((await call(other, m, `/broadcasts/${id}${p}`, b)).status, `${m} ${p}`).toBe(404);
    }
    expect((await call(a, "GET", `/broadcasts/${id}`)).body).toMatchObject({ subject: "Mine", status: "draft" });
  });
});

describe("the fan-out", () => {
  it("sends once to each eligible contact of the segment: not the unsubscribed, opted out of the topic, or suppressed", async () => {
    const t = await createAccount({ listening: true });
    const optIn = (await call(t, "POST", "/topics", { name: "Product", default_subscription: "opt_in" })).body.id;
    const sim = (l: string) => `${l}+${crypto.randomUUID().slice(0, 8)}@simulator.tern.test`;
    const [yes1, yes2, unsub, optedOut, suppressed, elsewhere] = ["delivered", "delivered", "delivered", "delivered", "delivered", "delivered"].map(sim) as [string, string, string, string, string, string];
    const { segment } = await segmentWith(t, [
      { email: yes1, first_name: "Ada" }, yes2, { email: unsub, unsubscribed: true },
      { email: optedOut, topics: [{ id: optIn, subscription: "opt_out" }] }, suppressed,
    ]);
    await segmentWith(t, [elsewhere]);
    await call(t, "POST", "/suppressions", { email: suppressed });
    const created = await call(t, "POST", "/broadcasts", { segment_id: segment, topic_id: optIn, from: `News <news@${t.domain}>`, subject: "Hi {{{FIRST_NAME|there}}}", html: "<p>x</p>", send: true });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id;
    const done = await waitFor("the broadcast to be sent", async () => {
      const b = (await call(t, "GET", `/broadcasts/${id}`)).body;
      return b.status === "sent" ? b : undefined;
    }, 15_000);
    expect(done).toMatchObject({ status: "sent", sent_at: expect.any(String), recipients: 2 });
    expect(await recipientsOf(id)).toEqual([yes1, yes2].sort());
    const emails = await emailsOf(id);
    expect(emails.map((e) => e.subject).sort()).toEqual(["Hi Ada", "Hi there"]);
    // The body is stored once, on the broadcast; the rows carry none.
    expect(emails.every((e) => e.html === null && e.text === null)).toBe(true);
    await waitFor("both delivered", async () => ((await emailsOf(id)).every((e) => e.state === "done") ? true : undefined), 15_000);
    const sent = await call(t, "GET", `/broadcasts/${id}/recipients?type=delivered`);
    expect(sent.body.data.map((r: any) => r.email).sort()).toEqual([yes1, yes2].sort());
    // Its emails' webhook events carry the broadcast's id.
    const events = await env.DB.prepare("SELECT payload_json FROM webhook_events WHERE account_id = ? AND type LIKE 'email.%'").bind(t.accountId).all<{ payload_json: string }>();
    expect(events.results.length).toBeGreaterThan(0);
    for (const e of events.results) expect(JSON.parse(e.payload_json).data.broadcast_id).toBe(id);
    // The quota counted exactly the two.
    const used = await env.DB.prepare("SELECT SUM(used) AS n FROM usage WHERE account_id = ? AND length(period) = 7").bind(t.accountId).first<{ n: number }>();
    expect(used!.n).toBe(2);
  });

  it("a replayed page and concurrent runs record each contact once", async () => {
    const t = await createAccount();
    const { segment } = await segmentWith(t, Array.from({ length: 12 }, (_, i) => `r${i}-${crypto.randomUUID().slice(0, 6)}@simulator.tern.test`));
    const id = await queuedBroadcast(t, segment);
    // Three runs at once, pages of 5: they race for the same pages.
    await Promise.all([1, 2, 3].map(() => runFanout(env, id, { pageSize: 5, maxPages: 10 })));
    // A page replayed from an old checkpoint changes nothing.
    await env.DB.prepare("UPDATE broadcasts SET checkpoint = NULL, status = 'sending' WHERE id = ?").bind(id).run();
    const replay = await runFanout(env, id, { pageSize: 5, maxPages: 10 });
    expect(replay.recorded).toBe(0);
    const rows = await recipientsOf(id);
    expect(rows).toHaveLength(12);
    expect(new Set(rows).size).toBe(12);
    expect(await emailsOf(id)).toHaveLength(12);
  });

  it("a page replayed after its first commit spent the quota fails on its recipients, not on the quota", async () => {
    const t = await createAccount();
    const { segment } = await segmentWith(t, Array.from({ length: 8 }, (_, i) => `s${i}-${crypto.randomUUID().slice(0, 6)}@simulator.tern.test`));
    const id = await queuedBroadcast(t, segment);
    expect(await runFanout(env, id, { pageSize: 4, maxPages: 1 })).toMatchObject({ recorded: 4, more: true });
    // The quota is now spent, and a run whose lease lapsed replays the first page.
    expect((await env.DB.prepare("UPDATE usage SET used = cap WHERE account_id = ?").bind(t.accountId).run()).meta.changes).toBeGreaterThan(0);
    await env.DB.prepare("UPDATE broadcasts SET checkpoint = NULL WHERE id = ?").bind(id).run();
    expect(await runFanout(env, id, { pageSize: 4, maxPages: 1 })).toMatchObject({ recorded: 0, status: "sending", more: true });
    // Nobody got a second email, and the broadcast was not stopped for a quota it did not use.
    expect((await call(t, "GET", `/broadcasts/${id}`)).body).toMatchObject({ status: "sending", recipients: 4 });
    expect(await recipientsOf(id)).toHaveLength(4);
  });

  it("a run records no faster than BROADCAST_RATE", async () => {
    const t = await createAccount();
    const { segment } = await segmentWith(t, Array.from({ length: 12 }, (_, i) => `p${i}-${crypto.randomUUID().slice(0, 6)}@simulator.tern.test`));
    const id = await queuedBroadcast(t, segment);
    // 20 a second, pages of 4: the second page waits 200 ms, the third 400 ms from the start.
    const started = Date.now();
    expect(await runFanout({ ...env, BROADCAST_RATE: "20" }, id, { pageSize: 4, maxPages: 3 })).toMatchObject({ recorded: 12, more: true });
    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
    expect(await recipientsOf(id)).toHaveLength(12);
  });

  it("BROADCAST_RATE \"0\" leaves the fan-out unpaced; unset or unreadable keeps the default pace", async () => {
    expect([undefined, "", "-5", "fast"].map((v) => broadcastRateOf({ BROADCAST_RATE: v }))).toEqual([200, 200, 200, 200]);
    expect(broadcastRateOf({ BROADCAST_RATE: "0" })).toBe(0);
    expect(broadcastRateOf({ BROADCAST_RATE: "150" })).toBe(150);
  });

  it("a cancel mid-way stops the rest", async () => {
    const t = await createAccount();
    const { segment } = await segmentWith(t, Array.from({ length: 10 }, (_, i) => `c${i}-${crypto.randomUUID().slice(0, 6)}@simulator.tern.test`));
    const id = await queuedBroadcast(t, segment);
    const first = await runFanout(env, id, { pageSize: 4, maxPages: 1 });
    expect(first).toMatchObject({ recorded: 4, more: true });
    expect((await call(t, "POST", `/broadcasts/${id}/cancel`)).status).toBe(200);
    expect(await runFanout(env, id, { pageSize: 4, maxPages: 10 })).toMatchObject({ recorded: 0, status: "canceled", more: false });
    expect(await recipientsOf(id)).toHaveLength(4);
    // A run that read its broadcast before the cancel cannot record a page after it: no
    // recipient row may be written for a broadcast that is not sending.
    const before = (await recipientsOf(id)).length;
    await expect(env.DB.prepare("INSERT INTO broadcast_recipients (broadcast_id, contact_id, account_id, email_id, email, created_at) VALUES (?, 'x', ?, 'x', 'x', 0)").bind(id, t.accountId).run()).rejects.toThrow(/broadcast_not_sending/);
    expect((await recipientsOf(id)).length).toBe(before);
  });

  it("a quota that runs out mid-way stops the broadcast as failed, saying why", async () => {
    const t = await createAccount();
    const { segment } = await segmentWith(t, Array.from({ length: 8 }, (_, i) => `q${i}-${crypto.randomUUID().slice(0, 6)}@simulator.tern.test`));
    // The free plan allows 100 a day: 95 are used.
    const day = new Date().toISOString().slice(0, 10);
    await env.DB.prepare("INSERT INTO usage (account_id, period, used, cap) VALUES (?, ?, 95, 100)").bind(t.accountId, day).run();
    const id = await queuedBroadcast(t, segment);
    const result = await runFanout(env, id, { pageSize: 4, maxPages: 10 });
    expect(result).toMatchObject({ recorded: 4, status: "failed", more: false });
    const b = (await call(t, "GET", `/broadcasts/${id}`)).body;
    expect(b).toMatchObject({ status: "failed", recipients: 4 });
    expect(b.status_reason).toMatch(/Stopped after 4 recipients: .*daily/i);
    expect(await recipientsOf(id)).toHaveLength(4);
  });
});

describe("inputs that could never be sent", () => {
  it("a control character in a contact's name or property is refused, naming the field, and changes nothing", async () => {
    const t = await createAccount();
    await call(t, "POST", "/contact-properties", { key: "city", type: "string" });
    const email = address("ctl");
    for (const [body, field] of [[{ first_name: "Ada\u0000" }, "first_name"], [{ last_name: "Love\nlace" }, "last_name"], [{ properties: { city: "Par\u0007is" } }, "properties.city"]] as const) {
      const res = await call(t, "POST", "/contacts", { email, ...body });
      expect(res.status, JSON.stringify(res.body)).toBe(422);
      expect(res.body).toMatchObject({ name: "validation_error", message: expect.stringContaining(`\`${field}\` contains a control character`) });
    }
    expect((await call(t, "GET", `/contacts/${email}`)).status).toBe(404);
    const id = (await call(t, "POST", "/contacts", { email, first_name: "Ada\tL", properties: { city: "Paris" } })).body.id; // a tab is fine
    expect((await call(t, "PATCH", `/contacts/${id}`, { first_name: "A\u0000" })).body.message).toMatch(/`first_name` contains a control character \(U\+0000\)/);
    expect((await call(t, "PATCH", `/contacts/${id}`, { properties: { city: "\u001b[31m" } })).body.message).toMatch(/`properties.city`/);
    expect((await call(t, "GET", `/contacts/${id}`)).body).toMatchObject({ first_name: "Ada\tL", properties: { city: { type: "string", value: "Paris" } } });
  });

  it("a stored NUL in a name and placeholders named like built-ins still give every recipient a delivered email", async () => {
    const t = await createAccount();
    const [one, two] = [0, 1].map((i) => `nul${i}+${crypto.randomUUID().slice(0, 8)}@simulator.tern.test`) as [string, string];
    const { segment, contacts } = await segmentWith(t, [{ email: one, first_name: "Ada" }, two]);
    // A row written before names were checked.
    await env.DB.prepare("UPDATE contacts SET first_name = ? WHERE id = ?").bind("Ada\u0000Lovelace", contacts[0]).run();
    const created = await call(t, "POST", "/broadcasts", {
      segment_id: segment, from: `News <news@${t.domain}>`, subject: "Hi {{{FIRST_NAME|there}}} {{{toString}}}",
      html: "<p>{{{constructor}}}{{{toString}}}{{{valueOf}}}{{{__proto__}}} {{{FIRST_NAME|there}}}</p>", text: "{{{constructor}}}{{{valueOf}}}.", send: true,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id;
    const emails = await waitFor("both emails delivered", async () => {
      const rows = await emailsOf(id);
      return rows.length === 2 && rows.every((e) => e.state === "done") ? rows : undefined;
    }, 20_000);
    expect(emails.map((e) => e.subject).sort()).toEqual(["Hi Ada Lovelace ", "Hi there "]);
    const events = await env.DB.prepare("SELECT type FROM email_events WHERE email_id IN (?, ?)").bind(emails[0]!.id, emails[1]!.id).all<{ type: string }>();
    expect(events.results.filter((e) => e.type === "delivered")).toHaveLength(2);
  });
});

describe("a broadcast's topic", () => {
  it("a draft whose topic was deleted is not sent; a queued one stops as failed, saying why", async () => {
    const t = await createAccount();
    const topic = (await call(t, "POST", "/topics", { name: "Gone", default_subscription: "opt_out" })).body.id;
    const { segment } = await segmentWith(t, [`tp-${crypto.randomUUID().slice(0, 6)}@simulator.tern.test`]);
    const draft = (await call(t, "POST", "/broadcasts", { segment_id: segment, topic_id: topic, from: `news@${t.domain}`, subject: "S", html: "<p>Hi</p>" })).body.id;
    const queued = await queuedBroadcast(t, segment, { topic_id: topic });
    // Rows as a race with the delete (or an older tern) could leave them.
    await env.DB.prepare("DELETE FROM topics WHERE id = ?").bind(topic).run();
    const send = await call(t, "POST", `/broadcasts/${draft}/send`);
    expect(send.status).toBe(422);
    expect(send.body.message).toMatch(new RegExp(`topic_id.*${topic}`));
    expect((await call(t, "GET", `/broadcasts/${draft}`)).body.status).toBe("draft");
    expect(await runFanout(env, queued)).toMatchObject({ recorded: 0, status: "failed", more: false });
    expect((await call(t, "GET", `/broadcasts/${queued}`)).body).toMatchObject({ status: "failed", status_reason: expect.stringMatching(new RegExp(`topic ${topic} was deleted.*opt-outs`)) });
    expect(await recipientsOf(queued)).toEqual([]);
  });
});

describe("a broadcast's messages", () => {
  let domain: string;
  let t: TestAccount;
  beforeAll(async () => {
    t = await createAccount({ listening: true });
    await publish("_spf.tern.test", "TXT", ["v=spf1 ip4:127.0.0.1 -all"]);
    domain = `bc${crypto.randomUUID().slice(0, 8)}.dkim.test`;
    const created = (await (await api(t.token, "POST", "/domains", { name: domain })).json()) as { id: string; records: DomainRecord[] };
    await publishRecords(domain, created.records);
    expect(((await (await api(t.token, "POST", `/domains/${created.id}/verify`)).json()) as { status: string }).status).toBe("verified");
  });

  it("a consumer batch reads its broadcast emails' contacts in one query, each message still its contact's", async () => {
    const people = ["ann", "ben", "cat", "dan"].map((n) => ({ email: address(n), first_name: n.toUpperCase() }));
    const { segment, contacts } = await segmentWith(t, people);
    // One contact deleted after the fan-out still gets what was recorded for it, with fallbacks.
    const id = await queuedBroadcast(t, segment, { from: `News <news@${domain}>`, html: "<p>Dear {{{FIRST_NAME|reader}}}</p>" });
    // Only this test delivers: the fan-out's queue hints go nowhere.
    const quiet = new Proxy(env, { get: (target, prop) => (typeof prop === "string" && prop.startsWith("SEND_QUEUE_") ? { sendBatch: async () => {} } : Reflect.get(target, prop)) });
    expect((await runFanout(quiet, id)).recorded).toBe(4);
    await call(t, "DELETE", `/contacts/${contacts[3]}`);
    const contactReads: string[] = [];
    const db = new Proxy(env.DB, {
      get(target, prop) {
        if (prop === "prepare") return (sql: string) => (/from "broadcast_recipients"/i.test(sql) && contactReads.push(sql), target.prepare(sql));
        const v = Reflect.get(target, prop);
        return typeof v === "function" ? v.bind(target) : v;
      },
    });
    const config = readConfig(env);
    const pool = new SessionPool((region) => transportFor(env, config, region));
    try {
      const outcome = await deliverBatch({ ...env, DB: db }, (await emailsOf(id)).map((e) => e.id), pool);
      expect([...outcome.values()]).toEqual([null, null, null, null]);
    } finally {
      await pool.closeAll();
    }
    expect(contactReads).toHaveLength(1);
    for (const [i, p] of people.entries()) {
      const [m] = await capturedFor(p.email);
      expect((await PostalMime.parse(bytesOf(m!.rawBase64))).html).toContain(i === 3 ? "Dear reader" : `Dear ${p.first_name}`);
    }
  });

  it("are personalised per contact, signed, with one-click unsubscribe and a preference page that leaves the topic", async () => {
    await call(t, "POST", "/contact-properties", { key: "company", type: "string", fallback_value: "your team" });
    const topic = (await call(t, "POST", "/topics", { name: "Release notes", default_subscription: "opt_in" })).body.id;
    const ada = address("ada"), bob = address("bob");
    const { segment, contacts } = await segmentWith(t, [{ email: ada, first_name: "Ada <3", properties: { company: "Initech" } }, bob]);
    const id = (await call(t, "POST", "/broadcasts", {
      segment_id: segment, topic_id: topic, from: `News <news@${domain}>`, subject: "For {{{FIRST_NAME|you}}}", preview_text: "Fresh notes for {{{company}}}, {{{FIRST_NAME|friend}}}",
      html: "<html><body><p>Hi {{{FIRST_NAME|there}}} at {{{company}}} ({{{EMAIL}}})</p></body></html>", send: true,
    })).body.id;
    const [ma, mb] = [await waitFor("ada's mail", async () => (await capturedFor(ada))[0], 15_000), await waitFor("bob's mail", async () => (await capturedFor(bob))[0], 15_000)];
    const pa = await PostalMime.parse(bytesOf(ma.rawBase64));
    const pb = await PostalMime.parse(bytesOf(mb.rawBase64));
    expect(pa.subject).toBe("For Ada <3");
    expect(pa.html).toContain(`Hi Ada &lt;3 at Initech (${ada})`);
    expect(pb.html).toContain(`Hi there at your team (${bob})`);
    // The preview text is personalised too, escaped once in the HTML around it.
    expect(pa.html).toMatch(/<div style="display:none;[^"]*">Fresh notes for Initech, Ada &lt;3<\/div>/);
    expect(pb.html).toContain(">Fresh notes for your team, friend</div>");
    expect(pa.text).toMatch(/Unsubscribe or choose what you receive.*https:\/\/t\.tern\.test\/u\//);
    const raw = rawText(ma);
    const lu = raw.replace(/\r\n[ \t]+/g, " ").match(/^List-Unsubscribe: <https:\/\/t\.tern\.test\/u\/([A-Za-z0-9_-]+)>\r$/m);
    expect(lu).not.toBeNull();
    expect(raw).toMatch(/^List-Unsubscribe-Post: List-Unsubscribe=One-Click\r$/m);
    expect(pa.html).toContain(`href="https://t.tern.test/u/${lu![1]}"`);
    expect((await authenticateCaptured(ma)).dkim[0]).toMatchObject({ result: "pass", domain });

    const page = await exports.default.fetch(new Request(`https://t.tern.test/u/${lu![1]}`));
    const html = await page.text();
    expect(html).toContain("Stop receiving Release notes");
    expect(html).toContain("Unsubscribe from everything");
    const left = await exports.default.fetch(new Request(`https://t.tern.test/u/${lu![1]}`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "choice=topic" }));
    expect(await left.text()).toContain("no longer receives Release notes");
    const topics = (await call(t, "GET", `/contacts/${contacts[0]}/topics`)).body.data;
    expect(topics.find((x: any) => x.id === topic).subscription).toBe("opt_out");
    expect((await call(t, "GET", `/contacts/${contacts[0]}`)).body.unsubscribed).toBe(false);
    const evs = await env.DB.prepare("SELECT payload_json FROM webhook_events WHERE account_id = ? AND type = 'contact.updated'").bind(t.accountId).all<{ payload_json: string }>();
    expect(evs.results.map((e) => JSON.parse(e.payload_json).data.email)).toContain(ada);
    // One-click from bob's mail client (no choice) also leaves only the topic.
    const tokenB = rawText(mb).replace(/\r\n[ \t]+/g, " ").match(/^List-Unsubscribe: <https:\/\/t\.tern\.test\/u\/([A-Za-z0-9_-]+)>\r$/m)![1];
    await exports.default.fetch(new Request(`https://t.tern.test/u/${tokenB}`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "List-Unsubscribe=One-Click" }));
    expect((await call(t, "GET", `/contacts/${contacts[1]}/topics`)).body.data.find((x: any) => x.id === topic).subscription).toBe("opt_out");
    // "Everything" unsubscribes the contact.
    await exports.default.fetch(new Request(`https://t.tern.test/u/${tokenB}`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "choice=all" }));
    expect((await call(t, "GET", `/contacts/${contacts[1]}`)).body.unsubscribed).toBe(true);
    expect((await call(t, "GET", `/broadcasts/${id}/recipients?type=unsubscribed`)).body.data.map((r: any) => r.email)).toEqual([bob]);
  });
});
