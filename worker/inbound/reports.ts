// Delivery reports that come back to an email's return-path address (RFC 3464 DSNs, ARF
// complaints, plain-text bounces) become that email's events: delivered, bounced (with type,
// subType, diagnosticCode), delivery_delayed, complained. Permanent bounces and complaints put
// the address on the account's suppression list. A report seen twice changes nothing twice.
// Each message leaves with a return path made for its one recipient (sending/return-path.ts),
// and a report is taken only about that recipient: whoever received the email sees their own
// return path, never a co-recipient's, so a forged report cannot suppress anyone else.
import { and, eq } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { drizzle } from "drizzle-orm/d1";
import type { TernConfig } from "../config.ts";
import { emailEvents, emails, type EmailRow } from "../db/schema.ts";
import { suppressStatement } from "../suppressions/suppress.ts";
import { announce, outboxWritten, emailFacts, emailOutboxEvent, outboxInsertIfRecorded, type OutboxEvent } from "../events/outbox.ts";
import { uuidv7 } from "../ids.ts";
import { rollupItem } from "../metrics/rollup.ts";
import { parseMailbox } from "../mime/address.ts";
import { parseReport, type Report, type ReportOutcome } from "../reports/parse.ts";
import { canonicalRecipient, parseReturnPath, recipientOfReturnPath, type ReturnPath } from "../sending/return-path.ts";

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

/** The return path a report came back to: the address it came to, or (a feedback loop that
 * reports to a fixed address) the reported message's envelope sender. */
export async function reportedReturnPath(masterKey: string | undefined, to: string, report: Report | null): Promise<ReturnPath | null> {
  const direct = await parseReturnPath(masterKey, to);
  if (direct) return direct;
  return report?.originalMailFrom ? parseReturnPath(masterKey, report.originalMailFrom) : null;
}

export async function applyReport(env: Env, config: TernConfig, to: string, raw: Uint8Array, now: number): Promise<ReportResult> {
  const parsed = parseReport(raw, { returnPath: to });
  if (!parsed.ok) return { applied: false, reason: parsed.message };
  const returnPath = await reportedReturnPath(config.masterKey, to, parsed.report);
  if (!returnPath) return { applied: false, reason: "The report is not about an email tern sent." };
  const emailId = returnPath.emailId;
  const db = drizzle(env.DB);
  const email = await db.select().from(emails).where(eq(emails.id, emailId)).get();
  if (!email) return { applied: false, reason: "The reported email does not exist (any more)." };
  const reader = await recipientOf(config.masterKey, returnPath, email);
  if (!reader) return { applied: false, reason: "The return path names no single recipient of this email." };

  const seen = new Set(
    (await db.select({ type: emailEvents.type, dataJson: emailEvents.dataJson }).from(emailEvents).where(eq(emailEvents.emailId, emailId)))
      .map((e) => fingerprint(e.type, JSON.parse(e.dataJson) as { recipients?: unknown; status?: unknown })),
  );
  const statements: BatchItem<"sqlite">[] = [];
  /** Each event's insert (its index in the batch): the same report handled twice at once
   * passes the check above twice, and the unique dedupe key lets only one insert through. */
  const recorded: { statement: number; type: string; event: OutboxEvent }[] = [];
  for (const [i, o] of parsed.report.outcomes.entries()) {
    const type = KIND[o.kind];
    // The report speaks for the return path's recipient only. A bounce, delay or delivery
    // naming anyone else is void. A complaint is about the copy that came back: the reader the
    // return path names, even when it hides who complained or names another mailbox (a copy
    // forwarded from that reader's).
    const named = o.recipients.filter((r) => canonicalRecipient(r) === reader).map((r) => r.toLowerCase());
    if (o.kind !== "complaint" && named.length === 0) continue;
    const recipients = [named[0] ?? reader];
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
  // Its outbox row follows each event's insert, and is written only when an endpoint hears it.
  await announce(env, applied.filter((r) => outboxWritten(results[r.statement + 1])).map((r) => r.event));
  return { applied: true, emailId, events: applied.map((r) => r.type) };
}

/** The recipient (canonical: ASCII, lower case) a report's return path was made for. A
 * per-email return path, made before return paths named a recipient, still speaks for an email
 * that had a single recipient, and for no one when it had several. */
async function recipientOf(masterKey: string | undefined, rp: ReturnPath, email: EmailRow): Promise<string | null> {
  const all = new Set<string>();
  for (const a of [...(JSON.parse(email.toJson) as string[]), ...(JSON.parse(email.ccJson) as string[]), ...(JSON.parse(email.bccJson) as string[])]) {
    const box = parseMailbox(a);
    if (box) all.add(canonicalRecipient(box.email));
  }
  if (rp.mark === null) return all.size === 1 ? [...all][0]! : null;
  return recipientOfReturnPath(masterKey, rp, all);
}
