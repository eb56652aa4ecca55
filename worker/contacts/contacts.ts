// Contacts: an address per account with a name, whether it unsubscribed, its property values,
// the segments it belongs to and its topic choices. Every change writes its contact.* event to
// the webhook outbox in the same D1 batch. Routes and dashboard pages are thin callers of this
// module: the queries live here.
import { contains, holds, MAX_SEARCH_CHARS } from "../db/search.ts";
import { and, eq, inArray, or, sql, type SQL } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { drizzle } from "drizzle-orm/d1";
import { contactSegments, contactTopics, contacts, segments, topics, type ContactRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { announce, outboxWritten, announceHeard, contactOutboxEvent, outboxInsert, type OutboxEvent } from "../events/outbox.ts";
import { uuidv7 } from "../ids.ts";
import { addressKey } from "../mime/address.ts";
import { finishPage, pageQuery, type Page } from "../pagination.ts";
import { d1ErrorText } from "../sending/quota.ts";
import type { ContactFacts, ContactEventType } from "../webhooks/payloads.ts";
import { checkPropertyValues, mergeProperties, refuseControlCharacters, type PropertyValues } from "./properties.ts";

export type ContactEnv = Pick<Env, "DB" | "WEBHOOK_QUEUE">;
export type Subscription = "opt_in" | "opt_out";
export interface TopicChoice {
  id: string;
  subscription: Subscription;
}

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

export function contactProperties(row: ContactRow): PropertyValues {
  return JSON.parse(row.propertiesJson) as PropertyValues;
}

/** The changes and their event, committed together (with `alongside`: statements of another
 * record, such as an unsubscribe's email event); the webhook queue is told afterwards. */
async function commit(env: ContactEnv, changes: BatchItem<"sqlite">[], type: ContactEventType, row: ContactRow, now: number, alongside: BatchItem<"sqlite">[] = []): Promise<void> {
  const db = drizzle(env.DB);
  const event: OutboxEvent = contactOutboxEvent(row.accountId, type, contactFacts(row), now);
  const results = await db.batch([...changes, outboxInsert(db, event), ...alongside] as unknown as [BatchItem<"sqlite">]);
  if (outboxWritten(results[changes.length])) await announce(env, [event]);
}

/** How a contact's address is stored and looked up: one contact per mailbox, however the
 * address is spelled (addressKey). */
export function contactKey(email: string): string {
  return addressKey(email);
}

export interface NewContact {
  email: string;
  firstName?: string | null;
  lastName?: string | null;
  unsubscribed?: boolean;
  properties?: Record<string, unknown>;
  /** Segment ids to join. */
  segments?: string[];
  topics?: TopicChoice[];
}

/** `alongside`: statements committed in the same batch (an unsubscribe's email event). */
export async function createContact(env: ContactEnv, accountId: string, input: NewContact, now = Date.now(), alongside: BatchItem<"sqlite">[] = []): Promise<ContactRow> {
  refuseControlCharacters("first_name", input.firstName);
  refuseControlCharacters("last_name", input.lastName);
  const properties = input.properties ? await checkPropertyValues(env.DB, accountId, input.properties) : {};
  const segmentIds = [...new Set(input.segments ?? [])];
  await requireSegments(env.DB, accountId, segmentIds, "segments");
  const choices = input.topics ?? [];
  await requireTopics(env.DB, accountId, choices.map((t) => t.id), "topics");
  const row: ContactRow = {
    id: uuidv7(now),
    accountId,
    email: contactKey(input.email),
    firstName: input.firstName ?? null,
    lastName: input.lastName ?? null,
    unsubscribed: input.unsubscribed ?? false,
    propertiesJson: JSON.stringify(mergeProperties({}, properties)),
    createdAt: now,
    updatedAt: now,
  };
  const db = drizzle(env.DB);
  const changes: BatchItem<"sqlite">[] = [db.insert(contacts).values(row)];
  for (const segmentId of segmentIds) changes.push(db.insert(contactSegments).values({ segmentId, contactId: row.id, accountId, createdAt: now }));
  if (choices.length > 0) changes.push(...topicStatements(env.DB, accountId, row.id, choices, now));
  try {
    await commit(env, changes, "contact.created", row, now, alongside);
  } catch (err) {
    if (/UNIQUE constraint failed/i.test(d1ErrorText(err))) throw new ApiError("validation_error", `A contact with the email ${row.email} already exists.`);
    throw err;
  }
  return row;
}

/** The account's contact by its id or by its email address (as Resend's API takes either:
 * `GET /contacts/{id | email}`). An address has an @ and an id never does. */
export async function findContact(db: D1Database, accountId: string, idOrEmail: string): Promise<ContactRow | undefined> {
  const key = idOrEmail.includes("@") ? eq(contacts.email, contactKey(idOrEmail)) : eq(contacts.id, idOrEmail);
  return drizzle(db).select().from(contacts).where(and(eq(contacts.accountId, accountId), key)).get();
}

/** Contacts whose address (stored lowercased: searched for the term lowercased) or first,
 * last or full name (ASCII letters in any case) holds `q`. */
function matching(q: string): SQL | undefined {
  const term = [...q.trim()].slice(0, MAX_SEARCH_CHARS).join("");
  return or(
    contains(contacts.email, contactKey(term)),
    holds(contacts.firstName, term),
    holds(contacts.lastName, term),
    holds(sql`(coalesce(${contacts.firstName}, '') || ' ' || coalesce(${contacts.lastName}, ''))`, term),
  );
}

/** A page of the account's contacts, newest first; with `segmentId`, only that segment's
 * (undefined when the account has no such segment); with `q`, only those whose address or
 * name holds it. The walk is always an index in id order (the account's contacts, or the
 * segment's members), the search checked on the rows it meets, so any page costs a page. */
export async function listContacts(db: D1Database, accountId: string, page: Page, segmentId?: string, q?: string) {
  const found = await contactsQuery(db, accountId, page, segmentId, q);
  return found && finishPage(await found.rows(), page);
}

/** The query listContacts runs (undefined when the segment is not the account's); `query` is
 * there for query-plan tests. */
export async function contactsQuery(db: D1Database, accountId: string, page: Page, segmentId?: string, q?: string) {
  const d = drizzle(db);
  const search = q?.trim() ? matching(q) : undefined;
  if (segmentId === undefined) {
    const p = pageQuery(contacts.id, page, and(eq(contacts.accountId, accountId), search));
    const query = d.select().from(contacts).where(p.where).orderBy(p.orderBy).limit(p.limit);
    return { query, rows: async (): Promise<ContactRow[]> => await query };
  }
  if (!(await findSegmentRow(db, accountId, segmentId))) return undefined;
  const p = pageQuery(contactSegments.contactId, page, and(eq(contactSegments.segmentId, segmentId), search));
  const query = d.select({ c: contacts }).from(contactSegments).innerJoin(contacts, eq(contacts.id, contactSegments.contactId))
    .where(p.where).orderBy(p.orderBy).limit(p.limit);
  return { query, rows: async (): Promise<ContactRow[]> => (await query).map((r) => r.c) };
}

export interface ContactPatch {
  firstName?: string | null;
  lastName?: string | null;
  unsubscribed?: boolean;
  /** Values to set; null removes a key. */
  properties?: Record<string, unknown>;
}

/** The contact after the change; undefined when the account has no such contact. No event when nothing changes. */
export async function updateContact(env: ContactEnv, accountId: string, idOrEmail: string, patch: ContactPatch, now = Date.now(), alongside: BatchItem<"sqlite">[] = []): Promise<ContactRow | undefined> {
  refuseControlCharacters("first_name", patch.firstName);
  refuseControlCharacters("last_name", patch.lastName);
  const before = await findContact(env.DB, accountId, idOrEmail);
  if (!before) return undefined;
  const properties = patch.properties ? mergeProperties(contactProperties(before), await checkPropertyValues(env.DB, accountId, patch.properties)) : contactProperties(before);
  const after: ContactRow = {
    ...before,
    firstName: patch.firstName !== undefined ? patch.firstName : before.firstName,
    lastName: patch.lastName !== undefined ? patch.lastName : before.lastName,
    unsubscribed: patch.unsubscribed ?? before.unsubscribed,
    propertiesJson: JSON.stringify(properties),
  };
  if (after.firstName === before.firstName && after.lastName === before.lastName && after.unsubscribed === before.unsubscribed && after.propertiesJson === before.propertiesJson) return before;
  after.updatedAt = now;
  const change = drizzle(env.DB).update(contacts)
    .set({ firstName: after.firstName, lastName: after.lastName, unsubscribed: after.unsubscribed, propertiesJson: after.propertiesJson, updatedAt: now })
    .where(and(eq(contacts.accountId, accountId), eq(contacts.id, before.id)));
  await commit(env, [change], "contact.updated", after, now, alongside);
  return after;
}

export async function deleteContact(env: ContactEnv, accountId: string, idOrEmail: string, now = Date.now()): Promise<ContactRow | undefined> {
  const before = await findContact(env.DB, accountId, idOrEmail);
  if (!before) return undefined;
  // Its memberships and topic choices go with it (foreign keys, ON DELETE CASCADE).
  const change = drizzle(env.DB).delete(contacts).where(and(eq(contacts.accountId, accountId), eq(contacts.id, before.id)));
  await commit(env, [change], "contact.deleted", before, now);
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

// --- Segments of a contact ---------------------------------------------------------------------

async function findSegmentRow(db: D1Database, accountId: string, segmentId: string) {
  return drizzle(db).select().from(segments).where(and(eq(segments.accountId, accountId), eq(segments.id, segmentId))).get();
}

/** Every id must be one of the account's segments; `field` names the request field. */
async function requireSegments(db: D1Database, accountId: string, ids: string[], field: string): Promise<void> {
  if (ids.length === 0) return;
  const found = new Set<string>();
  for (let i = 0; i < ids.length; i += 90) {
    const rows = await drizzle(db).select({ id: segments.id }).from(segments).where(and(eq(segments.accountId, accountId), inArray(segments.id, ids.slice(i, i + 90))));
    for (const r of rows) found.add(r.id);
  }
  const missing = ids.find((id) => !found.has(id));
  if (missing !== undefined) throw new ApiError("validation_error", `\`${field}\` names segment ${missing}, which this account does not have.`);
}

/** The contact's segments, with when it joined each, newest membership first. */
export async function listContactSegments(db: D1Database, accountId: string, idOrEmail: string, page: Page) {
  const contact = await findContact(db, accountId, idOrEmail);
  if (!contact) return undefined;
  const q = pageQuery(contactSegments.segmentId, page, eq(contactSegments.contactId, contact.id));
  const rows = await drizzle(db).select({ id: segments.id, name: segments.name, createdAt: contactSegments.createdAt })
    .from(contactSegments).innerJoin(segments, eq(segments.id, contactSegments.segmentId))
    .where(q.where).orderBy(q.orderBy).limit(q.limit);
  return finishPage(rows, page);
}

export type MembershipResult = { ok: true; contact: ContactRow; segmentId: string } | { ok: false; missing: "contact" | "segment" };

/** Adds the contact to the segment (contact.updated); adding it twice changes nothing. */
export async function addContactToSegment(env: ContactEnv, accountId: string, idOrEmail: string, segmentId: string, now = Date.now()): Promise<MembershipResult> {
  const contact = await findContact(env.DB, accountId, idOrEmail);
  if (!contact) return { ok: false, missing: "contact" };
  if (!(await findSegmentRow(env.DB, accountId, segmentId))) return { ok: false, missing: "segment" };
  const db = drizzle(env.DB);
  const existing = await db.select().from(contactSegments).where(and(eq(contactSegments.segmentId, segmentId), eq(contactSegments.contactId, contact.id))).get();
  if (existing) return { ok: true, contact, segmentId };
  const after = { ...contact, updatedAt: now };
  await commit(env, [
    db.insert(contactSegments).values({ segmentId, contactId: contact.id, accountId, createdAt: now }).onConflictDoNothing(),
    db.update(contacts).set({ updatedAt: now }).where(eq(contacts.id, contact.id)),
  ], "contact.updated", after, now);
  return { ok: true, contact: after, segmentId };
}

/** Removes the contact from the segment (contact.updated); a contact not in it is a 404 to the caller. */
export async function removeContactFromSegment(env: ContactEnv, accountId: string, idOrEmail: string, segmentId: string, now = Date.now()): Promise<MembershipResult> {
  const contact = await findContact(env.DB, accountId, idOrEmail);
  if (!contact) return { ok: false, missing: "contact" };
  const db = drizzle(env.DB);
  const existing = await db.select().from(contactSegments).where(and(eq(contactSegments.segmentId, segmentId), eq(contactSegments.contactId, contact.id), eq(contactSegments.accountId, accountId))).get();
  if (!existing) return { ok: false, missing: "segment" };
  const after = { ...contact, updatedAt: now };
  await commit(env, [
    db.delete(contactSegments).where(and(eq(contactSegments.segmentId, segmentId), eq(contactSegments.contactId, contact.id))),
    db.update(contacts).set({ updatedAt: now }).where(eq(contacts.id, contact.id)),
  ], "contact.updated", after, now);
  return { ok: true, contact: after, segmentId };
}

// --- Topics of a contact -------------------------------------------------------------------------

async function requireTopics(db: D1Database, accountId: string, ids: string[], field: string): Promise<void> {
  const unique = [...new Set(ids)];
  if (unique.length === 0) return;
  const rows = await drizzle(db).select({ id: topics.id }).from(topics).where(and(eq(topics.accountId, accountId), inArray(topics.id, unique)));
  const found = new Set(rows.map((r) => r.id));
  const missing = unique.find((id) => !found.has(id));
  if (missing !== undefined) throw new ApiError("validation_error", `\`${field}\` names topic ${missing}, which this account does not have.`);
}

function topicStatements(d1: D1Database, accountId: string, contactId: string, choices: TopicChoice[], now: number): BatchItem<"sqlite">[] {
  const db = drizzle(d1);
  return choices.map((t) =>
    db.insert(contactTopics).values({ contactId, topicId: t.id, accountId, subscription: t.subscription, updatedAt: now })
      .onConflictDoUpdate({ target: [contactTopics.contactId, contactTopics.topicId], set: { subscription: t.subscription, updatedAt: now } }),
  );
}

/** Every topic of the account with the contact's subscription to it (its own choice, else the topic's default). */
export async function listContactTopics(db: D1Database, accountId: string, idOrEmail: string, page: Page) {
  const contact = await findContact(db, accountId, idOrEmail);
  if (!contact) return undefined;
  const q = pageQuery(topics.id, page, eq(topics.accountId, accountId));
  const rows = await drizzle(db).select({ topic: topics, own: contactTopics.subscription }).from(topics)
    .leftJoin(contactTopics, and(eq(contactTopics.topicId, topics.id), eq(contactTopics.contactId, contact.id)))
    .where(q.where).orderBy(q.orderBy).limit(q.limit);
  // created_at is the topic's: resend-rust's ContactTopic requires it.
  return finishPage(rows.map((r) => ({
    id: r.topic.id, name: r.topic.name, description: r.topic.description, subscription: (r.own ?? r.topic.defaultSubscription) as Subscription,
    created_at: new Date(r.topic.createdAt).toISOString(),
  })), page);
}

/** Sets the contact's choices (contact.updated when any changes). */
export async function updateContactTopics(env: ContactEnv, accountId: string, idOrEmail: string, choices: TopicChoice[], now = Date.now()): Promise<{ contact: ContactRow; topics: TopicChoice[] } | undefined> {
  const contact = await findContact(env.DB, accountId, idOrEmail);
  if (!contact) return undefined;
  // The last choice for a topic wins, as it would applied in order.
  const byTopic = new Map(choices.map((c) => [c.id, c]));
  const wanted = [...byTopic.values()];
  await requireTopics(env.DB, accountId, wanted.map((t) => t.id), "topics");
  const db = drizzle(env.DB);
  const current = wanted.length === 0 ? [] : await db.select().from(contactTopics).where(and(eq(contactTopics.contactId, contact.id), inArray(contactTopics.topicId, wanted.map((t) => t.id))));
  const had = new Map(current.map((r) => [r.topicId, r.subscription]));
  const changed = wanted.filter((t) => had.get(t.id) !== t.subscription);
  if (changed.length === 0) return { contact, topics: wanted };
  const after = { ...contact, updatedAt: now };
  await commit(env, [...topicStatements(env.DB, accountId, contact.id, changed, now), db.update(contacts).set({ updatedAt: now }).where(eq(contacts.id, contact.id))], "contact.updated", after, now);
  return { contact: after, topics: wanted };
}

/** Whether a contact receives a topic's broadcasts: its own choice, else the topic's default. */
export function receivesTopic(own: Subscription | null | undefined, defaultSubscription: Subscription): boolean {
  return (own ?? defaultSubscription) === "opt_in";
}

/** A change to many contacts at once (a segment, topic or property deleted): done in chunks,
 * each one D1 batch with its changes, the contacts' updated_at and their contact.updated
 * events, so that every contact touched is reported and a crash leaves no change unreported. */
export async function changeContactsInChunks(env: ContactEnv, accountId: string, contactIds: string[], changesFor: (ids: string[]) => BatchItem<"sqlite">[], now = Date.now()): Promise<void> {
  const db = drizzle(env.DB);
  for (let i = 0; i < contactIds.length; i += 50) {
    const ids = contactIds.slice(i, i + 50);
    const rows = await db.select().from(contacts).where(and(eq(contacts.accountId, accountId), inArray(contacts.id, ids)));
    const events = rows.map((r) => contactOutboxEvent(accountId, "contact.updated", contactFacts({ ...r, updatedAt: now }), now));
    await db.batch([
      ...changesFor(ids),
      db.update(contacts).set({ updatedAt: now }).where(and(eq(contacts.accountId, accountId), inArray(contacts.id, ids))),
      ...events.map((e) => outboxInsert(db, e)),
    ] as unknown as [BatchItem<"sqlite">]);
    await announceHeard(env, events);
  }
}
