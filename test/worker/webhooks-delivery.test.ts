// Webhook delivery through the real queue consumer, real D1 and a real receiver on loopback
// that verifies every delivery with svix and standardwebhooks. The consumer runs on a clock
// the test drives, so the whole retry schedule (27.5 hours) and the 5-day disable rule run in
// moments.
import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { sweepWebhooks } from "../../worker/webhooks/consumer.ts";
import { RETRY_DELAYS_SECONDS } from "../../worker/webhooks/retry.ts";
import { api, createAccount, type TestAccount } from "./fixtures.ts";
import {
  Clock,
  consume,
  createWebhook,
  deliveriesAt,
  deliveryRow,
  outboxEmailEvent,
  receiverUrl,
  script,
  setSecrets,
  type Delivery,
} from "./webhook-peer.ts";
import { waitFor } from "./wait.ts";

// A fresh account per test: an event fans out to every endpoint of its account.
let acct: TestAccount;
beforeEach(async () => {
  acct = await createAccount();
});

const seconds = (d: Delivery) => Number(d.headers["webhook-timestamp"]);

/** Runs the schedule: each due attempt at the moment it is due, until the delivery settles. */
async function runSchedule(webhookId: string, eventId: string, clock: Clock) {
  // Messages the consumer handed back to the queue for a later attempt (the plugin does not
  // report their delay; the receiver's signed timestamps show the schedule).
  let retried = 0;
  for (let i = 0; i < 20; i++) {
    const row = (await deliveryRow(webhookId, eventId))!;
    if (row.status !== "pending") return { row, retried };
    clock.set(row.next_attempt_at!);
    const result = await consume([{ kind: "delivery", deliveryId: row.id }], clock);
    retried += result.retryMessages.length;
  }
  throw new Error("the schedule did not settle");
}

describe("fan-out and signing", () => {
  it("an event goes once to each enabled endpoint subscribed to its type, signed so svix and standardwebhooks both verify it", async () => {
    const clock = new Clock();
    const a = receiverUrl("driven", "sent"), b = receiverUrl("driven", "delivered-only"), c = receiverUrl("driven", "disabled");
    const hookA = await createWebhook(acct.token, a.url, ["email.sent", "email.bounced"]);
    const hookB = await createWebhook(acct.token, b.url, ["email.delivered"]);
    const hookC = await createWebhook(acct.token, c.url, ["email.sent"]);
    expect((await api(acct.token, "PATCH", `/webhooks/${hookC.id}`, { status: "disabled" })).status).toBe(200);
    await setSecrets("driven", a.path, [hookA.signing_secret]);

    const event = await outboxEmailEvent(acct.accountId, "email.sent", clock.now());
    // The same event twice in a batch, then again later (a redelivered message): one delivery.
    const first = await consume([{ kind: "event", eventId: event.id }, { kind: "event", eventId: event.id }], clock);
    expect(first.retryMessages).toEqual([]);
    await consume([{ kind: "event", eventId: event.id }], clock);

    const got = await deliveriesAt("driven", a.path);
    expect(got).toHaveLength(1);
    const d = got[0]!;
    expect(d.body).toBe(event.body);
    expect(d.verified).toBe(true);
    expect(d.verifications[0]).toMatchObject({ svix: null, standardwebhooks: null });
    const row = (await deliveryRow(hookA.id, event.id))!;
    expect(d.headers["webhook-id"]).toBe(row.id);
    expect(d.headers["svix-id"]).toBe(row.id);
    expect(d.headers["svix-signature"]).toBe(d.headers["webhook-signature"]);
    expect(d.headers["content-type"]).toBe("application/json");
    const started = (await env.DB.prepare("SELECT started_at FROM webhook_attempts WHERE delivery_id = ?").bind(row.id).first<{ started_at: number }>())!.started_at;
    expect(Math.abs(seconds(d) - started / 1000)).toBeLessThanOrEqual(1);
    expect(row).toMatchObject({ status: "delivered", attempts: 1 });

    expect(await deliveriesAt("driven", b.path)).toEqual([]);
    expect(await deliveriesAt("driven", c.path)).toEqual([]);
    expect(await deliveryRow(hookB.id, event.id)).toBeNull();
    expect(await deliveryRow(hookC.id, event.id)).toBeNull();
  });

  it("a body changed on the way fails both libraries' verification", async () => {
    const clock = new Clock();
    const target = receiverUrl("driven", "tamper");
    const hook = await createWebhook(acct.token, target.url, ["email.sent"]);
    await setSecrets("driven", target.path, [hook.signing_secret]);
    const event = await outboxEmailEvent(acct.accountId, "email.sent", clock.now());
    await consume([{ kind: "event", eventId: event.id }], clock);
    const [signed] = await deliveriesAt("driven", target.path);
    expect(signed!.verified).toBe(true);

    // Replay tern's exact headers with one character of the body changed.
    const headers = Object.fromEntries(Object.entries(signed!.headers).filter(([k]) => /^(webhook|svix)-/.test(k)));
    const tampered = signed!.body.replace('"subject":"Driven"', '"subject":"Driveb"');
    expect(tampered).not.toBe(signed!.body);
    await fetch(target.url, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: tampered });
    const [, forged] = await deliveriesAt("driven", target.path);
    expect(forged!.verified).toBe(false);
    expect(forged!.verifications[0]!.svix).not.toBeNull();
    expect(forged!.verifications[0]!.standardwebhooks).not.toBeNull();
  });
});

describe("the retry schedule", () => {
  it("a receiver answering 500 three times then 200 gets four attempts, at +0, +5 s, +5 min and +30 min, all with one id", async () => {
    const clock = new Clock();
    const target = receiverUrl("driven", "flaky");
    const hook = await createWebhook(acct.token, target.url, ["email.delivered"]);
    await setSecrets("driven", target.path, [hook.signing_secret]);
    await script("driven", target.path, [{ status: 500, body: "boom" }, { status: 500 }, { status: 500 }], { status: 200, body: "thanks" });

    const event = await outboxEmailEvent(acct.accountId, "email.delivered", clock.now());
    await consume([{ kind: "event", eventId: event.id }], clock);
    const { row, retried } = await runSchedule(hook.id, event.id, clock);

    expect(row).toMatchObject({ status: "delivered", attempts: 4 });
    // Attempts 2 and 3 failed on their queue message, which went back to the queue for the next.
    expect(retried).toBe(2);
    const got = await deliveriesAt("driven", target.path);
    expect(got.map((d) => d.headers["webhook-id"])).toEqual([row.id, row.id, row.id, row.id]);
    expect(got.every((d) => d.verified && d.body === event.body)).toBe(true);
    const t = got.map(seconds);
    const gaps = t.slice(1).map((x, i) => x - t[i]!);
    for (const [i, gap] of gaps.entries()) expect(Math.abs(gap - RETRY_DELAYS_SECONDS[i]!)).toBeLessThanOrEqual(1);

    // The attempt log, newest first: time, status, duration, excerpt.
    const log = (await (await api(acct.token, "GET", `/webhooks/${hook.id}/events/${row.id}/attempts`)).json()) as { data: Record<string, unknown>[] };
    expect(log.data.map((a) => [a.attempt, a.status_code, a.ok])).toEqual([[4, 200, true], [3, 500, false], [2, 500, false], [1, 500, false]]);
    expect(log.data[3]).toMatchObject({ response_excerpt: "boom", error: "The endpoint answered with status 500." });
    expect(log.data[0]).toMatchObject({ response_excerpt: "thanks", error: null });
    expect(typeof log.data[0]!.duration_ms).toBe("number");
    // A success in the end: the endpoint is healthy.
    const endpoint = (await (await api(acct.token, "GET", `/webhooks/${hook.id}`)).json()) as { failing_since: string | null };
    expect(endpoint.failing_since).toBeNull();
  });

  it("a receiver down for the whole schedule gets eight attempts; the event is failed and visible, and a replay after the fix delivers it with the same id", async () => {
    const clock = new Clock();
    const down = `http://127.0.0.1:${env.TEST_PEERS.webhookDown}/gone`;
    const hook = await createWebhook(acct.token, down, ["email.sent"]);
    const event = await outboxEmailEvent(acct.accountId, "email.sent", clock.now());
    await consume([{ kind: "event", eventId: event.id }], clock);
    const { row, retried } = await runSchedule(hook.id, event.id, clock);
    expect(row).toMatchObject({ status: "failed", attempts: 8, next_attempt_at: null });
    expect(retried).toBe(6);
    const started = (await env.DB.prepare("SELECT started_at FROM webhook_attempts WHERE delivery_id = ? ORDER BY attempt").bind(row.id).all<{ started_at: number }>()).results.map((r) => r.started_at);
    const gaps = started.slice(1).map((x, i) => (x - started[i]!) / 1000);
    for (const [i, gap] of gaps.entries()) expect(Math.abs(gap - RETRY_DELAYS_SECONDS[i]!)).toBeLessThan(1);

    const list = (await (await api(acct.token, "GET", `/webhooks/${hook.id}/events`)).json()) as { data: Record<string, unknown>[] };
    expect(list.data).toEqual([expect.objectContaining({ id: row.id, event_id: event.id, type: "email.sent", status: "failed", attempts: 8, next_attempt_at: null })]);
    const one = (await (await api(acct.token, "GET", `/webhooks/${hook.id}/events/${event.id}`)).json()) as Record<string, unknown>;
    expect(one).toMatchObject({ id: row.id, status: "failed", payload: JSON.parse(event.body) });
    const log = (await (await api(acct.token, "GET", `/webhooks/${hook.id}/events/${row.id}/attempts`)).json()) as { data: Record<string, unknown>[] };
    expect(log.data).toHaveLength(8);
    expect(log.data.every((a) => a.status_code === null && a.ok === false && a.error === "The endpoint could not be reached.")).toBe(true);
    const endpoint = (await (await api(acct.token, "GET", `/webhooks/${hook.id}`)).json()) as Record<string, unknown>;
    expect(endpoint).toMatchObject({ status: "enabled", failing_since: expect.any(String) });

    // The account points it at a working receiver and replays: one new attempt, now, same id.
    const fixed = receiverUrl("real", "fixed");
    await setSecrets("real", fixed.path, [hook.signing_secret]);
    expect((await api(acct.token, "PATCH", `/webhooks/${hook.id}`, { endpoint: fixed.url })).status).toBe(200);
    const replayed = await api(acct.token, "POST", `/webhooks/${hook.id}/events/${row.id}/replay`);
    expect(replayed.status).toBe(200);
    expect(await replayed.json()).toMatchObject({ id: row.id, status: "delivered", attempts: 9 });
    const [arrived] = await deliveriesAt("real", fixed.path);
    expect(arrived).toMatchObject({ verified: true, body: event.body });
    expect(arrived!.headers["webhook-id"]).toBe(row.id);
    expect(Math.abs(arrived!.timestampSkewSeconds!)).toBeLessThanOrEqual(2);
    // A delivered event can be replayed too (by event id as well as by delivery id).
    expect(await (await api(acct.token, "POST", `/webhooks/${hook.id}/events/${event.id}/replay`)).json()).toMatchObject({ status: "delivered", attempts: 10 });
    expect((await deliveriesAt("real", fixed.path)).map((d) => d.headers["webhook-id"])).toEqual([row.id, row.id]);
  });

  it("an endpoint whose every attempt fails for 5 days is disabled, says why, gets nothing more, and re-enabling clears it", async () => {
    const clock = new Clock();
    const t0 = clock.now();
    const down = `http://127.0.0.1:${env.TEST_PEERS.webhookDown}/dead`;
    const hook = await createWebhook(acct.token, down, ["email.sent"]);
    const day = 24 * 3600_000;
    for (const at of [t0, t0 + 2 * day, t0 + 4 * day]) {
      clock.set(at);
      const e = await outboxEmailEvent(acct.accountId, "email.sent", at);
      await consume([{ kind: "event", eventId: e.id }], clock);
    }
    let view = (await (await api(acct.token, "GET", `/webhooks/${hook.id}`)).json()) as Record<string, any>;
    expect(view.status).toBe("enabled");
    expect(Date.parse(view.failing_since) - t0).toBeLessThan(5000);

    clock.set(t0 + 5 * day + 60_000);
    const last = await outboxEmailEvent(acct.accountId, "email.sent", clock.now());
    await consume([{ kind: "event", eventId: last.id }], clock);
    view = (await (await api(acct.token, "GET", `/webhooks/${hook.id}`)).json()) as Record<string, any>;
    expect(view.status).toBe("disabled");
    expect(view.disabled_reason).toMatch(/^Disabled automatically: every delivery attempt since .+ failed \(5 days without a successful delivery\)\.$/);

    // Its pending retries are not attempted: they fail without an attempt.
    const pending = (await deliveryRow(hook.id, last.id))!;
    expect(pending.status).toBe("pending");
    clock.set(pending.next_attempt_at!);
    await consume([{ kind: "delivery", deliveryId: pending.id }], clock);
    expect(await deliveryRow(hook.id, last.id)).toMatchObject({ status: "failed", attempts: 1 });
    // New events are not fanned out to it.
    const after = await outboxEmailEvent(acct.accountId, "email.sent", clock.now());
    await consume([{ kind: "event", eventId: after.id }], clock);
    expect(await deliveryRow(hook.id, after.id)).toBeNull();

    const enabled = (await (await api(acct.token, "PATCH", `/webhooks/${hook.id}`, { status: "enabled" })).json()) as Record<string, unknown>;
    expect(enabled).toMatchObject({ status: "enabled", disabled_reason: null, failing_since: null });
  });
});

describe("secret rotation", () => {
  it("for 24 hours both the old and the new secret sign (a receiver holding either verifies); then only the new one", async () => {
    const clock = new Clock(Date.now());
    const target = receiverUrl("driven", "rotate");
    const hook = await createWebhook(acct.token, target.url, ["email.sent"]);
    const res = await api(acct.token, "POST", `/webhooks/${hook.id}/signing-secret/rotate`);
    expect(res.status).toBe(200);
    const rotated = (await res.json()) as { id: string; signing_secret: string; previous_secret_expires_at: string };
    expect(rotated.signing_secret).toMatch(/^whsec_/);
    expect(rotated.signing_secret).not.toBe(hook.signing_secret);
    expect(Date.parse(rotated.previous_secret_expires_at) - Date.now()).toBeGreaterThan(24 * 3600_000 - 10_000);
    await setSecrets("driven", target.path, [hook.signing_secret, rotated.signing_secret]);

    const during = await outboxEmailEvent(acct.accountId, "email.sent", clock.now());
    await consume([{ kind: "event", eventId: during.id }], clock);
    clock.set(Date.parse(rotated.previous_secret_expires_at) + 60_000);
    const afterwards = await outboxEmailEvent(acct.accountId, "email.sent", clock.now());
    await consume([{ kind: "event", eventId: afterwards.id }], clock);

    const [d1, d2] = await deliveriesAt("driven", target.path);
    expect(d1!.headers["webhook-signature"]!.split(" ")).toHaveLength(2);
    expect(d1!.verifications.map((v) => [v.svix, v.standardwebhooks])).toEqual([[null, null], [null, null]]);
    expect(d2!.headers["webhook-signature"]!.split(" ")).toHaveLength(1);
    expect(d2!.verifications[0]!.svix).not.toBeNull();
    expect(d2!.verifications[0]!.standardwebhooks).not.toBeNull();
    expect(d2!.verifications[1]).toMatchObject({ svix: null, standardwebhooks: null });
  });
});

describe("the cron", () => {
  it("an event whose queue hint was lost is found and delivered", async () => {
    const target = receiverUrl("real", "swept");
    const hook = await createWebhook(acct.token, target.url, ["email.sent"]);
    await setSecrets("real", target.path, [hook.signing_secret]);
    // Written 2 minutes ago and never announced.
    const event = await outboxEmailEvent(acct.accountId, "email.sent", Date.now() - 120_000);
    const swept = await sweepWebhooks(env, Date.now());
    expect(swept.events).toBeGreaterThanOrEqual(1);
    const [d] = await waitFor("the swept event at the receiver", async () => {
      const got = await deliveriesAt("real", target.path);
      return got.length ? got : undefined;
    });
    expect(d).toMatchObject({ verified: true, body: event.body });
  });
});
