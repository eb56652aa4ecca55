// Resend's endpoints for keys and suppressions that tern adds for parity: PATCH /api-keys/{id}
// (rename), GET and DELETE /suppressions/{id_or_email}, POST /suppressions/batch/add and
// /batch/remove, the `origin` filter; and the update bodies official clients send with the
// resource's id in them (resend-python: Domains.update sends `id`, Webhooks.update `webhook_id`).
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { api, countRows, createAccount, type TestAccount } from "./fixtures.ts";

let acct: TestAccount;
let other: TestAccount;
beforeAll(async () => {
  [acct, other] = await Promise.all([createAccount(), createAccount()]);
});

const json = async <T = Record<string, unknown>>(res: Response) => (await res.json()) as T;

describe("PATCH /api-keys/{id}", () => {
  it("renames a key; the token keeps working", async () => {
    const { id, token } = await json<{ id: string; token: string }>(await api(acct.token, "POST", "/api-keys", { name: "old name" }));
    const res = await api(acct.token, "PATCH", `/api-keys/${id}`, { name: "  CI deploys  " });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ object: "api_key", id });
    const list = await json<{ data: { id: string; name: string }[] }>(await api(acct.token, "GET", "/api-keys?limit=100"));
    expect(list.data.find((k) => k.id === id)!.name).toBe("CI deploys");
    expect((await api(token, "GET", "/api-keys")).status).toBe(200);
    // The body may name the key it is about, as clients do.
    expect((await api(acct.token, "PATCH", `/api-keys/${id}`, { name: "again", id })).status).toBe(200);
    expect((await api(acct.token, "PATCH", `/api-keys/${id}`, { name: "again", api_key_id: id })).status).toBe(200);
  });

  it("refuses bad names, other keys' ids in the body, unknown fields; another account's key is 404 and unchanged", async () => {
    const { id } = await json<{ id: string }>(await api(acct.token, "POST", "/api-keys", { name: "keep" }));
    for (const [body, status, name] of [
      [{}, 422, "missing_required_field"],
      [{ name: "" }, 422, "validation_error"],
      [{ name: "x".repeat(51) }, 422, "validation_error"],
      [{ name: 5 }, 422, "validation_error"],
      [{ name: "n", permission: "sending_access" }, 422, "validation_error"],
      [{ name: "n", id: crypto.randomUUID() }, 422, "validation_error"],
      ["nope", 400, "validation_error"],
    ] as const) {
      const res = await api(acct.token, "PATCH", `/api-keys/${id}`, body);
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect((await json(res)).name).toBe(name);
    }
    const res = await api(other.token, "PATCH", `/api-keys/${id}`, { name: "stolen" });
    expect(res.status).toBe(404);
    expect((await json(res)).name).toBe("not_found");
    const row = await env.DB.prepare("SELECT name FROM api_keys WHERE id = ?").bind(id).first<{ name: string }>();
    expect(row!.name).toBe("keep");
  });
});

describe("update bodies carrying the path's id", () => {
  it("PATCH /domains/{id} and /webhooks/{id} accept the id (and webhook_id) equal to the path's, refuse another", async () => {
    const dom = await api(acct.token, "PATCH", `/domains/${acct.domainId}`, { id: acct.domainId, open_tracking: true });
    expect(dom.status).toBe(200);
    expect((await json(dom)).open_tracking).toBe(true);
    const wrong = await api(acct.token, "PATCH", `/domains/${acct.domainId}`, { id: crypto.randomUUID(), open_tracking: false });
    expect(wrong.status).toBe(422);
    expect((await json(wrong)).message).toContain("`id` must be the id in the path");

    const hook = await json<{ id: string }>(await api(acct.token, "POST", "/webhooks", { endpoint: "https://hooks.example.com/x", events: ["email.sent"] }));
    const upd = await api(acct.token, "PATCH", `/webhooks/${hook.id}`, { webhook_id: hook.id, events: ["email.delivered"] });
    expect(upd.status).toBe(200);
    expect((await json(upd)).events).toEqual(["email.delivered"]);
    expect((await api(acct.token, "PATCH", `/webhooks/${hook.id}`, { id: hook.id, status: "disabled" })).status).toBe(200);
    expect((await api(acct.token, "PATCH", `/webhooks/${hook.id}`, { webhook_id: acct.domainId })).status).toBe(422);
  });
});

interface Entry { object: string; id: string; email: string; origin: string; reason: string; source_id: string | null; created_at: string }

describe("/suppressions by id or address", () => {
  it("GET and DELETE take an id or an address (any case, URL-encoded)", async () => {
    const email = `Get.${crypto.randomUUID().slice(0, 8)}@Example.com`;
    const added = await json<Entry>(await api(acct.token, "POST", "/suppressions", { email }));
    expect(added).toMatchObject({ origin: "manual", reason: "manual", source_id: null });
    const byId = await api(acct.token, "GET", `/suppressions/${added.id}`);
    expect(byId.status).toBe(200);
    expect(await byId.json()).toEqual(added);
    const byEmail = await api(acct.token, "GET", `/suppressions/${encodeURIComponent(email.toUpperCase())}`);
    expect(await byEmail.json()).toEqual(added);
    expect((await api(other.token, "GET", `/suppressions/${added.id}`)).status).toBe(404);
    expect((await api(other.token, "DELETE", `/suppressions/${encodeURIComponent(email)}`)).status).toBe(404);
    const del = await api(acct.token, "DELETE", `/suppressions/${encodeURIComponent(email)}`);
    expect(await del.json()).toEqual({ object: "suppression", id: added.id, deleted: true });
    expect((await api(acct.token, "GET", `/suppressions/${added.id}`)).status).toBe(404);
    expect((await api(acct.token, "DELETE", `/suppressions/${added.id}`)).status).toBe(404);
  });

  it("filters the list by origin", async () => {
    const a = await createAccount();
    await api(a.token, "POST", "/suppressions", { email: "manual@example.com" });
    await env.DB.prepare("INSERT INTO suppressions (id, account_id, email, reason, email_id, created_at) VALUES (?, ?, 'bounced@example.com', 'bounce', NULL, ?)")
      .bind(crypto.randomUUID(), a.accountId, Date.now()).run();
    const only = async (origin: string) => (await json<{ data: Entry[] }>(await api(a.token, "GET", `/suppressions?origin=${origin}`))).data.map((s) => s.email);
    expect(await only("manual")).toEqual(["manual@example.com"]);
    expect(await only("bounce")).toEqual(["bounced@example.com"]);
    expect(await only("complaint")).toEqual([]);
    const bad = await api(a.token, "GET", "/suppressions?origin=spam");
    expect(bad.status).toBe(422);
  });
});

describe("/suppressions/batch", () => {
  it("adds up to 100 at once (existing entries keep theirs) and removes by emails or by ids", async () => {
    const a = await createAccount();
    const first = await json<Entry>(await api(a.token, "POST", "/suppressions", { email: "x0@example.com" }));
    const emails = Array.from({ length: 100 }, (_, i) => `X${i}@example.com`);
    const res = await api(a.token, "POST", "/suppressions/batch/add", { emails });
    expect(res.status).toBe(201);
    const { data } = await json<{ data: { object: string; id: string }[] }>(res);
    expect(data).toHaveLength(100);
    expect(data[0]).toEqual({ object: "suppression", id: first.id });
    expect(new Set(data.map((d) => d.id)).size).toBe(100);
    expect(await countRows("suppressions", a.accountId)).toBe(100);

    const byEmail = await json<{ data: { id: string; deleted: boolean }[] }>(await api(a.token, "POST", "/suppressions/batch/remove", { emails: emails.slice(0, 60) }));
    expect(byEmail.data).toHaveLength(60);
    const byId = await api(a.token, "POST", "/suppressions/batch/remove", { ids: [...data.slice(60).map((d) => d.id), crypto.randomUUID()] });
    expect(byId.status).toBe(200);
    expect((await json<{ data: unknown[] }>(byId)).data).toHaveLength(40);
    expect(await countRows("suppressions", a.accountId)).toBe(0);
  });

  it("validates, changes nothing on refusal, and never touches another account's entries", async () => {
    const a = await createAccount();
    const mine = await json<Entry>(await api(a.token, "POST", "/suppressions", { email: "mine@example.com" }));
    for (const [path, body] of [
      ["add", {}], ["add", { emails: [] }], ["add", { emails: Array.from({ length: 101 }, (_, i) => `y${i}@example.com`) }],
      ["add", { emails: ["ok@example.com", "not an address"] }], ["add", { emails: "a@example.com" }],
      ["remove", {}], ["remove", { emails: ["mine@example.com"], ids: [mine.id] }], ["remove", { ids: ["nope"] }],
      ["remove", { emails: Array.from({ length: 101 }, (_, i) => `y${i}@example.com`) }],
    ] as const) {
      const res = await api(a.token, "POST", `/suppressions/batch/${path}`, body);
      expect(res.status, `${path} ${JSON.stringify(body).slice(0, 60)}`).toBe(422);
    }
    expect(await countRows("suppressions", a.accountId)).toBe(1);
    const theirs = await api(other.token, "POST", "/suppressions/batch/remove", { emails: ["mine@example.com"], });
    expect(await theirs.json()).toEqual({ data: [] });
    const theirsById = await api(other.token, "POST", "/suppressions/batch/remove", { ids: [mine.id] });
    expect(await theirsById.json()).toEqual({ data: [] });
    expect(await countRows("suppressions", a.accountId)).toBe(1);
  });
});
