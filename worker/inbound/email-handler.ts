// The Worker's email() entry (Cloudflare Email Routing): what arrives at a return-path address
// is a delivery report about an email tern sent; what arrives for a receiving-enabled domain
// is inbound mail; anything else is refused. A message tern cannot use is rejected with an
// SMTP reason, or (a report that says nothing) dropped; only a failure of tern's own (D1, R2)
// throws, which the sender hears as a temporary failure and retries (receive.ts keeps a retry
// from being stored twice).
import { and, eq, inArray } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { readConfig } from "../config.ts";
import { domains } from "../db/schema.ts";
import { USABLE_STATUSES } from "../domains/verification.ts";
import { MAX_REPORT_BYTES } from "../reports/parse.ts";
import { emailIdOfReturnPath } from "../sending/return-path.ts";
import { deliveryKey } from "./delivery-key.ts";
import { readBounded } from "./read.ts";
import { applyReport } from "./reports.ts";
import { hasMoreLines, INBOUND_MAX_ATTACHMENTS, INBOUND_MAX_BYTES, INBOUND_MAX_LINES, MalformedMessageError, parseInbound, receiveInbound, storedCopies } from "./receive.ts";

export type EmailOutcome =
  | { kind: "report"; applied: boolean; detail: string }
  | { kind: "inbound"; ids: string[] }
  | { kind: "rejected"; reason: string };


export async function handleEmail(message: ForwardableEmailMessage, env: Env, now: number = Date.now()): Promise<EmailOutcome> {
  const config = readConfig(env);
  const to = message.to.trim().toLowerCase();
  const reject = (reason: string): EmailOutcome => {
    message.setReject(reason);
    return { kind: "rejected", reason };
  };

  if (await emailIdOfReturnPath(config.masterKey, to)) {
    const { bytes } = await readBounded(message.raw, MAX_REPORT_BYTES);
    const result = await applyReport(env, config, to, bytes, now);
    // Auto-replies and other chatter to a return path are dropped, not bounced: rejecting
    // them would send mail back to whoever forged or misdirected them.
    if (!result.applied) console.log("return-path message ignored", result.reason);
    return { kind: "report", applied: result.applied, detail: result.applied ? result.events.join(",") : result.reason };
  }

  const domain = to.slice(to.lastIndexOf("@") + 1);
  const owners = await drizzle(env.DB)
    .select({ id: domains.id, accountId: domains.accountId })
    .from(domains)
    .where(and(eq(domains.name, domain), eq(domains.receiving, true), inArray(domains.status, [...USABLE_STATUSES])));
  if (owners.length === 0) return reject("550 5.1.1 No such recipient here");
  if (message.rawSize > INBOUND_MAX_BYTES) return reject("552 5.3.4 Message exceeds the 25 MiB limit");
  const { bytes, truncated } = await readBounded(message.raw, INBOUND_MAX_BYTES);
  if (truncated) return reject("552 5.3.4 Message exceeds the 25 MiB limit");
  if (hasMoreLines(bytes, INBOUND_MAX_LINES)) return reject(`552 5.3.4 Message has more than ${INBOUND_MAX_LINES} lines`);
  // A thrown handler is a temporary failure to the sender, who tries again: the accounts its
  // earlier attempt reached keep the copy they have (not parsed again when all of them do).
  const key = await deliveryKey({ from: message.from, to }, bytes);
  const stored = await storedCopies(env.DB, owners.map((o) => o.accountId), key);
  if (owners.every((o) => stored.has(o.accountId))) return { kind: "inbound", ids: owners.map((o) => stored.get(o.accountId)!) };
  let parsed;
  try {
    parsed = await parseInbound(bytes);
  } catch (err) {
    if (err instanceof MalformedMessageError) return reject(`550 5.6.0 Malformed message: ${err.message}`);
    throw err;
  }
  if (parsed.attachments.length > INBOUND_MAX_ATTACHMENTS) return reject(`552 5.3.4 Message has more than ${INBOUND_MAX_ATTACHMENTS} attachments`);
  // Each account that proved it owns the domain and asked to receive gets its own copy. One
  // that fails does not hold back the others; its error makes the sender try again for it.
  const ids: string[] = [];
  let failure: { error: unknown } | null = null;
  for (const owner of owners) {
    try {
      ids.push(stored.get(owner.accountId) ?? (await receiveInbound(env, config, { to, raw: bytes, parsed, key }, { accountId: owner.accountId, domainId: owner.id }, now)));
    } catch (error) {
      failure ??= { error };
    }
  }
  if (failure) throw failure.error;
  return { kind: "inbound", ids };
}
