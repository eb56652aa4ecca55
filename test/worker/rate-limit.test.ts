// The request rate (contract 4.4): per account, shared by every key, correct across isolates
// (one Durable Object per account), with ratelimit-* headers on every API answer.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { LEASE_MS, leaseSize, TokenLeases } from "../../worker/rate-limit.ts";
import { addKey, api, createAccount } from "./fixtures.ts";

/** Two isolates' leases against one account's real limiter object, counting the calls. */
function isolates(accountId: string, limit: number, now: number) {
  const stub = env.RATE_LIMITER.getByName(`rate:${accountId}`);
  let calls = 0;
  const ask = (want: number) => {
    calls++;
    return stub.take(limit, want, now);
  };
  const pair = [new TokenLeases(), new TokenLeases()];
  return { take: (i: number, at = now) => pair[i % 2]!.take(accountId, limit, ask, at), calls: () => calls };
}

describe("rate limits", () => {
  it("every authenticated answer carries ratelimit-limit, -remaining and -reset", async () => {
    const a = await createAccount({ rateLimit: 10 });
    const res = await api(a.token, "GET", "/emails");
    expect(res.status).toBe(200);
    expect(res.headers.get("ratelimit-limit")).toBe("10");
    expect(Number(res.headers.get("ratelimit-remaining"))).toBe(9);
    expect(Number(res.headers.get("ratelimit-reset"))).toBeGreaterThanOrEqual(1);
    const refused = await api(a.token, "POST", "/emails", { nope: true });
    expect(refused.status).toBe(422);
    expect(refused.headers.get("ratelimit-limit")).toBe("10");
  });

  it("a burst over the limit gets 429s with retry-after, and the accepted count matches the limit", async () => {
    const a = await createAccount({ rateLimit: 10 });
    const second = await addKey(a.accountId, "sending_access");
    const started = Date.now();
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) =>
      api(i % 2 ? second : a.token, "POST", "/emails", { from: `r@${a.domain}`, to: "delivered@simulator.tern.test", subject: `r${i}`, text: "t" })));
    const elapsed = (Date.now() - started) / 1000;
    const accepted = answers.filter((r) => r.status === 200).length;
    const limited = answers.filter((r) => r.status === 429);
    expect(accepted + limited.length).toBe(40);
    // A full bucket of 10, plus what refilled (10 a second) while the burst was answered.
    expect(accepted).toBeGreaterThanOrEqual(10);
    expect(accepted).toBeLessThanOrEqual(10 + Math.ceil(elapsed * 10));
    const body = (await limited[0]!.json()) as { name: string; statusCode: number };
    expect(body).toMatchObject({ name: "rate_limit_exceeded", statusCode: 429 });
    expect(Number(limited[0]!.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(limited[0]!.headers.get("ratelimit-remaining")).toBe("0");
    const rows = await env.DB.prepare("SELECT COUNT(*) AS n FROM emails WHERE account_id = ?").bind(a.accountId).first<{ n: number }>();
    expect(rows!.n).toBe(accepted);
  });

  it("a busy account's isolates lease 2% of its limit per call to the limiter and together never pass the limit", async () => {
    const a = await createAccount({ rateLimit: 1000 });
    const now = Date.now();
    const iso = isolates(a.accountId, 1000, now); // a frozen clock: the bucket does not refill
    let admitted = 0;
    let callsWhenFull = 0;
    for (let i = 0; i < 1500; i++) {
      const v = await iso.take(i);
      if (v.allowed) admitted++;
      else if (!callsWhenFull) callsWhenFull = iso.calls();
      expect(v.remaining).toBeGreaterThanOrEqual(0);
    }
    expect(leaseSize(1000)).toBe(20);
    expect(admitted).toBe(1000);
    // 1,000 requests cost about 50 calls (two isolates, 20 tokens a lease), not 1,000.
    expect(callsWhenFull).toBeLessThanOrEqual(1000 / 20 + 2);
  });

  it("a burst of concurrent requests in one isolate asks for one lease, not one each, and is not refused below the limit", async () => {
    const a = await createAccount({ rateLimit: 1000 });
    const iso = isolates(a.accountId, 1000, Date.now());
    // 500 at once: one asks for a lease of 20, the others for one token each (519 of 1,000).
    const verdicts = await Promise.all(Array.from({ length: 500 }, () => iso.take(0)));
    expect(verdicts.filter((v) => v.allowed)).toHaveLength(500);
    // The lease is there now: the next 19 requests spend it without asking.
    const before = iso.calls();
    for (let i = 0; i < 19; i++) expect((await iso.take(0)).allowed).toBe(true);
    expect(iso.calls()).toBe(before);
  });

  it("a lease lasts a second; at the default limit every request asks the limiter", async () => {
    const a = await createAccount({ rateLimit: 1000 });
    const now = Date.now();
    const iso = isolates(a.accountId, 1000, now);
    await iso.take(0);
    await iso.take(0, now + LEASE_MS - 1);
    expect(iso.calls()).toBe(1);
    await iso.take(0, now + LEASE_MS);
    expect(iso.calls()).toBe(2);

    const b = await createAccount({ rateLimit: 10 });
    const slow = isolates(b.accountId, 10, now);
    const verdicts = [];
    for (let i = 0; i < 12; i++) verdicts.push(await slow.take(0));
    expect(slow.calls()).toBe(12);
    expect(verdicts.filter((v) => v.allowed)).toHaveLength(10);
  });

  it("the bucket refills: after a second the account may send again", async () => {
    const a = await createAccount({ rateLimit: 2 });
    await Promise.all([1, 2, 3].map(() => api(a.token, "GET", "/emails")));
    expect((await api(a.token, "GET", "/emails")).status).toBe(429);
    await new Promise((r) => setTimeout(r, 1100));
    expect((await api(a.token, "GET", "/emails")).status).toBe(200);
  });

  it("accounts do not share a bucket", async () => {
    const a = await createAccount({ rateLimit: 1 });
    const b = await createAccount({ rateLimit: 1 });
    expect((await api(a.token, "GET", "/emails")).status).toBe(200);
    expect((await api(a.token, "GET", "/emails")).status).toBe(429);
    expect((await api(b.token, "GET", "/emails")).status).toBe(200);
  });

  it("an account with a limit of 0 is not limited and gets no ratelimit headers", async () => {
    const a = await createAccount({ rateLimit: 0 });
    const answers = await Promise.all(Array.from({ length: 30 }, () => api(a.token, "GET", "/emails")));
    expect(answers.every((r) => r.status === 200)).toBe(true);
    expect(answers[0]!.headers.get("ratelimit-limit")).toBeNull();
  });
});
