// End to end through `wrangler dev` as `npm start` runs it: a webhook on a loopback receiver
// (dev mode allows http and loopback targets) gets email.sent and email.delivered for a real
// send through the dev relay, signed so both svix and standardwebhooks verify it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTern, type TernProcess } from "../support/processes.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.ts";

let tern: TernProcess;
let receiver: WebhookReceiver;

beforeAll(async () => {
  receiver = await startWebhookReceiver({ timestamps: "real" });
  // Retries of 1 s, 1 s: an email that cannot go out fails within seconds (email.failed).
  tern = await startTern({ env: { TERN_RETRY_SCHEDULE: "1,1", TERN_DEV_RATE_LIMIT: "1000" } });
}, 120_000);

afterAll(async () => {
  await receiver?.close();
  const code = await tern?.stop();
  expect(code).toBe(0);
});

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${tern.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${tern.apiKey}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

describe("webhooks through wrangler dev", () => {
  it("a real send gives email.sent and email.delivered at a loopback receiver, verified by svix and standardwebhooks", async () => {
    const created = await call("POST", "/webhooks", { endpoint: receiver.url("/e2e"), events: ["email.sent", "email.delivered"] });
    expect(created.status).toBe(201);
    receiver.setSecrets([created.json.signing_secret], "/e2e");

    const sent = await call("POST", "/emails", { from: `Tern <hello@${tern.domain}>`, to: "webhooks-e2e@example.com", subject: "Hook", text: "hi" });
    expect(sent.status).toBe(200);
    const emailId = sent.json.id as string;

    const deliveries = await receiver.waitForDeliveries(2, { path: "/e2e", timeoutMs: 30_000 });
    const payloads = deliveries.map((d) => JSON.parse(d.body) as { type: string; data: { email_id: string } });
    expect(payloads.map((p) => p.type).sort()).toEqual(["email.delivered", "email.sent"]);
    expect(payloads.every((p) => p.data.email_id === emailId)).toBe(true);
    for (const d of deliveries) {
      expect(d.verified, JSON.stringify(d.verifications)).toBe(true);
      expect(d.headers["webhook-id"]).toBe(d.headers["svix-id"]);
    }

    // The event log says the same, once tern has recorded the receiver's answers (it writes an
    // attempt's result after the answer arrives, so the receiver can see a delivery first).
    await expect
      .poll(async () => (await call("GET", `/webhooks/${created.json.id}/events`)).json.data.map((e: { status: string }) => e.status), { timeout: 15_000, interval: 200 })
      .toEqual(["delivered", "delivered"]);
  });
});

describe("every event kind of contract section 6, from its real source, through wrangler dev", () => {
  it("arrives at one endpoint subscribed to all of them, each signed for svix and standardwebhooks", async () => {
    const all = [
      "email.sent", "email.delivered", "email.delivery_delayed", "email.bounced", "email.complained", "email.opened",
      "email.clicked", "email.failed", "email.scheduled", "email.suppressed", "email.received",
      "contact.created", "contact.updated", "contact.deleted", "domain.created", "domain.updated", "domain.deleted",
    ];
    const hook = await call("POST", "/webhooks", { endpoint: receiver.url("/all"), events: all });
    expect(hook.status).toBe(201);
    receiver.setSecrets([hook.json.signing_secret], "/all");
    const devDomain = ((await call("GET", "/domains")).json.data as { id: string; name: string }[]).find((d) => d.name === tern.domain)!;
    const send = async (body: Record<string, unknown>) => {
      const r = await call("POST", "/emails", { from: `Tern <hello@${tern.domain}>`, subject: "every event", text: "hi", ...body });
      expect(r.status, JSON.stringify(r.json)).toBe(200);
      return r.json.id as string;
    };
    const unique = (local: string) => `${local}-${crypto.randomUUID().slice(0, 8)}@example.com`;

    // Domains and contacts: their APIs.
    const domain = await call("POST", "/domains", { name: `every-${crypto.randomUUID().slice(0, 8)}.example.com` });
    await call("PATCH", `/domains/${domain.json.id}`, { click_tracking: true });
    await call("DELETE", `/domains/${domain.json.id}`);
    const contact = await call("POST", "/contacts", { email: unique("contact") });
    await call("PATCH", `/contacts/${contact.json.id}`, { unsubscribed: true });
    await call("DELETE", `/contacts/${contact.json.id}`);

    // Sending: the relay's answer, its later reports (DSN, ARF), the suppression list, a schedule.
    await send({ to: unique("ok") });
    const bounceAddress = unique("bounce");
    await send({ to: bounceAddress });
    await send({ to: unique("delay") });
    await send({ to: unique("complain") });
    await send({ to: unique("later"), scheduled_at: "in 1 hour" });
    const types = () => new Set(receiver.deliveries("/all").map((d) => JSON.parse(d.body).type as string));
    const until = async (what: string, ok: () => boolean, ms: number) => {
      const deadline = Date.now() + ms;
      while (!ok()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; got ${[...types()].sort().join(", ")}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    await until("email.bounced", () => types().has("email.bounced"), 30_000);
    await new Promise((r) => setTimeout(r, 500));
    await send({ to: bounceAddress }); // now on the suppression list

    // Opens and clicks: the pixel and the rewritten link in the message the relay received.
    await call("PATCH", `/domains/${devDomain.id}`, { open_tracking: true, click_tracking: true });
    const tracked = unique("reader");
    await send({ to: tracked, html: '<p>Read <a href="https://example.com/article?id=7&amp;x=1">this</a></p>' });
    const list = await (await fetch(`${tern.relayHttp}/api/messages?to=${encodeURIComponent(tracked)}&wait=30000`)).json() as { data: { id: string }[] };
    const raw = await (await fetch(`${tern.relayHttp}/api/messages/${list.data[0]!.id}/raw`)).text();
    const unfolded = raw.replace(/=\r\n/g, "").replace(/=3D/g, "=");
    const pixel = unfolded.match(/https?:\/\/[^"'\s>]+\/t\/o\/[A-Za-z0-9_-]+/)![0];
    const click = unfolded.match(/https?:\/\/[^"'\s>]+\/t\/c\/[A-Za-z0-9_-]+/)![0];
    expect((await fetch(pixel)).status).toBe(200);
    const redirect = await fetch(click, { redirect: "manual" });
    expect(redirect.status).toBe(302);
    expect(redirect.headers.get("location")).toBe("https://example.com/article?id=7&x=1");

    // Inbound: the dev domain receives, and a message arrives through the local email trigger.
    await call("PATCH", `/domains/${devDomain.id}`, { receiving: true, open_tracking: false, click_tracking: false });
    const inbound = ["From: Alice <alice@sender.example>", `To: hello@${tern.domain}`, "Subject: every event inbound", `Message-ID: <${crypto.randomUUID()}@sender.example>`, "", "hi", ""].join("\r\n");
    const received = await fetch(`${tern.url}/cdn-cgi/local/email?from=alice@sender.example&to=hello@${tern.domain}`, { method: "POST", body: inbound });
    expect(received.ok, await received.clone().text()).toBe(true);

    // Failed: with TLS enforced the plain dev relay is never used; the retries (1 s, 1 s) run out.
    await call("PATCH", `/domains/${devDomain.id}`, { tls: "enforced" });
    await new Promise((r) => setTimeout(r, 10_500)); // the consumer's per-domain cache (10 s)
    await send({ to: unique("never") });

    try {
      await until("every event kind", () => all.every((t) => types().has(t)), 60_000);
    } finally {
      await call("PATCH", `/domains/${devDomain.id}`, { tls: "opportunistic", receiving: false });
    }
    expect([...types()].sort()).toEqual([...all].sort());
    for (const d of receiver.deliveries("/all")) expect(d.verified, JSON.stringify(d.verifications)).toBe(true);
  }, 120_000);
});
