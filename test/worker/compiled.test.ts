// The accept path's statements compiled once (worker/db/compiled.ts) must be the statements
// drizzle builds for the same values: the same SQL text, the same row written, the same answer
// and the same failure, on D1.
import { env } from "cloudflare:workers";
import { and, eq, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { describe, expect, it } from "vitest";
import { consumeUsage, insertEmail, insertEmailEvent, statementOf } from "../../worker/db/compiled.ts";
import { emailEvents, emails, usage } from "../../worker/db/schema.ts";
import { uuidv7 } from "../../worker/ids.ts";
import { isQuotaViolation } from "../../worker/sending/quota.ts";
import { createAccount } from "./fixtures.ts";

const db = drizzle(env.DB);

function emailRow(accountId: string) {
  const now = Date.now();
  return {
    id: uuidv7(now), accountId, fromAddress: "A <a@tern.test>", toJson: '["b@example.com"]', ccJson: "[]", bccJson: '["c@example.com"]',
    replyToJson: "[]", subject: "compiled ✓", html: null, text: "hello\nworld", headersJson: '{"X-A":"1"}', tagsJson: "[]", attachmentsJson: "[]",
    contentKey: null, domainId: null, region: "us-east-1", state: "queued", lastEvent: "queued", scheduledAt: null, pendingJson: '["b@example.com"]',
    attempts: 0, nextAttemptAt: now, leaseUntil: null, attemptJson: null, messageId: "<x@tern.test>", createdAt: now,
  };
}

describe("statements compiled once from the drizzle schema", () => {
  it("are drizzle's own SQL for an insert of every column", () => {
    const row = emailRow("acct");
    expect(insertEmail.sql).toBe(db.insert(emails).values(row).toSQL().sql);
    expect(insertEmail.sql).toMatch(/^insert into "emails" \(.*"lease_until".*\) values \((\?, ){25}\?\)$/);
    expect(insertEmailEvent.sql).toBe(db.insert(emailEvents).values({ id: "e", emailId: "m", accountId: "a", type: "queued", dataJson: "{}", createdAt: 1, dedupeKey: null }).toSQL().sql);
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
