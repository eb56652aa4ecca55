// Names a user gives to things (segments, topics, API keys, templates, broadcasts, contact
// property keys, oneself at sign-up) are one line: a line break, NUL, tab or other control
// character is refused with a 422 and changes nothing, on creates and renames alike, while any
// other Unicode text is kept as written. The rule is one zod piece (label() in
// worker/routes/schemas.ts), so the OpenAPI document states it as a pattern.
import { env, exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { authFor } from "../../worker/dashboard/auth.ts";
import { ONE_LINE } from "../../worker/routes/schemas.ts";
import { signedIn } from "./dashboard-session.ts";
import { call, createAccount, type TestAccount } from "./fixtures.ts";

const BAD = ["Spring\r\nBcc: x@evil.example", "Spring\u0000sale", "Spring\tsale", "Spring\u2028sale", "Spring\u0085sale", "Spring \u202Eelas"];
const GOOD = "Café — Été 2026 🎉";
const DASH = "https://t.tern.test";

let a: TestAccount;
let ids: { segment: string; topic: string; apiKey: string; template: string; broadcast: string };
beforeAll(async () => {
  a = await createAccount();
  const made = async (path: string, body: unknown) => {
    const r = await call(a, "POST", path, body);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body.id as string;
  };
  const segment = await made("/segments", { name: "Kept" });
  ids = {
    segment,
    topic: await made("/topics", { name: "Kept", default_subscription: "opt_in", description: "Kept" }),
    apiKey: await made("/api-keys", { name: "Kept" }),
    template: await made("/templates", { name: "Kept", html: "<p>Hi</p>" }),
    broadcast: await made("/broadcasts", { name: "Kept", segment_id: segment, from: `news@${a.domain}`, subject: "Hi", html: "<p>Hi</p>" }),
  };
});

/** Each request that sets a name, with the field it sets and the list that would show a change. */
const cases: { what: string; field: string; send: (name: string) => [string, string, unknown]; list: string; good?: string }[] = [
  { what: "POST /segments", field: "name", send: (name) => ["POST", "/segments", { name }], list: "/segments" },
  { what: "POST /audiences", field: "name", send: (name) => ["POST", "/audiences", { name }], list: "/audiences" },
  { what: "PATCH /segments/{id}", field: "name", send: (name) => ["PATCH", `/segments/${ids.segment}`, { name }], list: "/segments" },
  { what: "POST /topics", field: "name", send: (name) => ["POST", "/topics", { name, default_subscription: "opt_in" }], list: "/topics" },
  { what: "PATCH /topics/{id} (description)", field: "description", send: (description) => ["PATCH", `/topics/${ids.topic}`, { description }], list: "/topics" },
  { what: "POST /api-keys", field: "name", send: (name) => ["POST", "/api-keys", { name }], list: "/api-keys" },
  { what: "PATCH /api-keys/{id}", field: "name", send: (name) => ["PATCH", `/api-keys/${ids.apiKey}`, { name }], list: "/api-keys" },
  // Resend's rule for a property's key is letters, digits and underscores, which refuses more.
  { what: "POST /contact-properties", field: "key", send: (key) => ["POST", "/contact-properties", { key, type: "string" }], list: "/contact-properties", good: "cafe_2026" },
  { what: "POST /templates", field: "name", send: (name) => ["POST", "/templates", { name, html: "<p>Hi</p>" }], list: "/templates" },
  { what: "PATCH /templates/{id}", field: "name", send: (name) => ["PATCH", `/templates/${ids.template}`, { name }], list: "/templates" },
  { what: "POST /broadcasts", field: "name", send: (name) => ["POST", "/broadcasts", { name, segment_id: ids.segment, from: `news@${a.domain}`, subject: "Hi", html: "<p>Hi</p>" }], list: "/broadcasts" },
  { what: "PATCH /broadcasts/{id}", field: "name", send: (name) => ["PATCH", `/broadcasts/${ids.broadcast}`, { name }], list: "/broadcasts" },
];

const listed = async (path: string) => (await call(a, "GET", path)).body.data;

describe("a name with a line break or control character", () => {
  for (const [i, c] of cases.entries()) {
    it(`is refused by ${c.what} with a 422 naming the field, and nothing changes`, async () => {
      const before = await listed(c.list);
      for (const bad of BAD) {
        const r = await call(a, ...c.send(bad));
        expect(r, JSON.stringify(bad)).toEqual({ status: 422, body: { statusCode: 422, name: "validation_error", message: expect.stringMatching(new RegExp(`^\`${c.field}\` must `)) } });
      }
      expect(await listed(c.list)).toEqual(before);
    });

    it(`is kept without the line break around it at ${c.what}, as names always were trimmed`, async () => {
      if (c.good) return; // a property key has no room for it
      const name = `Trimmed #${i}`;
      const r = await call(a, ...c.send(`\r\n ${name}\r\n`));
      expect(r.status, JSON.stringify(r.body)).toBe(c.what.startsWith("POST") ? 201 : 200);
      expect((await listed(c.list)).map((item: Record<string, unknown>) => item[c.field])).toContain(name);
    });

    it(`is not a reason to refuse other Unicode text at ${c.what}`, async () => {
      const name = c.good ?? `${GOOD} #${i}`;
      const r = await call(a, ...c.send(name));
      expect(r.status, JSON.stringify(r.body)).toBe(c.what.startsWith("POST") ? 201 : 200);
      expect((await listed(c.list)).map((item: Record<string, unknown>) => item[c.field])).toContain(name);
    });
  }

  it("is refused by the dashboard's forms, which read the API's schemas, and nothing is created", async () => {
    const me = await signedIn("owner");
    const post = (path: string, body: unknown) => exports.default.fetch(`${DASH}/dashboard/api${path}`, {
      method: "POST", headers: { cookie: me.cookie, origin: DASH, "x-csrf-token": me.csrf, "content-type": "application/json" }, body: JSON.stringify(body),
    });
    const segments = () => env.DB.prepare("SELECT name FROM segments WHERE account_id = ?").bind(me.account).all<{ name: string }>();
    for (const bad of BAD) {
      const r = await post("/segments", { name: bad });
      expect(r.status, JSON.stringify(bad)).toBe(422);
      expect(await r.json()).toEqual({ message: "`name` must be one line of text, without tabs, line breaks or other control characters." });
    }
    expect((await segments()).results).toEqual([]);
    expect((await post("/segments", { name: GOOD })).status).toBe(201);
    expect((await segments()).results).toEqual([{ name: GOOD }]);
  });

  it("is refused as a person's name at sign-up, before anyone is created", async () => {
    for (const bad of BAD) {
      const email = `${crypto.randomUUID()}@people.test`;
      const r = await exports.default.fetch(`${DASH}/dashboard/api/auth/sign-up/email`, {
        method: "POST", headers: { origin: DASH, "content-type": "application/json" },
        body: JSON.stringify({ name: bad, email, password: "correct-horse-battery-staple-42" }),
      });
      expect(r.status, JSON.stringify(bad)).toBe(422);
      expect(await r.json()).toMatchObject({ code: "INVALID_NAME", message: "Your name must be one line of text, without tabs, line breaks or other control characters." });
      expect(await env.DB.prepare("SELECT count(*) AS n FROM auth_users WHERE email = ?").bind(email).first("n")).toBe(0);
    }
    const email = `${crypto.randomUUID()}@people.test`;
    const long = await exports.default.fetch(`${DASH}/dashboard/api/auth/sign-up/email`, {
      method: "POST", headers: { origin: DASH, "content-type": "application/json" },
      body: JSON.stringify({ name: "x".repeat(257), email, password: "correct-horse-battery-staple-42" }),
    });
    expect(long.status).toBe(422);
    expect(await long.json()).toMatchObject({ code: "INVALID_NAME", message: "Your name is too long (at most 256 characters)." });
    expect(await env.DB.prepare("SELECT count(*) AS n FROM auth_users WHERE email = ?").bind(email).first("n")).toBe(0);
  });

  it("is cleaned, not refused, in a name that arrives from elsewhere (an OAuth profile), and in the account named after it", async () => {
    const ctx = await (await authFor(env, DASH, { oauth: true })).$context;
    const email = `${crypto.randomUUID()}@people.test`;
    const oauth = { method: "oauth", oauth: { providerId: "github" } };
    const user = await ctx.internalAdapter.createUser({ name: "Ada\r\nBcc: x@evil.example\t\u202E", email, emailVerified: true }, oauth);
    expect(user.name).toBe("AdaBcc: x@evil.example");
    const account = await env.DB.prepare("SELECT a.name FROM accounts a JOIN memberships m ON m.account_id = a.id WHERE m.user_id = ?").bind(user.id).first("name");
    expect(account).toBe("AdaBcc: x@evil.example's account");
    const long = await ctx.internalAdapter.createUser({ name: "x".repeat(400), email: `${crypto.randomUUID()}@people.test`, emailVerified: true }, oauth);
    expect(long.name).toHaveLength(256);
    const longAccount = await env.DB.prepare("SELECT a.name FROM accounts a JOIN memberships m ON m.account_id = a.id WHERE m.user_id = ?").bind(long.id).first<string>("name");
    expect(longAccount!.length).toBeLessThanOrEqual(200);
    const emoji = await ctx.internalAdapter.createUser({ name: "🎉".repeat(200), email: `${crypto.randomUUID()}@people.test`, emailVerified: true }, oauth);
    expect(emoji.name).toBe("🎉".repeat(128)); // 256 UTF-16 units, no half of a pair
    const renamed = await ctx.internalAdapter.updateUser(user.id, { name: "Ada\nLovelace" });
    expect(renamed?.name).toBe("AdaLovelace");
  });

  it("is stated in the OpenAPI document as a pattern on every such field", async () => {
    type S = { properties: Record<string, { pattern?: string; anyOf?: { pattern?: string }[] }> };
    const doc = (await (await exports.default.fetch("http://tern.test/openapi.json")).json()) as { components: { schemas: Record<string, S> } };
    const pattern = (schema: string, field: string) => {
      const f = doc.components.schemas[schema]!.properties[field]!;
      return f.pattern ?? f.anyOf?.find((b) => b.pattern)?.pattern;
    };
    for (const [schema, field] of [
      ["CreateSegmentRequest", "name"], ["UpdateSegmentRequest", "name"], ["CreateTopicRequest", "name"], ["CreateTopicRequest", "description"],
      ["UpdateTopicRequest", "name"], ["UpdateTopicRequest", "description"], ["CreateApiKeyRequest", "name"], ["UpdateApiKeyRequest", "name"],
      ["CreateTemplateRequest", "name"], ["UpdateTemplateRequest", "name"], ["CreateBroadcastRequest", "name"], ["UpdateBroadcastRequest", "name"],
    ] as const) {
      expect(pattern(schema, field), `${schema}.${field}`).toBe(ONE_LINE.source);
    }
  });
});
