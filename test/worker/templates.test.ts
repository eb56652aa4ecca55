// Templates in Resend's shapes: a draft, publishing, duplicate, the {id_or_alias} paths, and
// sending with `template: {id, variables}` from POST /emails and /emails/batch (only published
// versions; a missing variable without a fallback is a 422 that names it and sends nothing).
import { beforeAll, describe, expect, it } from "vitest";
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
