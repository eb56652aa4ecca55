// Data retention: the cron deletes what has been kept for RETENTION_DAYS (30 by default), in
// bounded batches, so that D1 and R2 hold a window of history, not all of it.
//   - an email, once settled (done or canceled) and quiet (no event of its own within the
//     window, so a recent open, click or report keeps it), with its events and its R2 content;
//   - a webhook delivery no longer pending, with its attempts, and an outbox event that has
//     been fanned out and has no pending delivery left;
//   - a received email with its raw message, parsed content and attachments in R2;
//   - an API request log (GET /logs).
// Apart from the window, and even when retention is off: a sent email's R2 objects left without
// a row by an accept that died midway (sweepOrphanedContent).
// Kept whatever their age: accounts, keys, domains, webhooks, contacts, suppressions (a bounce
// must go on being honoured), monthly usage, metric rollups (counts outlive the history), and an email's tracked links (email_links: a reader
// may click a link in an old email, and the redirect needs it; a row is a few hundred bytes).
// D1 first, R2 after: a failed R2 delete leaves an unreachable object, never a row whose
// content is gone.
import { uuidv7Floor } from "../ids.ts";
import type { StoredAttachment } from "../sending/content.ts";

export interface PurgeCounts {
  emails: number;
  webhookDeliveries: number;
  webhookEvents: number;
  inboundEmails: number;
  apiLogs: number;
  /** Finished contact imports whose failed rows (addresses among them) were let go. */
  importFailures: number;
  blobs: number;
}

/** Rows of each kind deleted per round; a run goes on with more rounds while a kind fills its
 * batch and its time budget lasts, so a busy deployment's history cannot outgrow the purge. */
export const PURGE_BATCH = 500;
const ROUND_LIMIT = 20;
const BUDGET_MS = 10_000;
/** D1 binds at most 100 parameters per statement. */
const CHUNK = 90;

/** An email the purge may take: settled, and no event of its own since the floor (the
 * parameter named). */
const emailExpired = (floor: string) => `+state IN ('done', 'canceled') AND NOT EXISTS (SELECT 1 FROM email_events e WHERE e.email_id = emails.id AND e.id >= ${floor})`;
/** A delivery the purge may take: no longer retrying. */
const DELIVERY_SETTLED = "status <> 'pending'";

/** The statements that find candidates, each bound to (floor, limit); their plans are checked
 * in test/worker/query-plans.test.ts. Ids are UUIDv7, so `id < floor` is a range of the
 * primary key; an email's recent events are a range of the (email_id, id) index. The unary +
 * keeps SQLite off the (state, next_attempt_at) index, which would read every settled email and
 * sort them on each run. An event's pending deliveries are found through its account's
 * webhooks and the (webhook_id, event_id) index deliveries already have, so the purge adds no
 * index for every delivery insert to maintain. */
export const PURGE_SQL = {
  emails: `SELECT id FROM emails WHERE id < ?1 AND ${emailExpired("?1")} ORDER BY id LIMIT ?2`,
  deliveries: `SELECT id FROM webhook_deliveries WHERE id < ?1 AND ${DELIVERY_SETTLED} ORDER BY id LIMIT ?2`,
  events: `DELETE FROM webhook_events WHERE id IN (
      SELECT id FROM webhook_events w
      WHERE id < ?1 AND fanned_out_at IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM webhooks h JOIN webhook_deliveries d ON d.webhook_id = h.id AND d.event_id = w.id
                        WHERE h.account_id = w.account_id AND d.status = 'pending')
      ORDER BY id LIMIT ?2)`,
  inbound: `SELECT id FROM inbound_emails WHERE id < ?1 ORDER BY id LIMIT ?2`,
  apiLogs: `DELETE FROM api_logs WHERE id IN (SELECT id FROM api_logs WHERE id < ?1 ORDER BY id LIMIT ?2)`,
  // A finished import keeps its counts; the rows that failed, with what they held, go.
  importFailures: `UPDATE contact_imports SET failures_json = NULL WHERE id IN (
      SELECT id FROM contact_imports WHERE id < ?1 AND failures_json IS NOT NULL AND +status IN ('completed', 'failed') ORDER BY id LIMIT ?2)`,
} as const;

export interface PurgeOptions {
  /** Rows of each kind per round (PURGE_BATCH). */
  batch?: number;
  /** Rounds at most (20); a run also stops when no kind filled its batch, or after 10 s. */
  rounds?: number;
}

export async function purgeExpired(env: Pick<Env, "DB" | "BLOBS">, retentionDays: number | null, now: number, options: PurgeOptions = {}): Promise<PurgeCounts> {
  const counts: PurgeCounts = { emails: 0, webhookDeliveries: 0, webhookEvents: 0, inboundEmails: 0, apiLogs: 0, importFailures: 0, blobs: 0 };
  if (retentionDays === null) return counts;
  const batch = options.batch ?? PURGE_BATCH;
  const rounds = options.rounds ?? ROUND_LIMIT;
  const floor = uuidv7Floor(now - retentionDays * 86_400_000);
  const started = Date.now();
  for (let round = 0; round < rounds && Date.now() - started < BUDGET_MS; round++) {
    const full = await purgeRound(env, floor, batch, counts);
    if (!full) break;
  }
  return counts;
}

/** One batch of each kind; true when some kind filled its batch (there may be more). Each
 * delete checks its condition again, in the same transaction: a click or report recorded
 * since the candidates were read keeps its email, a replay keeps its delivery. */
async function purgeRound(env: Pick<Env, "DB" | "BLOBS">, floor: string, batch: number, counts: PurgeCounts): Promise<boolean> {
  const db = env.DB;
  const select = async (q: string) => (await db.prepare(q).bind(floor, batch).all<{ id: string }>()).results.map((r) => r.id);
  const blobs: string[] = [];

  const emails = await select(PURGE_SQL.emails);
  const deletedEmails = await deleteExpiredEmails(db, emails, floor);
  counts.emails += deletedEmails.deleted;
  blobs.push(...deletedEmails.blobs);

  // Webhook deliveries that are settled, then outbox events nobody still waits on.
  const deliveries = await select(PURGE_SQL.deliveries);
  counts.webhookDeliveries += await deleteSettledDeliveries(db, deliveries);
  const events = (await db.prepare(PURGE_SQL.events).bind(floor, batch).run()).meta.changes ?? 0;
  counts.webhookEvents += events;

  // Received mail.
  const inbound = await select(PURGE_SQL.inbound);
  for (const c of chunks(inbound)) {
    const deleted = await db.prepare(`DELETE FROM inbound_emails WHERE id IN (${marks(c)}) RETURNING raw_key, content_key, attachments_json`).bind(...c)
      .all<{ raw_key: string; content_key: string; attachments_json: string }>();
    for (const m of deleted.results) {
      counts.inboundEmails++;
      blobs.push(m.raw_key, m.content_key, ...attachmentKeys(m.attachments_json));
    }
  }

  // API request logs: nothing in R2, nothing refers to them.
  const logs = (await db.prepare(PURGE_SQL.apiLogs).bind(floor, batch).run()).meta.changes ?? 0;
  counts.apiLogs += logs;
  const imports = (await db.prepare(PURGE_SQL.importFailures).bind(floor, batch).run()).meta.changes ?? 0;
  counts.importFailures += imports;

  for (let i = 0; i < blobs.length; i += 1000) {
    try {
      await env.BLOBS.delete(blobs.slice(i, i + 1000));
      counts.blobs += Math.min(1000, blobs.length - i);
    } catch (err) {
      console.error("retention: R2 objects not deleted (left unreachable)", err instanceof Error ? err.message : String(err));
    }
  }
  return emails.length === batch || deliveries.length === batch || events === batch || inbound.length === batch || logs === batch || imports === batch;
}

/** Deletes those of the candidate emails `ids` that are still expired (settled, no event since
 * `floor`), with their events; answers how many, and their R2 keys. */
export async function deleteExpiredEmails(db: D1Database, ids: readonly string[], floor: string): Promise<{ deleted: number; blobs: string[] }> {
  const out = { deleted: 0, blobs: [] as string[] };
  for (const c of chunks(ids)) {
    const [, deleted] = await db.batch<{ id: string; content_key: string | null; attachments_json: string }>([
      db.prepare(`DELETE FROM email_events WHERE email_id IN (SELECT id FROM emails WHERE id IN (${marks(c)}) AND ${emailExpired("?")})`).bind(...c, floor),
      db.prepare(`DELETE FROM emails WHERE id IN (${marks(c)}) AND ${emailExpired("?")} RETURNING id, content_key, attachments_json`).bind(...c, floor),
    ]);
    for (const e of deleted!.results) {
      out.deleted++;
      if (e.content_key) out.blobs.push(e.content_key);
      out.blobs.push(...attachmentKeys(e.attachments_json));
    }
  }
  return out;
}

/** Deletes those of the candidate deliveries `ids` that are still settled, with their attempts. */
export async function deleteSettledDeliveries(db: D1Database, ids: readonly string[]): Promise<number> {
  let n = 0;
  for (const c of chunks(ids)) {
    const [, deleted] = await db.batch([
      db.prepare(`DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE id IN (${marks(c)}) AND ${DELIVERY_SETTLED})`).bind(...c),
      db.prepare(`DELETE FROM webhook_deliveries WHERE id IN (${marks(c)}) AND ${DELIVERY_SETTLED}`).bind(...c),
    ]);
    n += deleted!.meta.changes ?? 0;
  }
  return n;
}

function chunks<T>(list: readonly T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < list.length; i += CHUNK) out.push(list.slice(i, i + CHUNK));
  return out;
}

function marks(ids: readonly string[]): string {
  return ids.map(() => "?").join(", ");
}

/** The R2 keys in an attachments_json column (sent or received mail); none when unreadable. */
function attachmentKeys(json: string): string[] {
  try {
    const list = JSON.parse(json) as Pick<StoredAttachment, "key">[];
    return Array.isArray(list) ? list.map((a) => a?.key).filter((k): k is string => typeof k === "string" && k.length > 0) : [];
  } catch {
    return [];
  }
}

/** An email's content is written to R2 before its row (sending/content.ts), so an isolate that
 * dies mid-accept leaves objects no row points at. Far longer than any accept takes: an object
 * this old without its row will never get one. */
export const ORPHAN_AGE_MS = 24 * 3_600_000;
/** Objects looked at per run; the next run goes on from where this one stopped. */
export const ORPHAN_SCAN_PER_RUN = 1_000;
const CONTENT_PREFIX = "emails/";
/** Where the sweep keeps its place between runs: R2 itself, so the sweep needs no table. */
export const ORPHAN_CURSOR_KEY = "sweeps/orphaned-content.json";

export interface OrphanSweep {
  examined: number;
  deleted: number;
  /** The listing reached the end of the prefix: the next run starts again from the first key. */
  wrapped: boolean;
}

/** Deletes sent mail's R2 objects (emails/{id}/...) older than ORPHAN_AGE_MS whose email row
 * does not exist, looking at most `limit` objects per run. An object whose email exists is never
 * deleted, however old; the retention purge takes it with its row. */
export async function sweepOrphanedContent(env: Pick<Env, "DB" | "BLOBS">, now: number, limit = ORPHAN_SCAN_PER_RUN): Promise<OrphanSweep> {
  const stored = await env.BLOBS.get(ORPHAN_CURSOR_KEY);
  const after = stored ? ((await stored.json()) as { after?: string }).after : undefined;
  const cutoff = now - ORPHAN_AGE_MS;
  const old: { key: string; emailId: string }[] = [];
  let examined = 0;
  let last: string | undefined = after;
  let wrapped = false;
  while (examined < limit) {
    const page = await env.BLOBS.list({ prefix: CONTENT_PREFIX, limit: Math.min(1000, limit - examined), ...(last ? { startAfter: last } : {}) });
    for (const o of page.objects) {
      examined++;
      last = o.key;
      const emailId = o.key.slice(CONTENT_PREFIX.length).split("/")[0]!;
      // Both clocks must say old: the upload's, and the email id's own (a UUIDv7 made at accept).
      if (o.uploaded.getTime() < cutoff && emailId < uuidv7Floor(cutoff)) old.push({ key: o.key, emailId });
    }
    if (!page.truncated) {
      wrapped = true;
      break;
    }
  }
  const existing = new Set<string>();
  for (const c of chunks([...new Set(old.map((o) => o.emailId))])) {
    const rows = await env.DB.prepare(`SELECT id FROM emails WHERE id IN (${marks(c)})`).bind(...c).all<{ id: string }>();
    for (const r of rows.results) existing.add(r.id);
  }
  const orphans = old.filter((o) => !existing.has(o.emailId)).map((o) => o.key);
  for (let i = 0; i < orphans.length; i += 1000) await env.BLOBS.delete(orphans.slice(i, i + 1000));
  await env.BLOBS.put(ORPHAN_CURSOR_KEY, JSON.stringify(wrapped ? {} : { after: last }));
  return { examined, deleted: orphans.length, wrapped };
}
