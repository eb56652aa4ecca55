// The minimal contact model: an address per account, with a name and whether it unsubscribed.
// Every change writes its contact.* event to the webhook outbox in the same D1 batch.
import { and, eq } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { drizzle } from "drizzle-orm/d1";
import { contacts, type ContactRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { announce, contactOutboxEvent, outboxInsert, type OutboxEvent } from "../events/outbox.ts";
import { uuidv7 } from "../ids.ts";
import { d1ErrorText } from "../sending/quota.ts";
import type { ContactFacts, ContactEventType } from "../webhooks/payloads.ts";

type ContactEnv = Pick<Env, "DB" | "WEBHOOK_QUEUE">;

export function contactFacts(row: ContactRow): ContactFacts {
  return {
    id: row.id,
    email: row.email,
    firstName: row.firstName,
    lastName: row.lastName,
    unsubscribed: row.unsubscribed,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}

/** The change and its event, committed together; the webhook queue is told afterwards. */
async function commit(env: ContactEnv, change: BatchItem<"sqlite">, type: ContactEventType, row: ContactRow, now: number, alongside: BatchItem<"sqlite">[] = []): Promise<void> {
  const db = drizzle(env.DB);
  const event: OutboxEvent = contactOutboxEvent(row.accountId, type, contactFacts(row), now);
  await db.batch([change, outboxInsert(db, event), ...alongside]);
  await announce(env, [event]);
}

export interface NewContact {
  email: string;
  firstName?: string | null;
  lastName?: string | null;
  unsubscribed?: boolean;
}

/** `alongside`: statements committed in the same batch (an unsubscribe's email event). */
export async function createContact(env: ContactEnv, accountId: string, input: NewContact, now = Date.now(), alongside: BatchItem<"sqlite">[] = []): Promise<ContactRow> {
  const row: ContactRow = {
    id: uuidv7(now),
    accountId,
    email: contactKey(input.email),
    firstName: input.firstName ?? null,
    lastName: input.lastName ?? null,
    unsubscribed: input.unsubscribed ?? false,
    createdAt: now,
    updatedAt: now,
  };
  try {
    await commit(env, drizzle(env.DB).insert(contacts).values(row), "contact.created", row, now, alongside);
  } catch (err) {
    if (/UNIQUE constraint failed/i.test(d1ErrorText(err))) throw new ApiError("validation_error", `A contact with the email ${row.email} already exists.`);
    throw err;
  }
  return row;
}

/** The account's contact by its id or by its email address (as Resend's API takes either:
 * `GET /contacts/{id | email}`). An address has an @ and an id never does. */
/** How a contact's address is stored and looked up: one contact per address, whatever its case. */
function contactKey(email: string): string {
  return email.trim().toLowerCase();
}

export async function findContact(db: D1Database, accountId: string, idOrEmail: string): Promise<ContactRow | undefined> {
  const key = idOrEmail.includes("@") ? eq(contacts.email, contactKey(idOrEmail)) : eq(contacts.id, idOrEmail);
  return drizzle(db).select().from(contacts).where(and(eq(contacts.accountId, accountId), key)).get();
}

export interface ContactPatch {
  firstName?: string | null;
  lastName?: string | null;
  unsubscribed?: boolean;
}

/** The contact after the change; undefined when the account has no such contact. No event when nothing changes. */
export async function updateContact(env: ContactEnv, accountId: string, idOrEmail: string, patch: ContactPatch, now = Date.now(), alongside: BatchItem<"sqlite">[] = []): Promise<ContactRow | undefined> {
  const before = await findContact(env.DB, accountId, idOrEmail);
  if (!before) return undefined;
  const after: ContactRow = {
    ...before,
    firstName: patch.firstName !== undefined ? patch.firstName : before.firstName,
    lastName: patch.lastName !== undefined ? patch.lastName : before.lastName,
    unsubscribed: patch.unsubscribed ?? before.unsubscribed,
  };
  if (after.firstName === before.firstName && after.lastName === before.lastName && after.unsubscribed === before.unsubscribed) return before;
  after.updatedAt = now;
  const change = drizzle(env.DB).update(contacts)
    .set({ firstName: after.firstName, lastName: after.lastName, unsubscribed: after.unsubscribed, updatedAt: now })
    .where(and(eq(contacts.accountId, accountId), eq(contacts.id, before.id)));
  await commit(env, change, "contact.updated", after, now, alongside);
  return after;
}

export async function deleteContact(env: ContactEnv, accountId: string, idOrEmail: string, now = Date.now()): Promise<ContactRow | undefined> {
  const before = await findContact(env.DB, accountId, idOrEmail);
  if (!before) return undefined;
  const change = drizzle(env.DB).delete(contacts).where(and(eq(contacts.accountId, accountId), eq(contacts.id, before.id)));
  await commit(env, change, "contact.deleted", before, now);
  return before;
}

/**
 * An unsubscribe from a link tern signed: the account's contact for the address becomes
 * unsubscribed, created if there is none (contact.created), else updated (contact.updated).
 * Unsubscribing twice changes nothing and says nothing.
 */
export async function unsubscribeAddress(env: ContactEnv, accountId: string, email: string, now = Date.now(), alongside: BatchItem<"sqlite">[] = []): Promise<{ contact: ContactRow; event: ContactEventType | null }> {
  const address = contactKey(email);
  // Twice at most: a contact created between the read and the insert is then read again.
  for (let round = 0; ; round++) {
    const existing = await findContact(env.DB, accountId, address);
    if (existing) {
      if (existing.unsubscribed) return { contact: existing, event: null };
      const contact = (await updateContact(env, accountId, existing.id, { unsubscribed: true }, now, alongside))!;
      return { contact, event: "contact.updated" };
    }
    try {
      return { contact: await createContact(env, accountId, { email: address, unsubscribed: true }, now, alongside), event: "contact.created" };
    } catch (err) {
      if (!(err instanceof ApiError) || round > 0) throw err;
    }
  }
}
