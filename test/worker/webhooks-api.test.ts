// The webhook management API of contract section 6: happy paths, every bad input, the
// endpoint policy as production applies it, secrets that are shown once, and other accounts'
// webhooks that do not exist for you.
import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { app } from "../../worker/index.ts";
import { WEBHOOK_EVENT_TYPES } from "../../worker/webhooks/payloads.ts";
import { addKey, api, createAccount, type TestAccount } from "./fixtures.ts";
import { Clock, consume, createWebhook, outboxEmailEvent, receiverUrl } from "./webhook-peer.ts";

let acct: TestAccount;
let other: TestAccount;
beforeAll(async () => {
  acct = await createAccount();
  other = await createAccount();
});

const json = async (res: Response) => (await res.json()) as Record<string, any>;

/** The API as production runs it: the operator has not allowed private targets. */
async function productionApi(token: string, method: string, path: string, body?: unknown): Promise<Response> {
  const req = new Request(`http://tern.test${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return app.fetch(req, { ...env, WEBHOOK_ALLOW_PRIVATE_TARGETS: "false", TERN_DEV_MODE: "false" }, createExecutionContext());
}

describe("creating, reading, updating and deleting webhooks", () => {
  it("create answers 201 with a whsec_ secret that is never shown again and is not stored in the clear", async () => {
    const res = await api(acct.token, "POST", "/webhooks", { endpoint: "https://example.com/hooks/tern", events: ["email.sent", "email.bounced", "email.sent"] });
    expect(res.status).toBe(201);
    const created = await json(res);
    expect(Object.keys(created).sort()).toEqual(["id", "object", "signing_secret"]);
    expect(created.object).toBe("webhook");
    expect(created.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(created.signing_secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);

    const got = await api(acct.token, "GET", `/webhooks/${created.id}`);
    const text = await got.text();
    expect(got.status).toBe(200);
    expect(text).not.toContain(created.signing_secret.slice(6));
    expect(JSON.parse(text)).toEqual({
      object: "webhook", id: created.id, endpoint: "https://example.com/hooks/tern", events: ["email.sent", "email.bounced"],
      status: "enabled", disabled_reason: null, failing_since: null, created_at: expect.any(String), updated_at: expect.any(String),
    });
    const list = await json(await api(acct.token, "GET", "/webhooks"));
    expect(list.object).toBe("list");
    expect(list.data.find((w: { id: string }) => w.id === created.id)).toMatchObject({ endpoint: "https://example.com/hooks/tern" });
    expect(JSON.stringify(list)).not.toContain(created.signing_secret.slice(6));
    const row = await env.DB.prepare("SELECT secret_sealed FROM webhooks WHERE id = ?").bind(created.id).first<{ secret_sealed: string }>();
    expect(row!.secret_sealed).not.toContain(created.signing_secret.slice(6));
    expect(row!.secret_sealed).toMatch(/^v1\./);
  });

  it("every event type of the contract can be subscribed to", async () => {
    const res = await api(acct.token, "POST", "/webhooks", { endpoint: "https://example.com/all", events: [...WEBHOOK_EVENT_TYPES] });
    expect(res.status).toBe(201);
    expect((await json(await api(acct.token, "GET", `/webhooks/${(await json(res)).id}`))).events).toEqual([...WEBHOOK_EVENT_TYPES]);
  });

  it("update changes the endpoint and events; disabling says why; enabling clears the reason", async () => {
    const { id } = await createWebhook(acct.token, "https://example.com/a", ["email.sent"]);
    let res = await api(acct.token, "PATCH", `/webhooks/${id}`, { endpoint: "https://example.org/b", events: ["domain.created", "contact.updated"] });
    expect(res.status).toBe(200);
    expect(await json(res)).toMatchObject({ endpoint: "https://example.org/b", events: ["domain.created", "contact.updated"], status: "enabled" });
    res = await api(acct.token, "PATCH", `/webhooks/${id}`, { status: "disabled" });
    expect(await json(res)).toMatchObject({ status: "disabled", disabled_reason: "Disabled by the account." });
    res = await api(acct.token, "PATCH", `/webhooks/${id}`, { status: "enabled" });
    expect(await json(res)).toMatchObject({ status: "enabled", disabled_reason: null, failing_since: null });
    // An empty update changes nothing and is fine.
    expect((await api(acct.token, "PATCH", `/webhooks/${id}`, {})).status).toBe(200);
  });

  it("delete answers {object, id, deleted} and takes the event log with it", async () => {
    const target = receiverUrl("driven", "deleted");
    const { id } = await createWebhook(acct.token, target.url, ["email.sent"]);
    const clock = new Clock();
    const event = await outboxEmailEvent(acct.accountId, "email.sent", clock.now());
    await consume([{ kind: "event", eventId: event.id }], clock);
    expect((await json(await api(acct.token, "GET", `/webhooks/${id}/events`))).data).toHaveLength(1);
    const res = await api(acct.token, "DELETE", `/webhooks/${id}`);
    expect(res.status).toBe(200);
    expect(await json(res)).toEqual({ object: "webhook", id, deleted: true });
    expect((await api(acct.token, "GET", `/webhooks/${id}`)).status).toBe(404);
    const left = await env.DB.prepare("SELECT (SELECT count(*) FROM webhook_deliveries WHERE webhook_id = ?1) + (SELECT count(*) FROM webhook_attempts WHERE webhook_id = ?1) AS n").bind(id).first<{ n: number }>();
    expect(left!.n).toBe(0);
    expect((await api(acct.token, "DELETE", `/webhooks/${id}`)).status).toBe(404);
  });

  it("lists page with limit and after, newest first", async () => {
    const fresh = await createAccount();
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await createWebhook(fresh.token, `https://example.com/${i}`, ["email.sent"])).id);
    const first = await json(await api(fresh.token, "GET", "/webhooks?limit=2"));
    expect(first.data.map((w: { id: string }) => w.id)).toEqual([ids[2], ids[1]]);
    expect(first.has_more).toBe(true);
    const second = await json(await api(fresh.token, "GET", `/webhooks?limit=2&after=${ids[1]}`));
    expect(second.data.map((w: { id: string }) => w.id)).toEqual([ids[0]]);
    expect(second.has_more).toBe(false);
    expect((await api(fresh.token, "GET", "/webhooks?limit=0")).status).toBe(422);
  });
});

describe("bad input", () => {
  it.each([
    ["no body", undefined, 400, "validation_error"],
    ["not JSON", "{nope", 400, "validation_error"],
    ["an array", [], 400, "validation_error"],
    ["no endpoint", { events: ["email.sent"] }, 422, "missing_required_field", /`endpoint`/],
    ["no events", { endpoint: "https://example.com" }, 422, "missing_required_field", /`events`/],
    ["neither", {}, 422, "missing_required_field", /`endpoint`, `events`/],
    ["events not an array", { endpoint: "https://example.com", events: "email.sent" }, 422, "validation_error", /`events`/],
    ["no event types", { endpoint: "https://example.com", events: [] }, 422, "validation_error", /`events` must name at least one/],
    ["an unknown event type", { endpoint: "https://example.com", events: ["email.sent", "email.dropped"] }, 422, "validation_error", /`events\[1\]` must be one of email\.sent/],
    ["an event type that is not a string", { endpoint: "https://example.com", events: [42] }, 422, "validation_error", /`events\[0\]`/],
    ["an endpoint that is not a string", { endpoint: 42, events: ["email.sent"] }, 422, "validation_error", /`endpoint` must be a string/],
    ["an endpoint that is not a URL", { endpoint: "example.com/hook", events: ["email.sent"] }, 422, "validation_error", /^`endpoint` is not a valid absolute URL\.$/],
    ["a non-http scheme", { endpoint: "ftp://example.com/hook", events: ["email.sent"] }, 422, "validation_error", /^`endpoint` must use https/],
    ["a javascript: URL", { endpoint: "javascript:alert(1)", events: ["email.sent"] }, 422, "validation_error", /^`endpoint`/],
    ["credentials in the URL", { endpoint: "https://user:pw@example.com/", events: ["email.sent"] }, 422, "validation_error", /user name or password/],
    ["an endpoint over 2048 characters", { endpoint: `https://example.com/${"a".repeat(2048)}`, events: ["email.sent"] }, 422, "validation_error", /at most 2048/],
  ])("create with %s is refused", async (_what, body, status, name, message?: RegExp) => {
    const res = await api(acct.token, "POST", "/webhooks", body);
    expect(res.status).toBe(status);
    const err = await json(res);
    expect(err).toMatchObject({ statusCode: status, name });
    if (message) expect(err.message).toMatch(message);
  });

  it.each([
    ["an unknown field", { secret: "whsec_x" }, /secret/],
    ["a status that is not enabled or disabled", { status: "paused" }, /`status` must be `enabled` or `disabled`/],
    ["no event types", { events: [] }, /at least one/],
    ["an unknown event type", { events: ["email.nope"] }, /`events\[0\]`/],
    ["an endpoint that is not a URL", { endpoint: "nope" }, /`endpoint`/],
  ])("update with %s is refused with 422", async (_what, body, message) => {
    const { id } = await createWebhook(acct.token, "https://example.com/u", ["email.sent"]);
    const res = await api(acct.token, "PATCH", `/webhooks/${id}`, body);
    expect(res.status).toBe(422);
    expect((await json(res)).message).toMatch(message);
    expect((await json(await api(acct.token, "GET", `/webhooks/${id}`))).endpoint).toBe("https://example.com/u");
  });

  it("ids that are not UUIDs are unknown routes, and wrong methods answer 405", async () => {
    expect((await api(acct.token, "GET", "/webhooks/not-a-uuid")).status).toBe(404);
    expect((await api(acct.token, "PUT", `/webhooks/${crypto.randomUUID()}`)).status).toBe(405);
    expect((await api(acct.token, "GET", `/webhooks/${crypto.randomUUID()}/signing-secret/rotate`)).status).toBe(405);
  });

  it("a sending_access key cannot manage webhooks, and no key is 401", async () => {
    const sending = await addKey(acct.accountId, "sending_access");
    expect(await json(await api(sending, "GET", "/webhooks"))).toMatchObject({ statusCode: 401, name: "restricted_api_key" });
    expect((await api(sending, "POST", "/webhooks", { endpoint: "https://example.com", events: ["email.sent"] })).status).toBe(401);
    expect((await api(null, "GET", "/webhooks")).status).toBe(401);
  });
});

describe("the endpoint policy in production", () => {
  it.each([
    ["plain http", "http://example.com/hook", /^`endpoint` must use https\.$/],
    ["loopback", "https://127.0.0.1/hook", /public host/],
    ["localhost", "https://localhost:8443/hook", /public host/],
    ["IPv6 loopback", "https://[::1]/hook", /public host/],
    ["a private network", "https://10.1.2.3/hook", /public host/],
    ["a private network (192.168)", "https://192.168.0.10/hook", /public host/],
    ["link-local (cloud metadata)", "https://169.254.169.254/latest/meta-data", /public host/],
    ["IPv4-mapped IPv6 loopback", "https://[::ffff:127.0.0.1]/", /public host/],
  ])("refuses %s with 422 naming the endpoint", async (_what, endpoint, message) => {
    const res = await productionApi(acct.token, "POST", "/webhooks", { endpoint, events: ["email.sent"] });
    expect(res.status).toBe(422);
    expect(await json(res)).toMatchObject({ name: "validation_error", message: expect.stringMatching(message) });
  });

  it("accepts https on a public host, on any port, and refuses moving it to a private one", async () => {
    const res = await productionApi(acct.token, "POST", "/webhooks", { endpoint: "https://hooks.example.com:8443/tern", events: ["email.sent"] });
    expect(res.status).toBe(201);
    const { id } = await json(res);
    const moved = await productionApi(acct.token, "PATCH", `/webhooks/${id}`, { endpoint: "https://10.0.0.1/" });
    expect(moved.status).toBe(422);
    expect((await json(moved)).message).toMatch(/^`endpoint` must point to a public host/);
  });

  it("the operator switch (and dev mode) allows loopback http targets", async () => {
    expect((await api(acct.token, "POST", "/webhooks", { endpoint: "http://127.0.0.1:9/hook", events: ["email.sent"] })).status).toBe(201);
  });
});

describe("other accounts' webhooks", () => {
  it("are not found by any route", async () => {
    const target = receiverUrl("driven", "private");
    const hook = await createWebhook(acct.token, target.url, ["email.sent"]);
    const clock = new Clock();
    const event = await outboxEmailEvent(acct.accountId, "email.sent", clock.now());
    await consume([{ kind: "event", eventId: event.id }], clock);
    const [delivery] = (await json(await api(acct.token, "GET", `/webhooks/${hook.id}/events`))).data;
    expect(delivery).toBeDefined();
    const routes: [string, string, unknown?][] = [
      ["GET", `/webhooks/${hook.id}`],
      ["PATCH", `/webhooks/${hook.id}`, { status: "disabled" }],
      ["DELETE", `/webhooks/${hook.id}`],
      ["POST", `/webhooks/${hook.id}/signing-secret/rotate`],
      ["GET", `/webhooks/${hook.id}/events`],
      ["GET", `/webhooks/${hook.id}/events/${delivery.id}`],
      ["GET", `/webhooks/${hook.id}/events/${delivery.id}/attempts`],
      ["POST", `/webhooks/${hook.id}/events/${delivery.id}/replay`],
    ];
    for (const [method, path, body] of routes) {
      const res = await api(other.token, method, path, body);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect((await json(res)).name).toBe("not_found");
    }
    expect((await json(await api(other.token, "GET", "/webhooks"))).data).toEqual([]);
    // Nothing changed for the owner.
    expect(await json(await api(acct.token, "GET", `/webhooks/${hook.id}`))).toMatchObject({ status: "enabled" });
    // An event of one webhook is not found under another of the same account either.
    const second = await createWebhook(acct.token, target.url, ["email.sent"]);
    expect((await api(acct.token, "GET", `/webhooks/${second.id}/events/${delivery.id}`)).status).toBe(404);
    // Nor does another account's event reach this account's endpoints.
    const foreign = await outboxEmailEvent(other.accountId, "email.sent", clock.now());
    await consume([{ kind: "event", eventId: foreign.id }], clock);
    expect((await json(await api(acct.token, "GET", `/webhooks/${hook.id}/events`))).data).toHaveLength(1);
  });
});
