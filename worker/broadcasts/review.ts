// The pre-send review of a draft broadcast, as the dashboard shows it before "Send": what would
// stop the send (the same checks sendBroadcast makes, all of them at once) and the deliverability
// insights run on the message a contact would receive (the checks GET /emails/{id}/insights runs
// on a sent email). No unsubscribe check: renderBroadcastBody adds the link where the author
// placed none. Beside them, warnings that do not stop a send (a segment nobody in it would get).
import { and, eq, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Principal } from "../auth.ts";
import { readConfig } from "../config.ts";
import { contacts, contactSegments, contactTopics, domains, segments, suppressions, topics, type BroadcastRow } from "../db/schema.ts";
import type { DmarcInfo } from "../domains/verification.ts";
import { deliverabilityInsights, type Insight } from "../insights/checks.ts";
import { parseMailbox, toAsciiDomain } from "../mime/address.ts";
import { BROADCAST_HEADERS } from "./fanout.ts";
import { renderBroadcastBody } from "./content.ts";
import { sendProblems } from "./broadcasts.ts";
import type { Lookup } from "../templates/render.ts";

export interface BroadcastReview {
  /** Problems that keep it from being sent, each saying how to fix it. */
  blocking: string[];
  /** What the sender should know but may send anyway, each saying what to do. */
  warnings: string[];
  /** Contacts the fan-out would send to if it ran now; null without a segment. */
  recipients: number | null;
  insights: Insight[];
}

/** The segment's contacts a send now would reach, by the fan-out's own rules (fanout.ts): not
 * unsubscribed, not suppressed, receiving the topic if there is one; and the segment's size. */
export async function audienceOf(db: D1Database, accountId: string, row: Pick<BroadcastRow, "segmentId" | "topicId">): Promise<{ members: number; eligible: number } | null> {
  if (!row.segmentId) return null;
  const d = drizzle(db);
  const topic = row.topicId ? await d.select().from(topics).where(and(eq(topics.id, row.topicId), eq(topics.accountId, accountId))).get() : undefined;
  const receives = topic ? sql`coalesce(${contactTopics.subscription}, ${topic.defaultSubscription}) = 'opt_in'` : sql`1`;
  const counts = await d.select({
    members: sql<number>`count(*)`,
    eligible: sql<number>`coalesce(sum(case when ${contacts.unsubscribed} = 0 and ${suppressions.id} is null and ${receives} then 1 else 0 end), 0)`,
  }).from(contactSegments)
    .innerJoin(contacts, eq(contacts.id, contactSegments.contactId))
    .leftJoin(contactTopics, and(eq(contactTopics.contactId, contactSegments.contactId), eq(contactTopics.topicId, row.topicId ?? "")))
    .leftJoin(suppressions, and(eq(suppressions.accountId, contacts.accountId), eq(suppressions.email, contacts.email)))
    .where(and(eq(contactSegments.segmentId, row.segmentId), eq(contactSegments.accountId, accountId))).get();
  return { members: Number(counts?.members ?? 0), eligible: Number(counts?.eligible ?? 0) };
}

/** A warning when a send now would reach nobody. A warning, not a block: a broadcast may be
 * scheduled before its contacts are imported, and Resend accepts it too. */
async function audienceWarnings(db: D1Database, accountId: string, row: BroadcastRow, audience: { members: number; eligible: number } | null): Promise<string[]> {
  if (!audience || audience.eligible > 0) return [];
  const seg = await drizzle(db).select({ name: segments.name }).from(segments).where(and(eq(segments.id, row.segmentId!), eq(segments.accountId, accountId))).get();
  if (!seg) return []; // a segment that is gone already blocks the send
  const segment = `the segment “${seg.name}”`;
  const why = audience.members === 0
    ? `${segment.charAt(0).toUpperCase()}${segment.slice(1)} has no contacts`
    : `None of the ${audience.members} contact${audience.members === 1 ? "" : "s"} in ${segment} can receive it (unsubscribed, suppressed${row.topicId ? " or opted out of its topic" : ""})`;
  return [`${why}, so sent now it would reach nobody. Add contacts to the segment (Contacts, or POST /contacts), pick another segment, or schedule it for after they are added.`];
}

export async function reviewBroadcast(env: Env, principal: Principal, row: BroadcastRow, sample: Lookup, now = Date.now()): Promise<BroadcastReview> {
  const blocking = (await sendProblems(env, principal, row, now)).map((e) => e.message);
  const audience = await audienceOf(env.DB, principal.accountId, row);
  const warnings = await audienceWarnings(env.DB, principal.accountId, row, audience);
  const recipients = audience?.eligible ?? null;
  const body = renderBroadcastBody(row, sample);
  const from = row.fromAddress ? parseMailbox(row.fromAddress) : null;
  if (!from) return { blocking, warnings, recipients, insights: [] };
  const host = toAsciiDomain(from.email.slice(from.email.lastIndexOf("@") + 1).toLowerCase());
  const domain = await drizzle(env.DB).select().from(domains).where(and(eq(domains.accountId, principal.accountId), eq(domains.name, host))).get();
  let trackingHost: string | null = null;
  try {
    const url = readConfig(env).publicUrl;
    trackingHost = url ? new URL(url).hostname : null;
  } catch {}
  const insights = deliverabilityInsights(
    {
      from: row.fromAddress!,
      replyTo: JSON.parse(row.replyToJson) as string[],
      subject: row.subject ?? "",
      html: body.html,
      text: body.text,
      // What the fan-out gives every broadcast email (the consumer adds List-Unsubscribe-Post).
      headers: JSON.parse(BROADCAST_HEADERS) as Record<string, string>,
      attachments: [],
      broadcast: true,
    },
    domain ? { name: domain.name, status: domain.status, dmarc: domain.dmarcJson ? (JSON.parse(domain.dmarcJson) as DmarcInfo) : null, openTracking: domain.openTracking, clickTracking: domain.clickTracking } : null,
    { trackingHost },
  );
  return { blocking, warnings, recipients, insights };
}
