// The dashboard's costly domain actions (a DNS check, a Cloudflare set-up, a new DKIM key) spend the account's
// request rate as the API's do, so a member's repeated clicks cannot outrun it.
import { env, exports } from "cloudflare:workers";
import { expect, it } from "vitest";
import { signedIn } from "./dashboard-session.ts";
import { insertDomain } from "./fixtures.ts";

const DASH = "https://t.tern.test";

it("a domain check from the dashboard past the account's rate answers 429 with when to retry, and checks nothing", async () => {
  const owner = await signedIn("owner");
  await env.DB.prepare("UPDATE accounts SET rate_limit = 1 WHERE id = ?").bind(owner.account).run();
  const { domainId } = await insertDomain(owner.account, `rate${crypto.randomUUID().slice(0, 8)}.example.test`, { status: "pending" });
  const verify = () => exports.default.fetch(`${DASH}/dashboard/api/domains/${domainId}/verify`, {
    method: "POST", headers: { cookie: owner.cookie, origin: DASH, "x-csrf-token": owner.csrf, "content-type": "application/json" }, body: "{}",
  });
  expect((await verify()).status).toBe(200);
  const checkedAt = (await env.DB.prepare("SELECT last_checked_at FROM domains WHERE id = ?").bind(domainId).first<number>("last_checked_at"))!;
  const refused = await verify();
  expect(refused.status).toBe(429);
  expect(((await refused.json()) as { message: string }).message).toMatch(/^Too many requests: this account may make 1 request per second\. Retry after \d+ seconds?\.$/);
  expect(await env.DB.prepare("SELECT last_checked_at FROM domains WHERE id = ?").bind(domainId).first<number>("last_checked_at")).toBe(checkedAt);
});

it("a DKIM rotation from the dashboard spends the account's rate too (a new key pair is costly)", async () => {
  const owner = await signedIn("owner");
  await env.DB.prepare("UPDATE accounts SET rate_limit = 1 WHERE id = ?").bind(owner.account).run();
  const { domainId } = await insertDomain(owner.account, `rot${crypto.randomUUID().slice(0, 8)}.example.test`, { status: "verified" });
  const keys = () => env.DB.prepare("SELECT count(*) AS n FROM dkim_keys WHERE domain_id = ?").bind(domainId).first<number>("n");
  const rotate = () => exports.default.fetch(`${DASH}/dashboard/api/domains/${domainId}/rotate-dkim`, {
    method: "POST", headers: { cookie: owner.cookie, origin: DASH, "x-csrf-token": owner.csrf, "content-type": "application/json" }, body: "{}",
  });
  const first = await rotate();
  expect(first.status, await first.clone().text()).toBe(200);
  const after = await keys();
  const refused = await rotate();
  expect(refused.status).toBe(429);
  expect(await keys()).toBe(after);
});

it("a bodyless refusal from the auth library reaches the page as JSON with a message", async () => {
  const res = await exports.default.fetch(`${DASH}/dashboard/api/auth/verify-email`, { method: "POST", headers: { origin: DASH, "content-type": "application/json" }, body: "{}" });
  expect(res.status).toBeGreaterThanOrEqual(400);
  expect(res.headers.get("content-type")).toMatch(/json/);
  expect(((await res.json()) as { message: string }).message).toMatch(/\S/);
});
