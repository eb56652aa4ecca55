// Domains of an account: create (with a DKIM key pair), read, change, delete, check over DNS,
// rotate the DKIM key. Every change is written together with its domain.* event in one D1
// batch. Routes stay thin; the rules live in verification.ts.
import { and, asc, eq, inArray, isNotNull, isNull, lte, ne, sql } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { drizzle, type DrizzleD1Database } from "drizzle-orm/d1";
import type { TernConfig } from "../config.ts";
import { dkimKeys, domains, type DkimKeyRow, type DomainRow, type TrackingHostnameRow } from "../db/schema.ts";
import { generateDkimKey, newSelector, sealPrivateKey, SELECTOR_LENGTH } from "../dkim/keys.ts";
import type { DkimAlgorithm } from "../dkim/sign.ts";
import { ApiError } from "../errors.ts";
import { uuidv7 } from "../ids.ts";
import { finishPage, pageQuery, type Page } from "../pagination.ts";
import { announceHeard, domainOutboxEvent, outboxInsert, type OutboxEvent } from "../events/outbox.ts";
import type { DomainEventType } from "../webhooks/payloads.ts";
import { forgetSendingIdentities } from "../delivery/sending-identity.ts";
import { forgetAccountDomains } from "../sending/sender.ts";
import { isRegion, REGIONS } from "../regions.ts";
import { dohResolver, type Resolver } from "./dns.ts";
import type { CertificateState } from "../tracking/custom-hostnames.ts";
import { certificateOf, cnameSeen, hostnameParts, loadHostname, rowWantsHost, managedHostnames, syncAfterChange, trackingHostname, trackingRecordStatus, wantStatements } from "../tracking/hostnames.ts";
import {
  dmarcOf,
  evaluate,
  expectedRecords,
  judge,
  organizationalDomain,
  recommendedDmarc,
  type DmarcInfo,
  type DomainState,
  type DomainStatus,
  type ExpectedRecord,
  type HostsConfig,
  type Judgement,
  type KeyInfo,
  type RecordStatus,
} from "./verification.ts";

export type DkimChoice = "rsa" | "ed25519" | "rsa+ed25519";

export interface DomainRecordView {
  record: ExpectedRecord["record"];
  name: string;
  type: ExpectedRecord["type"];
  ttl: "Auto";
  status: RecordStatus;
  value: string;
  priority?: number;
}

export interface DomainView {
  object: "domain";
  id: string;
  name: string;
  status: DomainStatus;
  created_at: string;
  region: string;
  custom_return_path: string;
  open_tracking: boolean;
  click_tracking: boolean;
  tls: "opportunistic" | "enforced";
  receiving: boolean;
  /** Resend's form of `receiving` (and of sending, which a tern domain always has on). */
  capabilities: DomainCapabilities;
  /** The label of the domain's own host for open and click links (`links`: links.<name>), used
   * once its Tracking record is verified; null: links go through the deployment's PUBLIC_URL. */
  tracking_subdomain: string | null;
  records: DomainRecordView[];
  /** What the last check found at _dmarc; null before the first check. */
  dmarc: DmarcInfo | null;
}

export interface DomainCapabilities {
  sending: "enabled" | "disabled";
  receiving: "enabled" | "disabled";
}

/** Resend's `capabilities` object: typed clients (resend-rust) require it on every domain. */
export function capabilities(receiving: boolean): DomainCapabilities {
  return { sending: "enabled", receiving: receiving ? "enabled" : "disabled" };
}

export interface DomainWithKeys {
  row: DomainRow;
  keys: DkimKeyRow[];
  /** Its tracking host's custom hostname as tern last knew it (worker/tracking/hostnames.ts);
   * null or undefined: none known, its certificate taken as still pending where tern manages them. */
  hostname?: TrackingHostnameRow | null;
}

/** The region's SPF include and bounce host (worker/regions.ts), the deployment's MX. */
export function hostsFor(config: TernConfig, region: string): HostsConfig {
  const { bounceHost, spfInclude } = config.region(region);
  return { bounceHost, spfInclude, inboundMxHost: config.inboundMxHost, trackingTarget: trackingTarget(config) };
}

/** What a domain's tracking host is a CNAME of (TRACKING_CNAME_TARGET); null when the
 * deployment serves no tracking hosts, or tracks nothing (no PUBLIC_URL). */
export function trackingTarget(config: Pick<TernConfig, "publicUrl" | "trackingCnameTarget">): string | null {
  return config.publicUrl ? config.trackingCnameTarget : null;
}

function keyInfo(k: DkimKeyRow): KeyInfo {
  return { id: k.id, selector: k.selector, algorithm: k.algorithm, publicKey: k.publicKey, state: k.state, status: k.status };
}

function recordStatuses(row: DomainRow, keys: DkimKeyRow[]): Record<string, RecordStatus> {
  const out = JSON.parse(row.recordStatusJson) as Record<string, RecordStatus>;
  for (const k of keys) out[`dkim:${k.id}`] = k.status as RecordStatus;
  return out;
}

/** The records the domain must publish: the one list the API, the dashboard, the checks and
 * auto-configure (auto-configure.ts) all read. */
export function expectedFor(d: DomainWithKeys, config: TernConfig): ExpectedRecord[] {
  return expectedRecords({ name: d.row.name, returnPath: d.row.returnPath, receiving: d.row.receiving, trackingSubdomain: d.row.trackingSubdomain }, d.keys.map(keyInfo), hostsFor(config, d.row.region));
}

export function domainView(d: DomainWithKeys, config: TernConfig): DomainView {
  const statuses = recordStatuses(d.row, d.keys);
  // The Tracking record counts once its host can serve links (worker/tracking/hostnames.ts).
  const tracking = trackingRecordStatus(statuses["tracking_cname"], certificateOf(config, d.hostname));
  if (tracking !== undefined) statuses["tracking_cname"] = tracking;
  return {
    object: "domain",
    id: d.row.id,
    name: d.row.name,
    status: d.row.status as DomainStatus,
    created_at: new Date(d.row.createdAt).toISOString(),
    region: d.row.region,
    custom_return_path: d.row.returnPath,
    open_tracking: d.row.openTracking,
    click_tracking: d.row.clickTracking,
    tls: d.row.tls,
    receiving: d.row.receiving,
    capabilities: capabilities(d.row.receiving),
    tracking_subdomain: d.row.trackingSubdomain,
    records: expectedFor(d, config).map((e) => ({
      record: e.record,
      name: e.name,
      type: e.type,
      ttl: "Auto" as const,
      status: statuses[e.id] ?? "not_started",
      value: e.value,
      ...(e.priority !== undefined ? { priority: e.priority } : {}),
    })),
    dmarc: d.row.dmarcJson ? (JSON.parse(d.row.dmarcJson) as DmarcInfo) : null,
  };
}

type Events = Pick<Env, "DB" | "WEBHOOK_QUEUE">;

/** The event's webhook outbox row (written only while an endpoint of the account subscribes to
 * its type); the event is collected in `outbox` to be announced once the batch committed. */
function eventStatements(db: DrizzleD1Database, type: DomainEventType, view: DomainView, accountId: string, now: number, outbox: OutboxEvent[]): BatchItem<"sqlite">[] {
  const event = domainOutboxEvent(accountId, type, {
    id: view.id,
    name: view.name,
    status: view.status,
    region: view.region,
    createdAt: view.created_at,
    records: view.records,
  }, now);
  outbox.push(event);
  return [outboxInsert(db, event)];
}

export async function loadDomain(d1: D1Database, accountId: string, id: string): Promise<DomainWithKeys | null> {
  const db = drizzle(d1);
  const [rows, keys] = await db.batch([
    db.select().from(domains).where(and(eq(domains.id, id), eq(domains.accountId, accountId))),
    db.select().from(dkimKeys).where(and(eq(dkimKeys.domainId, id), eq(dkimKeys.accountId, accountId), ne(dkimKeys.state, "retired"))).orderBy(asc(dkimKeys.createdAt)),
  ]);
  const row = rows[0];
  if (!row) return null;
  return { row, keys, hostname: await loadHostname(d1, trackingHostname(row)) };
}

async function newKeyRow(config: TernConfig, accountId: string, domainId: string, algorithm: DkimAlgorithm, state: "active" | "pending", now: number): Promise<DkimKeyRow> {
  const generated = await generateDkimKey(algorithm);
  const selector = newSelector();
  try {
    return {
      id: uuidv7(now),
      domainId,
      accountId,
      selector,
      algorithm,
      publicKey: generated.publicKey,
      privateKeySealed: await sealPrivateKey(config.masterKey, domainId, selector, generated.pkcs8),
      state,
      status: "not_started",
      createdAt: now,
      activatedAt: state === "active" ? now : null,
      retiredAt: null,
    };
  } finally {
    generated.pkcs8.fill(0);
  }
}

export interface CreateDomainInput {
  name: string;
  region: string;
  customReturnPath: string;
  openTracking: boolean;
  clickTracking: boolean;
  tls: "opportunistic" | "enforced";
  receiving: boolean;
  trackingSubdomain?: string | null;
  dkimAlgorithm: DkimChoice;
}

/** DNS's own limit on a name, without its final dot. */
const MAX_DNS_NAME = 253;
/** The longest domain name whose DKIM record's name still fits in DNS. */
export const MAX_SENDING_DOMAIN_NAME = MAX_DNS_NAME - SELECTOR_LENGTH - "._domainkey.".length;

/** Every record a domain asks for must be publishable: a long domain name (or label) can make
 * its DKIM, return-path or Tracking record's name longer than DNS allows. */
function checkRecordNames(name: string, returnPath: string | null, trackingLabel: string | null, opts: { dkim: boolean } = { dkim: true }): void {
  const dkim = SELECTOR_LENGTH + "._domainkey.".length + name.length;
  if (opts.dkim && dkim > MAX_DNS_NAME) {
    throw new ApiError("validation_error", `\`name\` is too long: its DKIM record (<selector>._domainkey.${name.slice(0, 20)}...) would be ${dkim} characters, past DNS's ${MAX_DNS_NAME}. A domain name may have at most ${MAX_SENDING_DOMAIN_NAME} characters.`);
  }
  for (const [field, label] of [["custom_return_path", returnPath], ["tracking_subdomain", trackingLabel]] as const) {
    if (label !== null && label.length + 1 + name.length > MAX_DNS_NAME) {
      throw new ApiError("validation_error", `\`${field}\` is too long for this domain: ${label}.<domain> would be ${label.length + 1 + name.length} characters, past DNS's ${MAX_DNS_NAME}. Use a label of at most ${Math.max(1, MAX_DNS_NAME - 1 - name.length)} characters.`);
    }
  }
}

/** A CNAME cannot share its name with other records: the tracking host must not be the
 * return path's (its MX and SPF TXT). */
function checkTrackingLabel(label: string | null, returnPath: string): void {
  if (label !== null && label === returnPath) {
    throw new ApiError("validation_error", `\`tracking_subdomain\` must differ from the return path (\`${returnPath}\`): a CNAME cannot share its name with the return path's MX and TXT records.`);
  }
}

/** Where tracking hosts are offered, an account's domains with one are capped: each is a
 * custom hostname of the operator's zone, billed past the included ones, and a zone's quota
 * is shared by every account (TRACKING_HOSTS_PER_ACCOUNT). */
async function checkTrackingHostCap(d1: D1Database, config: TernConfig, accountId: string, exceptDomainId: string | null): Promise<void> {
  const cap = config.trackingHostsPerAccount;
  if (!config.trackingCnameTarget || cap === null) return;
  const others = await drizzle(d1).select({ n: sql<number>`count(*)` }).from(domains)
    .where(and(eq(domains.accountId, accountId), isNotNull(domains.trackingSubdomain), exceptDomainId ? ne(domains.id, exceptDomainId) : undefined)).get();
  if ((others?.n ?? 0) >= cap) {
    throw new ApiError("validation_error", `This account already has ${cap} domains with a \`tracking_subdomain\`, the most this deployment allows. Remove the tracking subdomain of a domain you no longer track, or ask the operator to raise TRACKING_HOSTS_PER_ACCOUNT.`);
  }
}

function domainExists(name: string): ApiError {
  return new ApiError("validation_error", `The domain ${name} has already been added to this account.`);
}

/** The account's domain with its live keys, or 404 (another account's is not found either). */
export async function findDomain(d1: D1Database, accountId: string, id: string): Promise<DomainWithKeys> {
  const found = await loadDomain(d1, accountId, id);
  if (!found) throw new ApiError("not_found", "Domain not found.");
  return found;
}

export async function listDomains(d1: D1Database, accountId: string, page: Page) {
  const q = pageQuery(domains.id, page, eq(domains.accountId, accountId));
  const rows = await drizzle(d1)
    .select({ id: domains.id, name: domains.name, status: domains.status, createdAt: domains.createdAt, region: domains.region, openTracking: domains.openTracking, clickTracking: domains.clickTracking, receiving: domains.receiving })
    .from(domains).where(q.where).orderBy(q.orderBy).limit(q.limit);
  return finishPage(rows.map((r) => ({
    id: r.id, name: r.name, status: r.status, created_at: new Date(r.createdAt).toISOString(), region: r.region,
    open_tracking: r.openTracking, click_tracking: r.clickTracking, capabilities: capabilities(r.receiving),
  })), page);
}

export async function createDomain(env: Events, config: TernConfig, accountId: string, input: CreateDomainInput, now: number): Promise<DomainView> {
  // The dashboard calls this too: an unknown region never reaches the table.
  if (!isRegion(input.region)) throw new ApiError("invalid_region", `\`region\` must be one of ${REGIONS.join(", ")}.`);
  const db = drizzle(env.DB);
  const outbox: OutboxEvent[] = [];
  checkTrackingLabel(input.trackingSubdomain ?? null, input.customReturnPath);
  checkRecordNames(input.name, input.customReturnPath, input.trackingSubdomain ?? null);
  if (input.trackingSubdomain) await checkTrackingHostCap(env.DB, config, accountId, null);
  const existing = await db.select({ id: domains.id }).from(domains).where(and(eq(domains.accountId, accountId), eq(domains.name, input.name))).get();
  if (existing) throw domainExists(input.name);
  const id = uuidv7(now);
  const algorithms: DkimAlgorithm[] = input.dkimAlgorithm === "rsa+ed25519" ? ["rsa", "ed25519"] : [input.dkimAlgorithm];
  const keys = await Promise.all(algorithms.map((a) => newKeyRow(config, accountId, id, a, "active", now)));
  const row: DomainRow = {
    id,
    accountId,
    name: input.name,
    region: input.region,
    status: "not_started",
    returnPath: input.customReturnPath,
    openTracking: input.openTracking,
    clickTracking: input.clickTracking,
    trackingSubdomain: input.trackingSubdomain ?? null,
    tls: input.tls,
    receiving: input.receiving,
    recordStatusJson: "{}",
    dmarcJson: null,
    verificationStartedAt: null,
    failingSince: null,
    lastCheckedAt: null,
    lastCheckJson: null,
    nextCheckAt: null,
    createdAt: now,
    updatedAt: now,
  };
  const view = domainView({ row, keys }, config);
  // No custom hostname yet: one is made once the domain's Tracking CNAME is seen (checkDomain).
  try {
    await db.batch([db.insert(domains).values(row), db.insert(dkimKeys).values(keys), ...eventStatements(db, "domain.created", view, accountId, now, outbox)]);
  } catch (err) {
    // Two creates racing for one name: the unique index decides.
    if (/UNIQUE/i.test(String(err))) throw domainExists(input.name);
    throw err;
  }
  await announceHeard(env, outbox);
  return view;
}

export interface DomainPatch {
  openTracking?: boolean;
  clickTracking?: boolean;
  tls?: "opportunistic" | "enforced";
  receiving?: boolean;
  /** A new tracking host's label; null removes it. */
  trackingSubdomain?: string | null;
}

export async function updateDomain(env: Events, config: TernConfig, current: DomainWithKeys, patch: DomainPatch, now: number): Promise<DomainView> {
  const db = drizzle(env.DB);
  const outbox: OutboxEvent[] = [];
  const row: DomainRow = {
    ...current.row,
    openTracking: patch.openTracking ?? current.row.openTracking,
    clickTracking: patch.clickTracking ?? current.row.clickTracking,
    tls: patch.tls ?? current.row.tls,
    receiving: patch.receiving ?? current.row.receiving,
    trackingSubdomain: patch.trackingSubdomain === undefined ? current.row.trackingSubdomain : patch.trackingSubdomain,
    updatedAt: now,
  };
  checkTrackingLabel(row.trackingSubdomain, row.returnPath);
  if (row.trackingSubdomain !== current.row.trackingSubdomain) checkRecordNames(row.name, null, row.trackingSubdomain, { dkim: false });
  if (row.trackingSubdomain && !current.row.trackingSubdomain) await checkTrackingHostCap(env.DB, config, row.accountId, row.id);
  let statuses = JSON.parse(row.recordStatusJson) as Record<string, RecordStatus>;
  if (row.receiving !== current.row.receiving) {
    // The record set changed: a verified domain must now also show its Receiving MX (checked
    // at once by the caller); turning receiving off drops it.
    statuses = { ...statuses };
    delete statuses["receiving_mx"];
    row.recordStatusJson = JSON.stringify(statuses);
  }
  if (row.trackingSubdomain !== current.row.trackingSubdomain) {
    // A new tracking host is not used before its own record is seen.
    statuses = { ...statuses };
    delete statuses["tracking_cname"];
    row.recordStatusJson = JSON.stringify(statuses);
  }
  const oldHost = trackingHostname(current.row);
  const newHost = trackingHostname(row);
  // A changed label may drop the old host (unless a twin still has it); the new one is wanted
  // once its CNAME is seen, at a check.
  const hostsTouched = oldHost !== null && oldHost !== newHost && managedHostnames(config) ? [oldHost] : [];
  const view = domainView({ row, keys: current.keys, hostname: oldHost === newHost ? current.hostname : null }, config);
  await db.batch([
    db.update(domains).set({
      openTracking: row.openTracking,
      clickTracking: row.clickTracking,
      tls: row.tls,
      receiving: row.receiving,
      trackingSubdomain: row.trackingSubdomain,
      recordStatusJson: row.recordStatusJson,
      updatedAt: now,
    }).where(eq(domains.id, row.id)),
    ...eventStatements(db, "domain.updated", view, row.accountId, now, outbox),
    ...wantStatements(db, hostsTouched, now),
  ]);
  await announceHeard(env, outbox);
  forgetAccountDomains(row.accountId);
  forgetSendingIdentities(row.accountId);
  if (hostsTouched.length > 0) await syncAfterChange(env, config, hostsTouched, now);
  return view;
}

/** updateDomain for the API: a verified domain that now also receives shows the new record's
 * real status (checked at once). */
export async function patchDomain(env: Events, config: TernConfig, accountId: string, id: string, patch: DomainPatch, now: number): Promise<DomainView> {
  const current = await findDomain(env.DB, accountId, id);
  const view = await updateDomain(env, config, current, patch, now);
  const newRecord = (patch.receiving !== undefined && patch.receiving !== current.row.receiving)
    || (patch.trackingSubdomain !== undefined && patch.trackingSubdomain !== current.row.trackingSubdomain && patch.trackingSubdomain !== null);
  if (newRecord && current.row.status !== "not_started") {
    const reloaded = await findDomain(env.DB, accountId, id);
    return domainView(await checkDomain(env, config, reloaded, now), config);
  }
  return view;
}

export async function deleteDomain(env: Events, config: TernConfig, current: DomainWithKeys, now: number): Promise<void> {
  const db = drizzle(env.DB);
  const outbox: OutboxEvent[] = [];
  const view = domainView(current, config);
  await db.batch([
    db.delete(dkimKeys).where(eq(dkimKeys.domainId, current.row.id)),
    db.delete(domains).where(eq(domains.id, current.row.id)),
    ...eventStatements(db, "domain.deleted", view, current.row.accountId, now, outbox),
    // The host goes once no other domain row (a twin in another account) has it.
    ...(managedHostnames(config) ? wantStatements(db, [trackingHostname(current.row)], now) : []),
  ]);
  await announceHeard(env, outbox);
  forgetAccountDomains(current.row.accountId);
  forgetSendingIdentities(current.row.accountId);
  if (managedHostnames(config)) await syncAfterChange(env, config, [trackingHostname(current.row)], now);
}

/** The algorithm a rotation makes a key of: the one asked for, else the active key's (the
 * first, for a domain signing with both), else RSA. */
export function rotationAlgorithm(current: DomainWithKeys, requested?: DkimAlgorithm): DkimAlgorithm {
  return requested ?? current.keys.find((k) => k.state === "active")?.algorithm ?? "rsa";
}

/** Starts a rotation: a new key of `algorithm` is published and checked while the current
 * one keeps signing; once its record is verified it takes over and the old key retires. A
 * rotation already waiting for its record is replaced. */
export async function rotateDkim(env: Events, config: TernConfig, current: DomainWithKeys, requested: DkimAlgorithm | undefined, now: number): Promise<DomainWithKeys> {
  const algorithm = rotationAlgorithm(current, requested);
  const db = drizzle(env.DB);
  const outbox: OutboxEvent[] = [];
  const key = await newKeyRow(config, current.row.accountId, current.row.id, algorithm, "pending", now);
  const stale = current.keys.filter((k) => k.state === "pending" && k.algorithm === algorithm).map((k) => k.id);
  const keys = [...current.keys.filter((k) => !stale.includes(k.id)), key];
  const row = { ...current.row, updatedAt: now };
  const view = domainView({ row, keys }, config);
  // The cron looks for the new record soon, whatever the domain's own schedule.
  const soon = now + 5 * 60_000;
  if (row.status !== "not_started") row.nextCheckAt = Math.min(row.nextCheckAt ?? soon, soon);
  const statements: BatchItem<"sqlite">[] = [
    db.insert(dkimKeys).values(key),
    db.update(domains).set({ nextCheckAt: row.nextCheckAt, updatedAt: now }).where(eq(domains.id, row.id)),
    ...eventStatements(db, "domain.updated", view, row.accountId, now, outbox),
  ];
  if (stale.length > 0) statements.unshift(db.delete(dkimKeys).where(inArray(dkimKeys.id, stale)));
  await db.batch(statements as [BatchItem<"sqlite">]);
  await announceHeard(env, outbox);
  return { row, keys };
}

/** What the last check saw (kept for the dashboard; the API keeps Resend's shapes). */
export interface LastCheck {
  /** Why the resolver could not answer, when any lookup failed: those records are unknown. */
  error: string | null;
  /** By ExpectedRecord.id: the judgement, and for a wrong value what was found instead. */
  records: Record<string, { result: Judgement; found?: string[] }>;
}

export function lastCheckOf(row: DomainRow): LastCheck | null {
  if (!row.lastCheckJson) return null;
  try {
    return JSON.parse(row.lastCheckJson) as LastCheck;
  } catch {
    return null;
  }
}

/** The domain's records for the dashboard: the API's, each with its id and the last check's
 * finding, plus the recommended DMARC record and when the domain was and will be checked. */
export interface DomainDetails {
  view: DomainView;
  records: (DomainRecordView & { id: string; fqdn: string; last?: LastCheck["records"][string] })[];
  dmarc: { fqdn: string; value: string; found: DmarcInfo | null };
  lastCheckedAt: number | null;
  nextCheckAt: number | null;
  checkError: string | null;
  /** The tracking host's certificate where tern manages custom hostnames; null otherwise. */
  certificate: CertificateState | null;
}

export function domainDetails(d: DomainWithKeys, config: TernConfig): DomainDetails {
  const view = domainView(d, config);
  const last = lastCheckOf(d.row);
  const records = expectedFor(d, config).map((e, i) => ({ ...view.records[i]!, id: e.id, fqdn: e.fqdn, ...(last?.records[e.id] ? { last: last.records[e.id] } : {}) }));
  return {
    view,
    records,
    dmarc: { ...recommendedDmarc(d.row.name), found: view.dmarc },
    lastCheckedAt: d.row.lastCheckedAt,
    nextCheckAt: d.row.nextCheckAt,
    checkError: last?.error ?? null,
    // Only once this account's own CNAME was seen: a twin holding the name learns nothing of
    // the host another account's records made.
    certificate: d.row.trackingSubdomain && cnameSeen(recordStatuses(d.row, d.keys)["tracking_cname"]) ? certificateOf(config, d.hostname) : null,
  };
}

const FOUND_VALUES = 3;
const FOUND_CHARS = 300;

/** Looks every record up (in parallel) and judges it; DMARC is read for information. */
async function lookUp(d: DomainWithKeys, config: TernConfig, resolver: Resolver): Promise<{ expected: ExpectedRecord[]; judged: Record<string, Judgement>; dmarc: DmarcInfo | null | undefined; last: LastCheck }> {
  const expected = expectedFor(d, config);
  const judged: Record<string, Judgement> = {};
  const name = d.row.name;
  const org = organizationalDomain(name);
  const [results, own, inherited] = await Promise.all([
    Promise.all(expected.map((e) => resolver.lookup(e.fqdn, e.type))),
    resolver.lookup(`_dmarc.${name}`, "TXT"),
    org ? resolver.lookup(`_dmarc.${org}`, "TXT") : Promise.resolve(null),
  ]);
  const last: LastCheck = { error: null, records: {} };
  expected.forEach((e, i) => {
    const lookup = results[i]!;
    judged[e.id] = judge(e, lookup, hostsFor(config, d.row.region));
    if (lookup.kind === "error") last.error ??= lookup.message;
    last.records[e.id] = judged[e.id] === "mismatch" && lookup.kind === "records"
      ? { result: "mismatch", found: lookup.values.slice(0, FOUND_VALUES).map((v) => (v.length > FOUND_CHARS ? `${v.slice(0, FOUND_CHARS)}…` : v)) }
      : { result: judged[e.id]! };
  });
  // undefined: the resolver failed, keep what was known.
  let dmarc: DmarcInfo | null | undefined = dmarcOf(own, false) ?? (inherited ? dmarcOf(inherited, true) : null);
  if (!dmarc && (own.kind === "error" || inherited?.kind === "error")) dmarc = undefined;
  return { expected, judged, dmarc, last };
}

export interface CheckOptions {
  resolver?: Resolver;
  /** POST /verify: a failed domain gets a new 72-hour window. */
  restart?: boolean;
}

/** Checks a domain's records now and records the outcome (and a domain.updated event when
 * the status or a record's status changed). */
export async function checkDomain(env: Events, config: TernConfig, current: DomainWithKeys, now: number, opts: CheckOptions = {}): Promise<DomainWithKeys> {
  const resolver = opts.resolver ?? dohResolver(config.dohUrl);
  const host = trackingHostname(current.row);
  const managed = host !== null && managedHostnames(config) !== null;
  const hostnameBefore = managed ? (current.hostname !== undefined ? current.hostname : await loadHostname(env.DB, host)) : null;
  const { expected, judged, dmarc, last } = await lookUp(current, config, resolver);
  const prevStatuses = recordStatuses(current.row, current.keys);
  // A host already wanted (its CNAME seen before) has its state refreshed with the check (its
  // certificate decides the record); a check the tenant asked for revalidates it at once.
  const wantedBefore = managed && rowWantsHost(current.row.status, prevStatuses["tracking_cname"]);
  const revalidate = judged["tracking_cname"] === "match" && opts.restart === true;
  let hostnameAfter = wantedBefore ? (await syncAfterChange(env, config, [host], now, { revalidate, refresh: true })).get(host) ?? null : hostnameBefore;
  const restart = opts.restart && !["verified", "temporary_failure"].includes(current.row.status);
  const prev: DomainState = {
    status: current.row.status as DomainStatus,
    records: prevStatuses,
    verificationStartedAt: restart ? now : current.row.verificationStartedAt,
    failingSince: current.row.failingSince,
    nextCheckAt: current.row.nextCheckAt,
  };
  const next = evaluate(prev, expected, judged, now);

  const keys = current.keys.map((k) => {
    const updated: DkimKeyRow = { ...k, status: next.records[`dkim:${k.id}`] ?? k.status };
    if (next.promoteKeyIds.includes(k.id)) return { ...updated, state: "active" as const, activatedAt: now };
    if (next.retireKeyIds.includes(k.id)) return { ...updated, state: "retired" as const, retiredAt: now };
    return updated;
  });
  const otherStatuses: Record<string, RecordStatus> = {};
  for (const [id, s] of Object.entries(next.records)) if (!id.startsWith("dkim:")) otherStatuses[id] = s;
  const row: DomainRow = {
    ...current.row,
    status: next.status,
    recordStatusJson: JSON.stringify(otherStatuses),
    dmarcJson: dmarc === undefined ? current.row.dmarcJson : dmarc === null ? JSON.stringify({ found: false, policy: null, record: null, inherited: false }) : JSON.stringify(dmarc),
    verificationStartedAt: next.verificationStartedAt,
    failingSince: next.failingSince,
    lastCheckedAt: now,
    lastCheckJson: JSON.stringify(last),
    nextCheckAt: next.nextCheckAt,
  };

  const db = drizzle(env.DB);
  const outbox: OutboxEvent[] = [];
  const changedKeys = keys.filter((k, i) => k.status !== current.keys[i]!.status || k.state !== current.keys[i]!.state);
  const trackingBefore = trackingRecordStatus(prevStatuses["tracking_cname"], certificateOf(config, hostnameBefore));
  const trackingAfter = trackingRecordStatus(next.records["tracking_cname"], certificateOf(config, hostnameAfter));
  const certificateChanged = managed && trackingBefore !== trackingAfter;
  const changed = row.status !== current.row.status || row.recordStatusJson !== current.row.recordStatusJson || changedKeys.length > 0 || certificateChanged;
  const statements: BatchItem<"sqlite">[] = [
    db.update(domains).set({
      status: row.status,
      recordStatusJson: row.recordStatusJson,
      dmarcJson: row.dmarcJson,
      verificationStartedAt: row.verificationStartedAt,
      failingSince: row.failingSince,
      lastCheckedAt: row.lastCheckedAt,
      lastCheckJson: row.lastCheckJson,
      nextCheckAt: row.nextCheckAt,
      ...(changed ? { updatedAt: now } : {}),
    // Only over the label this check looked up: a label changed while it ran (PATCH commits
    // first) must not inherit a CNAME status that was found for the old one.
    }).where(and(eq(domains.id, row.id), current.row.trackingSubdomain === null ? isNull(domains.trackingSubdomain) : eq(domains.trackingSubdomain, current.row.trackingSubdomain))),
    ...changedKeys.map((k) => db.update(dkimKeys).set({ status: k.status, state: k.state, activatedAt: k.activatedAt, retiredAt: k.retiredAt }).where(eq(dkimKeys.id, k.id))),
  ];
  const live = keys.filter((k) => k.state !== "retired");
  if (changed) statements.push(...eventStatements(db, "domain.updated", domainView({ row, keys: live, hostname: hostnameAfter }, config), row.accountId, now, outbox));
  // The CNAME just seen (or lost): what tern wants of the host commits with the record's status,
  // and Cloudflare hears of it after.
  const wantChanged = managed && wantedBefore !== rowWantsHost(next.status, next.records["tracking_cname"]);
  if (wantChanged) statements.push(...wantStatements(db, [host], now));
  await db.batch(statements as [BatchItem<"sqlite">]);
  await announceHeard(env, outbox);
  let trackingChanged = certificateChanged;
  if (wantChanged) {
    hostnameAfter = (await syncAfterChange(env, config, [host], now)).get(host) ?? null;
    // A certificate issued at once (or an answer that changes the record) is an update of its own.
    const reported = trackingAfter;
    const settled = trackingRecordStatus(next.records["tracking_cname"], certificateOf(config, hostnameAfter));
    if (settled !== reported) {
      trackingChanged = true;
      const later: OutboxEvent[] = [];
      await db.batch(eventStatements(db, "domain.updated", domainView({ row, keys: live, hostname: hostnameAfter }, config), row.accountId, now, later) as [BatchItem<"sqlite">]);
      await announceHeard(env, later);
    }
  }
  // (A record's status matters to senders too: the tracking host is used only while verified.)
  if (row.status !== current.row.status || row.recordStatusJson !== current.row.recordStatusJson || changedKeys.some((k) => k.state !== "pending") || trackingChanged) {
    forgetAccountDomains(row.accountId);
    forgetSendingIdentities(row.accountId);
  }
  return { row, keys: live, hostname: hostnameAfter };
}

/** A tracking host's certificate changed outside a domain check (the cron's poll of a host
 * waiting for it): each domain whose Tracking record it decides (its CNAME seen) is updated,
 * with its domain.updated event, and senders stop or start using the host at once. */
export async function reportTrackingHostChange(env: Events, config: TernConfig, hostname: string, now: number): Promise<void> {
  const { label, name } = hostnameParts(hostname);
  const rows = await drizzle(env.DB).select({ id: domains.id, accountId: domains.accountId, recordStatusJson: domains.recordStatusJson }).from(domains)
    .where(and(eq(domains.trackingSubdomain, label), eq(domains.name, name)));
  for (const r of rows) {
    if (!cnameSeen((JSON.parse(r.recordStatusJson) as Record<string, RecordStatus>)["tracking_cname"])) continue;
    const current = await loadDomain(env.DB, r.accountId, r.id);
    if (!current) continue;
    const db = drizzle(env.DB);
    const outbox: OutboxEvent[] = [];
    await db.batch([
      db.update(domains).set({ updatedAt: now }).where(eq(domains.id, r.id)),
      ...eventStatements(db, "domain.updated", domainView(current, config), r.accountId, now, outbox),
    ] as unknown as [BatchItem<"sqlite">]);
    await announceHeard(env, outbox);
    forgetAccountDomains(r.accountId);
    forgetSendingIdentities(r.accountId);
  }
}

/** At most this many domains per cron run: each costs a handful of DNS subrequests. */
const CHECKS_PER_RUN = 25;
const PARALLEL_CHECKS = 5;

/** The cron's share: domains whose next check is due (pending ones in their window, verified
 * ones on their schedule, temporary failures hourly). */
export async function recheckDueDomains(env: Events, config: TernConfig, now: number, resolver?: Resolver): Promise<number> {
  const db = drizzle(env.DB);
  const due = await db.select().from(domains)
    .where(and(isNotNull(domains.nextCheckAt), lte(domains.nextCheckAt, now)))
    .orderBy(asc(domains.nextCheckAt))
    .limit(CHECKS_PER_RUN);
  if (due.length === 0) return 0;
  const keys = await db.select().from(dkimKeys)
    .where(and(inArray(dkimKeys.domainId, due.map((d) => d.id)), ne(dkimKeys.state, "retired")))
    .orderBy(asc(dkimKeys.createdAt));
  const queue = [...due];
  await Promise.all(
    Array.from({ length: PARALLEL_CHECKS }, async () => {
      for (let row = queue.shift(); row; row = queue.shift()) {
        try {
          await checkDomain(env, config, { row, keys: keys.filter((k) => k.domainId === row!.id) }, now, { resolver });
        } catch (err) {
          console.error("domain check failed", row.id, err instanceof Error ? err.message : String(err));
        }
      }
    }),
  );
  return due.length;
}
