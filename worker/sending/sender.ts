// Who may send from which address: `from` must be on a verified domain of the account, and a
// key restricted to a domain may only send from it. Domains are cached per isolate for a few
// seconds, like keys, so a send does not pay a D1 read for them.
import { eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { domains } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import type { Principal } from "../auth.ts";
import { USABLE_STATUSES } from "../domains/verification.ts";
import { toAsciiDomain } from "../mime/address.ts";

export interface SendingDomain {
  id: string;
  name: string;
  region: string;
  status: string;
}

const CACHE_MS = 5_000;

const cache = new Map<string, { domains: SendingDomain[]; expires: number }>();

export function forgetAccountDomains(accountId: string): void {
  cache.delete(accountId);
}

async function accountDomains(db: D1Database, accountId: string): Promise<SendingDomain[]> {
  const now = Date.now();
  const hit = cache.get(accountId);
  if (hit && hit.expires > now) return hit.domains;
  const rows = await drizzle(db)
    .select({ id: domains.id, name: domains.name, region: domains.region, status: domains.status })
    .from(domains)
    .where(eq(domains.accountId, accountId));
  if (cache.size > 10_000) cache.clear();
  cache.set(accountId, { domains: rows, expires: now + CACHE_MS });
  return rows;
}

/** The verified domain `fromEmail` is sent from, or the contract's 403. */
export async function authorizeSender(db: D1Database, principal: Principal, fromEmail: string): Promise<SendingDomain> {
  const domainName = fromEmail.slice(fromEmail.lastIndexOf("@") + 1).toLowerCase();
  const list = await accountDomains(db, principal.accountId);
  const asciiName = toAsciiDomain(domainName);
  const domain = list.find((d) => d.name === asciiName && (USABLE_STATUSES as readonly string[]).includes(d.status));
  if (!domain) {
    throw new ApiError(
      "validation_error",
      `The ${domainName} domain is not verified. Add and verify it on the domains API first.`,
      403,
    );
  }
  if (principal.domainId && principal.domainId !== domain.id) {
    throw new ApiError("validation_error", `This API key may only send from its own domain, not ${domainName}.`, 403);
  }
  return domain;
}
