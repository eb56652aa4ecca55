// Setting a domain's DNS up at Cloudflare in one step (tern's extension of Resend's API): with
// a token the tenant hands over for this one request, find the zone holding the domain, create
// each record tern expects that is missing, leave the ones already there, and report any other
// record in the way as a conflict to settle by hand. Nothing is ever updated or deleted at
// Cloudflare, and the token is neither kept nor repeated. Then the domain is checked over DNS,
// as POST /domains/{id}/verify does.
import type { TernConfig } from "../config.ts";
import { ApiError } from "../errors.ts";
import { CloudflareApiError } from "../cloudflare-api.ts";
import { cloudflareDns, CNAME_CONFLICT_CODES, RECORD_EXISTS_CODES, type CloudflareDnsApi, type CloudflareDnsRecord, type NewDnsRecord, type Zone } from "./cloudflare-dns.ts";
import { dohResolver, joinTxt, type Resolver } from "./dns.ts";
import { checkDomain, expectedFor, hostsFor, type DomainWithKeys } from "./service.ts";
import { dmarcOf, judge, organizationalDomain, recommendedDmarc, type ExpectedRecord } from "./verification.ts";

export const AUTO_CONFIGURE_RESULTS = ["created", "already_present", "conflict", "failed", "skipped"] as const;
export type AutoConfigureResult = (typeof AUTO_CONFIGURE_RESULTS)[number];

export interface AutoConfiguredRecord {
  record: ExpectedRecord["record"] | "DMARC";
  /** As the domain's records name it: relative to the domain ("@" for itself), except a DMARC
   * record at the organizational domain, which has its full name. */
  name: string;
  fqdn: string;
  type: ExpectedRecord["type"];
  value: string;
  priority?: number;
  result: AutoConfigureResult;
  /** What is there instead and what to do by hand (conflict), Cloudflare's error (failed), why
   * nothing was done (skipped). */
  detail?: string;
}

export interface AutoConfigureOutcome {
  /** `status`: Cloudflare's (active, pending, ...); a zone not active serves no DNS yet. */
  zone: { id: string; name: string; status: string | null };
  records: AutoConfiguredRecord[];
  /** The domain after its check. */
  domain: DomainWithKeys;
}

/** Where tern says to make the token, and with which permission: every refusal repeats it. */
export const TOKEN_HELP = "Make one in the Cloudflare dashboard under My Profile > API Tokens > Create Token, from the \"Edit zone DNS\" template: permission Zone > DNS > Edit, for the zone that holds the domain";

type Events = Parameters<typeof checkDomain>[0];

export interface AutoConfigureOptions {
  /** Cloudflare's API is reached through this (tests: a stand-in's address is in env). */
  fetcher?: (input: string, init: RequestInit) => Promise<Response>;
  resolver?: Resolver;
}

export async function autoConfigureDomain(
  env: Events,
  config: TernConfig,
  current: DomainWithKeys,
  token: string,
  now: number,
  opts: AutoConfigureOptions = {},
): Promise<AutoConfigureOutcome> {
  const api = cloudflareDns(config.cloudflareApiUrl, token, opts.fetcher);
  const resolver = opts.resolver ?? dohResolver(config.dohUrl);
  const name = current.row.name;
  const zone = await findZone(api, name);

  const expected = expectedFor(current, config);
  const org = organizationalDomain(name);
  const dmarc = recommendedDmarc(name);
  const dmarcNames = [`_dmarc.${name}`, ...(org ? [`_dmarc.${org}`] : [])];
  const names = [...new Set([...expected.map((e) => e.fqdn), ...dmarcNames].filter((n) => inZone(n, zone.name)))];
  const existing = new Map<string, CloudflareDnsRecord[]>();
  await Promise.all(names.map(async (n) => {
    existing.set(n, await guard(() => api.recordsAt(zone.id, n), `read the DNS records of the zone ${zone.name}`));
  }));

  const hosts = hostsFor(config, current.row.region);
  const out: AutoConfiguredRecord[] = [];
  let created = 0;
  /** Creates one record; an answer saying it is there already counts as present. */
  const create = async (entry: AutoConfiguredRecord, record: NewDnsRecord): Promise<AutoConfiguredRecord> => {
    try {
      await api.create(zone.id, record);
      created++;
      return { ...entry, result: "created" };
    } catch (err) {
      if (!(err instanceof CloudflareApiError)) throw err;
      if (err.codes.some((c) => RECORD_EXISTS_CODES.includes(c))) return { ...entry, result: "already_present", detail: "Cloudflare already has this record." };
      if (err.codes.some((c) => CNAME_CONFLICT_CODES.includes(c))) {
        return { ...entry, result: "conflict", detail: `Cloudflare refused it: ${err.cloudflareMessage}. A CNAME cannot share its name with other records; settle ${entry.fqdn} by hand, then run this again.` };
      }
      // Refused before anything was made: the token reads but may not write. Said as a whole.
      if (err.auth && created === 0) throw permissionError(`The token can read the DNS records of the zone ${zone.name} but may not create them (Cloudflare: ${err.cloudflareMessage || `HTTP ${err.status}`}). Nothing was changed.`);
      return { ...entry, result: "failed", detail: err.cloudflareMessage ? `Cloudflare answered: ${err.cloudflareMessage}` : `Cloudflare did not answer properly (${err.message.replace(/^Cloudflare [A-Z]+ \w+: /, "")}); run this again later.` };
    }
  };

  for (const e of expected) {
    const entry: AutoConfiguredRecord = { record: e.record, name: e.name, fqdn: e.fqdn, type: e.type, value: e.value, ...(e.priority !== undefined ? { priority: e.priority } : {}), result: "skipped" };
    const verdict = planRecord(e, existing.get(e.fqdn) ?? [], hosts);
    if (verdict.result === "create") {
      out.push(await create(entry, { type: e.type, name: e.fqdn, content: e.value, priority: e.priority, comment: `tern: ${e.record} record of ${name}` }));
    } else {
      out.push({ ...entry, result: verdict.result, ...(verdict.detail ? { detail: verdict.detail } : {}) });
    }
  }

  // DMARC: recommended, created only where no policy is published yet (the domain's own, or its
  // organizational domain's, which covers it); an existing policy is the tenant's choice.
  const dmarcEntry: AutoConfiguredRecord = { record: "DMARC", name: dmarc.fqdn === `_dmarc.${name}` ? "_dmarc" : dmarc.fqdn, fqdn: dmarc.fqdn, type: "TXT", value: dmarc.value, result: "skipped" };
  const found = await publishedDmarc(dmarcNames, zone, existing, resolver);
  if (found.kind === "unknown") {
    out.push({ ...dmarcEntry, detail: `DNS could not say whether ${found.name} has a DMARC record (${found.reason}), so none was added; run this again later.` });
  } else if (found.kind === "found") {
    out.push(found.value.trim() === dmarc.value && found.name === dmarc.fqdn
      ? { ...dmarcEntry, result: "already_present" }
      : { ...dmarcEntry, detail: `A DMARC record is already published at ${found.name} (${quote(found.value)}); tern keeps it.` });
  } else if (!inZone(dmarc.fqdn, zone.name)) {
    out.push({ ...dmarcEntry, detail: `${dmarc.fqdn} is not in the zone ${zone.name}: publish it where ${org ?? name} is hosted, by hand.` });
  } else {
    const at = existing.get(dmarc.fqdn) ?? [];
    const cname = at.find((r) => r.type === "CNAME");
    out.push(cname
      ? { ...dmarcEntry, result: "conflict", detail: `${dmarc.fqdn} is a CNAME to ${cname.content}: it is left as it is.` }
      : await create(dmarcEntry, { type: "TXT", name: dmarc.fqdn, content: dmarc.value, comment: `tern: recommended DMARC record of ${name}` }));
  }

  // The domain's normal check, at once: what was just created is usually served already.
  const checked = await checkDomain(env, config, current, now, { restart: true, resolver: opts.resolver });
  return { zone: { id: zone.id, name: zone.name, status: zone.status ?? null }, records: out, domain: checked };
}

/** The zone that holds `name`: the name itself, else each parent up to its organizational
 * domain (a zone is never above that). */
async function findZone(api: CloudflareDnsApi, name: string): Promise<Zone> {
  const org = organizationalDomain(name) ?? name;
  const labels = name.split(".");
  const candidates: string[] = [];
  for (let i = 0; i < labels.length; i++) {
    const c = labels.slice(i).join(".");
    candidates.push(c);
    if (c === org) break;
  }
  for (const c of candidates) {
    const zone = await guard(() => api.zoneNamed(c), "find the zone");
    if (zone) return zone;
  }
  // Tokens scoped to one zone see it by name with DNS Edit alone; Zone Read is the fallback
  // advice for accounts where Cloudflare asks for it.
  throw permissionError(`The token sees no Cloudflare zone named ${candidates.join(" or ")}: either the domain's DNS is not at Cloudflare, or the token is not for that zone (if it is, add Zone > Zone > Read to it).`);
}

/** A call whose failure ends the whole request: a token refused is the tenant's to fix (422,
 * saying which permission), Cloudflare not answering is nobody's fault here (502). */
async function guard<T>(call: () => Promise<T>, doing: string): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (!(err instanceof CloudflareApiError)) throw err;
    if (err.auth) throw permissionError(`Cloudflare refused the token when tern tried to ${doing} (${err.cloudflareMessage || `HTTP ${err.status}`}).`);
    throw new ApiError("application_error", `Cloudflare's API did not answer as expected when tern tried to ${doing} (${err.message.replace(/^Cloudflare /, "")}). Nothing was changed; try again in a few minutes.`, 502);
  }
}

function permissionError(what: string): ApiError {
  return new ApiError("validation_error", `${what} ${TOKEN_HELP}, and send the token whole. tern uses it for this request only and does not keep it.`);
}

export function inZone(fqdn: string, zone: string): boolean {
  return fqdn === zone || fqdn.endsWith(`.${zone}`);
}

/** An existing record as tern's checks read DNS answers (dns.ts): TXT strings joined, MX as
 * "priority host", names lower case without the final dot. */
function asDnsValue(r: CloudflareDnsRecord): string {
  const host = (h: string) => h.trim().replace(/\.$/, "").toLowerCase();
  if (r.type === "TXT") return joinTxt(r.content);
  if (r.type === "MX") return `${r.priority ?? 0} ${host(r.content)}`;
  return host(r.content);
}

const quote = (v: string) => `\`${v.length > 120 ? `${v.slice(0, 120)}…` : v}\``;

type Plan = { result: "create" } | { result: "already_present" | "conflict"; detail?: string };

/** What to do about one expected record given the zone's records at its name: the same
 * judgement as a DNS check (verification.ts judge), so "already there" means "verifies". */
export function planRecord(e: ExpectedRecord, at: CloudflareDnsRecord[], hosts: Parameters<typeof judge>[2]): Plan {
  const cname = at.filter((r) => r.type === "CNAME");
  if (e.type !== "CNAME" && cname.length > 0) {
    return { result: "conflict", detail: `${e.fqdn} is a CNAME to ${cname[0]!.content}, and a name with a CNAME can hold no other record. Remove that CNAME by hand if nothing needs it, then run this again.` };
  }
  if (e.type === "CNAME") {
    const others = at.filter((r) => r.type !== "CNAME");
    if (cname.length === 0 && others.length > 0) {
      return { result: "conflict", detail: `${e.fqdn} already has ${[...new Set(others.map((r) => r.type))].join(" and ")} records, and a CNAME must be alone at its name. Remove them by hand, or choose another tracking_subdomain.` };
    }
    if (cname.length === 0) return { result: "create" };
    const ok = judge(e, { kind: "records", values: cname.map(asDnsValue) }, hosts) === "match";
    if (!ok) return { result: "conflict", detail: `${e.fqdn} is a CNAME to ${cname[0]!.content}. Change its target to ${e.value} by hand, then run this again.` };
    if (cname[0]!.proxied) return { result: "conflict", detail: `The CNAME at ${e.fqdn} is proxied, so resolvers cannot see where it points. Set it to "DNS only" by hand.` };
    return { result: "already_present" };
  }
  const same = at.filter((r) => r.type === e.type);
  if (same.length === 0) return { result: "create" };
  const values = same.map(asDnsValue);
  const verdict = judge(e, { kind: "records", values }, hosts);
  if (verdict === "match") return { result: "already_present" };
  if (verdict === "missing") return { result: "create" }; // TXT records at the name, none of them SPF
  if (e.record === "DKIM") {
    return { result: "conflict", detail: `${e.fqdn} holds another TXT record (${quote(values[0]!)}). Replace it with tern's value by hand.` };
  }
  if (e.record === "SPF" && e.type === "TXT") {
    const spf = values.filter((v) => /^v=spf1(\s|$)/i.test(v.trim()));
    const include = `include:${hosts.spfInclude}`;
    return spf.length > 1
      ? { result: "conflict", detail: `${e.fqdn} has ${spf.length} SPF records, and receivers reject mail when a name has more than one. Merge them by hand into one record that has ${include}.` }
      : { result: "conflict", detail: `${e.fqdn} already has an SPF record (${quote(spf[0]!)}) without ${include}. A name may have only one SPF record: add ${include} to it by hand, before its "all" term.` };
  }
  if (e.record === "Receiving") {
    return { result: "conflict", detail: `${e.fqdn} already receives mail at ${values.join(", ")}. tern leaves those MX records; replace them by hand with ${e.value} (priority ${e.priority ?? 10}) if tern should receive this domain's mail.` };
  }
  return { result: "conflict", detail: `${e.fqdn} already has MX records (${values.join(", ")}), so bounces would not all reach tern. Remove them by hand, or add the domain again with another custom_return_path.` };
}

type DmarcFound = { kind: "found"; name: string; value: string } | { kind: "none" } | { kind: "unknown"; name: string; reason: string };

/** A DMARC policy at _dmarc of the domain, else of its organizational domain: read from the
 * zone where the name is in it, else over DNS (the organizational domain may be hosted
 * elsewhere). A CNAME at _dmarc (to a reporting service) counts as a policy. */
async function publishedDmarc(names: string[], zone: Zone, existing: Map<string, CloudflareDnsRecord[]>, resolver: Resolver): Promise<DmarcFound> {
  for (const n of names) {
    if (inZone(n, zone.name)) {
      const at = existing.get(n) ?? [];
      const record = dmarcOf({ kind: "records", values: at.filter((r) => r.type === "TXT").map(asDnsValue) }, false)?.record;
      if (record) return { kind: "found", name: n, value: record };
      const cname = at.find((r) => r.type === "CNAME");
      if (cname) return { kind: "found", name: n, value: `CNAME ${cname.content}` };
      continue;
    }
    const lookup = await resolver.lookup(n, "TXT");
    if (lookup.kind === "error") return { kind: "unknown", name: n, reason: lookup.message };
    const record = dmarcOf(lookup, false)?.record;
    if (record) return { kind: "found", name: n, value: record };
  }
  return { kind: "none" };
}
