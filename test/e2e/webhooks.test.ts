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
  tern = await startTern();
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

    // The event log says the same.
    const log = await call("GET", `/webhooks/${created.json.id}/events`);
    expect(log.json.data.map((e: { status: string }) => e.status)).toEqual(["delivered", "delivered"]);
  });
});
