// Templates in Resend's shapes: a draft, publishing, duplicate, the {id_or_alias} paths, and
// sending with `template: {id, variables}` from POST /emails and /emails/batch (only published
// versions; a missing variable without a fallback is a 422 that names it and sends nothing).
import { env, exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { findTemplate } from "../../worker/templates/templates.ts";
import { reviewTemplate, undeclaredVariables } from "../../worker/templates/review.ts";
import { documentToHtml, documentToText, EMPTY_DOCUMENT } from "../../worker/broadcasts/document.ts";
import { storeImage } from "../../worker/media/images.ts";
import { deleteImage } from "../../worker/media/library.ts";
import { signedIn } from "./dashboard-session.ts";
import { call, countRows, createAccount, type TestAccount } from "./fixtures.ts";

let a: TestAccount;
let other: TestAccount;
beforeAll(async () => {
  a = await createAccount();
  other = await createAccount();
});

const welcome = () => ({
  name: "Welcome",
  alias: `welcome-${crypto.randomUUID().slice(0, 8)}`,
  subject: "Welcome, {{{NAME|friend}}}",
  html: "<p>Hello {{{NAME}}}, your plan is {{{PLAN}}}. {{{EXTRA|}}}</p>",
  text: "Hello {{{NAME}}}, plan {{{PLAN}}}",
  variables: [{ key: "NAME", type: "string" }, { key: "PLAN", type: "string", fallback_value: "Free" }],
});

describe("templates", () => {
  it("creates a draft, reads it by id and alias, publishes, edits the draft and duplicates", async () => {
    const input = welcome();
    const created = await call(a, "POST", "/templates", { ...input, from: `Team <team@${a.domain}>` });
    expect(created).toMatchObject({ status: 201, body: { object: "template", id: expect.any(String) } });
    const id = created.body.id;
    const byAlias = await call(a, "GET", `/templates/${input.alias}`);
    expect(byAlias.body).toMatchObject({ object: "template", id, name: "Welcome", alias: input.alias, status: "draft", published_at: null, has_unpublished_versions: false, html: input.html, from: `Team <team@${a.domain}>` });
    expect(byAlias.body.variables).toEqual([{ key: "NAME", type: "string", fallback_value: null }, { key: "PLAN", type: "string", fallback_value: "Free" }]);

    expect((await call(a, "POST", `/templates/${input.alias}/publish`)).body).toEqual({ object: "template", id });
    expect((await call(a, "GET", `/templates/${id}`)).body).toMatchObject({ status: "published", published_at: expect.any(String), has_unpublished_versions: false });
    const version = (await call(a, "GET", `/templates/${id}`)).body.current_version_id;
    expect((await call(a, "PATCH", `/templates/${id}`, { subject: "Changed" })).status).toBe(200);
    expect((await call(a, "GET", `/templates/${id}`)).body).toMatchObject({ subject: "Changed", status: "published", has_unpublished_versions: true });
    expect((await call(a, "GET", `/templates/${id}`)).body.current_version_id).not.toBe(version);

    const copy = await call(a, "POST", `/templates/${id}/duplicate`);
    expect(copy.body).toMatchObject({ object: "template", id: expect.any(String) });
    expect((await call(a, "GET", `/templates/${copy.body.id}`)).body).toMatchObject({ name: "Welcome (Copy)", alias: null, status: "draft", subject: "Changed" });
    expect((await call(a, "GET", "/templates")).body.data.map((t: any) => t.id)).toEqual(expect.arrayContaining([id, copy.body.id]));
    expect((await call(a, "DELETE", `/templates/${copy.body.id}`)).body).toEqual({ object: "template", id: copy.body.id, deleted: true });
    expect((await call(a, "GET", `/templates/${copy.body.id}`)).status).toBe(404);
  });

  it("refuses bad templates", async () => {
    expect((await call(a, "POST", "/templates", { name: "No html" })).body).toMatchObject({ statusCode: 422, name: "missing_required_field" });
    expect((await call(a, "POST", "/templates", { name: "x", html: "<p/>", alias: "has space" })).body.message).toMatch(/alias/);
    expect((await call(a, "POST", "/templates", { name: "x", html: "<p/>", variables: [{ key: "N", type: "number", fallback_value: "one" }] })).body.message).toMatch(/fallback_value.*number/);
    expect((await call(a, "POST", "/templates", { name: "x", html: "<p/>", variables: [{ key: "RESEND_UNSUBSCRIBE_URL", type: "string" }] })).body.message).toMatch(/reserved/);
    const alias = `dup-${crypto.randomUUID().slice(0, 8)}`;
    await call(a, "POST", "/templates", { name: "x", html: "<p/>", alias });
    expect((await call(a, "POST", "/templates", { name: "y", html: "<p/>", alias })).body.message).toMatch(/already exists/);
    // A draft must fit its row twice (the draft and, once published, its copy), in bytes: a
    // 422 on create and on update, never a 500 at publish. A fallback value counts too.
    const big = (await call(a, "POST", "/templates", { name: "big", html: "é".repeat(500_000) })).body;
    expect(big).toMatchObject({ statusCode: 422, message: expect.stringMatching(/draft \(kept twice.*would take 2\.0 MB/) });
    const small = (await call(a, "POST", "/templates", { name: "small", html: "<p>{{{A}}}</p>" })).body;
    const fallback = await call(a, "PATCH", `/templates/${small.id}`, { variables: [{ key: "A", type: "string", fallback_value: "€".repeat(400_000) }] });
    expect(fallback.body).toMatchObject({ statusCode: 422, message: expect.stringMatching(/would take 2\.4 MB/) });
    expect((await call(a, "POST", `/templates/${small.id}/publish`)).status).toBe(200);
  });

  it("another account gets 404 by id and by alias and changes nothing", async () => {
    const input = welcome();
    const id = (await call(a, "POST", "/templates", input)).body.id;
    for (const ref of [id, input.alias]) {
      for (const [m, p, b] of [["GET", `/templates/${ref}`], ["PATCH", `/templates/${ref}`, { name: "theirs" }], ["DELETE", `/templates/${ref}`], ["POST", `/templates/${ref}/publish`], ["POST", `/templates/${ref}/duplicate`]] as const) {
        expect((await call(other, m, p, b)).status, `${m} ${p}`).toBe(404);
      }
    }
    expect((await call(a, "GET", `/templates/${id}`)).body).toMatchObject({ name: "Welcome", status: "draft" });
    expect((await call(other, "POST", "/emails", { from: `x@${other.domain}`, to: "a@example.com", template: { id, variables: { NAME: "x" } } })).status).toBe(422);
  });
});

describe("sending with a template", () => {
  let id: string;
  beforeAll(async () => {
    const input = welcome();
    id = (await call(a, "POST", "/templates", { ...input, from: `Team <team@${a.domain}>` })).body.id;
  });

  it("refuses a draft, then sends the published version with variables, escaped in html", async () => {
    const before = await countRows("emails", a.accountId);
    const draft = await call(a, "POST", "/emails", { to: "delivered@simulator.tern.test", template: { id, variables: { NAME: "Ada" } } });
    expect(draft.body).toMatchObject({ statusCode: 422, name: "validation_error" });
    expect(draft.body.message).toMatch(/draft.*publish/);
    await call(a, "POST", `/templates/${id}/publish`);
    // An edit after publishing is not what sends use.
    await call(a, "PATCH", `/templates/${id}`, { html: "<p>unpublished</p>" });
    const sent = await call(a, "POST", "/emails", { to: "delivered@simulator.tern.test", template: { id, variables: { NAME: "Ada & <Bob>" } } });
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    const email = (await call(a, "GET", `/emails/${sent.body.id}`)).body;
    expect(email).toMatchObject({ from: `Team <team@${a.domain}>`, subject: "Welcome, Ada & <Bob>", html: "<p>Hello Ada &amp; &lt;Bob&gt;, your plan is Free. </p>", text: "Hello Ada & <Bob>, plan Free" });
    expect(await countRows("emails", a.accountId)).toBe(before + 1);
  });

  it("a missing variable without a fallback is a 422 naming it, in a single send and in a batch", async () => {
    await call(a, "POST", `/templates/${id}/publish`);
    const before = await countRows("emails", a.accountId);
    const single = await call(a, "POST", "/emails", { to: "delivered@simulator.tern.test", template: { id } });
    expect(single.body).toMatchObject({ statusCode: 422, name: "validation_error" });
    expect(single.body.message).toMatch(/Missing template variable `NAME`/);
    const wrongType = await call(a, "POST", "/emails", { to: "delivered@simulator.tern.test", template: { id, variables: { NAME: 3 } } });
    expect(wrongType.body.message).toMatch(/template.variables.NAME.*string/);
    const mixed = await call(a, "POST", "/emails", { to: "delivered@simulator.tern.test", html: "<p>x</p>", template: { id, variables: { NAME: "x" } } });
    expect(mixed.body.message).toMatch(/cannot be combined/);
    const batch = await call(a, "POST", "/emails/batch", [
      { to: "delivered@simulator.tern.test", template: { id, variables: { NAME: "One" } } },
      { to: "delivered@simulator.tern.test", template: { id } },
    ]);
    expect(batch.body).toMatchObject({ statusCode: 422 });
    expect(batch.body.message).toMatch(/\[1\].*NAME/);
    expect(await countRows("emails", a.accountId)).toBe(before);
    const ok = await call(a, "POST", "/emails/batch", [
      { to: "delivered@simulator.tern.test", template: { id, variables: { NAME: "One" } } },
      { from: `Other <other@${a.domain}>`, subject: "Own subject", to: "delivered@simulator.tern.test", template: { id, variables: { NAME: "Two", PLAN: "Pro" } } },
    ]);
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    const second = (await call(a, "GET", `/emails/${ok.body.data[1].id}`)).body;
    expect(second).toMatchObject({ from: `Other <other@${a.domain}>`, subject: "Own subject", text: "Hello Two, plan Pro" });
  });

  it("a placeholder named like a built-in (toString, constructor, __proto__) is a variable like any other", async () => {
    const created = await call(a, "POST", "/templates", {
      name: "Built-ins", from: `Team <team@${a.domain}>`, subject: "About {{{valueOf}}}",
      html: "<p>{{{toString}}} {{{constructor|none}}} {{{__proto__|x}}}</p>", text: "{{{toString}}} {{{constructor|none}}}",
    });
    expect(created.status).toBe(201);
    const id = created.body.id;
    await call(a, "POST", `/templates/${id}/publish`);
    const before = await countRows("emails", a.accountId);
    // Without values they are missing (a 422 naming them), never the built-in function.
    const missing = await call(a, "POST", "/emails", { to: "delivered@simulator.tern.test", template: { id } });
    expect(missing.status, JSON.stringify(missing.body)).toBe(422);
    expect(missing.body.message).toMatch(/Missing template variables `valueOf`, `toString`/);
    expect(await countRows("emails", a.accountId)).toBe(before);
    // Given, they are used; the fallbacks fill the others.
    const sent = await call(a, "POST", "/emails", { to: "delivered@simulator.tern.test", template: { id, variables: { toString: "T<", valueOf: "V" } } });
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    expect((await call(a, "GET", `/emails/${sent.body.id}`)).body).toMatchObject({ subject: "About V", html: "<p>T&lt; none x</p>", text: "T< none" });
  });
});

describe("the review before a template is published", () => {
  const principal = (x: TestAccount) => ({ accountId: x.accountId, keyId: "test", permission: "full_access" as const, domainId: null, plan: "free", rateLimit: 0 });
  const EMPTY = "The template's body is empty: its html shows no text or image. Write the message in the editor (or give `html` with content through the API) before publishing.";

  it("publish refuses a body that shows nothing with the contract's 422, the broadcast's rule; sends keep the version before", async () => {
    const id = (await call(a, "POST", "/templates", { name: "Blank", subject: "S", html: "<p>Hi</p>" })).body.id;
    expect((await call(a, "POST", `/templates/${id}/publish`)).status).toBe(200);
    // The editor's untouched design, and html with nothing visible in it.
    for (const html of [documentToHtml(EMPTY_DOCUMENT), "<p>&nbsp;</p><!-- x -->"]) {
      expect((await call(a, "PATCH", `/templates/${id}`, { html, text: documentToText(EMPTY_DOCUMENT) })).status).toBe(200);
      const refused = await call(a, "POST", `/templates/${id}/publish`);
      expect(refused).toMatchObject({ status: 422, body: { statusCode: 422, name: "validation_error", message: EMPTY } });
    }
    // Nothing changed: the published version is still the one with a body.
    const sent = await call(a, "POST", "/emails", { from: `t@${a.domain}`, to: "delivered@simulator.tern.test", template: { id } });
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    expect((await call(a, "GET", `/emails/${sent.body.id}`)).body.html).toBe("<p>Hi</p>");
    expect((await call(a, "GET", `/templates/${id}`)).body).toMatchObject({ status: "published", has_unpublished_versions: true });
    // An image alone is a body.
    expect((await call(a, "PATCH", `/templates/${id}`, { html: '<img src="https://example.com/a.png" alt="A">' })).status).toBe(200);
    expect((await call(a, "POST", `/templates/${id}/publish`)).status).toBe(200);
  });

  it("finds variables used without a fallback that are not declared", () => {
    const draft = { from: null, subject: "Order {{{ORDER}}} for {{{NAME|you}}}", reply_to: null, html: "<p>{{{NAME}}} {{{CODE}}} {{{PLAN|Free}}} {{{CODE}}} {{{RESEND_UNSUBSCRIBE_URL}}}</p>", text: "{{{TRACKING}}}", variables: [{ key: "NAME", type: "string" as const }] };
    expect(undeclaredVariables(draft)).toEqual(["ORDER", "CODE", "TRACKING"]);
  });

  it("warns of what sends would need (a subject, a verified sender, undeclared variables) and blocks only an empty body", async () => {
    const id = (await call(a, "POST", "/templates", {
      name: "Warned", from: "Shop <shop@unverified.example>", html: '<p>Hi {{{NAME}}}, order {{{ORDER}}}. <a href="#">Track it</a></p>',
      variables: [{ key: "NAME", type: "string", fallback_value: "there" }],
    })).body.id;
    const review = await reviewTemplate(env, principal(a), (await findTemplate(env.DB, a.accountId, id))!);
    expect(review.blocking).toEqual([]);
    expect(review.warnings).toEqual([
      "It has no subject, so every send with it must give its own `subject`, or is refused. Write one in Subject.",
      "The unverified.example domain is not verified. Add and verify it on the domains API first. Until then, sends that use the template's From are refused (a send's own `from` wins).",
      "`ORDER` (in the body) is used without a fallback and not declared, so every send must give its value in `template.variables`, or is refused. Give the placeholder a fallback, as in {{{ORDER|fallback}}}, or declare it with one (`variables` in the API).",
      "A link goes nowhere (an empty address or “#”). Give it a web address, or remove the link.",
    ]);
    expect(review.verdict).toBe("It can be published, but read the warnings above first. Once published, every send that names this template uses this version.");
    // The deliverability checks ran on the draft with its fallbacks, from its sender.
    expect(new Map(review.insights.map((i) => [i.id, i.status])).get("domain_authentication")).toBe("failed");
    expect(review.insights.find((i) => i.id === "list_unsubscribe")?.status).toBe("passed");

    // Fixed: nothing to say.
    expect((await call(a, "PATCH", `/templates/${id}`, { from: `Shop <shop@${a.domain}>`, subject: "Your order", html: '<p>Hi {{{NAME}}}, order {{{ORDER|soon}}}. <a href="https://example.com/t">Track it</a></p>' })).status).toBe(200);
    const fixed = await reviewTemplate(env, principal(a), (await findTemplate(env.DB, a.accountId, id))!);
    expect(fixed).toMatchObject({ blocking: [], warnings: [], verdict: "Ready to publish. Once published, every send that names this template uses this version." });

    // An empty body blocks, in the words publish refuses with.
    expect((await call(a, "PATCH", `/templates/${id}`, { html: "<p> </p>" })).status).toBe(200);
    const blocked = await reviewTemplate(env, principal(a), (await findTemplate(env.DB, a.accountId, id))!);
    expect(blocked.blocking).toEqual([EMPTY]);
    expect(blocked.verdict).toMatch(/^It cannot be published until this is fixed/);
  });

  it("warns of an uploaded image deleted since it was placed", async () => {
    const png = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]);
    const img = await storeImage(env, a.accountId, png, "https://t.tern.test", "logo.png");
    const id = (await call(a, "POST", "/templates", { name: "Logo", subject: "S", html: `<p>Hello</p><img src="${img.url}" alt="Logo">` })).body.id;
    const review = async () => reviewTemplate(env, principal(a), (await findTemplate(env.DB, a.accountId, id))!);
    expect((await review()).warnings).toEqual([]);
    expect((await deleteImage(env, a.accountId, img.id)).ok).toBe(true);
    expect((await review()).warnings).toEqual(["An image uploaded to tern was deleted from Images since it was placed here, so readers would see a broken image. Replace it in the editor (Image, then upload or pick another)."]);
  });

  it("the dashboard shows the review before publishing, and its publish is refused as the API's is", async () => {
    const { cookie, csrf } = await signedIn("owner", a.accountId);
    const post = async (path: string, body: unknown = {}) => {
      const res = await exports.default.fetch(`https://t.tern.test/dashboard${path}`, { method: "POST", headers: { origin: "https://t.tern.test", cookie, "x-csrf-token": csrf, "content-type": "application/json", accept: "application/json" }, body: JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as any };
    };
    const made = await post("/api/templates", { name: "From the dashboard" });
    const page = await (await exports.default.fetch(`https://t.tern.test/dashboard/templates/${made.body.id}`, { headers: { cookie } })).text();
    expect(page).toContain('data-action="review">Review and publish…</button>');
    expect(page).toMatch(/<section class="panel" id="review-panel"[^>]*hidden="">[\s\S]*id="publish-button" data-review-submit="true">Publish<\/button>/);
    // A template never written in: the review blocks, and publish says why.
    const review = await post(`/api/templates/${made.body.id}/review`);
    expect(review).toMatchObject({ status: 200, body: { blocking: [EMPTY], insights: [] } });
    expect(await post(`/api/templates/${made.body.id}/publish`)).toMatchObject({ status: 422, body: { message: EMPTY } });
    expect((await call(a, "GET", `/templates/${made.body.id}`)).body.status).toBe("draft");
    // Its test send is refused by the same empty-body rule, in a broadcast test's words, and
    // sends nothing.
    const before = await countRows("emails", a.accountId);
    expect(await post(`/api/templates/${made.body.id}/test`)).toMatchObject({ status: 422, body: { message: "The template's body is empty: its html shows no text or image. Write the message in the editor (or give `html` with content through the API) before sending." } });
    // Written, with a sender: the test goes to the signed-in person, variables filled with fallbacks.
    expect((await call(a, "PATCH", `/templates/${made.body.id}`, {
      from: `Shop <shop@${a.domain}>`, subject: "Order {{{ORDER}}} for {{{NAME}}}", html: "<p>Hi {{{NAME}}}, order {{{ORDER|soon}}}</p>",
      variables: [{ key: "NAME", type: "string", fallback_value: "Ada" }],
    })).status).toBe(200);
    const test = await post(`/api/templates/${made.body.id}/test`);
    expect(test).toMatchObject({ status: 200, body: { ok: true, to: expect.stringContaining("@") } });
    expect(await countRows("emails", a.accountId)).toBe(before + 1);
    const sent = await env.DB.prepare("SELECT subject, to_json FROM emails WHERE account_id = ? ORDER BY created_at DESC LIMIT 1").bind(a.accountId).first<{ subject: string; to_json: string }>();
    expect(sent).toEqual({ subject: "[Test] Order for Ada", to_json: JSON.stringify([test.body.to]) });
    // Without a From it says what to fill in.
    expect((await call(a, "PATCH", `/templates/${made.body.id}`, { from: null })).status).toBe(200);
    expect((await post(`/api/templates/${made.body.id}/test`)).body.message).toMatch(/^Fill in From first/);
    // Another account's template is not found.
    const theirs = (await call(other, "POST", "/templates", { name: "Theirs", html: "<p>x</p>" })).body.id;
    expect((await post(`/api/templates/${theirs}/review`)).status).toBe(404);
    expect((await post(`/api/templates/${theirs}/test`)).status).toBe(404);
  });
});

describe("a row's content size", () => {
  it("counts UTF-8 bytes as the encoder writes them: ASCII, two, three and four bytes, and lone surrogates", async () => {
    const { utf8Bytes } = await import("../../worker/db/row-size.ts");
    const samples = ["", "plain", "é", "€", "😀", "a😀b", "\ud800", "x\udc00y", "\ud83d", `${"é€😀".repeat(1000)}\ud800`];
    for (const s of samples) expect(utf8Bytes(s), JSON.stringify(s)).toBe(new TextEncoder().encode(s).byteLength);
  });
});
