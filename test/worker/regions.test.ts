// The region table (worker/regions.ts) as every part sees it: domain creation, the records a
// domain publishes and how they are verified, and which transport carries a region's mail.
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { readConfig } from "../../worker/config.ts";
import { checkDomain, createDomain, domainView, loadDomain } from "../../worker/domains/service.ts";
import { ApiError } from "../../worker/errors.ts";
import { REGION_TABLE, REGIONS, resolveRegion } from "../../worker/regions.ts";
import { relayUrlFor } from "../../worker/transports/select.ts";
import { api, countRows, createAccount, type TestAccount } from "./fixtures.ts";
import { publishRecords, type DomainRecord } from "./zone.ts";

let acct: TestAccount;
beforeAll(async () => {
  acct = await createAccount();
});

const uniqueDomain = () => `r${crypto.randomUUID().slice(0, 8)}.zone.test`;

interface DomainAnswer {
  id: string;
  name: string;
  region: string;
  status: string;
  records: DomainRecord[];
}

async function addDomain(body: Record<string, unknown>): Promise<DomainAnswer> {
  const res = await api(acct.token, "POST", "/domains", { name: uniqueDomain(), ...body });
  expect(res.status, await res.clone().text()).toBe(201);
  return res.json();
}

describe("the region table", () => {
  it("has each region with its Durable Object hint and Workers placement", () => {
    expect(REGION_TABLE.map((r) => [r.name, r.locationHint, r.placement])).toEqual([
      ["us-east-1", "enam", "aws:us-east-1"],
      ["eu-west-1", "weur", "aws:eu-west-1"],
      ["sa-east-1", "sam", "aws:sa-east-1"],
      ["ap-northeast-1", "apac", "aws:ap-northeast-1"],
    ]);
    expect(REGIONS).toEqual(["us-east-1", "eu-west-1", "sa-east-1", "ap-northeast-1"]);
  });

  it("a region's own SPF include, bounce host, relay and transport override the deployment's", () => {
    const vars = { TRANSPORT_SA_EAST_1: "cloudflare", SPF_INCLUDE_SA_EAST_1: "_spf.SA.example", BOUNCE_HOST_SA_EAST_1: "bounces.sa.example", RELAY_URL_EU_WEST_1: "smtps://eu.example:465" };
    const defaults = { relayUrl: "smtp://relay.example:587", spfInclude: "_spf.example", bounceHost: "bounces.example" };
    expect(resolveRegion(vars, defaults, "sa-east-1")).toMatchObject({ transport: "cloudflare", spfInclude: "_spf.sa.example", bounceHost: "bounces.sa.example", relayUrl: "smtp://relay.example:587", locationHint: "sam" });
    expect(resolveRegion(vars, defaults, "eu-west-1")).toMatchObject({ transport: "smtp", spfInclude: "_spf.example", bounceHost: "bounces.example", relayUrl: "smtps://eu.example:465", jurisdiction: "eu" });
    // A name the table does not know (a row older than the table) still resolves to the defaults.
    expect(resolveRegion(vars, defaults, "us-west-2")).toMatchObject({ name: "us-west-2", transport: "smtp", relayUrl: "smtp://relay.example:587", locationHint: "enam" });
    // A transport name nobody knows is reported, not guessed.
    expect(resolveRegion({ TRANSPORT: "carrier-pigeon" }, defaults, "us-east-1").misconfigured).toMatch(/TRANSPORT_US_EAST_1 \(or TRANSPORT\) is "carrier-pigeon"/);
    const withEu = { ...env, RELAY_URL_EU_WEST_1: "smtps://eu.example:465" } as Env;
    expect(relayUrlFor(withEu, readConfig(withEu), "eu-west-1")).toBe("smtps://eu.example:465");
  });
});

describe("a domain's region", () => {
  it.each([
    ["a name not in the table", "mars-1"],
    ["a name in the wrong case", "EU-WEST-1"],
    ["a number", 5],
    ["null", null],
  ])("an unknown region (%s) answers 422 invalid_region and stores nothing", async (_what, region) => {
    const before = await countRows("domains", acct.accountId);
    const res = await api(acct.token, "POST", "/domains", { name: uniqueDomain(), region });
    expect(res.status).toBe(422);
    expect(await res.json()).toEqual({ statusCode: 422, name: "invalid_region", message: "`region` must be one of us-east-1, eu-west-1, sa-east-1, ap-northeast-1." });
    expect(await countRows("domains", acct.accountId)).toBe(before);
  });

  it("the service refuses an unknown region too (the dashboard calls it without the route's schema)", async () => {
    const input = { name: uniqueDomain(), region: "mars-1", customReturnPath: "send", openTracking: false, clickTracking: false, tls: "opportunistic" as const, receiving: false, dkimAlgorithm: "rsa" as const };
    const refused = await createDomain(env, readConfig(env), acct.accountId, input, Date.now()).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ApiError);
    expect((refused as ApiError).errorName).toBe("invalid_region");
  });

  it("is fixed at creation: PATCH refuses to change it and changes nothing", async () => {
    const d = await addDomain({ region: "sa-east-1" });
    const res = await api(acct.token, "PATCH", `/domains/${d.id}`, { region: "eu-west-1", open_tracking: true });
    expect(res.status).toBe(422);
    const err = (await res.json()) as { name: string; message: string };
    expect(err.name).toBe("validation_error");
    expect(err.message).toMatch(/^`region` cannot be changed: a domain's region is fixed when it is created/);
    const after = (await (await api(acct.token, "GET", `/domains/${d.id}`)).json()) as { region: string; open_tracking: boolean };
    expect(after).toMatchObject({ region: "sa-east-1", open_tracking: false });
  });

  it("its records name the region's SPF include and bounce host, and verification checks those", async () => {
    const regional = { ...env, SPF_INCLUDE_SA_EAST_1: "_spf.sa.tern.test", BOUNCE_HOST_SA_EAST_1: "bounces.sa.tern.test" } as Env;
    const config = readConfig(regional);
    const sa = await addDomain({ region: "sa-east-1" });
    const us = await addDomain({ region: "us-east-1" });
    const saView = domainView((await loadDomain(env.DB, acct.accountId, sa.id))!, config);
    const usView = domainView((await loadDomain(env.DB, acct.accountId, us.id))!, config);
    const spf = (v: { records: DomainRecord[] }) => v.records.filter((r) => r.record === "SPF").map((r) => r.value);
    expect(spf(saView)).toEqual(["bounces.sa.tern.test", "v=spf1 include:_spf.sa.tern.test ~all"]);
    expect(spf(usView)).toEqual(["bounces.tern.test", "v=spf1 include:_spf.tern.test ~all"]);

    // Published with the region's values, the domain verifies under the regional configuration;
    // the deployment-wide include alone would not satisfy it.
    await publishRecords(sa.name, saView.records);
    const checked = await checkDomain(regional, config, (await loadDomain(env.DB, acct.accountId, sa.id))!, Date.now());
    expect(domainView(checked, config).status).toBe("verified");
    const other = await addDomain({ region: "sa-east-1" });
    await publishRecords(other.name, other.records);
    const wrong = await checkDomain(regional, config, (await loadDomain(env.DB, acct.accountId, other.id))!, Date.now());
    expect(domainView(wrong, config).records.filter((r) => r.record === "SPF").map((r) => r.status)).not.toContain("verified");
  });
});
