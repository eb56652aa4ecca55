// The Idempotency-Key's Durable Object (durable-objects/idempotency-front.ts) in front of its
// D1 row: concurrent repeats of one key wait on the object and replay the first answer, so a
// retry storm reaches D1 once; without the object (unreachable, or turned off) the row alone
// still decides. The race, crash and redelivery cases are in idempotency.test.ts.
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { app } from "../../worker/index.ts";
import { FRONT_SHARDS, frontName } from "../../worker/sending/idempotency.ts";
import { periodsAt } from "../../worker/sending/quota.ts";
import { countingD1 } from "./counting.ts";
import { countRows, createAccount, type TestAccount } from "./fixtures.ts";

/** `logWrites`: the request log's rows (GET /logs) written after an answer, the replays'; they
 * are the log's own cost, counted apart from the send's D1 work. */
interface Counts { d1Batches: number; d1Queries: number; logWrites: number }

/** The real bindings, with every D1 call counted (as test/worker/round-trips.test.ts does). The
 * send runs in the caller's isolate, through this env, also when the key's object coordinates. */
function countingEnv(counts: Counts, overrides: Partial<Env> = {}): Env {
  return { ...env, DB: countingD1(env.DB, counts), ...overrides };
}

async function post(e: Env, a: TestAccount, body: unknown, key?: string): Promise<Response> {
  const ctx = createExecutionContext();
  const headers: Record<string, string> = { authorization: `Bearer ${a.token}`, "content-type": "application/json" };
  if (key !== undefined) headers["idempotency-key"] = key;
  const res = await app.fetch(new Request("http://tern.test/emails", { method: "POST", headers, body: JSON.stringify(body) }), e, ctx);
  await waitOnExecutionContext(ctx);
  return res;
}

/** `n` identical requests with one key at once; their answers, and what D1 saw. */
async function storm(a: TestAccount, key: string, n: number, overrides: Partial<Env> = {}) {
  const body = { from: `k@${a.domain}`, to: "delivered@simulator.tern.test", subject: "storm", text: "once" };
  // Warm the isolate's key and domain caches, so that only the sends themselves reach D1.
  expect((await post(env, a, body)).status).toBe(200);
  const counts: Counts = { d1Batches: 0, d1Queries: 0, logWrites: 0 };
  const e = countingEnv(counts, overrides);
  const answers = await Promise.all(Array.from({ length: n }, () => post(e, a, body, key)));
  const results = await Promise.all(answers.map(async (r) => ({ status: r.status, replayed: r.headers.get("idempotent-replayed"), body: (await r.json()) as { id?: string; name?: string } })));
  return { results, counts };
}

let acct: TestAccount;
beforeAll(async () => {
  acct = await createAccount();
});

describe("the Idempotency-Key's object", () => {
  it("200 concurrent repeats of one key reach D1 once: one batch records the email, 199 replay it", async () => {
    const before = await countRows("emails", acct.accountId);
    const { results, counts } = await storm(acct, "storm-1", 200);
    expect(results.every((r) => r.status === 200)).toBe(true);
    expect(results.filter((r) => r.replayed === null)).toHaveLength(1);
    expect(results.filter((r) => r.replayed === "true")).toHaveLength(199);
    expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
    // The send's D1 work: one batch, with the first request's log row in it. The 199 replays
    // each leave theirs after answering.
    expect(counts).toEqual({ d1Batches: 1, d1Queries: 0, logWrites: 199 });
    expect(await countRows("emails", acct.accountId)).toBe(before + 2); // the warm-up and the storm's one
  });

  it("without the object (IDEMPOTENCY_FRONT=false) the row alone still sends once, at one failing batch per repeat", async () => {
    const before = await countRows("emails", acct.accountId);
    const { results, counts } = await storm(acct, "storm-2", 200, { IDEMPOTENCY_FRONT: "false" });
    const ok = results.filter((r) => r.status === 200);
    expect(ok.filter((r) => r.replayed === null)).toHaveLength(1);
    expect(new Set(ok.map((r) => r.body.id)).size).toBe(1);
    expect(results.every((r) => r.status === 200 || r.body.name === "concurrent_idempotent_requests")).toBe(true);
    // Every request tried its own send batch; the losers then read the winner's answer.
    expect(counts.d1Batches).toBeGreaterThanOrEqual(200);
    expect(await countRows("emails", acct.accountId)).toBe(before + 2);
  });

  it("an object that cannot be reached leaves the decision to the row: one email, then replays", async () => {
    const lost = new Proxy(env.IDEMPOTENCY, {
      get(target, prop) {
        if (prop === "getByName") return () => ({ enter: () => Promise.reject(new Error("Durable Object reset because its code was updated.")) });
        const v = Reflect.get(target, prop, target);
        return typeof v === "function" ? v.bind(target) : v;
      },
    });
    const before = await countRows("emails", acct.accountId);
    const { results } = await storm(acct, "storm-3", 20, { IDEMPOTENCY: lost });
    const ok = results.filter((r) => r.status === 200);
    expect(ok.filter((r) => r.replayed === null)).toHaveLength(1);
    expect(new Set(ok.map((r) => r.body.id)).size).toBe(1);
    expect(await countRows("emails", acct.accountId)).toBe(before + 2);
    // The object back: it knows nothing of the key, and the row makes the next request replay.
    const again = await post(env, acct, { from: `k@${acct.domain}`, to: "delivered@simulator.tern.test", subject: "storm", text: "once" }, "storm-3");
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(((await again.json()) as { id: string }).id).toBe(ok[0]!.body.id);
  });

  it("a released answer (429) is not replayed to the waiters: each tries, and the key works once the quota allows", async () => {
    const a = await createAccount();
    const day = periodsAt(Date.now()).day;
    await env.DB.prepare("INSERT INTO usage (account_id, period, used, cap) VALUES (?, ?, 100, 100)").bind(a.accountId, day).run();
    const body = { from: `k@${a.domain}`, to: "delivered@simulator.tern.test", subject: "s", text: "t" };
    const refused = await Promise.all(Array.from({ length: 10 }, () => post(env, a, body, "quota-key")));
    expect(refused.map((r) => r.status)).toEqual(Array(10).fill(429));
    expect(refused.every((r) => r.headers.get("idempotent-replayed") === null)).toBe(true);
    await env.DB.prepare("UPDATE usage SET used = 0 WHERE account_id = ? AND period = ?").bind(a.accountId, day).run();
    const sent = await post(env, a, body, "quota-key");
    expect(sent.status).toBe(200);
    expect(sent.headers.get("idempotent-replayed")).toBeNull();
    expect(await countRows("emails", a.accountId)).toBe(1);
  });

  it("the object itself: one runner per key, waiters replay a stored answer, a stale report changes nothing", async () => {
    const stub = env.IDEMPOTENCY.getByName(`direct-${crypto.randomUUID()}`);
    const first = await stub.enter("k", "fp-a");
    expect(first.kind).toBe("run");
    // Another key of the same object is not held up by this one.
    expect((await stub.enter("k2", "fp-a")).kind).toBe("run");
    const same = stub.enter("k", "fp-a");
    const other = stub.enter("k", "fp-b");
    await stub.settle("k", "not-the-token", { status: 200, body: "{}", headers: {}, stored: true });
    // Released (a 429): the first waiter to wake runs next; the other waits for it.
    await stub.settle("k", (first as { token: string }).token, { status: 429, body: "{}", headers: {}, stored: false });
    const a = await same;
    expect(a.kind).toBe("run");
    await stub.settle("k", (a as { token: string }).token, { status: 200, body: '{"id":"x"}', headers: { "x-tern-monthly-quota": "1" }, stored: true });
    expect(await other).toEqual({ kind: "conflict" });
    // Nothing in flight now: the next request runs (and the D1 row would make it replay).
    expect((await stub.enter("k", "fp-a")).kind).toBe("run");
  });

  it("a key's requests always meet at the same object, and an account's keys spread over a few", () => {
    const claim = { accountId: "acct", scope: "POST /emails", key: "order-1" };
    expect(frontName(claim)).toBe(frontName({ ...claim }));
    expect(frontName(claim)).toMatch(/^acct\//);
    const names = new Set(Array.from({ length: 2000 }, (_, i) => frontName({ ...claim, key: `k${i}` })));
    expect(names.size).toBe(FRONT_SHARDS);
    expect(frontName({ ...claim, accountId: "other" })).not.toBe(frontName(claim));
  });

  it("DO_JURISDICTION=eu: where the runtime has no jurisdictions (locally) it is ignored with a warning, and keys still send once", async () => {
    const { results } = await storm(acct, "storm-eu", 20, { DO_JURISDICTION: "eu" } as Partial<Env>);
    expect(results.filter((r) => r.replayed === null)).toHaveLength(1);
    expect(results.filter((r) => r.replayed === "true")).toHaveLength(19);
    // The namespace the setting asks for is the one workerd cannot make locally.
    expect(() => env.IDEMPOTENCY.jurisdiction("eu")).toThrow(/not implemented in workerd/);
  });
});
