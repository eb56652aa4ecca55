// The request rate (contract 4.4): per account, shared by every key, correct across isolates
// (one Durable Object per account), with ratelimit-* headers on every API answer.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { addKey, api, createAccount } from "./fixtures.ts";

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
