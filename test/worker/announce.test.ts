// Hints for events written through drizzle's outboxInsert: only the ones an enabled endpoint of
// their account hears (worker/events/outbox.ts, announceHeard).
import { env } from "cloudflare:workers";
import { expect, it } from "vitest";
import { announceHeard, outboxEvent, type OutboxEvent } from "../../worker/events/outbox.ts";
import { createAccount, listen } from "./fixtures.ts";

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
