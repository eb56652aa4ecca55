// The hot path's budget: with the key and domain already verified in this isolate, accepting
// an email costs one D1 batch and one queue send, and nothing else.
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeAll, expect, it } from "vitest";
import { app } from "../../worker/index.ts";
import { countingD1 } from "./counting.ts";
import { createAccount, type TestAccount } from "./fixtures.ts";

let acct: TestAccount;
beforeAll(async () => {
  acct = await createAccount();
});

interface Counts { d1Batches: number; d1Queries: number; queueSends: number; r2Calls: number }

/** The real bindings, with every call that leaves the isolate counted. */
function countingEnv(counts: Counts): Env {
  const DB = countingD1(env.DB, counts);
  const SEND_QUEUE = {
    send: (body: unknown, o?: QueueSendOptions) => (counts.queueSends++, env.SEND_QUEUE_US_EAST_1.send(body, o)),
    sendBatch: (m: Iterable<MessageSendRequest>, o?: QueueSendBatchOptions) => (counts.queueSends++, env.SEND_QUEUE_US_EAST_1.sendBatch(m, o)),
  } as Queue;
  const BLOBS = new Proxy(env.BLOBS, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? (...a: unknown[]) => (counts.r2Calls++, (v as (...x: unknown[]) => unknown).apply(target, a)) : v;
    },
  });
  return { ...env, DB, SEND_QUEUE_US_EAST_1: SEND_QUEUE, BLOBS };
}

async function send(e: Env, subject: string, headers: Record<string, string> = {}) {
  const ctx = createExecutionContext();
  const res = await app.fetch(new Request("http://tern.test/emails", {
    method: "POST",
    headers: { authorization: `Bearer ${acct.token}`, "content-type": "application/json", ...headers },
    body: JSON.stringify({ from: `a@${acct.domain}`, to: ["delivered@simulator.tern.test", "delivered+2@simulator.tern.test"], subject, html: "<p>hi</p>" }),
  }), e, ctx);
  await waitOnExecutionContext(ctx);
  expect(res.status).toBe(200);
}

it("one accepted email costs one D1 batch and one queue send", async () => {
  const counts: Counts = { d1Batches: 0, d1Queries: 0, queueSends: 0, r2Calls: 0 };
  const e = countingEnv(counts);
  await send(e, "warm-up"); // first use of the key and domain in this isolate reads them
  expect(counts.d1Queries).toBeGreaterThan(0);
  Object.assign(counts, { d1Batches: 0, d1Queries: 0, queueSends: 0, r2Calls: 0 });
  await send(e, "measured");
  expect(counts).toEqual({ d1Batches: 1, d1Queries: 0, queueSends: 1, r2Calls: 0 });
  // The request's API log (GET /logs) rode in that one batch.
  const logged = await env.DB.prepare("SELECT COUNT(*) AS n FROM api_logs WHERE account_id = ? AND request_json LIKE ?").bind(acct.accountId, '%"subject":"measured"%').first<{ n: number }>();
  expect(logged!.n).toBe(1);
});

it("with a fresh Idempotency-Key too: the key's row and the API log ride in the same one batch", async () => {
  const counts: Counts = { d1Batches: 0, d1Queries: 0, queueSends: 0, r2Calls: 0 };
  const e = countingEnv(counts);
  await send(e, "keyed warm-up", { "idempotency-key": crypto.randomUUID() });
  Object.assign(counts, { d1Batches: 0, d1Queries: 0, queueSends: 0, r2Calls: 0 });
  const key = crypto.randomUUID();
  await send(e, "keyed", { "idempotency-key": key });
  expect(counts).toEqual({ d1Batches: 1, d1Queries: 0, queueSends: 1, r2Calls: 0 });
  const rows = (sql: string, ...args: unknown[]) => env.DB.prepare(sql).bind(...args).first<{ n: number }>().then((r) => r!.n);
  expect(await rows("SELECT COUNT(*) AS n FROM idempotency_keys WHERE account_id = ? AND key = ?", acct.accountId, key)).toBe(1);
  expect(await rows("SELECT COUNT(*) AS n FROM api_logs WHERE account_id = ? AND request_json LIKE ?", acct.accountId, '%"subject":"keyed"%')).toBe(1);
  // A replay sends nothing and is logged on its own, after its answer.
  await send(e, "keyed", { "idempotency-key": key });
  expect(await rows("SELECT COUNT(*) AS n FROM api_logs WHERE account_id = ? AND request_json LIKE ?", acct.accountId, '%"subject":"keyed"%')).toBe(2);
  expect(counts.queueSends).toBe(1);
});
