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
    /** Lower case, A-labels (punycode) for internationalized names. */
    name: text("name").notNull(),
    region: text("region").notNull().default("us-east-1"),
    /** Domain status of contract section 5 (worker/domains/status.ts). */
    status: text("status").notNull().default("not_started"),
    /** The subdomain of the envelope sender (bounces) and its SPF records. */
    returnPath: text("return_path").notNull().default("send"),
    openTracking: integer("open_tracking", { mode: "boolean" }).notNull().default(false),
    clickTracking: integer("click_tracking", { mode: "boolean" }).notNull().default(false),
    /** The label of the domain's own host for open and click links (Resend's tracking_subdomain,
     * e.g. "links": links.<name>); used once its CNAME record is verified. */
    trackingSubdomain: text("tracking_subdomain"),
    tls: text("tls", { enum: ["opportunistic", "enforced"] }).notNull().default("opportunistic"),
    /** Receiving enabled: the Receiving MX record is part of the record set. */
    receiving: integer("receiving", { mode: "boolean" }).notNull().default(false),
    /** JSON: the status of each non-DKIM record by kind (spf_mx, spf_txt, receiving_mx). */
    recordStatusJson: text("record_status_json").notNull().default("{}"),
    /** JSON: what the last check found at _dmarc ({found, policy, record, inherited}). */
    dmarcJson: text("dmarc_json"),
    /** When the current verification window opened (POST /verify); pending ends 72 h later. */
    verificationStartedAt: integer("verification_started_at"),
    /** When a verified domain's records were first seen missing (temporary_failure). */
    failingSince: integer("failing_since"),
    lastCheckedAt: integer("last_checked_at"),
    /** JSON: what the last check saw, record by record, and the resolver's error when it could
     * not answer (worker/domains/service.ts LastCheck); the dashboard shows it. */
    lastCheckJson: text("last_check_json"),
    /** When the cron checks this domain's records next; null: not checked on a schedule. */
    nextCheckAt: integer("next_check_at"),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at"),
  },
  (t) => [
    uniqueIndex("domains_account_name").on(t.accountId, t.name),
    index("domains_next_check").on(t.nextCheckAt),
    // Which domains want a tracking host (worker/tracking/hostnames.ts asks by its two parts).
    index("domains_tracking_host").on(t.trackingSubdomain, t.name).where(sql`${t.trackingSubdomain} IS NOT NULL`),
  ],
);

/** Domains' tracking hosts as Cloudflare custom hostnames (worker/tracking/hostnames.ts): what
 * tern wants (a hostname is wanted while any domain row, of any account, has it with its
 * Tracking CNAME seen in DNS) and what it
 * last knew of Cloudflare's copy. One row per hostname, as Cloudflare has one per zone; written
 * with the domain change that wants or drops it, and brought in line by the request and the
 * cron. Only where tern manages custom hostnames (CLOUDFLARE_ZONE_ID and its token). */
export const trackingHostnames = sqliteTable(
  "tracking_hostnames",
  {
    /** links.example.com: lower case, A-labels. */
    hostname: text("hostname").primaryKey(),
    /** Some domain has this host as its tracking host with its CNAME seen (as of the last write or sync). */
    wanted: integer("wanted", { mode: "boolean" }).notNull(),
    /** Cloudflare's id, once created (or found); null before, and after it was deleted. */
    cloudflareId: text("cloudflare_id"),
    /** Cloudflare's hostname status (pending, active, blocked, ...) and its certificate's
     * (pending_validation, active, validation_timed_out, ...), as last seen. */
    status: text("status"),
    sslStatus: text("ssl_status"),
    /** Why the certificate authority refused validation, as Cloudflare reports it. */
    validationError: text("validation_error"),
    /** The last call's failure (tern's words and Cloudflare's, never the token); null after a success. */
    lastError: text("last_error"),
    /** Counts the writes of what tern wants: a sync that began before one leaves the row due. */
    generation: integer("generation").notNull().default(0),
    /** Failed calls since the last success: the cron backs off with them. */
    attempts: integer("attempts").notNull().default(0),
    /** When a create was first sent: a hostname never asked for is not looked for at deletion. */
    createRequestedAt: integer("create_requested_at"),
    /** tern created it (not one the zone already had, which it only adopted): only such a
     * hostname is deleted at Cloudflare when no domain wants it any more. */
    owned: integer("owned", { mode: "boolean" }).notNull().default(false),
    /** Held by a sync until then: one sync of a host at a time, so a delete and a create of
     * the same host never interleave their calls and writes. */
    syncUntil: integer("sync_until"),
    /** When the cron should sync this hostname; null: in line, nothing to do. */
    nextSyncAt: integer("next_sync_at"),
    /** When tern last heard from Cloudflare about it. */
    syncedAt: integer("synced_at"),
    /** When `wanted` last changed to true (pending hosts are polled often at first). */
    wantedSince: integer("wanted_since"),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [index("tracking_hostnames_next_sync").on(t.nextSyncAt)],
);

export type TrackingHostnameRow = typeof trackingHostnames.$inferSelect;

/** DKIM keys of a domain. One is active (signs); a rotation adds a pending key that becomes
 * active, retiring the old one, once its DNS record is verified. */
export const dkimKeys = sqliteTable(
  "dkim_keys",
  {
    id: text("id").primaryKey(),
    domainId: text("domain_id").notNull().references(() => domains.id, { onDelete: "cascade" }),
    accountId: text("account_id").notNull(),
    selector: text("selector").notNull(),
    algorithm: text("algorithm", { enum: ["rsa", "ed25519"] }).notNull(),
    /** The `p=` value published in DNS (base64). */
    publicKey: text("public_key").notNull(),
    /** PKCS#8 private key sealed with the master key (worker/crypto/sealed.ts); never clear. */
    privateKeySealed: text("private_key_sealed").notNull(),
    /** pending (published, not yet verified) | active (signs) | retired. */
    state: text("state", { enum: ["pending", "active", "retired"] }).notNull(),
    /** The DNS record's status, as for the other records. */
    status: text("status").notNull().default("not_started"),
    createdAt: integer("created_at").notNull(),
    activatedAt: integer("activated_at"),
    retiredAt: integer("retired_at"),
  },
  (t) => [uniqueIndex("dkim_keys_domain_selector").on(t.domainId, t.selector), index("dkim_keys_account").on(t.accountId)],
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
    /** The sending domain (whose DKIM keys sign it); null only for rows older than domains. */
    domainId: text("domain_id"),
    /** The broadcast it was sent for (its body is the broadcast's); null for API sends. */
    broadcastId: text("broadcast_id"),
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
    /** The attempt under way, written as it goes (delivery/progress.ts): the recipient whose
     * message may be at the relay now and the results of the messages already answered. Null
     * between attempts. */
    attemptJson: text("attempt_json"),
    messageId: text("message_id").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [
    index("emails_account").on(t.accountId, t.id),
    // The Emails page's status filter: its newest page reads this range, however rare the
    // status among a million emails (the (account_id, id) walk would read them all).
    index("emails_account_status").on(t.accountId, t.lastEvent, t.id),
    index("emails_due").on(t.state, t.nextAttemptAt),
  ],
);

/** Each email's recipients (to, cc, bcc), lower-cased bare addresses: the Emails page finds an
 * address's emails newest first through this key instead of reading every email's to_json.
 * Written and deleted by triggers on emails (migration email_recipients_triggers), so every
 * path that inserts or purges emails keeps it whole. */
export const emailRecipients = sqliteTable(
  "email_recipients",
  {
    accountId: text("account_id").notNull(),
    address: text("address").notNull(),
    emailId: text("email_id").notNull(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.address, t.emailId] }), index("email_recipients_email").on(t.emailId)],
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
    /** What makes an event the same fact again, for events that may arrive more than once (a
     * delivery report: its type, recipients and status); unique per email, so the same report
     * handled twice at once still records it once. Null for events tern records itself. */
    dedupeKey: text("dedupe_key"),
  },
  (t) => [index("email_events_email").on(t.emailId, t.id), uniqueIndex("email_events_dedupe").on(t.emailId, t.dedupeKey)],
);

export type EmailRow = typeof emails.$inferSelect;
export type ApiKeyRow = typeof apiKeys.$inferSelect;
export type DomainRow = typeof domains.$inferSelect;
export type DkimKeyRow = typeof dkimKeys.$inferSelect;

// --- Webhooks (contract section 6) -----------------------------------------------------------

/** Every event a webhook may be told about, with its payload as it was when it happened: the
 * outbox. Written in the same D1 batch as the change it reports; fanned out once to the
 * account's subscribed endpoints (fanned_out_at), and swept by the cron if a hint was lost. */
export const webhookEvents = sqliteTable(
  "webhook_events",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    type: text("type").notNull(),
    /** The exact JSON body endpoints receive: {type, created_at, data}. */
    payloadJson: text("payload_json").notNull(),
    createdAt: integer("created_at").notNull(),
    fannedOutAt: integer("fanned_out_at"),
  },
  (t) => [index("webhook_events_pending").on(t.fannedOutAt, t.createdAt), index("webhook_events_account").on(t.accountId, t.id)],
);

export const webhooks = sqliteTable(
  "webhooks",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull().references(() => accounts.id),
    endpoint: text("endpoint").notNull(),
    /** JSON array of event types it is subscribed to. */
    eventsJson: text("events_json").notNull(),
    status: text("status", { enum: ["enabled", "disabled"] }).notNull().default("enabled"),
    /** Why it was disabled (by the account, or by tern after 5 days of failures). */
    disabledReason: text("disabled_reason"),
    /** When its current run of failed attempts began; null while it succeeds. */
    failingSince: integer("failing_since"),
    /** The signing secret (whsec_...), sealed under the master key; never clear. */
    secretSealed: text("secret_sealed").notNull(),
    /** During a rotation the previous secret also signs, until previous_secret_expires_at. */
    previousSecretSealed: text("previous_secret_sealed"),
    previousSecretExpiresAt: integer("previous_secret_expires_at"),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [index("webhooks_account").on(t.accountId, t.id)],
);

/** One event for one endpoint: its id is the webhook-id header, the same on every attempt. */
export const webhookDeliveries = sqliteTable(
  "webhook_deliveries",
  {
    id: text("id").primaryKey(),
    webhookId: text("webhook_id").notNull().references(() => webhooks.id, { onDelete: "cascade" }),
    accountId: text("account_id").notNull(),
    eventId: text("event_id").notNull(),
    eventType: text("event_type").notNull(),
    /** pending | delivered | failed */
    status: text("status", { enum: ["pending", "delivered", "failed"] }).notNull(),
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAt: integer("next_attempt_at"),
    lastAttemptAt: integer("last_attempt_at"),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [
    uniqueIndex("webhook_deliveries_event").on(t.webhookId, t.eventId),
    index("webhook_deliveries_webhook").on(t.webhookId, t.id),
    index("webhook_deliveries_due").on(t.status, t.nextAttemptAt),
  ],
);

export const webhookAttempts = sqliteTable(
  "webhook_attempts",
  {
    id: text("id").primaryKey(),
    deliveryId: text("delivery_id").notNull().references(() => webhookDeliveries.id, { onDelete: "cascade" }),
    webhookId: text("webhook_id").notNull(),
    attempt: integer("attempt").notNull(),
    startedAt: integer("started_at").notNull(),
    durationMs: integer("duration_ms").notNull(),
    /** The HTTP status, null when there was no answer (timeout, refused). */
    statusCode: integer("status_code"),
    ok: integer("ok", { mode: "boolean" }).notNull(),
    /** At most 1 KB of the answer, for people to see what the endpoint said. */
    responseExcerpt: text("response_excerpt"),
    error: text("error"),
  },
  (t) => [index("webhook_attempts_delivery").on(t.deliveryId, t.attempt)],
);

// --- Contacts, suppressions, tracking, inbound ------------------------------------------------

export const contacts = sqliteTable(
  "contacts",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull().references(() => accounts.id),
    /** Lower case. */
    email: text("email").notNull(),
    firstName: text("first_name"),
    lastName: text("last_name"),
    unsubscribed: integer("unsubscribed", { mode: "boolean" }).notNull().default(false),
    /** JSON object of the contact's property values by key (contact_properties says which keys exist). */
    propertiesJson: text("properties_json").notNull().default("{}"),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [uniqueIndex("contacts_account_email").on(t.accountId, t.email), index("contacts_account").on(t.accountId, t.id)],
);

/** Addresses an account does not send to: hard bounces, complaints, or added by hand. */
export const suppressions = sqliteTable(
  "suppressions",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull().references(() => accounts.id),
    /** Lower case. */
    email: text("email").notNull(),
    reason: text("reason", { enum: ["bounce", "complaint", "manual"] }).notNull(),
    /** The email whose bounce or complaint put it here. */
    emailId: text("email_id"),
    /** The bounce's diagnostic or the complaint's feedback type, for people. */
    detail: text("detail"),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [uniqueIndex("suppressions_account_email").on(t.accountId, t.email), index("suppressions_account").on(t.accountId, t.id)],
);

/** Tracked links of an email (click tracking): a click may only redirect to one of these. */
export const emailLinks = sqliteTable(
  "email_links",
  {
    emailId: text("email_id").primaryKey(),
    /** JSON array of the original URLs, by link index. */
    linksJson: text("links_json").notNull(),
  },
);

/** Mail received for a receiving-enabled domain (contract section 8). */
export const inboundEmails = sqliteTable(
  "inbound_emails",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull().references(() => accounts.id),
    domainId: text("domain_id"),
    fromAddress: text("from_address").notNull(),
    toJson: text("to_json").notNull(),
    ccJson: text("cc_json").notNull().default("[]"),
    subject: text("subject").notNull(),
    messageId: text("message_id"),
    /** R2 key of the raw message as received. */
    rawKey: text("raw_key").notNull(),
    size: integer("size").notNull(),
    /** R2 key of the parsed content (html, text, headers) as JSON. */
    contentKey: text("content_key").notNull(),
    /** JSON array: {id, filename, content_type, content_disposition, content_id, size, key}. */
    attachmentsJson: text("attachments_json").notNull().default("[]"),
    /** JSON: {spf, dkim, dmarc} results. */
    authJson: text("auth_json").notNull().default("{}"),
    createdAt: integer("created_at").notNull(),
    /** Hex SHA-256 naming the delivery (worker/inbound/delivery-key.ts): a sender's retry of a
     * message already stored finds it here. Null on rows received before it was kept. */
    dedupeKey: text("dedupe_key"),
  },
  (t) => [index("inbound_emails_account").on(t.accountId, t.id), uniqueIndex("inbound_emails_dedupe").on(t.accountId, t.dedupeKey)],
);

export type WebhookRow = typeof webhooks.$inferSelect;
export type WebhookDeliveryRow = typeof webhookDeliveries.$inferSelect;
export type ContactRow = typeof contacts.$inferSelect;
export type SuppressionRow = typeof suppressions.$inferSelect;
export type InboundEmailRow = typeof inboundEmails.$inferSelect;

/** Idempotency keys (contract 4.3): the first outcome of a request with `Idempotency-Key`,
 * per (account, method + path, key). A successful send writes its row in the same D1 batch
 * that records the emails, so the primary key decides which of two racing requests sends: the
 * other's batch fails whole and it replays the winner's answer. Stored 4xx answers are written
 * on their own. Rows live 24 hours from first use; the cron deletes expired ones. */
export const idempotencyKeys = sqliteTable(
  "idempotency_keys",
  {
    accountId: text("account_id").notNull(),
    /** "POST /emails" or "POST /emails/batch". */
    scope: text("scope").notNull(),
    key: text("key").notNull(),
    /** SHA-256 of the canonical request, hex: a different body is a conflict. */
    fingerprint: text("fingerprint").notNull(),
    status: integer("status").notNull(),
    /** The answer's JSON body, replayed byte for byte. */
    body: text("body").notNull(),
    createdAt: integer("created_at").notNull(),
    expiresAt: integer("expires_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.scope, t.key] }), index("idempotency_keys_expiry").on(t.expiresAt)],
);

/** Every API request an account makes (GET /logs): bodies are kept with secrets and
 * attachment contents left out, for the retention window. A send writes its row in the send's
 * own D1 batch; other requests write theirs after the answer (waitUntil). */
export const apiLogs = sqliteTable(
  "api_logs",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    /** The API key that made the request. */
    keyId: text("key_id"),
    method: text("method").notNull(),
    /** The path, without the query. */
    endpoint: text("endpoint").notNull(),
    status: integer("status").notNull(),
    userAgent: text("user_agent"),
    /** JSON, redacted; null when the request had no JSON body. */
    requestJson: text("request_json"),
    /** JSON, redacted; null when the answer was not JSON. */
    responseJson: text("response_json"),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [index("api_logs_account").on(t.accountId, t.id)],
);

/** A claim of a domain name another account holds (POST /domains/claim): proven by a TXT
 * record at the name, it retires the other accounts' copies. `domainId` is the claimant's own
 * domain of that name (created by the claim when it had none). */
export const domainClaims = sqliteTable(
  "domain_claims",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull().references(() => accounts.id),
    domainId: text("domain_id").notNull(),
    name: text("name").notNull(),
    region: text("region").notNull(),
    /** The TXT record's value: `tern-domain-verification=<random>`. */
    token: text("token").notNull(),
    status: text("status", { enum: ["pending", "completed", "superseded", "expired"] }).notNull(),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [index("domain_claims_domain").on(t.domainId, t.id), index("domain_claims_name").on(t.name)],
);

export type ApiLogRow = typeof apiLogs.$inferSelect;
export type DomainClaimRow = typeof domainClaims.$inferSelect;

/** Counters of email events per account, sending domain, broadcast and time bucket
 * (worker/metrics/rollup.ts writes them in the batch of the event they count). Every UTC offset
 * in use is a multiple of 15 minutes (+05:45 included), so any timezone's hours, days, weeks and
 * months are whole sets of 15-minute buckets. Each event is counted at three spans: its
 * 15-minute bucket, its UTC hour and its UTC day, so a query reads the coarsest rows whose edges
 * are its periods' edges (30 UTC days: 30 rows a domain, not 2,880). Kept whatever their age:
 * the retention purge never deletes them. domain_id and broadcast_id are "" when the email has
 * none (a key column cannot be null). Migration 0008 (hand-written) makes it WITHOUT ROWID. */
export const metricRollups = sqliteTable(
  "metric_rollups",
  {
    accountId: text("account_id").notNull(),
    /** Which span the row counts (worker/metrics/rollup.ts, SPANS): 1 (15 minutes), 4 (a UTC
     * hour), 96 (a UTC day), 401 and 402 (an hour from :15, from :30). */
    span: integer("span").notNull(),
    /** The row's start in 15-minute units since the Unix epoch (start = bucket * 900,000 ms),
     * on its span's grid. */
    bucket: integer("bucket").notNull(),
    domainId: text("domain_id").notNull().default(""),
    broadcastId: text("broadcast_id").notNull().default(""),
    received: integer("received").notNull().default(0),
    sent: integer("sent").notNull().default(0),
    delivered: integer("delivered").notNull().default(0),
    deliveryDelayed: integer("delivery_delayed").notNull().default(0),
    bounced: integer("bounced").notNull().default(0),
    bouncedPermanent: integer("bounced_permanent").notNull().default(0),
    bouncedTransient: integer("bounced_transient").notNull().default(0),
    bouncedUndetermined: integer("bounced_undetermined").notNull().default(0),
    complained: integer("complained").notNull().default(0),
    failed: integer("failed").notNull().default(0),
    suppressed: integer("suppressed").notNull().default(0),
    opened: integer("opened").notNull().default(0),
    uniqueOpened: integer("unique_opened").notNull().default(0),
    clicked: integer("clicked").notNull().default(0),
    uniqueClicked: integer("unique_clicked").notNull().default(0),
    unsubscribed: integer("unsubscribed").notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.span, t.bucket, t.domainId, t.broadcastId] })],
);

// --- Segments, topics, contact properties, templates, broadcasts (issue 17) --------------------

/** A named group of contacts (Resend's segments; the older "audiences" are the same rows). */
export const segments = sqliteTable(
  "segments",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull().references(() => accounts.id),
    name: text("name").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [index("segments_account").on(t.accountId, t.id)],
);

/** A contact's membership of a segment. The primary key's order is the fan-out's: a segment's
 * contacts by id, from a checkpoint. */
export const contactSegments = sqliteTable(
  "contact_segments",
  {
    segmentId: text("segment_id").notNull().references(() => segments.id, { onDelete: "cascade" }),
    contactId: text("contact_id").notNull().references(() => contacts.id, { onDelete: "cascade" }),
    accountId: text("account_id").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.segmentId, t.contactId] }), index("contact_segments_contact").on(t.contactId, t.segmentId)],
);

/** What a broadcast may be about; contacts opt in or out of each. */
export const topics = sqliteTable(
  "topics",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull().references(() => accounts.id),
    name: text("name").notNull(),
    description: text("description"),
    /** Whether a contact with no choice of its own receives the topic; fixed at creation. */
    defaultSubscription: text("default_subscription", { enum: ["opt_in", "opt_out"] }).notNull(),
    visibility: text("visibility", { enum: ["public", "private"] }).notNull().default("private"),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [index("topics_account").on(t.accountId, t.id)],
);

/** A contact's own choice for a topic (absent: the topic's default_subscription). */
export const contactTopics = sqliteTable(
  "contact_topics",
  {
    contactId: text("contact_id").notNull().references(() => contacts.id, { onDelete: "cascade" }),
    topicId: text("topic_id").notNull().references(() => topics.id, { onDelete: "cascade" }),
    accountId: text("account_id").notNull(),
    subscription: text("subscription", { enum: ["opt_in", "opt_out"] }).notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.contactId, t.topicId] }), index("contact_topics_topic").on(t.topicId)],
);

/** A key contacts may carry in `properties`, with its type and the value used when a contact has none. */
export const contactProperties = sqliteTable(
  "contact_properties",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull().references(() => accounts.id),
    key: text("key").notNull(),
    type: text("type", { enum: ["string", "number"] }).notNull(),
    /** JSON: the fallback value (a string or a number), or null. */
    fallbackJson: text("fallback_json"),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [uniqueIndex("contact_properties_account_key").on(t.accountId, t.key), index("contact_properties_account").on(t.accountId, t.id)],
);

/** An image the dashboard editor uploaded (its bytes are in R2 at media/{account_id}/{id}). The
 * rows are what the per-account media limit counts: an upload's row is inserted only when the
 * account's sum and count stay within the limit, in one statement (worker/media/images.ts). */
export const mediaImages = sqliteTable(
  "media_images",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull().references(() => accounts.id),
    bytes: integer("bytes").notNull(),
    /** The format read from the bytes: png, jpg, gif or webp. */
    ext: text("ext").notNull(),
    /** The file's name as the browser gave it (shown in the library and the editor's picker;
     * never part of the URL or the stored key). Null for uploads made before it was kept. */
    name: text("name"),
    createdAt: integer("created_at").notNull(),
  },
  // The first covers the limit's SUM and COUNT: an upload reads the account's index entries,
  // not its rows. The second walks the library newest first, a page at a time.
  (t) => [index("media_images_account").on(t.accountId, t.bytes), index("media_images_account_created").on(t.accountId, t.createdAt, t.id)],
);

/** An email template: the draft being edited and, once published, the version sends use. */
export const templates = sqliteTable(
  "templates",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull().references(() => accounts.id),
    name: text("name").notNull(),
    alias: text("alias"),
    /** JSON: the draft {from, subject, reply_to, html, text, variables}. */
    draftJson: text("draft_json").notNull(),
    /** JSON: the published version in the draft's shape; null until the first publish. */
    publishedJson: text("published_json"),
    publishedAt: integer("published_at"),
    /** Changes a version id: every save of the draft. */
    currentVersionId: text("current_version_id").notNull(),
    /** The dashboard editor's document (TipTap JSON) the draft's html and text were rendered
     * from; null when the draft was written as html (the API), which the editor cannot edit. */
    documentJson: text("document_json"),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [uniqueIndex("templates_account_alias").on(t.accountId, t.alias), index("templates_account").on(t.accountId, t.id)],
);

/** A broadcast: one message to a segment's contacts. The body is stored here once; each
 * recipient's email row points back with broadcast_id and is personalised when sent. */
export const broadcasts = sqliteTable(
  "broadcasts",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull().references(() => accounts.id),
    name: text("name"),
    segmentId: text("segment_id"),
    topicId: text("topic_id"),
    fromAddress: text("from_address"),
    subject: text("subject"),
    replyToJson: text("reply_to_json").notNull().default("[]"),
    previewText: text("preview_text"),
    html: text("html"),
    text: text("text"),
    /** The dashboard editor's document (TipTap JSON) html and text were rendered from; null when
     * they were written directly (the API), which the editor cannot edit. */
    documentJson: text("document_json"),
    /** draft | scheduled | queued | sending | sent | canceled | failed */
    status: text("status").notNull(),
    /** Why a broadcast stopped before its end (the quota ran out, the domain went away). */
    statusReason: text("status_reason"),
    scheduledAt: integer("scheduled_at"),
    sentAt: integer("sent_at"),
    /** The fan-out's checkpoint: the last contact id of the segment it has gone past. */
    checkpoint: text("checkpoint"),
    /** Recipients recorded so far. */
    recipientCount: integer("recipient_count").notNull().default(0),
    /** The sending domain and region, fixed when the fan-out starts. */
    domainId: text("domain_id"),
    region: text("region"),
    /** Until when a fan-out run owns the broadcast; past it, the cron hands it to another. */
    leaseUntil: integer("lease_until"),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
  },
  (t) => [index("broadcasts_account").on(t.accountId, t.id), index("broadcasts_due").on(t.status, t.scheduledAt)],
);

/** One row per (broadcast, contact): the primary key makes a replayed fan-out page fail whole
 * instead of sending anyone a second email. */
export const broadcastRecipients = sqliteTable(
  "broadcast_recipients",
  {
    broadcastId: text("broadcast_id").notNull(),
    contactId: text("contact_id").notNull(),
    accountId: text("account_id").notNull(),
    emailId: text("email_id").notNull(),
    email: text("email").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.broadcastId, t.contactId] }), index("broadcast_recipients_email").on(t.emailId)],
);

export type SegmentRow = typeof segments.$inferSelect;
export type TopicRow = typeof topics.$inferSelect;
export type ContactPropertyRow = typeof contactProperties.$inferSelect;
export type TemplateRow = typeof templates.$inferSelect;
export type BroadcastRow = typeof broadcasts.$inferSelect;

/** A CSV contact import (Resend's /contacts/imports): the file waits in R2 and is processed in
 * chunks by the broadcast queue's consumer; `cursor` is the data rows done so far. */
export const contactImports = sqliteTable(
  "contact_imports",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull().references(() => accounts.id),
    /** queued | in_progress | completed | failed */
    status: text("status").notNull(),
    fileKey: text("file_key").notNull(),
    /** JSON: {column_map, on_conflict, segments, topics} as checked at creation. */
    optionsJson: text("options_json").notNull(),
    cursor: integer("cursor").notNull().default(0),
    /** Where in the file (UTF-8 bytes) the row after `cursor` starts, and how many records
     * (header and blank lines too) come before it: a run reads on from there, not from the top. */
    parseOffset: integer("parse_offset").notNull().default(0),
    parseRecord: integer("parse_record").notNull().default(0),
    /** JSON: {delimiter, linebreak, header}, read from the file at creation. */
    layoutJson: text("layout_json"),
    total: integer("total").notNull().default(0),
    created: integer("created").notNull().default(0),
    updated: integer("updated").notNull().default(0),
    skipped: integer("skipped").notNull().default(0),
    failed: integer("failed").notNull().default(0),
    error: text("error"),
    /** JSON: [{row, value, reason}], the first MAX_RECORDED_FAILURES failed rows (the count is `failed`). */
    failuresJson: text("failures_json"),
    leaseUntil: integer("lease_until"),
    createdAt: integer("created_at").notNull(),
    completedAt: integer("completed_at"),
  },
  (t) => [index("contact_imports_account").on(t.accountId, t.id), index("contact_imports_status").on(t.status)],
);

export type ContactImportRow = typeof contactImports.$inferSelect;

// ---------------------------------------------------------------------------------------------
// The dashboard: people (users) who sign in, and the accounts they belong to. The auth_* tables
// are better-auth's models (worker/dashboard/auth.ts maps them); their columns keep its field
// names. Times there are Dates (timestamp_ms) because better-auth reads and writes Dates.

export const authUsers = sqliteTable("auth_users", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  email: text("email").notNull().unique(),
  emailVerified: integer("email_verified", { mode: "boolean" }).notNull().default(false),
  image: text("image"),
  twoFactorEnabled: integer("two_factor_enabled", { mode: "boolean" }).default(false),
  createdAt: integer("created_at", { mode: "timestamp_ms" }).notNull(),
  updatedAt: integer("updated_at", { mode: "timestamp_ms" }).notNull(),
});

export const authSessions = sqliteTable(
  "auth_sessions",
  {
    id: text("id").primaryKey(),
    expiresAt: integer("expires_at", { mode: "timestamp_ms" }).notNull(),
    token: text("token").notNull().unique(),
    createdAt: integer("created_at", { mode: "timestamp_ms" }).notNull(),
    updatedAt: integer("updated_at", { mode: "timestamp_ms" }).notNull(),
    ipAddress: text("ip_address"),
    userAgent: text("user_agent"),
    userId: text("user_id").notNull().references(() => authUsers.id, { onDelete: "cascade" }),
    /** The passkey this session signed in with: removing the passkey ends the session. */
    passkeyId: text("passkey_id"),
  },
  (t) => [index("auth_sessions_user").on(t.userId)],
);

/** Ways a user signs in: "credential" (the scrypt password hash) or an OAuth provider. */
export const authAccounts = sqliteTable(
  "auth_accounts",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull(),
    providerId: text("provider_id").notNull(),
    userId: text("user_id").notNull().references(() => authUsers.id, { onDelete: "cascade" }),
    accessToken: text("access_token"),
    refreshToken: text("refresh_token"),
    idToken: text("id_token"),
    accessTokenExpiresAt: integer("access_token_expires_at", { mode: "timestamp_ms" }),
    refreshTokenExpiresAt: integer("refresh_token_expires_at", { mode: "timestamp_ms" }),
    scope: text("scope"),
    password: text("password"),
    createdAt: integer("created_at", { mode: "timestamp_ms" }).notNull(),
    updatedAt: integer("updated_at", { mode: "timestamp_ms" }).notNull(),
  },
  (t) => [index("auth_accounts_user").on(t.userId)],
);

export const authVerifications = sqliteTable(
  "auth_verifications",
  {
    id: text("id").primaryKey(),
    identifier: text("identifier").notNull(),
    value: text("value").notNull(),
    expiresAt: integer("expires_at", { mode: "timestamp_ms" }).notNull(),
    createdAt: integer("created_at", { mode: "timestamp_ms" }).notNull(),
    updatedAt: integer("updated_at", { mode: "timestamp_ms" }).notNull(),
  },
  (t) => [index("auth_verifications_identifier").on(t.identifier)],
);

/** A user's TOTP secret and recovery codes, both encrypted by better-auth with its secret. */
export const authTwoFactors = sqliteTable(
  "auth_two_factors",
  {
    id: text("id").primaryKey(),
    secret: text("secret").notNull(),
    backupCodes: text("backup_codes").notNull(),
    userId: text("user_id").notNull().references(() => authUsers.id, { onDelete: "cascade" }),
    verified: integer("verified", { mode: "boolean" }).default(true),
    failedVerificationCount: integer("failed_verification_count").default(0),
    lockedUntil: integer("locked_until", { mode: "timestamp_ms" }),
  },
  (t) => [index("auth_two_factors_user").on(t.userId)],
);

/** A user's passkeys (WebAuthn credentials): the public key and signature counter the
 * authenticator's assertions are checked against. Nothing here signs anything. */
export const authPasskeys = sqliteTable(
  "auth_passkeys",
  {
    id: text("id").primaryKey(),
    userId: text("user_id").notNull().references(() => authUsers.id, { onDelete: "cascade" }),
    /** The credential id, base64url, as the authenticator gave it. */
    credentialId: text("credential_id").notNull().unique(),
    /** The COSE public key, base64url. */
    publicKey: text("public_key").notNull(),
    counter: integer("counter").notNull().default(0),
    /** JSON array of transports ("internal", "hybrid", "usb", ...), as hints for the browser. */
    transportsJson: text("transports_json"),
    /** "singleDevice" or "multiDevice" (synced), and whether it is backed up now. */
    deviceType: text("device_type").notNull(),
    backedUp: integer("backed_up", { mode: "boolean" }).notNull().default(false),
    aaguid: text("aaguid"),
    name: text("name").notNull(),
    createdAt: integer("created_at").notNull(),
    lastUsedAt: integer("last_used_at"),
  },
  (t) => [index("auth_passkeys_user").on(t.userId)],
);

export type PasskeyRow = typeof authPasskeys.$inferSelect;

/** Who belongs to which tern account, with which role. Owners and admins manage keys,
 * members and settings; members see and send. */
export const memberships = sqliteTable(
  "memberships",
  {
    accountId: text("account_id").notNull().references(() => accounts.id, { onDelete: "cascade" }),
    userId: text("user_id").notNull().references(() => authUsers.id, { onDelete: "cascade" }),
    role: text("role", { enum: ["owner", "admin", "member"] }).notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.accountId, t.userId] }), index("memberships_user").on(t.userId)],
);

/** An emailed invitation to join an account. Only the SHA-256 of its link's token is kept. */
export const invitations = sqliteTable(
  "invitations",
  {
    id: text("id").primaryKey(),
    accountId: text("account_id").notNull().references(() => accounts.id, { onDelete: "cascade" }),
    email: text("email").notNull(),
    role: text("role", { enum: ["admin", "member"] }).notNull(),
    tokenHash: text("token_hash").notNull().unique(),
    invitedBy: text("invited_by").notNull(),
    createdAt: integer("created_at").notNull(),
    expiresAt: integer("expires_at").notNull(),
    acceptedAt: integer("accepted_at"),
  },
  (t) => [index("invitations_account").on(t.accountId, t.createdAt)],
);

/** Every change a person makes through the dashboard: who, what, when, from where. */
export const auditLog = sqliteTable(
  "audit_log",
  {
    /** UUIDv7: id order is time order, and pages of the log are id ranges. */
    id: text("id").primaryKey(),
    /** Null for events about a user before an account is chosen (a failed sign-in). */
    accountId: text("account_id"),
    userId: text("user_id"),
    actorEmail: text("actor_email"),
    /** "api_key.created", "domain.deleted", "user.signed_in", ... */
    action: text("action").notNull(),
    target: text("target"),
    detailJson: text("detail_json"),
    ip: text("ip"),
    userAgent: text("user_agent"),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [index("audit_log_account").on(t.accountId, t.id)],
);

/** Sign-in attempts counted per address and per IP in fixed windows (worker/dashboard/throttle.ts). */
export const authAttempts = sqliteTable("auth_attempts", {
  /** "email:a@b.c" or "ip:203.0.113.9", with the window's start: "ip:...@1764000000000". */
  key: text("key").primaryKey(),
  count: integer("count").notNull(),
  expiresAt: integer("expires_at").notNull(),
});

/** One-off jobs that rewrite existing rows when a rule about them changes, run a slice per cron
 * tick until done (worker/maintenance.ts). A migration adds each job's row. */
export const maintenanceJobs = sqliteTable("maintenance_jobs", {
  name: text("name").primaryKey(),
  /** JSON: where the job stands (its own shape). */
  cursorJson: text("cursor_json"),
  doneAt: integer("done_at"),
});
