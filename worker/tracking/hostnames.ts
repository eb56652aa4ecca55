// Domains' tracking hosts as Cloudflare custom hostnames, where tern manages them
// (CLOUDFLARE_ZONE_ID and CLOUDFLARE_API_TOKEN with TRACKING_CNAME_TARGET). What tern wants is
// written in the same D1 batch as the domain change that wants or drops a host (wantStatements);
// Cloudflare is called after that commits (syncHostname, at request time, best effort), and
// the cron brings in line whatever a failed or lost call left behind (reconcileTrackingHostnames).
// A host is wanted once a domain's Tracking CNAME has been seen in DNS (proof that whoever typed
// the label controls the name), and one Cloudflare resource per zone while two accounts may hold
// the same domain name: it is wanted while any such domain row has it, deleted only when none does.
import { and, asc, eq, isNotNull, lte, sql } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { drizzle, type DrizzleD1Database } from "drizzle-orm/d1";
import type { CustomHostnamesConfig, TernConfig } from "../config.ts";
import { domains, trackingHostnames, type TrackingHostnameRow } from "../db/schema.ts";
import { USABLE_STATUSES, type RecordStatus } from "../domains/verification.ts";
import { certificateState, cloudflareCustomHostnames, validationErrorOf, type CertificateState, type CustomHostname, type CustomHostnamesApi } from "./custom-hostnames.ts";

const MINUTE = 60_000;
/** A host waiting for its certificate is looked at often at first (tenants publish the CNAME
 * and wait), then hourly. */
const PENDING_EARLY_INTERVAL = 5 * MINUTE;
const PENDING_LATER_INTERVAL = 60 * MINUTE;
const PENDING_EARLY_FOR = 24 * 60 * MINUTE;
/** Hosts the cron syncs per run, and at once: each costs a Cloudflare call or two. */
const SYNCS_PER_RUN = 25;
const PARALLEL_SYNCS = 5;
const BACKFILL_PER_RUN = 50;

type Db = Pick<Env, "DB">;

/** The custom hostnames tern manages, or null where the operator adds them by hand (or
 * nothing is tracked: no PUBLIC_URL, no tracking hosts). */
export function managedHostnames(config: Pick<TernConfig, "customHostnames" | "publicUrl" | "trackingCnameTarget">): CustomHostnamesConfig | null {
  return config.publicUrl && config.trackingCnameTarget ? config.customHostnames : null;
}

export function trackingHostname(d: { name: string; trackingSubdomain: string | null }): string | null {
  return d.trackingSubdomain ? `${d.trackingSubdomain}.${d.name}` : null;
}

/** A label is one DNS label (the API refuses dots), so a host splits at its first dot: the
 * inverse of trackingHostname. */
export function hostnameParts(hostname: string): { label: string; name: string } {
  const dot = hostname.indexOf(".");
  return { label: hostname.slice(0, dot), name: hostname.slice(dot + 1) };
}

/** A custom hostname is a billed, quota-limited resource of the operator's zone, and anyone can
 * type a tracking label for any name: tern makes one only for a domain that is verified (its
 * DKIM and SPF published: its owner controls the name's DNS) and whose Tracking CNAME has been
 * seen. Once made it stays while the domain stays usable (verified, or within its grace), so a
 * blip in the tenant's DNS never revokes the certificate links in sent mail rely on. */
const SEEN: readonly RecordStatus[] = ["verified", "temporary_failure"];

/** Whether a domain row, as a check leaves it, asks for its host (without the stickiness of a
 * host already made, which only the SQL below knows). */
export function rowWantsHost(domainStatus: string, cname: RecordStatus | undefined): boolean {
  return (USABLE_STATUSES as readonly string[]).includes(domainStatus) && cnameSeen(cname);
}

/** Whether the account's own Tracking CNAME has been seen (what lets it see the host's state). */
export function cnameSeen(cname: RecordStatus | undefined): boolean {
  return cname !== undefined && SEEN.includes(cname);
}

/** A domain row (alias `d`) wants its tracking host, in SQL: rowWantsHost, or usable with the
 * host already wanted. */
const WANTED_BY_ROW = `d.status IN (${USABLE_STATUSES.map((x) => `'${x}'`).join(", ")}) AND (json_extract(d.record_status_json, '$.tracking_cname') IN (${SEEN.map((x) => `'${x}'`).join(", ")})
  OR EXISTS (SELECT 1 FROM tracking_hostnames t WHERE t.hostname = d.tracking_subdomain || '.' || d.name AND t.wanted = 1))`;

/** Whether any domain row (of any account) wants `hostname` as its tracking host, in SQL. */
function wantedSql(hostname: string) {
  const { label, name } = hostnameParts(hostname);
  return sql<number>`EXISTS (SELECT 1 FROM ${domains} d WHERE d.tracking_subdomain = ${label} AND d.name = ${name} AND ${sql.raw(WANTED_BY_ROW)})`;
}

/** What tern wants of each host, recomputed from the domain rows: to go in the batch after the
 * domain write, so it commits with it. The host is due for a sync at once. */
export function wantStatements(db: DrizzleD1Database, hostnames: (string | null)[], now: number): BatchItem<"sqlite">[] {
  return [...new Set(hostnames.filter((h): h is string => h !== null))].map((hostname) =>
    db.insert(trackingHostnames).values({
      hostname,
      wanted: wantedSql(hostname) as unknown as boolean,
      wantedSince: now,
      nextSyncAt: now,
      createdAt: now,
      updatedAt: now,
    }).onConflictDoUpdate({
      target: trackingHostnames.hostname,
      set: {
        wanted: sql`excluded.wanted`,
        wantedSince: sql`CASE WHEN ${trackingHostnames.wanted} = 0 AND excluded.wanted = 1 THEN excluded.wanted_since ELSE ${trackingHostnames.wantedSince} END`,
        generation: sql`${trackingHostnames.generation} + 1`,
        nextSyncAt: now,
        updatedAt: now,
      },
    }),
  );
}

/** The certificate's state as tern last knew it; null where custom hostnames are not managed. */
export function certificateOf(config: Pick<TernConfig, "customHostnames" | "publicUrl" | "trackingCnameTarget">, row: Pick<TrackingHostnameRow, "status" | "sslStatus" | "validationError"> | null | undefined): CertificateState | null {
  return managedHostnames(config) ? certificateState(row ?? null) : null;
}

/** The one rule for a Tracking record: where tern manages custom hostnames, a verified CNAME
 * counts only once Cloudflare serves the host with an active certificate (before that, links
 * on it would fail TLS); a certificate Cloudflare gave up on makes the record failed. */
export function trackingRecordStatus(dns: RecordStatus | undefined, certificate: CertificateState | null): RecordStatus | undefined {
  if (certificate === null || dns !== "verified") return dns;
  if (certificate.state === "active") return "verified";
  return certificate.state === "failed" ? "failed" : "pending";
}

/** The stored state of a domain's host, for views and senders. */
export async function loadHostname(d1: D1Database, hostname: string | null): Promise<TrackingHostnameRow | null> {
  if (!hostname) return null;
  return (await drizzle(d1).select().from(trackingHostnames).where(eq(trackingHostnames.hostname, hostname)).get()) ?? null;
}

/** When the cron looks at a host again after hearing from Cloudflare: soon while its
 * certificate is on its way, not at all once it is active or stuck (a domain check refreshes it). */
function nextPoll(row: { wantedSince: number | null }, certificate: CertificateState, now: number): number | null {
  if (certificate.state !== "pending") return null;
  const since = row.wantedSince ?? now;
  return now + (now - since < PENDING_EARLY_FOR ? PENDING_EARLY_INTERVAL : PENDING_LATER_INTERVAL);
}

function backoff(attempts: number): number {
  return Math.min(MINUTE * 2 ** Math.max(0, attempts - 1), 60 * MINUTE);
}

function describe(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 500);
}

/** A sync holds its host this long at most (a few Cloudflare calls of 10 s each). */
const SYNC_LEASE_MS = 60_000;
/** A hostname Cloudflare answered about this recently is not asked again for a domain check:
 * checks are the tenant's to repeat, and the API's rate limit is the operator's, shared. */
const FRESH_FOR_MS = 60_000;
/** How far Cloudflare's created_at may precede tern's first create and still be tern's own
 * (an answer lost on the way): the two clocks differ a little. */
const OWN_CREATE_SKEW_MS = 2 * MINUTE;

export interface SyncOptions {
  /** The tenant asked for a check: a certificate still waiting for validation is validated
   * again now. */
  revalidate?: boolean;
  /** A domain check's refresh: nothing is asked of Cloudflare if it answered about this host
   * within the last minute. */
  refresh?: boolean;
}

/** Whether a hostname found in the zone is the one tern's own earlier create made. */
function madeByUs(found: CustomHostname, createRequestedAt: number | null): boolean {
  const created = typeof found.created_at === "string" ? Date.parse(found.created_at) : NaN;
  return createRequestedAt !== null && Number.isFinite(created) && created >= createRequestedAt - OWN_CREATE_SKEW_MS;
}

/** Brings one host in line with what the domain rows want: creates it (or adopts the zone's
 * existing one), refreshes its state, or deletes it when no domain wants it any more (only one
 * tern made: an adopted one is left in the zone). One sync of a host at a time (a lease on its
 * row); never throws for Cloudflare's sake: a failed call is recorded and the cron tries again
 * later. Answers the row as it now stands (null: no row, nothing wanted). */
export async function syncHostname(env: Db, config: TernConfig, hostname: string, now: number, api?: CustomHostnamesApi, opts: SyncOptions = {}): Promise<TrackingHostnameRow | null> {
  const managed = managedHostnames(config);
  if (!managed) return null;
  const cf = api ?? cloudflareCustomHostnames(managed);
  const db = drizzle(env.DB);
  const [wantedRows, rows] = await db.batch([
    db.select({ wanted: wantedSql(hostname) }).from(sql`(select 1)`),
    db.select().from(trackingHostnames).where(eq(trackingHostnames.hostname, hostname)),
  ]);
  const wanted = wantedRows[0]?.wanted === 1;
  let row = rows[0];
  if (!row && !wanted) return null;
  if (!row) {
    // A domain that wanted the host before tern managed hostnames (or before its row was lost).
    await db.batch(wantStatements(db, [hostname], now) as [BatchItem<"sqlite">]);
    row = (await loadHostname(env.DB, hostname))!;
  }
  if (opts.refresh && wanted && row.cloudflareId && row.syncedAt !== null && now - row.syncedAt < FRESH_FOR_MS) return row;
  // The lease: another sync of this host under way leaves it due for the cron, not raced.
  const leased = await env.DB.prepare("UPDATE tracking_hostnames SET sync_until = ?1 WHERE hostname = ?2 AND (sync_until IS NULL OR sync_until <= ?3)")
    .bind(now + SYNC_LEASE_MS, hostname, now).run();
  if (leased.meta.changes === 0) {
    await db.update(trackingHostnames).set({ nextSyncAt: now + SYNC_LEASE_MS }).where(eq(trackingHostnames.hostname, hostname));
    return row;
  }
  const seen = row.generation;
  // Writes of what was learnt leave alone what a newer desire wrote: the host stays due then.
  const unchanged = sql`${trackingHostnames.generation} = ${seen}`;
  try {
    if (wanted) {
      let found: CustomHostname | null = row.cloudflareId ? await cf.get(row.cloudflareId) : null;
      let owned = found ? row.owned : false;
      if (!found) {
        // Recorded before the call: an answer lost on the way still leaves a trace to look for.
        if (row.createRequestedAt === null) await db.update(trackingHostnames).set({ createRequestedAt: now }).where(eq(trackingHostnames.hostname, hostname));
        const made = await cf.create(hostname);
        found = made.hostname;
        // Already there at tern's first create: the zone's own, adopted. At a retry, it is the
        // earlier create's if Cloudflare made it after that was sent.
        owned = !made.adopted || madeByUs(made.hostname, row.createRequestedAt);
      }
      if (opts.revalidate && found.ssl?.status === "pending_validation") found = await cf.revalidate(found.id);
      const learnt = { status: found.status ?? "pending", sslStatus: found.ssl?.status ?? null, validationError: validationErrorOf(found) };
      const certificate = certificateState(learnt);
      await db.update(trackingHostnames).set({
        ...learnt,
        cloudflareId: found.id,
        owned,
        createRequestedAt: row.createRequestedAt ?? now,
        lastError: null,
        attempts: 0,
        syncedAt: now,
        syncUntil: null,
        nextSyncAt: sql`CASE WHEN ${unchanged} THEN ${nextPoll(row, certificate, now)} ELSE ${now} END`,
        updatedAt: now,
      }).where(eq(trackingHostnames.hostname, hostname));
    } else {
      if (row.cloudflareId && row.owned) await cf.remove(row.cloudflareId);
      else if (row.cloudflareId) console.log("custom hostname left in the zone: tern adopted it, did not make it", hostname);
      else if (row.createRequestedAt !== null) {
        const found = await cf.find(hostname);
        if (found && madeByUs(found, row.createRequestedAt)) await cf.remove(found.id);
      }
      // Gone at Cloudflare; the row goes too unless a domain wanted the host meanwhile, which
      // leaves it due so that the next sync creates it again.
      await db.batch([
        db.update(trackingHostnames).set({ cloudflareId: null, owned: false, status: null, sslStatus: null, validationError: null, createRequestedAt: null, lastError: null, attempts: 0, syncedAt: now, syncUntil: null, nextSyncAt: now, updatedAt: now })
          .where(eq(trackingHostnames.hostname, hostname)),
        db.delete(trackingHostnames).where(and(eq(trackingHostnames.hostname, hostname), sql`NOT ${wantedSql(hostname)}`)),
      ]);
    }
  } catch (err) {
    const attempts = row.attempts + 1;
    console.error("custom hostname sync failed", hostname, describe(err));
    await db.update(trackingHostnames).set({ lastError: describe(err), attempts, syncUntil: null, nextSyncAt: sql`CASE WHEN ${unchanged} THEN ${now + backoff(attempts)} ELSE ${now} END`, updatedAt: now })
      .where(eq(trackingHostnames.hostname, hostname));
  }
  return loadHostname(env.DB, hostname);
}

/** syncHostname for each host a request's change touched, after its D1 write committed; a
 * failure (even D1's) is logged and left to the cron, never the request's error. */
export async function syncAfterChange(env: Db, config: TernConfig, hostnames: (string | null)[], now: number, opts: SyncOptions = {}): Promise<Map<string, TrackingHostnameRow | null>> {
  const out = new Map<string, TrackingHostnameRow | null>();
  if (!managedHostnames(config)) return out;
  for (const h of new Set(hostnames.filter((x): x is string => x !== null))) {
    try {
      out.set(h, await syncHostname(env, config, h, now, undefined, opts));
    } catch (err) {
      console.error("custom hostname sync failed", h, describe(err));
      out.set(h, await loadHostname(env.DB, h).catch(() => null));
    }
  }
  return out;
}

/** The cron's share: rows for hosts domains want but no row records (tern began managing
 * hostnames after they were set), hosts no domain wants any more (their domains went with a
 * deleted account), and every host due for a sync. */
export async function reconcileTrackingHostnames(env: Db, config: TernConfig, now: number, api?: CustomHostnamesApi, onCertificateChange?: (hostname: string) => Promise<void>): Promise<number> {
  if (!managedHostnames(config)) return 0;
  const db = drizzle(env.DB);
  await env.DB.batch([
    env.DB.prepare(
      `INSERT OR IGNORE INTO tracking_hostnames (hostname, wanted, wanted_since, next_sync_at, created_at, updated_at)
       SELECT DISTINCT d.tracking_subdomain || '.' || d.name, 1, ?1, ?1, ?1, ?1 FROM domains d
       WHERE d.tracking_subdomain IS NOT NULL AND ${WANTED_BY_ROW}
         AND NOT EXISTS (SELECT 1 FROM tracking_hostnames t WHERE t.hostname = d.tracking_subdomain || '.' || d.name)
       LIMIT ${BACKFILL_PER_RUN}`,
    ).bind(now),
    env.DB.prepare(
      `UPDATE tracking_hostnames SET wanted = 0, generation = generation + 1, next_sync_at = ?1, updated_at = ?1
       WHERE wanted = 1 AND NOT EXISTS (SELECT 1 FROM domains d
         WHERE d.tracking_subdomain = substr(tracking_hostnames.hostname, 1, instr(tracking_hostnames.hostname, '.') - 1)
           AND d.name = substr(tracking_hostnames.hostname, instr(tracking_hostnames.hostname, '.') + 1) AND ${WANTED_BY_ROW})`,
    ).bind(now),
  ]);
  // The rows as they were before their syncs: what a sync changed is told against them.
  const due = await db.select().from(trackingHostnames)
    .where(and(isNotNull(trackingHostnames.nextSyncAt), lte(trackingHostnames.nextSyncAt, now)))
    .orderBy(asc(trackingHostnames.nextSyncAt)).limit(SYNCS_PER_RUN);
  const queue = [...due];
  await Promise.all(Array.from({ length: PARALLEL_SYNCS }, async () => {
    for (let before = queue.shift(); before; before = queue.shift()) {
      const h = before.hostname;
      try {
        const after = await syncHostname(env, config, h, now, api);
        // A certificate issued (or given up on) between domain checks changes the domains'
        // Tracking record: their webhooks hear it now, not at the next check.
        if (onCertificateChange && after && certificateState(before).state !== certificateState(after).state) await onCertificateChange(h);
      } catch (err) {
        console.error("custom hostname sync failed", h, describe(err));
      }
    }
  }));
  return due.length;
}
