// Topics (Resend's /topics): what a broadcast may be about. default_subscription says whether a
// contact who never chose receives it (opt_in) or not (opt_out); it is fixed at creation, as
// changing it would silently subscribe or drop everyone who never chose.
import { and, eq, inArray } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { broadcasts, contactTopics, contacts, topics, type TopicRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { changeContactsInChunks, type ContactEnv } from "./contacts.ts";
import { uuidv7 } from "../ids.ts";
import { finishPage, pageQuery, type Page } from "../pagination.ts";

export interface NewTopic {
  name: string;
  description?: string | null;
  defaultSubscription: "opt_in" | "opt_out";
  visibility?: "public" | "private";
}

export async function createTopic(db: D1Database, accountId: string, input: NewTopic, now = Date.now()): Promise<TopicRow> {
  const row: TopicRow = {
    id: uuidv7(now),
    accountId,
    name: input.name,
    description: input.description ?? null,
    defaultSubscription: input.defaultSubscription,
    visibility: input.visibility ?? "private",
    createdAt: now,
    updatedAt: now,
  };
  await drizzle(db).insert(topics).values(row);
  return row;
}

export async function findTopic(db: D1Database, accountId: string, id: string): Promise<TopicRow | undefined> {
  return drizzle(db).select().from(topics).where(and(eq(topics.accountId, accountId), eq(topics.id, id))).get();
}

export async function listTopics(db: D1Database, accountId: string, page: Page) {
  const q = pageQuery(topics.id, page, eq(topics.accountId, accountId));
  return finishPage(await drizzle(db).select().from(topics).where(q.where).orderBy(q.orderBy).limit(q.limit), page);
}

/** Name, description and visibility. A request that names `default_subscription` is refused
 * (rather than ignored), so a caller learns it is fixed at creation. */
export async function updateTopic(db: D1Database, accountId: string, id: string, patch: { name?: string; description?: string | null; visibility?: "public" | "private"; defaultSubscription?: unknown }, now = Date.now()): Promise<TopicRow | undefined> {
  if (patch.defaultSubscription !== undefined) {
    throw new ApiError("validation_error", "`default_subscription` is fixed when a topic is created; create a new topic to change it.");
  }
  const row = await findTopic(db, accountId, id);
  if (!row) return undefined;
  const after: TopicRow = {
    ...row,
    name: patch.name ?? row.name,
    description: patch.description !== undefined ? patch.description : row.description,
    visibility: patch.visibility ?? row.visibility,
    updatedAt: now,
  };
  await drizzle(db).update(topics).set({ name: after.name, description: after.description, visibility: after.visibility, updatedAt: now }).where(eq(topics.id, id));
  return after;
}

/** Deletes every contact's choice for the topic (each reports contact.updated), then the topic.
 * A topic a broadcast still going out (or yet to) uses is refused: without it the broadcast
 * could no longer honour the opt-outs (the fan-out stops such a broadcast as failed). */
export async function deleteTopic(env: ContactEnv, accountId: string, id: string, now = Date.now()): Promise<TopicRow | undefined> {
  const row = await findTopic(env.DB, accountId, id);
  if (!row) return undefined;
  const db = drizzle(env.DB);
  const using = await db.select({ id: broadcasts.id, name: broadcasts.name, status: broadcasts.status }).from(broadcasts)
    .where(and(eq(broadcasts.accountId, accountId), eq(broadcasts.topicId, id), inArray(broadcasts.status, ["draft", "scheduled", "queued", "sending"])))
    .limit(11);
  if (using.length > 0) {
    const named = using.slice(0, 10).map((b) => `${b.id}${b.name ? ` (${b.name}, ${b.status})` : ` (${b.status})`}`).join(", ");
    throw new ApiError("validation_error", `Topic ${row.name} (${id}) is used by broadcast${using.length > 1 ? "s" : ""} ${named}${using.length > 10 ? " and more" : ""}; change their topic_id, cancel or delete them first.`);
  }
  const chose = await db.select({ id: contactTopics.contactId }).from(contactTopics).where(eq(contactTopics.topicId, id));
  await changeContactsInChunks(env, accountId, chose.map((c) => c.id), (ids) => [
    db.delete(contactTopics).where(and(eq(contactTopics.topicId, id), inArray(contactTopics.contactId, ids))),
  ], now);
  await db.delete(topics).where(and(eq(topics.accountId, accountId), eq(topics.id, id)));
  return row;
}

/** `topic_id` on a send: the topic must be the account's; recipients whose contact does not
 * receive it (their own opt_out, or no choice and a default of opt_out) are dropped from the
 * envelope. A send with nobody left is refused, so that nothing is recorded for nobody. */
export async function recipientsForTopic(db: D1Database, accountId: string, topicId: string, recipients: string[], where = ""): Promise<string[]> {
  const at = where ? `${where} ` : "";
  const topic = await findTopic(db, accountId, topicId);
  if (!topic) throw new ApiError("validation_error", `${at}\`topic_id\` names topic ${topicId}, which this account does not have.`);
  const keys = recipients.map((r) => r.trim().toLowerCase());
  const rows = await drizzle(db).select({ email: contacts.email, own: contactTopics.subscription }).from(contacts)
    .leftJoin(contactTopics, and(eq(contactTopics.contactId, contacts.id), eq(contactTopics.topicId, topicId)))
    .where(and(eq(contacts.accountId, accountId), inArray(contacts.email, keys)));
  const out = new Set(rows.filter((r) => (r.own ?? topic.defaultSubscription) === "opt_out").map((r) => r.email));
  // An address with no contact has made no choice: the topic's default applies.
  if (topic.defaultSubscription === "opt_out") for (const k of keys) if (!rows.some((r) => r.email === k)) out.add(k);
  const left = recipients.filter((r, i) => !out.has(keys[i]!));
  if (left.length === 0) throw new ApiError("validation_error", `${at}Every recipient has opted out of topic ${topic.name} (${topicId}); nothing was sent.`);
  return left;
}
