// The pre-send review of a draft broadcast, as the dashboard shows it before "Send": what would
// stop the send (the same checks sendBroadcast makes, all of them at once) and the deliverability
// insights run on the message a contact would receive (the checks GET /emails/{id}/insights runs
// on a sent email). No unsubscribe check: renderBroadcastBody adds the link where the author
// placed none. Beside them, warnings that do not stop a send (a segment nobody in it would get,
// a button that links nowhere, an uploaded image deleted since), then the verdict that sums
// them up. Templates' review (worker/templates/review.ts) reuses the body and sender checks.
import { and, eq, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Principal } from "../auth.ts";
import { readConfig } from "../config.ts";
import { contacts, contactSegments, contactTopics, domains, segments, suppressions, topics, type BroadcastRow } from "../db/schema.ts";
import type { DmarcInfo } from "../domains/verification.ts";
import { deliverabilityInsights, scanHtml, type Insight, type InsightEmail } from "../insights/checks.ts";
import { parseMailbox, toAsciiDomain } from "../mime/address.ts";
import { BROADCAST_HEADERS } from "./fanout.ts";
import { renderBroadcastBody } from "./content.ts";
import { sendProblems } from "./broadcasts.ts";
import { buttonsWithoutLink, parseDocument } from "./document.ts";
import { deletedImagesIn } from "../media/library.ts";
import type { Lookup } from "../templates/render.ts";

export interface BroadcastReview {
  /** Problems that keep it from being sent, each saying how to fix it. */
  blocking: string[];
  /** What the sender should know but may send anyway, each saying what to do. */
  warnings: string[];
  /** Contacts the fan-out would send to if it ran now; null without a segment. */
  recipients: number | null;
  insights: Insight[];
  /** One sentence after the problems and warnings: whether it can go, and to how many. */
  verdict: string;
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

/** Warnings about a body that sends but shows something broken: buttons and links that go
 * nowhere, and images uploaded to tern that were deleted since (a broken image for readers).
 * Shared by the broadcast and template reviews. */
export async function bodyWarnings(db: D1Database, accountId: string, body: { html: string | null; documentJson: string | null }): Promise<string[]> {
  const out: string[] = [];
  let buttons: string[] = [];
  if (body.documentJson) {
    try {
      buttons = buttonsWithoutLink(parseDocument(body.documentJson));
    } catch {}
  }
  if (buttons.length > 0) {
    out.push(`${buttons.length === 1 ? `The button “${buttons[0]}” has` : `${buttons.length} buttons (${buttons.map((b) => `“${b}”`).join(", ")}) have`} no link, so readers cannot click ${buttons.length === 1 ? "it" : "them"}. Select the button in the editor, press Enter and give its link.`);
  }
  const nowhere = body.html ? scanHtml(body.html).links.filter((l) => /^\s*#?\s*$/.test(l.href)).length : 0;
  if (nowhere > 0) out.push(`${nowhere === 1 ? "A link goes" : `${nowhere} links go`} nowhere (an empty address or “#”). Give ${nowhere === 1 ? "it a web address" : "each a web address"}, or remove the link.`);
  const gone = await deletedImagesIn(db, accountId, body.html);
  if (gone.length > 0) {
    out.push(`${gone.length === 1 ? "An image" : `${gone.length} images`} uploaded to tern ${gone.length === 1 ? "was" : "were"} deleted from Images since ${gone.length === 1 ? "it was" : "they were"} placed here, so readers would see a broken image. Replace ${gone.length === 1 ? "it" : "them"} in the editor (Image, then upload or pick another).`);
  }
  return out;
}

/** The deliverability insights of a message from `from`, with its domain's state: the checks
 * GET /emails/{id}/insights runs on a sent email, run before it is sent. */
export async function messageInsights(env: Env, accountId: string, email: InsightEmail): Promise<Insight[]> {
  const from = parseMailbox(email.from);
  if (!from) return [];
  const host = toAsciiDomain(from.email.slice(from.email.lastIndexOf("@") + 1).toLowerCase());
  const domain = await drizzle(env.DB).select().from(domains).where(and(eq(domains.accountId, accountId), eq(domains.name, host))).get();
  let trackingHost: string | null = null;
  try {
    const url = readConfig(env).publicUrl;
    trackingHost = url ? new URL(url).hostname : null;
  } catch {}
  return deliverabilityInsights(
    email,
    domain ? { name: domain.name, status: domain.status, dmarc: domain.dmarcJson ? (JSON.parse(domain.dmarcJson) as DmarcInfo) : null, openTracking: domain.openTracking, clickTracking: domain.clickTracking } : null,
    { trackingHost },
  );
}

/** The sentence under a broadcast's review, read after its problems and warnings. */
export function broadcastVerdict(blocking: number, warnings: string[], recipients: number | null, failedChecks = 0): string {
  const reach = recipients === null || recipients === 0 ? "" : ` Sent now, it goes to ${recipients.toLocaleString("en-US")} contact${recipients === 1 ? "" : "s"}.`;
  if (blocking > 0) return `It cannot be sent until ${blocking === 1 ? "this is" : `these ${blocking} are`} fixed.`;
  if (recipients === 0) return "Nothing else stops it from being sent, but as things stand it would reach nobody: see the warning above.";
  if (warnings.length > 0) return `It can be sent, but read the warning${warnings.length === 1 ? "" : "s"} above first.${reach}`;
  // "Ready" over a failed check below read as a contradiction: say what the failure risks.
  if (failedChecks > 0) return `It can be sent, but ${failedChecks === 1 ? "a deliverability check" : `${failedChecks} deliverability checks`} below failed: fix ${failedChecks === 1 ? "it" : "them"} or more of it may land in spam.${reach}`;
  return `Ready to send: nothing stops it.${reach}`;
}

export async function reviewBroadcast(env: Env, principal: Principal, row: BroadcastRow, sample: Lookup, now = Date.now()): Promise<BroadcastReview> {
  const blocking = (await sendProblems(env, principal, row, now)).map((e) => e.message);
  const audience = await audienceOf(env.DB, principal.accountId, row);
  const warnings = [
    ...(await audienceWarnings(env.DB, principal.accountId, row, audience)),
    ...(await bodyWarnings(env.DB, principal.accountId, row)),
  ];
  const recipients = audience?.eligible ?? null;
  const body = renderBroadcastBody(row, sample);
  if (!row.fromAddress || !parseMailbox(row.fromAddress)) return { blocking, warnings, recipients, insights: [], verdict: broadcastVerdict(blocking.length, warnings, recipients) };
  const insights = await messageInsights(env, principal.accountId, {
    from: row.fromAddress,
    replyTo: JSON.parse(row.replyToJson) as string[],
    subject: row.subject ?? "",
    html: body.html,
    text: body.text,
    // What the fan-out gives every broadcast email (the consumer adds List-Unsubscribe-Post).
    headers: JSON.parse(BROADCAST_HEADERS) as Record<string, string>,
    attachments: [],
    broadcast: true,
  });
  const verdict = broadcastVerdict(blocking.length, warnings, recipients, insights.filter((i) => i.status === "failed").length);
  return { blocking, warnings, recipients, insights, verdict };
}
