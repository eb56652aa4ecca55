// Domain claims (Resend's /domains/claim): tern lets two accounts add the same domain name,
// and only DNS decides who sends as it. A claim settles that: the claimant publishes a TXT
// record at the name proving it controls the zone, and verifying the claim deletes every other
// account's copy of the domain (with its DKIM keys, and a domain.deleted event to that
// account's webhooks). The claimant's own domain of that name (created with fresh DKIM keys by
// the claim when it had none) is the one left; it is verified the usual way.
import { and, desc, eq, ne } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { toBase64Url } from "../bytes.ts";
import type { TernConfig } from "../config.ts";
import { domainClaims, domains, type DomainClaimRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { uuidv7 } from "../ids.ts";
import { dohResolver, type Resolver } from "./dns.ts";
import { createDomain, deleteDomain, loadDomain, type CreateDomainInput } from "./service.ts";

/** A claim not verified within this window expires (as Resend's do). */
export const CLAIM_TTL_MS = 7 * 86_400_000;
export const CLAIM_TXT_PREFIX = "tern-domain-verification=";

type Env2 = Pick<Env, "DB" | "WEBHOOK_QUEUE">;

export function claimView(row: DomainClaimRow, now = Date.now()) {
  const expiresAt = row.createdAt + CLAIM_TTL_MS;
  const status = row.status === "pending" && now > expiresAt ? "expired" : row.status;
  return {
    object: "domain_claim" as const,
    id: row.id,
    name: row.name,
    status,
    domain_id: row.domainId,
    region: row.region,
    record: { type: "TXT" as const, name: row.name, value: row.token, ttl: "Auto" },
    blocked_reason: null,
    failure_reason: null,
    created_at: new Date(row.createdAt).toISOString(),
    expires_at: new Date(expiresAt).toISOString(),
  };
}

/** Starts a claim of `input.name`, which another account must hold. A pending claim of the
 * same name by this account is answered unchanged (`created: false`). */
export async function createClaim(env: Env2, config: TernConfig, accountId: string, input: CreateDomainInput, now = Date.now()) {
  const db = drizzle(env.DB);
  const holders = await db.select({ accountId: domains.accountId }).from(domains).where(and(eq(domains.name, input.name), ne(domains.accountId, accountId))).limit(1);
  if (holders.length === 0) {
    throw new ApiError("validation_error", `No other account holds ${input.name}, so there is nothing to claim: add it with POST /domains.`);
  }
  const own = await db.select({ id: domains.id }).from(domains).where(and(eq(domains.accountId, accountId), eq(domains.name, input.name))).get();
  if (own) {
    const latest = await db.select().from(domainClaims).where(eq(domainClaims.domainId, own.id)).orderBy(desc(domainClaims.id)).limit(1).get();
    if (latest && claimView(latest, now).status === "pending") return { created: false, claim: claimView(latest, now) };
  }
  const domainId = own?.id ?? (await createDomain(env, config, accountId, input, now)).id;
  const row: DomainClaimRow = {
    id: uuidv7(now),
    accountId,
    domainId,
    name: input.name,
    region: input.region,
    token: CLAIM_TXT_PREFIX + toBase64Url(crypto.getRandomValues(new Uint8Array(24))),
    status: "pending",
    createdAt: now,
    updatedAt: now,
  };
  await db.insert(domainClaims).values(row);
  return { created: true, claim: claimView(row, now) };
}

async function latestClaim(d1: D1Database, accountId: string, domainId: string): Promise<DomainClaimRow> {
  const row = await drizzle(d1).select().from(domainClaims)
    .where(and(eq(domainClaims.domainId, domainId), eq(domainClaims.accountId, accountId))).orderBy(desc(domainClaims.id)).limit(1).get();
  if (!row) throw new ApiError("not_found", "Domain claim not found.");
  return row;
}

export async function getClaim(d1: D1Database, accountId: string, domainId: string, now = Date.now()) {
  return claimView(await latestClaim(d1, accountId, domainId), now);
}

/** Looks for the claim's TXT record now. Found: every other account's copy of the domain is
 * deleted and the claim is `completed`. Not found (or the resolver failed): it stays `pending`. */
export async function verifyClaim(env: Env2, config: TernConfig, accountId: string, domainId: string, now = Date.now(), resolver?: Resolver) {
  const claim = await latestClaim(env.DB, accountId, domainId);
  const status = claimView(claim, now).status;
  if (status !== "pending") {
    if (status === "expired") throw new ApiError("validation_error", "This claim has expired; start a new one with POST /domains/claim.");
    return claimView(claim, now);
  }
  const found = await (resolver ?? dohResolver(config.dohUrl)).lookup(claim.name, "TXT");
  if (found.kind !== "records" || !found.values.some((v) => v.trim() === claim.token)) return claimView(claim, now);

  const db = drizzle(env.DB);
  const others = await db.select({ id: domains.id, accountId: domains.accountId }).from(domains).where(and(eq(domains.name, claim.name), ne(domains.accountId, accountId)));
  for (const o of others) {
    const current = await loadDomain(env.DB, o.accountId, o.id);
    if (current) await deleteDomain(env, config, current, now);
  }
  await db.batch([
    db.update(domainClaims).set({ status: "completed", updatedAt: now }).where(eq(domainClaims.id, claim.id)),
    // Other accounts' claims of the name lose: the zone answered for this one.
    db.update(domainClaims).set({ status: "superseded", updatedAt: now })
      .where(and(eq(domainClaims.name, claim.name), ne(domainClaims.accountId, accountId), eq(domainClaims.status, "pending"))),
  ]);
  return claimView({ ...claim, status: "completed", updatedAt: now }, now);
}
