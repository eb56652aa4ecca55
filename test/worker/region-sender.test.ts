// Each region's sender (durable-objects/region-sender.ts): its connections outlive the request
// that opened them, it runs several at once, reopens one the relay dropped, closes idle ones,
// and a region whose relay is blackholed (ap-northeast-1 in vitest.config.ts: the peer accepts
// TCP and never answers) never delays another region's mail.
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { senderFor, senderName } from "../../worker/delivery/region-batch.ts";
import { SENDER_POOL_DEFAULTS, SessionPool } from "../../worker/delivery/session-pool.ts";
import { createSmtpTransport } from "../../worker/transports/smtp.ts";
import { api, createAccount, type TestAccount } from "./fixtures.ts";
import { address, capturedFor } from "./peers.ts";
import { waitFor } from "./wait.ts";

let us: TestAccount;
let tokyo: TestAccount;
beforeAll(async () => {
  [us, tokyo] = await Promise.all([createAccount(), createAccount({ region: "ap-northeast-1" })]);
});

/** Records an email the way the API does but keeps it away from the background consumer
 * (scheduled far ahead), then makes it due so the test hands it to a sender itself. */
async function recordedEmail(acct: TestAccount, to: string | string[]): Promise<string> {
  const res = await api(acct.token, "POST", "/emails", { from: `Acme <news@${acct.domain}>`, to, subject: "Sender", text: "hello", scheduled_at: "in 20 days" });
  expect(res.status).toBe(200);
  const { id } = (await res.json()) as { id: string };
  await env.DB.prepare("UPDATE emails SET state = 'queued', next_attempt_at = ? WHERE id = ?").bind(Date.now(), id).run();
  return id;
}

async function connectionOf(rcpt: string): Promise<string> {
  const [m] = await capturedFor(rcpt);
  expect(m, `nothing captured for ${rcpt}`).toBeDefined();
  return m!.connectionId;
}

async function lastEvent(acct: TestAccount, id: string): Promise<string> {
  return ((await (await api(acct.token, "GET", `/emails/${id}`)).json()) as { last_event: string }).last_event;
}

/** A sender object of its own, so the background consumer's never shares its connections. */
function freshSender() {
  return env.SENDER.get(env.SENDER.idFromName(`test:${crypto.randomUUID()}`), { locationHint: "enam" });
}

describe("a region's sender object", () => {
  it("keeps its connections open across separate requests, at most perRegion at once", async () => {
    const sender = freshSender();
    const first = Array.from({ length: 6 }, () => address("warm"));
    const second = Array.from({ length: 6 }, () => address("warm"));
    const firstIds = await Promise.all(first.map((to) => recordedEmail(us, to)));
    const secondIds = await Promise.all(second.map((to) => recordedEmail(us, to)));

    const one = await sender.deliver(firstIds);
    expect(one.map((o) => o.outcome)).toEqual(firstIds.map(() => null));
    const opened = new Set(await Promise.all(first.map(connectionOf)));
    expect(opened.size).toBeGreaterThanOrEqual(1);
    expect(opened.size).toBeLessThanOrEqual(SENDER_POOL_DEFAULTS.perRegion);
    expect(await sender.connections("us-east-1")).toEqual({ sessions: opened.size, idle: opened.size, busy: 0 });

    // A second request (through another stub, as a later queue batch would come): the sockets
    // the first request opened are still connected and carry its messages.
    const two = await env.SENDER.get(sender.id).deliver(secondIds);
    expect(two.map((o) => o.outcome)).toEqual(secondIds.map(() => null));
    const reused = new Set(await Promise.all(second.map(connectionOf)));
    for (const c of reused) expect(opened).toContain(c);
    expect((await sender.connections("us-east-1")).sessions).toBe(opened.size);
    for (const id of [...firstIds, ...secondIds]) expect(await lastEvent(us, id)).toBe("delivered");
  });

  it("opens a new connection when the relay dropped the last one", async () => {
    const sender = freshSender();
    const before = address("before");
    const dropped = address("hangup");
    const after = address("after");
    expect((await sender.deliver([await recordedEmail(us, before)]))[0]!.outcome).toBeNull();
    // The peer destroys the socket once the message arrived, without a reply: deferred (it may
    // have been delivered), and the connection is gone.
    const [out] = await sender.deliver([await recordedEmail(us, dropped)]);
    expect(out!.outcome).toEqual(expect.any(Number));
    const [ok] = await sender.deliver([await recordedEmail(us, after)]);
    expect(ok!.outcome).toBeNull();
    expect(await connectionOf(after)).not.toBe(await connectionOf(before));
    expect(await sender.connections("us-east-1")).toEqual({ sessions: 1, idle: 1, busy: 0 });
  });
});

describe("a region's senders", () => {
  it("are one object per region, or SENDERS_PER_REGION of them for a busy region", () => {
    const id = (name: string) => env.SENDER.idFromName(name).toString();
    expect(senderFor(env, "eu-west-1").id.toString()).toBe(id("region:eu-west-1"));
    const four = { ...env, SENDERS_PER_REGION: "4" } as Env;
    const names = new Set([0, 1, 2, 3].map((n) => id(senderName("eu-west-1", n))));
    const picked = new Set(Array.from({ length: 64 }, () => senderFor(four, "eu-west-1").id.toString()));
    for (const p of picked) expect(names).toContain(p);
    expect(picked.size).toBeGreaterThan(1);
  });
});

describe("a relay's rate limit for one recipient domain", () => {
  it("holds that domain's mail in the sender, not other domains'", async () => {
    const sender = freshSender();
    const eventsOf = async (id: string) => ((await (await api(us.token, "GET", `/emails/${id}/events`)).json()) as { data: { type: string; data: Record<string, unknown> }[] }).data;
    // The peer answers RCPT to throttled.example with 421 4.7.28.
    const [first, second, other] = [address("a", "throttled.example"), address("b", "throttled.example"), address("c", "example.com")];
    const one = await recordedEmail(us, [first, second, other]);
    const [out] = await sender.deliver([one]);
    expect(out!.outcome).toEqual(expect.any(Number));
    const delayed = (await eventsOf(one)).find((e) => e.type === "delivery_delayed")!;
    expect(delayed.data.recipients).toEqual([first, second]);
    const said = JSON.stringify(delayed.data);
    expect(said).toContain("Too many messages to throttled.example");
    // The second recipient was not offered to the relay: tern held it.
    expect(said).toContain("The relay asked tern to slow down for throttled.example");
    expect(await capturedFor(other)).toHaveLength(1);

    // A later batch: the domain is still held, other domains go at once.
    const held = address("d", "throttled.example");
    const elsewhere = address("e", "example.com");
    const heldId = await recordedEmail(us, held);
    const later = await sender.deliver([heldId, await recordedEmail(us, elsewhere)]);
    expect(later.map((o) => o.outcome)).toEqual([expect.any(Number), null]);
    expect(await capturedFor(elsewhere)).toHaveLength(1);
    const waited = JSON.stringify((await eventsOf(heldId)).find((e) => e.type === "delivery_delayed")!.data);
    expect(waited).toContain("The relay asked tern to slow down for throttled.example");
    expect(waited).not.toContain("421 4.7.28 Too many messages to throttled.example, slow down");
  });
});

describe("the pool of a sender", () => {
  it("closes a connection idle past its timeout, and the next message opens another", async () => {
    const transport = () => createSmtpTransport({
      host: "127.0.0.1", port: env.TEST_PEERS.plain!, security: "plain", heloName: "mx.tern.example",
      connectTimeoutMs: 2000, commandTimeoutMs: 2000, dataTimeoutMs: 5000,
    });
    const pool = new SessionPool(transport, { perRegion: 2, idleMs: 150, holdMs: 1000 });
    const send = async (to: string) => {
      const s = await pool.acquire("r");
      const raw = new TextEncoder().encode(`From: a@tern.example\r\nTo: ${to}\r\nSubject: idle\r\n\r\nhello\r\n`);
      const [r] = await s.deliver({ envelopeFrom: "a@tern.example", recipients: [to], raw });
      pool.release("r", s);
      expect(r!.status).toBe("accepted");
    };
    const [a, b, c] = [address("idle"), address("idle"), address("idle")];
    await send(a);
    await send(b);
    expect(await connectionOf(b)).toBe(await connectionOf(a));
    await new Promise((r) => setTimeout(r, 400));
    expect(pool.stats("r")).toEqual({ sessions: 1, idle: 0, busy: 0 });
    await send(c);
    expect(await connectionOf(c)).not.toBe(await connectionOf(a));
    expect(pool.stats("r").sessions).toBe(2);
    await pool.closeAll();
  });

  it("holds a region off after its relay could not be reached: the next messages wait at once", async () => {
    const transport = () => createSmtpTransport({
      host: "127.0.0.1", port: env.TEST_PEERS.closed!, security: "plain", heloName: "mx.tern.example",
      connectTimeoutMs: 2000, commandTimeoutMs: 2000, dataTimeoutMs: 5000,
    });
    const pool = new SessionPool(transport, { perRegion: 2, idleMs: 1000, holdMs: 60_000 });
    const raw = new TextEncoder().encode("Subject: x\r\n\r\nx\r\n");
    const s = await pool.acquire("r");
    const [first] = await s.deliver({ envelopeFrom: "a@tern.example", recipients: ["x@example.com"], raw });
    pool.release("r", s);
    expect(first).toMatchObject({ status: "deferred" });
    const t0 = Date.now();
    const held = await pool.acquire("r");
    const [second] = await held.deliver({ envelopeFrom: "a@tern.example", recipients: ["y@example.com"], raw });
    pool.release("r", held);
    expect(second).toMatchObject({ status: "deferred", message: expect.stringContaining("not tried again for 60 s") });
    expect(Date.now() - t0).toBeLessThan(100);
    expect(pool.stats("r").sessions).toBe(1);
  });
});

describe("regions are independent", () => {
  it("one region's blackholed relay never delays another region's mail", async () => {
    // Sent through the API: each email goes to its region's queue, whose consumer hands it to
    // the region's sender object.
    const send = async (acct: TestAccount, to: string) => {
      const res = await api(acct.token, "POST", "/emails", { from: `Acme <news@${acct.domain}>`, to, subject: "Regions", text: "hello" });
      expect(res.status).toBe(200);
      return ((await res.json()) as { id: string }).id;
    };
    const delivered = async (acct: TestAccount, id: string) => ((await lastEvent(acct, id)) === "delivered" ? true : undefined);

    const stateOf = async (id: string) => (await env.DB.prepare("SELECT state FROM emails WHERE id = ?").bind(id).first<{ state: string }>())!.state;

    // The normal latency: one us-east-1 email on its own.
    let t = Date.now();
    const alone = await send(us, address("alone"));
    await waitFor("the us-east-1 email on its own", () => delivered(us, alone), 15_000);
    const normal = Date.now() - t;

    // ap-northeast-1's sender takes its email and waits on the silent relay...
    const held = await send(tokyo, address("held"));
    await waitFor("the ap-northeast-1 sender to take its email", async () => ((await stateOf(held)) === "sending" ? true : undefined), 10_000);
    // ...while us-east-1's mail goes as fast as it did alone.
    t = Date.now();
    const meanwhile = await send(us, address("meanwhile"));
    await waitFor("the us-east-1 email beside the blackholed region", () => delivered(us, meanwhile), 15_000);
    const beside = Date.now() - t;
    expect(await stateOf(held)).toBe("sending");
    expect(beside, `alone ${normal} ms, beside the blackholed region ${beside} ms`).toBeLessThan(Math.max(2 * normal, 2500));
    console.log(`us-east-1 email: ${normal} ms alone, ${beside} ms while ap-northeast-1's relay is blackholed`);

    // The blackholed region's email is not lost: it waits for a retry, saying why.
    await waitFor("the held email to be deferred", async () => ((await lastEvent(tokyo, held)) === "delivery_delayed" ? true : undefined), 15_000);
    const events = ((await (await api(tokyo.token, "GET", `/emails/${held}/events`)).json()) as { data: { type: string; data: { message?: string } }[] }).data;
    expect(events.find((e) => e.type === "delivery_delayed")!.data.message).toMatch(/timed out after 5000 ms waiting for 127\.0\.0\.1:\d+ to reply/);
    // Through each region's own sender object (created with its location hint).
    expect((await senderFor(env, "us-east-1").connections("us-east-1")).sessions).toBeGreaterThanOrEqual(1);
    expect((await senderFor(env, "ap-northeast-1").connections("ap-northeast-1")).sessions).toBeGreaterThanOrEqual(1);
  }, 40_000);
});
