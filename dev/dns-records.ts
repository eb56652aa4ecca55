// What the dev DNS zone (dev/dns.ts) publishes: for every domain added locally, the records
// its page lists (worker/domains/verification.ts expectedRecords, the same function tern checks
// against), the recommended DMARC record, and the TXT record of each pending domain claim.
// Pure, so a Worker test can check that what it publishes verifies a domain.
import type { DkimAlgorithm } from "../worker/dkim/sign.ts";
import { expectedRecords, recommendedDmarc } from "../worker/domains/verification.ts";

export interface LocalDomain {
  id: string;
  name: string;
  region: string;
  returnPath: string;
  receiving: boolean;
}

export interface LocalKey {
  id: string;
  domainId: string;
  selector: string;
  algorithm: DkimAlgorithm;
  publicKey: string;
  state: "active" | "pending" | "retired";
  status: string;
}

export interface LocalClaim {
  name: string;
  token: string;
}

/** The part of the Worker's config (worker/config.ts readConfig) the records depend on. */
export interface ZoneHosts {
  region(name: string): { bounceHost: string; spfInclude: string };
  inboundMxHost: string;
}

export type ZoneType = "TXT" | "MX" | "CNAME";

/** "fqdn TYPE" -> values (MX as "priority host"), names lower case without the final dot. */
export type Zone = Map<string, string[]>;

export function zoneKey(name: string, type: string): string {
  return `${name.toLowerCase().replace(/\.$/, "")} ${type.toUpperCase()}`;
}

export function buildZone(domains: LocalDomain[], keys: LocalKey[], claims: LocalClaim[], config: ZoneHosts): Zone {
  const zone: Zone = new Map();
  const add = (name: string, type: ZoneType, value: string) => {
    const k = zoneKey(name, type);
    const values = zone.get(k) ?? [];
    // Two accounts may hold one name (domain claims): one SPF record, not two (two would be
    // a permanent error at receivers, and tern judges them so).
    if (!values.includes(value)) values.push(value);
    zone.set(k, values);
  };
  for (const d of domains) {
    const { bounceHost, spfInclude } = config.region(d.region);
    // No Tracking CNAME: a tracking host (links.<domain>) cannot reach this machine, so in dev
    // mode it stays unverified and tracked links keep pointing at PUBLIC_URL, which works.
    const records = expectedRecords(
      { name: d.name, returnPath: d.returnPath, receiving: d.receiving },
      keys.filter((k) => k.domainId === d.id && k.state !== "retired"),
      { bounceHost, spfInclude, inboundMxHost: config.inboundMxHost },
    );
    for (const r of records) add(r.fqdn, r.type, r.type === "MX" ? `${r.priority ?? 10} ${r.value}` : r.value);
    const dmarc = recommendedDmarc(d.name);
    add(dmarc.fqdn, "TXT", dmarc.value);
  }
  for (const c of claims) add(c.name, "TXT", c.token);
  return zone;
}
