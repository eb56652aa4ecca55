// Hints for events written through drizzle's outboxInsert: only the ones an enabled endpoint of
// their account hears (worker/events/outbox.ts, announceHeard and outboxWritten).
import { env } from "cloudflare:workers";
import { expect, it } from "vitest";
import { createContact } from "../../worker/contacts/contacts.ts";
import { announceHeard, outboxEvent, type OutboxEvent } from "../../worker/events/outbox.ts";
import { loadEmail, recordClick, recordOpen } from "../../worker/tracking/record.ts";
import { api, createAccount, listen } from "./fixtures.ts";

function queueCounting(sent: unknown[]): Queue {
  return { send: async (b: unknown) => void sent.push(b), sendBatch: async (m: Iterable<MessageSendRequest>) => void sent.push(...[...m].map((x) => x.body)) } as unknown as Queue;
}

const event = (accountId: string, type: "contact.created" | "contact.deleted"): OutboxEvent =>
  outboxEvent(accountId, { type, created_at: new Date().toISOString() }, Date.now());

it("hints only the events an enabled endpoint of their account hears", async () => {
  const quiet = await createAccount();
  const heard = await createAccount();
  await listen(heard);
  const events = [event(quiet.accountId, "contact.created"), event(heard.accountId, "contact.created"), event(heard.accountId, "contact.deleted"), event(quiet.accountId, "contact.deleted")];
  const sent: unknown[] = [];
  await announceHeard({ DB: env.DB, WEBHOOK_QUEUE: queueCounting(sent) }, events);
  expect(sent).toEqual([{ kind: "event", eventId: events[1]!.id }, { kind: "event", eventId: events[2]!.id }]);
  // An account without endpoints: nothing at all.
  sent.length = 0;
  await announceHeard({ DB: env.DB, WEBHOOK_QUEUE: queueCounting(sent) }, [event(quiet.accountId, "contact.created")]);
  expect(sent).toEqual([]);
});

it("hints every event when the subscriptions cannot be read (the consumer skips what was not written)", async () => {
  const a = await createAccount();
  const events = [event(a.accountId, "contact.created")];
  const sent: unknown[] = [];
  const broken = { prepare: () => { throw new Error("D1 is down"); } } as unknown as D1Database;
  await announceHeard({ DB: broken, WEBHOOK_QUEUE: queueCounting(sent) }, events);
  expect(sent).toEqual([{ kind: "event", eventId: events[0]!.id }]);
});

it("an open, a click or a contact change is hinted only when an endpoint hears it", async () => {
  const quiet = await createAccount();
  const heard = await createAccount();
  await listen(heard);
  const sent: unknown[] = [];
  const counting = { DB: env.DB, WEBHOOK_QUEUE: queueCounting(sent) };
  for (const a of [quiet, heard]) {
    const res = await api(a.token, "POST", "/emails", { from: `m@${a.domain}`, to: "delivered@simulator.tern.test", subject: "s", html: "<p>hi</p>" });
    expect(res.status).toBe(200);
    const email = (await loadEmail(env.DB, ((await res.json()) as { id: string }).id))!;
    const visitor = { ipAddress: "203.0.113.7", userAgent: "test" };
    expect(await recordOpen(counting, email, visitor)).toBe(true);
    expect(await recordClick(counting, email, 0, "https://example.com/", visitor)).toBe(true);
    await createContact(counting, a.accountId, { email: `c-${crypto.randomUUID()}@example.com` });
  }
  // Three hints, all of the listening account's events (each is in its outbox).
  expect(sent).toHaveLength(3);
  const ids = (sent as { eventId: string }[]).map((m) => m.eventId);
  const rows = await env.DB.prepare(`SELECT account_id FROM webhook_events WHERE id IN (${ids.map(() => "?").join(", ")})`).bind(...ids).all<{ account_id: string }>();
  expect(rows.results.map((r) => r.account_id)).toEqual([heard.accountId, heard.accountId, heard.accountId]);
});
