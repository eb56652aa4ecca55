// The preference page behind a broadcast's unsubscribe link: the recipient leaves the
// broadcast's topic or everything; one-click (RFC 8058) from a mail client leaves the topic of a
// topic-scoped broadcast and everything otherwise. Each choice reports contact.updated (or
// contact.created for an address that had no contact).
import { eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { broadcasts, emails, topics } from "../db/schema.ts";
import { recordUnsubscribe } from "../tracking/record.ts";
import { updateContactTopics, type ContactEnv } from "./contacts.ts";
import type { UnsubscribeClaim } from "./unsubscribe-token.ts";

export interface PreferenceTopic {
  id: string;
  name: string;
  description: string | null;
}

/** The topic of the broadcast the email was sent for, if it has one. */
export async function topicOfEmail(db: D1Database, claim: UnsubscribeClaim): Promise<PreferenceTopic | null> {
  const row = await drizzle(db).select({ id: topics.id, name: topics.name, description: topics.description, accountId: topics.accountId })
    .from(emails).innerJoin(broadcasts, eq(broadcasts.id, emails.broadcastId)).innerJoin(topics, eq(topics.id, broadcasts.topicId))
    .where(eq(emails.id, claim.emailId)).get();
  return row && row.accountId === claim.accountId ? { id: row.id, name: row.name, description: row.description } : null;
}

export type PreferenceChoice = "topic" | "all" | "one-click";

/** Applies the choice; says what the recipient left. */
export async function applyPreference(env: ContactEnv, claim: UnsubscribeClaim, choice: PreferenceChoice): Promise<{ left: "topic" | "all"; topic: PreferenceTopic | null }> {
  const topic = choice === "all" ? null : await topicOfEmail(env.DB, claim);
  if (topic) {
    const done = await updateContactTopics(env, claim.accountId, claim.recipient, [{ id: topic.id, subscription: "opt_out" }]);
    if (done) return { left: "topic", topic };
  }
  // Leaving everything is an unsubscribe the metrics count, recorded on the email.
  await recordUnsubscribe(env, claim);
  return { left: "all", topic };
}
