// Segments (and audiences), topics, contact properties and contacts joined to them, in
// Resend's shapes: each resource's happy path, its errors, and another account getting 404
// and changing nothing. Every change to a contact emits its contact.* event.
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { call, createAccount, type TestAccount } from "./fixtures.ts";

let a: TestAccount;
let other: TestAccount;
beforeAll(async () => {
  a = await createAccount({ listening: true });
  other = await createAccount();
});

async function contactEvents(t: TestAccount) {
  const rows = await env.DB.prepare("SELECT type, payload_json FROM webhook_events WHERE account_id = ? AND type LIKE 'contact.%' ORDER BY id").bind(t.accountId).all<{ type: string; payload_json: string }>();
  return rows.results.map((r) => ({ type: r.type, data: JSON.parse(r.payload_json).data }));
}

describe("segments and audiences", () => {
  it("creates, lists, reads, renames and deletes a segment; /audiences sees the same rows", async () => {
    const created = await call(a, "POST", "/segments", { name: "Registered users" });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ object: "segment", id: expect.any(String), name: "Registered users" });
    const id = created.body.id;
    expect((await call(a, "GET", `/segments/${id}`)).body).toMatchObject({ object: "segment", id, name: "Registered users", created_at: expect.any(String) });
    expect((await call(a, "GET", `/audiences/${id}`)).body).toMatchObject({ object: "audience", id, name: "Registered users" });
    expect((await call(a, "GET", "/segments")).body.data.map((s: any) => s.id)).toContain(id);
    expect((await call(a, "PATCH", `/segments/${id}`, { name: "Users" })).status).toBe(200);
    expect((await call(a, "GET", `/audiences/${id}`)).body.name).toBe("Users");
    expect((await call(a, "DELETE", `/audiences/${id}`)).body).toEqual({ object: "audience", id, deleted: true });
    expect((await call(a, "GET", `/segments/${id}`)).status).toBe(404);
  });

  it("refuses a segment without a name", async () => {
    expect((await call(a, "POST", "/segments", {})).body).toMatchObject({ statusCode: 422, name: "missing_required_field" });
    expect((await call(a, "POST", "/audiences", { name: "" })).body).toMatchObject({ statusCode: 422, name: "validation_error" });
  });

  it("another account gets 404 and changes nothing", async () => {
    const { body } = await call(a, "POST", "/segments", { name: "Mine" });
    for (const [m, p, b] of [["GET", `/segments/${body.id}`], ["PATCH", `/segments/${body.id}`, { name: "Theirs" }], ["DELETE", `/segments/${body.id}`], ["GET", `/segments/${body.id}/contacts`], ["GET", `/contacts?segment_id=${body.id}`]] as const) {
      expect((await call(other, m, p, b)).status, `${m} ${p}`).toBe(404);
    }
    expect((await call(a, "GET", `/segments/${body.id}`)).body.name).toBe("Mine");
    expect((await call(other, "GET", "/segments")).body.data).toEqual([]);
  });
});

describe("contacts joined to segments", () => {
  it("joins at creation, by path, by audience, and lists both ways with contact.updated for each change", async () => {
    const s1 = (await call(a, "POST", "/segments", { name: "One" })).body.id;
    const s2 = (await call(a, "POST", "/segments", { name: "Two" })).body.id;
    const c = (await call(a, "POST", "/contacts", { email: "Join@Example.com", first_name: "Jo", segments: [{ id: s1 }] })).body.id;
    expect((await call(a, "GET", `/contacts/${c}/segments`)).body.data.map((s: any) => s.id)).toEqual([s1]);

    const added = await call(a, "POST", `/contacts/join@example.com/segments/${s2}`);
    expect(added.body).toEqual({ object: "contact_segment", id: s2, contact_id: c, segment_id: s2 });
    expect((await call(a, "GET", `/segments/${s2}/contacts`)).body.data.map((x: any) => x.email)).toEqual(["join@example.com"]);
    expect((await call(a, "GET", `/contacts?segment_id=${s2}`)).body.data.map((x: any) => x.id)).toEqual([c]);
    expect((await call(a, "GET", `/audiences/${s2}/contacts/join@example.com`)).body.id).toBe(c);

    const removed = await call(a, "DELETE", `/contacts/${c}/segments/${s1}`);
    expect(removed.body).toEqual({ object: "contact_segment", id: s1, contact_id: c, segment_id: s1, deleted: true });
    expect((await call(a, "DELETE", `/contacts/${c}/segments/${s1}`)).status).toBe(404);
    expect((await call(a, "GET", `/audiences/${s1}/contacts/${c}`)).status).toBe(404);

    const viaAudience = await call(a, "POST", `/audiences/${s1}/contacts`, { email: "old@example.com", last_name: "Client" });
    expect(viaAudience.status).toBe(201);
    expect((await call(a, "PATCH", `/audiences/${s1}/contacts/old@example.com`, { first_name: "Older" })).status).toBe(200);
    expect((await call(a, "GET", `/audiences/${s1}/contacts`)).body.data).toMatchObject([{ email: "old@example.com", first_name: "Older" }]);
    expect((await call(a, "DELETE", `/audiences/${s1}/contacts/old@example.com`)).body).toMatchObject({ deleted: true });

    const events = (await contactEvents(a)).filter((e) => e.data.id === c);
    expect(events.map((e) => e.type)).toEqual(["contact.created", "contact.updated", "contact.updated"]);
  });

  it("refuses unknown segments and another account's contacts or segments", async () => {
    const mine = (await call(a, "POST", "/segments", { name: "Mine" })).body.id;
    const theirs = (await call(other, "POST", "/segments", { name: "Theirs" })).body.id;
    const before = (await contactEvents(a)).length;
    expect((await call(a, "POST", "/contacts", { email: "x1@example.com", segments: [theirs] })).body).toMatchObject({ statusCode: 422, name: "validation_error" });
    expect((await call(a, "GET", "/contacts/x1@example.com")).status).toBe(404);
    const c = (await call(a, "POST", "/contacts", { email: "x2@example.com" })).body.id;
    expect((await call(a, "POST", `/contacts/${c}/segments/${theirs}`)).status).toBe(404);
    expect((await call(other, "POST", `/contacts/${c}/segments/${mine}`)).status).toBe(404);
    expect((await call(other, "GET", `/contacts/${c}/segments`)).status).toBe(404);
    expect((await call(a, "GET", `/contacts/${c}/segments`)).body.data).toEqual([]);
    expect((await contactEvents(a)).length).toBe(before + 1);
  });
});

describe("topics and a contact's subscriptions", () => {
  it("creates a topic whose default_subscription is fixed, and a contact's choices override it", async () => {
    const created = await call(a, "POST", "/topics", { name: "Product news", default_subscription: "opt_in", description: "Monthly" });
    expect(created).toMatchObject({ status: 201, body: { object: "topic", id: expect.any(String) } });
    const t = created.body.id;
    const off = (await call(a, "POST", "/topics", { name: "Offers", default_subscription: "opt_out", visibility: "public" })).body.id;
    expect((await call(a, "GET", `/topics/${t}`)).body).toMatchObject({ name: "Product news", description: "Monthly", default_subscription: "opt_in", visibility: "private" });
    expect((await call(a, "PATCH", `/topics/${t}`, { default_subscription: "opt_out" })).body).toMatchObject({ statusCode: 422, name: "validation_error" });
    expect((await call(a, "PATCH", `/topics/${t}`, { id: t, name: "News", visibility: "public" })).status).toBe(200);
    expect((await call(a, "GET", `/topics/${t}`)).body).toMatchObject({ name: "News", default_subscription: "opt_in", visibility: "public" });

    const c = (await call(a, "POST", "/contacts", { email: "topics@example.com", topics: [{ id: off, subscription: "opt_in" }] })).body.id;
    const listedRes = await call(a, "GET", `/contacts/${c}/topics`);
    expect(listedRes.status, JSON.stringify(listedRes.body)).toBe(200);
    const listed = listedRes.body.data;
    expect(listed).toEqual(expect.arrayContaining([
      { id: t, name: "News", description: "Monthly", subscription: "opt_in", created_at: expect.any(String) },
      { id: off, name: "Offers", description: null, subscription: "opt_in", created_at: expect.any(String) },
    ]));
    // The Node client sends the array itself; the OpenAPI document an object around it.
    expect((await call(a, "PATCH", `/contacts/${c}/topics`, [{ id: t, subscription: "opt_out" }])).body).toEqual({ object: "contact_topics", id: c, contact_id: c, topics: [{ id: t, subscription: "opt_out" }] });
    expect((await call(a, "PATCH", `/contacts/topics@example.com/topics`, { topics: [{ id: off, subscription: "opt_out" }] })).status).toBe(200);
    const after = (await call(a, "GET", `/contacts/${c}/topics`)).body.data;
    expect(after.map((x: any) => x.subscription)).toEqual(["opt_out", "opt_out"]);
    const events = (await contactEvents(a)).filter((e) => e.data.id === c).map((e) => e.type);
    expect(events).toEqual(["contact.created", "contact.updated", "contact.updated"]);
    // The same choice again changes nothing and says nothing.
    await call(a, "PATCH", `/contacts/${c}/topics`, [{ id: t, subscription: "opt_out" }]);
    expect((await contactEvents(a)).filter((e) => e.data.id === c)).toHaveLength(3);
    expect((await call(a, "DELETE", `/topics/${off}`)).body).toEqual({ object: "topic", id: off, deleted: true });
    expect((await call(a, "GET", `/contacts/${c}/topics`)).body.data.map((x: any) => x.id)).toEqual([t]);
  });

  it("refuses bad topics and bad choices; another account gets 404", async () => {
    expect((await call(a, "POST", "/topics", { name: "No default" })).body).toMatchObject({ name: "missing_required_field" });
    expect((await call(a, "POST", "/topics", { name: "x".repeat(51), default_subscription: "opt_in" })).body.name).toBe("validation_error");
    expect((await call(a, "POST", "/topics", { name: "Bad", default_subscription: "maybe" })).body.message).toMatch(/default_subscription/);
    const t = (await call(a, "POST", "/topics", { name: "Mine", default_subscription: "opt_in" })).body.id;
    const c = (await call(a, "POST", "/contacts", { email: "choices@example.com" })).body.id;
    expect((await call(a, "PATCH", `/contacts/${c}/topics`, [{ id: t, subscription: "yes" }])).status).toBe(422);
    const theirs = (await call(other, "POST", "/topics", { name: "Theirs", default_subscription: "opt_in" })).body.id;
    expect((await call(a, "PATCH", `/contacts/${c}/topics`, [{ id: theirs, subscription: "opt_out" }])).status).toBe(422);
    for (const [m, p, b] of [["GET", `/topics/${t}`], ["PATCH", `/topics/${t}`, { name: "x" }], ["DELETE", `/topics/${t}`], ["GET", `/contacts/${c}/topics`], ["PATCH", `/contacts/${c}/topics`, [{ id: theirs, subscription: "opt_out" }]]] as const) {
      expect((await call(other, m, p, b)).status, `${m} ${p}`).toBe(404);
    }
    expect((await call(a, "GET", `/topics/${t}`)).body.name).toBe("Mine");
  });
});

describe("a topic broadcasts use", () => {
  it("cannot be deleted while a draft, scheduled, queued or sending broadcast uses it, and can once none does", async () => {
    const t = await createAccount({ listening: true });
    const topic = (await call(t, "POST", "/topics", { name: "Launches", default_subscription: "opt_in" })).body.id;
    const segment = (await call(t, "POST", "/segments", { name: "All" })).body.id;
    const make = async (name: string) => (await call(t, "POST", "/broadcasts", { name, segment_id: segment, topic_id: topic, from: `news@${t.domain}`, subject: "S", html: "<p/>" })).body.id as string;
    const draft = await make("Spring launch");
    const later = await make("Autumn launch");
    const refused = async () => {
      const res = await call(t, "DELETE", `/topics/${topic}`);
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ name: "validation_error", message: expect.stringMatching(/Launches.*used by broadcast/) });
      return res.body.message as string;
    };
    const both = await refused();
    expect(both).toContain(draft);
    expect(both).toContain(later);
    await env.DB.prepare("UPDATE broadcasts SET status = 'sent' WHERE id = ?").bind(draft).run();
    for (const status of ["scheduled", "queued", "sending"]) {
      await env.DB.prepare("UPDATE broadcasts SET status = ? WHERE id = ?").bind(status, later).run();
      const message = await refused();
      expect(message).toContain(`${later} (Autumn launch, ${status})`);
      expect(message).not.toContain(draft);
    }
    await env.DB.prepare("UPDATE broadcasts SET status = 'canceled' WHERE id = ?").bind(later).run();
    expect((await call(t, "GET", `/topics/${topic}`)).status).toBe(200);
    // Only sent and canceled broadcasts use it now.
    expect((await call(t, "DELETE", `/topics/${topic}`)).body).toEqual({ object: "topic", id: topic, deleted: true });
  });
});

describe("contact properties and properties on contacts", () => {
  it("defines keys with types and fallbacks; contacts carry checked values", async () => {
    const p = await call(a, "POST", "/contact-properties", { key: "company", type: "string", fallback_value: "your company" });
    expect(p).toMatchObject({ status: 201, body: { object: "contact_property", id: expect.any(String) } });
    await call(a, "POST", "/contact-properties", { key: "seats", type: "number" });
    expect((await call(a, "GET", `/contact-properties/${p.body.id}`)).body).toMatchObject({ key: "company", type: "string", fallback_value: "your company" });
    expect((await call(a, "PATCH", `/contact-properties/${p.body.id}`, { fallback_value: "ACME" })).status).toBe(200);
    expect((await call(a, "GET", "/contact-properties")).body.data.map((x: any) => x.key)).toEqual(["seats", "company"]);

    const c = (await call(a, "POST", "/contacts", { email: "props@example.com", properties: { company: "Initech", seats: 12 } })).body.id;
    expect((await call(a, "GET", `/contacts/${c}`)).body.properties).toEqual({ company: { type: "string", value: "Initech" }, seats: { type: "number", value: 12 } });
    await call(a, "PATCH", `/contacts/${c}`, { properties: { seats: null } });
    expect((await call(a, "GET", `/contacts/${c}`)).body.properties).toEqual({ company: { type: "string", value: "Initech" } });
    expect((await call(a, "PATCH", `/contacts/${c}`, { properties: { seats: "many" } })).body).toMatchObject({ statusCode: 422, message: "`properties.seats` must be a number." });
    expect((await call(a, "PATCH", `/contacts/${c}`, { properties: { plan: "pro" } })).body.message).toMatch(/properties.plan.*POST \/contact-properties/);
    expect((await call(a, "DELETE", `/contact-properties/${p.body.id}`)).body).toMatchObject({ deleted: true });
    expect((await call(a, "GET", `/contacts/${c}`)).body.properties).toEqual({});
  });

  it("refuses bad keys, duplicate keys and fallbacks of the wrong type; another account gets 404", async () => {
    expect((await call(a, "POST", "/contact-properties", { key: "has space", type: "string" })).body.name).toBe("validation_error");
    expect((await call(a, "POST", "/contact-properties", { key: "tier", type: "number", fallback_value: "gold" })).body.message).toMatch(/fallback_value/);
    const p = (await call(a, "POST", "/contact-properties", { key: "tier", type: "string" })).body.id;
    expect((await call(a, "POST", "/contact-properties", { key: "tier", type: "string" })).body.message).toMatch(/already exists/);
    for (const [m, path, b] of [["GET", `/contact-properties/${p}`], ["PATCH", `/contact-properties/${p}`, { fallback_value: "x" }], ["DELETE", `/contact-properties/${p}`]] as const) {
      expect((await call(other, m, path, b)).status).toBe(404);
    }
    expect((await call(other, "POST", "/contacts", { email: "o@example.com", properties: { tier: "gold" } })).status).toBe(422);
  });
});

describe("topic_id on POST /emails", () => {
  it("drops recipients who opted out of the topic, refuses a send with nobody left, and another account's topic", async () => {
    const t = (await call(a, "POST", "/topics", { name: "Receipts", default_subscription: "opt_in" })).body.id;
    const offByDefault = (await call(a, "POST", "/topics", { name: "Tips", default_subscription: "opt_out" })).body.id;
    const out = `out-${crypto.randomUUID().slice(0, 6)}@simulator.tern.test`;
    const stays = `in-${crypto.randomUUID().slice(0, 6)}@simulator.tern.test`;
    await call(a, "POST", "/contacts", { email: out, topics: [{ id: t, subscription: "opt_out" }, { id: offByDefault, subscription: "opt_in" }] });
    const sent = await call(a, "POST", "/emails", { from: `x@${a.domain}`, to: [out, stays], subject: "Receipt", text: "t", topic_id: t });
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    const row = await env.DB.prepare("SELECT pending_json FROM emails WHERE id = ?").bind(sent.body.id).first<{ pending_json: string }>();
    expect(JSON.parse(row!.pending_json)).toEqual([stays]);
    const nobody = await call(a, "POST", "/emails", { from: `x@${a.domain}`, to: out, subject: "Receipt", text: "t", topic_id: t });
    expect(nobody.body).toMatchObject({ statusCode: 422, name: "validation_error", message: expect.stringMatching(/opted out of topic Receipts/) });
    // A default of opt_out: only who opted in receives it, contact or not.
    const tips = await call(a, "POST", "/emails/batch", [{ from: `x@${a.domain}`, to: [out, stays], subject: "Tip", text: "t", topic_id: offByDefault }]);
    const tipRow = await env.DB.prepare("SELECT pending_json FROM emails WHERE id = ?").bind(tips.body.data[0].id).first<{ pending_json: string }>();
    expect(JSON.parse(tipRow!.pending_json)).toEqual([out]);
    const theirs = (await call(other, "POST", "/topics", { name: "Theirs", default_subscription: "opt_in" })).body.id;
    expect((await call(a, "POST", "/emails", { from: `x@${a.domain}`, to: stays, subject: "x", text: "t", topic_id: theirs })).status).toBe(422);
  });
});

describe("deleting a segment, topic or property", () => {
  it("reports contact.updated for each contact it changes, and only those", async () => {
    const t = await createAccount({ listening: true });
    const seg = (await call(t, "POST", "/segments", { name: "S" })).body.id;
    const topic = (await call(t, "POST", "/topics", { name: "T", default_subscription: "opt_in" })).body.id;
    await call(t, "POST", "/contact-properties", { key: "tier", type: "string" });
    const prop = (await call(t, "GET", "/contact-properties")).body.data[0].id;
    const inSeg = (await call(t, "POST", "/contacts", { email: "member@example.com", segments: [seg] })).body.id;
    const chose = (await call(t, "POST", "/contacts", { email: "chose@example.com", topics: [{ id: topic, subscription: "opt_out" }] })).body.id;
    const hasKey = (await call(t, "POST", "/contacts", { email: "keyed@example.com", properties: { tier: "gold" } })).body.id;
    await call(t, "POST", "/contacts", { email: "bystander@example.com" });
    const updatedIds = async () => (await contactEvents(t)).filter((e) => e.type === "contact.updated").map((e) => e.data.id);
    expect(await updatedIds()).toEqual([]);
    await call(t, "DELETE", `/segments/${seg}`);
    expect(await updatedIds()).toEqual([inSeg]);
    await call(t, "DELETE", `/topics/${topic}`);
    expect(await updatedIds()).toEqual([inSeg, chose]);
    await call(t, "DELETE", `/contact-properties/${prop}`);
    expect(await updatedIds()).toEqual([inSeg, chose, hasKey]);
    expect((await call(t, "GET", `/contacts/${hasKey}`)).body.properties).toEqual({});
    expect((await call(t, "GET", `/contacts/${inSeg}/segments`)).body.data).toEqual([]);
  });
});
