// Setting a domain's DNS up at Cloudflare in one step (POST /domains/{id}/auto-configure and the
// domain page's form): the records tern expects are created in the tenant's zone, those already
// there are left, anything else in the way is reported and never touched, and the token the
// tenant hands over is used for that request only. Cloudflare is the loopback stand-in of
// test/support/cloudflare-zones.ts, which publishes what its zones hold into the test DNS zone:
// the check that follows verifies the domain over DNS for real.
import { env, exports } from "cloudflare:workers";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { planRecord } from "../../worker/domains/auto-configure.ts";
import type { CloudflareDnsRecord } from "../../worker/domains/cloudflare-dns.ts";
import type { ExpectedRecord } from "../../worker/domains/verification.ts";
import { signedIn } from "./dashboard-session.ts";
import { addKey, api, createAccount, type TestAccount } from "./fixtures.ts";
import { waitFor } from "./wait.ts";
import { publish } from "./zone.ts";

interface ZoneMade { id: string; name: string; tokens: { edit: string; read: string; zone: string } }
interface CfRecord { id: string; name: string; type: string; content: string; priority?: number; proxied: boolean; ttl: number; comment: string | null }
interface ZoneState { records: CfRecord[]; seen: { method: string; path: string; body: string; authorization: string }[] }
interface Outcome { record: string; name: string; type: string; value: string; priority?: number; result: string; detail?: string }
interface Answer { object: string; id: string; zone: { id: string; name: string }; records: Outcome[]; domain: { id: string; status: string; records: { record: string; status: string }[] } }

const DASH = "https://t.tern.test";
const cf = (path: string, init?: RequestInit) => fetch(`http://127.0.0.1:${env.TEST_PEERS.cloudflare}${path}`, init);

async function makeZone(name: string, records: Record<string, unknown>[] = [], status: "active" | "pending" = "active"): Promise<ZoneMade> {
  const res = await cf("/control/zones", { method: "POST", body: JSON.stringify({ name, records, status }) });
  expect(res.status).toBe(200);
  return (await res.json()) as ZoneMade;
}

async function zoneState(id: string): Promise<ZoneState> {
  return (await (await cf(`/control/zones/${id}`)).json()) as ZoneState;
}

async function outage(id: string, mode: "503" | "html" | "garbage" | null, method?: "POST"): Promise<void> {
  await cf(`/control/zones/${id}/outage`, { method: "PUT", body: JSON.stringify({ mode, method }) });
}

const apex = () => `ac${crypto.randomUUID().slice(0, 8)}.test`;

async function addDomain(owner: TestAccount, name: string, extra: Record<string, unknown> = {}): Promise<{ id: string; name: string }> {
  const res = await api(owner.token, "POST", "/domains", { name, ...extra });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as { id: string; name: string };
}

const configure = (key: string, id: string, apiToken: string) => api(key, "POST", `/domains/${id}/auto-configure`, { provider: "cloudflare", api_token: apiToken });

/** Every table, every column: rows holding `needle` anywhere, as "table: row". */
async function rowsHolding(needle: string): Promise<string[]> {
  const tables = (await env.DB.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' AND name NOT LIKE 'd1_%'").all<{ name: string }>()).results.map((t) => t.name);
  const found: string[] = [];
  for (const t of tables) {
    const cols = (await env.DB.prepare(`SELECT name FROM pragma_table_info('${t}')`).all<{ name: string }>()).results.map((c) => c.name);
    if (cols.length === 0) continue;
    const where = cols.map((c) => `instr(CAST("${c}" AS TEXT), ?1) > 0`).join(" OR ");
    const rows = (await env.DB.prepare(`SELECT * FROM "${t}" WHERE ${where}`).bind(needle).all()).results;
    for (const r of rows) found.push(`${t}: ${JSON.stringify(r).slice(0, 200)}`);
  }
  return found;
}

/** Everything written to the console while `run` runs. */
async function consoleDuring<T>(run: () => Promise<T>): Promise<{ value: T; text: string }> {
  const lines: string[] = [];
  const spies = (["log", "info", "warn", "error", "debug"] as const).map((m) => vi.spyOn(console, m).mockImplementation((...args: unknown[]) => {
    lines.push(args.map((a) => (a instanceof Error ? `${a.message} ${a.stack ?? ""}` : typeof a === "string" ? a : JSON.stringify(a))).join(" "));
  }));
  try {
    const value = await run();
    return { value, text: lines.join("\n") };
  } finally {
    for (const s of spies) s.mockRestore();
  }
}

let acct: TestAccount;
let other: TestAccount;
beforeAll(async () => {
  [acct, other] = await Promise.all([createAccount({ listening: true }), createAccount()]);
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe("POST /domains/{id}/auto-configure", () => {
  it("says when the zone is not active yet: the records are made, DNS does not serve them, and the answer says why", async () => {
    const zoneName = apex();
    const zone = await makeZone(zoneName, [], "pending");
    const d = await addDomain(acct, `mail.${zoneName}`);
    const res = await configure(acct.token, d.id, zone.tokens.edit);
    expect(res.status).toBe(200);
    const body = (await res.json()) as Answer & { zone: { status: string | null } };
    expect(body.zone).toEqual({ id: zone.id, name: zoneName, status: "pending" });
    expect(body.records.every((r) => r.result === "created")).toBe(true);
    expect(body.domain.status).not.toBe("verified");
    const { autoConfigureNotice } = await import("../../worker/dashboard/resources.tsx");
    expect(autoConfigureNotice(zoneName, [], body.domain.status, body.zone.status)).toMatch(/The zone is pending at Cloudflare: its records are answered only once the domain's nameservers are Cloudflare's\.$/);
    expect(autoConfigureNotice(zoneName, [], "verified", "active")).not.toMatch(/nameservers/);
  });

  it("sets a fresh domain up in one call: every record created in the zone above it, the domain verified over DNS, the token nowhere", async () => {
    const zoneName = apex();
    const zone = await makeZone(zoneName);
    const d = await addDomain(acct, `mail.${zoneName}`, { receiving: true, tracking_subdomain: "links", open_tracking: true });
    const token = zone.tokens.edit;

    const { value: res, text: logged } = await consoleDuring(() => configure(acct.token, d.id, token));
    const text = await res.text();
    expect(res.status, text).toBe(200);
    const body = JSON.parse(text) as Answer;
    expect(body).toMatchObject({ object: "domain_auto_configure", id: d.id, zone: { id: zone.id, name: zoneName } });
    expect(body.records.map((r) => [r.record, r.type, r.result])).toEqual([
      ["DKIM", "TXT", "created"], ["SPF", "MX", "created"], ["SPF", "TXT", "created"],
      ["Receiving", "MX", "created"], ["Tracking", "CNAME", "created"], ["DMARC", "TXT", "created"],
    ]);
    expect(body.records.find((r) => r.record === "DMARC")).toMatchObject({ name: `_dmarc.${zoneName}`, value: `v=DMARC1; p=none; rua=mailto:dmarc@${zoneName}` });
    // The check ran at once, over DNS, on what was just created.
    expect(body.domain.status).toBe("verified");
    expect(body.domain.records.every((r) => r.status === "verified")).toBe(true);

    const state = await zoneState(zone.id);
    const made = (type: string, name: string) => state.records.filter((r) => r.type === type && r.name === name);
    expect(made("MX", `send.${d.name}`)).toMatchObject([{ content: "bounces.tern.test", priority: 10, ttl: 1 }]);
    expect(made("TXT", `send.${d.name}`)).toMatchObject([{ content: "v=spf1 include:_spf.tern.test ~all", ttl: 1 }]);
    expect(made("MX", d.name)).toMatchObject([{ content: "inbound.tern.test", priority: 10 }]);
    expect(made("CNAME", `links.${d.name}`)).toMatchObject([{ content: "tracking.tern.test", proxied: false, ttl: 1 }]);
    expect(made("TXT", `_dmarc.${zoneName}`)).toHaveLength(1);
    expect(state.records).toHaveLength(6);
    expect(state.records.every((r) => r.comment?.startsWith("tern: "))).toBe(true);

    // The token went to Cloudflare in the Authorization header only, and nowhere else.
    expect(state.seen.length).toBeGreaterThan(0);
    for (const s of state.seen) {
      expect(s.authorization).toBe(`Bearer ${token}`);
      expect(s.path + s.body).not.toContain(token);
    }
    expect(text).not.toContain(token);
    expect(logged).not.toContain(token);
    // The request's log row is written after the answer: wait for it, then look everywhere.
    await waitFor("the request's log row", async () => (await env.DB.prepare("SELECT id FROM api_logs WHERE account_id = ? AND endpoint = ?").bind(acct.accountId, `/domains/${d.id}/auto-configure`).first()) ?? undefined);
    const logRow = await env.DB.prepare("SELECT request_json FROM api_logs WHERE account_id = ? AND endpoint = ?").bind(acct.accountId, `/domains/${d.id}/auto-configure`).first<{ request_json: string }>();
    expect(JSON.parse(logRow!.request_json)).toEqual({ provider: "cloudflare", api_token: "[redacted]" });
    expect(await rowsHolding(token)).toEqual([]);
    expect((await rowsHolding(d.id)).length).toBeGreaterThan(0); // the search does find what is there
    const events = (await env.DB.prepare("SELECT payload_json FROM webhook_events WHERE account_id = ? AND type = 'domain.updated'").bind(acct.accountId).all<{ payload_json: string }>()).results;
    expect(events.some((e) => (JSON.parse(e.payload_json) as { data: { id: string; status: string } }).data.status === "verified" && e.payload_json.includes(d.id))).toBe(true);

    // A second call finds everything in place and creates nothing.
    const again = await configure(acct.token, d.id, token);
    expect(again.status).toBe(200);
    const second = (await again.json()) as Answer;
    expect(second.records.map((r) => r.result)).toEqual(["already_present", "already_present", "already_present", "already_present", "already_present", "already_present"]);
    expect(second.domain.status).toBe("verified");
    const after = await zoneState(zone.id);
    expect(after.records).toHaveLength(6);
    expect(after.seen.slice(state.seen.length).filter((s) => s.method === "POST")).toEqual([]);
  });

  it("leaves a different SPF record and a DMARC policy already published alone, reports them, and creates the rest", async () => {
    const name = apex();
    const spf = "v=spf1 include:_spf.other.example -all";
    const policy = "v=DMARC1; p=reject; rua=mailto:reports@elsewhere.example";
    const zone = await makeZone(name, [
      { type: "TXT", name: `send.${name}`, content: spf },
      { type: "TXT", name: `send.${name}`, content: "some-site-verification=abc" },
      { type: "TXT", name: `_dmarc.${name}`, content: policy },
    ]);
    const d = await addDomain(acct, name);
    const res = await configure(acct.token, d.id, zone.tokens.edit);
    expect(res.status).toBe(200);
    const body = (await res.json()) as Answer;
    const spfTxt = body.records.find((r) => r.record === "SPF" && r.type === "TXT")!;
    expect(spfTxt.result).toBe("conflict");
    expect(spfTxt.detail).toContain(spf);
    expect(spfTxt.detail).toContain("add include:_spf.tern.test to it by hand");
    expect(body.records.find((r) => r.record === "DMARC")).toMatchObject({ result: "skipped", detail: expect.stringContaining("p=reject") });
    expect(body.records.filter((r) => r.result === "created").map((r) => `${r.record} ${r.type}`)).toEqual(["DKIM TXT", "SPF MX"]);
    // Untouched: the same three records, plus the two created.
    const state = await zoneState(zone.id);
    expect(state.records.filter((r) => r.name === `send.${name}` && r.type === "TXT").map((r) => r.content).sort()).toEqual([spf, "some-site-verification=abc"].sort());
    expect(state.records.find((r) => r.name === `_dmarc.${name}`)!.content).toBe(policy);
    expect(state.records).toHaveLength(5);
    // The check judges the SPF record as any check would: a wrong value.
    expect(body.domain.status).toBe("partially_verified");
    expect(body.domain.records.find((r) => r.record === "SPF" && (r as { type?: string }).type === "TXT")!.status).toBe("failed");
  });

  it("reports a CNAME where a record must go, and a proxied tracking CNAME, as conflicts", async () => {
    const name = apex();
    const zone = await makeZone(name, [
      { type: "CNAME", name: `send.${name}`, content: "elsewhere.example" },
      { type: "CNAME", name: `go.${name}`, content: "tracking.tern.test", proxied: true },
    ]);
    const d = await addDomain(acct, name, { tracking_subdomain: "go", click_tracking: true });
    const body = (await (await configure(acct.token, d.id, zone.tokens.edit)).json()) as Answer;
    const by = (record: string, type: string) => body.records.find((r) => r.record === record && r.type === type)!;
    expect(by("SPF", "MX")).toMatchObject({ result: "conflict", detail: expect.stringContaining("is a CNAME to elsewhere.example") });
    expect(by("SPF", "TXT")).toMatchObject({ result: "conflict" });
    expect(by("Tracking", "CNAME")).toMatchObject({ result: "conflict", detail: expect.stringContaining("proxied") });
    expect(by("DKIM", "TXT").result).toBe("created");
    const state = await zoneState(zone.id);
    expect(state.records.filter((r) => r.type === "CNAME").map((r) => [r.name, r.content, r.proxied])).toEqual([[`send.${name}`, "elsewhere.example", false], [`go.${name}`, "tracking.tern.test", true]]);
  });

  it("refuses a token that sees no zone, or lacks the permission, with a 422 naming the permission, and changes nothing", async () => {
    const name = apex();
    const zone = await makeZone(name);
    const elsewhere = await makeZone(apex());
    const d = await addDomain(acct, name);
    const before = await env.DB.prepare("SELECT status, last_checked_at, updated_at FROM domains WHERE id = ?").bind(d.id).first();
    const cases: [string, string, RegExp][] = [
      ["another zone's token", elsewhere.tokens.edit, /sees no Cloudflare zone named/],
      ["a DNS-read token", zone.tokens.read, /may not create them/],
      ["a zone-read token", zone.tokens.zone, /refused the token when tern tried to read the DNS records/],
      ["an unknown token", "x".repeat(40), /refused the token when tern tried to find the zone \(Invalid access token \(9109\)\)/],
      ["a token Cloudflare finds malformed", "not-a-cloudflare-token-but-long", /Invalid request headers/],
    ];
    for (const [what, token, message] of cases) {
      const res = await configure(acct.token, d.id, token);
      const text = await res.text();
      expect(res.status, what).toBe(422);
      const err = JSON.parse(text) as { name: string; message: string };
      expect(err.name, what).toBe("validation_error");
      expect(err.message, what).toMatch(message);
      expect(err.message, what).toContain("Zone > DNS > Edit");
      expect(text, what).not.toContain(token);
    }
    expect((await zoneState(zone.id)).records).toEqual([]);
    expect((await zoneState(zone.id)).seen.filter((s) => s.method === "POST").map((s) => s.authorization)).toEqual([`Bearer ${zone.tokens.read}`]);
    expect(await env.DB.prepare("SELECT status, last_checked_at, updated_at FROM domains WHERE id = ?").bind(d.id).first()).toEqual(before);
  });

  it("answers a Cloudflare outage (a 503, an HTML page, garbage) with a clear 502, not a 500, and changes nothing", async () => {
    const name = apex();
    const zone = await makeZone(name);
    const d = await addDomain(acct, name);
    for (const mode of ["503", "html", "garbage"] as const) {
      await outage(zone.id, mode);
      const res = await configure(acct.token, d.id, zone.tokens.edit);
      const err = (await res.json()) as { statusCode: number; name: string; message: string };
      expect(res.status, mode).toBe(502);
      expect(err.name).toBe("application_error");
      expect(err.message).toMatch(/^Cloudflare's API did not answer as expected when tern tried to find the zone \(.+\)\. Nothing was changed; try again in a few minutes\.$/);
      expect(err.message).not.toContain("unexpected");
    }
    await outage(zone.id, null);
    expect((await zoneState(zone.id)).records).toEqual([]);
    expect((await env.DB.prepare("SELECT last_checked_at FROM domains WHERE id = ?").bind(d.id).first<{ last_checked_at: number | null }>())!.last_checked_at).toBeNull();
  });

  it("reports each record Cloudflare failed to create, with its error, and still checks the domain", async () => {
    const name = apex();
    const zone = await makeZone(name);
    const d = await addDomain(acct, name);
    await outage(zone.id, "503", "POST");
    const res = await configure(acct.token, d.id, zone.tokens.edit);
    expect(res.status).toBe(200);
    const body = (await res.json()) as Answer;
    expect(body.records.map((r) => r.result)).toEqual(["failed", "failed", "failed", "failed"]);
    expect(body.records[0]!.detail).toBe("Cloudflare answered: Service temporarily unavailable (10013)");
    expect(body.domain.status).toBe("pending");
    await outage(zone.id, "html", "POST");
    const html = (await (await configure(acct.token, d.id, zone.tokens.edit)).json()) as Answer;
    expect(html.records[0]!.detail).toMatch(/^Cloudflare did not answer properly \(HTTP 502 with an answer that is not Cloudflare's API envelope \(text\/html\)\); run this again later\.$/);
    await outage(zone.id, null);
    expect((await zoneState(zone.id)).records).toEqual([]);
    // Once Cloudflare answers again, running it again finishes the job.
    expect(((await (await configure(acct.token, d.id, zone.tokens.edit)).json()) as Answer).domain.status).toBe("verified");
  });

  it("answers 404 for another account's domain and refuses a sending-only key, calling Cloudflare for neither", async () => {
    const name = apex();
    const zone = await makeZone(name);
    const d = await addDomain(acct, name);
    const foreign = await configure(other.token, d.id, zone.tokens.edit);
    expect(foreign.status).toBe(404);
    expect(((await foreign.json()) as { message: string }).message).toBe("Domain not found.");
    const sending = await addKey(acct.accountId, "sending_access");
    const refused = await configure(sending, d.id, zone.tokens.edit);
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { name: string }).name).toBe("restricted_api_key");
    expect((await zoneState(zone.id)).seen).toEqual([]);
  });

  it("checks its body: the provider, and a token without echoing it", async () => {
    const name = apex();
    const d = await addDomain(acct, name);
    const cases: [unknown, number, RegExp][] = [
      [{ provider: "route53", api_token: "t".repeat(40) }, 422, /`provider` must be `cloudflare`/],
      [{ provider: "cloudflare" }, 422, /Missing `api_token`/],
      [{ provider: "cloudflare", api_token: "short-secret-123" }, 422, /too short to be a Cloudflare API token/],
      [{ provider: "cloudflare", api_token: "has spaces in the secret value here" }, 422, /printable characters without spaces/],
      [{ provider: "cloudflare", api_token: "t".repeat(40), zone: "x" }, 422, /zone/],
    ];
    for (const [body, status, message] of cases) {
      const res = await api(acct.token, "POST", `/domains/${d.id}/auto-configure`, body);
      const text = await res.text();
      expect(res.status, text).toBe(status);
      expect(JSON.parse(text).message).toMatch(message);
      expect(text).not.toContain("secret");
    }
  });
});

describe("the domain page's Set up at Cloudflare form", () => {
  it("posts the token with the page's CSRF token, to owners and admins only, and lists what was done", async () => {
    const name = apex();
    const zone = await makeZone(name, [{ type: "TXT", name: `send.${name}`, content: "v=spf1 mx -all" }]);
    const d = await addDomain(acct, name);
    const owner = await signedIn("owner", acct.accountId);
    const page = await (await exports.default.fetch(`${DASH}/dashboard/domains/${d.id}`, { headers: { cookie: owner.cookie } })).text();
    expect(page).toContain("Set up at Cloudflare");
    expect(page).toContain(`data-api="/dashboard/api/domains/${d.id}/auto-configure"`);
    expect(page).toMatch(/<input type="password" name="api_token"/);
    expect(page).toContain("Zone &gt; DNS &gt; Edit");
    expect(page).toContain("does not keep it");
    expect(page).toMatch(/<ul data-field="lines"><\/ul>/);

    const post = (who: { cookie: string; csrf: string }, csrf: string | null) => exports.default.fetch(`${DASH}/dashboard/api/domains/${d.id}/auto-configure`, {
      method: "POST",
      headers: { cookie: who.cookie, origin: DASH, "content-type": "application/json", ...(csrf ? { "x-csrf-token": csrf } : {}) },
      body: JSON.stringify({ provider: "cloudflare", api_token: zone.tokens.edit }),
    });
    expect((await post(owner, null)).status).toBe(403);
    const member = await signedIn("member", acct.accountId);
    expect((await post(member, member.csrf)).status).toBe(403);
    expect((await zoneState(zone.id)).seen).toEqual([]);

    const res = await post(owner, owner.csrf);
    const text = await res.text();
    expect(res.status, text).toBe(200);
    expect(text).not.toContain(zone.tokens.edit);
    const answer = JSON.parse(text) as { status: string; notice: string; lines: string[] };
    expect(answer.notice).toBe(`In the Cloudflare zone ${name}: 3 created, 0 already there, 1 to settle by hand. The domain is partially verified for now; tern keeps checking for 72 hours.`);
    expect(answer.lines[0]).toMatch(new RegExp(`^Created: DKIM TXT at tern\\w+\\._domainkey\\.${name.replace(/\./g, "\\.")}\\.$`));
    expect(answer.lines).toContain(`Created: SPF MX at send.${name}.`);
    expect(answer.lines).toContain(`Conflict, change by hand: SPF TXT at send.${name}. send.${name} already has an SPF record (\`v=spf1 mx -all\`) without include:_spf.tern.test. A name may have only one SPF record: add include:_spf.tern.test to it by hand, before its "all" term.`);
    expect(answer.lines).toContain(`Created: DMARC TXT at _dmarc.${name}.`);
    const audit = await env.DB.prepare("SELECT action, detail_json FROM audit_log WHERE account_id = ? AND action = 'domain.auto_configured' AND target = ?").bind(acct.accountId, name).first<{ detail_json: string }>();
    expect(JSON.parse(audit!.detail_json)).toEqual({ zone: name, created: 3, conflicts: 1, failed: 0 });

    // The page loaded next shows the check's findings.
    const after = await (await exports.default.fetch(`${DASH}/dashboard/domains/${d.id}`, { headers: { cookie: owner.cookie } })).text();
    expect(after).toContain("partially_verified");
    expect(after).toContain("wrong value");
  });

  it("folds away once every record is published, and stays open while one is missing", async () => {
    const zoneName = apex();
    const zone = await makeZone(zoneName);
    const d = await addDomain(acct, `mail.${zoneName}`);
    const owner = await signedIn("owner", acct.accountId);
    const pageOf = async () => (await exports.default.fetch(`${DASH}/dashboard/domains/${d.id}`, { headers: { cookie: owner.cookie } })).text();
    const before = await pageOf();
    expect(before).toContain(`<h2 id="cloudflare-setup">Set up at Cloudflare</h2>`);
    expect(before).not.toContain("already published");
    // Both return-path records are "SPF", as Resend names them: the page says what each is for.
    expect(before).toMatch(/<td>SPF<div class="muted small">bounces come back here<\/div><\/td><td>MX/);
    expect(before).toMatch(/<td>SPF<div class="muted small">who may send<\/div><\/td><td>TXT/);
    expect(((await (await configure(acct.token, d.id, zone.tokens.edit)).json()) as Answer).domain.status).toBe("verified");
    const after = await pageOf();
    expect(after).toMatch(/<details class="panel"[^>]*><summary id="cloudflare-setup">Set up at Cloudflare <span class="muted small">\(every record above is already published\)<\/span><\/summary>/);
    expect(after).toContain(`data-api="/dashboard/api/domains/${d.id}/auto-configure"`);
  });

  it("says how to fix a refused token", async () => {
    const name = apex();
    const zone = await makeZone(name);
    const d = await addDomain(acct, name);
    const owner = await signedIn("owner", acct.accountId);
    const res = await exports.default.fetch(`${DASH}/dashboard/api/domains/${d.id}/auto-configure`, {
      method: "POST",
      headers: { cookie: owner.cookie, origin: DASH, "content-type": "application/json", "x-csrf-token": owner.csrf },
      body: JSON.stringify({ provider: "cloudflare", api_token: zone.tokens.read }),
    });
    expect(res.status).toBe(422);
    const { message } = (await res.json()) as { message: string };
    expect(message).toContain("may not create them");
    expect(message).toContain("Edit zone DNS");
    expect(message).not.toContain(zone.tokens.read);
  });
});

describe("what auto-configure does about one record (planRecord)", () => {
  const hosts = { bounceHost: "bounces.tern.test", spfInclude: "_spf.tern.test", inboundMxHost: "inbound.tern.test", trackingTarget: "tracking.tern.test" };
  const spfTxt: ExpectedRecord = { id: "spf_txt", record: "SPF", name: "send", fqdn: "send.x.test", type: "TXT", value: "v=spf1 include:_spf.tern.test ~all", required: true };
  const receiving: ExpectedRecord = { id: "receiving_mx", record: "Receiving", name: "@", fqdn: "x.test", type: "MX", value: "inbound.tern.test", priority: 10, required: false };
  const tracking: ExpectedRecord = { id: "tracking_cname", record: "Tracking", name: "links", fqdn: "links.x.test", type: "CNAME", value: "tracking.tern.test", required: false };
  const at = (type: string, content: string, extra: Partial<CloudflareDnsRecord> = {}): CloudflareDnsRecord => ({ id: crypto.randomUUID(), name: "n", type, content, ...extra });

  it("creates an SPF record beside other TXT records, and leaves one that already includes tern's, whatever else it says", () => {
    expect(planRecord(spfTxt, [at("TXT", "google-site-verification=x")], hosts)).toEqual({ result: "create" });
    expect(planRecord(spfTxt, [at("TXT", '"v=spf1 include:_spf.tern.test include:other.example ~all"')], hosts)).toEqual({ result: "already_present" });
  });

  it("calls two SPF records a conflict to merge by hand", () => {
    const plan = planRecord(spfTxt, [at("TXT", "v=spf1 -all"), at("TXT", "v=spf1 include:_spf.tern.test ~all")], hosts);
    expect(plan).toMatchObject({ result: "conflict", detail: expect.stringContaining("has 2 SPF records") });
  });

  it("leaves another mail host's MX at the domain and says how to switch", () => {
    expect(planRecord(receiving, [at("MX", "aspmx.l.google.com", { priority: 1 })], hosts)).toMatchObject({ result: "conflict", detail: expect.stringContaining("already receives mail at 1 aspmx.l.google.com") });
    expect(planRecord(receiving, [at("MX", "Inbound.Tern.Test.", { priority: 10 })], hosts)).toEqual({ result: "already_present" });
  });

  it("never puts a CNAME beside other records, nor counts a proxied one as there", () => {
    expect(planRecord(tracking, [at("A", "192.0.2.1")], hosts)).toMatchObject({ result: "conflict", detail: expect.stringContaining("already has A records") });
    expect(planRecord(tracking, [at("CNAME", "elsewhere.example")], hosts)).toMatchObject({ result: "conflict", detail: expect.stringContaining("Change its target to tracking.tern.test") });
    expect(planRecord(tracking, [at("CNAME", "tracking.tern.test", { proxied: true })], hosts)).toMatchObject({ result: "conflict" });
    expect(planRecord(tracking, [at("CNAME", "tracking.tern.test", { proxied: false })], hosts)).toEqual({ result: "already_present" });
  });
});

// The test zone's SPF include, for receivers that evaluate it (nothing here sends mail).
beforeAll(async () => {
  await publish("_spf.tern.test", "TXT", ["v=spf1 ip4:127.0.0.1 -all"]);
});
