// The sending regions: the one table every region-aware part reads (domain validation, DNS
// records, transport selection, placement). The facts about Cloudflare's network live here
// in code; what belongs to one deployment (a region's relay, transport, SPF include, bounce
// host) comes from vars suffixed with the region (RELAY_URL_EU_WEST_1, TRANSPORT_EU_WEST_1,
// SPF_INCLUDE_EU_WEST_1, BOUNCE_HOST_EU_WEST_1), falling back to the unsuffixed var.

export type TransportKind = "smtp" | "cloudflare";
export const TRANSPORT_KINDS: readonly TransportKind[] = ["smtp", "cloudflare"];

export interface RegionFacts {
  /** Resend's region name, as domains record it. */
  name: string;
  /** Where a Durable Object created for this region should live (`locationHint`). */
  locationHint: DurableObjectLocationHint;
  /** The Workers placement hint (`[placement] region`) for a Worker that serves this region. */
  placement: `aws:${string}`;
  /** The data can be kept in this Cloudflare jurisdiction (Durable Objects, R2, D1), when the
   * operator opts in (README: EU data residency). */
  jurisdiction?: "eu";
}

// apac rather than the newer apac-ne for Tokyo: apac is the documented, stable hint.
export const REGION_TABLE = [
  { name: "us-east-1", locationHint: "enam", placement: "aws:us-east-1" },
  { name: "eu-west-1", locationHint: "weur", placement: "aws:eu-west-1", jurisdiction: "eu" },
  { name: "sa-east-1", locationHint: "sam", placement: "aws:sa-east-1" },
  { name: "ap-northeast-1", locationHint: "apac", placement: "aws:ap-northeast-1" },
] as const satisfies readonly RegionFacts[];

export type RegionName = (typeof REGION_TABLE)[number]["name"];

/** The region names, in the table's order (a tuple, so zod can make an enum of it). */
export const REGIONS = REGION_TABLE.map((r) => r.name) as unknown as readonly [RegionName, ...RegionName[]];

export const DEFAULT_REGION: RegionName = "us-east-1";

export function isRegion(name: unknown): name is RegionName {
  return typeof name === "string" && (REGIONS as readonly string[]).includes(name);
}

export function regionFacts(name: string): RegionFacts | undefined {
  return REGION_TABLE.find((r) => r.name === name);
}

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
