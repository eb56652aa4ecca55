// Mail that comes back, end to end through `wrangler dev`: the dev relay answers some
// recipients with real delivery reports (a Postfix-style DSN, an ARF complaint) sent to the
// email's return path through wrangler dev's local email trigger, and the Worker's email()
// handler turns them into the email's events. Inbound mail for the dev domain, once it
// receives, arrives the same way and is readable through the API.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTern, type TernProcess } from "../support/processes.ts";

let tern: TernProcess;

beforeAll(async () => {
  tern = await startTern();
}, 120_000);

afterAll(async () => {
  expect(await tern?.stop()).toBe(0);
});

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${tern.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${tern.apiKey}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

async function waitForEvent(id: string, type: string): Promise<any> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const events = (await api("GET", `/emails/${id}/events`)).json.data as { type: string; data: any }[];
    const found = events.find((e) => e.type === type && e.data?.source === "report");
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`no ${type} for ${id}: ${JSON.stringify(events)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe("reports from the dev relay, through wrangler dev's email trigger", () => {
  it.each([
    ["bounce", "bounced", { bounce: { type: "Permanent", subType: "NoEmail" } }],
    ["mailbox-full", "bounced", { bounce: { type: "Transient", subType: "MailboxFull" } }],
    ["delay", "delivery_delayed", {}],
    ["complain", "complained", { complaint: { feedbackType: "abuse" } }],
  ])("%s@ gives %s", async (local, type, data) => {
    const to = `${local}-${crypto.randomUUID().slice(0, 8)}@example.com`;
    const sent = await api("POST", "/emails", { from: `Dev <dev@${tern.domain}>`, to, subject: `report ${local}`, text: "hi" });
    expect(sent.status).toBe(200);
    const event = await waitForEvent(sent.json.id, type);
    expect(event.data).toMatchObject({ recipients: [to], ...data });
    expect((await api("GET", `/emails/${sent.json.id}`)).json.last_event).toBe(type);
  });
});

describe("inbound mail through wrangler dev's email trigger", () => {
  it("is refused for a domain that does not receive, then stored once receiving is on", async () => {
    const raw = ["From: Alice <alice@sender.example>", `To: hello@${tern.domain}`, "Subject: Inbound hello", "Message-ID: <in-e2e@sender.example>", "Content-Type: text/plain", "", "Hello tern", ""].join("\r\n");
    const trigger = () => fetch(`${tern.url}/cdn-cgi/local/email?from=alice@sender.example&to=hello@${tern.domain}`, { method: "POST", body: raw });
    const refused = await trigger();
    expect(refused.ok).toBe(false);

    const domains = (await api("GET", "/domains")).json.data as { id: string; name: string }[];
    const dev = domains.find((d) => d.name === tern.domain)!;
    const patched = await api("PATCH", `/domains/${dev.id}`, { receiving: true });
    expect(patched.status).toBe(200);
    expect(patched.json.status).toBe("verified");
    expect((await trigger()).ok).toBe(true);

    const list = (await api("GET", "/emails/receiving")).json.data as { id: string; subject: string }[];
    const got = list.find((m) => m.subject === "Inbound hello")!;
    const detail = (await api("GET", `/emails/receiving/${got.id}`)).json;
    expect(detail).toMatchObject({ from: "Alice <alice@sender.example>", text: "Hello tern\n", message_id: "in-e2e@sender.example" });
    const download = await fetch(detail.raw.download_url);
    expect(await download.text()).toBe(raw);
  });
});
