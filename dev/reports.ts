// The dev relay's delivery reports: after accepting a message it answers some recipients the
// way the outside world would, later and by mail, so tern's bounce, delay and complaint path
// runs offline. The report goes to the message's envelope sender (tern's per-recipient return
// path) through wrangler dev's local email trigger, exactly as Email Routing would hand it to
// the Worker's email() handler.
//   bounce…@any        a Postfix DSN: failed, 5.1.1 user unknown (a hard bounce)
//   mailbox-full…@any  a Postfix DSN: failed, 5.2.2 mailbox full (a soft bounce)
//   delay…@any         a Postfix DSN: delayed, 4.4.1 connection timed out
//   complain…@any      an ARF complaint report (abuse), as mailbox providers send them
import type { MessageSummary } from "./relay.ts";

export interface DevReport {
  /** The envelope recipient: the return path the original was sent from. */
  to: string;
  raw: string;
}

type Kind = "bounce" | "mailbox-full" | "delay" | "complain";

function kindOf(recipient: string): Kind | null {
  const local = recipient.slice(0, recipient.lastIndexOf("@")).toLowerCase();
  for (const k of ["mailbox-full", "bounce", "delay", "complain"] as const) if (local.startsWith(k)) return k;
  return null;
}

const CRLF = "\r\n";

/** The report's text/rfc822-headers part: the original's headers that tie it to the email. */
function returnedHeaders(boundary: string, m: MessageSummary, recipient?: string): string[] {
  return [
    `--${boundary}`,
    "Content-Type: text/rfc822-headers",
    "",
    `Return-Path: <${m.envelope.from}>`,
    `From: ${m.from}`,
    ...(recipient ? [`To: ${recipient}`] : []),
    `Subject: ${m.subject}`,
    ...(m.messageId ? [`Message-ID: <${m.messageId}>`] : []),
    "",
    `--${boundary}--`,
    "",
  ];
}

function dsn(m: MessageSummary, recipient: string, kind: Exclude<Kind, "complain">, host: string, now: Date): string {
  const boundary = `dsn-${m.id}-${now.getTime()}`;
  const [action, status, diagnostic, human] =
    kind === "bounce"
      ? ["failed", "5.1.1", `smtp; 550 5.1.1 <${recipient}>: Recipient address rejected: User unknown in local recipient table`, "could not be delivered"]
      : kind === "mailbox-full"
        ? ["failed", "5.2.2", `smtp; 552 5.2.2 <${recipient}>: Mailbox full`, "could not be delivered"]
        : ["delayed", "4.4.1", "X-Postfix; connect to mx.example.invalid[192.0.2.1]:25: Connection timed out", "is delayed"];
  return [
    `From: MAILER-DAEMON@${host} (Mail Delivery System)`,
    `To: ${m.envelope.from}`,
    `Subject: ${kind === "delay" ? "Delayed Mail (still being retried)" : "Undelivered Mail Returned to Sender"}`,
    `Date: ${now.toUTCString()}`,
    `Message-ID: <${boundary}@${host}>`,
    "Auto-Submitted: auto-replied",
    "MIME-Version: 1.0",
    `Content-Type: multipart/report; report-type=delivery-status; boundary="${boundary}"`,
    "",
    `--${boundary}`,
    "Content-Description: Notification",
    "Content-Type: text/plain; charset=us-ascii",
    "",
    `This is the mail system at host ${host}.`,
    "",
    `Your message to <${recipient}> ${human}.`,
    "",
    `--${boundary}`,
    "Content-Description: Delivery report",
    "Content-Type: message/delivery-status",
    "",
    `Reporting-MTA: dns; ${host}`,
    `Arrival-Date: ${now.toUTCString()}`,
    "",
    `Final-Recipient: rfc822; ${recipient}`,
    `Original-Recipient: rfc822;${recipient}`,
    `Action: ${action}`,
    `Status: ${status}`,
    `Diagnostic-Code: ${diagnostic}`,
    "",
    ...returnedHeaders(boundary, m),
  ].join(CRLF);
}

function arf(m: MessageSummary, recipient: string, host: string, now: Date): string {
  const boundary = `arf-${m.id}-${now.getTime()}`;
  return [
    `From: feedback@${host}`,
    `To: ${m.envelope.from}`,
    "Subject: Complaint about a message",
    `Date: ${now.toUTCString()}`,
    `Message-ID: <${boundary}@${host}>`,
    "MIME-Version: 1.0",
    `Content-Type: multipart/report; report-type=feedback-report; boundary="${boundary}"`,
    "",
    `--${boundary}`,
    "Content-Type: text/plain; charset=us-ascii",
    "",
    "This is an email abuse report for a message received from you.",
    "",
    `--${boundary}`,
    "Content-Type: message/feedback-report",
    "",
    "Feedback-Type: abuse",
    "User-Agent: tern-dev-relay/1.0",
    "Version: 1",
    `Original-Mail-From: <${m.envelope.from}>`,
    `Original-Rcpt-To: <${recipient}>`,
    `Arrival-Date: ${now.toUTCString()}`,
    "Source-IP: 127.0.0.1",
    "",
    ...returnedHeaders(boundary, m, recipient),
  ].join(CRLF);
}

/** The reports the outside world would send about an accepted message (none for most). */
export function reportsFor(m: MessageSummary, host = "relay.tern.localhost", now = new Date()): DevReport[] {
  if (!m.envelope.from) return []; // never answer a report with a report
  const out: DevReport[] = [];
  for (const recipient of m.envelope.to) {
    const kind = kindOf(recipient);
    if (!kind) continue;
    out.push({ to: m.envelope.from, raw: kind === "complain" ? arf(m, recipient, host, now) : dsn(m, recipient, kind, host, now) });
  }
  return out;
}

/** Hands a report to the Worker the way Email Routing would (wrangler dev's local trigger). */
export async function deliverReport(workerUrl: string, report: DevReport, from = "MAILER-DAEMON@relay.tern.localhost"): Promise<void> {
  const url = `${workerUrl}/cdn-cgi/local/email?from=${encodeURIComponent(from)}&to=${encodeURIComponent(report.to)}`;
  const res = await fetch(url, { method: "POST", body: report.raw, headers: { "content-type": "message/rfc822" } });
  if (!res.ok) throw new Error(`local email trigger answered ${res.status}: ${(await res.text()).slice(0, 200)}`);
}
