// The floor's D1 statements: the SQL tern's accept path sends for a plain send of the bench's
// body (worker/sending/accept.ts recordEmails, worker/sending/quota.ts consumeStatements) and
// the read of `GET /emails/<id>` (worker/routes/emails.ts findEmail), written out as text with
// the same parameters. bench/floor/capture.ts runs tern's own code against a recording D1, and
// bench/floor.ts checks before every run that it produces exactly these statements.
import { uuidv7 } from "../../worker/ids.ts";
import { PLANS } from "../../worker/plans.ts";

/** The rows the floor's database is seeded with (bench/floor.ts): the account the emails
 * belong to (emails.account_id references accounts) and the id of its sending domain. */
export const FLOOR_ACCOUNT = "f1007000-0000-4000-8000-000000000001";
export const FLOOR_DOMAIN = "f1007000-0000-4000-8000-000000000002";
export const FLOOR_DOMAIN_NAME = "tern.test";
/** The bench's plan (TERN_DEV_PLAN in bench/run.ts): one monthly quota row, no daily one. */
export const FLOOR_PLAN = "scale_2_5m";

/** The bench's send body, as tern turns it into a row (bench/run.ts phaseOne). */
export const SEND_FROM = "Bench <bench@tern.test>";
export const SEND_TO = "delivered@simulator.tern.test";
export const SEND_SUBJECT = "bench";
export const SEND_TEXT = "hello";

export const CONSUME_QUOTA_SQL =
  `insert into "usage" ("account_id", "period", "used", "cap") values (?, ?, ?, ?) on conflict ("usage"."account_id", "usage"."period") ` +
  `do update set "used" = "usage"."used" + excluded.used, "cap" = excluded.cap returning "used"`;

export const INSERT_EMAIL_SQL =
  `insert into "emails" ("id", "account_id", "from_address", "to_json", "cc_json", "bcc_json", "reply_to_json", "subject", "html", "text", ` +
  `"headers_json", "tags_json", "attachments_json", "content_key", "domain_id", "broadcast_id", "region", "state", "last_event", "scheduled_at", "pending_json", ` +
  `"attempts", "next_attempt_at", "lease_until", "attempt_json", "message_id", "created_at") ` +
  `values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

export const INSERT_EVENT_SQL = `insert into "email_events" ("id", "email_id", "account_id", "type", "data_json", "created_at", "dedupe_key") values (?, ?, ?, ?, ?, ?, ?)`;

/** The send's rollup (worker/metrics/rollup.ts): its recipients counted as received in the
 * account's and domain's rows of each span it is kept at (SPANS: its 15-minute bucket, UTC hour,
 * UTC day and shifted hours). */
// worker/metrics/rollup.ts SPANS, written out: that module needs the Workers types, which the
// Node side of the floor (test/node/floor-statements.test.ts) cannot load; that test fails if
// they part.
const SPANS = [{ id: 1, length: 1, phase: 0 }, { id: 4, length: 4, phase: 0 }, { id: 96, length: 96, phase: 0 }, { id: 401, length: 4, phase: 1 }, { id: 402, length: 4, phase: 2 }];
const spanStart = (s: { length: number; phase: number }, b: number) => b - ((((b - s.phase) % s.length) + s.length) % s.length);

export const ROLLUP_SQL =
  `INSERT INTO "metric_rollups" ("account_id", "span", "bucket", "domain_id", "broadcast_id", "received") ` +
  `SELECT ?, column1, column2, ?, ?, ? FROM (VALUES ${SPANS.map(() => "(?, ?)").join(", ")}) WHERE true ` +
  `ON CONFLICT ("account_id", "span", "bucket", "domain_id", "broadcast_id") DO UPDATE SET "received" = "received" + excluded."received"`;

export const EMAIL_BY_ID_SQL =
  `select "id", "account_id", "from_address", "to_json", "cc_json", "bcc_json", "reply_to_json", "subject", "html", "text", "headers_json", ` +
  `"tags_json", "attachments_json", "content_key", "domain_id", "broadcast_id", "region", "state", "last_event", "scheduled_at", "pending_json", "attempts", ` +
  `"next_attempt_at", "lease_until", "attempt_json", "message_id", "created_at" from "emails" where ("emails"."id" = ? and "emails"."account_id" = ?)`;

export interface Statement {
  sql: string;
  params: unknown[];
}

/** The one batch of a plain send of the bench's body: consume one email of the monthly quota,
 * record the email, record its `queued` event, count it in the metrics rollup. */
export function sendBatch(emailId: string, eventId: string, now: number): Statement[] {
  const month = new Date(now).toISOString().slice(0, 7);
  const to = JSON.stringify([SEND_TO]);
  const bucket = Math.floor(now / 900_000);
  return [
    { sql: CONSUME_QUOTA_SQL, params: [FLOOR_ACCOUNT, month, 1, PLANS[FLOOR_PLAN].monthly] },
    {
      sql: INSERT_EMAIL_SQL,
      params: [
        emailId, FLOOR_ACCOUNT, SEND_FROM, to, "[]", "[]", "[]", SEND_SUBJECT, null, SEND_TEXT, "{}", "[]", "[]", null, FLOOR_DOMAIN, null, "us-east-1",
        "queued", "queued", null, to, 0, now, null, null, `${emailId}@${FLOOR_DOMAIN_NAME}`, now,
      ],
    },
    { sql: INSERT_EVENT_SQL, params: [eventId, emailId, FLOOR_ACCOUNT, "queued", JSON.stringify({ recipients: [SEND_TO] }), now, null] },
    { sql: ROLLUP_SQL, params: [FLOOR_ACCOUNT, FLOOR_DOMAIN, "", 1, ...SPANS.flatMap((span) => [span.id, spanStart(span, bucket)])] },
  ];
}

/** New ids the way tern makes them (UUIDv7, worker/ids.ts), so the primary-key indexes grow
 * the same way. */
export function newSendBatch(now = Date.now()): { emailId: string; statements: Statement[] } {
  const emailId = uuidv7(now);
  return { emailId, statements: sendBatch(emailId, uuidv7(now), now) };
}
