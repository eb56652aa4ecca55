// Account health: hard-bounce and complaint rates over a rolling 7 days from the rollups,
// judged against 4% and 0.08% (warnings before), and the pause that refuses new sends only
// when the operator turns HEALTH_PAUSE on.
import { env } from "cloudflare:workers";
import { drizzle } from "drizzle-orm/d1";
import { describe, expect, it } from "vitest";
import { authenticate, DASHBOARD_MAIL_KEY_ID } from "../../worker/auth.ts";
import { sendBroadcast } from "../../worker/broadcasts/broadcasts.ts";
import { runFanout } from "../../worker/broadcasts/fanout.ts";
import { ApiError } from "../../worker/errors.ts";
import { accountHealth, forgetHealth, judge, THRESHOLDS } from "../../worker/metrics/health.ts";
import { rollupItem } from "../../worker/metrics/rollup.ts";
import { performSend } from "../../worker/sending/send.ts";
import { api, createAccount, type TestAccount } from "./fixtures.ts";

const DAY = 86_400_000;

/** Counts as the event sites would leave them: `received` recipients accepted, then bounces,
 * the rest sent (taken by receiving servers), and complaints. */
async function history(a: TestAccount, at: number, received: number, bounced: number, complained: number, sent = received - bounced): Promise<void> {
  const db = drizzle(env.DB);
  const many = (n: number) => Array.from({ length: n }, (_, i) => `r${i}@example.com`);
  const key = { accountId: a.accountId, domainId: a.domainId, broadcastId: null, at };
  await db.batch([
    ...rollupItem(db, { ...key, events: [{ type: "queued", data: { recipients: many(received) } }] }),
    ...(bounced ? rollupItem(db, { ...key, events: [{ type: "bounced", data: { recipients: many(bounced), bounce: { type: "Permanent" } } }] }) : []),
    // A transient bounce (a full mailbox) is not a hard bounce: it never counts here.
    ...rollupItem(db, { ...key, events: [{ type: "bounced", data: { recipients: many(5), bounce: { type: "Transient" } } }] }),
    ...(sent ? rollupItem(db, { ...key, events: [{ type: "sent", data: { recipients: many(sent) } }] }) : []),
    ...(complained ? rollupItem(db, { ...key, events: [{ type: "complained", data: { recipients: many(complained) } }] }) : []),
  ] as never);
}

describe("account health", () => {
  it("judges a rate against its warning and its limit, and not at all on little volume", () => {
    const t = THRESHOLDS.bounce_rate;
    expect([judge(0.01, t, true), judge(0.03, t, true), judge(0.0399, t, true), judge(0.04, t, true), judge(0.2, t, false)]).toEqual(["healthy", "warning", "warning", "over_limit", "healthy"]);
    expect([judge(0.0005, THRESHOLDS.complaint_rate, true), judge(0.0006, THRESHOLDS.complaint_rate, true), judge(0.0008, THRESHOLDS.complaint_rate, true)]).toEqual(["healthy", "warning", "over_limit"]);
  });

  it("reads hard bounces and complaints per recipient over the last 7 days only", async () => {
    const a = await createAccount();
    const now = Date.now();
    await history(a, now - 2 * DAY, 1000, 35, 0);
    await history(a, now - 8 * DAY, 1000, 900, 900); // outside the window
    const h = await accountHealth(env.DB, a.accountId, now, false);
    expect(h).toMatchObject({ object: "account_health", window_days: 7, received: 1000, sent: 965, bounced_permanent: 35, complained: 0, enough_volume: true, status: "warning", pause_enabled: false, sending_paused: false });
    expect(h.bounce_rate).toEqual({ value: 0.035, warning: 0.03, limit: 0.04, status: "warning" });
    await history(a, now - DAY, 1000, 0, 2, 1035);
    const after = await accountHealth(env.DB, a.accountId, now, true);
    // 2 complaints of 2,000 recipients sent (not of the 2,000 accepted).
    expect(after).toMatchObject({ received: 2000, sent: 2000, complained: 2 });
    expect(after.complaint_rate).toMatchObject({ value: 0.001, status: "over_limit" });
    expect(after).toMatchObject({ status: "over_limit", sending_paused: true });
  });

  it("the complaint rate is of sent, as GET /emails/metrics' complaint_rate (the Metrics page's card)", async () => {
    const a = await createAccount();
    const now = Date.now();
    // Half the accepted recipients were never taken by a receiving server: per accepted the
    // rate would be 0.05%, healthy; per sent it is 0.1%, over the limit.
    await history(a, now - 2 * DAY, 4000, 0, 2, 2000);
    const h = await accountHealth(env.DB, a.accountId, now, false);
    expect(h).toMatchObject({ received: 4000, sent: 2000, complained: 2 });
    expect(h.complaint_rate).toMatchObject({ value: 0.001, status: "over_limit" });
    const q = new URLSearchParams({ start_date: h.window_start, end_date: h.window_end, metrics: "complained,sent,complaint_rate" });
    const res = await api(a.token, "GET", `/emails/metrics?${q}`);
    expect(res.status).toBe(200);
    const m = (await res.json()) as { totals: { complained: number; sent: number; complaint_rate: number } };
    expect(m.totals).toEqual({ complained: 2, sent: 2000, complaint_rate: h.complaint_rate.value });
  });

  it("GET /account/health answers the account's own health", async () => {
    const a = await createAccount();
    await history(a, Date.now() - DAY, 40, 20, 0);
    const res = await api(a.token, "GET", "/account/health");
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ received: 40, bounced_permanent: 20, enough_volume: false, status: "healthy", pause_enabled: false, sending_paused: false });
  });

  it("refuses new sends over a limit only with HEALTH_PAUSE on; a healthy account sends", async () => {
    const bad = await createAccount();
    await history(bad, Date.now() - DAY, 200, 20, 0);
    const good = await createAccount();
    forgetHealth();
    const send = async (a: TestAccount, pause: boolean) => {
      const principal = await authenticate(env.DB, `Bearer ${a.token}`, () => {});
      return performSend({ ...env, HEALTH_PAUSE: pause ? "true" : "false" }, principal, {
        kind: "single", batchMode: "strict", body: { from: `m@${a.domain}`, to: "delivered@simulator.tern.test", subject: "s", text: "t" },
      });
    };
    const refused = await send(bad, true);
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body)).toMatchObject({ name: "validation_error", message: expect.stringMatching(/paused.*hard-bounce rate.*10\.00%.*4% limit/) });
    expect((await send(bad, false)).status).toBe(200);
    expect((await send(good, true)).status).toBe(200);
    // The dashboard's own mail from that account still goes: bogus sign-ups that bounce must not
    // pause the confirmations and resets everyone depends on.
    const dashboardMail = await performSend({ ...env, HEALTH_PAUSE: "true" }, { ...(await authenticate(env.DB, `Bearer ${bad.token}`, () => {}))!, keyId: DASHBOARD_MAIL_KEY_ID }, {
      kind: "single", batchMode: "strict", body: { from: `m@${bad.domain}`, to: "delivered@simulator.tern.test", subject: "Reset your password", text: "t" },
    });
    expect(dashboardMail.status, dashboardMail.body).toBe(200);
  });

  it("the pause covers broadcasts: a send is refused with the API's error, a queued one stops as failed", async () => {
    const bad = await createAccount();
    await history(bad, Date.now() - DAY, 200, 20, 0);
    forgetHealth();
    const json = async (method: string, path: string, body?: unknown) => (await (await api(bad.token, method, path, body)).json()) as any;
    const segment = (await json("POST", "/segments", { name: "All" })).id;
    await json("POST", "/contacts", { email: "paused@simulator.tern.test", segments: [segment] });
    const draft = (await json("POST", "/broadcasts", { segment_id: segment, from: `news@${bad.domain}`, subject: "S", html: "<p>Hi</p>" })).id;
    const principal = await authenticate(env.DB, `Bearer ${bad.token}`, () => {});
    const paused = { ...env, HEALTH_PAUSE: "true" };
    const refused = await sendBroadcast(paused, principal, draft, undefined).then(() => null, (e: unknown) => e);
    expect(refused).toBeInstanceOf(ApiError);
    expect(refused).toMatchObject({ status: 403, errorName: "validation_error", message: expect.stringMatching(/paused.*hard-bounce rate.*10\.00%.*4% limit/) });
    expect((await json("GET", `/broadcasts/${draft}`)).status).toBe("draft");
    // Queued before the account went over (or with the pause off): the fan-out's run stops it.
    const queued = (await json("POST", "/broadcasts", { segment_id: segment, from: `news@${bad.domain}`, subject: "S", html: "<p>Hi</p>" })).id;
    await env.DB.prepare("UPDATE broadcasts SET status = 'queued' WHERE id = ?").bind(queued).run();
    expect(await runFanout(paused, queued)).toMatchObject({ recorded: 0, status: "failed", more: false });
    expect(await json("GET", `/broadcasts/${queued}`)).toMatchObject({ status: "failed", status_reason: expect.stringMatching(/^Stopped before its end: Sending is paused.*hard-bounce rate/) });
    expect((await env.DB.prepare("SELECT COUNT(*) AS n FROM emails WHERE broadcast_id = ?").bind(queued).first<{ n: number }>())!.n).toBe(0);
    // With the pause off the same broadcast goes out.
    const free = (await json("POST", "/broadcasts", { segment_id: segment, from: `news@${bad.domain}`, subject: "S", html: "<p>Hi</p>" })).id;
    expect(await sendBroadcast({ ...env, HEALTH_PAUSE: "false" }, principal, free, undefined)).toMatchObject({ status: "queued" });
  });
});
