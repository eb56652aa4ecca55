// Tracking hosts as Cloudflare custom hostnames, where tern manages them (CLOUDFLARE_ZONE_ID and
// CLOUDFLARE_API_TOKEN beside TRACKING_CNAME_TARGET): a label whose CNAME is seen in DNS creates
// the hostname at Cloudflare (a label alone creates nothing), links use the host only once its
// certificate is active, a changed or removed label
// or a deleted domain deletes it (unless a twin in another account still has it), and what a
// failed call left behind the cron brings in line. Cloudflare here is the loopback stand-in of
// test/support/cloudflare-api.ts, which validates a hostname once the test zone has its CNAME.
import { createScheduledController } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import PostalMime from "postal-mime";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { readConfig } from "../../worker/config.ts";
import { sendingIdentity } from "../../worker/delivery/sending-identity.ts";
import { checkDomain, createDomain, domainDetails, domainView, findDomain, reportTrackingHostChange } from "../../worker/domains/service.ts";
import worker from "../../worker/index.ts";
import { CloudflareApiError, cloudflareCustomHostnames } from "../../worker/tracking/custom-hostnames.ts";
import { reconcileTrackingHostnames, syncHostname } from "../../worker/tracking/hostnames.ts";
import { loadEmail } from "../../worker/tracking/record.ts";
import { signedIn } from "./dashboard-session.ts";
import { api, createAccount, type TestAccount } from "./fixtures.ts";
import { address, bytesOf, capturedFor } from "./peers.ts";
import { waitFor } from "./wait.ts";
import { publish, publishRecords, type DomainRecord } from "./zone.ts";

interface DomainAnswer { id: string; name: string; status: string; tracking_subdomain: string | null; records: DomainRecord[] }
interface CfHostname { id: string; hostname: string; status: string; ssl: { status: string; method: string; type: string; settings: { min_tls_version?: string } } }
interface HostRow { hostname: string; wanted: number; cloudflare_id: string | null; status: string | null; ssl_status: string | null; validation_error: string | null; last_error: string | null; attempts: number; next_sync_at: number | null }

const cf = (path: string, init?: RequestInit) => fetch(`http://127.0.0.1:${env.TEST_PEERS.cloudflare}${path}`, init);

/** The hostnames the stand-in's zone holds by that name (one, or none). */
async function atCloudflare(hostname: string): Promise<CfHostname[]> {
  const all = ((await (await cf("/control/hostnames")).json()) as { hostnames: CfHostname[] }).hostnames;
  return all.filter((h) => h.hostname === hostname);
}

async function control(hostname: string, action: "hold" | "activate" | "fail", body?: unknown): Promise<void> {
  const res = await cf(`/control/hostnames/${encodeURIComponent(hostname)}/${action}`, { method: "POST", body: body ? JSON.stringify(body) : undefined });
  expect(res.status, await res.clone().text()).toBe(200);
}

async function outage(hostname: string, mode: "503" | "html" | "garbage" | null): Promise<void> {
  await cf("/control/outage", { method: "PUT", body: JSON.stringify({ hostname, mode }) });
}

async function hostRow(hostname: string): Promise<HostRow | null> {
  return env.DB.prepare("SELECT * FROM tracking_hostnames WHERE hostname = ?").bind(hostname).first<HostRow>();
}

/** The cron, as often as it takes for this host (other files' rows may be due too), an hour on. */
async function cronUntil(done: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 10 && !(await done()); i++) await reconcileTrackingHostnames(env, readConfig(env), Date.now() + 3600_000);
  expect(await done()).toBe(true);
}

const newName = () => `ch${crypto.randomUUID().slice(0, 8)}.dkim.test`;

async function addDomain(owner: TestAccount, name: string, label: string | null): Promise<DomainAnswer> {
  const res = await api(owner.token, "POST", "/domains", { name, open_tracking: true, click_tracking: true, ...(label ? { tracking_subdomain: label } : {}) });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as DomainAnswer;
}

async function verify(owner: TestAccount, id: string): Promise<DomainAnswer> {
  const res = await api(owner.token, "POST", `/domains/${id}/verify`);
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as DomainAnswer;
}

const trackingRecord = (d: DomainAnswer) => d.records.find((r) => r.record === "Tracking");

/** The domain's records published, and checked: its Tracking CNAME is seen. */
async function published(owner: TestAccount, d: DomainAnswer): Promise<DomainAnswer> {
  await publishRecords(d.name, d.records);
  return verify(owner, d.id);
}

/** The domain's page in the dashboard, as a member of the account sees it. */
async function domainPage(owner: TestAccount, id: string): Promise<string> {
  const { cookie } = await signedIn("member", owner.accountId);
  const res = await exports.default.fetch(`https://t.tern.test/dashboard/domains/${id}`, { headers: { cookie } });
  expect(res.status).toBe(200);
  return res.text();
}

let acct: TestAccount;
let twin: TestAccount;
beforeAll(async () => {
  [acct, twin] = await Promise.all([createAccount(), createAccount()]);
  await publish("_spf.tern.test", "TXT", ["v=spf1 ip4:127.0.0.1 -all"]);
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe("custom hostnames of tracking hosts", () => {
  it("are created at Cloudflare once the domain's Tracking CNAME is seen, not for a label alone, with HTTP validation and TLS 1.2 at least", async () => {
    const d = await addDomain(acct, newName(), "links");
    const host = `links.${d.name}`;
    // Anyone can type a label for any name: that alone makes no billed hostname in the zone.
    expect(await atCloudflare(host)).toEqual([]);
    expect(await hostRow(host)).toBeNull();
    expect((await verify(acct, d.id)).status).not.toBe("verified");
    expect(await atCloudflare(host)).toEqual([]);
    expect(await cf("/control/hostnames").then(async (r) => ((await r.json()) as { seen: { hostname: string | null }[] }).seen.filter((x) => x.hostname === host))).toEqual([]);
    await control(host, "hold");
    const checked = await published(acct, d);
    const [made] = await atCloudflare(host);
    expect(made).toMatchObject({ hostname: host, status: "pending", ssl: { method: "http", type: "dv", status: "pending_validation", settings: { min_tls_version: "1.2" } } });
    expect(await hostRow(host)).toMatchObject({ wanted: 1, cloudflare_id: made!.id, status: "pending", ssl_status: "pending_validation", last_error: null });
    expect(trackingRecord(checked)!.status).toBe("pending");
    // A domain without a label makes none.
    const plain = await addDomain(acct, newName(), null);
    expect(await atCloudflare(`links.${plain.name}`)).toEqual([]);
  });

  it("carry links only once the certificate is active: until then the Tracking record is pending and links use PUBLIC_URL", async () => {
    const d = await addDomain(acct, newName(), "go");
    const host = `go.${d.name}`;
    await control(host, "hold");
    const checked = await published(acct, d);
    expect(checked.status).toBe("verified");
    // The CNAME seen, tern created the hostname (nothing before).
    const seen = ((await (await cf("/control/hostnames")).json()) as { seen: { method: string; hostname: string | null }[] }).seen;
    expect(seen.filter((r) => r.hostname === host).map((r) => r.method)).toEqual(["POST"]);
    // The CNAME is there, the certificate is not: not verified, and mail keeps PUBLIC_URL.
    expect(trackingRecord(checked)!.status).toBe("pending");
    const to = address("cfhost");
    const sent = await api(acct.token, "POST", "/emails", { from: `n@${d.name}`, to, subject: "Links", html: '<a href="https://acme.example/x">x</a>' });
    expect(sent.status).toBe(200);
    const [msg] = await waitFor("the message at the peer", async () => ((await capturedFor(to)).length ? capturedFor(to) : undefined), 15_000);
    const html = (await PostalMime.parse(bytesOf(msg!.rawBase64))).html ?? "";
    expect(html).toContain("https://t.tern.test/t/c/");
    const row = (await loadEmail(env.DB, ((await sent.clone().json()) as { id: string }).id))!;
    expect((await sendingIdentity(env.DB, readConfig(env), row)).tracking.host).toBeNull();
    const details = domainDetails(await findDomain(env.DB, acct.accountId, d.id), readConfig(env));
    expect(details.certificate).toMatchObject({ state: "pending" });
    expect(await domainPage(acct, d.id)).toContain("certificate pending issuance: waiting for Cloudflare to validate the hostname. It is issued once this CNAME points at <span class=\"mono\">tracking.tern.test</span>");

    // Asked again within the minute: Cloudflare is not asked (a tenant's repeated checks must
    // not spend the operator's API rate limit).
    expect(trackingRecord(await verify(acct, d.id))!.status).toBe("pending");
    const soon = ((await (await cf("/control/hostnames")).json()) as { seen: { method: string; hostname: string | null }[] }).seen;
    expect(soon.filter((r) => r.hostname === host).map((r) => r.method)).toEqual(["POST"]);
    // A minute on, the tenant asks again: tern has Cloudflare validate again now, not at its
    // retry's pace.
    await env.DB.prepare("UPDATE tracking_hostnames SET synced_at = synced_at - 61000 WHERE hostname = ?").bind(host).run();
    expect(trackingRecord(await verify(acct, d.id))!.status).toBe("pending");
    const again = ((await (await cf("/control/hostnames")).json()) as { seen: { method: string; hostname: string | null }[] }).seen;
    expect(again.filter((r) => r.hostname === host).map((r) => r.method)).toEqual(["POST", "GET", "PATCH"]);

    // Issued: the next check sees it, and the host carries links.
    await control(host, "activate");
    await env.DB.prepare("UPDATE tracking_hostnames SET synced_at = synced_at - 61000 WHERE hostname = ?").bind(host).run();
    expect(trackingRecord(await verify(acct, d.id))!.status).toBe("verified");
    expect((await sendingIdentity(env.DB, readConfig(env), row)).tracking.host).toBe(host);
    expect(domainDetails(await findDomain(env.DB, acct.accountId, d.id), readConfig(env)).certificate).toEqual({ state: "active" });
    expect(await domainPage(acct, d.id)).toContain(`<span class="ok">certificate active</span>: links use this host`);
  });

  it("a certificate issued at once: the check that saw the CNAME answers verified, and webhooks hear of it", async () => {
    const owner = await createAccount({ listening: true });
    const d = await addDomain(owner, newName(), "links");
    const host = `links.${d.name}`;
    const checked = await published(owner, d);
    expect(trackingRecord(checked)!.status).toBe("verified");
    expect(await atCloudflare(host)).toMatchObject([{ status: "active", ssl: { status: "active" } }]);
    // The check's own domain.updated (the CNAME seen, its certificate not yet asked for), then
    // one for the certificate that came with the answer: the last says what the domain is now.
    const updates = await env.DB.prepare("SELECT payload_json FROM webhook_events WHERE account_id = ? AND type = 'domain.updated' ORDER BY id").bind(owner.accountId).all<{ payload_json: string }>();
    const tracking = updates.results.map((r) => (JSON.parse(r.payload_json) as { data: { records: DomainRecord[] } }).data.records.find((x) => x.record === "Tracking")!.status);
    expect(tracking).toEqual(["pending", "verified"]);
  });

  it("a certificate issued between checks is reported when the cron sees it: domain.updated, and links move at once", async () => {
    const owner = await createAccount({ listening: true });
    const d = await addDomain(owner, newName(), "links");
    const host = `links.${d.name}`;
    await control(host, "hold");
    expect(trackingRecord(await published(owner, d))!.status).toBe("pending");
    await control(host, "activate");
    // The cron's poll of the waiting host (an hour on, so it is due), not a domain check.
    const later = Date.now() + 3600_000;
    await reconcileTrackingHostnames(env, readConfig(env), later, undefined, (h) => reportTrackingHostChange(env, readConfig(env), h, later));
    const updates = await env.DB.prepare("SELECT payload_json FROM webhook_events WHERE account_id = ? AND type = 'domain.updated' ORDER BY id").bind(owner.accountId).all<{ payload_json: string }>();
    const last = JSON.parse(updates.results.at(-1)!.payload_json) as { data: { records: DomainRecord[] } };
    expect(last.data.records.find((x) => x.record === "Tracking")!.status).toBe("verified");
    expect(trackingRecord((await (await api(owner.token, "GET", `/domains/${d.id}`)).json()) as DomainAnswer)!.status).toBe("verified");
  });

  it("make the Tracking record failed, with Cloudflare's reason, when validation fails", async () => {
    const d = await addDomain(acct, newName(), "trk");
    const host = `trk.${d.name}`;
    await control(host, "fail", { message: "caa_error: CAA records at the domain forbid the certificate authority" });
    expect(trackingRecord(await published(acct, d))!.status).toBe("failed");
    const checked = await verify(acct, d.id);
    expect(trackingRecord(checked)!.status).toBe("failed");
    expect(domainDetails(await findDomain(env.DB, acct.accountId, d.id), readConfig(env)).certificate).toEqual({ state: "failed", detail: "caa_error: CAA records at the domain forbid the certificate authority" });
    expect(await hostRow(host)).toMatchObject({ ssl_status: "validation_timed_out", validation_error: expect.stringContaining("caa_error") });
    expect(await domainPage(acct, d.id)).toContain("certificate failed: caa_error: CAA records at the domain forbid the certificate authority. Check that this CNAME points at");
  });

  it("follow the label: a new label deletes the old hostname and creates the new one; null removes it", async () => {
    const d = await addDomain(acct, newName(), "links");
    await published(acct, d);
    expect(await atCloudflare(`links.${d.name}`)).toHaveLength(1);
    const renamed = await api(acct.token, "PATCH", `/domains/${d.id}`, { tracking_subdomain: "click" });
    expect(renamed.status).toBe(200);
    expect(await atCloudflare(`links.${d.name}`)).toEqual([]);
    expect(await hostRow(`links.${d.name}`)).toBeNull();
    expect(await atCloudflare(`click.${d.name}`)).toEqual([]);
    expect(trackingRecord(await published(acct, (await renamed.json()) as DomainAnswer))!.status).toBe("verified");
    expect(await atCloudflare(`click.${d.name}`)).toHaveLength(1);
    const off = await api(acct.token, "PATCH", `/domains/${d.id}`, { tracking_subdomain: null });
    expect(off.status).toBe(200);
    expect(await atCloudflare(`click.${d.name}`)).toEqual([]);
    expect(await hostRow(`click.${d.name}`)).toBeNull();
  });

  it("go with their domain when it is deleted", async () => {
    const d = await addDomain(acct, newName(), "links");
    await published(acct, d);
    expect(await atCloudflare(`links.${d.name}`)).toHaveLength(1);
    expect((await api(acct.token, "DELETE", `/domains/${d.id}`)).status).toBe(200);
    expect(await atCloudflare(`links.${d.name}`)).toEqual([]);
    expect(await hostRow(`links.${d.name}`)).toBeNull();
  });

  it("are shared by twins: two accounts holding the same domain make one hostname, deleted only when neither wants it", async () => {
    const name = newName();
    const host = `links.${name}`;
    const mine = await addDomain(acct, name, "links");
    const theirs = await addDomain(twin, name, "links");
    const key = (r: DomainRecord) => `${r.name}|${r.type}|${r.value}`;
    await publishRecords(name, [...mine.records, ...theirs.records.filter((r) => !mine.records.some((m) => key(m) === key(r)))]);
    await verify(acct, mine.id);
    await verify(twin, theirs.id);
    const made = await atCloudflare(host);
    expect(made).toHaveLength(1);
    expect((await hostRow(host))!.cloudflare_id).toBe(made[0]!.id);
    // One twin drops it: still wanted by the other.
    expect((await api(acct.token, "DELETE", `/domains/${mine.id}`)).status).toBe(200);
    expect(await atCloudflare(host)).toHaveLength(1);
    expect(await hostRow(host)).toMatchObject({ wanted: 1, cloudflare_id: made[0]!.id });
    // The other drops it too: gone.
    expect((await api(twin.token, "PATCH", `/domains/${theirs.id}`, { tracking_subdomain: null })).status).toBe(200);
    expect(await atCloudflare(host)).toEqual([]);
    expect(await hostRow(host)).toBeNull();
  });

  it("survive an outage of Cloudflare's API: the request succeeds and the cron creates and deletes them later", async () => {
    const name = newName();
    const host = `links.${name}`;
    await outage(host, "503");
    const errors = vi.spyOn(console, "error");
    const d = await addDomain(acct, name, "links");
    expect(trackingRecord(await published(acct, d))!.status).not.toBe("verified");
    expect(await atCloudflare(host)).toEqual([]);
    const failed = (await hostRow(host))!;
    expect(failed).toMatchObject({ wanted: 1, cloudflare_id: null, attempts: 1 });
    expect(failed.last_error).toMatch(/Cloudflare POST custom_hostnames: HTTP 503: Service temporarily unavailable \(10013\)/);
    expect(failed.next_sync_at).toBeGreaterThan(Date.now());
    expect(errors.mock.calls.flat().join(" ")).toContain(host);
    // Back: the cron creates it.
    await outage(host, null);
    await cronUntil(async () => (await atCloudflare(host)).length === 1);
    expect(await hostRow(host)).toMatchObject({ cloudflare_id: (await atCloudflare(host))[0]!.id, last_error: null, attempts: 0 });

    // Down again while the domain is deleted: the hostname outlives it until the cron runs.
    await outage(host, "503");
    expect((await api(acct.token, "DELETE", `/domains/${d.id}`)).status).toBe(200);
    expect(await atCloudflare(host)).toHaveLength(1);
    expect(await hostRow(host)).toMatchObject({ wanted: 0 });
    await outage(host, null);
    await worker.scheduled(createScheduledController({ scheduledTime: Date.now(), cron: "* * * * *" }), env);
    await cronUntil(async () => (await atCloudflare(host)).length === 0 && (await hostRow(host)) === null);
  });

  it("are created by the cron for labels set before tern managed them, and deleted for domains gone without a word", async () => {
    const name = newName();
    const host = `links.${name}`;
    const d = await addDomain(acct, name, null);
    // A label written while nobody managed hostnames, its CNAME not seen: the cron makes none.
    await env.DB.prepare("UPDATE domains SET tracking_subdomain = 'links' WHERE id = ?").bind(d.id).run();
    await reconcileTrackingHostnames(env, readConfig(env), Date.now() + 3600_000);
    expect(await hostRow(host)).toBeNull();
    expect(await atCloudflare(host)).toEqual([]);
    // Its CNAME seen then (by a check of that time): the cron makes it.
    await env.DB.prepare("UPDATE domains SET status = 'verified', record_status_json = json_set(record_status_json, '$.tracking_cname', 'verified') WHERE id = ?").bind(d.id).run();
    await cronUntil(async () => (await atCloudflare(host)).length === 1);
    // Its domain deleted by a path that knows nothing of hostnames (an account's erasure).
    await env.DB.batch([env.DB.prepare("DELETE FROM dkim_keys WHERE domain_id = ?").bind(d.id), env.DB.prepare("DELETE FROM domains WHERE id = ?").bind(d.id)]);
    await cronUntil(async () => (await atCloudflare(host)).length === 0 && (await hostRow(host)) === null);
  });

  it("answer Cloudflare's bad answers with clear errors, never a 500, and keep the token out of logs, errors and rows", async () => {
    const token = env.CLOUDFLARE_API_TOKEN!;
    const logged: string[] = [];
    for (const level of ["log", "error", "warn", "info"] as const) vi.spyOn(console, level).mockImplementation((...args: unknown[]) => void logged.push(args.map(String).join(" ")));
    const answers: string[] = [];
    for (const mode of ["html", "garbage"] as const) {
      const name = newName();
      const host = `links.${name}`;
      await outage(host, mode);
      const res = await api(acct.token, "POST", "/domains", { name, tracking_subdomain: "links" });
      answers.push(await res.clone().text());
      expect(res.status).toBe(201);
      const created = (await res.json()) as DomainAnswer;
      await publishRecords(name, created.records);
      const verified = await api(acct.token, "POST", `/domains/${created.id}/verify`);
      expect(verified.status).toBe(200);
      answers.push(await verified.text());
      const row = (await hostRow(host))!;
      expect(row.last_error).toMatch(mode === "html" ? /HTTP 502 with an answer that is not Cloudflare's API envelope \(text\/html\)/ : /the result is not a custom hostname/);
      await outage(host, null);
    }
    // A wrong token: Cloudflare's refusal, named, without the token that was refused.
    const wrong = cloudflareCustomHostnames({ ...readConfig(env).customHostnames!, token: "wrong-token-1234" });
    const refused = await wrong.create("x.example.test").catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(CloudflareApiError);
    expect((refused as Error).message).toBe("Cloudflare POST custom_hostnames: HTTP 403: Authentication error (10000)");
    // Unreachable: said so, with no token either.
    const down = await cloudflareCustomHostnames({ apiUrl: "http://127.0.0.1:9/client/v4", zoneId: "z", token }).get("id").catch((e: unknown) => e);
    expect((down as Error).message).toMatch(/^Cloudflare GET custom_hostnames\/id: could not be reached/);
    const rows = await env.DB.prepare("SELECT * FROM tracking_hostnames").all();
    for (const text of [...logged, ...answers, JSON.stringify(rows.results), (down as Error).message, JSON.stringify(readConfig(env))]) expect(text).not.toContain(token);
    expect(logged.join("\n")).toMatch(/custom hostname sync failed/);
  });
});

describe("custom hostnames, guarded against other tenants and against flapping", () => {
  it("are made only for a verified domain: an unverified twin can neither make one nor keep another's alive", async () => {
    const name = newName();
    const host = `links.${name}`;
    const mine = await addDomain(acct, name, "links");
    const theirs = await addDomain(twin, name, "links");
    // Only the CNAME is published (anyone could point a name they do not own... at tern, but
    // the twin cannot publish DKIM for it): the twin's domain never verifies, so nothing is made.
    await publishRecords(name, theirs.records, (r) => r.record === "Tracking");
    const seenByTwin = await verify(twin, theirs.id);
    expect(seenByTwin.status).not.toBe("verified");
    expect(await atCloudflare(host)).toEqual([]);
    // The owner publishes everything: made. Then the owner deletes its domain: gone, though
    // the twin's row still has the label and a CNAME it once saw.
    expect(trackingRecord(await published(acct, mine))!.status).toBe("verified");
    expect(await atCloudflare(host)).toHaveLength(1);
    expect((await api(acct.token, "DELETE", `/domains/${mine.id}`)).status).toBe(200);
    expect(await atCloudflare(host)).toEqual([]);
    expect(await hostRow(host)).toBeNull();
  });

  it("outlive a blip in the tenant's DNS (links in sent mail keep their certificate), and go when the domain fails", async () => {
    const d = await addDomain(acct, newName(), "links");
    const host = `links.${d.name}`;
    expect(trackingRecord(await published(acct, d))!.status).toBe("verified");
    const [made] = await atCloudflare(host);
    // The CNAME vanishes: links stop moving to the host (the record is no longer verified),
    // but the hostname and its certificate stay for the mail already sent.
    await publish(host, "CNAME", []);
    await env.DB.prepare("UPDATE tracking_hostnames SET synced_at = synced_at - 61000 WHERE hostname = ?").bind(host).run();
    expect(trackingRecord(await verify(acct, d.id))!.status).not.toBe("verified");
    expect(await atCloudflare(host)).toEqual([made]);
    // The domain fails (its grace over): the host goes at the next sweep.
    await env.DB.prepare("UPDATE domains SET status = 'failed' WHERE id = ?").bind(d.id).run();
    await cronUntil(async () => (await atCloudflare(host)).length === 0 && (await hostRow(host)) === null);
  });

  it("are capped per account where tracking hosts are offered, with an error that says what to do", async () => {
    const owner = await createAccount();
    const config = { ...readConfig(env), trackingHostsPerAccount: 2 };
    Object.defineProperty(config, "customHostnames", { value: readConfig(env).customHostnames });
    const input = (label: string | null) => ({ name: newName(), region: "us-east-1", customReturnPath: "send", openTracking: true, clickTracking: true, tls: "opportunistic" as const, receiving: false, trackingSubdomain: label, dkimAlgorithm: "rsa" as const });
    await createDomain(env, config, owner.accountId, input("links"), Date.now());
    await createDomain(env, config, owner.accountId, input("links"), Date.now());
    await expect(createDomain(env, config, owner.accountId, input("links"), Date.now())).rejects.toThrow(/already has 2 domains with a `tracking_subdomain`.*TRACKING_HOSTS_PER_ACCOUNT/);
    // Without a label it is added; giving it one later is refused the same way.
    const plain = await createDomain(env, config, owner.accountId, input(null), Date.now());
    const { updateDomain } = await import("../../worker/domains/service.ts");
    await expect(updateDomain(env, config, await findDomain(env.DB, owner.accountId, plain.id), { trackingSubdomain: "links" }, Date.now())).rejects.toThrow(/already has 2 domains/);
    expect(await env.DB.prepare("SELECT count(*) AS n FROM domains WHERE account_id = ? AND tracking_subdomain IS NOT NULL").bind(owner.accountId).first<number>("n")).toBe(2);
  });

  it("leave a hostname tern did not make in the zone: one the operator had is adopted, never deleted", async () => {
    const name = newName();
    const host = `links.${name}`;
    const operators = await cloudflareCustomHostnames(readConfig(env).customHostnames!).create(host);
    expect(operators.adopted).toBe(false);
    await control(host, "activate");
    const d = await addDomain(acct, name, "links");
    expect(trackingRecord(await published(acct, d))!.status).toBe("verified");
    expect(await hostRow(host)).toMatchObject({ cloudflare_id: operators.hostname.id, owned: 0 });
    expect((await api(acct.token, "DELETE", `/domains/${d.id}`)).status).toBe(200);
    expect((await atCloudflare(host)).map((h) => h.id)).toEqual([operators.hostname.id]);
    expect(await hostRow(host)).toBeNull();
  });

  it("are synced one at a time: two syncs of a host at once make one hostname", async () => {
    const d = await addDomain(acct, newName(), "links");
    const host = `links.${d.name}`;
    await publishRecords(d.name, d.records);
    // What a check would have committed, without its sync: then two syncs race for the host.
    await env.DB.prepare("UPDATE domains SET status = 'verified', record_status_json = json_set(record_status_json, '$.tracking_cname', 'verified') WHERE id = ?").bind(d.id).run();
    const config = readConfig(env);
    const now = Date.now();
    const [a, b] = await Promise.all([syncHostname(env, config, host, now), syncHostname(env, config, host, now)]);
    expect([a?.cloudflareId, b?.cloudflareId].filter(Boolean).length).toBeGreaterThanOrEqual(1);
    const seen = ((await (await cf("/control/hostnames")).json()) as { seen: { method: string; hostname: string | null }[] }).seen;
    expect(seen.filter((r) => r.hostname === host && r.method === "POST")).toHaveLength(1);
    expect(await atCloudflare(host)).toHaveLength(1);
  });

  it("do not follow a label changed while a check of the old one ran: its CNAME status is not written on the new label", async () => {
    const d = await addDomain(acct, newName(), "links");
    await publishRecords(d.name, d.records);
    const stale = await findDomain(env.DB, acct.accountId, d.id);
    // The label changes (a PATCH that commits first), then the check of "links" finishes.
    await env.DB.prepare("UPDATE domains SET tracking_subdomain = 'www' WHERE id = ?").bind(d.id).run();
    await checkDomain(env, readConfig(env), stale, Date.now(), { restart: true });
    const row = (await env.DB.prepare("SELECT tracking_subdomain, record_status_json FROM domains WHERE id = ?").bind(d.id).first<{ tracking_subdomain: string; record_status_json: string }>())!;
    expect(row.tracking_subdomain).toBe("www");
    expect(JSON.parse(row.record_status_json)["tracking_cname"]).toBeUndefined();
    expect(await atCloudflare(`www.${d.name}`)).toEqual([]);
  });
});

describe("where the operator gives no token", () => {
  it("tern manages no hostname: the Tracking record counts once its CNAME is verified, as before", async () => {
    const config = { ...readConfig({ ...env, CLOUDFLARE_API_TOKEN: "" } as Env) };
    expect(config.customHostnames).toBeNull();
    expect(readConfig({ ...env, CLOUDFLARE_ZONE_ID: "" } as Env).customHostnames).toBeNull();
    expect(readConfig({ ...env, TRACKING_CNAME_TARGET: "" } as Env).customHostnames).toBeNull();
    expect(await reconcileTrackingHostnames(env, config, Date.now())).toBe(0);
    const name = newName();
    const made = await createDomain(env, config, acct.accountId, { name, region: "us-east-1", customReturnPath: "send", openTracking: true, clickTracking: true, tls: "opportunistic", receiving: false, trackingSubdomain: "links", dkimAlgorithm: "rsa" }, Date.now());
    expect(await hostRow(`links.${name}`)).toBeNull();
    expect(await atCloudflare(`links.${name}`)).toEqual([]);
    await publishRecords(name, made.records);
    const checked = domainView(await checkDomain(env, config, await findDomain(env.DB, acct.accountId, made.id), Date.now()), config);
    expect(checked.records.find((r) => r.record === "Tracking")!.status).toBe("verified");
    expect(await atCloudflare(`links.${name}`)).toEqual([]);
  });
});
