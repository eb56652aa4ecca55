// Open and click tracking on the real send path: a domain with tracking on sends mail whose
// links go through signed redirects and that carries a pixel (still DKIM-valid); the pixel
// and the redirects record email.opened / email.clicked; forged, altered and cross-email
// tokens get a 404 and record nothing; with tracking off the html is sent as written.
import { env, exports } from "cloudflare:workers";
import PostalMime from "postal-mime";
import { beforeAll, describe, expect, it } from "vitest";
import { readConfig } from "../../worker/config.ts";
import { linkTokenKey, trackedHtml } from "../../worker/tracking/outgoing.ts";
import { CLICK_WINDOW_MS, CLICKS_PER_LINK_PER_WINDOW, loadEmail, recordClick } from "../../worker/tracking/record.ts";
import { signClickToken } from "../../worker/tracking/tokens.ts";
import { api, createAccount, type TestAccount } from "./fixtures.ts";
import { address, bytesOf, capturedFor, type Captured } from "./peers.ts";
import { waitFor } from "./wait.ts";
import { authenticateCaptured, publish, publishRecords, type DomainRecord } from "./zone.ts";

let acct: TestAccount;
let tracked: { id: string; name: string };

const PUBLIC = "https://t.tern.test";
const LINK_A = "https://acme.example/pricing?plan=pro&ref=mail";
const LINK_B = "https://docs.acme.example/start#intro";
const HTML = `<html><body><p>Hello</p><a href="https://acme.example/pricing?plan=pro&amp;ref=mail">Pricing</a>
<a href="${LINK_B}">Docs</a><a href="https://acme.example/pricing?plan=pro&amp;ref=mail">Again</a>
<a href="mailto:help@acme.example">Mail us</a><a href="https://acme.example/unsubscribe">Unsubscribe</a></body></html>`;

beforeAll(async () => {
  acct = await createAccount({ listening: true });
  await publish("_spf.tern.test", "TXT", ["v=spf1 ip4:127.0.0.1 -all"]);
  const name = `tr${crypto.randomUUID().slice(0, 8)}.dkim.test`;
  const created = (await (await api(acct.token, "POST", "/domains", { name })).json()) as { id: string; records: DomainRecord[] };
  await publishRecords(name, created.records);
  await publish(`_dmarc.${name}`, "TXT", ["v=DMARC1; p=reject"]);
  expect(((await (await api(acct.token, "POST", `/domains/${created.id}/verify`)).json()) as { status: string }).status).toBe("verified");
  const patched = await api(acct.token, "PATCH", `/domains/${created.id}`, { open_tracking: true, click_tracking: true });
  expect(patched.status).toBe(200);
  tracked = { id: created.id, name };
});

async function send(from: string, html = HTML): Promise<{ id: string; msg: Captured; html: string }> {
  const to = address("track");
  const res = await api(acct.token, "POST", "/emails", { from, to, subject: "Tracked", html });
  expect(res.status, await res.clone().text()).toBe(200);
  const { id } = (await res.json()) as { id: string };
  const [msg] = await waitFor("the message at the peer", async () => ((await capturedFor(to)).length ? capturedFor(to) : undefined), 15_000);
  const parsed = await PostalMime.parse(bytesOf(msg!.rawBase64));
  return { id, msg: msg!, html: parsed.html ?? "" };
}

function visit(path: string, init: RequestInit = {}) {
  const headers = { "cf-connecting-ip": "203.0.113.9", "user-agent": "TestMail/1.0", ...(init.headers as Record<string, string>) };
  return exports.default.fetch(new Request(`${PUBLIC}${path}`, { redirect: "manual", ...init, headers }));
}

const pathOf = (url: string) => url.slice(PUBLIC.length);
const clickUrls = (html: string) => [...html.matchAll(/href="(https:\/\/t\.tern\.test\/t\/c\/[A-Za-z0-9_-]+)"/g)].map((m) => m[1]!);
const pixelUrl = (html: string) => html.match(/<img src="(https:\/\/t\.tern\.test\/t\/o\/[A-Za-z0-9_-]+)"/)?.[1];

async function events(id: string) {
  return ((await (await api(acct.token, "GET", `/emails/${id}/events?limit=100`)).json()) as { data: { type: string; data: Record<string, unknown> }[] }).data;
}
async function webhookEvents(emailId: string, type: string) {
  const rows = await env.DB.prepare("SELECT payload_json FROM webhook_events WHERE account_id = ? AND type = ?").bind(acct.accountId, type).all<{ payload_json: string }>();
  return rows.results.map((r) => JSON.parse(r.payload_json) as { type: string; created_at: string; data: Record<string, any> }).filter((p) => p.data.email_id === emailId);
}

describe("open and click tracking", () => {
  let sent: { id: string; msg: Captured; html: string };
  beforeAll(async () => {
    sent = await send(`News <news@${tracked.name}>`);
  });

  it("a tracked send arrives with its links rewritten and a pixel, and still passes DKIM", async () => {
    const urls = clickUrls(sent.html);
    expect(urls).toHaveLength(3); // two links, one of them twice; mailto and unsubscribe stay as written
    expect(urls[0]).toBe(urls[2]);
    expect(sent.html).toContain('href="mailto:help@acme.example"');
    expect(sent.html).toContain('href="https://acme.example/unsubscribe"');
    expect(sent.html).not.toContain("https://acme.example/pricing");
    expect(pixelUrl(sent.html)).toBeDefined();
    const verdict = await authenticateCaptured(sent.msg);
    expect(verdict.dkim[0]).toMatchObject({ result: "pass", domain: tracked.name });
    expect(verdict.dmarc).toMatchObject({ result: "pass" });
  });

  it("the pixel answers a GIF and records email.opened with the visitor's address and agent, once per short window", async () => {
    const res = await visit(pathOf(pixelUrl(sent.html)!));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/gif");
    expect((await res.arrayBuffer()).byteLength).toBeGreaterThan(30);
    await visit(pathOf(pixelUrl(sent.html)!)); // a proxy fetching it again
    const opened = (await events(sent.id)).filter((e) => e.type === "opened");
    expect(opened).toHaveLength(1);
    expect(opened[0]!.data).toEqual({ open: { ipAddress: "203.0.113.9", userAgent: "TestMail/1.0" } });
    const hooks = await webhookEvents(sent.id, "email.opened");
    expect(hooks).toHaveLength(1);
    expect(hooks[0]!.data.open).toEqual({ ipAddress: "203.0.113.9", userAgent: "TestMail/1.0", timestamp: hooks[0]!.created_at });
    expect(((await (await api(acct.token, "GET", `/emails/${sent.id}`)).json()) as { last_event: string }).last_event).toBe("opened");
  });

  it("a click redirects 302 to exactly the original link and records email.clicked with it", async () => {
    const [first, second] = clickUrls(sent.html);
    const res = await visit(pathOf(first!));
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe(LINK_A);
    const res2 = await visit(pathOf(second!));
    expect(res2.headers.get("location")).toBe(LINK_B);
    const clicked = (await events(sent.id)).filter((e) => e.type === "clicked");
    expect(clicked.map((e) => (e.data.click as { link: string }).link)).toEqual([LINK_A, LINK_B]);
    const hooks = await webhookEvents(sent.id, "email.clicked");
    expect(hooks.map((h) => h.data.click)).toEqual([
      { ipAddress: "203.0.113.9", link: LINK_A, timestamp: hooks[0]!.created_at, userAgent: "TestMail/1.0" },
      { ipAddress: "203.0.113.9", link: LINK_B, timestamp: hooks[1]!.created_at, userAgent: "TestMail/1.0" },
    ]);
    expect(((await (await api(acct.token, "GET", `/emails/${sent.id}`)).json()) as { last_event: string }).last_event).toBe("clicked");
  });

  // Issue 20, item 5: 200 requests on one link made 200 click events and 200 webhook posts.
  it("a flood on one link: every request redirects, one client counts once, the link at most its cap per window", async () => {
    const flood = await send(`News <news@${tracked.name}>`);
    const [linkA, linkB] = clickUrls(flood.html);
    // The window starts on the clock's minute: keep the flood inside one.
    if (Date.now() % CLICK_WINDOW_MS > CLICK_WINDOW_MS - 15_000) await new Promise((r) => setTimeout(r, CLICK_WINDOW_MS - (Date.now() % CLICK_WINDOW_MS) + 50));
    const same = await Promise.all(Array.from({ length: 100 }, () => visit(pathOf(linkA!))));
    const many = await Promise.all(Array.from({ length: 100 }, (_, i) => visit(pathOf(linkA!), { headers: { "cf-connecting-ip": `198.51.100.${i}`, "user-agent": `Bot/${i}` } })));
    for (const res of [...same, ...many]) {
      expect(res.status).toBe(302);
      expect(res.headers.get("location")).toBe(LINK_A);
    }
    const clicksOf = async (link: string) => (await events(flood.id)).filter((e) => e.type === "clicked" && (e.data.click as { link: string }).link === link);
    const recorded = await clicksOf(LINK_A);
    expect(recorded).toHaveLength(CLICKS_PER_LINK_PER_WINDOW);
    // The flooding client counted once among them.
    expect(recorded.filter((e) => (e.data.click as { userAgent: string }).userAgent === "TestMail/1.0").length).toBeLessThanOrEqual(1);
    expect((await webhookEvents(flood.id, "email.clicked")).length).toBe(CLICKS_PER_LINK_PER_WINDOW);
    // The cap is per link: another link of the same email still counts.
    expect((await visit(pathOf(linkB!))).headers.get("location")).toBe(LINK_B);
    expect(await clicksOf(LINK_B)).toHaveLength(1);
  });

  it("concurrent pixel fetches record one open", async () => {
    const pixel = await send(`News <news@${tracked.name}>`);
    if (Date.now() % 60_000 > 45_000) await new Promise((r) => setTimeout(r, 60_000 - (Date.now() % 60_000) + 50));
    const answers = await Promise.all(Array.from({ length: 50 }, () => visit(pathOf(pixelUrl(pixel.html)!))));
    for (const res of answers) expect(res.headers.get("content-type")).toBe("image/gif");
    expect((await events(pixel.id)).filter((e) => e.type === "opened")).toHaveLength(1);
    expect(await webhookEvents(pixel.id, "email.opened")).toHaveLength(1);
  });

  it("a client's click counts again in the next window, and the cap opens again", async () => {
    const again = await send(`News <news@${tracked.name}>`);
    const email = (await loadEmail(env.DB, again.id))!;
    const visitor = { ipAddress: "203.0.113.7", userAgent: "Mail/2" };
    const t = Math.floor(Date.now() / CLICK_WINDOW_MS) * CLICK_WINDOW_MS;
    expect(await recordClick(env, email, 0, LINK_A, visitor, t)).toBe(true);
    expect(await recordClick(env, email, 0, LINK_A, visitor, t + CLICK_WINDOW_MS - 1)).toBe(false);
    expect(await recordClick(env, email, 1, LINK_B, visitor, t + 1)).toBe(true);
    expect(await recordClick(env, email, 0, LINK_A, visitor, t + CLICK_WINDOW_MS)).toBe(true);
    const clients = Array.from({ length: CLICKS_PER_LINK_PER_WINDOW + 5 }, (_, i) => ({ ipAddress: `192.0.2.${i}`, userAgent: "x" }));
    const next = t + 2 * CLICK_WINDOW_MS;
    const verdicts = await Promise.all(clients.map((v) => recordClick(env, email, 0, LINK_A, v, next)));
    expect(verdicts.filter(Boolean)).toHaveLength(CLICKS_PER_LINK_PER_WINDOW);
    const clicked = (await events(again.id)).filter((e) => e.type === "clicked");
    expect(clicked).toHaveLength(3 + CLICKS_PER_LINK_PER_WINDOW);
    expect(await webhookEvents(again.id, "email.clicked")).toHaveLength(3 + CLICKS_PER_LINK_PER_WINDOW);
  });

  it("forged, altered and cross-email click tokens get a 404, never a redirect, and record nothing", async () => {
    const other = await send(`News <news@${tracked.name}>`, `<p><a href="https://other.example/only-here">x</a></p>`);
    const before = [(await events(sent.id)).length, (await events(other.id)).length];
    const token = pathOf(clickUrls(sent.html)[0]!).slice("/t/c/".length);
    const flip = (t: string, i: number) => t.slice(0, i) + (t[i] === "A" ? "B" : "A") + t.slice(i + 1);
    const key = await linkTokenKey(readConfig(env));
    const wrongKey = await crypto.subtle.importKey("raw", new TextEncoder().encode("x".repeat(40)), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    const attempts = [
      "not-a-token",
      flip(token, 3), // the email id
      flip(token, 27), // the link index
      flip(token, token.length - 2), // the MAC
      await signClickToken(wrongKey, sent.id, 0, LINK_A), // another key: forged
      await signClickToken(key, other.id, 0, LINK_A), // a real link, but not of that email
      await signClickToken(key, sent.id, 5, LINK_A), // an index the email does not have
    ];
    for (const t of attempts) {
      const res = await visit(`/t/c/${t}`);
      expect(res.status, t).toBe(404);
      expect(res.headers.get("location")).toBeNull();
      expect(((await res.json()) as { name: string }).name).toBe("not_found");
    }
    // A forged pixel still answers the GIF but records nothing.
    expect((await visit(`/t/o/${flip(pathOf(pixelUrl(other.html)!).slice(5), 10)}`)).status).toBe(200);
    expect([(await events(sent.id)).length, (await events(other.id)).length]).toEqual(before);
    // The other email's own token goes to its own link only.
    expect((await visit(pathOf(clickUrls(other.html)[0]!))).headers.get("location")).toBe("https://other.example/only-here");
  });

  it("a retry rewrites the same way: the same html and the same stored links", async () => {
    const row = (await env.DB.prepare("SELECT * FROM emails WHERE id = ?").bind(sent.id).first<Record<string, unknown>>())!;
    const email = { id: sent.id, accountId: acct.accountId, domainId: row.domain_id } as Parameters<typeof trackedHtml>[2];
    const stored = await env.DB.prepare("SELECT links_json FROM email_links WHERE email_id = ?").bind(sent.id).first("links_json");
    expect(JSON.parse(stored as string)).toEqual([LINK_A, LINK_B]);
    const config = readConfig(env);
    const settings = { openTracking: true, clickTracking: true };
    const once = await trackedHtml(env, config, email, settings, HTML);
    expect(await trackedHtml(env, config, email, settings, HTML)).toBe(once);
    expect(clickUrls(once!)).toEqual(clickUrls(sent.html));
    expect(await env.DB.prepare("SELECT links_json FROM email_links WHERE email_id = ?").bind(sent.id).first("links_json")).toBe(stored);
  });

  it("with tracking off the html goes out as written", async () => {
    const plain = await send(`News <news@${acct.domain}>`);
    expect(plain.html).toContain('href="https://acme.example/pricing?plan=pro&amp;ref=mail"');
    expect(plain.html).not.toContain("/t/o/");
    expect(plain.html).not.toContain("/t/c/");
    expect(await env.DB.prepare("SELECT COUNT(*) AS n FROM email_links WHERE email_id = ?").bind(plain.id).first("n")).toBe(0);
  });
});
