// Segments, topics, contact properties, templates and broadcasts end to end: the official
// `resend` Node client against tern started as `npm start` starts it, mail read at the dev
// relay; then the fan-out's exactly-once promise with real processes: tern is killed hard in
// the middle of a broadcast and started again on the same state, and every eligible contact
// gets the broadcast once, nobody twice, nobody ineligible.
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { simpleParser } from "mailparser";
import { Resend } from "resend";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTern, type TernProcess } from "../support/processes.ts";

// A rate the bulk setup of the crash test needs; the quota of a paid plan for its emails.
const settings = { TERN_STUCK_AFTER_SECONDS: "3", TERN_CRON_INTERVAL_MS: "1000", TERN_DEV_PLAN: "pro_50k", TERN_DEV_RATE_LIMIT: "1000" };
let tern: TernProcess;
let resend: Resend;

beforeAll(async () => {
  tern = await startTern({ env: settings });
  resend = new Resend(tern.apiKey, { baseUrl: tern.url });
}, 120_000);

afterAll(async () => {
  await tern?.stop();
});

interface RelayMessage { id: string; envelope: { from: string; to: string[] } }
async function relayMessages(): Promise<RelayMessage[]> {
  return ((await (await fetch(`${tern.relayHttp}/api/messages`)).json()) as { data: RelayMessage[] }).data;
}
async function relayRaw(rcpt: string): Promise<Buffer> {
  const list = (await (await fetch(`${tern.relayHttp}/api/messages?to=${encodeURIComponent(rcpt)}&wait=30000`)).json()) as { data: RelayMessage[] };
  expect(list.data.length).toBeGreaterThan(0);
  return Buffer.from(await (await fetch(`${tern.relayHttp}/api/messages/${list.data[0]!.id}/raw`)).arrayBuffer());
}
async function waitUntil<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
const uid = () => crypto.randomUUID().slice(0, 8);

/** The local D1 database wrangler dev keeps under the state directory. */
function d1File(stateDir: string): DatabaseSync {
  const dir = join(stateDir, "wrangler", "v3", "d1", "miniflare-D1DatabaseObject");
  const file = readdirSync(dir).find((f) => f.endsWith(".sqlite") && f !== "metadata.sqlite");
  return new DatabaseSync(join(dir, file!), { readOnly: true });
}

describe("the resend client", () => {
  it("manages segments, contacts in them, topics and contact properties", async () => {
    const seg = await resend.segments.create({ name: "Early adopters" });
    expect(seg.error).toBeNull();
    const segmentId = seg.data!.id;
    expect((await resend.segments.get(segmentId)).data).toMatchObject({ id: segmentId, name: "Early adopters" });
    expect((await resend.segments.list()).data!.data.map((s) => s.id)).toContain(segmentId);

    const prop = await resend.contactProperties.create({ key: "company", type: "string", fallbackValue: "your company" });
    expect(prop.error).toBeNull();
    expect((await resend.contactProperties.get(prop.data!.id)).data).toMatchObject({ key: "company", type: "string", fallbackValue: "your company" });
    expect((await resend.contactProperties.update({ id: prop.data!.id, fallbackValue: "ACME" })).error).toBeNull();
    expect((await resend.contactProperties.list()).data!.data.map((p) => p.key)).toContain("company");

    const topic = await resend.topics.create({ name: "Changelog", defaultSubscription: "opt_in", description: "What shipped" });
    expect(topic.error).toBeNull();
    const topicId = topic.data!.id;
    expect((await resend.topics.get(topicId)).data).toMatchObject({ id: topicId, name: "Changelog", default_subscription: "opt_in" });
    expect((await resend.topics.update({ id: topicId, name: "Release notes" })).error).toBeNull();
    expect((await resend.topics.list()).data!.data.map((t) => t.name)).toContain("Release notes");

    const email = `client-${uid()}@example.com`;
    const created = await resend.contacts.create({ email, firstName: "Ada", properties: { company: "Initech" }, segments: [{ id: segmentId }] });
    expect(created.error).toBeNull();
    const contactId = created.data!.id;
    expect((await resend.contacts.segments.list({ email })).data!.data.map((s) => s.id)).toEqual([segmentId]);
    // Adding it again by path changes nothing.
    expect((await resend.contacts.segments.add({ contactId, segmentId })).error).toBeNull();
    expect((await resend.contacts.list({ segmentId })).data!.data.map((c) => c.id)).toEqual([contactId]);
    expect((await resend.contacts.get({ email })).data).toMatchObject({ id: contactId, properties: { company: { type: "string", value: "Initech" } } });
    expect((await resend.contacts.topics.update({ email, topics: [{ id: topicId, subscription: "opt_out" }] })).data).toMatchObject({ id: contactId });
    expect((await resend.contacts.topics.list({ id: contactId })).data!.data).toEqual([expect.objectContaining({ id: topicId, subscription: "opt_out" })]);
    expect((await resend.contacts.segments.remove({ contactId, segmentId })).data).toMatchObject({ deleted: true });

    expect((await resend.topics.remove(topicId)).data).toMatchObject({ id: topicId, deleted: true });
    expect((await resend.contactProperties.remove(prop.data!.id)).data).toMatchObject({ deleted: true });
    expect((await resend.segments.remove(segmentId)).data).toMatchObject({ id: segmentId, deleted: true });
    expect((await resend.segments.get(segmentId)).error).toMatchObject({ name: "not_found", statusCode: 404 });
  });

  it("creates, publishes and sends with a template; a missing variable is a 422", async () => {
    const alias = `order-${uid()}`;
    const created = await resend.templates.create({
      name: "Order shipped", alias, from: `Shop <shop@${tern.domain}>`, subject: "Order {{{ORDER}}} shipped",
      html: "<p>Hi {{{NAME|there}}}, order {{{ORDER}}} is on its way.</p>",
      variables: [{ key: "ORDER", type: "string" }, { key: "NAME", type: "string", fallbackValue: "friend" }],
    }).publish();
    expect(created.error).toBeNull();
    expect((await resend.templates.get(alias)).data).toMatchObject({ status: "published", alias });
    expect((await resend.templates.list()).data!.data.map((t) => t.alias)).toContain(alias);
    const to = `order-${uid()}@example.com`;
    const missing = await resend.emails.send({ to, template: { id: alias } } as never);
    expect(missing.error).toMatchObject({ name: "validation_error", statusCode: 422 });
    const sent = await resend.emails.send({ to, template: { id: alias, variables: { ORDER: "#42", NAME: "Ada & co" } } } as never);
    expect(sent.error).toBeNull();
    const mail = await simpleParser(await relayRaw(to));
    expect(mail.subject).toBe("Order #42 shipped");
    expect(mail.html).toContain("Hi Ada &amp; co, order #42 is on its way.");
    const copy = await resend.templates.duplicate(alias);
    expect(copy.error).toBeNull();
    expect((await resend.templates.update(copy.data!.id, { name: "Order shipped v2" })).error).toBeNull();
    expect((await resend.templates.remove(copy.data!.id)).data).toMatchObject({ deleted: true });
  });

  it("creates, updates, sends and reads a broadcast; each contact gets its own message", async () => {
    const segmentId = (await resend.segments.create({ name: "Newsletter" })).data!.id;
    const readers = [`ada-${uid()}@example.com`, `bob-${uid()}@example.com`];
    for (const [i, email] of readers.entries()) {
      const c = await resend.contacts.create({ email, firstName: ["Ada", "Bob"][i] });
      await resend.contacts.segments.add({ contactId: c.data!.id, segmentId });
    }
    const draft = await resend.broadcasts.create({ segmentId, from: `News <news@${tern.domain}>`, subject: "Hello {{{FIRST_NAME}}}", html: "<p>Draft</p>", name: "November" });
    expect(draft.error).toBeNull();
    const id = draft.data!.id;
    expect((await resend.broadcasts.update(id, { html: "<p>Dear {{{FIRST_NAME|reader}}}, news.</p>", previewText: "News inside" })).error).toBeNull();
    expect((await resend.broadcasts.get(id)).data).toMatchObject({ id, name: "November", status: "draft", segment_id: segmentId });
    const copy = await resend.broadcasts.duplicate(id);
    expect((await resend.broadcasts.remove(copy.data!.id)).data).toMatchObject({ deleted: true });
    expect((await resend.broadcasts.send(id)).error).toBeNull();
    for (const [i, email] of readers.entries()) {
      const raw = await relayRaw(email);
      const mail = await simpleParser(raw);
      const name = ["Ada", "Bob"][i];
      expect(mail.subject).toBe(`Hello ${name}`);
      expect(mail.html).toContain(`Dear ${name}, news.`);
      // mailparser folds List-* headers into one structure: read them from the raw message.
      const headers = raw.toString("latin1").replace(/\r\n[ \t]+/g, " ");
      expect(headers).toMatch(/^List-Unsubscribe-Post: List-Unsubscribe=One-Click\r$/m);
      const link = headers.match(/^List-Unsubscribe: <(http[^>]+\/u\/[A-Za-z0-9_-]+)>\r$/m)![1]!;
      expect(mail.html).toContain(`href="${link}"`);
    }
    const done = await waitUntil("sent", async () => {
      const b = (await resend.broadcasts.get(id)).data;
      return b?.status === "sent" ? b : undefined;
    });
    expect(done.sent_at).toBeTruthy();
    expect((await resend.broadcasts.list()).data!.data.map((b) => b.id)).toContain(id);
    const scheduled = await resend.broadcasts.create({ segmentId, from: `news@${tern.domain}`, subject: "Later", text: "Later", send: true, scheduledAt: "in 2 hours" });
    expect((await resend.broadcasts.get(scheduled.data!.id)).data).toMatchObject({ status: "scheduled" });
    expect((await resend.broadcasts.cancel(scheduled.data!.id)).error).toBeNull();
    expect((await resend.broadcasts.get(scheduled.data!.id)).data).toMatchObject({ status: "canceled" });
  });
});

it("a crash in the middle of a fan-out sends every eligible contact the broadcast once, and nobody else", async () => {
  const api = (method: string, path: string, body?: unknown) =>
    fetch(`${tern.url}${path}`, { method, headers: { authorization: `Bearer ${tern.apiKey}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) })
      .then(async (r) => ({ status: r.status, body: (await r.json()) as any }));
  const run = uid();
  const segment = (await api("POST", "/segments", { name: `crash ${run}` })).body.id;
  const topic = (await api("POST", "/topics", { name: `crash ${run}`, default_subscription: "opt_in" })).body.id;
  const total = 120;
  const emails = Array.from({ length: total }, (_, i) => `fan-${run}-${i}@example.com`);
  const ineligible = new Set(emails.filter((_, i) => i % 20 === 7));
  // Ten at a time: the setup of 120 contacts (3 pages of the fan-out).
  for (let i = 0; i < total; i += 10) {
    await Promise.all(emails.slice(i, i + 10).map(async (email, j) => {
      const n = i + j;
      const extra = !ineligible.has(email) ? {} : n % 3 === 0 ? { unsubscribed: true } : n % 3 === 1 ? { topics: [{ id: topic, subscription: "opt_out" }] } : {};
      const res = await api("POST", "/contacts", { email, segments: [segment], ...extra });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      if (ineligible.has(email) && n % 3 === 2) expect((await api("POST", "/suppressions", { email })).status).toBeLessThan(300);
    }));
  }
  const sent = await api("POST", "/broadcasts", { segment_id: segment, topic_id: topic, from: `News <news@${tern.domain}>`, subject: "Crash test", text: "Hello {{{EMAIL}}}", send: true });
  expect(sent.status, JSON.stringify(sent.body)).toBe(201);
  const id = sent.body.id;
  // Kill it once the fan-out has recorded some recipients and not all. The fan-out outruns an
  // HTTP poll, so the test watches the local D1 file itself (read-only).
  const eligible = total - ineligible.size;
  const db = d1File(tern.stateDir);
  const progress = db.prepare("SELECT recipient_count AS n FROM broadcasts WHERE id = ?");
  let before = 0;
  for (;;) {
    try {
      before = (progress.get(id) as { n: number } | undefined)?.n ?? 0;
    } catch {
      // Busy while a page commits: look again.
    }
    if (before > 0) break;
    await new Promise((r) => setImmediate(r));
  }
  const { stateDir } = tern;
  await tern.kill();
  db.close();
  expect(before, "the crash must come in the middle of the fan-out").toBeLessThan(eligible);

  tern = await startTern({ stateDir, env: settings });
  const count = async () => {
    const byRcpt = new Map<string, number>();
    for (const m of await relayMessages()) for (const r of m.envelope.to) if (r.startsWith(`fan-${run}-`)) byRcpt.set(r, (byRcpt.get(r) ?? 0) + 1);
    return byRcpt;
  };
  await waitUntil("every eligible contact's message", async () => {
    const counts = await count();
    expect([...counts.values()].every((c) => c === 1), "somebody got the broadcast twice").toBe(true);
    return counts.size >= eligible ? counts : undefined;
  }, 150_000);
  expect((await api("GET", `/broadcasts/${id}`)).body).toMatchObject({ status: "sent", recipients: eligible });
  // Nothing more arrives later.
  await new Promise((r) => setTimeout(r, 5000));
  const counts = await count();
  expect(counts.size).toBe(eligible);
  expect([...counts.values()].every((c) => c === 1)).toBe(true);
  for (const e of ineligible) expect(counts.has(e), e).toBe(false);
}, 300_000);
