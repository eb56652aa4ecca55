// The dashboard's costly domain actions (a DNS check, a Cloudflare set-up) spend the account's
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
