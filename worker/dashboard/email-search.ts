// The Emails page's search: the account's emails newest first, narrowed by recipient,
// subject or id, status, sending domain, tag and date range, a page at a time. The walk is
// always the (account_id, id) index newest first (ids are UUIDv7, so a date range is an id
// range); the other filters are checked on the rows it meets, and a page stops at its limit.
import { and, desc, eq, gte, lt, or, sql, type SQL } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { emails } from "../db/schema.ts";
import { emailListItem } from "../emails/service.ts";
import { uuidv7Floor } from "../ids.ts";

export const EMAIL_STATUSES = ["queued", "scheduled", "sent", "delivered", "delivery_delayed", "opened", "clicked", "bounced", "complained", "failed", "suppressed", "canceled"] as const;

export interface EmailFilters {
  /** A recipient (or part of one), words of the subject, or an email id. */
  q?: string | undefined;
  status?: string | undefined;
  /** The From address's domain. */
  domain?: string | undefined;
  /** "name" or "name:value". */
  tag?: string | undefined;
  /** YYYY-MM-DD, UTC, inclusive. */
  from?: string | undefined;
  to?: string | undefined;
}

const escapeLike = (s: string) => s.replace(/[\\%_]/g, (ch) => `\\${ch}`);
const contains = (col: SQL | typeof emails.subject, s: string) => sql`${col} LIKE ${`%${escapeLike(s)}%`} ESCAPE '\\'`;

function day(s: string | undefined): number | null {
  if (!s || !/^\d{4}-\d{2}-\d{2}$/.test(s)) return null;
  const t = Date.parse(`${s}T00:00:00Z`);
  return Number.isFinite(t) ? t : null;
}

/** The page's query (one row more than the page, which says whether there is more). */
export function searchQuery(d1: D1Database, accountId: string, f: EmailFilters, page: { limit: number; after?: string | undefined }) {
  const where: (SQL | undefined)[] = [eq(emails.accountId, accountId)];
  let error: string | null = null;
  const from = day(f.from);
  const to = day(f.to);
  if ((f.from && from === null) || (f.to && to === null)) error = "Dates must be written YYYY-MM-DD.";
  if (from !== null) where.push(gte(emails.id, uuidv7Floor(from)));
  if (to !== null) where.push(lt(emails.id, uuidv7Floor(to + 86_400_000)));
  if (page.after && /^[0-9a-f-]{36}$/i.test(page.after)) where.push(lt(emails.id, page.after.toLowerCase()));
  if (f.status) where.push(eq(emails.lastEvent, f.status));
  if (f.q) {
    const q = f.q.slice(0, 200);
    where.push(/^[0-9a-f-]{36}$/i.test(q) ? eq(emails.id, q.toLowerCase()) : or(contains(emails.toJson as never, q), contains(emails.subject, q)));
  }
  if (f.domain) {
    const d = escapeLike(f.domain.slice(0, 253));
    where.push(or(sql`${emails.fromAddress} LIKE ${`%@${d}`} ESCAPE '\\'`, sql`${emails.fromAddress} LIKE ${`%@${d}>`} ESCAPE '\\'`));
  }
  if (f.tag) {
    const [name, ...rest] = f.tag.slice(0, 300).split(":");
    const value = rest.join(":");
    where.push(contains(emails.tagsJson as never, value ? JSON.stringify({ name, value }) : `"name":${JSON.stringify(name)}`));
  }
  return { query: drizzle(d1).select().from(emails).where(and(...where)).orderBy(desc(emails.id)).limit(page.limit + 1), error };
}

export async function searchEmails(d1: D1Database, accountId: string, f: EmailFilters, page: { limit: number; after?: string | undefined }) {
  const { query, error } = searchQuery(d1, accountId, f, page);
  const rows = await query;
  return { data: rows.slice(0, page.limit).map(emailListItem), has_more: rows.length > page.limit, error };
}
