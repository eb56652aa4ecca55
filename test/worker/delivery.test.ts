// Delivery to a real SMTP relay on loopback: the queue consumer, retries, bounces, failures,
// and exactly-once under queue redelivery.
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import PostalMime from "postal-mime";
import { beforeAll, describe, expect, it } from "vitest";
import { readConfig } from "../../worker/config.ts";
import { consumeSendBatch, deliverBatch, releaseClaim } from "../../worker/delivery/consumer.ts";
import { sweepDelivery } from "../../worker/delivery/cron.ts";
import { SENDER_POOL_DEFAULTS, SessionPool } from "../../worker/delivery/session-pool.ts";
import { parseReturnPath, recipientOfReturnPath } from "../../worker/sending/return-path.ts";
import { relayUrlFor, transportFor } from "../../worker/transports/select.ts";
import { createSmtpTransport } from "../../worker/transports/smtp.ts";
import type { OutboundMessage, Transport } from "../../worker/transports/transport.ts";
import { api, createAccount, type TestAccount } from "./fixtures.ts";
import { address, capturedFor, rawText } from "./peers.ts";
import { waitFor } from "./wait.ts";

let acct: TestAccount;
beforeAll(async () => {
  acct = await createAccount();
});

const captured = capturedFor;
const unique = (local: string) => address(local, "example.com");

async function get(id: string, account: TestAccount = acct) {
  return (await (await api(account.token, "GET", `/emails/${id}`)).json()) as { last_event: string };
}
async function events(id: string, account: TestAccount = acct) {
  return ((await (await api(account.token, "GET", `/emails/${id}/events`)).json()) as { data: { type: string; data: Record<string, unknown> }[] }).data;
}

/** Records an email the way the API does but keeps it away from the background consumer
 * (scheduled far ahead), then makes it due so a test can drive the consumer itself. */
async function recordedEmail(to: string[], extra: Record<string, unknown> = {}, account: TestAccount = acct): Promise<string> {
  const res = await api(account.token, "POST", "/emails", { from: `Acme <news@${account.domain}>`, to, subject: "Driven", text: "hello", scheduled_at: "in 20 days", ...extra });
  expect(res.status).toBe(200);
  const { id } = (await res.json()) as { id: string };
  await env.DB.prepare("UPDATE emails SET state = 'queued', next_attempt_at = ? WHERE id = ?").bind(Date.now(), id).run();
  return id;
}

function peerTransport(peer: string): () => Transport {
  return () => createSmtpTransport({
    host: "127.0.0.1", port: env.TEST_PEERS[peer]!, security: peer === "plain" ? "plain" : "starttls", heloName: "mx.tern.example",
    connectTimeoutMs: 2000, commandTimeoutMs: 2000, dataTimeoutMs: 5000,
  });
}

/** What a test does around each message handed to the loopback relay: made once per connection. */
interface RelayHooks {
  before?: (m: OutboundMessage) => unknown;
  after?: (m: OutboundMessage) => unknown;
}

/** The loopback relay, with a test's hooks run as each message is handed over and once its
 * replies are back. */
function watchedRelay(hooksFor: () => RelayHooks): () => Transport {
  return () => {
    const inner = peerTransport("plain")();
    return {
      async open() {
        const session = await inner.open();
        const hooks = hooksFor();
        return {
          async deliver(m) {
            await hooks.before?.(m);
            const replies = await session.deliver(m);
            await hooks.after?.(m);
            return replies;
          },
          close: () => session.close(),
        };
      },
    };
  };
}

async function consume(ids: string[], peer = "plain") {
  const batch = createMessageBatch("tern-send", ids.map((emailId, i) => ({ id: `m${i}`, timestamp: new Date(), attempts: 1, body: { emailId } })));
  const ctx = createExecutionContext();
  await consumeSendBatch(batch as MessageBatch<{ emailId: string }>, env, { transportFor: peerTransport(peer) });
  return getQueueResult(batch, ctx);
}

describe("delivery through the relay", () => {
  it("the background consumer delivers an accepted email to the relay, one envelope per recipient, Bcc only in the envelope", async () => {
    const to = unique("to"), cc = unique("cc"), bcc = unique("bcc");
    const res = await api(acct.token, "POST", "/emails", { from: `Acme <news@${acct.domain}>`, to, cc, bcc, subject: "Relay test", html: "<p>hi</p>" });
    const { id } = (await res.json()) as { id: string };
    await waitFor("delivered", async () => ((await get(id)).last_event === "delivered" ? true : undefined));
    const raws = new Set<string>();
    for (const r of [to, cc, bcc]) {
      const got = await captured(r);
      expect(got).toHaveLength(1);
      const msg = got[0]!;
      // Each recipient's message has its own envelope: its own return path (VERP) on
      // send.<domain>, which names the email and that recipient alone.
      expect(msg.recipients).toEqual([r]);
      expect(msg.envelopeFrom).toMatch(new RegExp(`^[0-9a-f]{32}-[0-9a-f]{10}-[0-9a-f]{12}@send\\.${acct.domain.replace(/\./g, "\\.")}$`));
      const rp = await parseReturnPath(env.MASTER_KEY, msg.envelopeFrom);
      expect(rp?.emailId).toBe(id);
      expect(await recipientOfReturnPath(env.MASTER_KEY, rp!, [to, cc, bcc])).toBe(r);
      expect(msg.ehloName).toBe("tern.localhost");
      raws.add(rawText(msg));
    }
    // The same signed message for all three (signed once).
    expect(raws.size).toBe(1);
    const raw = [...raws][0]!;
    expect(raw).toMatch(/^Subject: Relay test\r$/m);
    expect(raw).toContain(cc);
    expect(raw).not.toContain(bcc);
    expect(raw).not.toMatch(/^bcc:/im);
    expect((await events(id)).map((e) => e.type)).toEqual(["queued", "sent", "delivered"]);
  });

  it("a queue message delivered twice sends the email once", async () => {
    const to = unique("twice");
    const id = await recordedEmail([to]);
    const result = await consume([id, id]);
    expect(result.retryMessages).toEqual([]);
    expect(await consume([id])).toMatchObject({ retryMessages: [] });
    expect(await captured(to)).toHaveLength(1);
    expect((await events(id)).filter((e) => e.type === "sent")).toHaveLength(1);
  });

  it("a D1 failure while recording a delivery never sends the email again", async () => {
    // The real D1, with its next `failures` batch calls failing: the settlement after the relay
    // took the mail is the consumer's only batch call.
    const flaky = (failures: number): Env => {
      let left = failures;
      const db = new Proxy(env.DB, {
        get(target, prop) {
          if (prop === "batch") {
            return (...args: unknown[]) => (left-- > 0 ? Promise.reject(new Error("D1_ERROR: injected")) : (target.batch as (...a: unknown[]) => unknown).apply(target, args));
          }
          const v = Reflect.get(target, prop);
          return typeof v === "function" ? v.bind(target) : v;
        },
      });
      return { ...env, DB: db };
    };
    const consumeWith = async (e: Env, id: string) => {
      const batch = createMessageBatch("tern-send", [{ id: "m0", timestamp: new Date(), attempts: 1, body: { emailId: id } }]);
      const ctx = createExecutionContext();
      await consumeSendBatch(batch as MessageBatch<{ emailId: string }>, e, { transportFor: peerTransport("plain") });
      return getQueueResult(batch, ctx);
    };

    // One failure: the write is retried and the email settles normally.
    const once = unique("flaky-once");
    const a = await recordedEmail([once]);
    expect(await consumeWith(flaky(1), a)).toMatchObject({ retryMessages: [] });
    expect(await captured(once)).toHaveLength(1);
    expect((await events(a)).filter((e) => e.type === "sent")).toHaveLength(1);

    // D1 down for good: nothing is handed back for a quick retry; the row waits in `sending` for
    // its lease (10 minutes), and a redelivered queue message does not send it again.
    const down = unique("flaky-down");
    const b = await recordedEmail([down]);
    expect(await consumeWith(flaky(100), b)).toMatchObject({ retryMessages: [] });
    const row = await env.DB.prepare("SELECT state FROM emails WHERE id = ?").bind(b).first<{ state: string }>();
    expect(row!.state).toBe("sending");
    await consumeWith(env, b);
    expect(await captured(down)).toHaveLength(1);
  });

  it("each message's reply is recorded as soon as it arrives, before the next message leaves", async () => {
    // One email with three recipients among single-recipient ones: enough for each connection to
    // take its next email early and mark it in flight with the current one's settlement.
    const rs = [unique("fine"), unique("fine"), unique("fine")];
    const emailOf = new Map<string, string>();
    const multi = await recordedEmail(rs);
    for (const r of rs) emailOf.set(r, multi);
    for (let i = 0; i < 14; i++) {
      const r = unique("fine");
      emailOf.set(r, await recordedEmail([r]));
    }
    const seen: { sending: string; progress: { inFlight: string; results: { recipient: string; status: string }[] } | null }[] = [];
    const watching = watchedRelay(() => ({
      async before(m) {
        const row = await env.DB.prepare("SELECT attempt_json FROM emails WHERE id = ?").bind(emailOf.get(m.recipients[0]!)).first<{ attempt_json: string | null }>();
        seen.push({ sending: m.recipients[0]!, progress: row?.attempt_json ? JSON.parse(row.attempt_json) : null });
      },
    }));
    // The real D1, counting the progress writes made on their own (AttemptLog.record, guarded
    // by `lease_until in (...)`; a mark in a settlement's batch is guarded by one lease).
    let ownWrites = 0;
    const db = new Proxy(env.DB, {
      get(target, prop) {
        if (prop === "prepare") {
          return (query: string) => {
            if (/^update "emails" set "lease_until" = \?, "attempt_json" = \? where .* in \(/.test(query)) ownWrites++;
            return target.prepare(query);
          };
        }
        const v = Reflect.get(target, prop);
        return typeof v === "function" ? v.bind(target) : v;
      },
    });
    const ids = [...new Set(emailOf.values())];
    const batch = createMessageBatch("tern-send", ids.map((emailId, i) => ({ id: `m${i}`, timestamp: new Date(), attempts: 1, body: { emailId } })));
    await consumeSendBatch(batch as MessageBatch<{ emailId: string }>, { ...env, DB: db }, { transportFor: watching });
    // Two for the replies before the three-recipient email's last message, and the first marks
    // of each connection's first email and of the ones it takes once the queue runs low (two
    // per connection at most); the other emails' first marks rode along with a settlement.
    expect(ownWrites).toBeGreaterThanOrEqual(2);
    expect(ownWrites).toBeLessThanOrEqual(2 + 2 * SENDER_POOL_DEFAULTS.perRegion);
    expect(seen.map((s) => s.sending).sort()).toEqual([...emailOf.keys()].sort());
    // On its way out, every message's recipient is marked in flight and every earlier reply of
    // its email is already in D1.
    for (const s of seen) expect(s.progress?.inFlight, s.sending).toBe(s.sending);
    const ofMulti = seen.filter((s) => emailOf.get(s.sending) === multi);
    expect(ofMulti.map((s) => s.sending)).toEqual(rs);
    for (const [i, s] of ofMulti.entries()) expect(s.progress!.results.map((r) => [r.recipient, r.status])).toEqual(rs.slice(0, i).map((r) => [r, "accepted"]));
    for (const id of ids) expect(await env.DB.prepare("SELECT state, attempt_json FROM emails WHERE id = ?").bind(id).first()).toEqual({ state: "done", attempt_json: null });
  });

  it("a lease that ends with a message in flight records outcome_unknown and sends again only that message", async () => {
    const [answered, inFlight, untouched] = [unique("fine"), unique("fine"), unique("fine")];
    const id = await recordedEmail([answered, inFlight, untouched]);
    // What a consumer killed right after the relay's 250 for `inFlight` leaves behind: the first
    // reply recorded, the second message marked in flight, the lease run out.
    const progress = { inFlight, results: [{ recipient: answered, status: "accepted", code: 250, message: "250 OK", final: true }] };
    await env.DB.prepare("UPDATE emails SET state = 'sending', lease_until = ?, attempt_json = ? WHERE id = ?").bind(Date.now() - 1, JSON.stringify(progress), id).run();
    const swept = await sweepDelivery(env);
    expect(swept.leasesExpired).toBeGreaterThanOrEqual(1);
    // The unknown outcome is on the email, not a webhook event (see README, "Delivery guarantees").
    const unknown = (await events(id)).filter((e) => e.type === "outcome_unknown");
    expect(unknown).toHaveLength(1);
    expect(unknown[0]!.data).toMatchObject({ recipients: [inFlight], message: expect.stringMatching(/may receive it twice/) });
    expect(await env.DB.prepare("SELECT count(*) AS n FROM webhook_events WHERE type LIKE '%unknown%'").first<{ n: number }>()).toEqual({ n: 0 });
    // The cron enqueued it; the next attempt sends to the one in flight and the untouched one.
    await waitFor("delivered again", async () => ((await get(id)).last_event === "delivered" ? true : undefined));
    expect(await captured(answered)).toHaveLength(0);
    expect(await captured(inFlight)).toHaveLength(1);
    expect(await captured(untouched)).toHaveLength(1);
    const evs = await events(id);
    expect(evs.map((e) => e.type)).toEqual(["scheduled", "outcome_unknown", "sent", "delivered"]);
    expect((evs[2]!.data.recipients as string[]).sort()).toEqual([answered, inFlight, untouched].sort());
    // A second sweep finds nothing more to say.
    await sweepDelivery(env);
    expect((await events(id)).filter((e) => e.type === "outcome_unknown")).toHaveLength(1);
  });

  it("a connection carries its next message only once the last one's settlement is in D1, across batches", async () => {
    // Two batches sharing one sender's pool of a single connection, as two queue batches share a
    // region's sender: the second batch's emails wait for the connection, which is given back only
    // after the first batch's email has its settlement written (issue 20's window: one message).
    const rs = Array.from({ length: 4 }, () => unique("fine"));
    const emailOf = new Map<string, string>();
    for (const r of rs) emailOf.set(r, await recordedEmail([r]));
    const unrecorded: string[] = [];
    let sent = 0;
    const watching = watchedRelay(() => {
      let last: string | undefined; // this connection's previous message
      return {
        async before(m) {
          if (last !== undefined) {
            const prev = await env.DB.prepare("SELECT state, attempt_json FROM emails WHERE id = ?").bind(emailOf.get(last)).first<{ state: string; attempt_json: string | null }>();
            const results = prev?.attempt_json ? (JSON.parse(prev.attempt_json) as { results: { recipient: string }[] }).results : [];
            if (prev?.state === "sending" && !results.some((r) => r.recipient === last)) unrecorded.push(last);
          }
          last = m.recipients[0]!;
          sent++;
        },
      };
    });
    // Settlements take a while to commit (a slow D1): time for the other batch to grab the
    // connection if it were given back before its last reply was written.
    const slow = new Proxy(env.DB, {
      get(target, prop) {
        if (prop === "batch") return async (s: D1PreparedStatement[]) => (await new Promise((r) => setTimeout(r, 50)), target.batch(s));
        const v = Reflect.get(target, prop);
        return typeof v === "function" ? v.bind(target) : v;
      },
    });
    const pool = new SessionPool(watching, { perRegion: 1, idleMs: 1000, holdMs: 1000 });
    try {
      const e = { ...env, DB: slow };
      const [a, b] = await Promise.all([deliverBatch(e, [emailOf.get(rs[0]!)!, emailOf.get(rs[1]!)!], pool), deliverBatch(e, [emailOf.get(rs[2]!)!, emailOf.get(rs[3]!)!], pool)]);
      expect([...a.values(), ...b.values()]).toEqual([null, null, null, null]);
    } finally {
      await pool.closeAll();
    }
    expect(sent).toBe(4);
    expect(unrecorded).toEqual([]);
    expect(pool.stats("us-east-1").sessions).toBe(1);
  });

  it("messages of one batch share a few SMTP connections, not one each", async () => {
    const recipients = Array.from({ length: 9 }, () => unique("conn"));
    const ids = [];
    for (const r of recipients) ids.push(await recordedEmail([r]));
    await consume(ids);
    const conns = new Set<string>();
    for (const r of recipients) {
      const [m] = await captured(r);
      conns.add(m!.connectionId);
    }
    expect(conns.size).toBeLessThanOrEqual(SENDER_POOL_DEFAULTS.perRegion);
    for (const r of recipients) expect(await captured(r)).toHaveLength(1);
  });

  it("a large message reaches the relay byte for byte without ever being one buffer", async () => {
    // Issue 20, item 3: the consumer once held the built message and a signed copy of it at
    // once; now the transport is handed pieces made as they are written.
    const attachment = new Uint8Array(3 * 1024 * 1024 + 7).map((_, i) => (i * 7919 + (i >> 11)) % 256);
    let binary = "";
    for (let i = 0; i < attachment.length; i += 0x8000) binary += String.fromCharCode(...attachment.subarray(i, i + 0x8000));
    const recipients = [unique("big"), unique("big")];
    const id = await recordedEmail(recipients, { html: "<p>big</p>", attachments: [{ filename: "big.bin", content: btoa(binary) }] });
    const handed: { chunked: boolean; largest: number; total: number; length: number }[] = [];
    const recording = watchedRelay(() => ({
      async before(m) {
        let largest = 0, total = 0;
        for await (const c of m.raw instanceof Uint8Array ? [m.raw] : m.raw.chunks()) {
          largest = Math.max(largest, c.length);
          total += c.length;
        }
        handed.push({ chunked: !(m.raw instanceof Uint8Array), largest, total, length: m.raw.length });
      },
    }));
    const batch = createMessageBatch("tern-send", [{ id: "m0", timestamp: new Date(), attempts: 1, body: { emailId: id } }]);
    await consumeSendBatch(batch as MessageBatch<{ emailId: string }>, env, { transportFor: recording });
    expect(handed).toHaveLength(2);
    for (const h of handed) {
      expect(h.chunked).toBe(true);
      expect(h.total).toBe(h.length);
      expect(h.length).toBeGreaterThan(4 * 1024 * 1024);
      expect(h.largest).toBeLessThanOrEqual(128 * 1024);
    }
    const raws = await Promise.all(recipients.map(async (r) => rawText((await captured(r))[0]!)));
    expect(raws[0]).toBe(raws[1]);
    expect(raws[0]!.length).toBe(handed[0]!.length);
    const parsed = await PostalMime.parse(raws[0]!);
    const got = parsed.attachments[0]!.content as ArrayBuffer;
    expect(new Uint8Array(got)).toEqual(attachment);
    expect((await get(id)).last_event).toBe("delivered");
  });

  it("an email whose stored fields cannot make a message fails at once with the reason, never retried", async () => {
    const to = unique("unbuildable");
    const id = await recordedEmail([to]);
    // A subject no send could store today (the API refuses it), as an older row or a bug could leave.
    await env.DB.prepare("UPDATE emails SET subject = ? WHERE id = ?").bind("Hi \u0000 there", id).run();
    const result = await consume([id]);
    expect(result.explicitAcks).toContain("m0");
    const evs = await events(id);
    const failed = evs.find((e) => e.type === "failed");
    expect(failed?.data).toMatchObject({ failed: { reason: expect.stringContaining("could not build this message") } });
    expect((await get(id)).last_event).toBe("failed");
    expect(await captured(to)).toHaveLength(0);
  });

  it("a 5xx from the relay bounces the recipient; the others are delivered", async () => {
    const ok = unique("fine"), bad = unique("reject");
    const id = await recordedEmail([ok, bad]);
    await consume([id]);
    const evs = await events(id);
    // The test relay is declared final (RELAY_FINAL), so acceptance is delivery.
    expect(evs.map((e) => e.type)).toEqual(["scheduled", "sent", "delivered", "bounced"]);
    expect(evs[3]!.data).toMatchObject({ recipients: [bad], bounce: { type: "Permanent", subType: "NoEmail" } });
    expect((await captured(ok))[0]!.recipients).toEqual([ok]);
    expect((await get(id)).last_event).toBe("bounced");
  });

  it("a 4xx is retried with backoff, only for the deferred recipient, and delivered on a later attempt", async () => {
    const ok = unique("fine"), later = unique("tempfail");
    const id = await recordedEmail([ok, later]);
    const before = Date.now();
    const first = await consume([id]);
    expect(first.retryMessages).toEqual([{ msgId: "m0" }]);
    expect((await get(id)).last_event).toBe("delivery_delayed");
    const row = await env.DB.prepare("SELECT state, pending_json, attempts, next_attempt_at FROM emails WHERE id = ?").bind(id).first<{ state: string; pending_json: string; attempts: number; next_attempt_at: number }>();
    expect(row).toMatchObject({ state: "queued", pending_json: JSON.stringify([later]), attempts: 1 });
    // RETRY_SCHEDULE is "1,1,1" in the tests: the first retry is due a second later.
    expect(row!.next_attempt_at - before).toBeGreaterThanOrEqual(1000);
    expect(row!.next_attempt_at - Date.now()).toBeLessThanOrEqual(1000);
    // The relay recovers: the next attempt only carries the deferred recipient.
    await env.DB.prepare("UPDATE emails SET next_attempt_at = ?, pending_json = ? WHERE id = ?").bind(Date.now(), JSON.stringify([later.replace("tempfail", "recovered")]), id).run();
    const second = await consume([id]);
    expect(second.retryMessages).toEqual([]);
    expect((await get(id)).last_event).toBe("delivered");
    expect((await captured(ok))).toHaveLength(1);
  });

  it("retries running out fail the email with the reason", async () => {
    const to = unique("tempfail");
    const id = await recordedEmail([to]);
    for (let attempt = 1; attempt <= 4; attempt++) {
      await consume([id]);
      await env.DB.prepare("UPDATE emails SET next_attempt_at = ? WHERE id = ? AND state = 'queued'").bind(Date.now(), id).run();
    }
    const evs = await events(id);
    expect(evs.map((e) => e.type)).toEqual(["scheduled", "delivery_delayed", "failed"]);
    expect(JSON.stringify(evs[2]!.data)).toMatch(/451/);
    expect((await get(id)).last_event).toBe("failed");
  });

  it("an unexpected error counts as an attempt: retried on the schedule, then failed with its reason", async () => {
    const to = unique("unexpected");
    const id = await recordedEmail([to]);
    // Not a delivery problem a transport reports: the transport itself cannot be made.
    const broken = () => { throw new Error("the relay setting is unusable"); };
    const retries: unknown[] = [];
    for (let attempt = 1; attempt <= 4; attempt++) {
      const batch = createMessageBatch("tern-send", [{ id: "m0", timestamp: new Date(), attempts: attempt, body: { emailId: id } }]);
      const ctx = createExecutionContext();
      await consumeSendBatch(batch as MessageBatch<{ emailId: string }>, env, { transportFor: broken });
      retries.push(...(await getQueueResult(batch, ctx)).retryMessages);
      const row = await env.DB.prepare("SELECT state, attempts, next_attempt_at FROM emails WHERE id = ?").bind(id).first<{ state: string; attempts: number; next_attempt_at: number | null }>();
      expect(row).toMatchObject({ state: attempt < 4 ? "queued" : "done", attempts: attempt });
      // RETRY_SCHEDULE is "1,1,1" in the tests: each retry is due a second later, then no more.
      if (attempt < 4) expect(row!.next_attempt_at! - Date.now()).toBeLessThanOrEqual(1000);
      await env.DB.prepare("UPDATE emails SET next_attempt_at = ? WHERE id = ? AND state = 'queued'").bind(Date.now(), id).run();
    }
    expect(retries).toHaveLength(3);
    const evs = await events(id);
    expect(evs.map((e) => e.type)).toEqual(["scheduled", "delivery_delayed", "failed"]);
    expect(evs[1]!.data).toMatchObject({ recipients: [to], message: expect.stringContaining("the relay setting is unusable") });
    expect(evs[2]!.data).toMatchObject({ recipients: [to], failed: { reason: expect.stringMatching(/retried 4 times.*unexpected error.*the relay setting is unusable/) } });
    expect((await get(id)).last_event).toBe("failed");
    expect(await captured(to)).toHaveLength(0);
  });

  it("a relay that cannot be reached defers, it does not lose the email", async () => {
    const id = await recordedEmail([unique("nobody")]);
    const result = await consume([id], "closed");
    expect(result.retryMessages).toHaveLength(1);
    const evs = await events(id);
    expect(evs.at(-1)!.type).toBe("delivery_delayed");
    expect(JSON.stringify(evs.at(-1)!.data)).toMatch(/connect|refused/i);
  });

  it("STARTTLS is required: a relay that does not offer it gets nothing", async () => {
    const to = unique("downgrade");
    const id = await recordedEmail([to]);
    await consume([id], "nostarttls");
    expect(await captured(to)).toHaveLength(0);
    expect((await get(id)).last_event).toBe("delivery_delayed");
  });
});

describe("a settlement written after its lease was lost", () => {
  // The cron hands an email back once its lease ends and another consumer settles it; the first
  // consumer's settlement comes after. Its UPDATE is guarded by the lease: its events, webhooks,
  // counts and suppressions must be too, or they are written twice.
  const state = async (id: string) => (await env.DB.prepare("SELECT state FROM emails WHERE id = ?").bind(id).first<{ state: string }>())!.state;

  /** The lease of `id` runs out (its end moved into the past), the cron hands it back and its
   * next owner settles it: this test's own consumer, or the background one the sweep woke. */
  async function takenOver(id: string) {
    await env.DB.prepare("UPDATE emails SET lease_until = ? WHERE id = ? AND state = 'sending'").bind(Date.now() - 1, id).run();
    expect((await sweepDelivery(env)).leasesExpired).toBeGreaterThanOrEqual(1);
    await consume([id]);
    await waitFor("settled by its next owner", async () => ((await state(id)) === "done" ? true : undefined));
  }

  /** A relay whose message to `at` reaches the relay, then the email is taken over before its
   * reply comes back to the first consumer. */
  function takingOver(at: string, take: () => Promise<void>): () => Transport {
    return watchedRelay(() => ({ after: (m) => (m.recipients[0] === at ? take() : undefined) }));
  }

  async function outbox(account: TestAccount, id: string): Promise<string[]> {
    const rows = await env.DB.prepare("SELECT type FROM webhook_events WHERE account_id = ? AND payload_json LIKE ? ORDER BY type").bind(account.accountId, `%${id}%`).all<{ type: string }>();
    return rows.results.map((r) => r.type);
  }
  async function counted(account: TestAccount) {
    return env.DB.prepare("SELECT sum(sent) AS sent, sum(delivered) AS delivered, sum(bounced) AS bounced FROM metric_rollups WHERE account_id = ? AND span = 1").bind(account.accountId).first();
  }

  it("through the relay: only the next owner's events, webhooks, counts and suppression are written", async () => {
    const account = await createAccount({ listening: true });
    const [fine, reject] = [unique("fine"), unique("reject")];
    const id = await recordedEmail([fine, reject], {}, account);
    const suppressedRow = () => env.DB.prepare("SELECT email_id FROM suppressions WHERE account_id = ? AND email = ?").bind(account.accountId, reject).first();
    const take = async () => {
      await takenOver(id);
      // The next owner bounced `reject` too and suppressed it: removed so that a suppression
      // written by the first consumer's settlement shows.
      expect(await suppressedRow()).toEqual({ email_id: id });
      await env.DB.prepare("DELETE FROM suppressions WHERE account_id = ? AND email = ?").bind(account.accountId, reject).run();
    };
    const batch = createMessageBatch("tern-send", [{ id: "m0", timestamp: new Date(), attempts: 1, body: { emailId: id } }]);
    const ctx = createExecutionContext();
    await consumeSendBatch(batch as MessageBatch<{ emailId: string }>, env, { transportFor: takingOver(reject, take) });
    expect(await getQueueResult(batch, ctx)).toMatchObject({ retryMessages: [] });

    // `fine`'s reply was recorded before the lease ran out: the next owner sent only to `reject`.
    expect(await captured(fine)).toHaveLength(1);
    expect((await events(id, account)).map((e) => e.type)).toEqual(["scheduled", "outcome_unknown", "sent", "delivered", "bounced"]);
    expect((await outbox(account, id)).filter((t) => t !== "email.scheduled")).toEqual(["email.bounced", "email.delivered", "email.sent"]);
    expect(await counted(account)).toEqual({ sent: 1, delivered: 1, bounced: 1 });
    expect(await suppressedRow()).toBeNull();
    expect(await get(id, account)).toMatchObject({ last_event: "bounced" });
  });

  it("simulated: the lost email's share of the merged settlement is not written, the others' is", async () => {
    const account = await createAccount({ listening: true });
    const real = unique("fine");
    const sim = (local: string) => `${local}+${crypto.randomUUID().slice(0, 8)}@simulator.tern.test`;
    const [lost, kept] = [sim("delivered"), sim("delivered")];
    const realId = await recordedEmail([real], {}, account);
    const lostId = await recordedEmail([lost], {}, account);
    const keptId = await recordedEmail([kept], {}, account);
    // The simulated outcomes are written together once the real email is done: the lost one is
    // taken over while the real email's message is at the relay.
    const batch = createMessageBatch("tern-send", [realId, lostId, keptId].map((emailId, i) => ({ id: `m${i}`, timestamp: new Date(), attempts: 1, body: { emailId } })));
    const ctx = createExecutionContext();
    await consumeSendBatch(batch as MessageBatch<{ emailId: string }>, env, { transportFor: takingOver(real, () => takenOver(lostId)) });
    expect(await getQueueResult(batch, ctx)).toMatchObject({ retryMessages: [] });

    for (const id of [realId, lostId, keptId]) {
      expect(await state(id)).toBe("done");
      expect((await events(id, account)).map((e) => e.type), id).toEqual(["scheduled", "sent", "delivered"]);
      expect((await outbox(account, id)).filter((t) => t !== "email.scheduled"), id).toEqual(["email.delivered", "email.sent"]);
    }
    expect(await counted(account)).toEqual({ sent: 3, delivered: 3, bounced: 0 });
  });
});

describe("a claim handed back after a failed write", () => {
  const row = (id: string) => env.DB.prepare("SELECT state, lease_until FROM emails WHERE id = ?").bind(id).first<{ state: string; lease_until: number | null }>();

  it("is handed back only while this consumer still holds it, never from under its next owner", async () => {
    const account = await createAccount();
    const real = unique("fine");
    const sim = `delivered+${crypto.randomUUID().slice(0, 8)}@simulator.tern.test`;
    const realId = await recordedEmail([real], {}, account);
    const simId = await recordedEmail([sim], {}, account);
    // While the real email's message is at the relay, the simulated one's lease runs out and
    // another consumer claims it (mid-send, its own lease); then D1 refuses the first consumer's
    // write of the simulated outcomes, and the first consumer hands back what it claimed.
    const theirs = Date.now() + 3_600_000;
    let armed = false;
    const db = new Proxy(env.DB, {
      get(target, name) {
        if (name === "batch") {
          return async (statements: D1PreparedStatement[]) => {
            if (armed && (await row(realId))!.state === "done") throw new Error("D1_ERROR: the database is unavailable");
            return target.batch(statements);
          };
        }
        const value = Reflect.get(target, name) as unknown;
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const transport = watchedRelay(() => ({
      async after() {
        await env.DB.prepare("UPDATE emails SET lease_until = ? WHERE id = ? AND state = 'sending'").bind(theirs, simId).run();
        armed = true;
      },
    }));
    const batch = createMessageBatch("tern-send", [realId, simId].map((emailId, i) => ({ id: `m${i}`, timestamp: new Date(), attempts: 1, body: { emailId } })));
    const ctx = createExecutionContext();
    await consumeSendBatch(batch as MessageBatch<{ emailId: string }>, { ...env, DB: db } as Env, { transportFor: transport });
    // The simulated email's message is retried (its redelivery will find it claimed and do
    // nothing); the email itself stays with its next owner.
    expect((await getQueueResult(batch, ctx)).retryMessages).toEqual([expect.objectContaining({ msgId: "m1" })]);
    expect(await row(realId)).toMatchObject({ state: "done" });
    expect(await row(simId)).toEqual({ state: "sending", lease_until: theirs });
  });

  it("goes back to the queue under this consumer's own lease", async () => {
    const account = await createAccount();
    const id = await recordedEmail([unique("back")], {}, account);
    await env.DB.prepare("UPDATE emails SET state = 'sending', lease_until = 1000 WHERE id = ?").bind(id).run();
    await releaseClaim(env.DB, id, [999, 2000]);
    expect(await row(id)).toEqual({ state: "sending", lease_until: 1000 });
    await releaseClaim(env.DB, id, [999, 1000]);
    expect(await row(id)).toEqual({ state: "queued", lease_until: null });
  });
});

describe("regions", () => {
  it("a region's own relay is used when configured, otherwise RELAY_URL", async () => {
    const withEu = { ...env, RELAY_URL: "smtp://default.example:587", RELAY_URL_EU_WEST_1: "smtps://eu.example:465" } as Env;
    const config = readConfig(withEu);
    expect(relayUrlFor(withEu, config, "eu-west-1")).toBe("smtps://eu.example:465");
    expect(relayUrlFor(withEu, config, "us-east-1")).toBe("smtp://default.example:587");
  });
  it("with no relay configured, mail waits (deferred) instead of being lost", async () => {
    const bare = { ...env, RELAY_URL: "" } as Env;
    const session = await transportFor(bare, readConfig(bare), "sa-east-1").open();
    const [r] = await session.deliver({ envelopeFrom: "a@b.test", recipients: ["x@example.com"], raw: new Uint8Array() });
    expect(r).toMatchObject({ status: "deferred", message: expect.stringMatching(/No relay is configured for region sa-east-1/) });
  });
});
