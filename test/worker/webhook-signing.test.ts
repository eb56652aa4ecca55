// Webhook building blocks inside workerd: Standard Webhooks signatures checked by the two
// receiver libraries people use (svix and standardwebhooks), the payloads of contract
// section 6, the retry schedule and disable rule, the endpoint policy, and one delivery
// attempt against fake and real (loopback HTTPS) receivers.
//
// svix 2.5.0's Webhook delegates to standardwebhooks, so the two are one HMAC implementation
// reached through two header spellings; test/node/webhook-signing.test.ts adds a check with
// Node's own HMAC and the published Svix test vector is checked here.
import { env } from "cloudflare:workers";
import { Webhook as StandardWebhook } from "standardwebhooks";
import { Webhook as SvixWebhook } from "svix";
import { describe, expect, it } from "vitest";
import { attemptDelivery, RESPONSE_EXCERPT_BYTES, type WebhookRequest } from "../../worker/webhooks/attempt.ts";
import { checkEndpoint, endpointPolicy, MAX_ENDPOINT_LENGTH } from "../../worker/webhooks/endpoint.ts";
import {
  contactEventPayload,
  domainEventPayload,
  emailEventPayload,
  headerMessageId,
  isWebhookEventType,
  receivedEventPayload,
  WEBHOOK_EVENT_TYPES,
  WebhookPayloadSchema,
  type EmailFacts,
} from "../../worker/webhooks/payloads.ts";
import {
  afterFailedAttempt,
  attemptTimes,
  DISABLE_AFTER_MS,
  endpointHealthAfter,
  isAcknowledged,
  MAX_ATTEMPTS,
  RETRY_DELAYS_SECONDS,
} from "../../worker/webhooks/retry.ts";
import { decodeWebhookSecret, generateWebhookSecret, signWebhook, type WebhookHeaders } from "../../worker/webhooks/signing.ts";

const now = () => Math.floor(Date.now() / 1000);

function svixHeaders(h: WebhookHeaders) {
  return { "svix-id": h["svix-id"], "svix-timestamp": h["svix-timestamp"], "svix-signature": h["svix-signature"] };
}
function standardHeaders(h: WebhookHeaders) {
  return { "webhook-id": h["webhook-id"], "webhook-timestamp": h["webhook-timestamp"], "webhook-signature": h["webhook-signature"] };
}
/** Whether each library accepts the delivery, by the header names it reads. */
function verifies(secret: string, body: string, h: WebhookHeaders): { svix: boolean; standardwebhooks: boolean } {
  const attempt = (f: () => unknown) => {
    try {
      f();
      return true;
    } catch {
      return false;
    }
  };
  return {
    svix: attempt(() => new SvixWebhook(secret).verify(body, svixHeaders(h))),
    standardwebhooks: attempt(() => new StandardWebhook(secret).verify(body, standardHeaders(h))),
  };
}
const BOTH = { svix: true, standardwebhooks: true };
const NEITHER = { svix: false, standardwebhooks: false };

describe("webhook secrets", () => {
  it("are whsec_ plus 24 random bytes in padded base64, like the secrets Svix issues", () => {
    const a = generateWebhookSecret();
    const b = generateWebhookSecret();
    expect(a).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(a).not.toBe(b);
    expect(decodeWebhookSecret(a)?.length).toBe(24);
  });

  it("are accepted back from 24 to 64 bytes, and nothing else", () => {
    const b64 = (n: number) => btoa(String.fromCharCode(...new Uint8Array(n).fill(7)));
    expect(decodeWebhookSecret(`whsec_${b64(24)}`)?.length).toBe(24);
    expect(decodeWebhookSecret(`whsec_${b64(32)}`)?.length).toBe(32);
    expect(decodeWebhookSecret(`whsec_${b64(64)}`)?.length).toBe(64);
    for (const bad of [
      b64(24), // no prefix
      `whsec_${b64(23)}`,
      `whsec_${b64(65)}`,
      `whsec_${b64(32).replace(/=+$/, "")}`, // unpadded: the receivers' decoders refuse it
      "whsec_not base64 at all!!!!!!!!!!!!",
      "whsec_",
      "",
    ]) {
      expect(decodeWebhookSecret(bad), bad).toBeNull();
    }
  });
});

describe("signWebhook", () => {
  it("matches the published Svix test vector", async () => {
    const headers = await signWebhook(
      { id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1614265330, body: '{"test": 2432232314}' },
      ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
    );
    expect(headers["webhook-signature"]).toBe("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    // And standardwebhooks' own signer agrees for the same inputs.
    const theirs = new StandardWebhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").sign(
      "msg_p5jXN8AQM9LWM0D4loKWxJek",
      new Date(1614265330 * 1000),
      '{"test": 2432232314}',
    );
    expect(headers["webhook-signature"]).toBe(theirs);
  });

  it("sends every header under both the webhook-* and the svix-* names", async () => {
    const h = await signWebhook({ id: "0193a8a0-1c2d-7000-8000-000000000001", timestamp: 1_700_000_000, body: "{}" }, [generateWebhookSecret()]);
    expect(Object.keys(h).sort()).toEqual(["svix-id", "svix-signature", "svix-timestamp", "webhook-id", "webhook-signature", "webhook-timestamp"]);
    expect(h["svix-id"]).toBe(h["webhook-id"]);
    expect(h["svix-timestamp"]).toBe("1700000000");
    expect(h["svix-signature"]).toBe(h["webhook-signature"]);
    expect(h["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
  });

  it("verifies with both svix and standardwebhooks", async () => {
    const secret = generateWebhookSecret();
    const body = JSON.stringify({ type: "email.sent", created_at: new Date().toISOString(), data: { email_id: "x" } });
    const h = await signWebhook({ id: "evt_1", timestamp: now(), body }, [secret]);
    expect(verifies(secret, body, h)).toEqual(BOTH);
  });

  it("covers the exact UTF-8 bytes of a body with non-ASCII text", async () => {
    const secret = generateWebhookSecret();
    const body = JSON.stringify({ subject: "Grüße aus Köln 🌧️", to: ["zoë@例え.jp"] });
    const h = await signWebhook({ id: "evt_utf8", timestamp: new Date(), body }, [secret]);
    expect(verifies(secret, body, h)).toEqual(BOTH);
    expect(verifies(secret, body.normalize("NFD"), h)).toEqual(NEITHER);
  });

  it("fails both libraries for a tampered body, timestamp, id, or the wrong secret", async () => {
    const secret = generateWebhookSecret();
    const body = '{"type":"email.bounced","data":{"email_id":"a"}}';
    const ts = now();
    const h = await signWebhook({ id: "evt_2", timestamp: ts, body }, [secret]);
    expect(verifies(secret, body, h)).toEqual(BOTH);
    expect(verifies(secret, body.replace('"a"', '"b"'), h)).toEqual(NEITHER);
    expect(verifies(secret, `${body} `, h)).toEqual(NEITHER);
    // Within the libraries' 5-minute tolerance, so only the signature can refuse it.
    const later = String(ts + 1);
    expect(verifies(secret, body, { ...h, "webhook-timestamp": later, "svix-timestamp": later })).toEqual(NEITHER);
    expect(verifies(secret, body, { ...h, "webhook-id": "evt_3", "svix-id": "evt_3" })).toEqual(NEITHER);
    expect(verifies(generateWebhookSecret(), body, h)).toEqual(NEITHER);
  });

  it("signs with every secret during a rotation: either one verifies, a third does not", async () => {
    const old = generateWebhookSecret();
    const fresh = generateWebhookSecret();
    const body = '{"type":"contact.updated"}';
    const h = await signWebhook({ id: "evt_rot", timestamp: now(), body }, [old, fresh]);
    const parts = h["webhook-signature"].split(" ");
    expect(parts).toHaveLength(2);
    for (const p of parts) expect(p).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(verifies(old, body, h)).toEqual(BOTH);
    expect(verifies(fresh, body, h)).toEqual(BOTH);
    expect(verifies(generateWebhookSecret(), body, h)).toEqual(NEITHER);
    // Each entry is exactly what that secret alone produces.
    const alone = await signWebhook({ id: "evt_rot", timestamp: Number(h["webhook-timestamp"]), body }, [fresh]);
    expect(parts[1]).toBe(alone["webhook-signature"]);
  });

  it("keeps the id across attempts while the timestamp and signature move on", async () => {
    const secret = generateWebhookSecret();
    const first = await signWebhook({ id: "evt_same", timestamp: 1_700_000_000, body: "{}" }, [secret]);
    const retry = await signWebhook({ id: "evt_same", timestamp: 1_700_000_005, body: "{}" }, [secret]);
    expect(retry["webhook-id"]).toBe(first["webhook-id"]);
    expect(retry["webhook-signature"]).not.toBe(first["webhook-signature"]);
  });

  it("refuses programming errors: no secret, a bad secret, an id that breaks the signed content, a bad time", async () => {
    const secret = generateWebhookSecret();
    await expect(signWebhook({ id: "a", timestamp: 1, body: "" }, [])).rejects.toThrow(TypeError);
    await expect(signWebhook({ id: "a", timestamp: 1, body: "" }, ["whsec_short"])).rejects.toThrow(TypeError);
    await expect(signWebhook({ id: "a.b", timestamp: 1, body: "" }, [secret])).rejects.toThrow(TypeError);
    await expect(signWebhook({ id: "a b", timestamp: 1, body: "" }, [secret])).rejects.toThrow(TypeError);
    await expect(signWebhook({ id: "", timestamp: 1, body: "" }, [secret])).rejects.toThrow(TypeError);
    await expect(signWebhook({ id: "a", timestamp: 1.5, body: "" }, [secret])).rejects.toThrow(TypeError);
  });
});

// --- payloads ---------------------------------------------------------------------------------

const email: EmailFacts = {
  id: "0193a8a0-1c2d-7000-8000-00000000000e",
  createdAt: Date.UTC(2026, 10, 21, 10, 0, 0),
  from: "Acme <hello@acme.example>",
  to: ["ana@example.org", "Bo <bo@example.org>"],
  subject: "Your order",
  messageId: "0193a8a0-1c2d-7000-8000-00000000000e@acme.example",
  tags: [
    { name: "category", value: "order" },
    { name: "tier", value: "gold" },
  ],
};
const at = Date.UTC(2026, 10, 21, 10, 0, 5);

describe("webhook payloads", () => {
  it("lists the 17 event types of the contract", () => {
    expect(WEBHOOK_EVENT_TYPES).toHaveLength(17);
    expect(isWebhookEventType("email.received")).toBe(true);
    expect(isWebhookEventType("email.dropped")).toBe(false);
    expect(isWebhookEventType(42)).toBe(false);
  });

  it("builds an email event with the contract's data fields", () => {
    const payload = emailEventPayload({ type: "email.delivered", email, at });
    expect(payload).toEqual({
      type: "email.delivered",
      created_at: "2026-11-21T10:00:05.000Z",
      data: {
        email_id: email.id,
        created_at: "2026-11-21T10:00:00.000Z",
        from: "Acme <hello@acme.example>",
        to: ["ana@example.org", "Bo <bo@example.org>"],
        subject: "Your order",
        message_id: "<0193a8a0-1c2d-7000-8000-00000000000e@acme.example>",
        tags: { category: "order", tier: "gold" },
      },
    });
    expect(WebhookPayloadSchema.safeParse(payload).success).toBe(true);
  });

  it("adds bounce, open, click and failed objects to the events that have them", () => {
    const bounce = { type: "Permanent" as const, subType: "NoEmail", message: "550 5.1.1 User unknown", diagnosticCode: ["smtp; 550 5.1.1 User unknown"] };
    const bounced = emailEventPayload({ type: "email.bounced", email, at, bounce });
    expect(bounced.data.bounce).toEqual(bounce);
    const opened = emailEventPayload({ type: "email.opened", email, at, open: { ipAddress: "203.0.113.9", userAgent: "Mozilla/5.0" } });
    expect(opened.data.open).toEqual({ ipAddress: "203.0.113.9", timestamp: "2026-11-21T10:00:05.000Z", userAgent: "Mozilla/5.0" });
    const clicked = emailEventPayload({
      type: "email.clicked",
      email,
      at,
      click: { ipAddress: "2001:db8::1", userAgent: "curl/8", link: "https://acme.example/o/1?a=1&b=2" },
    });
    expect(clicked.data.click).toEqual({ ipAddress: "2001:db8::1", link: "https://acme.example/o/1?a=1&b=2", timestamp: "2026-11-21T10:00:05.000Z", userAgent: "curl/8" });
    const failed = emailEventPayload({ type: "email.failed", email, at, failed: { reason: "The relay refused the connection." } });
    expect(failed.data.failed).toEqual({ reason: "The relay refused the connection." });
    for (const p of [bounced, opened, clicked, failed]) expect(WebhookPayloadSchema.safeParse(p).success, p.type).toBe(true);
    // The plain events carry none of them.
    const sent = emailEventPayload({ type: "email.sent", email, at });
    expect(Object.keys(sent.data).sort()).toEqual(["created_at", "email_id", "from", "message_id", "subject", "tags", "to"]);
  });

  it("does not share arrays with its input, so a stored payload cannot change later", () => {
    const bounce = { type: "Transient" as const, subType: "MailboxFull", message: "m", diagnosticCode: ["d"] };
    const to = ["a@example.org"];
    const payload = emailEventPayload({ type: "email.bounced", email: { ...email, to }, at, bounce });
    to.push("b@example.org");
    bounce.diagnosticCode.push("e");
    expect(payload.data.to).toEqual(["a@example.org"]);
    expect(payload.data.bounce?.diagnosticCode).toEqual(["d"]);
  });

  it("accepts tags as a map and Message-IDs with or without brackets", () => {
    const payload = emailEventPayload({ type: "email.scheduled", email: { ...email, tags: { a: "1" }, messageId: "<x@y>" }, at: new Date(at) });
    expect(payload.data.tags).toEqual({ a: "1" });
    expect(payload.data.message_id).toBe("<x@y>");
    expect(headerMessageId(null)).toBeNull();
    expect(headerMessageId(" <> ")).toBeNull();
  });

  it("refuses in its schema an email event that lacks its object", () => {
    const sent = emailEventPayload({ type: "email.sent", email, at });
    expect(WebhookPayloadSchema.safeParse({ ...sent, type: "email.bounced" }).success).toBe(false);
    expect(WebhookPayloadSchema.safeParse({ ...sent, type: "email.dropped" }).success).toBe(false);
  });

  it("builds email.received with metadata only", () => {
    const payload = receivedEventPayload(
      {
        id: "0193a8a0-1c2d-7000-8000-0000000000aa",
        createdAt: at,
        from: "Ana <ana@example.org>",
        to: ["support@acme.example"],
        cc: [],
        subject: "Help",
        messageId: "CAF=abc@mail.example.org",
        attachments: [{ id: "att_1", filename: "a.pdf", contentType: "application/pdf", contentDisposition: "attachment", contentId: null, size: 1234 }],
      },
      at,
    );
    expect(payload.data).toEqual({
      email_id: "0193a8a0-1c2d-7000-8000-0000000000aa",
      created_at: "2026-11-21T10:00:05.000Z",
      from: "Ana <ana@example.org>",
      to: ["support@acme.example"],
      cc: [],
      subject: "Help",
      message_id: "<CAF=abc@mail.example.org>",
      attachments: [{ id: "att_1", filename: "a.pdf", content_type: "application/pdf", content_disposition: "attachment", content_id: null, size: 1234 }],
    });
    expect(payload.data).not.toHaveProperty("html");
    expect(WebhookPayloadSchema.safeParse(payload).success).toBe(true);
  });

  it("builds contact and domain events", () => {
    const contact = contactEventPayload(
      "contact.updated",
      { id: "c1", email: "ana@example.org", unsubscribed: true, createdAt: at, updatedAt: at + 1000 },
      at + 1000,
    );
    expect(contact).toEqual({
      type: "contact.updated",
      created_at: "2026-11-21T10:00:06.000Z",
      data: {
        id: "c1",
        email: "ana@example.org",
        first_name: null,
        last_name: null,
        unsubscribed: true,
        created_at: "2026-11-21T10:00:05.000Z",
        updated_at: "2026-11-21T10:00:06.000Z",
      },
    });
    const domain = domainEventPayload(
      "domain.updated",
      {
        id: "d1",
        name: "acme.example",
        status: "verified",
        region: "eu-west-1",
        createdAt: "2026-11-20T00:00:00Z",
        records: [
          { record: "DKIM", name: "tern._domainkey", type: "TXT", ttl: "Auto", status: "verified", value: "p=MIIB" },
          { record: "SPF", name: "send", type: "MX", ttl: "Auto", status: "verified", value: "bounces.tern.example", priority: 10 },
        ],
      },
      at,
    );
    expect(domain.data.created_at).toBe("2026-11-20T00:00:00.000Z");
    expect(domain.data.records[1]).toEqual({ record: "SPF", name: "send", type: "MX", ttl: "Auto", status: "verified", value: "bounces.tern.example", priority: 10 });
    for (const p of [contact, domain]) expect(WebhookPayloadSchema.safeParse(p).success).toBe(true);
  });
});

// --- retry schedule and endpoint health ---------------------------------------------------------

describe("retry schedule", () => {
  it("tries immediately, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h after each failure", () => {
    expect(RETRY_DELAYS_SECONDS).toEqual([5, 300, 1800, 7200, 18000, 36000, 36000]);
    expect(MAX_ATTEMPTS).toBe(8);
    const t0 = Date.UTC(2026, 10, 21);
    const delays = [];
    for (let attempt = 1; attempt < MAX_ATTEMPTS; attempt++) {
      const next = afterFailedAttempt(attempt, t0);
      expect(next.retry).toBe(true);
      if (next.retry) {
        expect(next.nextAttempt).toBe(attempt + 1);
        expect(next.nextAttemptAt).toBe(t0 + next.delayMs);
        delays.push(next.delayMs / 1000);
      }
    }
    expect(delays).toEqual([5, 300, 1800, 7200, 18000, 36000, 36000]);
    expect(afterFailedAttempt(8, t0)).toEqual({ retry: false, reason: "All 8 attempts failed." });
    expect(() => afterFailedAttempt(0, t0)).toThrow(RangeError);
  });

  it("counts each delay from the failure, so every attempt of an always-failing event is about 27.5 hours apart in total", () => {
    const times = attemptTimes(0);
    expect(times).toHaveLength(8);
    expect(times.at(-1)).toBe((5 + 300 + 1800 + 7200 + 18000 + 36000 + 36000) * 1000);
    expect(afterFailedAttempt(2, 1_000_000)).toMatchObject({ nextAttemptAt: 1_000_000 + 300_000 });
  });

  it("acknowledges only 2xx", () => {
    for (const s of [200, 201, 202, 204, 299]) expect(isAcknowledged(s)).toBe(true);
    for (const s of [100, 199, 301, 302, 304, 400, 404, 410, 429, 500, 503]) expect(isAcknowledged(s)).toBe(false);
  });
});

describe("endpoint health", () => {
  const day = 24 * 3600 * 1000;
  it("disables an endpoint only after 5 days of nothing but failures", () => {
    let health = { failingSince: null as number | null };
    let update = endpointHealthAfter(health, { ok: false, at: 0 });
    expect(update).toEqual({ failingSince: 0, disable: false });
    health = update;
    update = endpointHealthAfter(health, { ok: false, at: 5 * day - 1 });
    expect(update.disable).toBe(false);
    update = endpointHealthAfter(health, { ok: false, at: 5 * day });
    expect(update.disable).toBe(true);
    if (update.disable) expect(update.reason).toContain("1970-01-01T00:00:00.000Z");
    expect(DISABLE_AFTER_MS).toBe(5 * day);
  });

  it("forgets the failures after any success", () => {
    const update = endpointHealthAfter({ failingSince: 0 }, { ok: true, at: 4 * day });
    expect(update).toEqual({ failingSince: null, disable: false });
    const after = endpointHealthAfter(update, { ok: false, at: 6 * day });
    expect(after).toEqual({ failingSince: 6 * day, disable: false });
  });
});

// --- endpoint policy --------------------------------------------------------------------------

describe("webhook endpoints", () => {
  const production = endpointPolicy({ allowLocalTargets: false });
  const dev = endpointPolicy({ allowLocalTargets: true });

  it.each(["https://hooks.example.com/tern", "https://hooks.example.com:8443/tern?token=x", "https://8.8.8.8/hook", "https://[2606:4700::1111]/hook"])(
    "accepts %s in production",
    (url) => {
      expect(checkEndpoint(url, production).ok).toBe(true);
    },
  );

  it.each([
    ["http://hooks.example.com/", "The endpoint must use https."],
    ["ftp://hooks.example.com/", "The endpoint must use https."],
    ["hooks.example.com/tern", "The endpoint is not a valid absolute URL."],
    ["https://user:pw@hooks.example.com/", "The endpoint must not contain a user name or password."],
    ["https://localhost/hook", "The endpoint must point to a public host, not a local, private or reserved address."],
    ["https://127.0.0.1:3000/hook", "The endpoint must point to a public host, not a local, private or reserved address."],
    ["https://[::1]/hook", "The endpoint must point to a public host, not a local, private or reserved address."],
    ["https://10.0.0.5/hook", "The endpoint must point to a public host, not a local, private or reserved address."],
    ["https://192.168.1.10/hook", "The endpoint must point to a public host, not a local, private or reserved address."],
    ["https://169.254.169.254/latest/meta-data", "The endpoint must point to a public host, not a local, private or reserved address."],
    ["https://[fe80::1]/hook", "The endpoint must point to a public host, not a local, private or reserved address."],
    ["https://[::ffff:127.0.0.1]/hook", "The endpoint must point to a public host, not a local, private or reserved address."],
    ["https://2130706433/hook", "The endpoint must point to a public host, not a local, private or reserved address."],
    ["https://receiver.internal/hook", "The endpoint must point to a public host, not a local, private or reserved address."],
  ])("refuses %s in production", (url, message) => {
    expect(checkEndpoint(url, production)).toEqual({ ok: false, message });
  });

  it("allows http and loopback targets in dev mode, never credentials or other schemes", () => {
    expect(checkEndpoint("http://127.0.0.1:8787/hook", dev).ok).toBe(true);
    expect(checkEndpoint("http://localhost:3000/hook", dev).ok).toBe(true);
    expect(checkEndpoint("https://[::1]:9000/hook", dev).ok).toBe(true);
    expect(checkEndpoint("http://u:p@localhost/", dev).ok).toBe(false);
    expect(checkEndpoint("file:///etc/passwd", dev).ok).toBe(false);
  });

  it("refuses URLs longer than the limit", () => {
    const long = `https://hooks.example.com/${"a".repeat(MAX_ENDPOINT_LENGTH)}`;
    expect(checkEndpoint(long, production)).toEqual({ ok: false, message: `The endpoint must be a URL of at most ${MAX_ENDPOINT_LENGTH} characters.` });
  });
});

// --- one delivery attempt -------------------------------------------------------------------------

describe("attemptDelivery", () => {
  const dev = endpointPolicy({ allowLocalTargets: true });
  async function request(url: string): Promise<WebhookRequest> {
    const body = '{"type":"email.sent"}';
    return { url, body, headers: await signWebhook({ id: "evt_a", timestamp: now(), body }, [generateWebhookSecret()]) };
  }
  const answer = (response: Response | (() => Promise<Response>)): typeof fetch =>
    (async () => (typeof response === "function" ? response() : response)) as typeof fetch;

  it("POSTs the signed body with its headers and counts a 2xx as delivered", async () => {
    let seen: Request | undefined;
    const req = await request("https://hooks.example.com/tern");
    const fake: typeof fetch = async (input, init) => {
      seen = new Request(input as string, init);
      return new Response("ok", { status: 200 });
    };
    const record = await attemptDelivery(req, { policy: endpointPolicy({ allowLocalTargets: false }), fetch: fake });
    expect(record).toMatchObject({ ok: true, status: 200, responseExcerpt: "ok", error: null });
    expect(seen?.method).toBe("POST");
    expect(seen?.redirect).toBe("manual");
    expect(seen?.headers.get("content-type")).toBe("application/json");
    expect(seen?.headers.get("svix-signature")).toBe(req.headers["svix-signature"]);
    expect(seen?.headers.get("webhook-id")).toBe("evt_a");
    expect(await seen?.text()).toBe('{"type":"email.sent"}');
  });

  it("records a failing status with a bounded excerpt of the answer", async () => {
    const big = "é".repeat(RESPONSE_EXCERPT_BYTES); // 2 bytes each: the cut falls inside a character
    const record = await attemptDelivery(await request("https://hooks.example.com/"), {
      policy: dev,
      fetch: answer(new Response(big, { status: 503 })),
    });
    expect(record.ok).toBe(false);
    expect(record.status).toBe(503);
    expect(record.error).toBe("The endpoint answered with status 503.");
    expect(record.responseExcerpt).toBe("é".repeat(RESPONSE_EXCERPT_BYTES / 2));
  });

  it("does not follow redirects", async () => {
    const record = await attemptDelivery(await request("https://hooks.example.com/"), {
      policy: dev,
      fetch: answer(new Response(null, { status: 301, headers: { location: "https://10.0.0.1/" } })),
    });
    expect(record).toMatchObject({ ok: false, status: 301, error: "The endpoint answered with a redirect (status 301); redirects are not followed." });
  });

  it("refuses a target the policy forbids without sending anything", async () => {
    let called = false;
    const record = await attemptDelivery(await request("https://127.0.0.1/hook"), {
      policy: endpointPolicy({ allowLocalTargets: false }),
      fetch: (async () => {
        called = true;
        return new Response("");
      }) as typeof fetch,
    });
    expect(called).toBe(false);
    expect(record).toMatchObject({ ok: false, status: null, error: "The endpoint must point to a public host, not a local, private or reserved address." });
  });

  it("says an unreachable endpoint could not be reached, without internals", async () => {
    const record = await attemptDelivery(await request("https://127.0.0.1:1/hook"), { policy: dev });
    expect(record).toMatchObject({ ok: false, status: null, responseExcerpt: "", error: "The endpoint could not be reached." });
  });

  const base = `https://localhost:${env.TEST_PEERS.https}`;

  it("gives up on a receiver that does not answer in time", async () => {
    // A fetch that never settles until the attempt's own signal aborts it.
    const hanging: typeof fetch = (_input, init) =>
      new Promise((_, reject) => init?.signal?.addEventListener("abort", () => reject(new Error("aborted"))));
    const record = await attemptDelivery(await request("https://hooks.example.com/"), { policy: dev, timeoutMs: 200, fetch: hanging });
    expect(record).toMatchObject({ ok: false, status: null, error: "The endpoint did not answer within 200 ms." });
    expect(record.durationMs).toBeGreaterThanOrEqual(0);
  });

  it("keeps the status of a real receiver whose body never ends, and stops reading at the deadline", async () => {
    // The loopback HTTPS server's /slow sends headers and 4 bytes, then nothing.
    const started = Date.now();
    const record = await attemptDelivery(await request(`${base}/slow`), { policy: dev, timeoutMs: 500 });
    expect(record).toMatchObject({ ok: true, status: 200, responseExcerpt: "%PDF", error: null });
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("reads only the excerpt of a real 5 MB answer", async () => {
    const record = await attemptDelivery(await request(`${base}/big`), { policy: dev });
    expect(record.status).toBe(200);
    expect(record.responseExcerpt).toBe("a".repeat(RESPONSE_EXCERPT_BYTES));
  });

  it("reports a real 404 and a real redirect", async () => {
    expect(await attemptDelivery(await request(`${base}/404`), { policy: dev })).toMatchObject({
      ok: false,
      status: 404,
      responseExcerpt: "not found",
      error: "The endpoint answered with status 404.",
    });
    expect(await attemptDelivery(await request(`${base}/redirect-ok`), { policy: dev })).toMatchObject({ ok: false, status: 302 });
  });
});
