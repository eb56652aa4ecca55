// The retention purge (worker/retention/purge.ts): after RETENTION_DAYS the cron deletes settled,
// quiet emails with their events and R2 content, settled webhook deliveries with their attempts,
// fanned-out events nobody waits on, and received mail with its R2 objects; it keeps what is
// pending, what had activity within the window, and what must outlive the window
// (suppressions, tracked links). Time is driven by the test: purgeExpired takes `now`.
import { createScheduledController } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { readConfig } from "../../worker/config.ts";
import { uuidv7, uuidv7Floor } from "../../worker/ids.ts";
import worker from "../../worker/index.ts";
import { deleteExpiredEmails, deleteSettledDeliveries, ORPHAN_CURSOR_KEY, PURGE_SQL, purgeExpired, sweepOrphanedContent } from "../../worker/retention/purge.ts";
import { api, createAccount, purgeAll, type TestAccount } from "./fixtures.ts";
import { waitFor } from "./wait.ts";

const DAY = 86_400_000;
let acct: TestAccount;

beforeAll(async () => {
  acct = await createAccount();
});

async function send(body: Record<string, unknown>): Promise<string> {
  const res = await api(acct.token, "POST", "/emails", { from: `Keep <keep@${acct.domain}>`, subject: "Retention", text: "hello", ...body });
  expect(res.status).toBe(200);
  return ((await res.json()) as { id: string }).id;
}

/** Sends and waits until the consumer has settled the email (state done). */
async function sendSettled(body: Record<string, unknown>): Promise<string> {
  const id = await send(body);
  await waitFor(`${id} settled`, async () => ((await row("emails", id)) as { state?: string } | null)?.state === "done" || undefined);
  return id;
}

function row(table: string, id: string, column = "id") {
  return env.DB.prepare(`SELECT * FROM ${table} WHERE ${column} = ?`).bind(id).first();
}

async function count(table: string, column: string, id: string): Promise<number> {
  return (await env.DB.prepare(`SELECT count(*) AS n FROM ${table} WHERE ${column} = ?`).bind(id).first<{ n: number }>())!.n;
}

/** A webhook of the test account's (subscribed to an event nothing here emits). */
async function webhookId(): Promise<string> {
  const res = await api(acct.token, "POST", "/webhooks", { endpoint: "https://example.com/retention", events: ["contact.created"] });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

async function insertWebhookEvent(now: number, fannedOut: boolean): Promise<string> {
  const id = uuidv7(now);
  await env.DB.prepare("INSERT INTO webhook_events (id, account_id, type, payload_json, created_at, fanned_out_at) VALUES (?, ?, 'contact.created', '{}', ?, ?)")
    .bind(id, acct.accountId, now, fannedOut ? now : null).run();
  return id;
}

/** A delivery of `eventId` to webhook `hook`, with one attempt. */
async function insertDelivery(hook: string, eventId: string, status: string, now: number): Promise<string> {
  const id = uuidv7(now);
  await env.DB.prepare("INSERT INTO webhook_deliveries (id, webhook_id, account_id, event_id, event_type, status, attempts, created_at) VALUES (?, ?, ?, ?, 'contact.created', ?, 1, ?)")
    .bind(id, hook, acct.accountId, eventId, status, now).run();
  await env.DB.prepare("INSERT INTO webhook_attempts (id, delivery_id, webhook_id, attempt, started_at, duration_ms, status_code, ok) VALUES (?, ?, ?, 1, ?, 5, 200, 1)")
    .bind(uuidv7(now), id, hook, now).run();
  return id;
}

async function blobKeys(prefix: string): Promise<string[]> {
  return (await env.BLOBS.list({ prefix })).objects.map((o) => o.key);
}

/** A UUIDv7 of millisecond `ms` with random bits. (uuidv7() itself never goes back in time
 * within an isolate, and an id from the future would move every later id of this isolate.) */
function idAt(ms: number): string {
  const hex = [...crypto.getRandomValues(new Uint8Array(10))].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `${uuidv7Floor(ms).slice(0, 14)}7${hex.slice(0, 3)}-${"89ab"[Number.parseInt(hex[3]!, 16) % 4]}${hex.slice(4, 7)}-${hex.slice(7, 19)}`;
}

describe("uuidv7", () => {
  it("increases within an isolate, and an id stamped with a time of its own moves no later one", () => {
    const made = Array.from({ length: 5000 }, () => uuidv7());
    for (let i = 1; i < made.length; i++) expect(made[i]! > made[i - 1]!).toBe(true);
    // A settlement's events are stamped a few ms ahead: a later id still sorts after them.
    const ahead = uuidv7(Date.now() + 5);
    expect(uuidv7() > ahead).toBe(true);
    // A clock a month ahead (a test's, a backdated report's) leaves the next id at the real time.
    const t = Date.now();
    uuidv7(t + 31 * 86_400_000);
    const next = uuidv7();
    expect(next >= uuidv7Floor(t) && next < uuidv7Floor(t + 60_000)).toBe(true);
    // A time seconds back (a webhook attempt's start) is stamped as given, and the ids around
    // it still increase.
    const before = uuidv7();
    const past = uuidv7(t - 5_000);
    expect(past < uuidv7Floor(t - 4_999)).toBe(true);
    expect(uuidv7() > before).toBe(true);
  });
});

describe("uuidv7Floor", () => {
  it("sorts below every UUIDv7 of an earlier millisecond and above none of a later one", () => {
    const t = Date.now();
    expect(uuidv7Floor(t)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7000-8000-000000000000$/);
    const made = uuidv7();
    expect(uuidv7Floor(Date.now() - 5) < made && made < uuidv7Floor(Date.now() + 5 + 1)).toBe(true);
    for (let i = 0; i < 200; i++) {
      const id = idAt(t - 1 - i * 997);
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(id < uuidv7Floor(t)).toBe(true);
      expect(idAt(t + i * 997) >= uuidv7Floor(t)).toBe(true);
    }
  });
});

describe("the retention purge", () => {
  it("deletes settled, quiet emails with their events and R2 content after the window, and keeps the rest", async () => {
    const big = await sendSettled({
      to: "delivered@simulator.tern.test",
      html: `<p>${"x".repeat(70_000)}</p>`,
      attachments: [{ filename: "a.txt", content: btoa("attached") }],
    });
    expect(await blobKeys(`emails/${big}/`)).toHaveLength(2); // the body and the attachment
    const bounced = await sendSettled({ to: "bounced@simulator.tern.test" });
    const active = await sendSettled({ to: "delivered@simulator.tern.test" });
    const scheduled = await send({ to: "delivered@simulator.tern.test", scheduled_at: new Date(Date.now() + 2 * DAY).toISOString() });
    const now = Date.now();
    // An open 30.5 days from now: the email had activity within the window.
    await env.DB.prepare("INSERT INTO email_events (id, email_id, account_id, type, data_json, created_at) VALUES (?, ?, ?, 'opened', '{}', ?)")
      .bind(idAt(now + 30.5 * DAY), active, acct.accountId, now + 30.5 * DAY).run();

    // Within the window: nothing goes.
    await purgeExpired(env, 30, now + 29 * DAY);
    for (const id of [big, bounced, active, scheduled]) expect(await row("emails", id)).not.toBeNull();

    await purgeExpired(env, 30, now + 31 * DAY);
    for (const id of [big, bounced]) {
      expect(await row("emails", id)).toBeNull();
      expect(await count("email_events", "email_id", id)).toBe(0);
      expect((await api(acct.token, "GET", `/emails/${id}`)).status).toBe(404);
    }
    expect(await blobKeys(`emails/${big}/`)).toEqual([]);
    // Kept: the one with recent activity, the one not yet sent, and the bounce's suppression.
    expect(await row("emails", active)).not.toBeNull();
    expect(await count("email_events", "email_id", active)).toBeGreaterThan(1);
    expect(await row("emails", scheduled)).toMatchObject({ state: "scheduled" });
    expect((await api(acct.token, "GET", `/emails/${scheduled}`)).status).toBe(200);
    expect(await env.DB.prepare("SELECT reason FROM suppressions WHERE account_id = ? AND email = ?").bind(acct.accountId, "bounced@simulator.tern.test").first()).toMatchObject({ reason: "bounce" });
  });

  it("takes a batch per round, oldest first, and goes on while batches fill", async () => {
    // Whatever else this file left is older than the three: purge it first.
    const before = Date.now() - 1;
    while ((await purgeExpired(env, 30, before + 30 * DAY)).emails > 0);
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(await sendSettled({ to: "delivered@simulator.tern.test" }));
    const later = Date.now() + 31 * DAY;
    expect((await purgeExpired(env, 30, later, { batch: 2, rounds: 1 })).emails).toBe(2);
    expect(await row("emails", ids[0]!)).toBeNull();
    expect(await row("emails", ids[1]!)).toBeNull();
    expect(await row("emails", ids[2]!)).not.toBeNull();
    expect((await purgeExpired(env, 30, later, { batch: 2, rounds: 1 })).emails).toBe(1);
    expect(await row("emails", ids[2]!)).toBeNull();
    // Without a round limit a run takes batch after batch while they come back full.
    const more = [];
    for (let i = 0; i < 5; i++) more.push(await sendSettled({ to: "delivered@simulator.tern.test" }));
    expect((await purgeExpired(env, 30, Date.now() + 31 * DAY, { batch: 2 })).emails).toBe(5);
    for (const id of more) expect(await row("emails", id)).toBeNull();
  });

  it("deletes settled webhook deliveries with their attempts, and events nobody waits on", async () => {
    const hook = await webhookId();
    const now = Date.now();
    const event = (fanned: boolean) => insertWebhookEvent(now, fanned);
    const delivery = (eventId: string, status: string) => insertDelivery(hook, eventId, status, now);
    const done = await event(true);
    const doneDelivery = await delivery(done, "delivered");
    const failedDelivery = await delivery(await event(true), "failed");
    const waiting = await event(true);
    const pendingDelivery = await delivery(waiting, "pending");
    const unannounced = await event(false);

    const counts = await purgeExpired(env, 30, now + 31 * DAY);
    expect(counts.webhookDeliveries).toBeGreaterThanOrEqual(2);
    for (const id of [doneDelivery, failedDelivery]) {
      expect(await row("webhook_deliveries", id)).toBeNull();
      expect(await count("webhook_attempts", "delivery_id", id)).toBe(0);
    }
    expect(await row("webhook_events", done)).toBeNull();
    // A delivery still retrying needs its event; an event not yet fanned out has work to do.
    expect(await row("webhook_deliveries", pendingDelivery)).not.toBeNull();
    expect(await count("webhook_attempts", "delivery_id", pendingDelivery)).toBe(1);
    expect(await row("webhook_events", waiting)).not.toBeNull();
    expect(await row("webhook_events", unannounced)).not.toBeNull();
    // The webhook itself stays.
    expect((await api(acct.token, "GET", `/webhooks/${hook}`)).status).toBe(200);
  });

  it("deletes received mail with its raw message, content and attachments in R2", async () => {
    const now = Date.now();
    const id = uuidv7(now);
    const prefix = `inbound/${acct.accountId}/${id}`;
    const keys = { raw: `${prefix}/raw.eml`, content: `${prefix}/content.json`, attachment: `${prefix}/attachments/1` };
    for (const k of Object.values(keys)) await env.BLOBS.put(k, "x");
    await env.DB.prepare("INSERT INTO inbound_emails (id, account_id, from_address, to_json, subject, raw_key, size, content_key, attachments_json, created_at) VALUES (?, ?, 'a@example.org', '[]', 's', ?, 1, ?, ?, ?)")
      .bind(id, acct.accountId, keys.raw, keys.content, JSON.stringify([{ id: "1", key: keys.attachment }]), now).run();
    await purgeExpired(env, 30, now + 29 * DAY);
    expect(await blobKeys(prefix)).toHaveLength(3);
    const counts = await purgeExpired(env, 30, now + 31 * DAY);
    expect(counts.inboundEmails).toBeGreaterThanOrEqual(1);
    expect(await row("inbound_emails", id)).toBeNull();
    expect(await blobKeys(prefix)).toEqual([]);
  });

  it("lets a finished contact import's failed rows go after the window, keeping its counts; a running import keeps them", async () => {
    const now = Date.now();
    const failures = JSON.stringify([{ row: 2, value: "not-an-address", reason: "not an email address" }]);
    const [done, running] = [uuidv7(now), uuidv7(now)];
    for (const [id, status] of [[done, "completed"], [running, "in_progress"]] as const) {
      await env.DB.prepare("INSERT INTO contact_imports (id, account_id, status, file_key, options_json, total, created, failed, failures_json, created_at) VALUES (?, ?, ?, 'imports/x.csv', '{}', 3, 2, 1, ?, ?)")
        .bind(id, acct.accountId, status, failures, now).run();
    }
    const failuresOf = async (id: string) => (await row("contact_imports", id)) as { failures_json: string | null; failed: number; created: number } | null;
    await purgeExpired(env, 30, now + 29 * DAY);
    expect((await failuresOf(done))!.failures_json).toBe(failures);
    expect((await purgeAll(30, now + 31 * DAY)).importFailures).toBeGreaterThanOrEqual(1);
    expect(await failuresOf(done)).toMatchObject({ failures_json: null, failed: 1, created: 2 });
    expect((await failuresOf(running))!.failures_json).toBe(failures);
  });

  it("each delete checks again: a click recorded after the candidates were read keeps its email, a replay keeps its delivery", async () => {
    const [quiet, clicked] = [await sendSettled({ to: "delivered@simulator.tern.test" }), await sendSettled({ to: "delivered@simulator.tern.test" })];
    const now = Date.now();
    const floor = uuidv7Floor(now + DAY);
    const candidates = (await env.DB.prepare(PURGE_SQL.emails).bind(floor, 500).all<{ id: string }>()).results.map((r) => r.id);
    expect(candidates).toEqual(expect.arrayContaining([quiet, clicked]));
    // Between the read and the delete, a reader clicks (an event after the floor).
    await env.DB.prepare("INSERT INTO email_events (id, email_id, account_id, type, data_json, created_at) VALUES (?, ?, ?, 'clicked', '{}', ?)")
      .bind(idAt(now + 2 * DAY), clicked, acct.accountId, now + 2 * DAY).run();
    const result = await deleteExpiredEmails(env.DB, candidates, floor);
    expect(result.deleted).toBe(candidates.length - 1);
    expect(await row("emails", quiet)).toBeNull();
    expect(await row("emails", clicked)).not.toBeNull();
    expect(await count("email_events", "email_id", clicked)).toBeGreaterThan(1);

    // A failed delivery replayed (pending again) between the read and the delete stays, with its attempts.
    const hook = await webhookId();
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) ids.push(await insertDelivery(hook, await insertWebhookEvent(now, true), "failed", now));
    await env.DB.prepare("UPDATE webhook_deliveries SET status = 'pending' WHERE id = ?").bind(ids[1]).run();
    expect(await deleteSettledDeliveries(env.DB, ids)).toBe(1);
    expect(await row("webhook_deliveries", ids[0]!)).toBeNull();
    expect(await row("webhook_deliveries", ids[1]!)).not.toBeNull();
    expect(await count("webhook_attempts", "delivery_id", ids[1]!)).toBe(1);
  });

  it("keeps everything when retention is off", async () => {
    const id = await sendSettled({ to: "delivered@simulator.tern.test" });
    expect(await purgeExpired(env, null, Date.now() + 10_000 * DAY)).toEqual({ emails: 0, webhookDeliveries: 0, webhookEvents: 0, inboundEmails: 0, apiLogs: 0, importFailures: 0, blobs: 0 });
    expect(await row("emails", id)).not.toBeNull();
  });
});

describe("orphaned content", () => {
  it("deletes a sent email's R2 objects left without a row once a day old; a young orphan and a live email's objects stay", async () => {
    const t = Date.now();
    // An accept that died after writing its content: objects under an id no row has. (Floors, not
    // uuidv7(): ids made here must not move this isolate's clock.)
    const old = uuidv7Floor(t - 3_600_000 + 1), young = uuidv7Floor(t + 2 * 3_600_000 + 1);
    for (const id of [old, young]) for (const k of ["body.json", "attachments/0"]) await env.BLOBS.put(`emails/${id}/${k}`, "x");
    const live = await send({ to: ["delivered@simulator.tern.test"], attachments: [{ filename: "a.txt", content: btoa("kept") }] });
    expect(await blobKeys(`emails/${live}/`)).toHaveLength(1);

    /** Runs the sweep from the first key to the end, two objects a run (pages across runs). */
    const sweepAll = async (now: number) => {
      await env.BLOBS.delete(ORPHAN_CURSOR_KEY);
      let deleted = 0;
      for (let run = 0; run < 1000; run++) {
        const r = await sweepOrphanedContent(env, now, 2);
        deleted += r.deleted;
        if (r.wrapped) return deleted;
      }
      throw new Error("the sweep never reached the end");
    };
    // Now, every object was uploaded moments ago: nothing is old enough, whatever its id says.
    await sweepAll(t);
    expect(await blobKeys(`emails/${old}/`)).toHaveLength(2);
    // A day later: the orphan older than a day goes; the one made an hour before the cutoff and
    // the live email's attachment (its row exists, however old) stay.
    expect(await sweepAll(t + 25 * 3_600_000)).toBeGreaterThanOrEqual(2);
    expect(await blobKeys(`emails/${old}/`)).toEqual([]);
    expect(await blobKeys(`emails/${young}/`)).toHaveLength(2);
    expect(await blobKeys(`emails/${live}/`)).toHaveLength(1);
    expect(await row("emails", live)).not.toBeNull();
  });
});

describe("RETENTION_DAYS", () => {
  it("is 30 by default, at least 7 (late reports need their email), 0 keeps for ever, and a value that is not a number of days keeps the default", () => {
    const days = (v: string | undefined) => readConfig({ ...env, RETENTION_DAYS: v } as Env).retentionDays;
    expect(days(undefined)).toBe(30);
    expect(days("")).toBe(30);
    expect(days("7")).toBe(7);
    expect(days("90.5")).toBe(90.5);
    expect(days("1")).toBe(7);
    expect(days("0.001")).toBe(7);
    expect(days("0")).toBeNull();
    expect(days("Infinity")).toBeNull();
    expect(days("thirty")).toBe(30);
    expect(days("-3")).toBe(30);
  });

  it("the cron purges with it", async () => {
    // A settled email written 40 days ago, and one of 20 days ago.
    const old = idAt(Date.now() - 40 * DAY);
    const recent = idAt(Date.now() - 20 * DAY);
    for (const id of [old, recent]) {
      await env.DB.prepare("INSERT INTO emails (id, account_id, from_address, to_json, subject, state, last_event, pending_json, message_id, created_at) VALUES (?, ?, ?, '[\"a@example.org\"]', 'old', 'done', 'delivered', '[]', ?, ?)")
        .bind(id, acct.accountId, `keep@${acct.domain}`, `<${id}@tern.test>`, Date.now()).run();
    }
    await worker.scheduled(createScheduledController({ scheduledTime: Date.now(), cron: "* * * * *" }), { ...env, RETENTION_DAYS: "30" } as Env);
    expect(await row("emails", old)).toBeNull();
    expect(await row("emails", recent)).not.toBeNull();
  });
});
