// Idempotency keys (contract 4.3): a request with a key sends its email once, however many
// times it arrives and however the requests race.
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { LEASE_MS } from "../../durable-objects/idempotency-key.ts";
import { fingerprint, keyObjectName } from "../../worker/sending/idempotency.ts";
import { periodsAt } from "../../worker/sending/quota.ts";
import { api, countRows, createAccount, type TestAccount } from "./fixtures.ts";
import { address, capturedFor } from "./peers.ts";
import { waitFor } from "./wait.ts";

const used = async (accountId: string) =>
  (await env.DB.prepare("SELECT used FROM usage WHERE account_id = ? AND period = ?").bind(accountId, periodsAt(Date.now()).month).first<{ used: number }>())?.used ?? 0;

function sendWithKey(a: TestAccount, key: string, body: unknown, path = "/emails", headers: Record<string, string> = {}) {
  return api(a.token, "POST", path, body, { "idempotency-key": key, ...headers });
}

describe("Idempotency-Key on POST /emails", () => {
  it("50 concurrent identical requests record, send and count one email", async () => {
    const a = await createAccount();
    const to = address("once", "example.com");
    const body = { from: `k@${a.domain}`, to, subject: "once", text: "exactly once" };
    const answers = await Promise.all(Array.from({ length: 50 }, () => sendWithKey(a, "order-1234", body)));
    const ok = answers.filter((r) => r.status === 200);
    const busy = answers.filter((r) => r.status === 409);
    expect(ok.length + busy.length).toBe(50);
    expect(ok.length).toBeGreaterThanOrEqual(1);
    const ids = new Set(await Promise.all(ok.map(async (r) => ((await r.json()) as { id: string }).id)));
    expect(ids.size).toBe(1);
    for (const r of busy) expect(((await r.json()) as { name: string }).name).toBe("concurrent_idempotent_requests");
    expect(await countRows("emails", a.accountId)).toBe(1);
    expect(await used(a.accountId)).toBe(1);
    await waitFor("the message at the relay", async () => ((await capturedFor(to)).length > 0 ? true : undefined));
    await new Promise((r) => setTimeout(r, 1000));
    expect(await capturedFor(to)).toHaveLength(1);

    const replay = await sendWithKey(a, "order-1234", body);
    expect(replay.status).toBe(200);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(((await replay.json()) as { id: string }).id).toBe([...ids][0]);
    expect(await countRows("emails", a.accountId)).toBe(1);
    expect(await used(a.accountId)).toBe(1);
  });

  it("the same body with other key order and whitespace is the same request", async () => {
    const a = await createAccount();
    const first = await api(a.token, "POST", "/emails", `{"from":"k@${a.domain}","to":"delivered@simulator.tern.test","subject":"s","text":"t","tags":[{"name":"a","value":"b"}]}`, { "idempotency-key": "k1" });
    const again = await api(a.token, "POST", "/emails", `{ "tags": [ {"value":"b", "name":"a"} ], "text":"t",\n "subject":"s", "to":"delivered@simulator.tern.test", "from":"k@${a.domain}" }`, { "idempotency-key": "k1" });
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await again.json()).toEqual(await first.json());
  });

  it("a used key with a different body answers 409 and sends nothing", async () => {
    const a = await createAccount();
    await sendWithKey(a, "k2", { from: `k@${a.domain}`, to: "delivered@simulator.tern.test", subject: "one", text: "t" });
    const other = await sendWithKey(a, "k2", { from: `k@${a.domain}`, to: "delivered@simulator.tern.test", subject: "two", text: "t" });
    expect(other.status).toBe(409);
    expect(((await other.json()) as { name: string }).name).toBe("invalid_idempotent_request");
    expect(await countRows("emails", a.accountId)).toBe(1);
  });

  it("keys are scoped by account and by path", async () => {
    const a = await createAccount();
    const b = await createAccount();
    const one = { from: `k@${a.domain}`, to: "delivered@simulator.tern.test", subject: "s", text: "t" };
    expect((await sendWithKey(a, "shared", one)).status).toBe(200);
    expect((await sendWithKey(b, "shared", { ...one, from: `k@${b.domain}` })).status).toBe(200);
    const batch = await sendWithKey(a, "shared", [one], "/emails/batch");
    expect(batch.status).toBe(200);
    expect(batch.headers.get("idempotent-replayed")).toBeNull();
    expect(await countRows("emails", a.accountId)).toBe(2);
  });

  it("refuses keys that are empty or longer than 256 characters with 400", async () => {
    const a = await createAccount();
    const body = { from: `k@${a.domain}`, to: "delivered@simulator.tern.test", subject: "s", text: "t" };
    for (const key of ["", "x".repeat(257)]) {
      const res = await sendWithKey(a, key, body);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { name: string }).name).toBe("invalid_idempotency_key");
    }
    expect((await sendWithKey(a, "x".repeat(256), body)).status).toBe(200);
    expect(await countRows("emails", a.accountId)).toBe(1);
  });

  it("a 4xx validation answer is stored and replayed", async () => {
    const a = await createAccount();
    const bad = { from: `k@${a.domain}`, to: "not an address", subject: "s", text: "t" };
    const first = await sendWithKey(a, "k3", bad);
    expect(first.status).toBe(422);
    const again = await sendWithKey(a, "k3", bad);
    expect(again.status).toBe(422);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await again.json()).toEqual(await first.json());
  });

  it("a 429 releases the key; after it, the same key sends; a replay after the quota is full still replays", async () => {
    const a = await createAccount();
    await env.DB.prepare("INSERT INTO usage (account_id, period, used, cap) VALUES (?, ?, 100, 100)").bind(a.accountId, periodsAt(Date.now()).day).run();
    const body = { from: `k@${a.domain}`, to: "delivered@simulator.tern.test", subject: "s", text: "t" };
    const refused = await sendWithKey(a, "k4", body);
    expect(refused.status).toBe(429);
    await env.DB.prepare("UPDATE usage SET used = 99 WHERE account_id = ? AND period = ?").bind(a.accountId, periodsAt(Date.now()).day).run();
    const sent = await sendWithKey(a, "k4", body);
    expect(sent.status).toBe(200);
    expect(sent.headers.get("idempotent-replayed")).toBeNull();
    // The quota is full now (100 of 100 today); the replay costs nothing and still answers.
    const replay = await sendWithKey(a, "k4", body);
    expect(replay.status).toBe(200);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(await countRows("emails", a.accountId)).toBe(1);
  });

  it("24 hours after first use the key is forgotten and works again", async () => {
    const a = await createAccount();
    const body = { from: `k@${a.domain}`, to: "delivered@simulator.tern.test", subject: "s", text: "t" };
    const first = (await (await sendWithKey(a, "k5", body)).json()) as { id: string };
    const stub = env.IDEMPOTENCY.getByName(keyObjectName(a.accountId, "POST /emails", "k5"));
    const alarmAt = await runInDurableObject(stub, (_o, state) => state.storage.getAlarm());
    expect(alarmAt! - Date.now()).toBeGreaterThan(24 * 3600_000 - 60_000);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const second = await sendWithKey(a, "k5", body);
    expect(second.status).toBe(200);
    expect(second.headers.get("idempotent-replayed")).toBeNull();
    expect(((await second.json()) as { id: string }).id).not.toBe(first.id);
    expect(await countRows("emails", a.accountId)).toBe(2);
  });

  it("a first request that died is taken over after its lease, with the same email id, recorded once", async () => {
    const a = await createAccount();
    const body = { from: `k@${a.domain}`, to: "delivered@simulator.tern.test", subject: "s", text: "t" };
    const stub = env.IDEMPOTENCY.getByName(keyObjectName(a.accountId, "POST /emails", "k6"));
    const fp = await fingerprint({ kind: "single", body, batchMode: "strict" });
    // As if a first request began long ago and its Worker died before recording anything.
    const begun = await stub.begin(fp, 1, Date.now() - LEASE_MS - 1);
    expect(begun.kind).toBe("run");
    const reserved = (begun as { ids: string[] }).ids[0];
    const taken = await sendWithKey(a, "k6", body);
    expect(taken.status).toBe(200);
    expect(((await taken.json()) as { id: string }).id).toBe(reserved);
    // And as if that request had recorded after all and then died before storing its answer:
    await runInDurableObject(stub, async (_o, state) => {
      const s = (await state.storage.get<Record<string, unknown>>("state"))!;
      await state.storage.put("state", { ...s, answer: null, leaseUntil: 0 });
    });
    const again = await sendWithKey(a, "k6", body);
    expect(again.status).toBe(200);
    expect(((await again.json()) as { id: string }).id).toBe(reserved);
    expect(await countRows("emails", a.accountId)).toBe(1);
    expect(await used(a.accountId)).toBe(1);
  });
});

describe("Idempotency-Key on POST /emails/batch", () => {
  it("50 concurrent identical batches record the batch once", async () => {
    const a = await createAccount();
    const rcpts = [address("b1", "example.com"), address("b2", "example.com")];
    const body = rcpts.map((to, i) => ({ from: `k@${a.domain}`, to, subject: `b${i}`, text: "t" }));
    const answers = await Promise.all(Array.from({ length: 50 }, () => sendWithKey(a, "batch-1", body, "/emails/batch")));
    expect(answers.every((r) => r.status === 200 || r.status === 409)).toBe(true);
    const datas = await Promise.all(answers.filter((r) => r.status === 200).map(async (r) => JSON.stringify(await r.json())));
    expect(new Set(datas).size).toBe(1);
    expect(await countRows("emails", a.accountId)).toBe(2);
    expect(await used(a.accountId)).toBe(2);
    for (const to of rcpts) {
      await waitFor(`${to} at the relay`, async () => ((await capturedFor(to)).length > 0 ? true : undefined));
    }
    await new Promise((r) => setTimeout(r, 1000));
    for (const to of rcpts) expect(await capturedFor(to)).toHaveLength(1);
    const replay = await sendWithKey(a, "batch-1", body, "/emails/batch");
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(JSON.stringify(await replay.json())).toBe(datas[0]);
  });

  it("the batch mode is part of the request: the same body in another mode is a different request", async () => {
    const a = await createAccount();
    const body = [{ from: `k@${a.domain}`, to: "delivered@simulator.tern.test", subject: "s", text: "t" }];
    expect((await sendWithKey(a, "mode", body, "/emails/batch")).status).toBe(200);
    const permissive = await sendWithKey(a, "mode", body, "/emails/batch", { "x-batch-validation": "permissive" });
    expect(permissive.status).toBe(409);
  });
});
