// The `cloudflare` transport (worker/transports/cloudflare.ts) against Cloudflare Email
// Sending as wrangler simulates it locally (miniflare's send_email binding: it parses the raw
// message, requires a Message-ID and an envelope sender equal to the From address, refuses a
// Received header and recipients outside allowed_destination_addresses, and answers a message
// id). A region picks it with TRANSPORT_<REGION> = "cloudflare".
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { readConfig } from "../../worker/config.ts";
import { consumeSendBatch } from "../../worker/delivery/consumer.ts";
import { createCloudflareTransport, fromAddress, outcomeOf } from "../../worker/transports/cloudflare.ts";
import { transportFor } from "../../worker/transports/select.ts";
import { api, createAccount, type TestAccount } from "./fixtures.ts";

const CRLF = "\r\n";
function message(headers: string[], body = "hello"): Uint8Array {
  return new TextEncoder().encode([...headers, "", body, ""].join(CRLF));
}
const plain = (from: string, extra: string[] = []) =>
  message([`From: ${from}`, "To: someone@cf.example", "Subject: cf", `Message-ID: <${crypto.randomUUID()}@d.example>`, "Date: Tue, 24 Nov 2026 21:00:00 +0000", "MIME-Version: 1.0", "Content-Type: text/plain; charset=utf-8", ...extra]);

describe("the From address Cloudflare takes as the envelope sender", () => {
  it.each([
    ["Acme <news@d.example>", "news@d.example"],
    ["news@d.example", "news@d.example"],
    ['"Smith, <Jo> @ Acme" <jo@d.example>', "jo@d.example"],
    ["=?utf-8?q?J=C3=B6rg?= <jorg@d.example>", "jorg@d.example"],
    ["a@d.example, b@d.example", undefined],
    ["Undisclosed", undefined],
  ])("%s -> %s", (from, expected) => {
    expect(fromAddress(plain(from))).toBe(expected);
  });
  it("reads a folded From field and ignores one in the body", () => {
    expect(fromAddress(message(["Subject: x", "From: Acme", " <folded@d.example>"]))).toBe("folded@d.example");
    expect(fromAddress(message(["Subject: x"], "From: body@d.example"))).toBeUndefined();
  });
});

describe("Cloudflare's error codes as tern's outcomes", () => {
  const coded = (code: string) => Object.assign(new Error("refused"), { code });
  it.each([
    ["E_RECIPIENT_SUPPRESSED", "rejected", "5.1.1"],
    ["E_DELIVERY_FAILED", "rejected", "5.0.0"],
    ["E_CONTENT_TOO_LARGE", "rejected", "5.3.4"],
    ["E_HEADER_NOT_ALLOWED", "rejected", "5.6.0"],
    ["E_SENDER_NOT_VERIFIED", "deferred", undefined],
    ["E_SENDER_DOMAIN_NOT_AVAILABLE", "deferred", undefined],
    ["E_RATE_LIMIT_EXCEEDED", "deferred", "4.7.0"],
    ["E_DAILY_LIMIT_EXCEEDED", "deferred", "4.7.0"],
    ["E_INTERNAL_SERVER_ERROR", "deferred", "4.3.0"],
    ["E_SOMETHING_NEW", "deferred", undefined],
  ])("%s -> %s", (code, status, enhanced) => {
    const r = outcomeOf("r@cf.example", coded(code));
    expect(r).toMatchObject({ recipient: "r@cf.example", status });
    expect(r.enhancedCode).toBe(enhanced);
    expect(r.message).toContain(code);
  });
});

describe("through wrangler's local send_email binding", () => {
  it("sends tern's raw message once per recipient with the From address as envelope sender", async () => {
    const session = await createCloudflareTransport(env.EMAIL).open();
    const results = await session.deliver({ envelopeFrom: "0123-abc@send.d.example", recipients: ["one@cf.example", "two@cf.example"], raw: plain("Acme <news@d.example>") });
    expect(results).toEqual([
      { recipient: "one@cf.example", status: "accepted", code: 250, final: false, message: expect.stringMatching(/^Accepted by Cloudflare Email Sending as .+/) },
      { recipient: "two@cf.example", status: "accepted", code: 250, final: false, message: expect.stringMatching(/^Accepted by Cloudflare Email Sending as .+/) },
    ]);
    await session.close();
  });

  it("a recipient the binding does not allow is deferred (a configuration fault); the others go", async () => {
    const session = await createCloudflareTransport(env.EMAIL_RESTRICTED).open();
    const [allowed, other] = await session.deliver({ envelopeFrom: "x@send.d.example", recipients: ["allowed@cf.example", "other@cf.example"], raw: plain("news@d.example") });
    expect(allowed).toMatchObject({ status: "accepted" });
    expect(other).toMatchObject({ status: "deferred", message: expect.stringContaining("not allowed") });
  });

  it("a message the service refuses is kept (deferred with its reason); one without a single From is rejected", async () => {
    const session = await createCloudflareTransport(env.EMAIL).open();
    const [received] = await session.deliver({ envelopeFrom: "x@send.d.example", recipients: ["one@cf.example"], raw: plain("news@d.example", ["Received: from elsewhere"]) });
    expect(received).toMatchObject({ status: "deferred", message: expect.stringContaining("invalid headers set") });
    const [noFrom] = await session.deliver({ envelopeFrom: "x@send.d.example", recipients: ["one@cf.example"], raw: message(["Subject: none", `Message-ID: <${crypto.randomUUID()}@d.example>`]) });
    expect(noFrom).toMatchObject({ status: "rejected", enhancedCode: "5.6.0" });
  });
});

describe("a region that sends through Cloudflare", () => {
  let acct: TestAccount;
  beforeAll(async () => {
    acct = await createAccount({ region: "sa-east-1" });
  });

  it("TRANSPORT_<REGION> picks it; without the binding, mail waits and says how to fix it", async () => {
    const cf = { ...env, TRANSPORT_SA_EAST_1: "cloudflare" } as Env;
    const session = await transportFor(cf, readConfig(cf), "sa-east-1").open();
    const [r] = await session.deliver({ envelopeFrom: "x@send.d.example", recipients: ["one@cf.example"], raw: plain("news@d.example") });
    expect(r).toMatchObject({ status: "accepted", message: expect.stringContaining("Cloudflare Email Sending") });
    const bare = { ...cf, EMAIL: undefined } as unknown as Env;
    const waiting = await transportFor(bare, readConfig(bare), "sa-east-1").open();
    const [w] = await waiting.deliver({ envelopeFrom: "x@send.d.example", recipients: ["one@cf.example"], raw: plain("news@d.example") });
    expect(w).toMatchObject({ status: "deferred", message: expect.stringContaining('add [[send_email]] name = "EMAIL"') });
    const typo = { ...env, TRANSPORT_SA_EAST_1: "cloudfare" } as Env;
    const [t] = await (await transportFor(typo, readConfig(typo), "sa-east-1").open()).deliver({ envelopeFrom: "x@send.d.example", recipients: ["one@cf.example"], raw: plain("news@d.example") });
    expect(t).toMatchObject({ status: "deferred", message: expect.stringContaining('TRANSPORT_SA_EAST_1 (or TRANSPORT) is "cloudfare"') });
  });

  it("the consumer sends a region's email through it, signed, Bcc only in the envelope", async () => {
    const res = await api(acct.token, "POST", "/emails", { from: `Acme <news@${acct.domain}>`, to: "to@cf.example", cc: "cc@cf.example", bcc: "bcc@cf.example", subject: "Through Cloudflare", text: "hello", scheduled_at: "in 20 days" });
    expect(res.status).toBe(200);
    const { id } = (await res.json()) as { id: string };
    await env.DB.prepare("UPDATE emails SET state = 'queued', next_attempt_at = ? WHERE id = ?").bind(Date.now(), id).run();
    // What the binding is handed: recorded on the way through, then passed on unchanged.
    const handed: { from: string; to: string }[] = [];
    const watched = { send: (m: EmailMessage) => (handed.push({ from: m.from, to: m.to }), env.EMAIL.send(m)) } as SendEmail;
    const cf = { ...env, TRANSPORT_SA_EAST_1: "cloudflare", EMAIL: watched } as Env;
    const batch = createMessageBatch("tern-send", [{ id: "m0", timestamp: new Date(), attempts: 1, body: { emailId: id } }]);
    await consumeSendBatch(batch as MessageBatch<{ emailId: string }>, cf);
    expect(getQueueResult(batch, createExecutionContext())).toBeTruthy();
    expect(handed.map((h) => h.to).sort()).toEqual(["bcc@cf.example", "cc@cf.example", "to@cf.example"]);
    expect(new Set(handed.map((h) => h.from))).toEqual(new Set([`news@${acct.domain}`]));
    const events = ((await (await api(acct.token, "GET", `/emails/${id}/events`)).json()) as { data: { type: string }[] }).data.map((e) => e.type);
    expect(events).toContain("sent");
    // Cloudflare relays on: its acceptance is sent, never delivered, whatever RELAY_FINAL says
    // (the tests set it to true for their loopback relay).
    expect(events).not.toContain("delivered");
    expect(events).not.toContain("delivery_delayed");
  });
});
