// The D1 schema: the one source of truth for tables. `npm run db:generate` writes the SQL
// migrations in migrations/ from this file. Times are Unix milliseconds.

import { sql } from "drizzle-orm";
import { check, index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

export const accounts = sqliteTable("accounts", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  /** A plan of worker/plans.ts: its monthly (and daily) email quota. */
  plan: text("plan").notNull().default("free"),
  /** API requests per second, shared by every key and SMTP. */
  rateLimit: integer("rate_limit").notNull().default(10),
  createdAt: integer("created_at").notNull(),
});

/** Emails counted against a quota, per account and period ("2026-11" or "2026-11-21"). The
 * CHECK makes the count and the limit one atomic fact: an increment that would pass the cap
 * fails, and with it the whole D1 batch that records the emails. */
export const usage = sqliteTable(
  "usage",
  {
    accountId: text("account_id").notNull(),
    period: text("period").notNull(),
    used: integer("used").notNull(),
    cap: integer("cap").notNull(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.period] }), check("usage_within_cap", sql`${t.used} <= ${t.cap}`)],
);

export const apiKeys = sqliteTable(
  "api_keys",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull().references(() => accounts.id),
    name: text("name").notNull(),
    permission: text("permission", { enum: ["full_access", "sending_access"] }).notNull(),
    /** Only for sending_access keys restricted to one domain. */
    domainId: text("domain_id"),
    /** SHA-256 of the whole token, hex. The token itself is never stored. */
    tokenHash: text("token_hash").notNull(),
    /** The first characters of the token, for people to recognise it. */
    tokenPrefix: text("token_prefix").notNull(),
    createdAt: integer("created_at").notNull(),
    lastUsedAt: integer("last_used_at"),
  },
  (t) => [uniqueIndex("api_keys_token_hash").on(t.tokenHash), index("api_keys_account").on(t.accountId, t.id)],
);

export const domains = sqliteTable(
  "domains",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull().references(() => accounts.id),
    name: text("name").notNull(),
    region: text("region").notNull().default("us-east-1"),
    status: text("status").notNull().default("not_started"),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [uniqueIndex("domains_account_name").on(t.accountId, t.name)],
);

export const emails = sqliteTable(
  "emails",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull().references(() => accounts.id),
    /** The From header as given ("Name <a@b.c>"). */
    fromAddress: text("from_address").notNull(),
    /** JSON arrays of address strings as given. */
    toJson: text("to_json").notNull(),
    ccJson: text("cc_json").notNull().default("[]"),
    bccJson: text("bcc_json").notNull().default("[]"),
    replyToJson: text("reply_to_json").notNull().default("[]"),
    subject: text("subject").notNull(),
    /** Bodies when small; null when they live in R2 under contentKey. */
    html: text("html"),
    text: text("text"),
    /** JSON object of custom headers. */
    headersJson: text("headers_json").notNull().default("{}"),
    /** JSON array of {name, value}. */
    tagsJson: text("tags_json").notNull().default("[]"),
    /** JSON array of attachment metadata {filename, content_type, content_id, size}. */
    attachmentsJson: text("attachments_json").notNull().default("[]"),
    /** R2 key of the stored content (bodies and attachments) when not inline. */
    contentKey: text("content_key"),
    /** The region whose transport sends it. */
    region: text("region").notNull().default("us-east-1"),
    /** Delivery state machine: scheduled | queued | sending | done | canceled. */
    state: text("state").notNull(),
    /** The contract's last_event: the newest event of the email. */
    lastEvent: text("last_event").notNull(),
    scheduledAt: integer("scheduled_at"),
    /** Recipients still to deliver (JSON array); shrinks as attempts settle them. */
    pendingJson: text("pending_json").notNull(),
    attempts: integer("attempts").notNull().default(0),
    /** When a queued email is next due to be (re)enqueued by the cron's safety net. */
    nextAttemptAt: integer("next_attempt_at"),
    /** Lease on a send in progress: a consumer owns the email until this time. */
    leaseUntil: integer("lease_until"),
    messageId: text("message_id").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [
    index("emails_account").on(t.accountId, t.id),
    index("emails_due").on(t.state, t.nextAttemptAt),
  ],
);

export const emailEvents = sqliteTable(
  "email_events",
  {
    id: text("id").primaryKey(),
    emailId: text("email_id").notNull().references(() => emails.id),
    accountId: text("account_id").notNull(),
    type: text("type").notNull(),
    /** JSON: details of the event (bounce, failure reason, recipients). */
    dataJson: text("data_json").notNull().default("{}"),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [index("email_events_email").on(t.emailId, t.id)],
);

export type EmailRow = typeof emails.$inferSelect;
export type ApiKeyRow = typeof apiKeys.$inferSelect;
