// A domain's own tracking host (Resend's tracking_subdomain): its Tracking CNAME is checked with
// the other records; once verified, the domain's open and click links use https://links.<domain>,
// that host redirects and records them, and it serves nothing else: not the API, not the
// dashboard, not another domain's links. Until it is verified (or after it is taken away) links
// use the deployment's PUBLIC_URL, which keeps answering links already sent.
import { env, exports } from "cloudflare:workers";
import { readConfig } from "../../worker/config.ts";
import { sendingIdentity } from "../../worker/delivery/sending-identity.ts";
import { loadEmail } from "../../worker/tracking/record.ts";
import PostalMime from "postal-mime";
import { beforeAll, describe, expect, it } from "vitest";
import { servesPath } from "../../worker/tracking/hosts.ts";
import { api, createAccount, type TestAccount } from "./fixtures.ts";
import { address, bytesOf, capturedFor } from "./peers.ts";
import { waitFor } from "./wait.ts";
import { publish, publishRecords, unpublish, type DomainRecord } from "./zone.ts";

interface DomainAnswer { id: string; name: string; status: string; tracking_subdomain: string | null; records: DomainRecord[] }

let acct: TestAccount;
let other: TestAccount;

beforeAll(async () => {
  acct = await createAccount();
  other = await createAccount();
  await publish("_spf.tern.test", "TXT", ["v=spf1 ip4:127.0.0.1 -all"]);
});

/** A verified domain with tracking on and the given tracking label, its records all published. */
async function trackedDomain(owner: TestAccount, label: string | undefined, publishTracking = true): Promise<DomainAnswer> {
  const name = `th${crypto.randomUUID().slice(0, 8)}.dkim.test`;
  const created = await api(owner.token, "POST", "/domains", { name, open_tracking: true, click_tracking: true, ...(label ? { tracking_subdomain: label } : {}) });
  expect(created.status, await created.clone().text()).toBe(201);
  const d = (await created.json()) as DomainAnswer;
  await publishRecords(name, d.records, (r) => publishTracking || r.record !== "Tracking");
  const verified = (await (await api(owner.token, "POST", `/domains/${d.id}/verify`)).json()) as DomainAnswer;
  expect(verified.status).toBe("verified");
  return verified;
}

async function sendHtml(owner: TestAccount, domain: string): Promise<{ id: string; html: string }> {
  const to = address("trackhost");
  const res = await api(owner.token, "POST", "/emails", { from: `News <news@${domain}>`, to, subject: "Links", html: '<p>Hi</p><a href="https://acme.example/pricing">Pricing</a>' });
  expect(res.status, await res.clone().text()).toBe(200);
  const { id } = (await res.json()) as { id: string };
  const [msg] = await waitFor("the message at the peer", async () => ((await capturedFor(to)).length ? capturedFor(to) : undefined), 15_000);
  return { id, html: (await PostalMime.parse(bytesOf(msg!.rawBase64))).html ?? "" };
}

const links = (html: string) => ({
  click: html.match(/href="(https:\/\/[^/"]+\/t\/c\/[A-Za-z0-9_-]+)"/)?.[1],
  pixel: html.match(/<img src="(https:\/\/[^/"]+\/t\/o\/[A-Za-z0-9_-]+)"/)?.[1],
});

/** A request to `url` whose path is kept and whose host is `host`. */
function at(host: string, url: string, init: RequestInit = {}): Promise<Response> {
  const u = new URL(url);
  return exports.default.fetch(new Request(`https://${host}${u.pathname}`, { redirect: "manual", ...init, headers: { "cf-connecting-ip": "203.0.113.7", ...(init.headers as Record<string, string>) } }));
}

async function clicks(owner: TestAccount, id: string): Promise<number> {
  const events = ((await (await api(owner.token, "GET", `/emails/${id}/events?limit=100`)).json()) as { data: { type: string }[] }).data;
  return events.filter((e) => e.type === "clicked").length;
}

describe("a domain's tracking host", () => {
  it("is a Tracking CNAME among the domain's records, checked with them; the return path's label is refused", async () => {
    const d = await trackedDomain(acct, "Links");
    expect(d.tracking_subdomain).toBe("links");
    expect(d.records.find((r) => r.record === "Tracking")).toMatchObject({ name: "links", type: "CNAME", value: "tracking.tern.test", status: "verified" });
    const clash = await api(acct.token, "POST", "/domains", { name: `c${crypto.randomUUID().slice(0, 8)}.dkim.test`, tracking_subdomain: "send" });
    expect(clash.status).toBe(422);
    expect(((await clash.json()) as { message: string }).message).toMatch(/return path/);
    // A CNAME somewhere else is a wrong value, reported as such; the domain itself stays verified.
    await publish(`links.${d.name}`, "CNAME", ["elsewhere.example"]);
    const again = (await (await api(acct.token, "POST", `/domains/${d.id}/verify`)).json()) as DomainAnswer;
    expect(again.status).toBe("verified");
    expect(again.records.find((r) => r.record === "Tracking")!.status).toBe("failed");
  });

  it("carries the domain's links once verified, and redirects and records them there", async () => {
    const d = await trackedDomain(acct, "links");
    const sent = await sendHtml(acct, d.name);
    const { click, pixel } = links(sent.html);
    expect(new URL(click!).host).toBe(`links.${d.name}`);
    expect(new URL(pixel!).host).toBe(`links.${d.name}`);
    const res = await at(`links.${d.name}`, click!);
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("https://acme.example/pricing");
    expect(await clicks(acct, sent.id)).toBe(1);
    expect((await at(`links.${d.name}`, pixel!)).headers.get("content-type")).toBe("image/gif");
    // Where the operator stops offering tracking hosts, mail goes back to PUBLIC_URL at once.
    const row = (await loadEmail(env.DB, sent.id))!;
    expect((await sendingIdentity(env.DB, readConfig(env), row)).tracking.host).toBe(`links.${d.name}`);
    expect((await sendingIdentity(env.DB, { ...readConfig(env), trackingCnameTarget: null }, row)).tracking.host).toBeNull();
    // The insight that tracking inherits another domain's reputation no longer applies.
    const insights = ((await (await api(acct.token, "GET", `/emails/${sent.id}/insights`)).json()) as { data: { id: string; status: string; detail: string }[] }).data;
    expect(insights.find((i) => i.id === "shared_tracking_domain")).toMatchObject({ status: "passed", detail: `Tracking points at links.${d.name}.` });
  });

  it("serves nothing but tracked links: no API, no dashboard, no other domain's links", async () => {
    const mine = await trackedDomain(acct, "go");
    const theirs = await trackedDomain(other, "go");
    const host = `go.${mine.name}`;
    const api_ = await exports.default.fetch(new Request(`https://${host}/emails`, { method: "POST", headers: { authorization: `Bearer ${acct.token}`, "content-type": "application/json" }, body: "{}" }));
    expect(api_.status).toBe(404);
    expect(((await api_.json()) as { message: string }).message).toMatch(/tracked links only/);
    expect((await exports.default.fetch(`https://${host}/dashboard/sign-in`)).status).toBe(404);
    expect((await exports.default.fetch(`https://${host}/openapi.json`)).status).toBe(404);
    // Another tenant's link, moved to this host, is refused and recorded nowhere.
    const foreign = await sendHtml(other, theirs.name);
    const moved = await at(host, links(foreign.html).click!);
    expect(moved.status).toBe(404);
    expect(await clicks(other, foreign.id)).toBe(0);
    expect((await at(`go.${theirs.name}`, links(foreign.html).click!)).status).toBe(302);
  });

  it("is not used before its record is verified, nor after it is taken away; links already sent keep working", async () => {
    const d = await trackedDomain(acct, "trk", false);
    expect(d.records.find((r) => r.record === "Tracking")!.status).not.toBe("verified");
    const before = await sendHtml(acct, d.name);
    expect(new URL(links(before.html).click!).host).toBe("t.tern.test");
    // Published and verified: new mail uses the host; mail already sent still redirects at PUBLIC_URL.
    await publishRecords(d.name, d.records, (r) => r.record === "Tracking");
    await api(acct.token, "POST", `/domains/${d.id}/verify`);
    // (The sender reads a domain's settings through a cache of a few seconds.)
    const after = await waitFor("links on the domain's host", async () => {
      const s = await sendHtml(acct, d.name);
      return new URL(links(s.html).click!).host === `trk.${d.name}` ? s : undefined;
    }, 30_000);
    expect((await at("t.tern.test", links(before.html).click!)).status).toBe(302);
    // Each link answers only where it was issued: the host's at the host, not at PUBLIC_URL.
    expect((await at(`trk.${d.name}`, links(after.html).click!)).status).toBe(302);
    expect((await at("t.tern.test", links(after.html).click!)).status).toBe(404);
    // Taken away: new mail's links use PUBLIC_URL again.
    const off = await api(acct.token, "PATCH", `/domains/${d.id}`, { tracking_subdomain: null });
    expect(((await off.json()) as DomainAnswer).tracking_subdomain).toBeNull();
    await unpublish(`trk.${d.name}`, "CNAME");
    const later = await waitFor("links back on PUBLIC_URL", async () => {
      const s = await sendHtml(acct, d.name);
      return new URL(links(s.html).click!).host === "t.tern.test" ? s : undefined;
    }, 30_000);
    expect(later).toBeDefined();
    // The host that was one still serves nothing but tracked links.
    expect((await exports.default.fetch(`https://trk.${d.name}/dashboard/sign-in`)).status).toBe(404);
  });

  it("is told by its name, not by what a tenant wrote: a final dot, an unproved label and a same-named domain change nothing", async () => {
    const mine = await trackedDomain(acct, "links");
    const host = `links.${mine.name}`;
    // A final dot is the same host: it serves the same links and nothing else.
    expect((await exports.default.fetch(`https://${host}./dashboard/sign-in`)).status).toBe(404);
    expect((await exports.default.fetch(new Request(`https://${host}./domains`, { headers: { authorization: `Bearer ${acct.token}` } }))).status).toBe(404);
    // Another account holding the same name (domain claims allow it) sent mail through
    // PUBLIC_URL: those links do not answer at this account's host.
    const twin = await api(other.token, "POST", "/domains", { name: mine.name, open_tracking: true, click_tracking: true });
    expect(twin.status).toBe(201);
    const twinAnswer = (await twin.json()) as DomainAnswer;
    const twinId = twinAnswer.id;
    await publishRecords(mine.name, twinAnswer.records, (r) => r.record === "DKIM");
    const verified = (await (await api(other.token, "POST", `/domains/${twinId}/verify`)).json()) as DomainAnswer;
    expect(verified.status).toBe("verified");
    const theirs = await sendHtml(other, mine.name);
    expect(new URL(links(theirs.html).click!).host).toBe("t.tern.test");
    expect((await at(host, links(theirs.html).click!)).status).toBe(404);
    expect((await at("t.tern.test", links(theirs.html).click!)).status).toBe(302);
    // A label on a host the deployment answers at (workers.dev, or PUBLIC_URL's own domain) is
    // not proved by anyone, and that host keeps serving the API.
    expect((await api(other.token, "POST", "/domains", { name: "acct.workers.dev", tracking_subdomain: "tern" })).status).toBe(201);
    const onWorkersDev = await exports.default.fetch(new Request("https://tern.acct.workers.dev/domains", { headers: { authorization: `Bearer ${acct.token}` } }));
    expect(onWorkersDev.status).toBe(200);
  });
});

describe("the hosts a deployment answers at", () => {
  const config = { publicUrl: "https://t.tern.test", devMode: false, trackingCnameTarget: "tracking.tern.test" };
  it("are its own for everything and any other for tracked links only, where it offers tracking hosts", () => {
    for (const host of ["t.tern.test", "api.tern.test", "tern.test", "tern.acct.workers.dev"]) expect(servesPath(config, `https://${host}/emails`), host).toBe(true);
    for (const host of ["links.acme.example", "links.acme.example.", "t.tern.test.evil.example", "127.0.0.1"]) {
      expect(servesPath(config, `https://${host}/emails`), host).toBe(false);
      expect(servesPath(config, `https://${host}/t/c/x`), host).toBe(true);
    }
    // Without tracking hosts no tenant's host reaches the Worker: every host answers as before.
    expect(servesPath({ ...config, trackingCnameTarget: null }, "https://api.mycompany.example/emails")).toBe(true);
    // Nor with no PUBLIC_URL (or one that does not parse): nothing is tracked then.
    expect(servesPath({ ...config, publicUrl: "" }, "https://api.mycompany.example/emails")).toBe(true);
    expect(servesPath({ ...config, publicUrl: "not a url" }, "https://api.mycompany.example/emails")).toBe(true);
  });
});
