// The simulator end to end through the real queue consumer: outcomes chosen by local part,
// the same events as real mail.
import { beforeAll, describe, expect, it } from "vitest";
import { api, createAccount, type TestAccount } from "./fixtures.ts";
import { waitFor } from "./wait.ts";

let acct: TestAccount;
beforeAll(async () => {
  acct = await createAccount();
});

async function send(to: string | string[]) {
  const res = await api(acct.token, "POST", "/emails", { from: `Sim <sim@${acct.domain}>`, to, subject: "Simulated", text: "hello" });
  expect(res.status).toBe(200);
  return ((await res.json()) as { id: string }).id;
}

async function settled(id: string, lastEvent: string) {
  return waitFor(`${id} to reach ${lastEvent}`, async () => {
    const email = (await (await api(acct.token, "GET", `/emails/${id}`)).json()) as { last_event: string };
    return email.last_event === lastEvent ? email : undefined;
  });
}

async function eventTypes(id: string) {
  const events = (await (await api(acct.token, "GET", `/emails/${id}/events`)).json()) as { data: { type: string; data: Record<string, unknown> }[] };
  return events.data;
}

describe("simulator addresses", () => {
  it("delivered@ is sent and delivered", async () => {
    const id = await send("delivered@simulator.tern.test");
    await settled(id, "delivered");
    expect((await eventTypes(id)).map((e) => e.type)).toEqual(["queued", "sent", "delivered"]);
  });
  it("bounced+label@ bounces permanently", async () => {
    const id = await send("bounced+signup@simulator.tern.test");
    await settled(id, "bounced");
    const events = await eventTypes(id);
    expect(events.map((e) => e.type)).toEqual(["queued", "bounced"]);
    expect(events[1]!.data.bounce).toMatchObject({ type: "Permanent", subType: "NoEmail" });
  });
  it("complained@ is delivered then complained", async () => {
    const id = await send("complained@simulator.tern.test");
    await settled(id, "complained");
    expect((await eventTypes(id)).map((e) => e.type)).toEqual(["queued", "sent", "delivered", "complained"]);
  });
  it("delayed@ is delayed, retried by the queue, then delivered", async () => {
    const id = await send("delayed@simulator.tern.test");
    await settled(id, "delivered");
    expect((await eventTypes(id)).map((e) => e.type)).toEqual(["queued", "delivery_delayed", "sent", "delivered"]);
  });
  it("resend.dev test addresses are simulated too", async () => {
    const id = await send("delivered@resend.dev");
    await settled(id, "delivered");
  });
});
