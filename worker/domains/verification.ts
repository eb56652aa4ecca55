// What a domain must publish, how each published record is judged, and how a domain's status
// moves (contract section 5). Pure: the DNS answers come in, the new state goes out; the
// service (service.ts) does the lookups and the writes.
import { getDomain } from "tldts";
import { dkimRecordValue, publicKeyOfRecord } from "../dkim/keys.ts";
import type { DkimAlgorithm } from "../dkim/sign.ts";
import type { Lookup, RecordType } from "./dns.ts";

export const DOMAIN_STATUSES = [
  "not_started",
  "pending",
  "verified",
  "partially_verified",
  "partially_failed",
  "failed",
  "temporary_failure",
] as const;
export type DomainStatus = (typeof DOMAIN_STATUSES)[number];

/** A domain that proved itself and keeps doing so: verified, or verified with records being
 * rechecked (temporary_failure). It sends, and with receiving on, it receives. */
export const USABLE_STATUSES: readonly DomainStatus[] = ["verified", "temporary_failure"];

export const RECORD_STATUSES = ["not_started", "pending", "verified", "failed", "temporary_failure"] as const;
export type RecordStatus = (typeof RECORD_STATUSES)[number];

export type RecordKind = "spf_mx" | "spf_txt" | "receiving_mx" | "tracking_cname";

/** How long a new domain may take to publish its records, and how long a verified domain's
 * vanished records are rechecked before it fails. */
export const WINDOW_MS = 72 * 3600_000;
const MINUTE = 60_000;
const HOUR = 3600_000;
/** Checks of a domain in its window: often at first (people add records and wait), then less. */
const EARLY_INTERVAL = 5 * MINUTE;
const LATER_INTERVAL = 30 * MINUTE;
const VERIFIED_INTERVAL = 6 * HOUR;
const FAILING_INTERVAL = HOUR;
const ERROR_INTERVAL = 5 * MINUTE;

export interface DomainSettings {
  name: string;
  returnPath: string;
  receiving: boolean;
  /** The label of the domain's own tracking host, when it has one. */
  trackingSubdomain?: string | null;
}

export interface KeyInfo {
  id: string;
  selector: string;
  algorithm: DkimAlgorithm;
  publicKey: string;
  state: "pending" | "active" | "retired";
  status: string;
}

export interface HostsConfig {
  bounceHost: string;
  spfInclude: string;
  inboundMxHost: string;
  /** What a tracking host's CNAME points at (PUBLIC_URL's host); null without a PUBLIC_URL,
   * when nothing is tracked. */
  trackingTarget?: string | null;
}

/** One record the domain must publish. `name` is relative to the domain, as DNS hosts ask. */
export interface ExpectedRecord {
  /** "dkim:<key id>" or a RecordKind. */
  id: string;
  record: "DKIM" | "SPF" | "Receiving" | "Tracking";
  /** Relative name ("@" for the domain itself) and the full name. */
  name: string;
  fqdn: string;
  type: RecordType;
  value: string;
  priority?: number;
  /** Required for the domain to be verified. A rotation's next DKIM key is not, nor is the
   * Receiving MX or the Tracking CNAME: the domain's status is about sending; receiving and
   * the tracking host have their record's status. */
  required: boolean;
  /** DKIM records: the key's algorithm (a rotation replaces the active key of its algorithm). */
  algorithm?: DkimAlgorithm;
}

export function expectedRecords(domain: DomainSettings, keys: KeyInfo[], hosts: HostsConfig): ExpectedRecord[] {
  const rp = `${domain.returnPath}.${domain.name}`;
  const out: ExpectedRecord[] = keys
    .filter((k) => k.state !== "retired")
    .sort((a, b) => (a.state === b.state ? 0 : a.state === "active" ? -1 : 1))
    .map((k) => ({
      id: `dkim:${k.id}`,
      record: "DKIM" as const,
      name: `${k.selector}._domainkey`,
      fqdn: `${k.selector}._domainkey.${domain.name}`,
      type: "TXT" as const,
      value: dkimRecordValue(k.algorithm, k.publicKey),
      required: k.state === "active",
      algorithm: k.algorithm,
    }));
  out.push(
    { id: "spf_mx", record: "SPF", name: domain.returnPath, fqdn: rp, type: "MX", value: hosts.bounceHost, priority: 10, required: true },
    { id: "spf_txt", record: "SPF", name: domain.returnPath, fqdn: rp, type: "TXT", value: `v=spf1 include:${hosts.spfInclude} ~all`, required: true },
  );
  if (domain.receiving) {
    out.push({ id: "receiving_mx", record: "Receiving", name: "@", fqdn: domain.name, type: "MX", value: hosts.inboundMxHost, priority: 10, required: false });
  }
  if (domain.trackingSubdomain && hosts.trackingTarget) {
    const fqdn = `${domain.trackingSubdomain}.${domain.name}`;
    out.push({ id: "tracking_cname", record: "Tracking", name: domain.trackingSubdomain, fqdn, type: "CNAME", value: hosts.trackingTarget, required: false });
  }
  return out;
}

/** What one lookup says about one expected record. */
export type Judgement = "match" | "missing" | "mismatch" | "error";

export function judge(expected: ExpectedRecord, lookup: Lookup, hosts: HostsConfig): Judgement {
  if (lookup.kind === "error") return "error";
  if (lookup.kind === "none") return "missing";
  const values = lookup.values;
  if (expected.record === "DKIM") {
    const want = publicKeyOfRecord(expected.value)!;
    // Anything at the selector that is not our key (another key, a typo, a truncated paste)
    // is a wrong value, not a missing one.
    const found = values.map(publicKeyOfRecord).filter((v) => v !== null);
    return found.some((f) => f.p === want.p && f.k === want.k) ? "match" : "mismatch";
  }
  if (expected.type === "CNAME") {
    const targets = values.map((v) => v.toLowerCase().replace(/\.$/, ""));
    return targets.includes(expected.value) ? "match" : "mismatch";
  }
  if (expected.type === "MX") {
    const hostsFound = values.map((v) => v.split(" ")[1] ?? "");
    return hostsFound.includes(expected.value) ? "match" : "mismatch";
  }
  // SPF TXT: exactly one v=spf1 record (two are a permanent error at receivers, RFC 7208
  // 4.5) that includes ours.
  const spf = values.filter((v) => /^v=spf1(\s|$)/i.test(v.trim()));
  if (spf.length === 0) return "missing";
  if (spf.length > 1) return "mismatch";
  const terms = spf[0]!.toLowerCase().split(/\s+/);
  return terms.some((t) => t.replace(/^[+]/, "") === `include:${hosts.spfInclude}`) ? "match" : "mismatch";
}

export interface DomainState {
  status: DomainStatus;
  /** Status of each record, by ExpectedRecord.id. */
  records: Record<string, RecordStatus>;
  verificationStartedAt: number | null;
  failingSince: number | null;
  nextCheckAt: number | null;
}

export interface Evaluation extends DomainState {
  /** Rotation keys whose records are now published: each becomes the active key of its
   * algorithm, retiring the one before it. */
  promoteKeyIds: string[];
  /** The keys they replace. */
  retireKeyIds: string[];
}

/** The next state of a domain after a check whose judgements are given by record id. */
export function evaluate(prev: DomainState, expected: ExpectedRecord[], judged: Record<string, Judgement>, now: number): Evaluation {
  // A rotation's key that is published takes over signing; the old key of its algorithm then
  // no longer matters for the domain's status.
  const promoted = expected.filter((e) => e.record === "DKIM" && !e.required && judged[e.id] === "match");
  // A new key replaces the active key of its algorithm; a key of an algorithm the domain did not
  // sign with yet (a switch, say RSA to Ed25519) replaces every active key.
  const active = expected.filter((e) => e.record === "DKIM" && e.required);
  const retired = new Set<ExpectedRecord>();
  for (const p of promoted) {
    const same = active.filter((a) => a.algorithm === p.algorithm);
    for (const a of same.length > 0 ? same : active) retired.add(a);
  }
  const required = expected.filter((e) => (e.record === "DKIM" ? (e.required && !retired.has(e)) || promoted.includes(e) : e.required));
  const records: Record<string, RecordStatus> = {};
  for (const e of expected) {
    const j = judged[e.id];
    records[e.id] = j === "match" ? "verified" : (prev.records[e.id] ?? "not_started");
    // A rotation's key not published yet is reported, but does not hold the domain back.
    if (!required.includes(e) && (j === "missing" || j === "mismatch")) records[e.id] = j === "missing" ? "pending" : "failed";
  }

  const results = required.map((e) => judged[e.id] ?? "error");
  const matched = results.filter((r) => r === "match").length;
  const allMatch = matched === required.length;
  const anyError = results.includes("error");
  const wasVerified = prev.status === "verified" || prev.status === "temporary_failure";

  const keyId = (e: ExpectedRecord) => e.id.slice("dkim:".length);
  const out: Evaluation = { ...prev, records, promoteKeyIds: promoted.map(keyId), retireKeyIds: [...retired].map(keyId) };

  if (allMatch) {
    // A rotation waiting for its record is looked for often, not on the verified schedule.
    const rotating = expected.some((e) => e.record === "DKIM" && !required.includes(e) && !e.required && judged[e.id] !== "match");
    return { ...out, status: "verified", failingSince: null, nextCheckAt: now + (rotating ? EARLY_INTERVAL : VERIFIED_INTERVAL) };
  }
  if (anyError) {
    // The resolver could not say: nothing changes on its account; look again soon.
    return { ...out, nextCheckAt: now + ERROR_INTERVAL };
  }

  if (wasVerified) {
    const failingSince = prev.failingSince ?? now;
    const expired = now - failingSince >= WINDOW_MS;
    for (const e of required) if (judged[e.id] !== "match") records[e.id] = expired ? "failed" : "temporary_failure";
    if (expired) return { ...out, status: "failed", failingSince, nextCheckAt: null };
    return { ...out, status: "temporary_failure", failingSince, nextCheckAt: Math.min(now + FAILING_INTERVAL, failingSince + WINDOW_MS) };
  }

  const started = prev.verificationStartedAt ?? now;
  const windowEnd = started + WINDOW_MS;
  const expired = now >= windowEnd;
  for (const e of required) {
    const j = judged[e.id];
    if (j === "match" || j === "error" || j === undefined) continue;
    // A wrong value is reported at once; a missing one is still expected until the window ends.
    records[e.id] = expired || j === "mismatch" ? "failed" : "pending";
  }
  if (expired) {
    return { ...out, status: matched > 0 ? "partially_failed" : "failed", verificationStartedAt: started, nextCheckAt: null };
  }
  const interval = now - started < HOUR ? EARLY_INTERVAL : LATER_INTERVAL;
  return {
    ...out,
    status: matched > 0 ? "partially_verified" : "pending",
    verificationStartedAt: started,
    nextCheckAt: Math.min(now + interval, windowEnd),
  };
}

/** DMARC is recommended, not required: what the domain (or its organizational domain)
 * publishes at _dmarc. */
export interface DmarcInfo {
  found: boolean;
  policy: "none" | "quarantine" | "reject" | null;
  record: string | null;
  /** The record is the organizational domain's, which covers this subdomain. */
  inherited: boolean;
}

export function dmarcOf(lookup: Lookup, inherited: boolean): DmarcInfo | null {
  if (lookup.kind !== "records") return null;
  const record = lookup.values.find((v) => /^v=DMARC1\s*(;|$)/i.test(v.trim()));
  if (!record) return null;
  const tag = (name: string) => record.match(new RegExp(`(?:^|;)\\s*${name}\\s*=\\s*([^;\\s]+)`, "i"))?.[1]?.toLowerCase();
  const p = inherited ? (tag("sp") ?? tag("p")) : tag("p");
  const policy = p === "none" || p === "quarantine" || p === "reject" ? p : null;
  return { found: true, policy, record, inherited };
}

/** The organizational domain (RFC 7489 3.2) of a subdomain: one label more than its public
 * suffix, by the Public Suffix List (private entries too: x.github.io is its own owner's), so
 * mail.example.co.uk has example.co.uk, not co.uk. Null when `name` is itself one, or is a
 * suffix: then there is no second place to look for a DMARC record. */
export function organizationalDomain(name: string): string | null {
  const lower = name.toLowerCase().replace(/\.$/, "");
  const org = getDomain(lower, { allowPrivateDomains: true });
  return org && org !== lower ? org : null;
}

/** The DMARC record the dashboard recommends (not part of the API's records: Resend's record
 * kinds have no DMARC, and verification does not need it). Published at the organizational
 * domain, it covers every subdomain; p=none only asks for reports, so it cannot stop mail. */
export function recommendedDmarc(name: string): { fqdn: string; value: string } {
  const org = organizationalDomain(name) ?? name.toLowerCase();
  return { fqdn: `_dmarc.${org}`, value: `v=DMARC1; p=none; rua=mailto:dmarc@${org}` };
}
