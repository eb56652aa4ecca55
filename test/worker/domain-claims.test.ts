// Domain claims: two accounts may add the same name; a claim proves control of the zone with a
// TXT record and, once verified, deletes every other account's copy of the domain.
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { api, countRows, createAccount, type TestAccount } from "./fixtures.ts";
import { publish, unpublish } from "./zone.ts";

interface Claim { object: string; id: string; name: string; status: string; domain_id: string; region: string; record: { type: string; name: string; value: string; ttl: string }; created_at: string; expires_at: string }

let holder: TestAccount;
let claimant: TestAccount;
let bystander: TestAccount;
beforeAll(async () => {
  [holder, claimant, bystander] = await Promise.all([createAccount({ listening: true }), createAccount(), createAccount()]);
});

const json = async <T>(res: Response) => (await res.json()) as T;

describe("domain claims", () => {
  it("claim, publish the TXT record, verify: the other account's copy is gone and the claimant keeps its own", async () => {
    const name = holder.domain; // the holder's verified domain
    const res = await api(claimant.token, "POST", "/domains/claim", { name: name.toUpperCase(), region: "eu-west-1" });
    expect(res.status).toBe(201);
    const claim = await json<Claim>(res);
    expect(claim).toMatchObject({ object: "domain_claim", name, status: "pending", region: "eu-west-1", record: { type: "TXT", name, ttl: "Auto" } });
    expect(claim.record.value).toMatch(/^tern-domain-verification=[A-Za-z0-9_-]{32}$/);
    expect(Date.parse(claim.expires_at) - Date.parse(claim.created_at)).toBe(7 * 86_400_000);
    // The claim made the claimant's own domain of that name, with fresh DKIM keys.
    const own = await json<{ id: string; name: string; status: string; records: { record: string; value: string }[] }>(await api(claimant.token, "GET", `/domains/${claim.domain_id}`));
    expect(own).toMatchObject({ name, status: "not_started" });
    const holderDkim = await env.DB.prepare("SELECT public_key FROM dkim_keys WHERE domain_id = ?").bind(holder.domainId).first<{ public_key: string }>();
    expect(own.records.find((r) => r.record === "DKIM")!.value).not.toContain(holderDkim!.public_key);

    // Asking again answers the same pending claim.
    const again = await api(claimant.token, "POST", "/domains/claim", { name });
    expect(again.status).toBe(200);
    expect((await json<Claim>(again)).id).toBe(claim.id);
    expect((await json<Claim>(await api(claimant.token, "GET", `/domains/${claim.domain_id}/claim`))).id).toBe(claim.id);

    // Not published yet: still pending, nothing deleted.
    const early = await api(claimant.token, "POST", `/domains/${claim.domain_id}/claim/verify`);
    expect(early.status).toBe(200);
    expect((await json<Claim>(early)).status).toBe("pending");
    expect((await api(holder.token, "GET", `/domains/${holder.domainId}`)).status).toBe(200);

    await publish(name, "TXT", ["v=spf1 -all", claim.record.value]);
    try {
      const done = await api(claimant.token, "POST", `/domains/${claim.domain_id}/claim/verify`);
      expect((await json<Claim>(done)).status).toBe("completed");
    } finally {
      await unpublish(name, "TXT");
    }
    expect((await api(holder.token, "GET", `/domains/${holder.domainId}`)).status).toBe(404);
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM dkim_keys WHERE domain_id = ?").bind(holder.domainId).first<number>("n")).toBe(0);
    // The holder's webhooks hear of it.
    const event = await env.DB.prepare("SELECT payload_json FROM webhook_events WHERE account_id = ? AND type = 'domain.deleted'").bind(holder.accountId).first<{ payload_json: string }>();
    expect(JSON.parse(event!.payload_json).data).toMatchObject({ id: holder.domainId, name });
    expect((await api(claimant.token, "GET", `/domains/${claim.domain_id}`)).status).toBe(200);
    // Verifying a completed claim again changes nothing.
    expect((await json<Claim>(await api(claimant.token, "POST", `/domains/${claim.domain_id}/claim/verify`))).status).toBe("completed");
  });

  it("refuses a name nobody else holds, bad bodies, and another account's claim; changes nothing", async () => {
    const lonely = `lonely-${crypto.randomUUID().slice(0, 8)}.example.test`;
    const res = await api(claimant.token, "POST", "/domains/claim", { name: lonely });
    expect(res.status).toBe(422);
    expect((await json<{ message: string }>(res)).message).toContain("POST /domains");
    for (const body of [{}, { name: "not a domain" }, { name: bystander.domain, region: "mars-1" }]) {
      expect((await api(claimant.token, "POST", "/domains/claim", body)).status).toBe(422);
    }
    expect(await countRows("domain_claims", claimant.accountId)).toBe(1); // the first test's
    const claim = await json<Claim>(await api(claimant.token, "POST", "/domains/claim", { name: bystander.domain }));
    expect((await api(bystander.token, "GET", `/domains/${claim.domain_id}/claim`)).status).toBe(404);
    expect((await api(bystander.token, "POST", `/domains/${claim.domain_id}/claim/verify`)).status).toBe(404);
    expect((await api(claimant.token, "GET", `/domains/${bystander.domainId}/claim`)).status).toBe(404);
    expect((await api(claimant.token, "GET", `/domains/${crypto.randomUUID()}/claim`)).status).toBe(404);
    expect((await api(bystander.token, "GET", `/domains/${bystander.domainId}`)).status).toBe(200);
  });

  it("an expired claim cannot be verified; a new one can be started", async () => {
    const a = await createAccount();
    const claim = await json<Claim>(await api(a.token, "POST", "/domains/claim", { name: bystander.domain }));
    await env.DB.prepare("UPDATE domain_claims SET created_at = created_at - ? WHERE id = ?").bind(8 * 86_400_000, claim.id).run();
    expect((await json<Claim>(await api(a.token, "GET", `/domains/${claim.domain_id}/claim`))).status).toBe("expired");
    const res = await api(a.token, "POST", `/domains/${claim.domain_id}/claim/verify`);
    expect(res.status).toBe(422);
    const fresh = await api(a.token, "POST", "/domains/claim", { name: bystander.domain });
    expect(fresh.status).toBe(201);
    expect((await json<Claim>(fresh)).domain_id).toBe(claim.domain_id);
  });
});
