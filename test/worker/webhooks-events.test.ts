// Real events from their real sources, through the background queue consumers (send and
// webhooks) on the real clock, to a receiver that verifies each delivery with svix and
// standardwebhooks against the live clock.
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { WebhookPayloadSchema } from "../../worker/webhooks/payloads.ts";
import { api, createAccount, type TestAccount } from "./fixtures.ts";
import { createWebhook, deliveriesAt, receiverUrl, setSecrets, type Delivery } from "./webhook-peer.ts";
import { waitFor } from "./wait.ts";

let acct: TestAccount;
let path: string;
beforeAll(async () => {
  acct = await createAccount();
  const target = receiverUrl("real", "events");
  path = target.path;
  const hook = await createWebhook(acct.token, target.url, ["email.sent", "email.delivered", "email.bounced", "domain.created"]);
  await setSecrets("real", path, [hook.signing_secret]);
});

/** Waits for the deliveries whose payload matches, and checks each is signed and well-formed. */
async function arrived(match: (payload: { type: string; data: Record<string, any> }) => boolean, count: number): Promise<{ d: Delivery; payload: { type: string; data: Record<string, any> } }[]> {
  return waitFor(`${count} matching webhook deliveries`, async () => {
    const got = (await deliveriesAt("real", path)).map((d) => ({ d, payload: JSON.parse(d.body) })).filter((x) => match(x.payload));
    if (got.length < count) return undefined;
    for (const { d, payload } of got) {
      expect(d.verified, JSON.stringify(d.verifications)).toBe(true);
      expect(Math.abs(d.timestampSkewSeconds!)).toBeLessThanOrEqual(5);
      expect(WebhookPayloadSchema.safeParse(payload).success).toBe(true);
    }
    return got;
  }, 15_000);
}

async function send(to: string): Promise<string> {
  const res = await api(acct.token, "POST", "/emails", { from: `Acme <news@${acct.domain}>`, to, subject: "Webhook me", text: "hi", tags: [{ name: "flow", value: "webhooks" }] });
  expect(res.status).toBe(200);
  return ((await res.json()) as { id: string }).id;
}

describe("events from real sources arrive signed", () => {
  it("an email to delivered@ gives email.sent and email.delivered with the contract's data", async () => {
    const id = await send("delivered@simulator.tern.test");
    const got = await arrived((p) => p.data.email_id === id, 2);
    expect(got.map((g) => g.payload.type).sort()).toEqual(["email.delivered", "email.sent"]);
    for (const { payload } of got) {
      expect(payload.data).toMatchObject({ email_id: id, from: `Acme <news@${acct.domain}>`, to: ["delivered@simulator.tern.test"], subject: "Webhook me", tags: { flow: "webhooks" } });
      expect(payload.data.message_id).toMatch(/^<.+>$/);
    }
    // Each event has its own webhook-id, and the log shows them delivered.
    expect(new Set(got.map((g) => g.d.headers["webhook-id"])).size).toBe(2);
  });

  it("an email to bounced@ gives email.bounced with the bounce details", async () => {
    const id = await send("bounced@simulator.tern.test");
    const [bounced] = await arrived((p) => p.data.email_id === id && p.type === "email.bounced", 1);
    expect(bounced!.payload.data.bounce).toMatchObject({ type: "Permanent", subType: expect.any(String), diagnosticCode: expect.any(Array) });
  });

  it("creating a domain gives domain.created", async () => {
    const name = `hooks-${crypto.randomUUID().slice(0, 8)}.example.test`;
    const res = await api(acct.token, "POST", "/domains", { name });
    expect(res.status).toBe(201);
    const { id } = (await res.json()) as { id: string };
    const [created] = await arrived((p) => p.type === "domain.created" && p.data.id === id, 1);
    expect(created!.payload.data).toMatchObject({ id, name });
  });

  it("the endpoint's event log shows each delivered, with one attempt", async () => {
    const hooks = (await (await api(acct.token, "GET", "/webhooks")).json()) as { data: { id: string }[] };
    const log = (await (await api(acct.token, "GET", `/webhooks/${hooks.data[0]!.id}/events?limit=100`)).json()) as { data: { status: string; attempts: number; type: string }[] };
    expect(log.data.length).toBeGreaterThanOrEqual(4);
    expect(log.data.every((e) => e.status === "delivered" && e.attempts === 1)).toBe(true);
  });
});

describe("events no endpoint subscribes to", () => {
  it("are not written to the outbox, and an endpoint hears what happens from its creation on", async () => {
    const quiet = await createAccount();
    const sendFrom = async (to: string) => {
      const res = await api(quiet.token, "POST", "/emails", { from: `Acme <news@${quiet.domain}>`, to, subject: "Nobody listens", text: "hi" });
      expect(res.status).toBe(200);
      return ((await res.json()) as { id: string }).id;
    };
    const events = (emailId: string) => env.DB.prepare("SELECT type, fanned_out_at AS fannedOutAt, created_at AS createdAt FROM webhook_events WHERE account_id = ? AND json_extract(payload_json, '$.data.email_id') = ?")
      .bind(quiet.accountId, emailId).all<{ type: string; fannedOutAt: number | null; createdAt: number }>();
    const before = await sendFrom("delivered@simulator.tern.test");
    const settled = await waitFor("the unheard email delivered", async () => {
      const res = await api(quiet.token, "GET", `/emails/${before}`);
      const email = (await res.json()) as { last_event: string };
      return email.last_event === "delivered" ? email : undefined;
    }, 15_000);
    // The email's own record has every event; the outbox, which only endpoints read, has none.
    expect(settled.last_event).toBe("delivered");
    expect((await events(before)).results).toEqual([]);

    const target = receiverUrl("real", "from-creation");
    const hook = await createWebhook(quiet.token, target.url, ["email.sent", "email.delivered"]);
    await setSecrets("real", target.path, [hook.signing_secret]);
    const after = await sendFrom("delivered@simulator.tern.test");
    const got = await waitFor("the heard email's deliveries", async () => {
      const list = (await deliveriesAt("real", target.path)).map((d) => JSON.parse(d.body) as { type: string; data: { email_id: string } });
      return list.filter((p) => p.data.email_id === after).length === 2 ? list : undefined;
    }, 15_000);
    expect(got.filter((p) => p.data.email_id === before)).toEqual([]);
    const heard = (await events(after)).results;
    expect(heard.map((e) => e.type).sort()).toEqual(["email.delivered", "email.sent"]);
    for (const e of heard) expect(e.fannedOutAt).not.toBeNull();
  });
});
