// Domains API (contract section 5) and verification over DNS-over-HTTPS against the test
// zone: every status, the 72-hour windows (time driven by the test), rotation, events, and
// the private key that never leaves the database in clear.
import { createScheduledController } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { readConfig } from "../../worker/config.ts";
import { openPrivateKey } from "../../worker/dkim/keys.ts";
import { checkDomain, loadDomain, recheckDueDomains } from "../../worker/domains/service.ts";
import { organizationalDomain } from "../../worker/domains/verification.ts";
import { buildZone, type LocalDomain, type LocalKey } from "../../dev/dns-records.ts";
import worker from "../../worker/index.ts";
import { api, countRows, createAccount, type TestAccount } from "./fixtures.ts";
import { failLookups, publish, publishRecords, unpublish, type DomainRecord } from "./zone.ts";

interface DomainAnswer {
  object: string;
  id: string;
  name: string;
  status: string;
  region: string;
  custom_return_path: string;
  records: DomainRecord[];
  dmarc: { found: boolean; policy: string | null; inherited: boolean } | null;
  [k: string]: unknown;
}

const HOUR = 3600_000;
let acct: TestAccount;
let other: TestAccount;

beforeAll(async () => {
  acct = await createAccount({ listening: true });
  other = await createAccount();
});

function uniqueDomain(): string {
  return `z${crypto.randomUUID().slice(0, 8)}.zone.test`;
}

async function addDomain(body: Record<string, unknown> = {}, token = acct.token): Promise<DomainAnswer> {
  const res = await api(token, "POST", "/domains", { name: uniqueDomain(), ...body });
  expect(res.status, await res.clone().text()).toBe(201);
  return res.json();
}

async function verify(id: string, token = acct.token): Promise<DomainAnswer> {
  const res = await api(token, "POST", `/domains/${id}/verify`);
  expect(res.status, await res.clone().text()).toBe(200);
  return res.json();
}

async function get(id: string): Promise<DomainAnswer> {
  return (await api(acct.token, "GET", `/domains/${id}`)).json();
}

/** A check at a chosen time, the way the cron runs it. */
async function checkAt(id: string, now: number): Promise<DomainAnswer> {
  const d = await loadDomain(env.DB, acct.accountId, id);
  await checkDomain(env, readConfig(env), d!, now);
  return get(id);
}

const statusOf = (d: DomainAnswer) => Object.fromEntries(d.records.map((r) => [`${r.record}:${r.type}`, r.status]));

describe("POST /domains", () => {
  it("creates a domain with its DKIM key and the record set to publish", async () => {
    const d = await addDomain({ region: "eu-west-1" });
    expect(d).toMatchObject({ object: "domain", status: "not_started", region: "eu-west-1", custom_return_path: "send", open_tracking: false, click_tracking: false, tls: "opportunistic", receiving: false, dmarc: null });
    const dkim = d.records.find((r) => r.record === "DKIM")!;
    expect(dkim).toMatchObject({ type: "TXT", ttl: "Auto", status: "not_started" });
    expect(dkim.name).toMatch(/^tern[0-9a-f]{8}\._domainkey$/);
    expect(dkim.value).toMatch(/^v=DKIM1; k=rsa; p=[A-Za-z0-9+/]+=*$/);
    // RSA 2048: the SubjectPublicKeyInfo is 294 bytes.
    expect(atob(dkim.value.split("p=")[1]!).length).toBe(294);
    expect(d.records.filter((r) => r.record === "SPF")).toEqual([
      { record: "SPF", name: "send", type: "MX", ttl: "Auto", status: "not_started", value: "bounces.tern.test", priority: 10 },
      { record: "SPF", name: "send", type: "TXT", ttl: "Auto", status: "not_started", value: "v=spf1 include:_spf.tern.test ~all" },
    ]);
    expect(d.records.some((r) => r.record === "Receiving")).toBe(false);
    const events = await env.DB.prepare("SELECT type, json_extract(payload_json, '$.data.id') AS object_id FROM webhook_events WHERE account_id = ? AND json_extract(payload_json, '$.data.id') = ?").bind(acct.accountId, d.id).all();
    expect(events.results).toEqual([{ type: "domain.created", object_id: d.id }]);
  });

  it("takes a custom return path, receiving, Ed25519 and dual keys; normalises the name", async () => {
    const d = await addDomain({ name: `  Mail.${uniqueDomain().toUpperCase()}. `, custom_return_path: "Bounces", receiving: true, dkim_algorithm: "rsa+ed25519" });
    expect(d.name).toMatch(/^mail\.z[0-9a-f]{8}\.zone\.test$/);
    const dkim = d.records.filter((r) => r.record === "DKIM");
    expect(dkim.map((r) => r.value.match(/k=(\w+)/)![1]).sort()).toEqual(["ed25519", "rsa"]);
    // Ed25519's p= is the raw 32-byte key.
    expect(atob(dkim.find((r) => r.value.includes("k=ed25519"))!.value.split("p=")[1]!).length).toBe(32);
    expect(d.records.filter((r) => r.record === "SPF").every((r) => r.name === "bounces")).toBe(true);
    expect(d.records.find((r) => r.record === "Receiving")).toEqual({ record: "Receiving", name: "@", type: "MX", ttl: "Auto", status: "not_started", value: "inbound.tern.test", priority: 10 });
    const idn = await addDomain({ name: `bücher-${crypto.randomUUID().slice(0, 6)}.zone.test` });
    expect(idn.name).toMatch(/^xn--bcher-.*\.zone\.test$/);
  });

  it.each([
    ["no name", {}, 422, "missing_required_field|validation_error"],
    ["a name that is not a string", { name: 42 }, 422, "validation_error"],
    ["one label", { name: "localhost" }, 422, "validation_error"],
    ["an IP address", { name: "192.168.1.10" }, 422, "validation_error"],
    ["a URL", { name: "https://example.com/x" }, 422, "validation_error"],
    ["an address", { name: "me@example.com" }, 422, "validation_error"],
    ["a bad label", { name: "-bad-.example.com" }, 422, "validation_error"],
    ["a long label", { name: `${"a".repeat(64)}.example.com` }, 422, "validation_error"],
    ["a percent-escape (the URL parser would decode it)", { name: "ex%61mple.org" }, 422, "validation_error"],
    ["an unknown region", { name: "ok.example.com", region: "mars-1" }, 422, "invalid_region"],
    ["a bad return path", { name: "ok.example.com", custom_return_path: "not valid!" }, 422, "validation_error"],
    ["a bad tls", { name: "ok.example.com", tls: "always" }, 422, "validation_error"],
    ["a bad algorithm", { name: "ok.example.com", dkim_algorithm: "dsa" }, 422, "validation_error"],
    ["tracking not boolean", { name: "ok.example.com", open_tracking: "yes" }, 422, "validation_error"],
  ])("refuses %s and stores nothing", async (_what, body, status, name) => {
    const before = await countRows("domains", acct.accountId);
    const res = await api(acct.token, "POST", "/domains", body);
    expect(res.status).toBe(status);
    const err = (await res.json()) as { name: string; message: string; statusCode: number };
    expect(err.name).toMatch(new RegExp(`^(${name})$`));
    expect(err.statusCode).toBe(status);
    expect(await countRows("domains", acct.accountId)).toBe(before);
  });

  it("refuses names whose records could not be published: each record's name must fit DNS's 253 characters", async () => {
    // Four labels of 56 and one of 5: a name of 229 characters, the longest whose DKIM record fits.
    const longest = (n: number) => [..."abcd"].map((ch) => ch.repeat(56)).join(".") + "." + "e".repeat(n - 4 * 57);
    const refused = async (body: Record<string, unknown>, message: RegExp) => {
      const before = await countRows("domains", acct.accountId);
      const res = await api(acct.token, "POST", "/domains", body);
      expect(res.status).toBe(422);
      expect(((await res.json()) as { message: string }).message).toMatch(message);
      expect(await countRows("domains", acct.accountId)).toBe(before);
    };
    expect(longest(230)).toHaveLength(230);
    await refused({ name: longest(230) }, /^`name` is too long: its DKIM record \(<selector>\._domainkey\.a+\.\.\.\) would be 254 characters, past DNS's 253\. A domain name may have at most 229 characters\.$/);
    const name = `x${crypto.randomUUID().slice(0, 4)}` + longest(229).slice(5);
    await refused({ name, custom_return_path: "bounces-and-more-x".repeat(2) }, /^`custom_return_path` is too long for this domain: .* would be 266 characters, past DNS's 253\. Use a label of at most 23 characters\.$/);
    await refused({ name, tracking_subdomain: "t".repeat(24) }, /^`tracking_subdomain` is too long for this domain: t+\.<domain> would be 254 characters/);
    const made = await api(acct.token, "POST", "/domains", { name, custom_return_path: "s".repeat(23) });
    expect(made.status, await made.clone().text()).toBe(201);
    const d = (await made.json()) as DomainAnswer;
    const patched = await api(acct.token, "PATCH", `/domains/${d.id}`, { tracking_subdomain: "t".repeat(24) });
    expect(patched.status).toBe(422);
    expect(((await patched.json()) as { message: string }).message).toMatch(/^`tracking_subdomain` is too long for this domain/);
    expect((await api(acct.token, "PATCH", `/domains/${d.id}`, { tracking_subdomain: "t".repeat(23) })).status).toBe(200);
  });

  it("refuses malformed JSON, and a domain the account already has", async () => {
    expect((await api(acct.token, "POST", "/domains", "{nope")).status).toBe(400);
    const d = await addDomain();
    const again = await api(acct.token, "POST", "/domains", { name: d.name.toUpperCase() });
    expect(again.status).toBe(422);
    expect(((await again.json()) as { message: string }).message).toContain("already been added");
    // Another account may add the same name: verification proves who controls it.
    expect((await api(other.token, "POST", "/domains", { name: d.name })).status).toBe(201);
  });

  it("a sending_access key cannot manage domains", async () => {
    const { addKey } = await import("./fixtures.ts");
    const sending = await addKey(acct.accountId, "sending_access");
    expect((await api(sending, "POST", "/domains", { name: uniqueDomain() })).status).toBe(401);
    expect((await api(sending, "GET", "/domains")).status).toBe(401);
  });
});

describe("reading, changing and deleting", () => {
  it("lists the account's domains only, newest first, with cursors", async () => {
    const a = await addDomain();
    const b = await addDomain();
    const list = (await (await api(acct.token, "GET", "/domains?limit=2")).json()) as { object: string; data: { id: string; name: string; status: string; region: string }[]; has_more: boolean };
    expect(list.object).toBe("list");
    expect(list.data.map((d) => d.id)).toEqual([b.id, a.id]);
    expect(list.data[0]).toEqual({
      id: b.id, name: b.name, status: "not_started", created_at: expect.any(String), region: "us-east-1",
      open_tracking: false, click_tracking: false, capabilities: { sending: "enabled", receiving: "disabled" },
    });
    const theirs = (await (await api(other.token, "GET", "/domains")).json()) as { data: { id: string }[] };
    expect(theirs.data.map((d) => d.id)).not.toContain(a.id);
    expect((await api(other.token, "GET", `/domains/${a.id}`)).status).toBe(404);
    expect((await api(other.token, "PATCH", `/domains/${a.id}`, { open_tracking: true })).status).toBe(404);
    expect((await api(other.token, "DELETE", `/domains/${a.id}`)).status).toBe(404);
    expect((await api(other.token, "POST", `/domains/${a.id}/verify`)).status).toBe(404);
    expect((await api(other.token, "POST", `/domains/${a.id}/dkim/rotate`)).status).toBe(404);
  });

  it("PATCH changes tracking and TLS, refuses unknown fields, and records domain.updated", async () => {
    const d = await addDomain();
    const res = await api(acct.token, "PATCH", `/domains/${d.id}`, { open_tracking: true, click_tracking: true, tls: "enforced" });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ id: d.id, open_tracking: true, click_tracking: true, tls: "enforced" });
    expect(await get(d.id)).toMatchObject({ open_tracking: true, click_tracking: true, tls: "enforced" });
    expect((await api(acct.token, "PATCH", `/domains/${d.id}`, { name: "other.example.com" })).status).toBe(422);
    expect((await api(acct.token, "PATCH", `/domains/${d.id}`, { tls: "sometimes" })).status).toBe(422);
    const types = await env.DB.prepare("SELECT type FROM webhook_events WHERE json_extract(payload_json, '$.data.id') = ? ORDER BY id").bind(d.id).all<{ type: string }>();
    expect(types.results.map((r) => r.type)).toEqual(["domain.created", "domain.updated"]);
  });

  it("DELETE removes the domain and its keys, records domain.deleted, and answers 404 after", async () => {
    const d = await addDomain();
    const res = await api(acct.token, "DELETE", `/domains/${d.id}`);
    expect(await res.json()).toEqual({ object: "domain", id: d.id, deleted: true });
    expect((await api(acct.token, "GET", `/domains/${d.id}`)).status).toBe(404);
    expect((await api(acct.token, "DELETE", `/domains/${d.id}`)).status).toBe(404);
    const keys = await env.DB.prepare("SELECT count(*) AS n FROM dkim_keys WHERE domain_id = ?").bind(d.id).first<{ n: number }>();
    expect(keys!.n).toBe(0);
    const types = await env.DB.prepare("SELECT type FROM webhook_events WHERE json_extract(payload_json, '$.data.id') = ? ORDER BY id").bind(d.id).all<{ type: string }>();
    expect(types.results.map((r) => r.type)).toEqual(["domain.created", "domain.deleted"]);
  });
});

describe("the DKIM private key", () => {
  it("is stored sealed, never in clear, and appears in no answer", async () => {
    const d = await addDomain({ dkim_algorithm: "rsa+ed25519" });
    const rows = await env.DB.prepare("SELECT * FROM dkim_keys WHERE domain_id = ?").bind(d.id).all<Record<string, string>>();
    expect(rows.results).toHaveLength(2);
    const answers = [
      JSON.stringify(d),
      await (await api(acct.token, "GET", `/domains/${d.id}`)).text(),
      await (await api(acct.token, "GET", "/domains")).text(),
      await (await api(acct.token, "POST", `/domains/${d.id}/verify`)).text(),
      await (await api(acct.token, "PATCH", `/domains/${d.id}`, { open_tracking: true })).text(),
      await (await api(acct.token, "POST", `/domains/${d.id}/dkim/rotate`)).text(),
    ];
    const events = await env.DB.prepare("SELECT payload_json AS data_json FROM webhook_events WHERE json_extract(payload_json, '$.data.id') = ?").bind(d.id).all<{ data_json: string }>();
    for (const row of rows.results) {
      const sealed = row.private_key_sealed!;
      expect(sealed).toMatch(/^v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
      // No column holds a private key in clear: none imports as PKCS#8, as base64 or raw text.
      for (const value of Object.values(row)) {
        const b64 = String(value).replace(/[^A-Za-z0-9+/]/g, "");
        const decoded = Uint8Array.from(atob(b64.slice(0, b64.length - (b64.length % 4))), (c) => c.charCodeAt(0));
        for (const bytes of [decoded, new TextEncoder().encode(String(value))]) {
          for (const alg of [{ name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, { name: "Ed25519" }]) {
            await expect(crypto.subtle.importKey("pkcs8", bytes, alg, false, ["sign"])).rejects.toThrow();
          }
        }
      }
      // It opens only with the master key, and only for its own domain and selector.
      const key = await openPrivateKey(env.MASTER_KEY, { domainId: d.id, selector: row.selector!, algorithm: row.algorithm as "rsa", privateKeySealed: sealed });
      expect(key.extractable).toBe(false);
      await expect(openPrivateKey("another-master-key-that-is-long-enough-123", { domainId: d.id, selector: row.selector!, algorithm: row.algorithm as "rsa", privateKeySealed: sealed })).rejects.toThrow();
      await expect(openPrivateKey(env.MASTER_KEY, { domainId: other.domainId, selector: row.selector!, algorithm: row.algorithm as "rsa", privateKeySealed: sealed })).rejects.toThrow();
      for (const text of [...answers, ...events.results.map((e) => e.data_json)]) {
        expect(text).not.toContain(sealed.split(".")[2]!.slice(0, 40));
        expect(text).not.toMatch(/private|pkcs8|MIIE/i);
      }
    }
  });
});

describe("verification over DNS", () => {
  it("moves through pending, partially_verified and verified as records are published", async () => {
    const d = await addDomain();
    let v = await verify(d.id);
    expect(v.status).toBe("pending");
    expect(new Set(v.records.map((r) => r.status))).toEqual(new Set(["pending"]));

    await publishRecords(d.name, d.records, (r) => r.record === "DKIM");
    v = await verify(d.id);
    expect(v.status).toBe("partially_verified");
    expect(statusOf(v)).toEqual({ "DKIM:TXT": "verified", "SPF:MX": "pending", "SPF:TXT": "pending" });

    await publishRecords(d.name, d.records);
    v = await verify(d.id);
    expect(v.status).toBe("verified");
    expect(statusOf(v)).toEqual({ "DKIM:TXT": "verified", "SPF:MX": "verified", "SPF:TXT": "verified" });
  });

  it("a wrong value fails its record at once; two SPF records are a failure too", async () => {
    const d = await addDomain();
    await publishRecords(d.name, d.records);
    const dkim = d.records.find((r) => r.record === "DKIM")!;
    await publish(`${dkim.name}.${d.name}`, "TXT", ["v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAwrong"]);
    await publish(`send.${d.name}`, "TXT", ["v=spf1 include:_spf.tern.test ~all", "v=spf1 include:other.example ~all"]);
    const v = await verify(d.id);
    expect(v.status).toBe("partially_verified");
    expect(statusOf(v)).toEqual({ "DKIM:TXT": "failed", "SPF:MX": "verified", "SPF:TXT": "failed" });
    // Fixed: verified. The include may sit among other mechanisms, and the key's TXT may be
    // split in chunks with spaces in p= (it is published as 255-character strings).
    await publish(`${dkim.name}.${d.name}`, "TXT", [dkim.value.replace("p=", "p= ")]);
    await publish(`send.${d.name}`, "TXT", ["v=spf1 ip4:192.0.2.1 include:_spf.tern.test -all", "some-other-verification=1"]);
    expect((await verify(d.id)).status).toBe("verified");
  });

  it("a new domain gets 72 hours: then failed, or partially_failed when some records were found", async () => {
    const t0 = Date.now();
    const none = await addDomain();
    expect((await verify(none.id)).status).toBe("pending");
    expect((await checkAt(none.id, t0 + 71 * HOUR)).status).toBe("pending");
    const failed = await checkAt(none.id, t0 + 73 * HOUR);
    expect(failed.status).toBe("failed");
    expect(new Set(failed.records.map((r) => r.status))).toEqual(new Set(["failed"]));
    // The cron no longer checks it; verifying again opens a new window.
    expect((await env.DB.prepare("SELECT next_check_at FROM domains WHERE id = ?").bind(none.id).first<{ next_check_at: number | null }>())!.next_check_at).toBeNull();
    expect((await verify(none.id)).status).toBe("pending");

    const some = await addDomain();
    await publishRecords(some.name, some.records, (r) => r.type === "MX");
    expect((await verify(some.id)).status).toBe("partially_verified");
    expect((await checkAt(some.id, t0 + 73 * HOUR)).status).toBe("partially_failed");
  });

  it("a verified domain whose records vanish is temporary_failure for 72 hours, then failed", async () => {
    const t0 = Date.now();
    const d = await addDomain();
    await publishRecords(d.name, d.records);
    expect((await verify(d.id)).status).toBe("verified");

    await unpublish(`send.${d.name}`, "TXT");
    let v = await checkAt(d.id, t0 + HOUR);
    expect(v.status).toBe("temporary_failure");
    expect(statusOf(v)).toEqual({ "DKIM:TXT": "verified", "SPF:MX": "verified", "SPF:TXT": "temporary_failure" });
    // It keeps sending meanwhile: the records may come back.
    const send = await api(acct.token, "POST", "/emails", { from: `a@${d.name}`, to: "delivered@simulator.tern.test", subject: "still", text: "x" });
    expect(send.status).toBe(200);

    // They come back within the window: verified again.
    await publishRecords(d.name, d.records);
    expect((await checkAt(d.id, t0 + 2 * HOUR)).status).toBe("verified");

    // They vanish again and stay away past 72 hours: failed, and sending stops.
    await unpublish(`${d.records[0]!.name}.${d.name}`, "TXT");
    expect((await checkAt(d.id, t0 + 3 * HOUR)).status).toBe("temporary_failure");
    expect((await checkAt(d.id, t0 + 50 * HOUR)).status).toBe("temporary_failure");
    v = await checkAt(d.id, t0 + 76 * HOUR);
    expect(v.status).toBe("failed");
    expect(statusOf(v)["DKIM:TXT"]).toBe("failed");
    await new Promise((r) => setTimeout(r, 5_100)); // the sender cache (5 s) forgets the domain
    const refused = await api(acct.token, "POST", "/emails", { from: `a@${d.name}`, to: "delivered@simulator.tern.test", subject: "no", text: "x" });
    expect(refused.status).toBe(403);
  });

  it("a resolver failure changes nothing; the next good answer counts", async () => {
    const d = await addDomain();
    await publishRecords(d.name, d.records);
    expect((await verify(d.id)).status).toBe("verified");
    await failLookups(`send.${d.name}`, "servfail");
    try {
      const v = await checkAt(d.id, Date.now() + HOUR);
      expect(v.status).toBe("verified");
      expect(statusOf(v)["SPF:TXT"]).toBe("verified");
    } finally {
      await failLookups(`send.${d.name}`, null);
    }
  });

  it("reports the DMARC policy: the domain's own, or its organizational domain's", async () => {
    const d = await addDomain();
    expect((await verify(d.id)).dmarc).toEqual({ found: false, policy: null, record: null, inherited: false });
    await publish(`_dmarc.${d.name}`, "TXT", ["v=DMARC1; p=quarantine; rua=mailto:d@example.com"]);
    expect((await verify(d.id)).dmarc).toMatchObject({ found: true, policy: "quarantine", inherited: false });
    // A subdomain without its own record is covered by the organizational domain's (sp=).
    const org = `o${crypto.randomUUID().slice(0, 8)}.test`;
    await publish(`_dmarc.${org}`, "TXT", ["v=DMARC1; p=none; sp=reject"]);
    const sub = await addDomain({ name: `mail.${org}` });
    expect((await verify(sub.id)).dmarc).toMatchObject({ found: true, policy: "reject", inherited: true });
    // The organizational domain is found by the Public Suffix List: under co.uk it is
    // example.co.uk, not co.uk (whose record, here, would say otherwise).
    const uk = `u${crypto.randomUUID().slice(0, 8)}.co.uk`;
    await publish(`_dmarc.${uk}`, "TXT", ["v=DMARC1; p=none; sp=quarantine"]);
    await publish("_dmarc.co.uk", "TXT", ["v=DMARC1; p=reject"]);
    const ukSub = await addDomain({ name: `mail.${uk}` });
    expect((await verify(ukSub.id)).dmarc).toMatchObject({ found: true, policy: "quarantine", inherited: true, record: "v=DMARC1; p=none; sp=quarantine" });
    // DMARC is recommended, not required.
    await publishRecords(d.name, d.records);
    await unpublish(`_dmarc.${d.name}`);
    expect((await verify(d.id)).status).toBe("verified");
  });

  it("what the dev DNS zone of `npm start` publishes (dev/dns-records.ts) verifies a new domain, DMARC included", async () => {
    // An organizational domain of its own: the zone puts DMARC there, and zone.test's record
    // would be every other test's.
    const d = await addDomain({ name: `x${crypto.randomUUID().slice(0, 8)}.test`, receiving: true, dkim_algorithm: "rsa+ed25519" });
    const domains = (await env.DB.prepare("SELECT id, name, region, return_path AS returnPath, receiving FROM domains WHERE id = ?").bind(d.id).all<Omit<LocalDomain, "receiving"> & { receiving: number }>()).results;
    const keys = (await env.DB.prepare("SELECT id, domain_id AS domainId, selector, algorithm, public_key AS publicKey, state, status FROM dkim_keys WHERE domain_id = ?").bind(d.id).all<LocalKey>()).results;
    const zone = buildZone(domains.map((r) => ({ ...r, receiving: Boolean(r.receiving) })), keys, [], readConfig(env));
    for (const [key, values] of zone) {
      const [name, type] = key.split(" ") as [string, "TXT" | "MX"];
      await publish(name, type, values);
    }
    const v = await verify(d.id);
    expect(v.status).toBe("verified");
    expect(v.records.map((r) => r.status)).toEqual(v.records.map(() => "verified"));
    expect(v.dmarc).toMatchObject({ found: true, policy: "none", inherited: false });
  });

  it("the organizational domain is one label under the public suffix", () => {
    expect(organizationalDomain("mail.example.com")).toBe("example.com");
    expect(organizationalDomain("a.b.example.co.uk")).toBe("example.co.uk");
    expect(organizationalDomain("news.someone.github.io")).toBe("someone.github.io");
    expect(organizationalDomain("Mail.Example.COM.")).toBe("example.com");
    expect(organizationalDomain("mail.xn--bcher-kva.de")).toBe("xn--bcher-kva.de");
    expect(organizationalDomain("mail.example.test")).toBe("example.test");
    // Itself an organizational domain, or a suffix: nowhere else to look.
    expect(organizationalDomain("example.com")).toBeNull();
    expect(organizationalDomain("example.co.uk")).toBeNull();
    expect(organizationalDomain("co.uk")).toBeNull();
  });

  it("receiving adds the Receiving MX, with its own status (the domain's is about sending)", async () => {
    const d = await addDomain();
    await publishRecords(d.name, d.records);
    expect((await verify(d.id)).status).toBe("verified");
    const res = await api(acct.token, "PATCH", `/domains/${d.id}`, { receiving: true });
    const v = (await res.json()) as DomainAnswer;
    expect(v.records.find((r) => r.record === "Receiving")).toMatchObject({ status: "pending", value: "inbound.tern.test" });
    expect(v.status).toBe("verified");
    await publish(d.name, "MX", ["10 inbound.tern.test"]);
    const after = await verify(d.id);
    expect(after.status).toBe("verified");
    expect(after.records.find((r) => r.record === "Receiving")!.status).toBe("verified");
  });

  it("the cron re-checks pending domains on schedule until they verify", async () => {
    const d = await addDomain();
    expect((await verify(d.id)).status).toBe("pending");
    await publishRecords(d.name, d.records);
    const row = await env.DB.prepare("SELECT next_check_at FROM domains WHERE id = ?").bind(d.id).first<{ next_check_at: number }>();
    expect(row!.next_check_at).toBeGreaterThan(Date.now());
    expect(row!.next_check_at).toBeLessThanOrEqual(Date.now() + 5 * 60_000);
    // Not due yet: the cron leaves it alone.
    await recheckDueDomains(env, readConfig(env), Date.now());
    expect((await get(d.id)).status).toBe("pending");
    // Due: checked and verified. (Other files' domains may be due too; run until ours is done.)
    for (let i = 0; i < 10 && (await get(d.id)).status !== "verified"; i++) {
      await recheckDueDomains(env, readConfig(env), row!.next_check_at + 1);
    }
    expect((await get(d.id)).status).toBe("verified");
  });

  it("the scheduled handler runs the domain checks", async () => {
    const d = await addDomain();
    await verify(d.id);
    await publishRecords(d.name, d.records);
    await env.DB.prepare("UPDATE domains SET next_check_at = 0 WHERE id = ?").bind(d.id).run();
    await worker.scheduled(createScheduledController({ scheduledTime: Date.now(), cron: "* * * * *" }), env);
    expect((await get(d.id)).status).toBe("verified");
  });
});

describe("DKIM rotation", () => {
  it("publishes a new selector, keeps signing with the old one until the new record is verified", async () => {
    const d = await addDomain();
    await publishRecords(d.name, d.records);
    expect((await verify(d.id)).status).toBe("verified");
    const oldSelector = d.records.find((r) => r.record === "DKIM")!.name;

    const rotated = (await (await api(acct.token, "POST", `/domains/${d.id}/dkim/rotate`)).json()) as DomainAnswer;
    const dkims = rotated.records.filter((r) => r.record === "DKIM");
    expect(dkims.map((r) => [r.name, r.status])).toEqual([[oldSelector, "verified"], [expect.stringMatching(/^tern[0-9a-f]{8}\._domainkey$/), "not_started"]]);
    const next = dkims[1]!;
    expect(next.name).not.toBe(oldSelector);

    // Not published yet: still verified, still the old key, the new one pending.
    let v = await verify(d.id);
    expect(v.status).toBe("verified");
    expect(v.records.filter((r) => r.record === "DKIM").map((r) => r.status)).toEqual(["verified", "pending"]);
    const active = () => env.DB.prepare("SELECT selector FROM dkim_keys WHERE domain_id = ? AND state = 'active'").bind(d.id).all<{ selector: string }>();
    expect((await active()).results.map((r) => `${r.selector}._domainkey`)).toEqual([oldSelector]);

    // Published: the new key takes over, the old one retires and leaves the record set.
    await publishRecords(d.name, [next]);
    v = await verify(d.id);
    expect(v.status).toBe("verified");
    expect(v.records.filter((r) => r.record === "DKIM").map((r) => [r.name, r.status])).toEqual([[next.name, "verified"]]);
    expect((await active()).results.map((r) => `${r.selector}._domainkey`)).toEqual([next.name]);
    // The old record can now go without harm.
    await unpublish(`${oldSelector}.${d.name}`);
    expect((await verify(d.id)).status).toBe("verified");
  });
});

describe("DKIM rotation to another algorithm", () => {
  it("RSA to Ed25519: the new key replaces the old one, which can then be unpublished", async () => {
    const d = await addDomain();
    await publishRecords(d.name, d.records);
    expect((await verify(d.id)).status).toBe("verified");
    const oldName = d.records.find((r) => r.record === "DKIM")!.name;
    const rotated = (await (await api(acct.token, "POST", `/domains/${d.id}/dkim/rotate`, { algorithm: "ed25519" })).json()) as DomainAnswer;
    const next = rotated.records.filter((r) => r.record === "DKIM").find((r) => r.value.includes("k=ed25519"))!;
    await publishRecords(d.name, [next]);
    const v = await verify(d.id);
    expect(v.records.filter((r) => r.record === "DKIM").map((r) => [r.name, r.status])).toEqual([[next.name, "verified"]]);
    const states = await env.DB.prepare("SELECT algorithm, state FROM dkim_keys WHERE domain_id = ? ORDER BY created_at").bind(d.id).all<{ algorithm: string; state: string }>();
    expect(states.results).toEqual([{ algorithm: "rsa", state: "retired" }, { algorithm: "ed25519", state: "active" }]);
    await unpublish(`${oldName}.${d.name}`);
    expect((await checkAt(d.id, Date.now() + 7 * HOUR)).status).toBe("verified");
  });

  it("a dual-key domain rotating its RSA key keeps its Ed25519 key", async () => {
    const d = await addDomain({ dkim_algorithm: "rsa+ed25519" });
    await publishRecords(d.name, d.records);
    expect((await verify(d.id)).status).toBe("verified");
    const rotated = (await (await api(acct.token, "POST", `/domains/${d.id}/dkim/rotate`, { algorithm: "rsa" })).json()) as DomainAnswer;
    const known = new Set(d.records.map((r) => r.name));
    const next = rotated.records.find((r) => r.record === "DKIM" && !known.has(r.name))!;
    await publishRecords(d.name, [next]);
    await verify(d.id);
    const states = await env.DB.prepare("SELECT algorithm, state FROM dkim_keys WHERE domain_id = ? AND state = 'active' ORDER BY algorithm").bind(d.id).all<{ algorithm: string }>();
    expect(states.results.map((r) => r.algorithm)).toEqual(["ed25519", "rsa"]);
  });
});

describe("a deployment without MASTER_KEY", () => {
  it("answers the contract's 500 naming the missing secret (never a value), for domains and webhooks alike, and stores nothing", async () => {
    const { MASTER_KEY: _omitted, ...withoutKey } = env;
    const call = (path: string, body: unknown) =>
      worker.fetch(new Request(`http://tern.test${path}`, { method: "POST", headers: { authorization: `Bearer ${acct.token}`, "content-type": "application/json" }, body: JSON.stringify(body) }), withoutKey as Env, {} as ExecutionContext);
    const before = await countRows("domains", acct.accountId);
    for (const [path, body] of [["/domains", { name: uniqueDomain() }], ["/webhooks", { endpoint: "https://hooks.example.com/x", events: ["email.sent"] }]] as const) {
      const res = await call(path, body);
      expect(res.status).toBe(500);
      expect(await res.json()).toEqual({ statusCode: 500, name: "application_error", message: expect.stringMatching(/no MASTER_KEY secret configured/) });
    }
    expect(await countRows("domains", acct.accountId)).toBe(before);
  });
});
