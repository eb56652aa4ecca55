// The pre-send review of a draft broadcast, as the dashboard shows it before "Send": what would
// stop the send (the same checks sendBroadcast makes, all of them at once) and the deliverability
// insights run on the message a contact would receive (the checks GET /emails/{id}/insights runs
// on a sent email). No unsubscribe check: renderBroadcastBody adds the link where the author
// placed none.
import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Principal } from "../auth.ts";
import { readConfig } from "../config.ts";
import { domains, type BroadcastRow } from "../db/schema.ts";
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
  insights: Insight[];
}

export async function reviewBroadcast(env: Env, principal: Principal, row: BroadcastRow, sample: Lookup, now = Date.now()): Promise<BroadcastReview> {
  const blocking = (await sendProblems(env, principal, row, now)).map((e) => e.message);
  const body = renderBroadcastBody(row, sample);
  const from = row.fromAddress ? parseMailbox(row.fromAddress) : null;
  if (!from) return { blocking, insights: [] };
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
  return { blocking, insights };
}
