// Bounce types and subtypes the way Amazon SES reports them (and Resend after it):
//   Permanent:    General, NoEmail, Suppressed
//   Transient:    General, MailboxFull, MessageTooLarge, ContentRejected, AttachmentRejected
//   Undetermined: Undetermined
// Only a Permanent bounce means "this address will never take mail", which is what puts an
// address on the suppression list. So a full mailbox, an oversized message, and rejections
// for policy, spam or reputation (5.7.x: the sender's problem, the address is fine) are
// Transient even when the SMTP reply was a 5xx: suppressing those would drop good addresses.

export type BounceType = "Permanent" | "Transient" | "Undetermined";
export type BounceSubType =
  | "General"
  | "NoEmail"
  | "Suppressed"
  | "MailboxFull"
  | "MessageTooLarge"
  | "ContentRejected"
  | "AttachmentRejected"
  | "Undetermined";

export interface BounceClass {
  type: BounceType;
  subType: BounceSubType;
}

/** An enhanced status code (RFC 3463) as "c.s.d", or null. */
export function findStatusCode(text: string | null | undefined): string | null {
  const m = /(?:^|[^\d.])([245])\.(\d{1,3})\.(\d{1,3})(?![\d.]*\d)/.exec(text ?? "");
  return m ? `${m[1]}.${Number(m[2])}.${Number(m[3])}` : null;
}

/** The basic SMTP reply code (RFC 5321) that a diagnostic quotes, like 550, or null. */
export function findReplyCode(text: string | null | undefined): number | null {
  const m = /(?:^|[\s;:])([245][0-5]\d)(?=[\s-]|$)/.exec(text ?? "");
  return m ? Number(m[1]) : null;
}

/**
 * The status that says the most: the report's Status field, unless it is only a class
 * ("5.0.0", as Exim writes) and the diagnostic quotes a more precise code.
 */
export function effectiveStatus(status: string | null, diagnostic: string | null): string | null {
  const fromStatus = findStatusCode(status);
  const fromDiagnostic = findStatusCode(diagnostic);
  if (fromStatus === null) return fromDiagnostic;
  if (/^\d\.0\.0$/.test(fromStatus) && fromDiagnostic !== null && fromDiagnostic[0] === fromStatus[0]) return fromDiagnostic;
  return fromStatus;
}

const SUPPRESSED = /suppression list|suppressed sending|has suppressed|on the suppressed/i;
const MAILBOX_FULL =
  /mailbox (?:is )?full|mailbox.{0,40}(?:over|exceed(?:s|ed)?).{0,20}(?:quota|limit|storage)|over ?quota|quota (?:exceeded|full)|exceeded (?:(?:his|her|their|the) )?(?:storage|quota)|out of storage|storage (?:space )?(?:quota|limit) (?:exceeded|reached)|user is over|mailbox size limit/i;
const TOO_LARGE =
  /message (?:size )?(?:exceeds|is too (?:big|large))|message too (?:big|large)|too large|size (?:limit|exceeds)|exceeds (?:the )?(?:maximum|fixed maximum|size)|message length exceeds/i;
const ATTACHMENT = /attachment/i;
const ATTACHMENT_REFUSED = /not allowed|rejected|blocked|prohibited|forbidden|banned|unacceptable|disallowed|security issue|not permitted|refused/i;
const NO_SUCH_USER =
  /user unknown|unknown user|no such (?:user|mailbox|recipient|address|account)|does ?n[o']t exist|doesn't exist|not exist|recipient not found|RecipientNotFound|invalid (?:recipient|mailbox|address|user)|mailbox (?:not found|unavailable|does not exist|is disabled|disabled)|unknown (?:recipient|mailbox|address|local part)|user not found|not a valid (?:mailbox|recipient|user)|account (?:has been |is )?(?:disabled|deactivated|suspended|closed|inactive)|NoSuchUser|no mailbox|undeliverable address|unrouteable address|address (?:not|is not) (?:found|valid)|user doesn't have a|recipient address rejected: access denied/i;
const POLICY =
  /spam|blocked|block ?list|black ?list|listed|reputation|policy|content|virus|malware|phish|dmarc|spf|dkim|not authori[sz]ed|authentication|denied|rejected due to|refused/i;

/**
 * The SES-style class of a failed delivery from its enhanced status code and diagnostic
 * text. `status` may be null (plain-text bounces); the text is searched for one then.
 */
export function classifyBounce(status: string | null, diagnostic: string | null): BounceClass {
  const text = diagnostic ?? "";
  const code = effectiveStatus(status, diagnostic);
  const reply = findReplyCode(text);
  const klass = code?.[0] ?? (reply !== null ? String(reply)[0] : null);
  const [, subject, detail] = code?.split(".") ?? [];

  if (SUPPRESSED.test(text)) return { type: "Permanent", subType: "Suppressed" };
  if ((subject === "2" && detail === "2") || MAILBOX_FULL.test(text)) return { type: "Transient", subType: "MailboxFull" };
  if ((subject === "3" && detail === "4") || (subject === "2" && detail === "3") || (TOO_LARGE.test(text) && !/storage/i.test(text))) {
    return { type: "Transient", subType: "MessageTooLarge" };
  }
  if (ATTACHMENT.test(text) && ATTACHMENT_REFUSED.test(text)) return { type: "Transient", subType: "AttachmentRejected" };
  if (klass === "5" && subject === "1") {
    // 5.1.7 and 5.1.8 are about the sender's address: the recipient may well exist.
    if (detail === "7" || detail === "8") return { type: "Transient", subType: "General" };
    if (detail !== "4") return { type: "Permanent", subType: "NoEmail" };
  }
  // Microsoft's directory-based edge blocking answers 5.4.1 "Recipient address rejected: Access denied" for addresses that do not exist.
  if (klass === "5" && NO_SUCH_USER.test(text) && !(subject === "7" && !/user unknown|no such user|does not exist/i.test(text))) {
    return { type: "Permanent", subType: "NoEmail" };
  }
  if (klass === "5" && (subject === "7" || POLICY.test(text))) return { type: "Transient", subType: "ContentRejected" };
  if (klass === "5") return { type: "Permanent", subType: "General" };
  if (klass === "4") return { type: "Transient", subType: "General" };
  if (klass === null && NO_SUCH_USER.test(text)) return { type: "Permanent", subType: "NoEmail" };
  return { type: "Undetermined", subType: "Undetermined" };
}
