// The hot paths' statements compiled once (worker/db/compiled.ts) must be the statements
// drizzle builds for the same values: the same SQL text and parameters, the same row written,
// the same answer and the same failure, on D1.
import { env } from "cloudflare:workers";
import { and, asc, eq, gt, inArray, isNull, lte, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { describe, expect, it } from "vitest";
import {
  broadcastProgress, broadcastProgressRows, claimDelivery, claimEmails, insertWebhookAttempt, markDelivered, consumeUsage, emailRows, enabledHookRows, enabledHooks, fanoutPage, fanoutPageRows, insertApiLog, insertBroadcastRecipients,
  insertBroadcastEmails, insertEmail, insertEmailEvent, insertQueuedEvents, insertSettlementEvent, insertWebhookDelivery, insertWebhookEvent, insertWebhookEventIfRecorded, markFannedOut, markInFlight,
  pendingEventRows, pendingEvents, prepared, recordProgress, settleEmail, statementOf, deleteExpiredKey, insertKey,
} from "../../worker/db/compiled.ts";
import { deleteIfExpired, keyRow } from "../../worker/sending/key-claim.ts";
import { unindexed } from "../../worker/db/plan.ts";
import {
  apiLogs, idempotencyKeys, webhookAttempts, broadcastRecipients, broadcasts, contactSegments, contactTopics, contacts, emailEvents, emails, segments, suppressions, topics, usage, webhookDeliveries, webhookEvents, webhooks,
} from "../../worker/db/schema.ts";
import { outboxInsert, outboxInsertIfRecorded, outboxStatement, outboxStatementIfRecorded, eventsToFanOut } from "../../worker/events/outbox.ts";
import { uuidv7 } from "../../worker/ids.ts";
import { isQuotaViolation } from "../../worker/sending/quota.ts";
import { createAccount } from "./fixtures.ts";

const db = drizzle(env.DB);

function emailRow(accountId: string) {
  const now = Date.now();
  return {
    id: uuidv7(now), accountId, fromAddress: "A <a@tern.test>", toJson: '["b@example.com"]', ccJson: "[]", bccJson: '["c@example.com"]',
    replyToJson: "[]", subject: "compiled ✓", html: null, text: "hello\nworld", headersJson: '{"X-A":"1"}', tagsJson: "[]", attachmentsJson: "[]",
    contentKey: null, domainId: null, broadcastId: null, region: "us-east-1", state: "queued", lastEvent: "queued", scheduledAt: null, pendingJson: '["b@example.com"]',
    attempts: 0, nextAttemptAt: now, leaseUntil: null, attemptJson: null, messageId: "<x@tern.test>", createdAt: now,
  };
}

describe("statements compiled once from the drizzle schema", () => {
  it("are drizzle's own SQL for an insert of every column", () => {
    const row = emailRow("acct");
    expect(insertEmail.sql).toBe(db.insert(emails).values(row).toSQL().sql);
    expect(insertEmail.sql).toMatch(/^insert into "emails" \(.*"lease_until".*\) values \((\?, ){26}\?\)$/);
    expect(insertEmailEvent.sql).toBe(db.insert(emailEvents).values({ id: "e", emailId: "m", accountId: "a", type: "queued", dataJson: "{}", createdAt: 1, dedupeKey: null }).toSQL().sql);
    const log = { id: "l", accountId: "a", keyId: null, method: "POST", endpoint: "/emails", status: 200, userAgent: "ua", requestJson: "{}", responseJson: null, createdAt: 1 };
    expect(insertApiLog.query(log)).toEqual(db.insert(apiLogs).values(log).toSQL());
    const claim = { accountId: "a", scope: "POST /emails", key: "k", fingerprint: "f" };
    expect(deleteExpiredKey.query({ ...claim, now: 5 })).toEqual(deleteIfExpired(db, claim, 5).toSQL());
    const keyed = keyRow(claim, { status: 200, body: '{"id":"x"}' }, 5);
    expect(insertKey.query(keyed)).toEqual(db.insert(idempotencyKeys).values(keyed).toSQL());
  });

  it("write exactly the row drizzle writes", async () => {
    const { accountId } = await createAccount();
    const viaDrizzle = emailRow(accountId);
    const compiled = { ...viaDrizzle, id: uuidv7(Date.now() + 1) }; // one row: its timestamps must not differ by a tick
    await db.insert(emails).values(viaDrizzle);
    await env.DB.batch([insertEmail.bind(env.DB, compiled), insertEmailEvent.bind(env.DB, { id: uuidv7(Date.now()), emailId: compiled.id, accountId, type: "queued", dataJson: "{}", createdAt: 7, dedupeKey: null })]);
    const [a] = await db.select().from(emails).where(eq(emails.id, viaDrizzle.id));
    const [b] = await db.select().from(emails).where(eq(emails.id, compiled.id));
    expect({ ...b, id: "" }).toEqual({ ...a, id: "" });
    const [event] = await db.select().from(emailEvents).where(eq(emailEvents.emailId, compiled.id));
    expect(event).toMatchObject({ accountId, type: "queued", dataJson: "{}", createdAt: 7 });
  });

  it("consume usage as drizzle's upsert does: the new total, and the CHECK refuses passing the cap", async () => {
    const { accountId } = await createAccount();
    const first = await consumeUsage.bind(env.DB, { accountId, period: "2099-01", used: 3, cap: 5 }).all<{ used: number }>();
    expect(first.results).toEqual([{ used: 3 }]);
    const second = await env.DB.batch([consumeUsage.bind(env.DB, { accountId, period: "2099-01", used: 2, cap: 5 })]);
    expect(second[0]!.results).toEqual([{ used: 5 }]);
    const over = await env.DB.batch([consumeUsage.bind(env.DB, { accountId, period: "2099-01", used: 1, cap: 5 })]).then(() => null, (e: unknown) => e);
    expect(isQuotaViolation(over)).toBe(true);
    const [row] = await db.select().from(usage).where(and(eq(usage.accountId, accountId), eq(usage.period, "2099-01")));
    expect(row!.used).toBe(5);
    // drizzle's query for the same thing answers the same
    const viaDrizzle = await db.insert(usage).values({ accountId, period: "2099-02", used: 4, cap: 9 })
      .onConflictDoUpdate({ target: [usage.accountId, usage.period], set: { used: sql`${usage.used} + excluded.used`, cap: sql`excluded.cap` } })
      .returning({ used: usage.used });
    const compiled = await consumeUsage.bind(env.DB, { accountId, period: "2099-02", used: 4, cap: 9 }).all<{ used: number }>();
    expect(viaDrizzle).toEqual([{ used: 4 }]);
    expect(compiled.results).toEqual([{ used: 8 }]);
  });

  it("refuses a statement missing a value, and anything that is not a query builder", () => {
    const { leaseUntil: _, ...partial } = emailRow("acct");
    expect(() => insertEmail.bind(env.DB, partial as never)).toThrow(/leaseUntil/);
    expect(() => statementOf(env.DB, {} as never)).toThrow(/not a query builder/);
  });
});

// The delivery consumer's and the webhook fan-out's statements: the SQL and parameters drizzle
// gives the query each stands for (so the guards are the same), in every shape, and the rows
// they answer read as drizzle reads them.
describe("the delivery and fan-out statements compiled once", () => {
  const leaseShapes = [[5], [5, 6], [5, 6, 7]];

  it("settle an email as drizzle's guarded update does, with and without a last event, for each lease arity", () => {
    for (const leases of leaseShapes.slice(0, 2)) {
      for (const lastEvent of ["delivered", null]) {
        for (const [state, nextAttemptAt] of [["done", null], ["queued", 1234]] as const) {
          const viaDrizzle = db.update(emails).set({
            state, attempts: 2, pendingJson: '["x@example.com"]', leaseUntil: null, attemptJson: null, nextAttemptAt,
            ...(lastEvent ? { lastEvent } : {}),
          }).where(and(eq(emails.id, "m1"), eq(emails.state, "sending"), inArray(emails.leaseUntil, leases))).toSQL();
          expect(settleEmail({ id: "m1", state, attempts: 2, pendingJson: '["x@example.com"]', nextAttemptAt, lastEvent, leases })).toEqual(viaDrizzle);
        }
      }
    }
  });

  it("record an attempt's progress and mark a first message in flight as drizzle's updates do", () => {
    for (const leases of leaseShapes) {
      const viaDrizzle = db.update(emails).set({ attemptJson: '{"inFlight":"a"}', leaseUntil: 9 })
        .where(and(eq(emails.id, "m1"), eq(emails.state, "sending"), inArray(emails.leaseUntil, leases))).toSQL();
      expect(recordProgress({ id: "m1", attemptJson: '{"inFlight":"a"}', leaseUntil: 9, leases })).toEqual(viaDrizzle);
    }
    const viaDrizzle = db.update(emails).set({ attemptJson: '{"inFlight":"a"}', leaseUntil: 9 })
      .where(and(eq(emails.id, "m1"), eq(emails.state, "sending"), eq(emails.leaseUntil, 5))).toSQL();
    expect(markInFlight.query({ id: "m1", attemptJson: '{"inFlight":"a"}', leaseUntil: 9, lease: 5 })).toEqual(viaDrizzle);
  });

  it("claim emails as drizzle's claim does: the same statement, and the rows it answers read the same", async () => {
    const t = Date.now();
    const ids = ["a", "b", "c"];
    const claim = (list: string[]) => db.update(emails).set({ state: "sending", leaseUntil: t + 600_000 })
      .where(and(inArray(emails.id, list), eq(unindexed(emails.state), "queued"), lte(unindexed(emails.nextAttemptAt), t + 5_000))).returning();
    expect(claimEmails(ids, { leaseUntil: t + 600_000, due: t + 5_000 })).toEqual(claim(ids).toSQL());
    expect(claimEmails(ids.slice(0, 1), { leaseUntil: t + 600_000, due: t + 5_000 })).toEqual(claim(ids.slice(0, 1)).toSQL());

    const { accountId } = await createAccount();
    const [first, second] = [emailRow(accountId), { ...emailRow(accountId), id: uuidv7(Date.now() + 1) }];
    second.createdAt = first.createdAt;
    second.nextAttemptAt = first.nextAttemptAt;
    await db.insert(emails).values([first, second]);
    const viaDrizzle = await claim([first.id]);
    const compiled = emailRows(await prepared(env.DB, claimEmails([second.id, "missing"], { leaseUntil: t + 600_000, due: t + 5_000 })).raw());
    expect(compiled).toHaveLength(1);
    expect({ ...compiled[0], id: "" }).toEqual({ ...viaDrizzle[0], id: "" });
    expect(compiled[0]).toMatchObject({ id: second.id, state: "sending", leaseUntil: t + 600_000, subject: "compiled ✓", html: null });
    // A claimed email is not claimed again.
    expect(await prepared(env.DB, claimEmails([second.id], { leaseUntil: t + 600_000, due: t + 5_000 })).raw()).toEqual([]);
  });

  it("settle only an email still sending under one of the leases given", async () => {
    const { accountId } = await createAccount();
    const row = { ...emailRow(accountId), state: "sending", leaseUntil: 77 };
    await db.insert(emails).values(row);
    const settle = (leases: number[]) => prepared(env.DB, settleEmail({ id: row.id, state: "done", attempts: 1, pendingJson: "[]", nextAttemptAt: null, lastEvent: "delivered", leases }));
    expect((await settle([76]).run()).meta.changes).toBe(0);
    expect((await env.DB.batch([settle([70, 77])]))[0]!.meta.changes).toBe(1);
    const [after] = await db.select().from(emails).where(eq(emails.id, row.id));
    expect(after).toMatchObject({ state: "done", attempts: 1, pendingJson: "[]", leaseUntil: null, attemptJson: null, nextAttemptAt: null, lastEvent: "delivered" });
    expect((await settle([77]).run()).meta.changes).toBe(0);
  });

  it("write a settlement's events as drizzle's guarded insert does, only while the settlement's guard holds", async () => {
    const guarded = (leases: number[], v: { id: string; emailId: string; type: string; dataJson: string; createdAt: number }) => db.insert(emailEvents).select(db.select({
      id: sql`${v.id}`.as("id"), emailId: sql`${emails.id}`.as("email_id"), accountId: sql`${emails.accountId}`.as("account_id"), type: sql`${v.type}`.as("type"),
      dataJson: sql`${v.dataJson}`.as("data_json"), createdAt: sql`${v.createdAt}`.as("created_at"), dedupeKey: sql`null`.as("dedupe_key"),
    }).from(emails).where(and(eq(emails.id, v.emailId), eq(emails.state, "sending"), inArray(emails.leaseUntil, leases))));
    const v = { id: "e1", emailId: "m1", type: "delivered", dataJson: '{"recipients":["x@example.com"]}', createdAt: 9 };
    for (const leases of leaseShapes) expect(insertSettlementEvent({ ...v, leases })).toEqual(guarded(leases, v).toSQL());

    // The row insertEmailEvent writes for the same event, while the email is sending under a
    // lease given; none otherwise.
    const { accountId } = await createAccount();
    const row = { ...emailRow(accountId), state: "sending", leaseUntil: 77 };
    await db.insert(emails).values(row);
    const event = (id: string, leases: number[]) => prepared(env.DB, insertSettlementEvent({ ...v, id, emailId: row.id, leases }));
    const [held, plain] = [uuidv7(Date.now()), uuidv7(Date.now() + 1)];
    const results = await env.DB.batch([event(uuidv7(Date.now() + 2), [76]), event(held, [70, 77]), insertEmailEvent.bind(env.DB, { ...v, id: plain, emailId: row.id, accountId, dedupeKey: null })]);
    expect(results.map((r) => r.meta.changes)).toEqual([0, 1, 1]);
    const rows = await db.select().from(emailEvents).where(eq(emailEvents.emailId, row.id)).orderBy(emailEvents.id);
    expect(rows.map((r) => ({ ...r, id: "" }))).toEqual([{ ...rows[1], id: "" }, { ...rows[1], id: "" }]);
    expect(rows.map((r) => r.id)).toEqual([held, plain]);
    expect(rows[0]).toMatchObject({ emailId: row.id, accountId, type: "delivered", dataJson: v.dataJson, createdAt: 9, dedupeKey: null });
    await prepared(env.DB, settleEmail({ id: row.id, state: "done", attempts: 1, pendingJson: "[]", nextAttemptAt: null, lastEvent: "delivered", leases: [77] })).run();
    expect((await event(uuidv7(Date.now() + 3), [77]).run()).meta.changes).toBe(0);
  });

  it("write an outbox row for an email event as drizzle's outboxInsertIfRecorded does, only if the event is there", async () => {
    const { accountId } = await createAccount();
    const row = { ...emailRow(accountId), state: "done" };
    await db.insert(emails).values(row);
    const recorded = uuidv7(Date.now());
    await insertEmailEvent.bind(env.DB, { id: recorded, emailId: row.id, accountId, type: "sent", dataJson: "{}", createdAt: 1, dedupeKey: null }).run();
    await db.insert(webhooks).values({ id: uuidv7(Date.now()), accountId, endpoint: "https://h.example/", eventsJson: '["email.sent"]', status: "enabled", secretSealed: "x", createdAt: 0, updatedAt: 0 });
    const event = (n: number) => ({ id: uuidv7(Date.now() + n), accountId, type: "email.sent" as const, body: '{"type":"email.sent"}', createdAt: 3 });
    const e = event(1);
    const built = (outboxInsertIfRecorded(db, e, recorded) as unknown as { toSQL(): { sql: string; params: unknown[] } }).toSQL();
    const values = { id: e.id, accountId, type: e.type, payloadJson: e.body, createdAt: e.createdAt, emailEventId: recorded };
    expect({ sql: insertWebhookEventIfRecorded.sql.replace(/ returning .*$/, ""), params: insertWebhookEventIfRecorded.query(values).params }).toEqual(built);

    // Written (and hinted) for the event that is there; not for one that is not.
    const [missing, viaDrizzle] = [event(2), event(3)];
    const statements = [outboxStatementIfRecorded(env.DB, e, recorded), outboxStatementIfRecorded(env.DB, missing, uuidv7(Date.now() + 4))];
    expect(eventsToFanOut(statements, await env.DB.batch(statements))).toEqual([e]);
    await db.batch([outboxInsertIfRecorded(db, viaDrizzle, recorded)]);
    const rows = await db.select().from(webhookEvents).where(inArray(webhookEvents.id, [e.id, missing.id, viaDrizzle.id])).orderBy(webhookEvents.id);
    expect(rows.map((r) => ({ ...r, id: "" }))).toEqual([{ id: "", accountId, type: "email.sent", payloadJson: e.body, createdAt: 3, fannedOutAt: null }, { ...rows[1]!, id: "" }]);
    expect(rows.map((r) => r.id)).toEqual([e.id, viaDrizzle.id]);

    // Nor for a type no endpoint subscribes to, though its email event is there.
    const unheard = { ...event(5), type: "email.opened" as const };
    const [statement] = [outboxStatementIfRecorded(env.DB, unheard, recorded)];
    expect(eventsToFanOut([statement], await env.DB.batch([statement]))).toEqual([]);
    await db.batch([outboxInsertIfRecorded(db, { ...unheard, id: uuidv7(Date.now() + 6) }, recorded)]);
    expect(await db.select().from(webhookEvents).where(and(eq(webhookEvents.accountId, accountId), eq(webhookEvents.type, "email.opened")))).toEqual([]);
  });

  it("write the outbox row drizzle's outboxInsert writes, and only while an enabled endpoint subscribes", async () => {
    const { accountId } = await createAccount();
    const { accountId: other } = await createAccount();
    const hook = (account: string, eventsJson: string, status: "enabled" | "disabled" = "enabled") =>
      db.insert(webhooks).values({ id: uuidv7(Date.now()), accountId: account, endpoint: "https://h.example/", eventsJson, status, secretSealed: "x", createdAt: 0, updatedAt: 0 });
    let n = 0;
    const event = (type: "email.sent" | "email.opened", account = accountId) => ({ id: uuidv7(Date.now() + n++), accountId: account, type, body: `{"type":"${type}"}`, createdAt: 3 });
    const e = event("email.sent");
    const built = (outboxInsert(db, e) as unknown as { toSQL(): { sql: string; params: unknown[] } }).toSQL();
    expect({ sql: insertWebhookEvent.sql.replace(/ returning .*$/, ""), params: insertWebhookEvent.query({ id: e.id, accountId: e.accountId, type: e.type, payloadJson: e.body, createdAt: e.createdAt }).params }).toEqual(built);
    const rowOf = async (id: string) => (await db.select().from(webhookEvents).where(eq(webhookEvents.id, id)))[0];

    // Nobody listens yet (an endpoint of another account, a disabled one, one for other types):
    // nothing is written, and nothing is hinted.
    await hook(other, '["email.sent"]');
    await hook(accountId, '["email.sent"]', "disabled");
    await hook(accountId, '["email.delivered","email.opened"]');
    await env.DB.batch([outboxStatement(env.DB, e)]);
    expect(await rowOf(e.id)).toBeUndefined();
    const unheardEvents = [event("email.sent"), event("email.opened", other)];
    const unheard = unheardEvents.map((u) => outboxStatement(env.DB, u));
    expect(eventsToFanOut(unheard, await env.DB.batch(unheard))).toEqual([]);
    for (const u of unheardEvents) expect(await rowOf(u.id)).toBeUndefined();
    const viaDrizzle = event("email.sent");
    await db.batch([outboxInsert(db, viaDrizzle)]);
    expect(await rowOf(viaDrizzle.id)).toBeUndefined();

    // Heard: waits for the fan-out however many endpoints subscribe; only those are hinted.
    await hook(accountId, '["email.sent"]');
    await hook(accountId, '["email.bounced","email.sent"]');
    const [sent, opened, elsewhere] = [event("email.sent"), event("email.opened"), event("email.sent", other)];
    const heard = [outboxStatement(env.DB, sent), insertWebhookEvent.bind(env.DB, { id: uuidv7(Date.now() + n++), accountId, type: "email.sent", payloadJson: "{}", createdAt: 1 }), outboxStatement(env.DB, opened), outboxStatement(env.DB, elsewhere)];
    expect(eventsToFanOut(heard, await env.DB.batch(heard))).toEqual([sent, opened, elsewhere]);
    expect(await rowOf(sent.id)).toEqual({ id: sent.id, accountId, type: "email.sent", payloadJson: sent.body, createdAt: 3, fannedOutAt: null });
    const heardViaDrizzle = event("email.sent");
    await db.batch([outboxInsert(db, heardViaDrizzle)]);
    expect((await rowOf(heardViaDrizzle.id))!.fannedOutAt).toBeNull();
  });

  it("fan out as drizzle's queries do: pending events read the same, deliveries and marks the same statements", async () => {
    const ids = ["e1", "e2"];
    const fields = { id: webhookEvents.id, accountId: webhookEvents.accountId, type: webhookEvents.type };
    const pending = (list: string[]) => db.select(fields).from(webhookEvents).where(and(inArray(webhookEvents.id, list), isNull(unindexed(webhookEvents.fannedOutAt))));
    expect(pendingEvents(ids)).toEqual(pending(ids).toSQL());
    const hookFields = { id: webhooks.id, accountId: webhooks.accountId, eventsJson: webhooks.eventsJson };
    const hooksOf = (accounts: string[]) => db.select(hookFields).from(webhooks).where(and(inArray(webhooks.accountId, accounts), eq(webhooks.status, "enabled")));
    expect(enabledHooks(["a1", "a2"])).toEqual(hooksOf(["a1", "a2"]).toSQL());
    expect(markFannedOut(ids, 8)).toEqual(db.update(webhookEvents).set({ fannedOutAt: 8 }).where(and(inArray(webhookEvents.id, ids), isNull(unindexed(webhookEvents.fannedOutAt)))).toSQL());
    expect(insertWebhookDelivery.query({ id: "d", webhookId: "w", accountId: "a", eventId: "e", eventType: "email.sent", at: 4 })).toEqual(db.insert(webhookDeliveries).values({
      id: "d", webhookId: "w", accountId: "a", eventId: "e", eventType: "email.sent", status: "pending", attempts: 0, nextAttemptAt: 4, createdAt: 4,
    }).onConflictDoNothing().toSQL());

    const { accountId } = await createAccount();
    const hook = uuidv7(Date.now());
    await db.insert(webhooks).values({ id: hook, accountId, endpoint: "https://h.example/", eventsJson: '["email.sent"]', secretSealed: "x", createdAt: 0, updatedAt: 0 });
    const events = [0, 1, 2].map((i) => ({ id: uuidv7(Date.now() + i), accountId, type: "email.sent" as const, body: "{}", createdAt: i }));
    await env.DB.batch(events.map((e) => outboxStatement(env.DB, e)));
    await env.DB.batch([prepared(env.DB, markFannedOut([events[2]!.id], 9))]);
    const all = events.map((e) => e.id);
    const compiled = pendingEventRows(await prepared(env.DB, pendingEvents(all)).raw());
    expect(compiled).toEqual(await pending(all));
    expect(compiled.map((e) => e.id).sort()).toEqual(all.slice(0, 2).sort());

    const delivery = { id: uuidv7(Date.now()), webhookId: hook, accountId, eventId: events[0]!.id, eventType: "email.sent", at: 4 };
    await env.DB.batch([insertWebhookDelivery.bind(env.DB, delivery), insertWebhookDelivery.bind(env.DB, { ...delivery, id: uuidv7(Date.now() + 5) })]);
    const rows = await db.select().from(webhookDeliveries).where(eq(webhookDeliveries.webhookId, hook));
    const disabled = uuidv7(Date.now() + 1);
    await db.insert(webhooks).values({ id: disabled, accountId, endpoint: "https://h.example/", eventsJson: "[]", secretSealed: "x", status: "disabled", createdAt: 0, updatedAt: 0 });
    const hooks = enabledHookRows(await prepared(env.DB, enabledHooks([accountId, "other"])).raw());
    expect(hooks).toEqual([{ id: hook, accountId, eventsJson: '["email.sent"]' }]);
    expect(hooks).toEqual(await hooksOf([accountId, "other"]));
    // The second is ignored: one delivery per endpoint and event.
    expect(rows).toEqual([{ id: delivery.id, webhookId: hook, accountId, eventId: events[0]!.id, eventType: "email.sent", status: "pending", attempts: 0, nextAttemptAt: 4, lastAttemptAt: null, createdAt: 4 }]);
  });

  it("read a fan-out page and write its recipients and queued events as drizzle's queries do", async () => {
    const { accountId } = await createAccount();
    const now = Date.now();
    const [segment, topic, broadcast] = [uuidv7(now), uuidv7(now + 1), uuidv7(now + 2)];
    await db.insert(segments).values({ id: segment, accountId, name: "s", createdAt: now });
    await db.insert(topics).values({ id: topic, accountId, name: "t", defaultSubscription: "opt_in", createdAt: now, updatedAt: now });
    const people = Array.from({ length: 6 }, (_, i) => ({
      id: uuidv7(now + 10 + i), accountId, email: `p${i}@example.test`, firstName: i === 2 ? null : `P${i}`, lastName: null,
      unsubscribed: i === 3, propertiesJson: i === 1 ? '{"plan":"pro"}' : "{}", createdAt: now, updatedAt: now,
    }));
    await db.insert(contacts).values(people);
    await db.insert(contactSegments).values(people.map((p) => ({ segmentId: segment, contactId: p.id, accountId, createdAt: now })));
    await db.insert(contactTopics).values({ contactId: people[4]!.id, topicId: topic, accountId, subscription: "opt_out", updatedAt: now });
    await db.insert(suppressions).values({ id: uuidv7(now + 30), accountId, email: people[5]!.email, reason: "manual", createdAt: now });
    await db.insert(broadcasts).values({ id: broadcast, accountId, segmentId: segment, topicId: topic, status: "sending", checkpoint: people[0]!.id, recipientCount: 1, createdAt: now, updatedAt: now });

    // drizzle's select, with the checkpoint passed as a value (as the fan-out read it before).
    const drizzlePage = (checkpoint: string, limit: number) => db.select({
      id: contacts.id, email: contacts.email, firstName: contacts.firstName, lastName: contacts.lastName, unsubscribed: contacts.unsubscribed,
      propertiesJson: contacts.propertiesJson, own: contactTopics.subscription, suppressed: suppressions.id,
    }).from(contactSegments).innerJoin(contacts, eq(contacts.id, contactSegments.contactId))
      .leftJoin(contactTopics, and(eq(contactTopics.contactId, contactSegments.contactId), eq(contactTopics.topicId, topic)))
      .leftJoin(suppressions, and(eq(suppressions.accountId, contacts.accountId), eq(suppressions.email, contacts.email)))
      .where(and(eq(contactSegments.segmentId, segment), gt(contactSegments.contactId, checkpoint))).orderBy(asc(contactSegments.contactId)).limit(limit);
    const read = async (limit: number) => {
      const [p, page] = await env.DB.batch([broadcastProgress.bind(env.DB, { id: broadcast }), fanoutPage.bind(env.DB, { broadcastId: broadcast, segmentId: segment, topicId: topic, limit })]);
      return { progress: broadcastProgressRows(p!.results as Record<string, unknown>[]), page: fanoutPageRows(page!.results as Record<string, unknown>[]) };
    };
    const first = await read(3);
    expect(first.progress).toEqual([{ status: "sending", checkpoint: people[0]!.id, recipientCount: 1 }]);
    expect(first.page).toEqual(await drizzlePage(people[0]!.id, 3));
    expect(first.page.map((r) => r.id)).toEqual(people.slice(1, 4).map((p) => p.id));
    await db.update(broadcasts).set({ checkpoint: people[3]!.id }).where(eq(broadcasts.id, broadcast));
    const rest = await read(25);
    // Past the new checkpoint: the opted-out and the suppressed contact, with what says so.
    expect(rest.page).toEqual(await drizzlePage(people[3]!.id, 25));
    expect(rest.page.map((r) => [r.own, r.suppressed !== null])).toEqual([["opt_out", false], [null, true]]);
    expect(first.page.find((r) => r.id === people[3]!.id)!.unsubscribed).toBe(true);

    // A page's rows, each kind in one statement of shared values and a JSON array of each row's
    // own: the same rows the per-row inserts (drizzle's, and the compiled insertEmail) write.
    const ids = people.slice(0, 3).map((_, i) => uuidv7(now + 40 + i));
    const base = emailRow(accountId); // one clock reading: the rows share their times
    const perRow = ids.map((id, i) => ({ ...base, id, toJson: JSON.stringify([people[i]!.email]), pendingJson: JSON.stringify([people[i]!.email]), subject: `Hi "P${i}" ✓`, messageId: `${id}@x.test`, broadcastId: broadcast, headersJson: "{}" }));
    const { id: _i, toJson: _t, pendingJson: _p, subject: _s, messageId: _m, ...shared } = perRow[0]!;
    await env.DB.batch([insertBroadcastEmails.bind(env.DB, shared, perRow.map((r) => [r.id, r.toJson, r.pendingJson, r.subject, r.messageId]))]);
    const viaJson = await db.select().from(emails).where(inArray(emails.id, ids)).orderBy(asc(emails.id));
    expect(viaJson).toEqual(perRow.map((r) => ({ ...r })));
    const twins = perRow.map((r, i) => ({ ...r, id: uuidv7(now + 60 + i) }));
    await env.DB.batch(twins.map((r) => insertEmail.bind(env.DB, r)));
    expect((await db.select().from(emails).where(inArray(emails.id, twins.map((r) => r.id))).orderBy(asc(emails.id))).map(({ id: _, ...rest }) => rest))
      .toEqual(viaJson.map(({ id: _, ...rest }) => rest));

    const recipientRows = ids.map((emailId, i) => ({ broadcastId: broadcast, contactId: people[i]!.id, accountId, emailId, email: people[i]!.email, createdAt: now }));
    const eventRows = ids.map((emailId, i) => ({ id: uuidv7(now + 50 + i), emailId, accountId, type: "queued", dataJson: `{"recipients":["${people[i]!.email}"]}`, createdAt: now, dedupeKey: null }));
    await env.DB.batch([
      insertBroadcastRecipients.bind(env.DB, { broadcastId: broadcast, accountId, createdAt: now }, recipientRows.map((r) => [r.contactId, r.emailId, r.email])),
      insertQueuedEvents.bind(env.DB, { accountId, type: "queued", createdAt: now, dedupeKey: null }, eventRows.map((r) => [r.id, r.emailId, r.dataJson])),
    ]);
    expect(await db.select().from(broadcastRecipients).where(eq(broadcastRecipients.broadcastId, broadcast)).orderBy(asc(broadcastRecipients.contactId))).toEqual(recipientRows);
    expect(await db.select().from(emailEvents).where(inArray(emailEvents.emailId, ids)).orderBy(asc(emailEvents.id))).toEqual(eventRows);
    // A row already recorded fails the whole statement (a replayed page records nothing).
    await expect(env.DB.batch([insertBroadcastRecipients.bind(env.DB, { broadcastId: broadcast, accountId, createdAt: now }, [[people[5]!.id, "e-new", "x@y.z"], [people[0]!.id, ids[0], people[0]!.email]])])).rejects.toThrow(/UNIQUE/);
    expect(await db.select().from(broadcastRecipients).where(eq(broadcastRecipients.contactId, people[5]!.id))).toEqual([]);
  });

  it("claim and settle a webhook attempt as drizzle's queries do, in each shape", async () => {
    const v = { id: "d1", attempts: 2, t: 1000, lease: 31_000, due: 6000 };
    for (const mode of ["scheduled", "replay"] as const) {
      for (const pending of [true, false]) {
        const drizzled = db.update(webhookDeliveries)
          .set({ attempts: sql`${webhookDeliveries.attempts} + 1`, lastAttemptAt: v.t, ...(pending ? { nextAttemptAt: v.lease } : {}) })
          .where(and(
            eq(webhookDeliveries.id, v.id),
            eq(webhookDeliveries.attempts, v.attempts),
            mode === "scheduled" ? and(eq(webhookDeliveries.status, "pending"), lte(webhookDeliveries.nextAttemptAt, v.due)) : undefined,
          ))
          .returning({ attempts: webhookDeliveries.attempts, status: webhookDeliveries.status });
        expect(claimDelivery(mode, pending, v)).toEqual(drizzled.toSQL());
      }
    }
    const attempt = { id: "a", deliveryId: "d1", webhookId: "w", attempt: 3, startedAt: 5, durationMs: 7, statusCode: null, ok: false, responseExcerpt: null, error: "timeout" };
    expect(insertWebhookAttempt.query(attempt)).toEqual(db.insert(webhookAttempts).values(attempt).toSQL());
    expect(markDelivered.query({ id: "d1" })).toEqual(db.update(webhookDeliveries).set({ status: "delivered", nextAttemptAt: null }).where(eq(webhookDeliveries.id, "d1")).toSQL());
  });
});
