// Idempotency keys (contract 4.3): a request with a key sends its email once, however many
// times it arrives and however the requests race.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { canonicalJson, fingerprint, sweepIdempotencyKeys } from "../../worker/sending/idempotency.ts";
import { KEY_LIFETIME_MS } from "../../worker/sending/key-claim.ts";
import { periodsAt } from "../../worker/sending/quota.ts";
import { performSend } from "../../worker/sending/send.ts";
import { api, countRows, createAccount, type TestAccount } from "./fixtures.ts";
import { address, capturedFor } from "./peers.ts";
import { waitFor } from "./wait.ts";

const used = async (accountId: string) =>
  (await env.DB.prepare("SELECT used FROM usage WHERE account_id = ? AND period = ?").bind(accountId, periodsAt(Date.now()).month).first<{ used: number }>())?.used ?? 0;

const keyRow = (a: TestAccount, key: string, scope = "POST /emails") =>
  env.DB.prepare("SELECT * FROM idempotency_keys WHERE account_id = ? AND scope = ? AND key = ?").bind(a.accountId, scope, key)
    .first<{ fingerprint: string; status: number; body: string; created_at: number; expires_at: number }>();

async function contentKeys(): Promise<Set<string>> {
  const keys = new Set<string>();
  let cursor: string | undefined;
  do {
    const page = await env.BLOBS.list({ prefix: "emails/", cursor });
    for (const o of page.objects) keys.add(o.key);
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return keys;
}

/** Every R2 object stored under emails/ since `before` belongs to a recorded email: a send
 * that lost (or was refused) removed what it had stored. (Other test files share the bucket.) */
async function orphanedContent(before: Set<string>): Promise<string[]> {
  const orphans: string[] = [];
  for (const k of await contentKeys()) {
    if (before.has(k)) continue;
    const id = k.split("/")[1]!;
    if (!(await env.DB.prepare("SELECT 1 FROM emails WHERE id = ?").bind(id).first())) orphans.push(k);
  }
  return orphans;
}

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
    // Exactly one answer is the first; every other 200 is a replay of it.
    expect(ok.filter((r) => r.headers.get("idempotent-replayed") === null)).toHaveLength(1);
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

  it("a body nested 100,000 deep gets its validation answer, not a 500, with or without a key", async () => {
    // The fingerprint canonicalises the whole body before anything validates it: a recursive
    // walk overflowed the stack on this body (issue 20, item 10).
    const a = await createAccount();
    const deep = (inner: string) => `${"[".repeat(100_000)}${inner}${"]".repeat(100_000)}`;
    const body = `{"from":"k@${a.domain}","to":"delivered@simulator.tern.test","subject":"s","text":"t","tags":${deep("1")}}`;
    for (const headers of [{ "idempotency-key": "deep-1" }, {}] as Record<string, string>[]) {
      const res = await api(a.token, "POST", "/emails", body, headers);
      expect(res.status).toBe(422);
      expect(((await res.json()) as { name: string }).name).toBe("validation_error");
    }
    // The same deep body under another key order is the same request: its stored answer replays.
    const objects = `{"from":"k@${a.domain}","x":${"{\"a\":".repeat(100_000)}{"b":1,"a":2}${"}".repeat(100_000)}}`;
    const reordered = `{"x":${"{\"a\":".repeat(100_000)}{"a":2,"b":1}${"}".repeat(100_000)},"from":"k@${a.domain}"}`;
    expect((await api(a.token, "POST", "/emails", objects, { "idempotency-key": "deep-2" })).status).toBe(422);
    const again = await api(a.token, "POST", "/emails", reordered, { "idempotency-key": "deep-2" });
    expect(again.status).toBe(422);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await countRows("emails", a.accountId)).toBe(0);
    expect(canonicalJson({ b: [1, { d: null, c: "x\"", e: undefined }, []], a: true, c: {} })).toBe('{"a":true,"b":[1,{"c":"x\\"","d":null},[]],"c":{}}');
  });

  it("hashes the canonical body in pieces to the digest of its whole text", async () => {
    // Long strings split into pieces: astral characters across every boundary, a lone
    // surrogate, quotes and control characters to escape, and a body of several MB.
    const astral = "a\u{1F600}".repeat(70_000);
    const body = { z: astral, a: ["\ud800", 'q"\n'.repeat(40_000), "é".repeat(3 * 1024 * 1024)], n: [1, null, true] };
    for (const req of [{ kind: "single", batchMode: "strict", body }, { kind: "batch", batchMode: "permissive", body: [body] }] as const) {
      const whole = `${req.kind}\n${req.kind === "batch" ? req.batchMode : ""}\n${JSON.stringify(JSON.parse(canonicalJson(req.body)))}`;
      expect(canonicalJson(req.body)).toBe(JSON.stringify(req.kind === "batch" ? [sorted(body)] : sorted(body)));
      const expected = Array.from(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(whole))), (b) => b.toString(16).padStart(2, "0")).join("");
      expect(await fingerprint(req)).toBe(expected);
    }
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

  it("24 hours after first use the key is forgotten and works again; the cron deletes forgotten keys", async () => {
    const a = await createAccount();
    const body = { from: `k@${a.domain}`, to: "delivered@simulator.tern.test", subject: "s", text: "t" };
    const first = (await (await sendWithKey(a, "k5", body)).json()) as { id: string };
    const row = (await keyRow(a, "k5"))!;
    expect(row.expires_at - row.created_at).toBe(KEY_LIFETIME_MS);
    expect(JSON.parse(row.body)).toEqual(first);
    // A minute before the end of the 24 hours it still replays.
    const shift = (ms: number) => env.DB.prepare("UPDATE idempotency_keys SET created_at = created_at - ?, expires_at = expires_at - ? WHERE account_id = ?").bind(ms, ms, a.accountId).run();
    await shift(KEY_LIFETIME_MS - 60_000);
    const before = await sendWithKey(a, "k5", body);
    expect(before.headers.get("idempotent-replayed")).toBe("true");
    expect(((await before.json()) as { id: string }).id).toBe(first.id);
    // Past them, the key is free again: the next request with it sends.
    await shift(60_001);
    const second = await sendWithKey(a, "k5", body);
    expect(second.status).toBe(200);
    expect(second.headers.get("idempotent-replayed")).toBeNull();
    const secondId = ((await second.json()) as { id: string }).id;
    expect(secondId).not.toBe(first.id);
    expect(await countRows("emails", a.accountId)).toBe(2);
    expect(JSON.parse((await keyRow(a, "k5"))!.body)).toEqual({ id: secondId });

    // The cron forgets expired keys and keeps live ones.
    await sendWithKey(a, "k5b", body);
    await shift(KEY_LIFETIME_MS);
    await sendWithKey(a, "k5c", body);
    expect(await sweepIdempotencyKeys(env)).toBeGreaterThanOrEqual(2);
    expect(await keyRow(a, "k5")).toBeNull();
    expect(await keyRow(a, "k5b")).toBeNull();
    expect(await keyRow(a, "k5c")).not.toBeNull();
  });

  it("the key is recorded with the emails, atomically: a send that recorded but never answered replays; a refused one leaves no key", async () => {
    const a = await createAccount();
    const before = await contentKeys();
    const body = { from: `k@${a.domain}`, to: "delivered@simulator.tern.test", subject: "s", text: "t" };
    const principal = { accountId: a.accountId, keyId: "k", permission: "full_access" as const, domainId: null, plan: "free", rateLimit: 0 };
    const req = { kind: "single" as const, body, batchMode: "strict" as const };
    // As if the Worker died right after the batch committed: the answer never left it.
    const lost = await performSend(env, principal, req, { claim: { accountId: a.accountId, scope: "POST /emails", key: "k6", fingerprint: await fingerprint(req) } });
    expect(lost.status).toBe(200);
    const retry = await sendWithKey(a, "k6", body);
    expect(retry.status).toBe(200);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(await retry.text()).toBe(lost.body);
    expect(await countRows("emails", a.accountId)).toBe(1);
    expect(await used(a.accountId)).toBe(1);

    // Refused by the quota: neither the email, nor the key, nor its content in R2 remains.
    await env.DB.prepare("INSERT INTO usage (account_id, period, used, cap) VALUES (?, ?, 100, 100) ON CONFLICT (account_id, period) DO UPDATE SET used = 100").bind(a.accountId, periodsAt(Date.now()).day).run();
    const big = { ...body, subject: "big", html: `<p>${"x".repeat(100_000)}</p>`, attachments: [{ filename: "a.txt", content: btoa("attached") }] };
    const refused = await sendWithKey(a, "k7", big);
    expect(refused.status).toBe(429);
    expect(await keyRow(a, "k7")).toBeNull();
    expect(await countRows("emails", a.accountId)).toBe(1);
    expect(await orphanedContent(before)).toEqual([]);
  });

  it("racing requests with one key and different bodies: one is recorded, the others get 409 invalid_idempotent_request", async () => {
    const a = await createAccount();
    const before = await contentKeys();
    const bodies = Array.from({ length: 20 }, (_, i) => ({ from: `k@${a.domain}`, to: "delivered@simulator.tern.test", subject: `race ${i}`, html: `<p>${"y".repeat(70_000)}</p>` }));
    const answers = await Promise.all(bodies.map((b) => sendWithKey(a, "k8", b)));
    const names = await Promise.all(answers.map(async (r) => (r.status === 200 ? "ok" : ((await r.json()) as { name: string }).name)));
    expect(names.filter((n) => n === "ok")).toHaveLength(1);
    expect(names.filter((n) => n === "invalid_idempotent_request")).toHaveLength(19);
    expect(await countRows("emails", a.accountId)).toBe(1);
    expect(await used(a.accountId)).toBe(1);
    // The losers had stored their bodies in R2 before their batch failed; none is left.
    expect(await orphanedContent(before)).toEqual([]);
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

/** The body with its keys in order, for comparing canonicalJson with JSON.stringify. */
function sorted(value: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.keys(value).sort().map((k) => [k, value[k]]));
}
