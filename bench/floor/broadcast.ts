// The floor of issue 17's CPU ratio (bench/broadcast-floor.ts): the least a Worker does to record
// a broadcast's emails, beside the least it does to record the same emails sent with a batch
// request, both settled by the simulator as the least consumer would. What the two cost under
// `wrangler dev` on this machine says how low "a broadcast email / a batch-sent one" can go when
// both end in the same consumer and events, as the issue asks, whatever the code around them.
//   POST /emails/batch   parse up to 100 emails, one D1 batch (their rows, bodies included, and
//                        their queued events, a statement each over a JSON array), one queue
//                        sendBatch of their ids.
//   POST /broadcasts     store the broadcast (body once) as `sending`, queue its first page.
//   broadcast queue      a run of ten pages (as tern's): each reads 25 contacts after the last,
//                        writes their rows (no body: the broadcast's) and queued events as the
//                        batch request does, and sends their ids; then the next run's message. Email ids are made from
//                        (broadcast, contact), so a replayed page inserts nothing (INSERT OR
//                        IGNORE): exactly once without a recipients table.
//   send queue           simulated recipients (delivery.ts sends the others to the relay): the
//                        claim, then the batch's sent and delivered events and final states in
//                        one D1 batch.
//   POST /seed?n=        N contacts for the account (not measured).
//   ?hold=1, POST /enqueue  record a batch without queueing it, and queue given ids: the
//                        consumer's share measured alone.
import { uuidv7 } from "../../worker/ids.ts";
import { FLOOR_ACCOUNT, FLOOR_DOMAIN, FLOOR_DOMAIN_NAME } from "./statements.ts";

export interface BroadcastFloorEnv {
  DB: D1Database;
  SEND_QUEUE: Queue<{ id: string }>;
  BROADCAST_QUEUE: Queue<{ broadcast: string; after: string }>;
}

export const SIMULATOR_DOMAIN = "simulator.tern.test";
const PAGE = 25;
const PAGES_PER_RUN = 10;

interface Email {
  from: string;
  to: string;
  subject: string;
  html: string;
}

/** Each email's row and its queued event, in two statements over a JSON array (as tern's
 * fan-out writes a page): one statement per kind of row, whatever the count. Ignored when there,
 * so a replayed page writes nothing. */
function recordRows(d1: D1Database, shared: { from: string; broadcast: string | null }, rows: Array<{ id: string; to: string; subject: string; html: string | null }>, now: number): D1PreparedStatement[] {
  const json = JSON.stringify(rows.map((r) => ({ ...r, to: JSON.stringify([r.to]), recipients: JSON.stringify({ recipients: [r.to] }), event: uuidv7(now), mid: `${r.id}@${FLOOR_DOMAIN_NAME}` })));
  const v = (key: string) => `json_extract(value, '$.${key}')`;
  return [
    d1.prepare(
      `INSERT OR IGNORE INTO emails (id, account_id, from_address, to_json, subject, html, domain_id, broadcast_id, region, state, last_event, pending_json, attempts, next_attempt_at, message_id, created_at) ` +
        `SELECT ${v("id")}, ?1, ?2, ${v("to")}, ${v("subject")}, ${v("html")}, ?3, ?4, 'us-east-1', 'queued', 'queued', ${v("to")}, 0, ?5, ${v("mid")}, ?5 FROM json_each(?6)`,
    ).bind(FLOOR_ACCOUNT, shared.from, FLOOR_DOMAIN, shared.broadcast, now, json),
    d1.prepare(
      `INSERT OR IGNORE INTO email_events (id, email_id, account_id, type, data_json, created_at, dedupe_key) ` +
        `SELECT ${v("event")}, ${v("id")}, ?1, 'queued', ${v("recipients")}, ?2, 'queued:' || ${v("id")} FROM json_each(?3)`,
    ).bind(FLOOR_ACCOUNT, now, json),
  ];
}

/** hold: record without queueing (bench/broadcast-floor.ts then queues them with enqueue(), to
 * measure the consumer alone). */
export async function acceptBatch(env: BroadcastFloorEnv, emails: Email[], hold = false): Promise<string[]> {
  const now = Date.now();
  const ids = emails.map(() => uuidv7(now));
  // One sender per request here (the bench's), as the shared values of the statement.
  await env.DB.batch(recordRows(env.DB, { from: emails[0]!.from, broadcast: null }, emails.map((e, i) => ({ id: ids[i]!, to: e.to, subject: e.subject, html: e.html })), now));
  if (!hold) await enqueue(env, ids);
  return ids;
}

export async function enqueue(env: BroadcastFloorEnv, ids: string[]): Promise<void> {
  await env.SEND_QUEUE.sendBatch(ids.map((id) => ({ body: { id } })));
}

export async function createBroadcast(env: BroadcastFloorEnv, b: { from: string; subject: string; html: string }): Promise<string> {
  const now = Date.now();
  const id = uuidv7(now);
  await env.DB.prepare(`INSERT INTO broadcasts (id, account_id, from_address, subject, html, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'sending', ?, ?)`)
    .bind(id, FLOOR_ACCOUNT, b.from, b.subject, b.html, now, now)
    .run();
  await env.BROADCAST_QUEUE.send({ broadcast: id, after: "" });
  return id;
}

/** A run of up to PAGES_PER_RUN pages of a broadcast's fan-out (as tern's runs); the next run
 * is the next message. */
export async function fanOutRun(env: BroadcastFloorEnv, run: { broadcast: string; after: string }): Promise<void> {
  let after = run.after;
  for (let page = 0; page < PAGES_PER_RUN; page++) {
    const [broadcast, contacts] = await env.DB.batch([
      env.DB.prepare(`SELECT from_address, subject FROM broadcasts WHERE id = ? AND status = 'sending'`).bind(run.broadcast),
      env.DB.prepare(`SELECT id, email, first_name FROM contacts WHERE account_id = ? AND id > ? AND unsubscribed = 0 ORDER BY id LIMIT ?`).bind(FLOOR_ACCOUNT, after, PAGE),
    ]);
    const b = broadcast!.results[0] as { from_address: string; subject: string } | undefined;
    const rows = contacts!.results as Array<{ id: string; email: string; first_name: string | null }>;
    if (!b) return;
    if (!rows.length) {
      await env.DB.prepare(`UPDATE broadcasts SET status = 'sent', sent_at = ? WHERE id = ?`).bind(Date.now(), run.broadcast).run();
      return;
    }
    const now = Date.now();
    // The contact's id (its time part, so ids grow page by page) and the broadcast's: the same
    // page replayed makes the same ids.
    const ids = rows.map((c) => `${c.id.slice(0, 18)}${run.broadcast.slice(18)}`);
    await env.DB.batch(
      recordRows(env.DB, { from: b.from_address, broadcast: run.broadcast }, rows.map((c, i) => ({ id: ids[i]!, to: c.email, subject: b.subject.replaceAll("{{{FIRST_NAME}}}", c.first_name ?? ""), html: null })), now),
    );
    await env.SEND_QUEUE.sendBatch(ids.map((id) => ({ body: { id } })));
    after = rows.at(-1)!.id;
  }
  await env.BROADCAST_QUEUE.send({ broadcast: run.broadcast, after });
}

/** Settles simulated emails: their sent and delivered events and final state, guarded by the
 * claim (an email no longer `sending` gets nothing), in one D1 batch of three statements over a
 * JSON array of ids: the least a settlement can cost. */
export async function settleSimulated(env: BroadcastFloorEnv, ids: string[]): Promise<void> {
  const now = Date.now();
  const json = JSON.stringify(ids.map((id) => ({ id, sent: uuidv7(now), delivered: uuidv7(now) })));
  const event = (type: "sent" | "delivered") =>
    env.DB.prepare(
      `INSERT INTO email_events (id, email_id, account_id, type, data_json, created_at, dedupe_key) ` +
        `SELECT json_extract(j.value, '$.${type}'), e.id, ?1, '${type}', '{}', ?2, '${type}:' || e.id FROM json_each(?3) j JOIN emails e ON e.id = json_extract(j.value, '$.id') AND e.state = 'sending'`,
    ).bind(FLOOR_ACCOUNT, now, json);
  await env.DB.batch([
    event("sent"),
    event("delivered"),
    env.DB.prepare(`UPDATE emails SET state = 'done', last_event = 'delivered', lease_until = NULL WHERE id IN (SELECT json_extract(value, '$.id') FROM json_each(?)) AND state = 'sending'`).bind(json),
  ]);
}

/** N contacts, 500 to a D1 batch. */
export async function seedContacts(env: BroadcastFloorEnv, n: number): Promise<void> {
  const now = Date.now();
  for (let i = 0; i < n; i += 500) {
    await env.DB.batch(
      Array.from({ length: Math.min(500, n - i) }, (_, j) =>
        env.DB.prepare(`INSERT INTO contacts (id, account_id, email, first_name, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`)
          .bind(uuidv7(now + i + j), FLOOR_ACCOUNT, `reader${i + j}@${SIMULATOR_DOMAIN}`, `Reader ${i + j}`, now, now),
      ),
    );
  }
}
