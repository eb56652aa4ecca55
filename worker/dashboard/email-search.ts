// The Emails page's search: the account's emails newest first, narrowed by recipient,
// subject or id, status, sending domain, tag and date range, a page at a time. Every walk is an
// index newest first (ids are UUIDv7, so a date range is an id range): a whole address walks
// email_recipients (account_id, address, email_id), a status (account_id, last_event, id),
// anything else (account_id, id); the other filters are checked on the rows it meets, and a
// page stops at its limit. bench/dashboard.ts times these over 1,000,000 emails.
import { and, desc, eq, getTableColumns, gte, lt, or, sql, type SQL } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { emailRecipients, emails } from "../db/schema.ts";
import { emailListItem } from "../emails/service.ts";
import { uuidv7Floor } from "../ids.ts";
import { endsWith, holds, MAX_SEARCH_CHARS } from "../db/search.ts";
import { addressKey, asciiAddressKey } from "../mime/address.ts";

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

function day(s: string | undefined): number | null {
  if (!s || !/^\d{4}-\d{2}-\d{2}$/.test(s)) return null;
  const t = Date.parse(`${s}T00:00:00Z`);
  return Number.isFinite(t) ? t : null;
}

/** A whole address as email_recipients stores it ("Name <A@b.c>" -> "a@b.c"), or null. The
 * same rule as the trigger in migrations/*_email_recipients_triggers.sql. */
export function recipientAddress(q: string): string | null {
  const bare = q.slice(q.indexOf("<") + 1).trim().replace(/>+$/, "").trim().toLowerCase();
  return /^[^\s@<>"]+@[^\s@<>"]+\.[^\s@<>"]+$/.test(bare) ? bare : null;
}

/** The search's whole address, if it is one (an id is not). */
function searchAddress(f: EmailFilters): string | null {
  const q = f.q === undefined ? undefined : [...f.q].slice(0, MAX_SEARCH_CHARS).join("");
  return q && !/^[0-9a-f-]{36}$/i.test(q) ? recipientAddress(q) : null;
}

/** The spellings one mailbox's mail may be stored under: as typed, and with its domain's
 * Unicode and A-label forms (mail to x@xn--bcher-kva.de went to x@b\u00fccher.de). */
export function recipientSpellings(address: string): string[] {
  const key = addressKey(address);
  return [...new Set([address, key, asciiAddressKey(key)])];
}

/** The emails columns for a FROM that drizzle does not see as the table (INDEXED BY). */
const unqualified = Object.fromEntries(
  Object.entries(getTableColumns(emails)).map(([key, col]) => [key, sql`${sql.identifier(col.name)}`.mapWith(col)]),
) as { [K in keyof typeof emails.$inferSelect]: SQL.Aliased<(typeof emails.$inferSelect)[K]> | SQL<(typeof emails.$inferSelect)[K]> };

/** The page's query (one row more than the page, which says whether there is more); with an
 * address, `spelling` is the one of its spellings this query walks. */
export function searchQuery(d1: D1Database, accountId: string, f: EmailFilters, page: { limit: number; after?: string | undefined }, spelling?: string) {
  let error: string | null = null;
  const q = f.q === undefined ? undefined : [...f.q].slice(0, MAX_SEARCH_CHARS).join("");
  const address = spelling ?? searchAddress(f);
  // With an address, the walk is its recipients' key and each email is read by id: a unary
  // plus keeps SQLite from walking an emails index instead (a status's range, then a sort).
  const on = (col: typeof emails.accountId | typeof emails.lastEvent, value: string) => (address ? sql`+${col} = ${value}` : eq(col, value));
  const where: (SQL | undefined)[] = [on(emails.accountId, accountId)];
  // The id ranges go on the column the walk orders by, so they bound the index range it reads.
  const id = address ? emailRecipients.emailId : emails.id;
  if (address) where.push(eq(emailRecipients.accountId, accountId), eq(emailRecipients.address, address));
  const from = day(f.from);
  const to = day(f.to);
  if ((f.from && from === null) || (f.to && to === null)) error = "Dates must be written YYYY-MM-DD.";
  if (from !== null) where.push(gte(id, uuidv7Floor(from)));
  if (to !== null) where.push(lt(id, uuidv7Floor(to + 86_400_000)));
  if (page.after && /^[0-9a-f-]{36}$/i.test(page.after)) where.push(lt(id, page.after.toLowerCase()));
  if (f.status) where.push(on(emails.lastEvent, f.status));
  if (q && !address) {
    where.push(/^[0-9a-f-]{36}$/i.test(q) ? eq(emails.id, q.toLowerCase()) : or(holds(emails.toJson, q), holds(emails.subject, q)));
  }
  if (f.domain) {
    // "a@d" or "Name <a@d>".
    const d = f.domain.slice(0, 253);
    where.push(or(endsWith(emails.fromAddress, `@${d}`), endsWith(emails.fromAddress, `@${d}>`)));
  }
  if (f.tag) {
    const [name, ...rest] = f.tag.slice(0, 300).split(":");
    const value = rest.join(":");
    where.push(holds(emails.tagsJson, value ? JSON.stringify({ name, value }) : `"name":${JSON.stringify(name)}`));
  }
  const db = drizzle(d1);
  const query = address
    ? db.select(getTableColumns(emails)).from(emailRecipients).innerJoin(emails, eq(emails.id, emailRecipients.emailId)).where(and(...where)).orderBy(desc(id)).limit(page.limit + 1)
    : f.status
      // SQLite (no ANALYZE statistics on D1) would rather walk (account_id, id) over a date
      // range than the status's own range: named, so the plan cannot drift to a scan.
      ? db.select(unqualified).from(sql`${emails} INDEXED BY emails_account_status`).where(and(...where)).orderBy(desc(id)).limit(page.limit + 1)
      : db.select().from(emails).where(and(...where)).orderBy(desc(id)).limit(page.limit + 1);
  return { query, error };
}

export async function searchEmails(d1: D1Database, accountId: string, f: EmailFilters, page: { limit: number; after?: string | undefined }) {
  const address = searchAddress(f);
  const spellings = address ? recipientSpellings(address) : [undefined];
  const { query, error } = searchQuery(d1, accountId, f, page, spellings[0]);
  let rows = await query;
  // An address spelled more than one way (an IDN domain) walks each spelling's index range
  // newest first and merges them: one query with IN would sort every match instead.
  if (spellings.length > 1) {
    const more = await Promise.all(spellings.slice(1).map((s) => searchQuery(d1, accountId, f, page, s).query));
    const byId = new Map([...rows, ...more.flat()].map((r) => [r.id, r]));
    rows = [...byId.values()].sort((a, b) => (a.id < b.id ? 1 : -1)).slice(0, page.limit + 1);
  }
  return { data: rows.slice(0, page.limit).map(emailListItem), has_more: rows.length > page.limit, error };
}
