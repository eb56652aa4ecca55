// Fields of Resend's API the client tables found tern missing: a domain's tracking_subdomain and
// capabilities on PATCH /domains/{id}, and a broadcast email's body on GET /emails/{id}.
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { runFanout } from "../../../worker/broadcasts/fanout.ts";
import { call, createAccount, type TestAccount } from "../fixtures.ts";

let acct: TestAccount;
beforeAll(async () => { acct = await createAccount(); });

describe("PATCH /domains/{id}: tracking_subdomain and capabilities", () => {
  it("takes a tracking subdomain label (its Tracking record joins the domain's), null takes it away, a bad one is refused", async () => {
    const created = await call(acct, "POST", "/domains", { name: `f${crypto.randomUUID().slice(0, 8)}.fields.test` });
    const id = created.body.id as string;
    const ok = await call(acct, "PATCH", `/domains/${id}`, { tracking_subdomain: "Links", click_tracking: true });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ click_tracking: true, tracking_subdomain: "links", capabilities: { sending: "enabled", receiving: "disabled" } });
    expect(ok.body.records).toContainEqual({ record: "Tracking", name: "links", type: "CNAME", ttl: "Auto", status: "not_started", value: "tracking.tern.test" });
    const bad = await call(acct, "PATCH", `/domains/${id}`, { tracking_subdomain: "a.b" });
    expect(bad.status).toBe(422);
    expect(bad.body.message).toContain("tracking_subdomain");
    expect((await call(acct, "PATCH", `/domains/${id}`, { tracking_subdomain: 7 })).status).toBe(422);
    const off = await call(acct, "PATCH", `/domains/${id}`, { tracking_subdomain: null });
    expect(off.body.tracking_subdomain).toBeNull();
    expect(off.body.records.some((r: { record: string }) => r.record === "Tracking")).toBe(false);
  });

  it("capabilities.receiving turns receiving on and off; sending cannot be turned off; a disagreement is refused", async () => {
    const on = await call(acct, "PATCH", `/domains/${acct.domainId}`, { capabilities: { receiving: "enabled" } });
    expect(on.status).toBe(200);
    expect(on.body).toMatchObject({ receiving: true, capabilities: { receiving: "enabled" } });
    const list = await call(acct, "GET", "/domains");
    expect(list.body.data.find((d: { id: string }) => d.id === acct.domainId)).toMatchObject({ capabilities: { sending: "enabled", receiving: "enabled" }, open_tracking: false });
    const off = await call(acct, "PATCH", `/domains/${acct.domainId}`, { capabilities: { receiving: "disabled" } });
    expect(off.body).toMatchObject({ receiving: false, capabilities: { receiving: "disabled" } });
    const noSend = await call(acct, "PATCH", `/domains/${acct.domainId}`, { capabilities: { sending: "disabled" } });
    expect(noSend.status).toBe(422);
    expect(noSend.body.message).toContain("capabilities.sending");
    expect((await call(acct, "PATCH", `/domains/${acct.domainId}`, { receiving: true, capabilities: { receiving: "disabled" } })).status).toBe(422);
    expect((await call(acct, "GET", `/domains/${acct.domainId}`)).body.receiving).toBe(false);
  });
});

describe("GET /emails/{id} of a broadcast's email", () => {
  it("answers the broadcast's body rendered for that recipient", async () => {
    const segment = (await call(acct, "POST", "/segments", { name: "readers" })).body;
    const contact = (await call(acct, "POST", "/contacts", { email: "reader@example.com", first_name: "Rosa" })).body;
    await call(acct, "POST", `/contacts/${contact.id}/segments/${segment.id}`);
    const b = await call(acct, "POST", "/broadcasts", {
      segment_id: segment.id, from: `News <news@${acct.domain}>`, subject: "Hello", html: "<p>Hi {{{contact.first_name|friend}}}</p>", text: "Hi {{{contact.first_name|friend}}}", send: true,
    });
    expect(b.status).toBe(201);
    await runFanout(env, b.body.id, { pageSize: 10, maxPages: 2 });
    const row = await env.DB.prepare("SELECT email_id AS id FROM broadcast_recipients WHERE broadcast_id = ?").bind(b.body.id).first<{ id: string }>();
    const got = await call(acct, "GET", `/emails/${row!.id}`);
    expect(got.status).toBe(200);
    expect(got.body.html).toContain("<p>Hi Rosa</p>");
    expect(got.body.text).toContain("Hi Rosa");
    expect(got.body.html).not.toContain("{{{contact.");
  });
});
