// The region table itself, free of Workers types so that Node code (the deploy dry-run test,
// scripts) reads the same table as the Worker: worker/regions.ts re-exports it with what
// depends on the runtime.

/** Durable Object location hints (a subset of the runtime's DurableObjectLocationHint). */
export type LocationHint = "wnam" | "enam" | "sam" | "weur" | "eeur" | "apac" | "oc" | "afr" | "me";

export type TransportKind = "smtp" | "cloudflare";
export const TRANSPORT_KINDS: readonly TransportKind[] = ["smtp", "cloudflare"];

export interface RegionFacts {
  /** Resend's region name, as domains record it. */
  name: string;
  /** Where a Durable Object created for this region should live (`locationHint`). */
  locationHint: LocationHint;
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

