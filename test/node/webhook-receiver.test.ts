// The test webhook receiver (test/support/webhook-receiver.ts) against tern's signing and
// delivery-attempt modules, over real loopback HTTP: what it records, what it verifies, and
// each scripted behaviour (fail then succeed, hang, drop, down) as tern's attempts see it.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.ts";
import { attemptDelivery, type AttemptRecord } from "../../worker/webhooks/attempt.ts";
import { endpointPolicy } from "../../worker/webhooks/endpoint.ts";
import { emailEventPayload } from "../../worker/webhooks/payloads.ts";
import { afterFailedAttempt, MAX_ATTEMPTS } from "../../worker/webhooks/retry.ts";
import { generateWebhookSecret, signWebhook } from "../../worker/webhooks/signing.ts";

const secret = generateWebhookSecret();
const policy = endpointPolicy({ allowLocalTargets: true }); // dev mode: http and loopback
let receiver: WebhookReceiver;

beforeAll(async () => {
  receiver = await startWebhookReceiver({ secrets: [secret] });
});
afterAll(async () => {
  await receiver.close();
});
beforeEach(() => {
  receiver.reset();
  receiver.setSecrets([secret]);
});

const body = JSON.stringify(
  emailEventPayload({
    type: "email.delivered",
    at: Date.now(),
    email: {
      id: "0193a8a0-1c2d-7000-8000-0000000000e1",
      createdAt: Date.now(),
      from: "Acme <orders@acme.example>",
      to: ["ana@example.org"],
      subject: "Grüße",
      messageId: "0193a8a0-1c2d-7000-8000-0000000000e1@acme.example",
      tags: [{ name: "kind", value: "order" }],
    },
  }),
);

async function deliver(path: string, options: { id?: string; at?: number; secrets?: string[]; payload?: string; timeoutMs?: number } = {}): Promise<AttemptRecord> {
  const payload = options.payload ?? body;
  const headers = await signWebhook(
    { id: options.id ?? "evt_0193a8a0", timestamp: options.at ?? Math.floor(Date.now() / 1000), body: payload },
    options.secrets ?? [secret],
  );
  return attemptDelivery({ url: receiver.url(path), headers, body: payload }, { policy, timeoutMs: options.timeoutMs });
}

describe("webhook receiver", () => {
  it("records a delivery exactly and verifies it with both svix and standardwebhooks", async () => {
    const record = await deliver("/hooks/a");
    expect(record).toMatchObject({ ok: true, status: 200, responseExcerpt: '{"ok":true}', error: null });
    const [d] = receiver.deliveries("/hooks/a");
    expect(d).toMatchObject({ path: "/hooks/a", method: "POST", body, verified: true });
    expect(d!.verifications).toEqual([{ secret, svix: null, standardwebhooks: null }]);
    expect(d!.headers["content-type"]).toBe("application/json");
    expect(d!.headers["user-agent"]).toBe("tern-webhooks/1");
    for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature", "svix-id", "svix-timestamp", "svix-signature"]) {
      expect(d!.headers[name], name).toBeTruthy();
    }
    expect(Math.abs(d!.timestampSkewSeconds!)).toBeLessThanOrEqual(2);
    expect(receiver.deliveries()).toHaveLength(1);
    expect(receiver.deliveries("/other")).toHaveLength(0);
  });

  it("fails both libraries for a tampered body and for the wrong secret", async () => {
    const headers = await signWebhook({ id: "evt_t", timestamp: Math.floor(Date.now() / 1000), body }, [secret]);
    await attemptDelivery({ url: receiver.url("/tampered"), headers, body: body.replace("delivered", "bounced") }, { policy });
    const [tampered] = receiver.deliveries("/tampered");
    expect(tampered!.verified).toBe(false);
    expect(tampered!.verifications[0]!.svix).toMatch(/signature/i);
    expect(tampered!.verifications[0]!.standardwebhooks).toMatch(/signature/i);

    await deliver("/wrong-secret", { secrets: [generateWebhookSecret()] });
    const [wrong] = receiver.deliveries("/wrong-secret");
    expect(wrong!.verified).toBe(false);
    expect(wrong!.verifications[0]).toMatchObject({ svix: expect.any(String), standardwebhooks: expect.any(String) });
  });

  it("records a request that is not a webhook at all, unverified", async () => {
    const res = await fetch(receiver.url("/raw"), { method: "POST", body: "hello" });
    expect(res.status).toBe(200);
    const [d] = receiver.deliveries("/raw");
    expect(d).toMatchObject({ body: "hello", verified: false, timestampSkewSeconds: null });
    expect(d!.verifications[0]!.standardwebhooks).toMatch(/missing required headers/i);
  });

  it("checks the timestamp against the real clock, or only the signature when a test drives tern's clock", async () => {
    const tenMinutesAgo = Math.floor(Date.now() / 1000) - 600;
    await deliver("/old", { at: tenMinutesAgo });
    const [old] = receiver.deliveries("/old");
    expect(old!.verified).toBe(false);
    expect(old!.verifications[0]!.standardwebhooks).toMatch(/too old/i);
    expect(old!.timestampSkewSeconds).toBeLessThanOrEqual(-599);

    const driven = await startWebhookReceiver({ secrets: [secret], timestamps: "signature-only" });
    try {
      const headers = await signWebhook({ id: "evt_old", timestamp: tenMinutesAgo, body }, [secret]);
      await attemptDelivery({ url: driven.url("/old"), headers, body }, { policy });
      const [d] = driven.deliveries();
      expect(d!.verified).toBe(true);
      // The signature still has to be right.
      await attemptDelivery({ url: driven.url("/old"), headers, body: `${body} ` }, { policy });
      expect(driven.deliveries()[1]!.verified).toBe(false);
    } finally {
      await driven.close();
    }
  });

  it("verifies each secret of a rotation on its own", async () => {
    const fresh = generateWebhookSecret();
    const stranger = generateWebhookSecret();
    receiver.setSecrets([secret, fresh, stranger], "/rotating");
    await deliver("/rotating", { secrets: [secret, fresh] });
    const [d] = receiver.deliveries("/rotating");
    expect(d!.headers["webhook-signature"]!.split(" ")).toHaveLength(2);
    expect(d!.verifications.map((v) => [v.svix === null, v.standardwebhooks === null])).toEqual([
      [true, true],
      [true, true],
      [false, false],
    ]);
    expect(d!.verified).toBe(true);
  });

  it("answers 500 three times then 200: four attempts on the retry schedule, one id", async () => {
    // Drive the clock: each attempt is signed at its scheduled time, as the queue would send it.
    const driven = await startWebhookReceiver({ secrets: [secret], timestamps: "signature-only" });
    driven.script("/flaky", [{ status: 500, body: "boom" }, { status: 500 }, { status: 500 }]);
    try {
      let at = 1_800_000_000; // seconds
      const records: AttemptRecord[] = [];
      for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
        const headers = await signWebhook({ id: "evt_flaky", timestamp: at, body }, [secret]);
        const record = await attemptDelivery({ url: driven.url("/flaky"), headers, body }, { policy });
        records.push(record);
        if (record.ok) break;
        const next = afterFailedAttempt(attempt, at * 1000);
        if (!next.retry) break;
        at = next.nextAttemptAt / 1000;
      }
      expect(records.map((r) => r.status)).toEqual([500, 500, 500, 200]);
      expect(records[0]).toMatchObject({ ok: false, responseExcerpt: "boom", error: "The endpoint answered with status 500." });
      const got = driven.deliveries("/flaky");
      expect(got).toHaveLength(4);
      expect(new Set(got.map((d) => d.headers["webhook-id"]))).toEqual(new Set(["evt_flaky"]));
      expect(got.every((d) => d.verified)).toBe(true);
      const times = got.map((d) => Number(d.headers["webhook-timestamp"]));
      expect(times.slice(1).map((t, i) => t - times[i]!)).toEqual([5, 300, 1800]);
    } finally {
      await driven.close();
    }
  });

  it("a receiver that hangs makes the attempt time out; the delivery itself arrived", async () => {
    receiver.script("/hang", [{ hang: true }]);
    const record = await deliver("/hang", { timeoutMs: 300 });
    expect(record).toMatchObject({ ok: false, status: null, error: "The endpoint did not answer within 300 ms." });
    expect(record.durationMs).toBeGreaterThanOrEqual(250);
    expect(receiver.deliveries("/hang")).toHaveLength(1);
  });

  it("a slow answer within the timeout is fine", async () => {
    receiver.script("/slow", [{ status: 204, delayMs: 150 }]);
    const record = await deliver("/slow", { timeoutMs: 2_000 });
    expect(record).toMatchObject({ ok: true, status: 204 });
    expect(record.durationMs).toBeGreaterThanOrEqual(140);
  });

  it("a dropped connection and a receiver that is down are unreachable; up again, it receives", async () => {
    receiver.script("/drop", [{ reset: true }]);
    expect(await deliver("/drop")).toMatchObject({ ok: false, status: null, error: "The endpoint could not be reached." });
    await receiver.down();
    expect(await deliver("/down")).toMatchObject({ ok: false, status: null, error: "The endpoint could not be reached." });
    await receiver.up();
    expect(await deliver("/down")).toMatchObject({ ok: true, status: 200 });
    expect(receiver.deliveries("/down")).toHaveLength(1);
  });

  it("keeps answering with the script's last word, and a redirect is a failure tern does not follow", async () => {
    receiver.script("/gone", [], { status: 410, body: "gone" });
    expect(await deliver("/gone")).toMatchObject({ ok: false, status: 410, responseExcerpt: "gone" });
    expect(await deliver("/gone")).toMatchObject({ ok: false, status: 410 });
    receiver.script("/moved", [{ status: 308 }]);
    expect(await deliver("/moved")).toMatchObject({ ok: false, status: 308, error: "The endpoint answered with a redirect (status 308); redirects are not followed." });
  });

  it("waits for deliveries and says how many came when they do not", async () => {
    const waiting = receiver.waitForDeliveries(2, { path: "/wait", timeoutMs: 2_000 });
    await deliver("/wait");
    await deliver("/wait");
    expect(await waiting).toHaveLength(2);
    await expect(receiver.waitForDeliveries(3, { path: "/wait", timeoutMs: 50 })).rejects.toThrow("2 of 3 deliveries to /wait after 50 ms");
  });

  it("refuses a loopback target outside dev mode without sending", async () => {
    const headers = await signWebhook({ id: "evt_p", timestamp: Math.floor(Date.now() / 1000), body }, [secret]);
    const record = await attemptDelivery({ url: receiver.url("/prod"), headers, body }, { policy: endpointPolicy({ allowLocalTargets: false }) });
    expect(record).toMatchObject({ ok: false, error: "The endpoint must use https." });
    expect(receiver.deliveries("/prod")).toHaveLength(0);
  });
});
