// The bridge's pure rules: key verdicts and their cache, the failed-login throttle, the
// submission slots' sharing between keys, API answers as SMTP replies, and configuration from
// the environment.
import { describe, expect, it } from "vitest";
import { canonicalAddress, clientKey, FailureThrottle, keyFingerprint, KeyVerdicts, type CheckResult } from "../../smtp-bridge/auth.ts";
import { ConfigError, configFromEnv } from "../../smtp-bridge/config.ts";
import { keyVerdictFor, replyForSubmission, type ApiOutcome } from "../../smtp-bridge/replies.ts";
import { FairSlots } from "../../smtp-bridge/slots.ts";

const KEY = "tern_" + "k".repeat(40);

describe("key verdicts", () => {
  it("are kept for the cache time, then asked again, so a revoked key stops working within it", async () => {
    let now = 0;
    let asked = 0;
    let answer: CheckResult = "valid";
    const verdicts = new KeyVerdicts(async () => (asked++, answer), 5_000, () => now);
    expect(await verdicts.verdict(KEY)).toBe("valid");
    answer = "invalid";
    now = 4_999;
    expect(await verdicts.verdict(KEY)).toBe("valid");
    now = 5_000;
    expect(await verdicts.verdict(KEY)).toBe("invalid");
    expect(asked).toBe(2);
  });

  it("share one request among concurrent logins with the same key", async () => {
    let asked = 0;
    const verdicts = new KeyVerdicts(async () => {
      asked++;
      await new Promise((r) => setTimeout(r, 20));
      return "valid" as const;
    }, 5_000);
    const all = await Promise.all(Array.from({ length: 100 }, () => verdicts.verdict(KEY)));
    expect(all.every((v) => v === "valid")).toBe(true);
    expect(asked).toBe(1);
  });

  it("do not keep 'unknown' (API unreachable) or a thrown check, and never ask about what cannot be a key", async () => {
    let asked = 0;
    let mode: "unknown" | "throw" | "valid" = "unknown";
    const verdicts = new KeyVerdicts(async () => {
      asked++;
      if (mode === "throw") throw new Error("boom");
      return mode;
    }, 5_000);
    expect(await verdicts.verdict(KEY)).toBe("unknown");
    mode = "throw";
    expect(await verdicts.verdict(KEY)).toBe("unknown");
    mode = "valid";
    expect(await verdicts.verdict(KEY)).toBe("valid");
    expect(asked).toBe(3);
    expect(await verdicts.verdict("tern_key\r\nX-Injected: 1")).toBe("invalid");
    expect(await verdicts.verdict("")).toBe("invalid");
    expect(asked).toBe(3);
  });

  it("name a key in logs only by a fingerprint", () => {
    expect(keyFingerprint(KEY)).toMatch(/^[0-9a-f]{12}$/);
    expect(KEY).not.toContain(keyFingerprint(KEY));
  });
});

describe("the failed-login throttle", () => {
  it("doubles the delay with each recent failure, up to the maximum, and locks the address out after the limit", async () => {
    let now = 1_000_000;
    const t = new FailureThrottle({ maxFailures: 4, windowMs: 60_000, baseDelayMs: 1_000, maxDelayMs: 5_000, now: () => now });
    const fail = async (client: string) => (await t.begin(client))!.fail();
    expect(t.blocked("1.2.3.4")).toBe(false);
    expect([await fail("1.2.3.4"), await fail("1.2.3.4"), await fail("1.2.3.4")]).toEqual([1_000, 2_000, 4_000]);
    expect(t.blocked("1.2.3.4")).toBe(false);
    expect(await fail("1.2.3.4")).toBe(5_000);
    expect(t.blocked("1.2.3.4")).toBe(true);
    expect(await t.begin("1.2.3.4")).toBeNull();
    expect(t.blocked("5.6.7.8")).toBe(false);
    now += 60_001;
    expect(t.blocked("1.2.3.4")).toBe(false);
    expect(await fail("1.2.3.4")).toBe(1_000);
  });

  it("counts an attempt from its start: parallel guesses stop at the limit, parallel good logins all get in", async () => {
    const t = new FailureThrottle({ maxFailures: 3, windowMs: 60_000, baseDelayMs: 10, maxDelayMs: 1_000 });
    const settled = async (p: Promise<unknown>) => (await Promise.race([p.then(() => true), new Promise((r) => setTimeout(() => r(false), 20))])) as boolean;

    // 50 guesses at once: three are checked, the others wait for them and are then refused.
    const guesses = Array.from({ length: 50 }, () => t.begin("1.2.3.4"));
    const first = await Promise.all(guesses.slice(0, 3));
    expect(first.every((a) => a !== null)).toBe(true);
    expect(await settled(guesses[3]!)).toBe(false);
    for (const a of first) a!.fail();
    expect((await Promise.all(guesses.slice(3))).every((a) => a === null)).toBe(true);
    expect(t.blocked("1.2.3.4")).toBe(true);

    // 50 good logins at once: at most three are checked at a time, and every one gets its turn.
    const logins = Array.from({ length: 50 }, () => t.begin("5.6.7.8"));
    let done = 0;
    for (const login of logins) {
      const a = await login;
      expect(a).not.toBeNull();
      a!.withdraw();
      a!.withdraw(); // only once
      done++;
    }
    expect(done).toBe(50);
    expect(t.blocked("5.6.7.8")).toBe(false);
    // A failure is not withdrawn.
    const a = (await t.begin("5.6.7.8"))!;
    expect(a.fail()).toBe(10);
    a.withdraw();
    const b = (await t.begin("5.6.7.8"))!;
    expect(b.fail()).toBe(20);
  });

  it("counts IPv4-mapped addresses as IPv4 and IPv6 addresses by their /64, however they are written", () => {
    expect(clientKey("::ffff:10.0.0.1")).toBe("10.0.0.1");
    expect(clientKey("::FFFF:10.0.0.1")).toBe("10.0.0.1");
    expect(clientKey("::ffff:a00:1")).toBe("10.0.0.1");
    expect(clientKey("0:0:0:0:0:ffff:0a00:0001")).toBe("10.0.0.1");
    expect(clientKey("192.0.2.7")).toBe("192.0.2.7");
    expect(clientKey("2001:db8:1:2:aaaa::1")).toBe("2001:db8:1:2::/64");
    expect(clientKey("2001:0db8:0001:0002:ffff:1:2:3")).toBe("2001:db8:1:2::/64");
    expect(clientKey("2001:DB8:1:2::")).toBe("2001:db8:1:2::/64");
    expect(clientKey("2001:db8::5")).toBe("2001:db8:0:0::/64");
    expect(clientKey("2001:db8:0:0:1::5")).toBe("2001:db8:0:0::/64");
    expect(clientKey("fe80::1%eth0")).toBe(clientKey("fe80::2%eth1"));
    expect(clientKey("64:ff9b::192.0.2.1")).toBe("64:ff9b:0:0::/64");
    expect(clientKey("2001:db8:1:3::1")).not.toBe(clientKey("2001:db8:1:2::1"));
    // One address, as Node's socket and smtp-server's session may write it.
    expect(canonicalAddress("2001:db8::c000:201")).toBe(canonicalAddress("2001:0DB8:0:0:0:0:192.0.2.1"));
    expect(canonicalAddress("::ffff:127.0.0.1")).toBe("127.0.0.1");
  });
});

describe("submission slots shared between keys", () => {
  it("caps each key under the total, so another key gets a slot at once while one key holds its maximum", async () => {
    const slots = new FairSlots(4, 2);
    await slots.acquire("a");
    await slots.acquire("a");
    let third = false;
    void slots.acquire("a").then(() => (third = true));
    await slots.acquire("b"); // at once
    await Promise.resolve();
    expect(third).toBe(false);
    expect([slots.held, slots.waiting, slots.heldBy("a"), slots.heldBy("b")]).toEqual([3, 1, 2, 1]);
    slots.release("a");
    await Promise.resolve();
    expect(third).toBe(true);
    expect([slots.held, slots.waiting, slots.heldBy("a")]).toEqual([3, 0, 2]);
  });

  it("gives freed slots to the waiting keys in turn, not in arrival order", async () => {
    const slots = new FairSlots(2, 2);
    await slots.acquire("a");
    await slots.acquire("a");
    const order: string[] = [];
    for (const owner of ["a", "a", "a", "b", "c", "b"]) void slots.acquire(owner).then(() => order.push(owner));
    for (let i = 0; i < 6; i++) {
      slots.release(order.at(-1) ?? "a");
      await Promise.resolve();
    }
    expect(order).toEqual(["a", "b", "c", "a", "b", "a"]);
    expect(slots.waiting).toBe(0);
  });
});

const answer = (status: number, name?: string, message?: string, id?: string): ApiOutcome => ({ kind: "answer", status, name, message, id, retryAfterSeconds: undefined });

describe("API answers as SMTP replies", () => {
  it("accepts with the email's id", () => {
    expect(replyForSubmission(answer(200, undefined, undefined, "0193-id"))).toEqual({ code: 250, text: "2.0.0 OK: queued as 0193-id", class: "accepted" });
  });

  it("makes validation and verification errors permanent, with the API's message", () => {
    const cases: [ApiOutcome, number, string][] = [
      [answer(403, "validation_error", "The example.com domain is not verified."), 550, "5.7.1 The example.com domain is not verified."],
      [answer(403, "invalid_api_key", "API key is invalid."), 554, "5.7.8 API key is invalid."],
      [answer(422, "validation_error", "`to` must list at most 50 addresses."), 554, "5.6.0 `to` must list at most 50 addresses."],
      [answer(422, "missing_required_field", "Missing `subject` field."), 554, "5.6.0 Missing `subject` field."],
      [answer(400, "invalid_idempotency_key", "The key is too long."), 554, "5.6.0 The key is too long."],
      [answer(409, "invalid_idempotent_request", "Same key, different body."), 554, "5.6.0 Same key, different body."],
      [answer(413, "validation_error", "The request body must be at most 40 MB."), 552, "5.3.4 The request body must be at most 40 MB."],
    ];
    for (const [o, code, text] of cases) expect(replyForSubmission(o), text).toEqual({ code, text, class: "permanent" });
  });

  it("makes 429, 5xx, an unexpected status and an unreachable API temporary", () => {
    for (const o of [
      answer(429, "rate_limit_exceeded", "Too many requests."),
      answer(429, "daily_quota_exceeded", "Over the daily quota."),
      answer(409, "concurrent_idempotent_requests", "Still running."),
      answer(500, "application_error", "Internal error."),
      answer(503),
      answer(404, "not_found", "The requested endpoint could not be found."),
      { kind: "unreachable", reason: "ECONNREFUSED", sent: false } as ApiOutcome,
      { kind: "unreachable", reason: "timeout", sent: true } as ApiOutcome,
    ]) {
      const r = replyForSubmission(o);
      expect(r.class, JSON.stringify(o)).toBe("temporary");
      expect(r.code).toBeGreaterThanOrEqual(400);
      expect(r.code).toBeLessThan(500);
      expect(r.text).toMatch(/^4\.\d\.\d /);
    }
    expect(replyForSubmission(answer(429, "rate_limit_exceeded", "Too many requests.")).text).toBe("4.7.0 Too many requests.");
  });

  it("keeps a reply on one line", () => {
    expect(replyForSubmission(answer(422, "validation_error", "bad\r\n250 injected")).text).toBe("5.6.0 bad 250 injected");
  });

  it("reads a key's verdict from GET /api-keys: full and sending keys are good, unknown ones bad, outages unknown", () => {
    expect(keyVerdictFor(answer(200))).toBe("valid");
    expect(keyVerdictFor(answer(401, "restricted_api_key"))).toBe("valid");
    expect(keyVerdictFor(answer(429, "rate_limit_exceeded"))).toBe("valid");
    expect(keyVerdictFor(answer(403, "invalid_api_key"))).toBe("invalid");
    expect(keyVerdictFor(answer(401, "missing_api_key"))).toBe("invalid");
    expect(keyVerdictFor(answer(500))).toBe("unknown");
    expect(keyVerdictFor({ kind: "unreachable", reason: "ECONNREFUSED", sent: false })).toBe("unknown");
  });
});

describe("configuration", () => {
  const base = { TERN_API_URL: "https://api.example.com/", TERN_BRIDGE_CERT_FILE: "/c.pem", TERN_BRIDGE_KEY_FILE: "/k.pem" };

  it("listens on the contract's ports by default, with 40 MB messages", () => {
    const c = configFromEnv(base);
    expect(c.apiUrl).toBe("https://api.example.com");
    expect(c.ports).toEqual([
      { port: 465, tls: "implicit", optional: false },
      { port: 2465, tls: "implicit", optional: false },
      { port: 25, tls: "starttls", optional: false },
      { port: 587, tls: "starttls", optional: false },
      { port: 2587, tls: "starttls", optional: false },
    ]);
    expect(c.maxMessageBytes).toBe(40 * 1024 * 1024);
    expect(c.healthPort).toBe(2580);
    expect([c.maxSubmissions, c.maxSubmissionsPerAccount, c.submissionHoldMs, c.loginTimeoutMs, c.socketTimeoutMs]).toEqual([32, 8, 30_000, 20_000, 120_000]);
  });

  it("turns each port off, or makes it optional", () => {
    const c = configFromEnv({ ...base, TERN_BRIDGE_TLS_PORTS: "", TERN_BRIDGE_STARTTLS_PORTS: "587, 25?", TERN_BRIDGE_HEALTH_PORT: "off" });
    expect(c.ports).toEqual([{ port: 587, tls: "starttls", optional: false }, { port: 25, tls: "starttls", optional: true }]);
    expect(c.healthPort).toBeNull();
  });

  it("refuses what cannot work, naming the variable", () => {
    expect(() => configFromEnv({ ...base, TERN_API_URL: "api.example.com" })).toThrow(/TERN_API_URL/);
    expect(() => configFromEnv({ ...base, TERN_BRIDGE_KEY_FILE: "" })).toThrow(/TERN_BRIDGE_KEY_FILE/);
    expect(() => configFromEnv({ ...base, TERN_BRIDGE_TLS_PORTS: "off", TERN_BRIDGE_STARTTLS_PORTS: "" })).toThrow(/turned off/);
    expect(() => configFromEnv({ ...base, TERN_BRIDGE_TLS_PORTS: "465", TERN_BRIDGE_STARTTLS_PORTS: "465" })).toThrow(/twice/);
    expect(() => configFromEnv({ ...base, TERN_BRIDGE_MAX_MESSAGE_BYTES: "50000000" })).toThrow(ConfigError);
    expect(() => configFromEnv({ ...base, TERN_BRIDGE_STARTTLS_PORTS: "smtp" })).toThrow(/TERN_BRIDGE_STARTTLS_PORTS/);
    expect(() => configFromEnv({ ...base, TERN_BRIDGE_MAX_SUBMISSIONS: "4", TERN_BRIDGE_MAX_SUBMISSIONS_PER_ACCOUNT: "5" })).toThrow(/TERN_BRIDGE_MAX_SUBMISSIONS_PER_ACCOUNT/);
    expect(() => configFromEnv({ ...base, TERN_BRIDGE_LOGIN_TIMEOUT_MS: "0" })).toThrow(/TERN_BRIDGE_LOGIN_TIMEOUT_MS/);
  });
});
