// The dev DNS zone of `npm start` (dev/dns.ts) over real HTTP, read by tern's own DoH client
// and judged by tern's own rules (worker/domains): a domain added to the local D1 database, the
// way the dashboard or the API adds one, has every record it must publish answered as a match.
// The database is the migrations applied to a file where wrangler keeps its local D1 (applying
// them through wrangler itself costs half a minute on a loaded machine).
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevDns, workerHosts, type DevDns } from "../../dev/dns.ts";
import { generateDkimKey, newSelector } from "../../worker/dkim/keys.ts";
import { dohResolver } from "../../worker/domains/dns.ts";
import { dmarcOf, expectedRecords, judge } from "../../worker/domains/verification.ts";

const VARS = { BOUNCE_HOST: "bounces.dev.test", SPF_INCLUDE: "_spf.dev.test", INBOUND_MX_HOST: "inbound.dev.test", SPF_INCLUDE_EU_WEST_1: "_spf-eu.dev.test" };
let persistTo: string;
let db: DatabaseSync;
let dns: DevDns;

beforeAll(async () => {
  persistTo = mkdtempSync(join(process.env.TERN_TEST_TMP ?? tmpdir(), "dev-dns-"));
  const dir = join(persistTo, "v3", "d1", "miniflare-D1DatabaseObject");
  mkdirSync(dir, { recursive: true });
  new DatabaseSync(join(dir, "metadata.sqlite")).close(); // wrangler keeps one beside the database
  db = new DatabaseSync(join(dir, "0123abcd.sqlite"));
  const migrations = join(import.meta.dirname, "../../migrations");
  for (const f of readdirSync(migrations).filter((f) => f.endsWith(".sql")).sort()) db.exec(readFileSync(join(migrations, f), "utf8"));
  db.prepare("INSERT INTO accounts (id, name, created_at) VALUES ('acct', 'Local', 0)").run();
  dns = await startDevDns({ persistTo, port: 0, hosts: () => workerHosts(VARS), log: () => {} });
}, 120_000);

afterAll(async () => {
  await dns?.close();
  db?.close();
  rmSync(persistTo, { recursive: true, force: true });
});

/** A domain as createDomain writes it: its row and an active DKIM key. */
async function addDomain(name: string, opts: { region?: string; receiving?: boolean; algorithm?: "rsa" | "ed25519" } = {}) {
  const id = crypto.randomUUID();
  const key = await generateDkimKey(opts.algorithm ?? "rsa");
  const selector = newSelector();
  db.prepare("INSERT INTO domains (id, account_id, name, region, status, return_path, receiving, created_at) VALUES (?, 'acct', ?, ?, 'not_started', 'send', ?, 0)")
    .run(id, name, opts.region ?? "us-east-1", opts.receiving ? 1 : 0);
  db.prepare("INSERT INTO dkim_keys (id, domain_id, account_id, selector, algorithm, public_key, private_key_sealed, state, status, created_at) VALUES (?, ?, 'acct', ?, ?, ?, 'sealed', 'active', 'not_started', 0)")
    .run(crypto.randomUUID(), id, selector, opts.algorithm ?? "rsa", key.publicKey);
  return { id, selector, publicKey: key.publicKey, algorithm: opts.algorithm ?? "rsa" as const };
}

describe("the dev DNS zone", () => {
  it("answers every record of a domain added after it started, as tern judges them: all match, DMARC found", async () => {
    const hosts = await workerHosts(VARS);
    for (const [name, opts] of [["shop.example", {}], ["xn--bcher-kva.example", { region: "eu-west-1", receiving: true, algorithm: "ed25519" }]] as const) {
      const d = await addDomain(name, opts);
      const { bounceHost, spfInclude } = hosts.region(opts.region ?? "us-east-1");
      const h = { bounceHost, spfInclude, inboundMxHost: hosts.inboundMxHost };
      const expected = expectedRecords({ name, returnPath: "send", receiving: "receiving" in opts }, [{ id: "k", selector: d.selector, algorithm: d.algorithm, publicKey: d.publicKey, state: "active", status: "not_started" }], h);
      expect(expected.length).toBe("receiving" in opts ? 4 : 3);
      const resolver = dohResolver(dns.url);
      for (const e of expected) expect(judge(e, await resolver.lookup(e.fqdn, e.type), h), `${e.fqdn} ${e.type}`).toBe("match");
      expect(dmarcOf(await resolver.lookup(`_dmarc.${name}`, "TXT"), false)).toMatchObject({ found: true, policy: "none" });
    }
    // The region's own SPF include, as the Worker reads its vars.
    expect(await dohResolver(dns.url).lookup("send.xn--bcher-kva.example", "TXT")).toEqual({ kind: "records", values: ["v=spf1 include:_spf-eu.dev.test ~all"] });
  });

  it("answers NXDOMAIN for names it does not hold, and nothing for a type a held name lacks", async () => {
    await addDomain("held.example");
    const resolver = dohResolver(dns.url);
    expect(await resolver.lookup("elsewhere.example", "TXT")).toEqual({ kind: "none" });
    expect(await resolver.lookup("send.held.example", "CNAME")).toEqual({ kind: "none" });
    const raw = await (await fetch(`${dns.url}?name=elsewhere.example&type=TXT`)).json();
    expect(raw).toMatchObject({ Status: 3 });
  });

  it("answers a pending domain claim's TXT record; a deleted domain's records go", async () => {
    const d = await addDomain("claimed.example");
    db.prepare("INSERT INTO domain_claims (id, account_id, domain_id, name, region, token, status, created_at, updated_at) VALUES (?, 'acct', ?, 'claimed.example', 'us-east-1', 'tern-domain-verification=abc', 'pending', 0, 0)")
      .run(crypto.randomUUID(), d.id);
    const resolver = dohResolver(dns.url);
    const txt = await resolver.lookup("claimed.example", "TXT");
    expect(txt).toEqual({ kind: "records", values: ["tern-domain-verification=abc"] });
    db.prepare("DELETE FROM dkim_keys WHERE domain_id = ?").run(d.id);
    db.prepare("DELETE FROM domains WHERE id = ?").run(d.id);
    expect(await resolver.lookup(`${d.selector}._domainkey.claimed.example`, "TXT")).toEqual({ kind: "none" });
  });
});
