// Deliverability insights: every check both ways on the pure module (no HTTP), the html scan's
// reading of links, images, hidden text, forms and scripts, its speed on a 100 KB message, and
// GET /emails/{id}/insights over a stored email with its domain's state.
import { describe, expect, it } from "vitest";
import { deliverabilityInsights, GMAIL_CLIP_BYTES, scanHtml, type Insight, type InsightDomain, type InsightEmail } from "../../worker/insights/checks.ts";
import { api, createAccount } from "./fixtures.ts";

const RESEND_IDS = ["link_domain_mismatch", "dmarc_missing", "missing_text_part", "no_reply_sender", "large_body", "url_shortener", "root_domain_sender", "shared_tracking_domain"];

const goodDomain: InsightDomain = {
  name: "mail.acme.example",
  status: "verified",
  dmarc: { found: true, policy: "reject", record: "v=DMARC1; p=reject", inherited: true },
  openTracking: false,
  clickTracking: false,
};

const good: InsightEmail = {
  from: "Acme <hello@mail.acme.example>",
  replyTo: ["support@acme.example"],
  subject: "Your receipt for order 1042",
  html: `<html><head><style>p{color:red}</style></head><body><p>Thanks for your order. Your receipt is below, with everything you bought and what it cost.</p>
<img src="https://acme.example/logo.png" alt="Acme"><p>Questions? <a href="https://acme.example/help">Visit our help centre</a> any time.</p></body></html>`,
  text: "Thanks for your order. Your receipt is below, with everything you bought and what it cost. Acme. Questions? Visit our help centre any time.",
  headers: {},
  attachments: [{ filename: "receipt.pdf" }],
  broadcast: false,
};

function run(email: Partial<InsightEmail>, domain: InsightDomain | null = goodDomain, trackingHost: string | null = null): Map<string, Insight> {
  return new Map(deliverabilityInsights({ ...good, ...email }, domain, { trackingHost }).map((i) => [i.id, i]));
}

function status(email: Partial<InsightEmail>, id: string, domain: InsightDomain | null = goodDomain, trackingHost: string | null = null): string {
  const found = run(email, domain, trackingHost).get(id);
  expect(found, id).toBeDefined();
  return found!.status;
}

describe("deliverability checks", () => {
  it("a careful email passes every check; Resend's ids come first, then at least twelve more", () => {
    const all = deliverabilityInsights(good, goodDomain, { trackingHost: null });
    expect(all.filter((i) => i.status !== "passed")).toEqual([]);
    expect(all.slice(0, 8).map((i) => i.id)).toEqual(RESEND_IDS);
    expect(all.length - RESEND_IDS.length).toBeGreaterThanOrEqual(12);
    expect(new Set(all.map((i) => i.id)).size).toBe(all.length);
    for (const i of all) expect(i.title.length > 0 && i.detail.length > 0, i.id).toBe(true);
  });

  it.each([
    ["link_domain_mismatch", { html: '<p>Read <a href="https://elsewhere.example/x">this</a> article today, it is long enough.</p>' }, "warning"],
    ["link_domain_mismatch", { html: '<a href="https://www.acme.example/x">ours</a> <a href="mailto:x@y.z">mail</a>' }, "passed"],
    ["missing_text_part", { text: null }, "warning"],
    ["no_reply_sender", { from: "no-reply@mail.acme.example" }, "warning"],
    ["no_reply_sender", { from: "Acme <donotreply@mail.acme.example>" }, "warning"],
    ["no_reply_sender", { from: "replies@mail.acme.example" }, "passed"],
    ["large_body", { html: `<p>${"x".repeat(GMAIL_CLIP_BYTES + 1)}</p>` }, "warning"],
    ["url_shortener", { html: '<p>See <a href="https://bit.ly/abc">here</a></p>' }, "failed"],
    ["root_domain_sender", { from: "hello@acme.example" }, "warning"],
    ["root_domain_sender", { from: "hello@acme.co.uk" }, "warning"],
    ["root_domain_sender", { from: "hello@news.acme.co.uk" }, "passed"],
    ["image_alt_text", { html: '<p>Hello there, a long enough paragraph of words to read.</p><img src="https://acme.example/a.png">' }, "warning"],
    ["image_to_text_ratio", { html: '<img src="https://acme.example/a.png" alt="a"><img src="https://acme.example/b.png" alt="b">' }, "failed"],
    ["image_to_text_ratio", { html: `<p>${"word ".repeat(50)}</p><img alt="" src="https://acme.example/a.png"><img alt="" src="https://acme.example/b.png"><img alt="" src="https://acme.example/c.png">` }, "warning"],
    ["link_text_mismatch", { html: '<a href="https://evil.example/login">https://acme.example/login</a>' }, "failed"],
    ["link_text_mismatch", { html: '<a href="https://acme.example/login">www.acme.example/login</a>' }, "passed"],
    ["ip_address_links", { html: '<a href="http://192.0.2.7/x">click</a>' }, "failed"],
    ["insecure_links", { html: '<a href="http://acme.example/x">click</a>' }, "warning"],
    ["html_forms", { html: '<form action="https://acme.example"><input name="pw"></form>' }, "failed"],
    ["html_scripts", { html: "<p>hi</p><script>alert(1)</script>" }, "failed"],
    ["html_scripts", { html: '<a href="javascript:alert(1)">x</a>' }, "failed"],
    ["html_scripts", { html: '<img src="x.png" alt="" onerror="alert(1)">' }, "failed"],
    ["invisible_text", { html: `<p>Short visible text.</p><div style="display: none">${"hidden words ".repeat(30)}</div>` }, "warning"],
    ["invisible_text", { html: `<p>Visible.</p><span style="color:#fff;background-color:#FFFFFF">${"white on white ".repeat(20)}</span>` }, "warning"],
    ["invisible_text", { html: `<div style="display:none">A short preheader.</div><p>${"A normal visible paragraph. ".repeat(10)}</p>` }, "passed"],
    ["text_html_mismatch", { text: "Completely unrelated words about gardening tomatoes and cucumbers in summer." }, "warning"],
    ["subject_all_caps", { subject: "FINAL NOTICE ABOUT YOUR ACCOUNT" }, "warning"],
    ["subject_all_caps", { subject: "Your PDF is ready" }, "passed"],
    ["subject_punctuation", { subject: "Act now!!!" }, "warning"],
    ["subject_punctuation", { subject: "Really?!" }, "warning"],
    ["list_unsubscribe", { broadcast: true }, "failed"],
    ["list_unsubscribe", { broadcast: true, headers: { "List-Unsubscribe": "<{{{RESEND_UNSUBSCRIBE_URL}}}>" } }, "passed"],
    ["one_click_unsubscribe", { headers: { "List-Unsubscribe": "<mailto:u@acme.example>" } }, "warning"],
    ["one_click_unsubscribe", { headers: { "List-Unsubscribe": "<https://acme.example/u>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click" } }, "passed"],
    ["reply_to_mismatch", { replyTo: ["someone@gmail.com"] }, "warning"],
    ["risky_attachments", { attachments: [{ filename: "invoice.pdf.exe" }] }, "failed"],
  ] as [string, Partial<InsightEmail>, string][])("%s: %j is %s", (id, email, expected) => {
    expect(status(email, id)).toBe(expected);
  });

  it("domain state: DMARC missing or p=none, an unverified domain, tracking on tern's shared host", () => {
    expect(status({}, "dmarc_missing", { ...goodDomain, dmarc: null })).toBe("failed");
    expect(status({}, "dmarc_missing", { ...goodDomain, dmarc: { found: false, policy: null, record: null, inherited: false } })).toBe("failed");
    expect(status({}, "dmarc_policy", { ...goodDomain, dmarc: { found: true, policy: "none", record: "v=DMARC1; p=none", inherited: false } })).toBe("warning");
    expect(status({}, "domain_authentication", { ...goodDomain, status: "pending" })).toBe("failed");
    expect(status({}, "domain_authentication", null)).toBe("failed");
    const tracked = { ...goodDomain, clickTracking: true };
    expect(status({}, "shared_tracking_domain", tracked, "t.tern.example")).toBe("warning");
    expect(status({}, "shared_tracking_domain", tracked, "links.acme.example")).toBe("passed");
    expect(status({}, "shared_tracking_domain", goodDomain, "t.tern.example")).toBe("passed");
  });

  it("details say how to fix, with the rule or requirement behind them", () => {
    const found = run({ subject: "BUY NOW BEFORE IT IS GONE", html: '<a href="http://192.0.2.1/">x</a>', from: "noreply@acme.example" }, { ...goodDomain, dmarc: null });
    expect(found.get("subject_all_caps")!.detail).toMatch(/SUBJ_ALL_CAPS/);
    expect(found.get("ip_address_links")!.detail).toMatch(/NUMERIC_HTTP_ADDR/);
    expect(found.get("dmarc_missing")!.detail).toMatch(/_dmarc\.acme\.example.*v=DMARC1/);
    expect(found.get("root_domain_sender")!.detail).toMatch(/subdomain/);
  });

  it("details speak to people: a check refers to another by its title, never by its id", () => {
    const noDmarc = run({ subject: "BUY NOW", html: '<a href="https://bit.ly/x">https://example.org/</a>', text: null, from: "noreply@acme.example" }, { ...goodDomain, dmarc: null, status: "pending" });
    expect(noDmarc.get("dmarc_policy")!.detail).toContain(`"${noDmarc.get("dmarc_missing")!.title}"`);
    const ids = [...noDmarc.keys()];
    for (const i of noDmarc.values()) for (const id of ids) expect(i.detail, i.id).not.toMatch(new RegExp(`\\b${id}\\b`));
  });
});

describe("the html scan", () => {
  it("reads links with their text, images, forms, scripts and hidden text as a browser would", () => {
    const facts = scanHtml(`<!-- <a href="https://comment.example">no</a> --><head><title>T</title><style>a{}</style></head>
<body><a href="https://a.example/1?x=1&amp;y=2">First <b>link</b></a><a href=https://b.example>b</a>
<script>var s = '<a href="https://script.example">';</script><img src=x alt=""><img src=y>
<div style="DISPLAY:none"><p>secret</p></div><form></form></body>`);
    expect(facts.links.map((l) => [l.href, l.host, l.text])).toEqual([
      ["https://a.example/1?x=1&y=2", "a.example", "First link"],
      ["https://b.example", "b.example", "b"],
    ]);
    expect([facts.images, facts.imagesWithoutAlt, facts.forms, facts.scripts]).toEqual([2, 1, 1, 1]);
    expect(facts.hiddenChars).toBe("secret".length);
  });

  it("checks a 100 KB html message in a few milliseconds", () => {
    const block = `<tr><td style="padding:8px;font-family:Arial"><a href="https://shop.acme.example/p/{i}?utm_source=news">Product {i}</a>
<img src="https://cdn.acme.example/{i}.jpg" alt="Product {i}" width="120"><p>Great product number {i}, on sale this week only.</p></td></tr>`;
    let html = "<table>";
    for (let i = 0; html.length < 100 * 1024; i++) html += block.replaceAll("{i}", String(i));
    html += "</table>";
    const email = { ...good, html, text: null };
    deliverabilityInsights(email, goodDomain, { trackingHost: null }); // warm up
    const runs = 20;
    const start = performance.now();
    for (let i = 0; i < runs; i++) deliverabilityInsights(email, goodDomain, { trackingHost: null });
    const perEmail = (performance.now() - start) / runs;
    // workerd's clock only advances across I/O, so this is a bound, not the benchmark
    // (npm run bench measures it); it still catches a quadratic scan.
    expect(perEmail).toBeLessThan(100);
  });
});

describe("GET /emails/{id}/insights", () => {
  it("checks a stored email against its domain, and another account gets a 404", async () => {
    const a = await createAccount();
    const res = await api(a.token, "POST", "/emails", {
      from: `no-reply@${a.domain}`, to: "delivered@simulator.tern.test", subject: "HELLO THERE FRIEND!!!",
      html: '<p>Hi</p><a href="https://bit.ly/x">https://example.com</a><img src="https://x.example/a.png">', text: "",
    });
    const { id } = (await res.json()) as { id: string };
    const got = await api(a.token, "GET", `/emails/${id}/insights`);
    expect(got.status).toBe(200);
    const body = (await got.json()) as { object: string; data: Insight[] };
    expect(body.object).toBe("list");
    const by = new Map(body.data.map((i) => [i.id, i.status]));
    for (const id of RESEND_IDS) expect(by.has(id), id).toBe(true);
    expect(by.get("no_reply_sender")).toBe("warning");
    expect(by.get("url_shortener")).toBe("failed");
    expect(by.get("missing_text_part")).toBe("warning");
    expect(by.get("dmarc_missing")).toBe("failed"); // never checked in this test: no DMARC known
    expect(by.get("subject_all_caps")).toBe("warning");
    expect(by.get("link_text_mismatch")).toBe("failed");

    const other = await createAccount();
    expect((await api(other.token, "GET", `/emails/${id}/insights`)).status).toBe(404);
    expect((await api(a.token, "GET", "/emails/0193a8a0-1c2d-7000-8000-000000000000/insights")).status).toBe(404);
  });
});
