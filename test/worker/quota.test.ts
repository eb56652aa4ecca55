// Quota (contract 4.4): checked and consumed atomically with recording the email.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { periodsAt } from "../../worker/sending/quota.ts";
import { api, countRows, createAccount } from "./fixtures.ts";

const sim = (i: number | string) => `delivered+${i}@simulator.tern.test`;

async function setPlan(accountId: string, plan: string) {
  await env.DB.prepare("UPDATE accounts SET plan = ? WHERE id = ?").bind(plan, accountId).run();
}
async function setUsed(accountId: string, period: string, used: number, cap: number) {
  await env.DB.prepare("INSERT INTO usage (account_id, period, used, cap) VALUES (?, ?, ?, ?) ON CONFLICT DO UPDATE SET used = excluded.used, cap = excluded.cap")
    .bind(accountId, period, used, cap).run();
}
async function used(accountId: string, period: string) {
  return (await env.DB.prepare("SELECT used FROM usage WHERE account_id = ? AND period = ?").bind(accountId, period).first<{ used: number }>())?.used ?? 0;
}

describe("quota", () => {
  it("counts every recipient and reports the quota used on each send", async () => {
    const a = await createAccount();
    const res = await api(a.token, "POST", "/emails", { from: `q@${a.domain}`, to: [sim(1), sim(2)], cc: sim(3), bcc: [sim(4)], subject: "s", text: "t" });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-tern-monthly-quota")).toBe("4");
    expect(res.headers.get("x-tern-daily-quota")).toBe("4");
    const { month, day } = periodsAt(Date.now());
    expect(await used(a.accountId, month)).toBe(4);
    expect(await used(a.accountId, day)).toBe(4);
  });

  it("free plan: the 101st email of a UTC day is refused whole and nothing of it is recorded", async () => {
    const a = await createAccount();
    const hundred = { from: `q@${a.domain}`, to: Array.from({ length: 50 }, (_, i) => sim(`t${i}`)), cc: Array.from({ length: 50 }, (_, i) => sim(`c${i}`)), subject: "s", text: "t" };
    expect((await api(a.token, "POST", "/emails", hundred)).status).toBe(200);
    const res = await api(a.token, "POST", "/emails", { from: `q@${a.domain}`, to: sim("over"), subject: "s", text: "t" });
    expect(res.status).toBe(429);
    expect(await res.json()).toMatchObject({ statusCode: 429, name: "daily_quota_exceeded" });
    expect(res.headers.get("x-tern-daily-quota")).toBe("100");
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(await countRows("emails", a.accountId)).toBe(1);
    expect(await used(a.accountId, periodsAt(Date.now()).day)).toBe(100);
  });

  it("monthly: a multi-recipient send that would pass the limit is refused whole; one that fits is not", async () => {
    const a = await createAccount();
    await setPlan(a.accountId, "pro_50k");
    const { month } = periodsAt(Date.now());
    await setUsed(a.accountId, month, 49_998, 50_000);
    const three = await api(a.token, "POST", "/emails", { from: `q@${a.domain}`, to: [sim(1), sim(2), sim(3)], subject: "s", text: "t" });
    expect(three.status).toBe(429);
    expect(((await three.json()) as { name: string }).name).toBe("monthly_quota_exceeded");
    expect(await used(a.accountId, month)).toBe(49_998);
    const two = await api(a.token, "POST", "/emails", { from: `q@${a.domain}`, to: [sim(1), sim(2)], subject: "s", text: "t" });
    expect(two.status).toBe(200);
    expect(two.headers.get("x-tern-monthly-quota")).toBe("50000");
    expect(two.headers.get("x-tern-daily-quota")).toBeNull();
    expect(await countRows("emails", a.accountId)).toBe(1);
  });

  it("concurrent senders at the boundary never overshoot and a refused send is never counted", async () => {
    const a = await createAccount();
    await setPlan(a.accountId, "pro_50k");
    const { month } = periodsAt(Date.now());
    await setUsed(a.accountId, month, 49_990, 50_000);
    // 30 concurrent sends of 1 or 2 recipients: 45 recipients asked for, 10 left.
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) =>
      api(a.token, "POST", "/emails", { from: `q@${a.domain}`, to: i % 2 ? [sim(`a${i}`), sim(`b${i}`)] : sim(i), subject: "s", text: "t" })));
    const statuses = answers.map((r) => r.status);
    expect(statuses.every((s) => s === 200 || s === 429)).toBe(true);
    const rows = await env.DB.prepare("SELECT to_json FROM emails WHERE account_id = ?").bind(a.accountId).all<{ to_json: string }>();
    const accepted = rows.results.reduce((n, r) => n + JSON.parse(r.to_json).length, 0);
    expect(accepted).toBe(await used(a.accountId, month) - 49_990);
    expect(accepted).toBeLessThanOrEqual(10);
    expect(accepted).toBeGreaterThanOrEqual(9); // fills up to the last one or two
    expect(statuses.filter((s) => s === 200).length).toBe(rows.results.length);
  });

  it("a strict batch over the quota is refused whole", async () => {
    const a = await createAccount();
    await setUsed(a.accountId, periodsAt(Date.now()).day, 99, 100);
    const res = await api(a.token, "POST", "/emails/batch", [1, 2].map((i) => ({ from: `q@${a.domain}`, to: sim(i), subject: "s", text: "t" })));
    expect(res.status).toBe(429);
    expect(await countRows("emails", a.accountId)).toBe(0);
  });
});
