// What a message that came back to a return-path address says about the email it refers to:
// a delivery status notification (RFC 3464), a complaint (ARF, RFC 5965), or a plain-text
// bounce of an MTA that writes no machine-readable part. One outcome per recipient (one per
// complaint), each ready to become an email event. Anything else, malformed or hostile
// included, is a clear "not a report": this never throws.
import { classifyBounce, effectiveStatus, type BounceSubType, type BounceType } from "./classify.ts";
import { addressesIn, bareAddress, messageIdOf, parseDeliveryStatus, parseFeedbackReport, type DsnRecipient } from "./fields.ts";
import { allParts, binaryString, decodedBody, headerValue, parseMessage, partText, splitHeaders, type HeaderField, type MimePart } from "./mime.ts";
import { parsePlainBounce } from "./plain-bounce.ts";

/** Only this much of a message is read: the report parts come before the returned message. */
export const MAX_REPORT_BYTES = 1024 * 1024;

export type OutcomeKind = "bounce" | "delay" | "delivered" | "complaint";

export interface ReportBounce {
  type: BounceType;
  subType: BounceSubType;
  /** The remote server's reply as it was quoted ("550 5.1.1 ... User unknown"), or a sentence. */
  message: string;
  diagnosticCode: string[];
}

export interface ReportComplaint {
  /** abuse, fraud, virus, other (or an unregistered type, which RFC 5965 says to read as other). */
  feedbackType: string;
  userAgent: string | null;
  arrivalDate: string | null;
  sourceIp: string | null;
}

export interface ReportOutcome {
  kind: OutcomeKind;
  /** Who it is about: one address for a DSN or plain bounce; for a complaint, what the report disclosed (maybe none). */
  recipients: string[];
  /** The DSN's Action (failed, delayed, delivered, relayed, expanded); null for complaints and plain bounces. */
  action: string | null;
  /** The enhanced status code that counts (see effectiveStatus), like "5.1.1". */
  status: string | null;
  /** As reported, e.g. "smtp; 550 5.1.1 <a@b.c>: Recipient address rejected: User unknown". */
  diagnosticCode: string[];
  remoteMta: string | null;
  /** For kind "bounce" only. */
  bounce?: ReportBounce;
  /** For kind "complaint" only. */
  complaint?: ReportComplaint;
}

export interface Report {
  format: "delivery-status" | "feedback-report" | "plain-bounce";
  /** The envelope recipient the report was delivered to (the caller's), which ties it to an email. */
  returnPath: string;
  reportingMta: string | null;
  /** The Message-ID of the email reported on, without angle brackets; null when the report omits it. */
  originalMessageId: string | null;
  /** The reported email's envelope sender (ARF Original-Mail-From, or the returned message's Return-Path). */
  originalMailFrom: string | null;
  /** At least one. */
  outcomes: ReportOutcome[];
}

export type ReportParse =
  | { ok: true; report: Report }
  /** not_a_report: not a report, or too broken to trust. no_event: a valid report that asks for nothing (not-spam, auth-failure). */
  | { ok: false; reason: "not_a_report" | "no_event"; message: string };

const NOT_A_REPORT = (message: string): ReportParse => ({ ok: false, reason: "not_a_report", message });

const DELIVERY_STATUS = new Set(["message/delivery-status", "message/global-delivery-status"]);
const FEEDBACK_REPORT = "message/feedback-report";
const RETURNED_MESSAGE = new Set(["message/rfc822", "message/global"]);
const RETURNED_HEADERS = new Set(["text/rfc822-headers", "message/global-headers"]);
/** Feedback types that are not a recipient's complaint. */
const NOT_COMPLAINTS = new Set(["not-spam", "auth-failure"]);

export function parseReport(raw: Uint8Array | ArrayBuffer | string, options: { returnPath: string }): ReportParse {
  try {
    return parse(raw, options.returnPath);
  } catch {
    // The reader is written not to throw; this is the guarantee for what nobody foresaw.
    return NOT_A_REPORT("The message could not be read as a report.");
  }
}

function parse(raw: Uint8Array | ArrayBuffer | string, returnPath: string): ReportParse {
  const text =
    typeof raw === "string"
      ? raw.slice(0, MAX_REPORT_BYTES)
      : binaryString((raw instanceof Uint8Array ? raw : new Uint8Array(raw)).subarray(0, MAX_REPORT_BYTES));
  if (text.trim() === "") return NOT_A_REPORT("The message is empty.");
  const root = parseMessage(text);
  if (root.headers.length === 0) return NOT_A_REPORT("The message has no header fields.");
  const parts = allParts(root);
  const base = { returnPath, reportingMta: null, originalMessageId: null, originalMailFrom: null };

  const feedback = parts.find((p) => p.type === FEEDBACK_REPORT);
  if (feedback) return fromFeedbackReport(feedback, parts, base);
  const status = parts.find((p) => DELIVERY_STATUS.has(p.type));
  if (status) return fromDeliveryStatus(status, parts, base);

  // Only the bounce text itself is read: the whole message when it is one text part, or the first text part.
  const textPart = root.children.length === 0 ? root : parts.find((p) => p.type === "text/plain");
  const plain = textPart && textPart.type.startsWith("text/") ? parsePlainBounce(partText(textPart)) : null;
  if (plain) {
    const returned = returnedHeadersFromText(plain.returnedMessage);
    const outcomes = plain.recipients.map((r): ReportOutcome => {
      const diagnostic = r.diagnostic === "" ? [] : [r.diagnostic];
      return plain.kind === "bounce"
        ? bounceOutcome([r.recipient], null, null, diagnostic, null)
        : { kind: "delay", recipients: [r.recipient], action: null, status: effectiveStatus(null, r.diagnostic), diagnosticCode: diagnostic, remoteMta: null };
    });
    return { ok: true, report: { ...base, format: "plain-bounce", ...returned, outcomes } };
  }
  return NOT_A_REPORT("The message is neither a delivery status notification nor a feedback report.");
}

function fromDeliveryStatus(part: MimePart, parts: MimePart[], base: Omit<Report, "format" | "outcomes">): ReportParse {
  const dsn = parseDeliveryStatus(partText(part));
  const returned = returnedHeaders(parts);
  const outcomes = dsn.recipients.map(recipientOutcome).filter((o): o is ReportOutcome => o !== null);
  if (outcomes.length === 0) return NOT_A_REPORT("The delivery status names no recipient with an action or status.");
  return {
    ok: true,
    report: {
      ...base,
      format: "delivery-status",
      reportingMta: dsn.reportingMta ? dsn.reportingMta.replace(/^dns\s*;\s*/i, "") : null,
      originalMessageId: returned.originalMessageId ?? dsn.originalMessageId,
      originalMailFrom: returned.originalMailFrom,
      outcomes,
    },
  };
}

function recipientOutcome(r: DsnRecipient): ReportOutcome | null {
  const recipient = r.finalRecipient ?? r.originalRecipient;
  if (recipient === null) return null;
  const status = effectiveStatus(r.status, r.diagnosticCode);
  const diagnosticCode = r.diagnosticCode ? [r.diagnosticCode] : [];
  // Action decides; without one, the status class does (RFC 3464 requires both, not every MTA writes both).
  const action = r.action ?? null;
  const kind: OutcomeKind | null =
    action === "failed" ? "bounce"
    : action === "delayed" ? "delay"
    : action === "delivered" || action === "relayed" || action === "expanded" ? "delivered"
    : status?.startsWith("5") ? "bounce"
    : status?.startsWith("4") ? "delay"
    : status?.startsWith("2") ? "delivered"
    : null;
  if (kind === null) return null;
  if (kind === "bounce") return bounceOutcome([recipient], action, r.status, diagnosticCode, r.remoteMta);
  return { kind, recipients: [recipient], action, status, diagnosticCode, remoteMta: mtaName(r.remoteMta) };
}

function bounceOutcome(recipients: string[], action: string | null, status: string | null, diagnosticCode: string[], remoteMta: string | null): ReportOutcome {
  const diagnostic = diagnosticCode[0] ?? null;
  const effective = effectiveStatus(status, diagnostic);
  const { type, subType } = classifyBounce(status, diagnostic);
  const reply = diagnostic?.replace(/^[A-Za-z0-9-]+\s*;\s*/, "").trim();
  const message = reply || (effective ? `Delivery failed with status ${effective}.` : "Delivery failed; the report gives no reason.");
  return {
    kind: "bounce",
    recipients,
    action,
    status: effective,
    diagnosticCode,
    remoteMta: mtaName(remoteMta),
    bounce: { type, subType, message, diagnosticCode: [...diagnosticCode] },
  };
}

function fromFeedbackReport(part: MimePart, parts: MimePart[], base: Omit<Report, "format" | "outcomes">): ReportParse {
  const arf = parseFeedbackReport(partText(part));
  if (arf.feedbackType === null) return NOT_A_REPORT("The feedback report has no Feedback-Type.");
  if (NOT_COMPLAINTS.has(arf.feedbackType)) {
    return { ok: false, reason: "no_event", message: `A feedback report of type ${arf.feedbackType} is not a complaint.` };
  }
  const returned = returnedHeaders(parts);
  // Who complained: the report says so when the receiver discloses it; Outlook.com's JMRP puts it in a header of the returned message instead.
  const recipients =
    arf.originalRcptTo.length > 0 ? arf.originalRcptTo
    : returned.hmOriginalRecipient !== null ? [returned.hmOriginalRecipient]
    : returned.to;
  return {
    ok: true,
    report: {
      ...base,
      format: "feedback-report",
      reportingMta: null,
      originalMessageId: returned.originalMessageId,
      originalMailFrom: arf.originalMailFrom ?? returned.originalMailFrom,
      outcomes: [
        {
          kind: "complaint",
          recipients,
          action: null,
          status: null,
          diagnosticCode: [],
          remoteMta: null,
          complaint: { feedbackType: arf.feedbackType, userAgent: arf.userAgent, arrivalDate: arf.arrivalDate, sourceIp: arf.sourceIp },
        },
      ],
    },
  };
}

interface Returned {
  originalMessageId: string | null;
  originalMailFrom: string | null;
  to: string[];
  hmOriginalRecipient: string | null;
}

/** What the returned message (or its headers) of a multipart report tells. */
function returnedHeaders(parts: MimePart[]): Returned {
  const part = parts.find((p) => RETURNED_MESSAGE.has(p.type) || RETURNED_HEADERS.has(p.type));
  if (!part) return { originalMessageId: null, originalMailFrom: null, to: [], hmOriginalRecipient: null };
  return fromHeaders(splitHeaders(decodedBody(part).replace(/\r\n?/g, "\n").replace(/^\n+/, "")).headers);
}

function returnedHeadersFromText(text: string): Returned {
  return fromHeaders(splitHeaders(text.replace(/^\s*\n/, "")).headers);
}

function fromHeaders(headers: HeaderField[]): Returned {
  return {
    originalMessageId: messageIdOf(headerValue(headers, "message-id")),
    originalMailFrom: bareAddress(headerValue(headers, "return-path")),
    to: addressesIn(headerValue(headers, "to")),
    hmOriginalRecipient: bareAddress(headerValue(headers, "x-hmxmroriginalrecipient")),
  };
}

/** "dns; mx.example.org" -> "mx.example.org". */
function mtaName(value: string | null): string | null {
  return value ? value.replace(/^[A-Za-z0-9-]+\s*;\s*/, "").trim() || null : null;
}
