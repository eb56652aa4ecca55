// The sending regions: the one table every region-aware part reads (domain validation, DNS
// records, transport selection, placement). The facts about Cloudflare's network live here
// in code; what belongs to one deployment (a region's relay, transport, SPF include, bounce
// host) comes from vars suffixed with the region (RELAY_URL_EU_WEST_1, TRANSPORT_EU_WEST_1,
// SPF_INCLUDE_EU_WEST_1, BOUNCE_HOST_EU_WEST_1), falling back to the unsuffixed var.

export { DEFAULT_REGION, REGION_TABLE, REGIONS, TRANSPORT_KINDS, isRegion, regionFacts, type RegionFacts, type RegionName, type TransportKind } from "./region-table.ts";
import { DEFAULT_REGION, REGION_TABLE, TRANSPORT_KINDS, regionFacts, type RegionFacts, type TransportKind } from "./region-table.ts";

/** A region as one deployment configured it. */
export interface Region extends RegionFacts {
  transport: TransportKind;
  /** The SMTP relay of an `smtp` region ("" when none is configured: its mail waits). */
  relayUrl: string;
  /** What the region's senders put in their return-path SPF record (include:...). */
  spfInclude: string;
  /** The MX target of the return-path subdomain: where the region's bounces arrive. */
  bounceHost: string;
  /** Set when TRANSPORT_<REGION> (or TRANSPORT) names no known transport: the region's mail
   * waits, with this as the reason, until the operator fixes it. */
  misconfigured?: string;
}

/** The deployment-wide defaults each region falls back to. */
export interface RegionDefaults {
  relayUrl: string;
  spfInclude: string;
  bounceHost: string;
}

function suffix(name: string): string {
  return name.toUpperCase().replace(/-/g, "_");
}

/** A var, set and not empty. */
function varOf(vars: Record<string, unknown>, key: string): string | undefined {
  const v = vars[key];
  return typeof v === "string" && v.trim() !== "" ? v.trim() : undefined;
}

/** Resolves one region (an unknown name, e.g. a row older than the table, gets the table's
 * defaults and the deployment-wide settings, so its mail still goes somewhere sensible). */
export function resolveRegion(env: object, defaults: RegionDefaults, name: string): Region {
  const vars = env as Record<string, unknown>;
  const facts = regionFacts(name) ?? { ...regionFacts(DEFAULT_REGION)!, name };
  const s = suffix(name);
  const transport = (varOf(vars, `TRANSPORT_${s}`) ?? varOf(vars, "TRANSPORT") ?? "smtp").toLowerCase();
  const region: Region = {
    ...facts,
    transport: (TRANSPORT_KINDS as readonly string[]).includes(transport) ? (transport as TransportKind) : "smtp",
    relayUrl: varOf(vars, `RELAY_URL_${s}`) ?? defaults.relayUrl,
    spfInclude: (varOf(vars, `SPF_INCLUDE_${s}`) ?? defaults.spfInclude).toLowerCase(),
    bounceHost: (varOf(vars, `BOUNCE_HOST_${s}`) ?? defaults.bounceHost).toLowerCase(),
  };
  if (!(TRANSPORT_KINDS as readonly string[]).includes(transport)) {
    region.misconfigured = `TRANSPORT_${s} (or TRANSPORT) is "${transport}"; it must be one of ${TRANSPORT_KINDS.join(", ")}.`;
  }
  return region;
}

/** Every region of the table, resolved. */
export function resolveRegions(env: object, defaults: RegionDefaults): Record<string, Region> {
  return Object.fromEntries(REGION_TABLE.map((r) => [r.name, resolveRegion(env, defaults, r.name)]));
}

const JURISDICTIONS: readonly DurableObjectJurisdiction[] = ["eu", "fedramp", "fedramp-high", "us"];

/** A Durable Object namespace in the deployment's jurisdiction: DO_JURISDICTION = "eu" keeps
 * every object tern creates (rate limiter, idempotency front) in the EU (README: EU data
 * residency). Unset: wherever Cloudflare places them. */
export function inJurisdiction<T extends Rpc.DurableObjectBranded | undefined>(env: object, ns: DurableObjectNamespace<T>): DurableObjectNamespace<T> {
  const j = (env as { DO_JURISDICTION?: unknown }).DO_JURISDICTION;
  if (typeof j !== "string" || !JURISDICTIONS.includes(j as DurableObjectJurisdiction)) return ns;
  try {
    return ns.jurisdiction(j as DurableObjectJurisdiction);
  } catch (err) {
    // Local workerd (wrangler dev, the tests) has no jurisdictions: everything is on this machine.
    if (!warnedJurisdiction) console.warn(`DO_JURISDICTION=${j} ignored here: ${err instanceof Error ? err.message : String(err)}`);
    warnedJurisdiction = true;
    return ns;
  }
}

let warnedJurisdiction = false;
