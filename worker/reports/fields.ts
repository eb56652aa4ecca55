// The machine-readable parts of reports: message/delivery-status (RFC 3464) and
// message/feedback-report (RFC 5965). Both are header-style fields; a delivery status is one
// group of per-message fields followed by one group per recipient, separated by blank lines.
import { headerValue, headerValues, parseHeaderBlock, type HeaderField } from "./mime.ts";

export interface DsnRecipient {
  finalRecipient: string | null;
  originalRecipient: string | null;
  /** Lower-cased: failed, delayed, delivered, relayed, expanded (or whatever was written). */
  action: string | null;
  status: string | null;
  diagnosticCode: string | null;
  remoteMta: string | null;
}

export interface DeliveryStatus {
  reportingMta: string | null;
  /** Gmail and some others name the original's Message-ID here. */
  originalMessageId: string | null;
  recipients: DsnRecipient[];
}

const PER_RECIPIENT = ["final-recipient", "original-recipient", "action", "status", "diagnostic-code", "remote-mta"];

export function parseDeliveryStatus(text: string): DeliveryStatus {
  const groups = text
    .replace(/\r\n?/g, "\n")
    .split(/\n[ \t]*\n/)
    .map((g) => parseHeaderBlock(g.replace(/^\n+/, "")))
    .filter((g) => g.length > 0);
  const perMessage: HeaderField[] = [];
  const recipients: DsnRecipient[] = [];
  for (const group of groups) {
    // A group with recipient fields is a recipient, even when an MTA forgot the blank line after the per-message fields.
    if (group.some((f) => PER_RECIPIENT.includes(f.name))) {
      recipients.push({
        finalRecipient: typedAddress(headerValue(group, "final-recipient")),
        originalRecipient: typedAddress(headerValue(group, "original-recipient")),
        action: headerValue(group, "action")?.toLowerCase().split(/[\s(;]/)[0] || null,
        status: headerValue(group, "status") || null,
        diagnosticCode: headerValue(group, "diagnostic-code") || null,
        remoteMta: headerValue(group, "remote-mta") || null,
      });
    }
    perMessage.push(...group);
  }
  return {
    reportingMta: headerValue(perMessage, "reporting-mta") || null,
    originalMessageId: messageIdOf(headerValue(perMessage, "x-original-message-id")),
    recipients,
  };
}

export interface FeedbackReport {
  /** Lower-cased: abuse, fraud, virus, other, not-spam, auth-failure... null when missing. */
  feedbackType: string | null;
  userAgent: string | null;
  version: string | null;
  originalMailFrom: string | null;
  /** Original-Rcpt-To (repeatable), or the older Removal-Recipient. */
  originalRcptTo: string[];
  arrivalDate: string | null;
  sourceIp: string | null;
  reportedDomain: string | null;
}

export function parseFeedbackReport(text: string): FeedbackReport {
  const fields = parseHeaderBlock(text.replace(/\r\n?/g, "\n").replace(/\n[ \t]*\n/g, "\n"));
  const rcpt = [...headerValues(fields, "original-rcpt-to"), ...headerValues(fields, "removal-recipient")]
    .map((v) => bareAddress(v))
    .filter((v): v is string => v !== null);
  return {
    feedbackType: headerValue(fields, "feedback-type")?.toLowerCase().split(/[\s;(]/)[0] || null,
    userAgent: headerValue(fields, "user-agent") || null,
    version: headerValue(fields, "version") || null,
    originalMailFrom: bareAddress(headerValue(fields, "original-mail-from")),
    originalRcptTo: [...new Set(rcpt)],
    arrivalDate: headerValue(fields, "arrival-date") || headerValue(fields, "received-date") || null,
    sourceIp: headerValue(fields, "source-ip") || null,
    reportedDomain: headerValue(fields, "reported-domain") || null,
  };
}

/** "rfc822; <a@b.c>" -> "a@b.c"; the address type of RFC 3464 is dropped. */
export function typedAddress(value: string | undefined): string | null {
  if (value === undefined) return null;
  const semi = value.indexOf(";");
  return bareAddress(semi === -1 ? value : value.slice(semi + 1));
}

/** An address without angle brackets, comments or surrounding space; null when none is there. */
export function bareAddress(value: string | undefined | null): string | null {
  if (value === undefined || value === null) return null;
  // As before, but linear: a match may start only where a run starts (a megabyte without "@" took minutes).
  const angle = /<([^<>\s@]*@[^<>\s]*)>/.exec(value);
  if (angle) return angle[1]!;
  const plain = /(?<![^\s<>()"',;:])[^\s<>()"',;:]+@[^\s<>()"',;:]+/.exec(value.replace(/\([^()]*\)/g, " "));
  return plain ? plain[0].replace(/\.$/, "") : null;
}

/** Every address in a header like To (display names and groups allowed), in order. */
export function addressesIn(value: string | undefined): string[] {
  if (!value) return [];
  const out: string[] = [];
  const withoutQuoted = value.replace(/"(?:[^"\\]|\\.)*"/g, '""').replace(/\([^()]*\)/g, " ");
  for (const piece of withoutQuoted.split(",")) {
    const address = bareAddress(piece);
    if (address !== null) out.push(address);
  }
  return out;
}

/** The id inside a Message-ID field, without angle brackets, as tern stores it. */
export function messageIdOf(value: string | undefined | null): string | null {
  if (!value) return null;
  const angle = /<([^<>\s]+)>/.exec(value);
  const id = angle ? angle[1]! : value.trim().split(/\s+/)[0] ?? "";
  return id !== "" && id.length <= 998 ? id : null;
}
