// The account's suppression list: addresses tern does not send to, because they bounced hard,
// complained, or were added by hand. Writers (the consumer's immediate bounces, DSN and ARF
// reports, the API) add rows with suppressStatement inside the batch of their own change; the
// consumer asks suppressedAmong before each attempt and settles those recipients as suppressed.
import { and, eq, inArray, sql } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import type { DrizzleD1Database } from "drizzle-orm/d1";
import { emailEvents, suppressions } from "../db/schema.ts";
import { uuidv7 } from "../ids.ts";
import { addressKey, asciiAddressKey } from "../mime/address.ts";

export type SuppressionReason = "bounce" | "complaint" | "manual";

export interface SuppressionInput {
  accountId: string;
  email: string;
  reason: SuppressionReason;
  /** The email whose bounce or complaint put the address here. */
  emailId?: string | null;
  /** The bounce's diagnostic or the complaint's feedback type, for people. */
  detail?: string | null;
  now: number;
}

/** Suppression is per mailbox, however the address is spelled (addressKey). */
export function suppressionKey(email: string): string {
  return addressKey(email);
}

/** INSERT OR IGNORE: an address already on the list keeps its first reason. With `ifRecorded`,
 * only if that email event (inserted earlier in the same batch) is there: a settlement's
 * bounce suppresses only if the settlement applied (delivery/consumer.ts). */
export function suppressStatement(db: DrizzleD1Database, s: SuppressionInput, ifRecorded?: string): BatchItem<"sqlite"> {
  const row = {
    id: uuidv7(s.now),
    accountId: s.accountId,
    email: suppressionKey(s.email),
    reason: s.reason,
    emailId: s.emailId ?? null,
    detail: s.detail == null ? null : s.detail.slice(0, 1000),
    createdAt: s.now,
  };
  if (ifRecorded === undefined) return db.insert(suppressions).values(row).onConflictDoNothing();
  const fields = Object.fromEntries(Object.entries(row).map(([k, v]) => [k, sql`${v}`.as(suppressions[k as keyof typeof row].name)]));
  return db.insert(suppressions).select(db.select(fields).from(emailEvents).where(eq(emailEvents.id, ifRecorded)) as never).onConflictDoNothing();
}

/** The addresses of `emails` that are on the account's list, as a set of their keys
 * (suppressionKey). A row stored before addresses took one spelling may still hold the A-label
 * form until worker/maintenance.ts rewrites it: that form is looked for too. */
export async function suppressedAmong(db: DrizzleD1Database, accountId: string, emails: readonly string[]): Promise<Set<string>> {
  const keys = [...new Set(emails.flatMap((e) => {
    const key = suppressionKey(e);
    const ascii = asciiAddressKey(key);
    return ascii === key ? [key] : [key, ascii];
  }))];
  const found = new Set<string>();
  for (let i = 0; i < keys.length; i += 90) {
    const rows = await db.select({ email: suppressions.email }).from(suppressions)
      .where(and(eq(suppressions.accountId, accountId), inArray(suppressions.email, keys.slice(i, i + 90))));
    for (const r of rows) found.add(suppressionKey(r.email));
  }
  return found;
}
