// The dashboard's costly domain actions (a DNS check, a Cloudflare set-up, a new DKIM key) spend the account's
// request rate as the API's do, so a member's repeated clicks cannot outrun it.
import { env, exports } from "cloudflare:workers";
import { expect, it } from "vitest";
import { signedIn } from "./dashboard-session.ts";
import { addKey, api, insertDomain } from "./fixtures.ts";

const DASH = "https://t.tern.test";

it("a domain check from the dashboard past the account's rate answers 429 with when to retry, and checks nothing", async () => {
  const owner = await signedIn("owner");
  await env.DB.prepare("UPDATE accounts SET rate_limit = 1 WHERE id = ?").bind(owner.account).run();
  const { domainId } = await insertDomain(owner.account, `rate${crypto.randomUUID().slice(0, 8)}.example.test`, { status: "pending" });
  const verify = (who: { cookie: string; csrf: string }) => exports.default.fetch(`${DASH}/dashboard/api/domains/${domainId}/verify`, {
    method: "POST", headers: { cookie: who.cookie, origin: DASH, "x-csrf-token": who.csrf, "content-type": "application/json" }, body: "{}",
  });
  expect((await verify(owner)).status).toBe(200);
  const checkedAt = (await env.DB.prepare("SELECT last_checked_at FROM domains WHERE id = ?").bind(domainId).first<number>("last_checked_at"))!;
  // Another person of the account (whose own bucket is full) still finds the account's spent.
  const refused = await verify(await signedIn("admin", owner.account));
  expect(refused.status).toBe(429);
  expect(((await refused.json()) as { message: string }).message).toMatch(/^Too many requests: this account may make 1 request per second\. Retry after \d+ seconds?\.$/);
  expect(await env.DB.prepare("SELECT last_checked_at FROM domains WHERE id = ?").bind(domainId).first<number>("last_checked_at")).toBe(checkedAt);
});

it("a DKIM rotation from the dashboard spends the account's rate too (a new key pair is costly)", async () => {
  const owner = await signedIn("owner");
  await env.DB.prepare("UPDATE accounts SET rate_limit = 1 WHERE id = ?").bind(owner.account).run();
  const { domainId } = await insertDomain(owner.account, `rot${crypto.randomUUID().slice(0, 8)}.example.test`, { status: "verified" });
  const keys = () => env.DB.prepare("SELECT count(*) AS n FROM dkim_keys WHERE domain_id = ?").bind(domainId).first<number>("n");
  // Ed25519: a key pair made at once, so the second request comes within the same second.
  const rotate = (who: { cookie: string; csrf: string }) => exports.default.fetch(`${DASH}/dashboard/api/domains/${domainId}/rotate-dkim`, {
    method: "POST", headers: { cookie: who.cookie, origin: DASH, "x-csrf-token": who.csrf, "content-type": "application/json" }, body: JSON.stringify({ algorithm: "ed25519" }),
  });
  const first = await rotate(owner);
  expect(first.status, await first.clone().text()).toBe(200);
  const after = await keys();
  // Another person (their own bucket full) is refused by the account's.
  const refused = await rotate(await signedIn("admin", owner.account));
  expect(refused.status).toBe(429);
  expect(((await refused.json()) as { message: string }).message).toMatch(/this account may make 1 request per second/);
  expect(await keys()).toBe(after);
});

it("a bodyless refusal from the auth library reaches the page as JSON with a message", async () => {
  const res = await exports.default.fetch(`${DASH}/dashboard/api/auth/verify-email`, { method: "POST", headers: { origin: DASH, "content-type": "application/json" }, body: "{}" });
  expect(res.status).toBeGreaterThanOrEqual(400);
  expect(res.headers.get("content-type")).toMatch(/json/);
  expect(((await res.json()) as { message: string }).message).toMatch(/\S/);
});

it("each person's changes through the dashboard have their account's rate, in a bucket of their own", async () => {
  const owner = await signedIn("owner");
  const other = await signedIn("admin", owner.account);
  await env.DB.prepare("UPDATE accounts SET rate_limit = 2 WHERE id = ?").bind(owner.account).run();
  const topic = (who: { cookie: string; csrf: string }, name: string) => exports.default.fetch(`${DASH}/dashboard/api/topics`, {
    method: "POST", headers: { cookie: who.cookie, origin: DASH, "x-csrf-token": who.csrf, "content-type": "application/json" },
    body: JSON.stringify({ name, default_subscription: "opt_in", visibility: "public" }),
  });
  const statuses = [];
  for (let i = 0; i < 4; i++) statuses.push((await topic(owner, `t${i}`)).status);
  expect(statuses.slice(0, 2)).toEqual([201, 201]);
  expect(statuses).toContain(429);
  const refused = await topic(owner, "late");
  expect(refused.status).toBe(429);
  expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
  expect(refused.headers.get("content-security-policy")).toBeTruthy();
  expect(((await refused.json()) as { message: string }).message).toMatch(/^Too many requests: each person may make 2 changes per second in the dashboard\. Retry after \d+ seconds?\.$/);
  // Another person of the account, and the account's API key, are not held by it.
  expect((await topic(other, "theirs")).status).toBe(201);
  expect((await api(await addKey(owner.account, "full_access"), "GET", "/topics")).status).toBe(200);
  const names = (await env.DB.prepare("SELECT name FROM topics WHERE account_id = ?").bind(owner.account).all<{ name: string }>()).results.map((r) => r.name);
  expect(names).not.toContain("late");
  // Reading pages spends nothing.
  for (let i = 0; i < 5; i++) expect((await exports.default.fetch(`${DASH}/dashboard/emails`, { headers: { cookie: owner.cookie } })).status).toBe(200);
});
