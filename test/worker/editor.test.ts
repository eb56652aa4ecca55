// The dashboard editor's server side: its document rendered to email html and text (escaped,
// unsafe links dropped, variables kept as placeholders), uploaded images checked, stored per
// account and served only at their signed URL, a stored document dropped when the API rewrites
// the html, and the pre-send review listing every problem a send would refuse (an empty body
// too) and warning of a segment nobody in could receive it. A body written through the API is
// never replaced by a save the person did not choose; a dead-end broadcast can be deleted.
import { env, exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { emptyBody, sendProblems, updateBroadcast, findBroadcast } from "../../worker/broadcasts/broadcasts.ts";
import { documentToHtml, documentToText, DocumentError, EMPTY_DOCUMENT, hasUnsubscribeLink, parseDocument, type DocNode } from "../../worker/broadcasts/document.ts";
import { broadcastVerdict, reviewBroadcast } from "../../worker/broadcasts/review.ts";
import { deleteImage } from "../../worker/media/library.ts";
import { mediaLimitsOf } from "../../worker/config.ts";
import { signedIn } from "./dashboard-session.ts";
import { ImageError, MAX_IMAGE_BYTES, MediaLimitError, sniffImage, storeImage } from "../../worker/media/images.ts";
import { call, createAccount, type TestAccount } from "./fixtures.ts";

const DASH = "https://t.tern.test";

/** A signed-in owner of the account (test/worker/dashboard-session.ts): the
 * headers its browser sends, and JSON posts and page reads with them. */
async function dashboardSession(accountId: string) {
  const { cookie, csrf } = await signedIn("owner", accountId);
  const headers = { origin: DASH, cookie, "x-csrf-token": csrf };
  return {
    headers,
    post: async (path: string, body: unknown) => {
      const res = await exports.default.fetch(`${DASH}/dashboard${path}`, { method: "POST", headers: { ...headers, "content-type": "application/json", accept: "application/json" }, body: JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as any };
    },
    page: async (path: string) => (await exports.default.fetch(`${DASH}/dashboard${path}`, { headers: { cookie } })).text(),
  };
}

const text = (t: string, marks?: DocNode["marks"]): DocNode => ({ type: "text", text: t, ...(marks ? { marks } : {}) });
const DOC: DocNode = {
  type: "doc",
  content: [
    { type: "heading", attrs: { level: 1 }, content: [text("News <script>alert(1)</script>")] },
    { type: "paragraph", content: [text("Hi "), { type: "variable", attrs: { key: "FIRST_NAME", fallback: "there" } }, text(", "), text("bold", [{ type: "bold" }]), text(" and "), text("a link", [{ type: "link", attrs: { href: "https://example.com/a?b=1&c=2" } }]), text(" and "), text("evil", [{ type: "link", attrs: { href: "javascript:alert(1)" } }])] },
    { type: "button", attrs: { label: "Read more", href: "https://example.com/more", color: "#ff0000" } },
    { type: "image", attrs: { src: "https://example.com/a.png", alt: 'A "quoted" picture' } },
    { type: "image", attrs: { src: "data:image/png;base64,AAAA", alt: "dropped" } },
    { type: "horizontalRule" },
    { type: "columns", content: [{ type: "column", content: [{ type: "paragraph", content: [text("Left")] }] }, { type: "column", content: [{ type: "paragraph", content: [text("Right")] }] }] },
    { type: "paragraph", content: [text("Leave", [{ type: "link", attrs: { href: "{{{RESEND_UNSUBSCRIBE_URL}}}" } }])] },
    { type: "unknownThing", content: [text("ignored")] },
    { type: "paragraph" },
  ],
};

describe("the editor's document", () => {
  it("renders email-safe html: escaped text, table layout, unsafe links and images dropped, placeholders kept", () => {
    const html = documentToHtml(DOC, { title: "Subject & more" });
    expect(html).toMatch(/^<!doctype html>/);
    expect(html).toContain("<title>Subject &amp; more</title>");
    expect(html).toContain("News &lt;script&gt;alert(1)&lt;/script&gt;</h1>");
    expect(html).toContain("Hi {{{FIRST_NAME|there}}}, <strong>bold</strong> and <a href=\"https://example.com/a?b=1&amp;c=2\"");
    expect(html).toContain("and evil</p>");
    expect(html).not.toContain("javascript:");
    expect(html).toMatch(/<td bgcolor="#ff0000"[^>]*><a href="https:\/\/example.com\/more"[^>]*>Read more<\/a>/);
    expect(html).toContain('alt="A &quot;quoted&quot; picture"');
    expect(html).not.toContain("data:image");
    expect(html).toMatch(/class="tern-col" width="50%"[\s\S]*Left[\s\S]*class="tern-col" width="50%"[\s\S]*Right/);
    expect(html).toContain('<a href="{{{RESEND_UNSUBSCRIBE_URL}}}"');
    expect(html).not.toContain("ignored");
    // The editor's trailing empty paragraph is not in the email.
    expect(html).not.toMatch(/&nbsp;<\/p>\s*<\/td>/);
    expect(hasUnsubscribeLink(DOC)).toBe(true);
  });

  it("renders a text part that says the same, links written out", () => {
    const t = documentToText(DOC);
    expect(t).toContain("News <script>alert(1)</script>");
    expect(t).toContain("Hi {{{FIRST_NAME|there}}}, bold and a link (https://example.com/a?b=1&c=2) and evil");
    expect(t).toContain("Read more: https://example.com/more");
    expect(t).toContain("[A \"quoted\" picture]");
    expect(t).toContain("Left\n\nRight");
    expect(t).toContain("Leave ({{{RESEND_UNSUBSCRIBE_URL}}})");
  });

  it("refuses what is not an editor document, and documents past the limits", () => {
    expect(() => parseDocument("not json")).toThrow(DocumentError);
    expect(() => parseDocument({ type: "paragraph" })).toThrow(/type doc/);
    expect(() => parseDocument({ type: "doc", content: "x" })).toThrow(/must be a list/);
    let deep: DocNode = { type: "paragraph" };
    for (let i = 0; i < 30; i++) deep = { type: "blockquote", content: [deep] };
    expect(() => parseDocument({ type: "doc", content: [deep] })).toThrow(/nests too deeply/);
    expect(parseDocument(JSON.stringify(DOC)).content?.length).toBe(DOC.content!.length);
  });

  it("refuses marks, attrs and text of the wrong shape before anything renders them (a fuzzer's 500s)", () => {
    const para = (node: Record<string, unknown>) => ({ type: "doc", content: [{ type: "paragraph", content: [{ type: "text", text: "x", ...node }] }] });
    for (const marks of [5, "b", {}, [null], [5], [{}], [{ type: 1 }], [{ type: "link", attrs: "x" }], [{ type: "link", attrs: [] }]]) {
      expect(() => parseDocument(para({ marks })), JSON.stringify(marks)).toThrow(DocumentError);
    }
    expect(() => parseDocument(para({ text: 5 }))).toThrow(/text must be a string/);
    expect(() => parseDocument(para({ attrs: null }))).toThrow(/attrs must be an object/);
    expect(() => parseDocument({ type: "doc", content: [{ type: "image", attrs: [1] }] })).toThrow(/attrs must be an object/);
    const fine = parseDocument(para({ marks: [{ type: "bold" }, { type: "link", attrs: { href: "https://example.com" } }] }));
    expect(documentToHtml(fine)).toContain('href="https://example.com"');
    expect(documentToText(fine)).toContain("x");
  });
});

const PNG = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52, 1, 2, 3]);

describe("editor images", () => {
  it("knows images by their bytes, never by a name or a declared type", () => {
    expect(sniffImage(PNG)).toBe("png");
    expect(sniffImage(Uint8Array.from([0xff, 0xd8, 0xff, 0xe0]))).toBe("jpg");
    expect(sniffImage(new TextEncoder().encode("GIF89a..."))).toBe("gif");
    expect(sniffImage(new TextEncoder().encode("RIFF....WEBPVP8 "))).toBe("webp");
    expect(sniffImage(new TextEncoder().encode('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'))).toBeNull();
  });

  it("stores an upload under its account and serves it only at its signed URL, with a safe type", async () => {
    const account = (await createAccount()).accountId;
    const stored = await storeImage(env, account, PNG, "https://t.tern.test");
    const path = new URL(stored.url).pathname;
    expect(path).toMatch(new RegExp(`^/media/${account}/[0-9a-f]{32}/[A-Za-z0-9_-]{22}\\.png$`));
    const id = path.split("/")[3]!;
    expect(await env.BLOBS.head(`media/${account}/${id}`)).not.toBeNull();

    const res = await exports.default.fetch(`https://t.tern.test${path}`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/png");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("content-security-policy")).toContain("sandbox");
    expect(new Uint8Array(await res.arrayBuffer())).toEqual(PNG);

    // Another signature, another account with the same id, another extension: nothing.
    const sig = path.split("/")[4]!;
    const forged = path.replace(sig, `${sig[0] === "A" ? "B" : "A"}${sig.slice(1)}`);
    const otherAccount = path.replace(account, "00000000-0000-4000-8000-0000000ed171");
    for (const p of [forged, otherAccount, path.replace(/\.png$/, ".svg"), `/media/${account}/${id}/x.png`]) {
      expect((await exports.default.fetch(`https://t.tern.test${p}`)).status, p).toBe(404);
    }
  });

  it("refuses empty, oversized and non-image uploads with a message that says what to do", async () => {
    await expect(storeImage(env, "acct", new Uint8Array(0), "https://t")).rejects.toThrow(/empty/);
    await expect(storeImage(env, "acct", new TextEncoder().encode("<svg></svg>"), "https://t")).rejects.toThrow(/not a PNG, JPEG, GIF or WebP/);
    const big = new Uint8Array(MAX_IMAGE_BYTES + 1);
    big.set(PNG);
    await expect(storeImage(env, "acct", big, "https://t")).rejects.toThrow(ImageError);
  });
});

/** A PNG of exactly `size` bytes (the signature, then padding). */
const pngOf = (size: number) => {
  const b = new Uint8Array(size);
  b.set(PNG);
  return b;
};
const stored = async (accountId: string) => ({
  objects: (await env.BLOBS.list({ prefix: `media/${accountId}/` })).objects.length,
  rows: (await env.DB.prepare("SELECT count(*) AS n, coalesce(sum(bytes), 0) AS bytes FROM media_images WHERE account_id = ?").bind(accountId).first<{ n: number; bytes: number }>())!,
});

describe("an account's media limit", () => {
  // 2,500 bytes: two images of 1,000 fit, a third does not.
  const small = { ...env, MEDIA_ACCOUNT_LIMIT_MB: String(2500 / 1048576), MEDIA_ACCOUNT_LIMIT_IMAGES: "10" };

  it("reads the operator's settings: 500 MB and 10,000 images unless set, 0 for no limit", () => {
    expect(mediaLimitsOf({})).toEqual({ bytes: 500 * 1048576, images: 10_000 });
    expect(mediaLimitsOf({ MEDIA_ACCOUNT_LIMIT_MB: "0", MEDIA_ACCOUNT_LIMIT_IMAGES: "0" })).toEqual({ bytes: null, images: null });
    expect(mediaLimitsOf({ MEDIA_ACCOUNT_LIMIT_MB: "1.5", MEDIA_ACCOUNT_LIMIT_IMAGES: "nope" })).toEqual({ bytes: 1.5 * 1048576, images: 10_000 });
  });

  it("stores uploads under the limit, refuses the one past it and stores nothing of it; other accounts' images do not count", async () => {
    const a = (await createAccount()).accountId;
    const b = (await createAccount()).accountId;
    await storeImage(small, a, pngOf(1000), "https://t");
    await storeImage(small, a, pngOf(1000), "https://t");
    expect(await stored(a)).toEqual({ objects: 2, rows: { n: 2, bytes: 2000 } });

    const refused = storeImage(small, a, pngOf(1000), "https://t");
    await expect(refused).rejects.toThrow(MediaLimitError);
    await expect(refused).rejects.toThrow("This account's uploaded images leave 500 bytes of its 3 KB, and this image takes 1 KB. Reuse an image already uploaded (its URL works in any email), or ask the operator to raise MEDIA_ACCOUNT_LIMIT_MB.");
    expect(await stored(a)).toEqual({ objects: 2, rows: { n: 2, bytes: 2000 } });
    // What still fits is taken.
    await storeImage(small, a, pngOf(500), "https://t");
    expect(await stored(a)).toEqual({ objects: 3, rows: { n: 3, bytes: 2500 } });

    // Account b starts at nothing, whatever a holds.
    await storeImage(small, b, pngOf(1000), "https://t");
    await storeImage(small, b, pngOf(1000), "https://t");
    expect(await stored(b)).toEqual({ objects: 2, rows: { n: 2, bytes: 2000 } });
  });

  it("counts images too: past MEDIA_ACCOUNT_LIMIT_IMAGES an upload is refused", async () => {
    const a = (await createAccount()).accountId;
    const two = { ...env, MEDIA_ACCOUNT_LIMIT_IMAGES: "2" };
    await storeImage(two, a, PNG, "https://t");
    await storeImage(two, a, PNG, "https://t");
    await expect(storeImage(two, a, PNG, "https://t")).rejects.toThrow(/already has 2 uploaded images, its limit\. .*MEDIA_ACCOUNT_LIMIT_IMAGES/);
    expect(await stored(a)).toEqual({ objects: 2, rows: { n: 2, bytes: 2 * PNG.length } });
  });

  it("lets no more than the limit through when uploads race", async () => {
    const a = (await createAccount()).accountId;
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => storeImage(small, a, pngOf(1000), "https://t")));
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(2);
    expect(results.filter((r) => r.status === "rejected" && r.reason instanceof MediaLimitError)).toHaveLength(4);
    expect(await stored(a)).toEqual({ objects: 2, rows: { n: 2, bytes: 2000 } });
  });

  it("gives the room back when R2 refuses the bytes", async () => {
    const a = (await createAccount()).accountId;
    const failing = { ...small, BLOBS: { put: () => Promise.reject(new Error("R2 is down")) } as unknown as R2Bucket };
    await expect(storeImage(failing, a, pngOf(1000), "https://t")).rejects.toThrow("R2 is down");
    expect(await stored(a)).toEqual({ objects: 0, rows: { n: 0, bytes: 0 } });
  });

  it("answers the dashboard's upload past the limit with a 422 that says how to fix it", async () => {
    const accountId = (await createAccount()).accountId;
    const { headers: signedIn } = await dashboardSession(accountId);
    const headers = { ...signedIn, "content-type": "image/png" };
    const upload = () => exports.default.fetch(`${DASH}/dashboard/api/media`, { method: "POST", headers, body: pngOf(1000) });

    // Rows of images already uploaded, 1,000 bytes short of the deployment's 500 MB.
    const limit = mediaLimitsOf(env).bytes!;
    await env.DB.prepare("INSERT INTO media_images (id, account_id, bytes, ext, created_at) VALUES (?1, ?2, ?3, 'png', 0), (?4, ?2, ?5, 'png', 0)").bind(crypto.randomUUID(), accountId, limit - 4000, crypto.randomUUID(), 3000).run();
    const first = await upload();
    expect(first.status, await first.clone().text()).toBe(201);
    const res = await upload();
    expect(res.status).toBe(422);
    expect(await res.json()).toEqual({ message: "This account's uploaded images leave 0 bytes of its 500.0 MB, and this image takes 1 KB. Reuse an image already uploaded (its URL works in any email), or ask the operator to raise MEDIA_ACCOUNT_LIMIT_MB." });
    expect(await stored(accountId)).toEqual({ objects: 1, rows: { n: 3, bytes: limit - 4000 + 3000 + 1000 } });
  });
});

describe("a broadcast's stored document and its review", () => {
  let a: TestAccount;
  beforeAll(async () => {
    a = await createAccount();
  });

  it("keeps the editor's document beside the html until the API rewrites the html", async () => {
    const segment = (await call(a, "POST", "/segments", { name: "Editor readers" })).body.id;
    const id = (await call(a, "POST", "/broadcasts", { segment_id: segment, from: `News <news@${a.domain}>`, subject: "Hi", html: "<p>Hi</p>" })).body.id;
    await updateBroadcast(env.DB, a.accountId, id, { html: documentToHtml(DOC), text: documentToText(DOC), document: JSON.stringify(DOC) });
    expect((await findBroadcast(env.DB, a.accountId, id))!.documentJson).toBe(JSON.stringify(DOC));
    // A change of the subject keeps it; the other account cannot touch it.
    expect((await call(a, "PATCH", `/broadcasts/${id}`, { subject: "Hello" })).status).toBe(200);
    expect((await findBroadcast(env.DB, a.accountId, id))!.documentJson).not.toBeNull();
    expect(await findBroadcast(env.DB, "00000000-0000-4000-8000-00000000dead", id)).toBeUndefined();
    // html written through the API no longer matches the document: it is dropped.
    expect((await call(a, "PATCH", `/broadcasts/${id}`, { html: "<p>By hand</p>" })).status).toBe(200);
    expect((await findBroadcast(env.DB, a.accountId, id))!.documentJson).toBeNull();
  });

  it("lists every problem a send would refuse, and runs the deliverability checks on the draft", async () => {
    const segment = (await call(a, "POST", "/segments", { name: "Review readers" })).body.id;
    const id = (await call(a, "POST", "/broadcasts", { segment_id: segment, from: "News <news@unverified.example>", subject: "FREE!!! NOW", html: documentToHtml(DOC) })).body.id;
    const principal = { accountId: a.accountId, keyId: "test", permission: "full_access" as const, domainId: null, plan: "free", rateLimit: 0 };
    const row = (await findBroadcast(env.DB, a.accountId, id))!;
    const problems = await sendProblems(env, principal, { ...row, segmentId: null });
    expect(problems.map((p) => p.message)).toEqual([
      "The broadcast needs `segment_id` before it can be sent.",
      "The unverified.example domain is not verified. Add and verify it on the domains API first.",
    ]);
    const review = await reviewBroadcast(env, principal, row, () => "Ada");
    expect(review.blocking).toEqual(["The unverified.example domain is not verified. Add and verify it on the domains API first."]);
    const byId = new Map(review.insights.map((i) => [i.id, i.status]));
    expect(byId.get("subject_punctuation")).toBe("warning");
    expect(byId.get("domain_authentication")).toBe("failed");
    expect(byId.get("list_unsubscribe")).toBe("passed");
    // The send itself refuses with the first of them, as before.
    expect((await call(a, "POST", `/broadcasts/${id}/send`)).body.message).toContain("unverified.example domain is not verified");
  });
});

describe("a body written through the API, in the dashboard's editor", () => {
  let a: TestAccount;
  let dash: Awaited<ReturnType<typeof dashboardSession>>;
  let segment: string;
  beforeAll(async () => {
    a = await createAccount();
    dash = await dashboardSession(a.accountId);
    segment = (await call(a, "POST", "/segments", { name: "API readers" })).body.id;
  });
  const HTML = "<h1>API written</h1><p>Important body text</p>";
  /** What the editor page posts on an autosave of its fields alone. */
  const fields = (over: Record<string, unknown> = {}) => ({ name: "Renamed", from: `Acme <hello@${a.domain}>`, reply_to: "", subject: "Hello", preview_text: "", segment_id: segment, topic_id: "", ...over });

  it("a field edit of an API-written broadcast keeps its html; the editor replaces it only when asked", async () => {
    const id = (await call(a, "POST", "/broadcasts", { segment_id: segment, from: `Acme <hello@${a.domain}>`, subject: "Hello", html: HTML })).body.id;
    // The page shows the html as it renders (sandboxed) with the way to the editor, not an empty design.
    const page = await dash.page(`/broadcasts/${id}`);
    expect(page).toMatch(/<iframe[^>]*id="api-body-frame"[^>]*sandbox=""[^>]*srcdoc="&lt;h1&gt;API written/);
    expect(page).toContain("Edit the body in the editor…");
    expect(page).toMatch(/<div class="editor-frame" hidden/);
    expect(page).not.toContain("saving it replaces that HTML");

    expect(await dash.post(`/api/broadcasts/${id}`, fields())).toMatchObject({ status: 200, body: { ok: true } });
    expect((await call(a, "GET", `/broadcasts/${id}`)).body).toMatchObject({ name: "Renamed", html: HTML });

    // A document in its place, not chosen (a page older than the API's write): refused, nothing saved.
    const refused = await dash.post(`/api/broadcasts/${id}`, fields({ name: "Not saved", document: EMPTY_DOCUMENT }));
    expect(refused).toMatchObject({ status: 409, body: { message: expect.stringMatching(/written through the API.*Nothing was saved: reload the page/) } });
    expect((await call(a, "GET", `/broadcasts/${id}`)).body).toMatchObject({ name: "Renamed", html: HTML });

    // The person's choice: the editor's document replaces it, and from then on saves are the editor's.
    expect((await dash.post(`/api/broadcasts/${id}`, fields({ document: DOC, replace_body: true }))).status).toBe(200);
    const replaced = (await call(a, "GET", `/broadcasts/${id}`)).body;
    expect(replaced.html).toContain("Read more");
    expect(replaced.html).not.toContain("API written");
    expect((await dash.post(`/api/broadcasts/${id}`, fields({ document: EMPTY_DOCUMENT }))).status).toBe(200);
    expect(await dash.page(`/broadcasts/${id}`)).not.toContain('id="api-body"');

    // The API writes the html again: the editor's document is dropped, and the guard is back.
    expect((await call(a, "PATCH", `/broadcasts/${id}`, { html: HTML })).status).toBe(200);
    expect((await dash.post(`/api/broadcasts/${id}`, fields({ document: EMPTY_DOCUMENT }))).status).toBe(409);
    expect((await call(a, "GET", `/broadcasts/${id}`)).body.html).toBe(HTML);
  });

  it("keeps a text-only broadcast's text on a field edit, and shows it as text", async () => {
    const id = (await call(a, "POST", "/broadcasts", { segment_id: segment, from: `hello@${a.domain}`, subject: "Plain", text: "Just words.\n\nTwo paragraphs." })).body.id;
    expect(await dash.page(`/broadcasts/${id}`)).toContain('<pre class="api-body-text">Just words.\n\nTwo paragraphs.</pre>');
    expect((await dash.post(`/api/broadcasts/${id}`, fields({ subject: "Plainer" }))).status).toBe(200);
    expect((await call(a, "GET", `/broadcasts/${id}`)).body).toMatchObject({ subject: "Plainer", text: "Just words.\n\nTwo paragraphs.", html: null });
  });

  it("a field edit of an API-written template keeps its html; a document needs the person's choice", async () => {
    const id = (await call(a, "POST", "/templates", { name: "Shipped", html: HTML })).body.id;
    const page = await dash.page(`/templates/${id}`);
    expect(page).toContain('id="api-body-frame"');
    expect(page).toMatch(/<div class="editor-frame" hidden/);
    const tfields = { name: "Shipped v2", alias: "", from: "", subject: "Your order", reply_to: "" };
    expect((await dash.post(`/api/templates/${id}`, tfields)).status).toBe(200);
    expect((await call(a, "GET", `/templates/${id}`)).body).toMatchObject({ name: "Shipped v2", subject: "Your order", html: HTML });
    expect((await dash.post(`/api/templates/${id}`, { ...tfields, subject: "x", document: EMPTY_DOCUMENT })).status).toBe(409);
    expect((await call(a, "GET", `/templates/${id}`)).body).toMatchObject({ subject: "Your order", html: HTML });
    expect((await dash.post(`/api/templates/${id}`, { ...tfields, document: DOC, replace_body: true })).status).toBe(200);
    expect((await call(a, "GET", `/templates/${id}`)).body.html).toContain("Read more");
  });
});

describe("an empty body, an empty segment and dead-end broadcasts", () => {
  let a: TestAccount;
  let dash: Awaited<ReturnType<typeof dashboardSession>>;
  const principal = () => ({ accountId: a.accountId, keyId: "test", permission: "full_access" as const, domainId: null, plan: "free", rateLimit: 0 });
  beforeAll(async () => {
    a = await createAccount();
    dash = await dashboardSession(a.accountId);
  });

  it("knows a body that shows nothing: blank html or text, the editor's untouched design", () => {
    const empty = (html: string | null, text: string | null = null) => emptyBody({ html, text });
    expect(empty(null)).toMatch(/needs `html` or `text`/);
    expect(empty("<p>&nbsp;</p><p> </p><!-- note -->")).toMatch(/body is empty.*html shows no text or image/);
    expect(empty("<html><head><title>Hi</title><style>p{color:red}</style></head><body><div style=\"display:none\">x</div>\u200b</body></html>")).toMatch(/body is empty/);
    expect(empty(documentToHtml(EMPTY_DOCUMENT), documentToText(EMPTY_DOCUMENT))).toMatch(/body is empty/);
    expect(empty(null, "  \n ")).toMatch(/text is blank/);
    // The html is what readers see: a text part beside a blank html does not help.
    expect(empty("<p></p>", "words")).toMatch(/body is empty/);
    expect(empty('<img src="https://example.com/a.png">')).toBeNull();
    expect(empty("<p>{{{FIRST_NAME|there}}}</p>")).toBeNull();
    expect(empty(null, "Hi")).toBeNull();
  });

  it("blocks the review and refuses the API's send of an empty body, with a 422 that says how to fix it", async () => {
    const segment = (await call(a, "POST", "/segments", { name: "Empty body" })).body.id;
    await call(a, "POST", "/contacts", { email: `eb-${crypto.randomUUID().slice(0, 6)}@example.com`, segments: [segment] });
    const id = (await call(a, "POST", "/broadcasts", { segment_id: segment, from: `news@${a.domain}`, subject: "S", html: "<p>&nbsp;</p>" })).body.id;
    const review = await dash.post(`/api/broadcasts/${id}/review`, {});
    expect(review.body.blocking).toEqual(["The broadcast's body is empty: its html shows no text or image. Write the message in the editor (or give `html` with content through the API) before sending."]);
    const send = await call(a, "POST", `/broadcasts/${id}/send`);
    expect(send).toMatchObject({ status: 422, body: { statusCode: 422, name: "validation_error", message: expect.stringMatching(/body is empty/) } });
    expect((await call(a, "GET", `/broadcasts/${id}`)).body.status).toBe("draft");
    // A draft made in the dashboard and never written in is blocked the same way.
    const made = await dash.post("/api/broadcasts", { name: "Blank", from: `news@${a.domain}`, subject: "S", segment_id: segment });
    expect((await dash.post(`/api/broadcasts/${made.body.id}/review`, {})).body.blocking).toEqual([expect.stringMatching(/body is empty/)]);
    expect((await dash.post(`/api/broadcasts/${made.body.id}/send`, {})).status).toBe(422);
    // Its test send is refused by the same rule, in the same words, and sends nothing.
    const before = (await env.DB.prepare("SELECT count(*) AS n FROM emails WHERE account_id = ?").bind(a.accountId).first<{ n: number }>())!.n;
    for (const broadcast of [id, made.body.id]) {
      const test = await dash.post(`/api/broadcasts/${broadcast}/test`, {});
      expect(test).toMatchObject({ status: 422, body: { message: (await dash.post(`/api/broadcasts/${broadcast}/review`, {})).body.blocking[0] } });
    }
    expect((await env.DB.prepare("SELECT count(*) AS n FROM emails WHERE account_id = ?").bind(a.accountId).first<{ n: number }>())!.n).toBe(before);
    // Written in, the test goes.
    expect((await call(a, "PATCH", `/broadcasts/${id}`, { html: "<p>Now with words</p>" })).status).toBe(200);
    expect(await dash.post(`/api/broadcasts/${id}/test`, {})).toMatchObject({ status: 200, body: { ok: true } });
  });

  it("ends the review with a verdict that follows its problems and warnings", () => {
    expect(broadcastVerdict(2, [], 5)).toBe("It cannot be sent until these 2 are fixed.");
    expect(broadcastVerdict(0, ["nobody"], 0)).toBe("Nothing else stops it from being sent, but as things stand it would reach nobody: see the warning above.");
    expect(broadcastVerdict(0, ["a button"], 1200)).toBe("It can be sent, but read the warning above first. Sent now, it goes to 1,200 contacts.");
    expect(broadcastVerdict(0, [], 1)).toBe("Ready to send: nothing stops it. Sent now, it goes to 1 contact.");
    expect(broadcastVerdict(0, [], 2, 1)).toBe("It can be sent, but a deliverability check below failed: fix it or more of it may land in spam. Sent now, it goes to 2 contacts.");
    expect(broadcastVerdict(0, [], 2, 3)).toMatch(/^It can be sent, but 3 deliverability checks below failed: fix them/);
  });

  it("warns of buttons and links that go nowhere and of uploaded images deleted since", async () => {
    const segment = (await call(a, "POST", "/segments", { name: "Broken bits" })).body.id;
    await call(a, "POST", "/contacts", { email: `bb-${crypto.randomUUID().slice(0, 6)}@example.com`, segments: [segment] });
    const img = await storeImage(env, a.accountId, Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0]), DASH, "hero.png");
    const doc: DocNode = { type: "doc", content: [
      { type: "paragraph", content: [text("Hello")] },
      { type: "button", attrs: { label: "Shop now", href: "" } },
      { type: "image", attrs: { src: img.url, alt: "Hero" } },
    ] };
    const made = await dash.post("/api/broadcasts", { name: "Broken", from: `news@${a.domain}`, subject: "S", segment_id: segment });
    expect((await dash.post(`/api/broadcasts/${made.body.id}`, { name: "Broken", from: `news@${a.domain}`, subject: "S", segment_id: segment, topic_id: "", reply_to: "", preview_text: "", document: doc })).status).toBe(200);
    const review = async () => (await dash.post(`/api/broadcasts/${made.body.id}/review`, {})).body;
    expect(await review()).toMatchObject({
      blocking: [],
      warnings: ["The button “Shop now” has no link, so readers cannot click it. Select the button in the editor, press Enter and give its link."],
      verdict: "It can be sent, but read the warning above first. Sent now, it goes to 1 contact.",
    });
    expect((await deleteImage(env, a.accountId, img.id)).ok).toBe(true);
    expect((await review()).warnings).toEqual([expect.stringMatching(/^The button “Shop now” has no link/), expect.stringMatching(/^An image uploaded to tern was deleted from Images/)]);
  });

  it("warns, without blocking, when nobody in the segment could receive it; counts who would", async () => {
    const segment = (await call(a, "POST", "/segments", { name: "Nobody yet" })).body.id;
    const id = (await call(a, "POST", "/broadcasts", { segment_id: segment, from: `news@${a.domain}`, subject: "S", html: "<p>Hi</p>" })).body.id;
    const review = async () => reviewBroadcast(env, principal(), (await findBroadcast(env.DB, a.accountId, id))!, () => "Ada");
    expect(await review()).toMatchObject({
      blocking: [], recipients: 0,
      warnings: ["The segment “Nobody yet” has no contacts, so sent now it would reach nobody. Add contacts to the segment (Contacts, or POST /contacts), pick another segment, or schedule it for after they are added."],
      verdict: "Nothing else stops it from being sent, but as things stand it would reach nobody: see the warning above.",
    });
    await call(a, "POST", "/contacts", { email: `gone-${crypto.randomUUID().slice(0, 6)}@example.com`, unsubscribed: true, segments: [segment] });
    expect((await review()).warnings).toEqual([expect.stringMatching(/^None of the 1 contact in the segment “Nobody yet” can receive it \(unsubscribed, suppressed\), so sent now it would reach nobody/)]);
    await call(a, "POST", "/contacts", { email: `here-${crypto.randomUUID().slice(0, 6)}@example.com`, segments: [segment] });
    // The test domain publishes no DMARC record: a failed check the verdict owns up to.
    const ready = await review();
    expect(ready).toMatchObject({ blocking: [], warnings: [], recipients: 1, verdict: "It can be sent, but a deliverability check below failed: fix it or more of it may land in spam. Sent now, it goes to 1 contact." });
    expect(ready.insights.filter((i) => i.status === "failed").map((i) => i.id)).toEqual(["dmarc_missing"]);
    // Opted out of its topic counts as nobody too.
    const topic = (await call(a, "POST", "/topics", { name: "Rare", default_subscription: "opt_out" })).body.id;
    expect((await call(a, "PATCH", `/broadcasts/${id}`, { topic_id: topic })).status).toBe(200);
    expect((await review()).warnings).toEqual([expect.stringMatching(/None of the 2 contacts .* or opted out of its topic/)]);
  });

  it("deletes a canceled or failed broadcast that reached nobody; keeps one that reached anyone, and says why", async () => {
    const segment = (await call(a, "POST", "/segments", { name: "Dead ends" })).body.id;
    const make = async (status: string, recipients = 0) => {
      const id = (await call(a, "POST", "/broadcasts", { segment_id: segment, from: `news@${a.domain}`, subject: "S", html: "<p>Hi</p>" })).body.id as string;
      await env.DB.prepare("UPDATE broadcasts SET status = ?, recipient_count = ? WHERE id = ?").bind(status, recipients, id).run();
      return id;
    };
    const canceled = await make("canceled");
    const page = await dash.page(`/broadcasts/${canceled}`);
    expect(page).toContain("Delete this canceled broadcast? It sent no email");
    expect((await call(a, "DELETE", `/broadcasts/${canceled}`)).body).toEqual({ object: "broadcast", id: canceled, deleted: true });
    const failed = await make("failed");
    expect((await dash.post(`/api/broadcasts/${failed}/delete`, {})).status).toBe(200);
    expect((await call(a, "GET", `/broadcasts/${failed}`)).status).toBe(404);

    const reached = await make("canceled", 3);
    expect(await dash.page(`/broadcasts/${reached}`)).not.toContain("Delete this canceled broadcast");
    expect((await call(a, "DELETE", `/broadcasts/${reached}`)).body).toMatchObject({ statusCode: 422, message: "This broadcast is canceled after reaching 3 recipients; it stays so their emails and its metrics keep their broadcast. Only a draft, or a canceled or failed broadcast that reached nobody, can be deleted." });
    const scheduled = await make("scheduled");
    expect((await call(a, "DELETE", `/broadcasts/${scheduled}`)).body.message).toMatch(/this one is scheduled: cancel it first/);

    // A send that reached nobody says so, in the list and on its page.
    const nobody = await make("sent");
    expect((await call(a, "DELETE", `/broadcasts/${nobody}`)).status).toBe(422);
    expect(await dash.page(`/broadcasts/${nobody}`)).toContain("This broadcast reached nobody.");
    expect(await dash.page("/broadcasts")).toContain('<div class="warn-text">Reached nobody</div>');
  });
});
