// Delivery reports that come back to an email's return-path address (RFC 3464 DSNs, ARF
// complaints, plain-text bounces) become that email's events: delivered, bounced (with type,
// subType, diagnosticCode), delivery_delayed, complained. Permanent bounces and complaints put
// the address on the account's suppression list. A report seen twice changes nothing twice.
import { and, eq } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { drizzle } from "drizzle-orm/d1";
import type { TernConfig } from "../config.ts";
import { emailEvents, emails, type EmailRow } from "../db/schema.ts";
import { suppressStatement } from "../suppressions/suppress.ts";
import { announce, emailFacts, emailOutboxEvent, outboxInsertIfRecorded, type OutboxEvent } from "../events/outbox.ts";
import { uuidv7 } from "../ids.ts";
import { rollupItem } from "../metrics/rollup.ts";
import { parseMailbox, toAsciiEmail } from "../mime/address.ts";
import { parseReport, type Report, type ReportOutcome } from "../reports/parse.ts";
import { emailIdOfReturnPath } from "../sending/return-path.ts";

export type ReportResult =
  | { applied: true; emailId: string; events: string[] }
  | { applied: false; reason: string };

type Kind = "bounced" | "delivery_delayed" | "delivered" | "complained";
const KIND: Record<ReportOutcome["kind"], Kind> = { bounce: "bounced", delay: "delivery_delayed", delivered: "delivered", complaint: "complained" };

function eventData(o: ReportOutcome): Record<string, unknown> {
  const base = { recipients: o.recipients, status: o.status, source: "report" };
  switch (o.kind) {
    case "bounce":
      return { ...base, bounce: o.bounce };
    case "delay":
      return { ...base, message: o.diagnosticCode[0] ?? "Delivery is delayed.", diagnosticCode: o.diagnosticCode };
    case "complaint":
      return { ...base, complaint: o.complaint };
    default:
      return base;
  }
}

/** Same type, recipients and status: the same report again (or the same fact twice). */
function fingerprint(type: string, data: { recipients?: unknown; status?: unknown }): string {
  const recipients = Array.isArray(data.recipients) ? [...(data.recipients as string[])].map((r) => r.toLowerCase()).sort() : [];
  return JSON.stringify([type, recipients, data.status ?? null]);
}

/** The email a report is about: from the address it came to, or (a feedback loop that
 * reports to a fixed address) from the reported message's envelope sender. */
export async function reportedEmailId(masterKey: string | undefined, to: string, report: Report | null): Promise<string | null> {
  const direct = await emailIdOfReturnPath(masterKey, to);
  if (direct) return direct;
  return report?.originalMailFrom ? emailIdOfReturnPath(masterKey, report.originalMailFrom) : null;
}

export async function applyReport(env: Env, config: TernConfig, to: string, raw: Uint8Array, now: number): Promise<ReportResult> {
  const parsed = parseReport(raw, { returnPath: to });
  if (!parsed.ok) return { applied: false, reason: parsed.message };
  const emailId = await reportedEmailId(config.masterKey, to, parsed.report);
  if (!emailId) return { applied: false, reason: "The report is not about an email tern sent." };
  const db = drizzle(env.DB);
  const email = await db.select().from(emails).where(eq(emails.id, emailId)).get();
  if (!email) return { applied: false, reason: "The reported email does not exist (any more)." };

  const seen = new Set(
    (await db.select({ type: emailEvents.type, dataJson: emailEvents.dataJson }).from(emailEvents).where(eq(emailEvents.emailId, emailId)))
      .map((e) => fingerprint(e.type, JSON.parse(e.dataJson) as { recipients?: unknown; status?: unknown })),
  );
  const statements: BatchItem<"sqlite">[] = [];
  /** Each event's insert (its index in the batch): the same report handled twice at once
   * passes the check above twice, and the unique dedupe key lets only one insert through. */
  const recorded: { statement: number; type: string; event: OutboxEvent }[] = [];
  // A report speaks only for the email's own recipients: anyone who received the email can see
  // its return path and mail a forged report naming other addresses, which must neither become
  // events of this email nor land on the suppression list.
  const ownRecipients = recipientsOf(email);
  for (const [i, o] of parsed.report.outcomes.entries()) {
    const type = KIND[o.kind];
    const named = o.recipients.map((r) => r.toLowerCase()).filter((r) => ownRecipients.has(r));
    if (o.recipients.length > 0 && named.length === 0 && o.kind !== "complaint") continue;
    // A complaint is about one reader: the one it names, or the email's only recipient when it
    // hides (or over-reports) who complained.
    const recipients = o.kind === "complaint" ? (named.length === 1 ? named : soleRecipient(email)) : named;
    if (recipients.length === 0 && o.kind !== "complaint") continue;
    const outcome = { ...o, recipients };
    const data = eventData(outcome);
    const key = fingerprint(type, data);
    if (seen.has(key)) continue;
    seen.add(key);
    const at = now + i;
    const eventId = uuidv7(at);
    const facts = emailFacts(email);
    const event =
      outcome.kind === "bounce"
        ? emailOutboxEvent(email.accountId, { type: "email.bounced", email: facts, at, bounce: outcome.bounce! }, at)
        : emailOutboxEvent(email.accountId, { type: `email.${type as Exclude<Kind, "bounced">}`, email: facts, at }, at);
    recorded.push({ statement: statements.length, type, event });
    statements.push(db.insert(emailEvents).values({ id: eventId, emailId, accountId: email.accountId, type, dataJson: JSON.stringify(data), createdAt: at, dedupeKey: key }).onConflictDoNothing());
    statements.push(outboxInsertIfRecorded(db, event, eventId));
    statements.push(...rollupItem(db, { accountId: email.accountId, domainId: email.domainId, broadcastId: email.broadcastId, at, events: [{ type, data }], ifRecorded: eventId }));
    const suppress = (outcome.kind === "bounce" && outcome.bounce?.type === "Permanent") || outcome.kind === "complaint";
    if (suppress) {
      for (const r of outcome.recipients) {
        statements.push(suppressStatement(db, {
          accountId: email.accountId,
          email: r,
          reason: outcome.kind === "complaint" ? "complaint" : "bounce",
          emailId,
          detail: outcome.kind === "complaint" ? `complaint: ${outcome.complaint?.feedbackType ?? "abuse"}` : (outcome.diagnosticCode[0] ?? outcome.bounce?.message ?? null),
          now: at,
        }));
      }
    }
  }
  if (recorded.length === 0) return { applied: true, emailId, events: [] };
  statements.push(db.update(emails).set({ lastEvent: recorded.at(-1)!.type }).where(and(eq(emails.id, emailId))));
  const results = await db.batch(statements as [BatchItem<"sqlite">]);
  const applied = recorded.filter((r) => ((results[r.statement] as D1Result).meta.changes ?? 0) > 0);
  await announce(env, applied.map((r) => r.event));
  return { applied: true, emailId, events: applied.map((r) => r.type) };
}

/** The email's envelope recipients, lower case, as the report names them (ASCII domains). */
function recipientsOf(email: EmailRow): Set<string> {
  const all = [...(JSON.parse(email.toJson) as string[]), ...(JSON.parse(email.ccJson) as string[]), ...(JSON.parse(email.bccJson) as string[])];
  const out = new Set<string>();
  for (const a of all) {
    const box = parseMailbox(a);
    if (!box) continue;
    out.add(box.email.toLowerCase());
    try {
      out.add(toAsciiEmail(box.email).toLowerCase());
    } catch {}
  }
  return out;
}

function soleRecipient(email: EmailRow): string[] {
  const all = [...recipientsOf(email)];
  // One address, possibly in two spellings (U-label and A-label domain): the ASCII one.
  const ascii = all.filter((a) => /^[\x00-\x7f]*$/.test(a));
  return new Set(ascii).size === 1 ? [ascii[0]!] : [];
}
