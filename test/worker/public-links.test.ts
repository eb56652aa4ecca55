// The links tern puts in front of the public, at their edges (from an outside review of every
// signed link): a deleted account's unsubscribe link, a click redirect to a link with non-ASCII
// characters, the one spelling of a signed expiry, and the clicks one email may record a minute.
import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { deleteAccountData } from "../../worker/accounts/data.ts";
import { d1Runner, r2Store } from "../../worker/accounts/bindings.ts";
import { readConfig } from "../../worker/config.ts";
import { signUnsubscribeToken } from "../../worker/contacts/unsubscribe-token.ts";
import { linkTokenKey } from "../../worker/tracking/outgoing.ts";
import { CLICKS_PER_EMAIL_PER_WINDOW } from "../../worker/tracking/record.ts";
import { signClickToken } from "../../worker/tracking/tokens.ts";
import { api, createAccount } from "./fixtures.ts";

const PUBLIC = "https://t.tern.test";
const visit = (path: string, init: RequestInit = {}) => exports.default.fetch(new Request(`${PUBLIC}${path}`, { redirect: "manual", ...init }));

describe("an unsubscribe link of a deleted account", () => {
  it("answers 404 (not 500) to the one-click POST and the page", async () => {
    const a = await createAccount();
    const token = await signUnsubscribeToken(await linkTokenKey(readConfig(env)), { accountId: a.accountId, emailId: crypto.randomUUID(), recipient: "reader@example.com" });
    await deleteAccountData(d1Runner(env.DB), r2Store(env.BLOBS), a.accountId);
    const post = await visit(`/u/${token}`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "List-Unsubscribe=One-Click" });
    expect(post.status, await post.clone().text()).toBe(404);
    const page = await visit(`/u/${token}`);
    expect(page.status).toBe(404);
    const left = await env.DB.prepare("SELECT count(*) AS n FROM contacts WHERE account_id = ?").bind(a.accountId).first<{ n: number }>();
    expect(left!.n).toBe(0);
  });
});

describe("a click redirect to a stored link with non-ASCII characters", () => {
  it("sends an ASCII (serialised) Location", async () => {
    const emailId = crypto.randomUUID();
    const links = ["https://example.com/€uro?q=ü", "https://日本.example/パス"];
    await env.DB.prepare("INSERT INTO email_links (email_id, links_json) VALUES (?, ?)").bind(emailId, JSON.stringify(links)).run();
    const key = await linkTokenKey(readConfig(env));
    for (const [i, link] of links.entries()) {
      const res = await visit(`/t/c/${await signClickToken(key, emailId, i, link)}`);
      expect(res.status).toBe(302);
      expect(res.headers.get("location")).toBe(new URL(link).href);
    }
  });
});

describe("a download or share link", () => {
  it("only the exact signed spelling opens the link", async () => {
    const a = await createAccount();
    const sent = await api(a.token, "POST", "/emails", { from: `x@${a.domain}`, to: "r@example.com", subject: "s", html: "<p>hi</p>" });
    const { id } = (await sent.json()) as { id: string };
    const { url } = (await (await api(a.token, "POST", `/emails/${id}/share`, { expires_in: "1h" })).json()) as { url: string };
    const u = new URL(url);
    expect((await exports.default.fetch(new Request(url))).status).toBe(200);
    const exp = u.searchParams.get("expires")!;
    for (const alt of [` ${exp}`, `${exp}.0`, `0x${Number(exp).toString(16)}`, `${exp}e0`]) {
      u.searchParams.set("expires", alt);
      expect((await exports.default.fetch(new Request(u.href))).status, alt).toBe(404);
    }
  });
});

describe("clicks one email records a minute", () => {
  it("are bounded for the email as a whole, not only per link", async () => {
    const a = await createAccount();
    const sent = await api(a.token, "POST", "/emails", { from: `x@${a.domain}`, to: "r@example.com", subject: "s", html: "<p>hi</p>" });
    const { id } = (await sent.json()) as { id: string };
    // Ten links, each clicked by twelve clients: 100 would pass the per-link limit of 10.
    const links = Array.from({ length: 10 }, (_, i) => `https://acme.example/p/${i}`);
    await env.DB.prepare("INSERT INTO email_links (email_id, links_json) VALUES (?, ?)").bind(id, JSON.stringify(links)).run();
    const key = await linkTokenKey(readConfig(env));
    const tokens = await Promise.all(links.map((l, i) => signClickToken(key, id, i, l)));
    for (const t of tokens) {
      const answers = await Promise.all(Array.from({ length: 12 }, (_, j) =>
        visit(`/t/c/${t}`, { headers: { "cf-connecting-ip": "203.0.113.9", "user-agent": `bot/${j}` } })));
      // Every reader still gets where the link goes.
      expect(answers.every((r) => r.status === 302)).toBe(true);
    }
    const n = await env.DB.prepare("SELECT count(*) AS n FROM email_events WHERE email_id = ? AND type = 'clicked'").bind(id).first<{ n: number }>();
    expect(n!.n).toBe(CLICKS_PER_EMAIL_PER_WINDOW);
  });
});
