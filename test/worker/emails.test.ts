// Sending and reading emails: what is stored, what GET shows, batches, scheduling and the cron.
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { readConfig } from "../../worker/config.ts";
import { sweepDelivery } from "../../worker/delivery/cron.ts";
import { api, countRows, createAccount, type TestAccount } from "./fixtures.ts";
import { waitFor } from "./wait.ts";

let acct: TestAccount;
beforeAll(async () => {
  acct = await createAccount();
});

interface EmailJson {
  object: string; id: string; from: string; to: string[]; cc: string[] | null; bcc: string[] | null; reply_to: string[] | null;
  subject: string; html: string | null; text: string | null; created_at: string; scheduled_at: string | null; last_event: string;
  tags: { name: string; value: string }[];
}

const sim = (l = "delivered") => `${l}@simulator.tern.test`;

async function post(body: unknown, headers: Record<string, string> = {}) {
  return api(acct.token, "POST", "/emails", body, headers);
}
async function get(id: string): Promise<EmailJson> {
  return (await (await api(acct.token, "GET", `/emails/${id}`)).json()) as EmailJson;
}

describe("POST /emails and GET /emails/{id}", () => {
  it("records every field and answers 200 with a UUID", async () => {
    const res = await post({
      from: `Acme <hello@${acct.domain}>`, to: [sim()], cc: sim("delivered+cc"), bcc: [sim("delivered+bcc")],
      reply_to: "support@acme.test", subject: "Grüße 👋", html: "<p>Hello <b>world</b></p>",
      tags: [{ name: "category", value: "welcome" }], headers: { "X-Entity-Ref-ID": "42" },
    });
    expect(res.status).toBe(200);
    const { id } = (await res.json()) as { id: string };
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const email = await get(id);
    expect(email).toMatchObject({
      object: "email", id, from: `Acme <hello@${acct.domain}>`, to: [sim()], cc: [sim("delivered+cc")], bcc: [sim("delivered+bcc")],
      reply_to: ["support@acme.test"], subject: "Grüße 👋", html: "<p>Hello <b>world</b></p>", scheduled_at: null,
      tags: [{ name: "category", value: "welcome" }],
    });
    expect(email.text).toMatch(/Hello.*world/i); // derived from html
    expect(new Date(email.created_at).toISOString()).toBe(email.created_at);
  });

  it("text: \"\" opts out of the derived text part", async () => {
    const { id } = (await (await post({ from: `a@${acct.domain}`, to: sim(), subject: "s", html: "<p>x</p>", text: "" })).json()) as { id: string };
    expect((await get(id)).text).toBeNull();
  });

  it("keeps large bodies in R2, not in the D1 row, and still shows them", async () => {
    const html = `<p>${"lorem ipsum ".repeat(20_000)}</p>`;
    const { id } = (await (await post({ from: `a@${acct.domain}`, to: sim(), subject: "big", html })).json()) as { id: string };
    const row = await env.DB.prepare("SELECT html, content_key FROM emails WHERE id = ?").bind(id).first<{ html: string | null; content_key: string }>();
    expect(row!.html).toBeNull();
    expect(await env.BLOBS.head(row!.content_key)).not.toBeNull();
    expect((await get(id)).html).toBe(html);
  });

  it("stores attachments in R2 in all three content shapes and aliases", async () => {
    const bytes = [0, 1, 2, 254, 255];
    const res = await post({
      from: `a@${acct.domain}`, to: sim(), subject: "files", html: '<img src="cid:logo">',
      attachments: [
        { filename: "a.bin", content: btoa(String.fromCharCode(...bytes)) },
        { filename: "b.bin", content: bytes, contentType: "application/x-custom" },
        { filename: "logo.png", content: { type: "Buffer", data: bytes }, inline_content_id: "logo" },
      ],
    });
    expect(res.status).toBe(200);
    const { id } = (await res.json()) as { id: string };
    const row = await env.DB.prepare("SELECT attachments_json FROM emails WHERE id = ?").bind(id).first<{ attachments_json: string }>();
    const meta = JSON.parse(row!.attachments_json) as { key: string; content_type: string; content_id: string | null; size: number }[];
    expect(meta.map((m) => [m.content_type, m.content_id, m.size])).toEqual([
      ["application/octet-stream", null, 5], ["application/x-custom", null, 5], ["image/png", "logo", 5],
    ]);
    for (const m of meta) expect([...new Uint8Array(await (await env.BLOBS.get(m.key))!.arrayBuffer())]).toEqual(bytes);
  });

  it("lists emails newest first without bodies, with cursor pagination", async () => {
    const a = await createAccount();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await api(a.token, "POST", "/emails", { from: `a@${a.domain}`, to: sim(), subject: `n${i}`, text: "t" });
      ids.push(((await r.json()) as { id: string }).id);
    }
    const page = (await (await api(a.token, "GET", "/emails?limit=2")).json()) as { object: string; has_more: boolean; data: Record<string, unknown>[] };
    expect(page.object).toBe("list");
    expect(page.has_more).toBe(true);
    expect(page.data.map((e) => e.subject)).toEqual(["n2", "n1"]);
    expect(page.data[0]).not.toHaveProperty("html");
    expect(page.data[0]).not.toHaveProperty("text");
    const rest = (await (await api(a.token, "GET", `/emails?after=${ids[1]}`)).json()) as typeof page;
    expect(rest.data.map((e) => e.id)).toEqual([ids[0]]);
    expect(rest.has_more).toBe(false);
  });
});

describe("POST /emails/batch", () => {
  it("strict: accepts all and answers ids in request order", async () => {
    const res = await api(acct.token, "POST", "/emails/batch", [1, 2, 3].map((i) => ({ from: `a@${acct.domain}`, to: sim(), subject: `b${i}`, text: "t" })));
    expect(res.status).toBe(200);
    const body = (await res.json()) as { data: { id: string }[] };
    expect(body).not.toHaveProperty("errors");
    expect((await Promise.all(body.data.map((d) => get(d.id)))).map((e) => e.subject)).toEqual(["b1", "b2", "b3"]);
  });
  it("permissive: accepts the valid items and lists the errors of the others", async () => {
    const a = await createAccount();
    const items = [
      { from: `a@${a.domain}`, to: sim(), subject: "ok1", text: "t" },
      { from: `a@${a.domain}`, to: "bad", subject: "no", text: "t" },
      { from: "a@unverified.test", to: sim(), subject: "no", text: "t" },
      { from: `a@${a.domain}`, to: sim(), subject: "ok2", text: "t" },
    ];
    const res = await api(a.token, "POST", "/emails/batch", items, { "x-batch-validation": "permissive" });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { data: { id: string }[]; errors: { index: number; message: string }[] };
    expect(body.data).toHaveLength(2);
    expect(body.errors.map((e) => e.index)).toEqual([1, 2]);
    expect(body.errors[0]!.message).toMatch(/`\[1\]\.to`/);
    expect(body.errors[1]!.message).toMatch(/unverified\.test/);
    expect(await countRows("emails", a.accountId)).toBe(2);
  });
});

describe("scheduled emails", () => {
  it("accepts natural language, shows scheduled, and the cron sends it when due", async () => {
    const res = await post({ from: `a@${acct.domain}`, to: sim(), subject: "later", text: "t", scheduled_at: "in 1 min" });
    const { id } = (await res.json()) as { id: string };
    const email = await get(id);
    expect(email.last_event).toBe("scheduled");
    const at = new Date(email.scheduled_at!).getTime();
    expect(Math.abs(at - (Date.now() + 60_000))).toBeLessThan(5_000);
    await sweepDelivery(env, Date.now());
    expect((await get(id)).last_event).toBe("scheduled"); // not due yet
    // The minute passes.
    await env.DB.prepare("UPDATE emails SET next_attempt_at = ? WHERE id = ?").bind(Date.now() - 1, id).run();
    expect((await sweepDelivery(env)).scheduled).toBeGreaterThanOrEqual(1);
    await waitFor("the scheduled email to be delivered", async () => ((await get(id)).last_event === "delivered" ? true : undefined));
  });
  it("can be rescheduled, and a canceled one is never sent nor rescheduled", async () => {
    const { id } = (await (await post({ from: `a@${acct.domain}`, to: sim(), subject: "s", text: "t", scheduled_at: "in 2 hours" })).json()) as { id: string };
    const patch = await api(acct.token, "PATCH", `/emails/${id}`, { scheduled_at: "in 3 hours" });
    expect(patch.status).toBe(200);
    expect(await patch.json()).toEqual({ object: "email", id });
    const at = new Date((await get(id)).scheduled_at!).getTime();
    expect(Math.abs(at - (Date.now() + 3 * 3600_000))).toBeLessThan(5_000);
    const cancel = await api(acct.token, "POST", `/emails/${id}/cancel`);
    expect(cancel.status).toBe(200);
    expect((await get(id)).last_event).toBe("canceled");
    await sweepDelivery(env, at + 1);
    await new Promise((r) => setTimeout(r, 1500));
    expect((await get(id)).last_event).toBe("canceled");
    const again = await api(acct.token, "PATCH", `/emails/${id}`, { scheduled_at: "in 1 hour" });
    expect(again.status).toBe(422);
    expect(((await again.json()) as { message: string }).message).toMatch(/canceled/);
  });
  it("an email that is not scheduled cannot be canceled", async () => {
    const { id } = (await (await post({ from: `a@${acct.domain}`, to: sim(), subject: "s", text: "t" })).json()) as { id: string };
    const res = await api(acct.token, "POST", `/emails/${id}/cancel`);
    expect(res.status).toBe(422);
  });
});

describe("the cron's safety net", () => {
  it("sends an email left in queued by a crash between recording and enqueueing", async () => {
    const { id } = (await (await post({ from: `a@${acct.domain}`, to: sim(), subject: "s", text: "t", scheduled_at: "in 1 hour" })).json()) as { id: string };
    // As if the queue message was lost: queued, due long ago, never enqueued.
    const past = Date.now() - readConfig(env).stuckAfterMs - 1000;
    await env.DB.prepare("UPDATE emails SET state = 'queued', next_attempt_at = ? WHERE id = ?").bind(past, id).run();
    const swept = await sweepDelivery(env);
    expect(swept.stuck).toBeGreaterThanOrEqual(1);
    await waitFor("the stuck email to be delivered", async () => ((await get(id)).last_event === "delivered" ? true : undefined));
  });
  it("hands back an email whose consumer died mid-send once its lease expires", async () => {
    const { id } = (await (await post({ from: `a@${acct.domain}`, to: sim(), subject: "s", text: "t", scheduled_at: "in 1 hour" })).json()) as { id: string };
    await env.DB.prepare("UPDATE emails SET state = 'sending', lease_until = ? WHERE id = ?").bind(Date.now() + 60_000, id).run();
    expect((await sweepDelivery(env)).leasesExpired).toBe(0);
    await env.DB.prepare("UPDATE emails SET lease_until = ? WHERE id = ?").bind(Date.now() - 1, id).run();
    const swept = await sweepDelivery(env);
    expect(swept.leasesExpired).toBe(1);
    await waitFor("the handed-back email to be delivered", async () => ((await get(id)).last_event === "delivered" ? true : undefined));
  });
});
