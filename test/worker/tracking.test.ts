// Open and click tracking inside workerd: signed tokens that cannot be forged, altered or
// moved to another email or link, and the HTML rewrite, whose output is read back with the
// Workers runtime's own HTML parser (HTMLRewriter) to show that only the hrefs changed.
import { describe, expect, it } from "vitest";
import { constantTimeEqual } from "../../worker/bytes.ts";
import { decodeAttributeValue, scanTags } from "../../worker/tracking/html.ts";
import { clickUrl, MAX_TRACKED_LINKS, openPixelUrl, rewriteHtml, trackableLink, type RewriteOptions } from "../../worker/tracking/rewrite.ts";
import {
  CLICK_PATH_PREFIX,
  clickTarget,
  importTrackingKey,
  OPEN_PATH_PREFIX,
  resolveClick,
  signClickToken,
  signOpenToken,
  verifyClickToken,
  verifyOpenToken,
} from "../../worker/tracking/tokens.ts";

const EMAIL_A = "0193a8a0-1c2d-7000-8000-00000000000a";
const EMAIL_B = "0193a8a0-1c2d-7000-8000-00000000000b";
const key = await importTrackingKey("a test secret that is long enough for HMAC-SHA256 use");
const otherKey = await importTrackingKey("another secret, as another deployment would have it");
const BASE = "https://links.acme.example";

function b64urlToBytes(token: string): Uint8Array {
  const b64 = token.replace(/-/g, "+").replace(/_/g, "/");
  return Uint8Array.from(atob(b64.padEnd(Math.ceil(b64.length / 4) * 4, "=")), (c) => c.charCodeAt(0));
}
function bytesToB64url(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

describe("tracking tokens", () => {
  it("round-trip: an open token names its email, a click token its email and link", async () => {
    const open = await signOpenToken(key, EMAIL_A);
    expect(open).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(await verifyOpenToken(key, open)).toEqual({ ok: true, value: { emailId: EMAIL_A } });
    const click = await signClickToken(key, EMAIL_A, 3, "https://acme.example/a?b=1&c=2");
    expect(click).toMatch(/^[A-Za-z0-9_-]+$/);
    const claim = await verifyClickToken(key, click);
    expect(claim.ok && claim.value.emailId).toBe(EMAIL_A);
    expect(claim.ok && claim.value.linkIndex).toBe(3);
  });

  it("issued for a domain's tracking host, are authentic at that host only, and others are not authentic there", async () => {
    const host = "links.acme.example";
    const click = await signClickToken(key, EMAIL_A, 0, "https://acme.example/", host);
    const open = await signOpenToken(key, EMAIL_A, host);
    expect((await verifyClickToken(key, click, host)).ok).toBe(true);
    expect((await verifyOpenToken(key, open, host)).ok).toBe(true);
    for (const elsewhere of [undefined, "links.other.example", `${host}.`, "LINKS.acme.example"]) {
      expect((await verifyClickToken(key, click, elsewhere)).ok, String(elsewhere)).toBe(false);
      expect((await verifyOpenToken(key, open, elsewhere)).ok, String(elsewhere)).toBe(false);
    }
    // A token issued for the deployment's own host is not authentic at any domain's host.
    expect((await verifyClickToken(key, await signClickToken(key, EMAIL_A, 0, "https://acme.example/"), host)).ok).toBe(false);
    // Its version byte changed to look like the other kind: the MAC still refuses it.
    const bytes = b64urlToBytes(click);
    bytes[0] = 1;
    expect((await verifyClickToken(key, bytesToB64url(bytes))).ok).toBe(false);
  });

  it("are short enough for a URL path", async () => {
    expect((await signOpenToken(key, EMAIL_A)).length).toBeLessThanOrEqual(48);
    expect((await signClickToken(key, EMAIL_A, 65535, "https://x.example/" + "y".repeat(3000))).length).toBeLessThanOrEqual(60);
  });

  it("reject every single-byte alteration", async () => {
    const click = await signClickToken(key, EMAIL_A, 1, "https://acme.example/");
    const bytes = b64urlToBytes(click);
    for (let i = 0; i < bytes.length; i++) {
      for (const flip of [0x01, 0x80]) {
        const altered = bytes.slice();
        altered[i] = altered[i]! ^ flip;
        expect((await verifyClickToken(key, bytesToB64url(altered))).ok, `byte ${i}`).toBe(false);
      }
    }
    const open = b64urlToBytes(await signOpenToken(key, EMAIL_A));
    for (let i = 0; i < open.length; i++) {
      const altered = open.slice();
      altered[i] = altered[i]! ^ 0x01;
      expect((await verifyOpenToken(key, bytesToB64url(altered))).ok, `byte ${i}`).toBe(false);
    }
  });

  it("cannot be moved to another email: swapping the email id breaks the MAC", async () => {
    const click = b64urlToBytes(await signClickToken(key, EMAIL_A, 0, "https://acme.example/"));
    const other = b64urlToBytes(await signClickToken(key, EMAIL_B, 0, "https://acme.example/"));
    const spliced = click.slice();
    spliced.set(other.subarray(2, 18), 2); // B's id with A's MAC
    expect((await verifyClickToken(key, bytesToB64url(spliced))).ok).toBe(false);
    // A's id bytes with B's MAC, too.
    const spliced2 = other.slice();
    spliced2.set(click.subarray(2, 18), 2);
    expect((await verifyClickToken(key, bytesToB64url(spliced2))).ok).toBe(false);
  });

  it("reject forgeries: another key, random bytes, the other kind, junk text", async () => {
    const click = await signClickToken(key, EMAIL_A, 0, "https://acme.example/");
    const open = await signOpenToken(key, EMAIL_A);
    expect((await verifyClickToken(otherKey, click)).ok).toBe(false);
    expect((await verifyOpenToken(otherKey, open)).ok).toBe(false);
    expect((await verifyClickToken(key, open)).ok).toBe(false);
    expect((await verifyOpenToken(key, click)).ok).toBe(false);
    for (const junk of [
      "",
      "a",
      bytesToB64url(crypto.getRandomValues(new Uint8Array(44))),
      bytesToB64url(crypto.getRandomValues(new Uint8Array(34))),
      `${click}=`,
      `${click}A`,
      click.slice(0, -1),
      click.replace(/-/g, "+"),
      "%".repeat(59),
      "A".repeat(100_000),
      "../../etc/passwd",
    ]) {
      expect(await verifyClickToken(key, junk)).toEqual({ ok: false, message: "The tracking token is not valid." });
      expect((await verifyOpenToken(key, junk)).ok).toBe(false);
    }
  });

  it("reject a non-canonical spelling of a valid token", async () => {
    // 34 bytes -> 46 characters whose last one carries 4 unused bits; setting them gives a different string for the same bytes.
    const open = await signOpenToken(key, EMAIL_A);
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const last = alphabet.indexOf(open.at(-1)!);
    const twin = open.slice(0, -1) + alphabet[last | 0b0001]!;
    if (twin !== open) expect((await verifyOpenToken(key, twin)).ok).toBe(false);
  });

  it("redirect only to the stored link the token was made for", async () => {
    const links = ["https://acme.example/one", "https://acme.example/two?x=1&y=2"];
    const token = await signClickToken(key, EMAIL_A, 1, links[1]!);
    const claim = await verifyClickToken(key, token);
    if (!claim.ok) throw new Error("valid token refused");
    expect(await clickTarget(claim.value, links)).toBe(links[1]);
    // The stored list of another email, or a changed link at that index, does not match.
    expect(await clickTarget(claim.value, ["https://acme.example/one", "https://evil.example/"])).toBeNull();
    expect(await clickTarget(claim.value, ["https://acme.example/one"])).toBeNull();
    expect(await clickTarget(claim.value, [])).toBeNull();
  });

  it("resolve a click through the email's own links, asking storage only for authentic tokens", async () => {
    const stored: Record<string, string[]> = {
      [EMAIL_A]: ["https://acme.example/a"],
      [EMAIL_B]: ["https://acme.example/b"],
    };
    const asked: string[] = [];
    const load = async (id: string) => {
      asked.push(id);
      return stored[id] ?? null;
    };
    const token = await signClickToken(key, EMAIL_A, 0, "https://acme.example/a");
    expect(await resolveClick(key, token, load)).toEqual({ ok: true, value: { emailId: EMAIL_A, linkIndex: 0, link: "https://acme.example/a" } });
    expect(asked).toEqual([EMAIL_A]);
    // A token made for B's link but claiming A's index 0 cannot exist; one made for A with B's URL does not match A's stored link.
    const wrongLink = await signClickToken(key, EMAIL_A, 0, "https://acme.example/b");
    expect(await resolveClick(key, wrongLink, load)).toEqual({ ok: false, message: "The link of this tracking token is not known." });
    asked.length = 0;
    expect((await resolveClick(otherKey, token, load)).ok).toBe(false);
    expect((await resolveClick(key, "forged", load)).ok).toBe(false);
    expect(asked).toEqual([]);
    const unknownEmail = await signClickToken(key, "0193a8a0-1c2d-7000-8000-0000000000ff", 0, "https://acme.example/a");
    expect((await resolveClick(key, unknownEmail, load)).ok).toBe(false);
  });

  it("refuse to sign what they cannot represent", async () => {
    await expect(signOpenToken(key, "not-a-uuid")).rejects.toThrow(TypeError);
    await expect(signClickToken(key, EMAIL_A, -1, "https://a.example/")).rejects.toThrow(RangeError);
    await expect(signClickToken(key, EMAIL_A, 65536, "https://a.example/")).rejects.toThrow(RangeError);
    await expect(importTrackingKey("short")).rejects.toThrow(RangeError);
  });

  it("compare MACs in constant time, and by length first", () => {
    expect(constantTimeEqual(new Uint8Array([1, 2]), new Uint8Array([1, 2]))).toBe(true);
    expect(constantTimeEqual(new Uint8Array([1, 2]), new Uint8Array([1, 3]))).toBe(false);
    expect(constantTimeEqual(new Uint8Array([1]), new Uint8Array([1, 2]))).toBe(false);
  });
});

// --- HTML --------------------------------------------------------------------------------------

describe("attribute values as a browser decodes them", () => {
  it.each([
    ["https://a.example/?x=1&amp;y=2", "https://a.example/?x=1&y=2"],
    ["https://a.example/?x=1&y=2", "https://a.example/?x=1&y=2"],
    ["https://a.example/?x=1&#38;y=2&#x26;z=3&#X26;w", "https://a.example/?x=1&y=2&z=3&w"],
    ["https://a.example/?copy=1&copy=2&reg=3&not=4", "https://a.example/?copy=1&copy=2&reg=3&not=4"], // legacy names before "=" stay
    ["https://a.example/?a=1&copy", "https://a.example/?a=1\u00a9"], // ...and are decoded at the end
    ["https://a.example/?a=&quot;b&quot;&amp;c=&lt;&gt;", 'https://a.example/?a="b"&c=<>'],
    ["https://a.example/&amp", "https://a.example/&"],
    ["https://a.example/&ampx", "https://a.example/&ampx"],
    ["https://a.example/&sol;&quest;a&equals;b&num;f", "https://a.example//?a=b#f"],
    ["https://a.example/&#0;&#x110000;&#xD800;", "https://a.example/\ufffd\ufffd\ufffd"],
    ["https://a.example/&#128;", "https://a.example/\u20ac"],
    ["https://a.example/&#", "https://a.example/&#"],
    ["https://a.example/& b", "https://a.example/& b"],
  ])("%s", (raw, decoded) => {
    expect(decodeAttributeValue(raw)).toBe(decoded);
  });

  it("gives up on a named reference it does not know, rather than guess", () => {
    expect(decodeAttributeValue("https://a.example/?x=&notin;")).toBeNull();
    expect(decodeAttributeValue("https://a.example/&hellip;")).toBeNull();
  });
});

describe("scanTags", () => {
  it("finds tags with uppercase names, every quoting style and odd spacing", () => {
    const html = `<A HREF = 'x' class="y z" data-a=b disabled\n title="a>b"><IMG SRC=c.png/></A>`;
    const tags = scanTags(html);
    expect(tags.map((t) => [t.name, t.end])).toEqual([["a", false], ["img", false], ["a", true]]);
    expect(tags[0]!.attributes.map((a) => [a.name, a.raw])).toEqual([["href", "x"], ["class", "y z"], ["data-a", "b"], ["disabled", ""], ["title", "a>b"]]);
    expect(tags[1]!.attributes).toEqual([{ name: "src", raw: "c.png/", valueStart: html.indexOf("c.png/"), valueEnd: html.indexOf("c.png/") + 6 }]);
  });

  it("skips comments, doctypes, CDATA and raw text", () => {
    const html = `<!DOCTYPE html><!-- <a href="x"> --><!--> <a href=1><style>a{} <a href="s"></style ><script>"<a href='t'>"</script><![CDATA[<a href=c>]]><?xml <a href=p>?>`;
    const names = scanTags(html).map((t) => (t.end ? `/${t.name}` : `${t.name}:${t.attributes[0]?.raw ?? ""}`));
    expect(names).toEqual(["a:1", "style:", "/style", "script:", "/script"]);
  });

  it("stops quietly at an unterminated tag", () => {
    expect(scanTags(`<p>ok</p><a href="https://a.example/`).map((t) => t.name)).toEqual(["p", "p"]);
    expect(scanTags(`<p>ok<a`).map((t) => t.name)).toEqual(["p"]);
    expect(scanTags("a < b and c<d")).toEqual([]);
  });
});

/** Element names and attributes in document order, as the Workers runtime's HTML parser sees them. */
async function parsedByRuntime(html: string): Promise<string[]> {
  const seen: string[] = [];
  await new HTMLRewriter()
    .on("*", {
      element(e) {
        seen.push(`${e.tagName}${[...e.attributes].map(([n, v]) => ` ${n}=${n === "href" || n === "src" ? "<url>" : v}`).join("")}`);
      },
    })
    .transform(new Response(html))
    .text();
  return seen;
}

/** The href of each <a> as the runtime's parser reads it (raw: tern's own URLs hold no character references). */
async function hrefs(html: string): Promise<string[]> {
  const out: string[] = [];
  await new HTMLRewriter()
    .on("a[href]", { element: (e) => void out.push(e.getAttribute("href")!) })
    .transform(new Response(html))
    .text();
  return out;
}

const options = (over: Partial<RewriteOptions> = {}): RewriteOptions => ({
  emailId: EMAIL_A,
  baseUrl: BASE,
  key,
  openTracking: true,
  clickTracking: true,
  ...over,
});

async function followClick(href: string, links: string[]): Promise<string | null> {
  expect(href.startsWith(`${BASE}${CLICK_PATH_PREFIX}`)).toBe(true);
  const result = await resolveClick(key, href.slice(`${BASE}${CLICK_PATH_PREFIX}`.length), async (id) => (id === EMAIL_A ? links : null));
  return result.ok ? result.value.link : null;
}

const NEWSLETTER = `<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">
<HTML xmlns="http://www.w3.org/1999/xhtml">
<head>
<meta http-equiv="Content-Type" content="text/html; charset=UTF-8" />
<title>Order <a href="https://not-a-link.example/">shipped</a></title>
<style type="text/css">a[href^="https://"] { color: #c00; } /* <a href="https://css.example/"> */</style>
<!--[if mso]><xml><o:OfficeDocumentSettings><o:PixelsPerInch>96</o:PixelsPerInch></o:OfficeDocumentSettings></xml><![endif]-->
</head>
<BODY style="margin:0">
<table role="presentation" width="100%"><tr><td align="center">
  <A HREF="https://shop.acme.example/orders/42?utm_source=email&amp;utm_medium=tern" Target=_blank>View your order</A>
  <a class=btn href=https://shop.acme.example/track?id=42&carrier=ups>Track it</a>
  <a
     href = 'https://shop.acme.example/orders/42?utm_source=email&#38;utm_medium=tern'
     style="color:#fff">Again, same link</a>
  <!--[if mso]><v:roundrect href="https://shop.acme.example/vml" arcsize="10%"><w:anchorlock/><center>Shop</center></v:roundrect><![endif]-->
  <!--[if !mso]><!--><a href="https://shop.acme.example/not-mso">Shop</a><!--<![endif]-->
  <a href="mailto:help@acme.example?subject=Order%2042">Mail us</a>
  <a href="tel:+15555550100">Call us</a>
  <a href="#top">Top</a>
  <a href="/relative/path">Relative</a>
  <a href="javascript:alert(1)">JS</a>
  <a name="anchor-only">No href</a>
  <a href="https://acme.example/unsubscribe?u=9">Unsubscribe</a>
  <a href="https://acme.example/prefs/opt-out">Opt out</a>
  <a href="  https://shop.acme.example/spaced  ">Spaced</a>
  <a href="https://shop.acme.example/&hellip;">Unknown entity</a>
  <img src="https://cdn.acme.example/logo.png" alt="Acme &amp; Co">
</td></tr></table>
<p>Prices in &euro; &mdash; 5 < 6 & 7 > 3</p>
</BODY>
</HTML>
`;

describe("rewriteHtml", () => {
  it("routes every trackable link through a click URL that resolves to exactly the original link", async () => {
    const { html, links } = await rewriteHtml(NEWSLETTER, options());
    expect(links).toEqual([
      "https://shop.acme.example/orders/42?utm_source=email&utm_medium=tern",
      "https://shop.acme.example/track?id=42&carrier=ups",
      "https://shop.acme.example/not-mso",
      "https://shop.acme.example/spaced",
    ]);
    const all = await hrefs(html);
    const tracked = all.filter((h) => h.startsWith(BASE));
    expect(tracked).toHaveLength(5); // the repeated link is tracked twice, with one stored entry
    const followed = await Promise.all(tracked.map((h) => followClick(h, links)));
    expect(followed).toEqual([links[0], links[1], links[0], links[2], links[3]]);
  });

  it("leaves mailto, tel, anchors, relative and script links, unsubscribe links, unknown entities, comments and raw text alone", async () => {
    const { html } = await rewriteHtml(NEWSLETTER, options());
    const untouched = [
      `<a href="mailto:help@acme.example?subject=Order%2042">`,
      `<a href="tel:+15555550100">`,
      `<a href="#top">`,
      `<a href="/relative/path">`,
      `<a href="javascript:alert(1)">`,
      `<a name="anchor-only">`,
      `<a href="https://acme.example/unsubscribe?u=9">`,
      `<a href="https://acme.example/prefs/opt-out">`,
      `<a href="https://shop.acme.example/&hellip;">`,
      `<title>Order <a href="https://not-a-link.example/">shipped</a></title>`,
      `/* <a href="https://css.example/"> */`,
      `<v:roundrect href="https://shop.acme.example/vml" arcsize="10%">`,
      `<img src="https://cdn.acme.example/logo.png" alt="Acme &amp; Co">`,
      `<p>Prices in &euro; &mdash; 5 < 6 & 7 > 3</p>`,
    ];
    for (const s of untouched) expect(html, s).toContain(s);
  });

  it("changes nothing but the tracked hrefs and the pixel: the runtime's parser sees the same elements", async () => {
    const { html } = await rewriteHtml(NEWSLETTER, options());
    const before = await parsedByRuntime(NEWSLETTER);
    const after = await parsedByRuntime(html);
    const pixel = after.findIndex((e) => e.startsWith("img") && e.includes("width=1"));
    expect(pixel).toBeGreaterThan(0);
    expect([...after.slice(0, pixel), ...after.slice(pixel + 1)]).toEqual(before);
    // And byte for byte: undo the rewritten values and the pixel, get the input back.
    const { html: clicksOnly, links } = await rewriteHtml(NEWSLETTER, options({ openTracking: false }));
    let restored = clicksOnly;
    for (const h of (await hrefs(clicksOnly)).filter((x) => x.startsWith(BASE))) {
      restored = restored.replace(`"${h}"`, `"${await followClick(h, links)}"`);
    }
    const normalise = (s: string) =>
      s.replace(/href\s*=\s*("[^"]*"|'[^']*'|[^\s>]+)/gi, (_, v: string) => `href=${decodeAttributeValue(v.replace(/^["']|["']$/g, "").trim())}`);
    expect(normalise(restored)).toBe(normalise(NEWSLETTER));
  });

  it("puts the open pixel before the last </body>, which may be uppercase", async () => {
    const { html } = await rewriteHtml(NEWSLETTER, options({ clickTracking: false }));
    const pixel = `<img src="${openPixelUrl(BASE, await signOpenToken(key, EMAIL_A))}" width="1" height="1" alt=""`;
    expect(html.indexOf(pixel)).toBeGreaterThan(0);
    expect(html.indexOf(pixel)).toBeLessThan(html.indexOf("</BODY>"));
    expect(html.slice(html.indexOf("/>", html.indexOf(pixel)) + 2)).toBe("</BODY>\n</HTML>\n");
    const src = (await hrefsOfPixels(html))[0]!;
    expect(src.startsWith(`${BASE}${OPEN_PATH_PREFIX}`)).toBe(true);
    expect(await verifyOpenToken(key, src.slice(`${BASE}${OPEN_PATH_PREFIX}`.length))).toEqual({ ok: true, value: { emailId: EMAIL_A } });
  });

  it("places the pixel before </html> without a body end, at the end of a fragment, and ignores a </body> in a comment", async () => {
    const noBody = await rewriteHtml("<html><p>x</p></html>", options({ clickTracking: false }));
    expect(noBody.html).toMatch(/^<html><p>x<\/p><img [^>]+\/><\/html>$/);
    const fragment = await rewriteHtml("<p>Hello</p>", options({ clickTracking: false }));
    expect(fragment.html).toMatch(/^<p>Hello<\/p><img [^>]+\/>$/);
    const commented = await rewriteHtml("<body><p>x</p></body><!-- </body> -->", options({ clickTracking: false }));
    expect(commented.html).toMatch(/^<body><p>x<\/p><img [^>]+\/><\/body><!-- <\/body> -->$/);
  });

  it("does nothing when both kinds of tracking are off, and tracks clicks only when asked", async () => {
    expect(await rewriteHtml(NEWSLETTER, options({ openTracking: false, clickTracking: false }))).toEqual({ html: NEWSLETTER, links: [] });
    const opensOnly = await rewriteHtml(NEWSLETTER, options({ clickTracking: false }));
    expect(opensOnly.links).toEqual([]);
    expect((await hrefs(opensOnly.html)).some((h) => h.startsWith(BASE))).toBe(false);
    const clicksOnly = await rewriteHtml(NEWSLETTER, options({ openTracking: false }));
    expect(clicksOnly.html).not.toContain(OPEN_PATH_PREFIX);
  });

  it("leaves the caller's untracked links alone", async () => {
    const html = `<a href="https://acme.example/prefs?u=1">Prefs</a><a href="https://acme.example/x">X</a>`;
    const result = await rewriteHtml(html, options({ openTracking: false, untracked: ["https://acme.example/prefs?u=1"] }));
    expect(result.links).toEqual(["https://acme.example/x"]);
    expect(result.html.startsWith(`<a href="https://acme.example/prefs?u=1">`)).toBe(true);
  });

  it("escapes the base URL into the attribute and keeps tokens of another email apart", async () => {
    const html = `<a href="https://acme.example/x">X</a>`;
    const a = await rewriteHtml(html, options({ openTracking: false, baseUrl: "https://t.example/p?a=1&b=2/" }));
    expect(a.html).toMatch(/^<a href="https:\/\/t\.example\/p\?a=1&amp;b=2\/t\/c\/[A-Za-z0-9_-]+">X<\/a>$/);
    const b = await rewriteHtml(html, options({ openTracking: false, emailId: EMAIL_B }));
    const tokenB = (await hrefs(b.html))[0]!.slice(`${BASE}${CLICK_PATH_PREFIX}`.length);
    // B's token, checked against A's storage, names B: the route looks up B's links, never A's.
    const resolved = await resolveClick(key, tokenB, async (id) => (id === EMAIL_A ? ["https://evil.example/"] : id === EMAIL_B ? b.links : null));
    expect(resolved).toEqual({ ok: true, value: { emailId: EMAIL_B, linkIndex: 0, link: "https://acme.example/x" } });
  });

  it("keeps broken HTML as broken as it was", async () => {
    for (const html of [`<a href="https://a.example/`, `<p>unclosed <a href=https://a.example/x`, `<<<>>> <a <a href`, "", "plain text & < >"]) {
      const result = await rewriteHtml(html, options({ openTracking: false }));
      expect(result).toEqual({ html, links: [] });
    }
    const lone = await rewriteHtml(`<a href=https://a.example/x>X`, options({ openTracking: false }));
    expect(lone.links).toEqual(["https://a.example/x"]);
    expect(lone.html).toMatch(/^<a href="https:\/\/links\.acme\.example\/t\/c\/[A-Za-z0-9_-]+">X$/);
  });

  it("stops adding links past the limit and leaves the rest as they are", async () => {
    const html = Array.from({ length: MAX_TRACKED_LINKS + 5 }, (_, i) => `<a href="https://a.example/${i}">${i}</a>`).join("");
    const result = await rewriteHtml(html, options({ openTracking: false }));
    expect(result.links).toHaveLength(MAX_TRACKED_LINKS);
    expect(result.html).toContain(`<a href="https://a.example/${MAX_TRACKED_LINKS}">`);
    expect(result.html).not.toContain(`<a href="https://a.example/${MAX_TRACKED_LINKS - 1}">`);
  });

  it("decides what is trackable the way a browser reads the URL", () => {
    expect(trackableLink("\t https://a.example/x\n")).toBe("https://a.example/x");
    expect(trackableLink("HTTPS://A.example/Path")).toBe("HTTPS://A.example/Path");
    expect(trackableLink("https://a.exa\nmple/")).toBe("https://a.example/");
    expect(trackableLink("https://")).toBeNull();
    expect(trackableLink("http:/a.example")).toBeNull();
    expect(trackableLink("ftp://a.example/")).toBeNull();
    expect(trackableLink(`https://a.example/${"x".repeat(5000)}`)).toBeNull();
    expect(clickUrl("https://t.example/", "tok")).toBe("https://t.example/t/c/tok");
  });
});

async function hrefsOfPixels(html: string): Promise<string[]> {
  const out: string[] = [];
  await new HTMLRewriter()
    .on('img[width="1"]', { element: (e) => void out.push(e.getAttribute("src")!) })
    .transform(new Response(html))
    .text();
  return out;
}
