// Reports that come back to the return path, inside workerd: delivery status notifications
// (RFC 3464) and complaint reports (ARF, RFC 5965) shaped like the ones Postfix, Exim, qmail,
// Gmail, Microsoft, Amazon SES, Yahoo, AOL and Outlook.com's JMRP send (test/fixtures/reports),
// each read as LF and as CRLF text, and hostile or broken input that must read as "not a
// report" without throwing.
import { describe, expect, it } from "vitest";
import { classifyBounce, effectiveStatus, findReplyCode, findStatusCode } from "../../worker/reports/classify.ts";
import { addressesIn, bareAddress, messageIdOf, parseDeliveryStatus } from "../../worker/reports/fields.ts";
import { parseMessage, partText } from "../../worker/reports/mime.ts";
import { MAX_REPORT_BYTES, parseReport, type Report, type ReportParse } from "../../worker/reports/parse.ts";

declare global {
  interface ImportMeta {
    glob(pattern: string, options: { query: "?raw"; import: "default"; eager: true }): Record<string, string>;
  }
}

const files = import.meta.glob("../fixtures/reports/*.eml", { query: "?raw", import: "default", eager: true });
function fixture(name: string): string {
  const text = files[`../fixtures/reports/${name}.eml`];
  if (text === undefined) throw new Error(`no fixture ${name}`);
  return text;
}

const RETURN_PATH = "bounces+0193a8a0-1c2d-7000-8000-00000000b001@send.acme.example";

/** Reads the fixture as bytes with LF line ends and as a CRLF string, and insists both give the same answer. */
function parseBoth(name: string, returnPath = RETURN_PATH): ReportParse {
  const text = fixture(name);
  const lf = parseReport(new TextEncoder().encode(text.replace(/\r\n/g, "\n")), { returnPath });
  const crlf = parseReport(text.replace(/\r?\n/g, "\r\n"), { returnPath });
  expect(crlf).toEqual(lf);
  return lf;
}

function report(name: string): Report {
  const result = parseBoth(name);
  if (!result.ok) throw new Error(`${name}: ${result.reason}: ${result.message}`);
  return result.report;
}

const id = (n: string) => `0193a8a0-1c2d-7000-8000-00000000${n}@acme.example`;
const verp = (n: string) => `bounces+0193a8a0-1c2d-7000-8000-00000000${n}@send.acme.example`;

describe("delivery status notifications", () => {
  it("Postfix: a hard bounce, 550 5.1.1 user unknown", () => {
    const r = report("postfix-bounce-user-unknown");
    expect(r).toEqual({
      format: "delivery-status",
      returnPath: RETURN_PATH,
      reportingMta: "relay1.acme-mail.example",
      originalMessageId: id("b001"),
      originalMailFrom: verp("b001"),
      outcomes: [
        {
          kind: "bounce",
          recipients: ["nobody@example.org"],
          action: "failed",
          status: "5.1.1",
          diagnosticCode: ["smtp; 550 5.1.1 <nobody@example.org>: Recipient address rejected: User unknown in virtual mailbox table"],
          remoteMta: "mx1.example.org",
          bounce: {
            type: "Permanent",
            subType: "NoEmail",
            message: "550 5.1.1 <nobody@example.org>: Recipient address rejected: User unknown in virtual mailbox table",
            diagnosticCode: ["smtp; 550 5.1.1 <nobody@example.org>: Recipient address rejected: User unknown in virtual mailbox table"],
          },
        },
      ],
    });
  });

  it("Postfix: a delay warning, 4.4.1 connection timed out, with the headers-only returned part", () => {
    const r = report("postfix-delayed");
    expect(r.originalMessageId).toBe(id("b002"));
    expect(r.originalMailFrom).toBe(verp("b002"));
    expect(r.outcomes).toEqual([
      {
        kind: "delay",
        recipients: ["slow@example.net"],
        action: "delayed",
        status: "4.4.1",
        diagnosticCode: ["X-Postfix; connect to mx.example.net[203.0.113.40]:25: Connection timed out"],
        remoteMta: null,
      },
    ]);
  });

  it("Postfix: a success notification (Action: delivered)", () => {
    const r = report("postfix-delivered");
    expect(r.originalMessageId).toBe(id("b003"));
    expect(r.outcomes).toEqual([
      {
        kind: "delivered",
        recipients: ["ana@example.com"],
        action: "delivered",
        status: "2.0.0",
        diagnosticCode: ["smtp; 250 2.0.0 Ok: queued as 7B2C41A0033"],
        remoteMta: "mx.example.com",
      },
    ]);
  });

  it("Exim with a DSN part: Status 5.0.0 gives way to the diagnostic's 552 5.2.2, a full mailbox, Transient", () => {
    const r = report("exim-dsn-mailbox-full");
    expect(r.originalMessageId).toBe(id("b006"));
    expect(r.outcomes).toHaveLength(1);
    expect(r.outcomes[0]).toMatchObject({
      kind: "bounce",
      recipients: ["full@example.net"],
      status: "5.2.2",
      bounce: { type: "Transient", subType: "MailboxFull", message: "552 5.2.2 <full@example.net>: Recipient address rejected: Mailbox full" },
    });
  });

  it("Gmail: the multi-line 550-5.1.1 reply, unfolded, and the original's id", () => {
    const r = report("gmail-bounce-no-such-user");
    expect(r.reportingMta).toBe("googlemail.com");
    expect(r.originalMessageId).toBe(id("b008"));
    const [o] = r.outcomes;
    expect(o).toMatchObject({ kind: "bounce", recipients: ["nosuchuser.tern@gmail.com"], status: "5.1.1" });
    expect(o!.remoteMta).toBe("gmail-smtp-in.l.google.com. (2a00:1450:400c:c00::1a, the server for the domain gmail.com.)");
    expect(o!.diagnosticCode).toEqual([
      "smtp; 550-5.1.1 The email account that you tried to reach does not exist. Please try 550-5.1.1 double-checking the recipient's email address for typos or 550-5.1.1 unnecessary spaces. For more information, go to 550 5.1.1 https://support.google.com/mail/?p=NoSuchUser 5b1f17b1804b1-4316e2de0b5si1234567f8f.123 - gsmtp",
    ]);
    expect(o!.bounce).toMatchObject({ type: "Permanent", subType: "NoEmail" });
  });

  it("Outlook.com: 550 5.5.0 mailbox unavailable is a missing mailbox", () => {
    const r = report("outlook-mailbox-unavailable");
    expect(r.reportingMta).toBe("AM9PR04MB8345.eurprd04.prod.outlook.com");
    expect(r.originalMessageId).toBe(id("b009"));
    expect(r.originalMailFrom).toBe(verp("b009"));
    expect(r.outcomes[0]).toMatchObject({
      kind: "bounce",
      recipients: ["closed-account@outlook.com"],
      status: "5.5.0",
      bounce: { type: "Permanent", subType: "NoEmail" },
    });
    expect(r.outcomes[0]!.bounce!.message).toMatch(/^550 5\.5\.0 Requested action not taken: mailbox unavailable \(S2017062302\)/);
  });

  it("Microsoft 365: a 5.7.1 block-list rejection is the sender's problem, Transient ContentRejected, not a dead address", () => {
    const r = report("microsoft-policy-5.7.1");
    expect(r.originalMessageId).toBe(id("b00a"));
    expect(r.outcomes[0]).toMatchObject({
      kind: "bounce",
      recipients: ["john@contoso.example"],
      status: "5.7.1",
      bounce: { type: "Transient", subType: "ContentRejected" },
    });
  });

  it("Amazon SES: a bounce, and a bounce from its suppression list", () => {
    const bounce = report("ses-bounce");
    expect(bounce.reportingMta).toBe("a8-31.smtp-out.amazonses.com");
    expect(bounce.originalMessageId).toBe(id("b00b"));
    expect(bounce.outcomes[0]).toMatchObject({
      recipients: ["bad.mailbox@example.com"],
      bounce: { type: "Permanent", subType: "NoEmail", message: "550 5.1.1 <bad.mailbox@example.com>... User unknown" },
    });
    const suppressed = report("ses-suppressed");
    expect(suppressed.originalMessageId).toBe(id("b00c"));
    expect(suppressed.outcomes[0]).toMatchObject({ recipients: ["bounced-before@example.com"], bounce: { type: "Permanent", subType: "Suppressed" } });
  });

  it("reads a report whose returned message was cut off: the status part is complete", () => {
    const r = report("truncated-after-status");
    expect(r.outcomes).toMatchObject([{ kind: "bounce", recipients: ["cut@example.org"], bounce: { type: "Permanent", subType: "NoEmail" } }]);
    expect(r.originalMessageId).toBeNull(); // the copy ends before its Message-ID
    expect(r.originalMailFrom).toBe(verp("d003"));
  });

  it("gives one outcome per recipient when one report covers several", () => {
    const text = fixture("postfix-bounce-user-unknown").replace(
      "Diagnostic-Code: smtp; 550 5.1.1 <nobody@example.org>: Recipient address\n    rejected: User unknown in virtual mailbox table\n",
      "Diagnostic-Code: smtp; 550 5.1.1 <nobody@example.org>: Recipient address\n    rejected: User unknown in virtual mailbox table\n\n" +
        "Final-Recipient: rfc822; later@example.org\nAction: delayed\nStatus: 4.2.0\nDiagnostic-Code: smtp; 450 4.2.0 Mailbox busy\n\n" +
        "Final-Recipient: rfc822; ok@example.org\nAction: relayed\nStatus: 2.0.0\n",
    );
    const result = parseReport(text, { returnPath: RETURN_PATH });
    expect(result.ok && result.report.outcomes.map((o) => [o.kind, o.recipients[0], o.action])).toEqual([
      ["bounce", "nobody@example.org", "failed"],
      ["delay", "later@example.org", "delayed"],
      ["delivered", "ok@example.org", "relayed"],
    ]);
  });

  it("falls back on the status class when an MTA leaves out Action", () => {
    const dsn = parseDeliveryStatus("Reporting-MTA: dns; x.example\n\nFinal-Recipient: rfc822; a@example.org\nStatus: 5.1.1\n");
    expect(dsn.recipients[0]).toMatchObject({ finalRecipient: "a@example.org", action: null, status: "5.1.1" });
    const text = fixture("ses-bounce").replace("Action: failed\n", "");
    const result = parseReport(text, { returnPath: RETURN_PATH });
    expect(result.ok && result.report.outcomes[0]!.kind).toBe("bounce");
  });

  it("reads message/global-delivery-status (RFC 6533) and a base64 message/rfc822 part", () => {
    const original = "Return-Path: <r@send.acme.example>\r\nMessage-ID: <g1@acme.example>\r\nSubject: x\r\n\r\nbody\r\n";
    const text = [
      "From: MAILER-DAEMON@mta.example",
      'Content-Type: multipart/report; report-type=delivery-status; boundary="g"',
      "",
      "--g",
      "Content-Type: message/global-delivery-status",
      "",
      "Reporting-MTA: dns; mta.example",
      "",
      "Final-Recipient: utf-8; ünïcode@exämple.org",
      "Action: failed",
      "Status: 5.1.1",
      "",
      "--g",
      "Content-Type: message/rfc822",
      "Content-Transfer-Encoding: base64",
      "",
      btoa(original).replace(/.{76}/g, "$&\n"),
      "--g--",
    ].join("\n");
    const bytes = new TextEncoder().encode(text);
    const result = parseReport(bytes, { returnPath: RETURN_PATH });
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.report.originalMessageId).toBe("g1@acme.example");
    expect(result.report.originalMailFrom).toBe("r@send.acme.example");
    // The bytes are UTF-8 but the part declares no charset: UTF-8 is assumed.
    expect(result.report.outcomes[0]!.recipients).toEqual(["ünïcode@exämple.org"]);
  });
});

describe("plain-text bounces without a delivery-status part", () => {
  it("old Exim: recognised by its wording, the reply read from the indented lines", () => {
    const r = report("exim-plain-bounce");
    expect(r.format).toBe("plain-bounce");
    expect(r.originalMessageId).toBe(id("b004"));
    expect(r.originalMailFrom).toBe(verp("b004"));
    expect(r.outcomes).toEqual([
      {
        kind: "bounce",
        recipients: ["gone@example.com"],
        action: null,
        status: "5.1.1",
        diagnosticCode: [
          "SMTP error from remote mail server after RCPT TO:<gone@example.com>: host mx.example.com [198.51.100.77]: 550 5.1.1 <gone@example.com>: Recipient address rejected: User unknown in local recipient table",
        ],
        remoteMta: null,
        bounce: {
          type: "Permanent",
          subType: "NoEmail",
          message:
            "SMTP error from remote mail server after RCPT TO:<gone@example.com>: host mx.example.com [198.51.100.77]: 550 5.1.1 <gone@example.com>: Recipient address rejected: User unknown in local recipient table",
          diagnosticCode: [
            "SMTP error from remote mail server after RCPT TO:<gone@example.com>: host mx.example.com [198.51.100.77]: 550 5.1.1 <gone@example.com>: Recipient address rejected: User unknown in local recipient table",
          ],
        },
      },
    ]);
  });

  it("old Exim: a delay warning", () => {
    const r = report("exim-plain-delay");
    expect(r.outcomes).toEqual([
      {
        kind: "delay",
        recipients: ["busy@example.com"],
        action: null,
        status: "4.7.1",
        diagnosticCode: ["SMTP error from remote mail server after RCPT TO:<busy@example.com>: host mx.example.com [198.51.100.77]: 451 4.7.1 Greylisted, please try again later"],
        remoteMta: null,
      },
    ]);
    expect(r.originalMessageId).toBeNull(); // a warning returns no copy
  });

  it("qmail: the (#5.1.1) code of its own wording", () => {
    const r = report("qmail-bounce");
    expect(r.originalMessageId).toBe(id("b007"));
    expect(r.outcomes).toMatchObject([
      { kind: "bounce", recipients: ["nouser@oldhost.example"], status: "5.1.1", bounce: { type: "Permanent", subType: "NoEmail", message: "Sorry, no mailbox here by that name. (#5.1.1)" } },
    ]);
  });

  it("an Exim bounce that quotes no code at all is Undetermined", () => {
    const text = fixture("exim-plain-bounce").replace(
      /    SMTP error[\s\S]*?local recipient table\n/,
      "    retry timeout exceeded\n",
    );
    const result = parseReport(text, { returnPath: RETURN_PATH });
    expect(result.ok && result.report.outcomes[0]).toMatchObject({
      kind: "bounce",
      status: null,
      bounce: { type: "Undetermined", subType: "Undetermined", message: "retry timeout exceeded" },
    });
  });
});

describe("complaint feedback reports (ARF)", () => {
  it("Yahoo: abuse, the recipient from Original-Rcpt-To, the VERP from Original-Mail-From", () => {
    const r = report("arf-yahoo");
    expect(r).toEqual({
      format: "feedback-report",
      returnPath: RETURN_PATH,
      reportingMta: null,
      originalMessageId: id("c001"),
      originalMailFrom: verp("c001"),
      outcomes: [
        {
          kind: "complaint",
          recipients: ["pat.smith@yahoo.com"],
          action: null,
          status: null,
          diagnosticCode: [],
          remoteMta: null,
          complaint: { feedbackType: "abuse", userAgent: "Yahoo!-Mail-Feedback/2.0", arrivalDate: "Wed, 4 Nov 2026 10:12:40 +0000", sourceIp: null },
        },
      ],
    });
  });

  it("AOL: the recipient from Removal-Recipient, the VERP from the returned message's Return-Path", () => {
    const r = report("arf-aol");
    expect(r.originalMessageId).toBe(id("c002"));
    expect(r.originalMailFrom).toBe(verp("c002"));
    expect(r.outcomes[0]).toMatchObject({
      kind: "complaint",
      recipients: ["lee.jones@aol.com"],
      complaint: { feedbackType: "abuse", userAgent: "AOL SComp", sourceIp: "198.51.100.20" },
    });
  });

  it("Outlook.com JMRP: no Original-Rcpt-To; the recipient comes from X-HmXmrOriginalRecipient of the attached message", () => {
    const r = report("arf-microsoft-jmrp");
    expect(r.originalMessageId).toBe(id("c003"));
    expect(r.originalMailFrom).toBe(verp("c003"));
    expect(r.outcomes).toEqual([
      {
        kind: "complaint",
        recipients: ["sam.taylor@hotmail.com"],
        action: null,
        status: null,
        diagnosticCode: [],
        remoteMta: null,
        complaint: { feedbackType: "abuse", userAgent: "Hotmail FBL", arrivalDate: "Wed, 04 Nov 2026 10:12:42 +0000", sourceIp: "198.51.100.20" },
      },
    ]);
  });

  it("a complaint whose recipient is not disclosed anywhere has no recipients, but still names the email", () => {
    const text = fixture("arf-microsoft-jmrp").replace(/X-HmXmrOriginalRecipient: .*\n/, "");
    const result = parseReport(text, { returnPath: RETURN_PATH });
    expect(result.ok && result.report.outcomes[0]!.recipients).toEqual([]);
    expect(result.ok && result.report.originalMessageId).toBe(id("c003"));
  });

  it("not-spam feedback is a report with no event", () => {
    expect(parseBoth("arf-not-spam")).toEqual({ ok: false, reason: "no_event", message: "A feedback report of type not-spam is not a complaint." });
  });

  it("fraud, virus, other and unregistered types are complaints; auth-failure is not", () => {
    for (const type of ["fraud", "virus", "other", "opt-out"]) {
      const result = parseReport(fixture("arf-yahoo").replace("Feedback-Type: abuse", `Feedback-Type: ${type}`), { returnPath: RETURN_PATH });
      expect(result.ok && result.report.outcomes[0]!.complaint!.feedbackType, type).toBe(type);
    }
    const auth = parseReport(fixture("arf-yahoo").replace("Feedback-Type: abuse", "Feedback-Type: auth-failure"), { returnPath: RETURN_PATH });
    expect(auth).toMatchObject({ ok: false, reason: "no_event" });
  });
});

describe("what is not a report", () => {
  // The parser's last-resort catch answers "could not be read"; these inputs must be refused by the reader itself.
  const GUARD = "The message could not be read as a report.";
  const notAReport = (result: ReportParse) => {
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.reason).toBe("not_a_report");
      expect(result.message).not.toBe(GUARD);
    }
  };

  it.each([
    ["malformed-auto-reply", "The message is neither a delivery status notification nor a feedback report."],
    ["malformed-truncated", "The delivery status names no recipient with an action or status."],
    ["malformed-missing-fields", "The delivery status names no recipient with an action or status."],
    ["malformed-arf-no-type", "The feedback report has no Feedback-Type."],
    ["malformed-no-boundary", "The message is neither a delivery status notification nor a feedback report."],
  ])("%s", (name, message) => {
    expect(parseBoth(name)).toEqual({ ok: false, reason: "not_a_report", message });
  });

  it("empty input, header-less text and random bytes", () => {
    expect(parseReport("", { returnPath: RETURN_PATH })).toEqual({ ok: false, reason: "not_a_report", message: "The message is empty." });
    expect(parseReport(new Uint8Array(0), { returnPath: RETURN_PATH }).ok).toBe(false);
    expect(parseReport("\r\n\r\nno headers here", { returnPath: RETURN_PATH })).toEqual({ ok: false, reason: "not_a_report", message: "The message has no header fields." });
    let seed = 42;
    for (let round = 0; round < 50; round++) {
      const bytes = new Uint8Array(1 + ((round * 7919) % 20000));
      for (let i = 0; i < bytes.length; i++) {
        seed = (seed * 1103515245 + 12345) >>> 0;
        bytes[i] = seed >>> 24;
      }
      notAReport(parseReport(bytes, { returnPath: RETURN_PATH }));
      notAReport(parseReport(bytes.buffer, { returnPath: RETURN_PATH }));
    }
  });

  it("every prefix of a real report parses or is refused, and never throws", () => {
    for (const name of ["postfix-bounce-user-unknown", "gmail-bounce-no-such-user", "arf-microsoft-jmrp", "exim-plain-bounce"]) {
      const text = fixture(name);
      for (let cut = 0; cut <= text.length; cut += 37) {
        const result = parseReport(text.slice(0, cut), { returnPath: RETURN_PATH });
        if (!result.ok) expect(result.message).not.toBe(GUARD);
      }
    }
  });

  it("hostile structure: deep nesting, thousands of parts, endless header lines", () => {
    let nested = "";
    for (let i = 0; i < 200; i++) nested += `Content-Type: multipart/mixed; boundary="b${i}"\n\n--b${i}\n`;
    notAReport(parseReport(`From: x@example.org\n${nested}`, { returnPath: RETURN_PATH }));
    const parts = Array.from({ length: 5000 }, () => "--p\nContent-Type: text/plain\n\nx\n").join("");
    notAReport(parseReport(`From: x@example.org\nContent-Type: multipart/mixed; boundary=p\n\n${parts}--p--\n`, { returnPath: RETURN_PATH }));
    notAReport(parseReport(`From: x@example.org\n${"X-Junk: y\n".repeat(100_000)}\nbody`, { returnPath: RETURN_PATH }));
    notAReport(parseReport(`Subject: ${"a".repeat(2_000_000)}`, { returnPath: RETURN_PATH }));
  });

  // workerd's clock stands still while code runs, so these bound the work by what is read, not by a timer.
  it("a huge message is read only as far as the limit: a real DSN with 20 MB returned still parses, 20 MB of junk does not", () => {
    const dsn = fixture("postfix-bounce-user-unknown").replace("Your order #42 has shipped.", "x".repeat(20 * 1024 * 1024));
    const result = parseReport(new TextEncoder().encode(dsn), { returnPath: RETURN_PATH });
    expect(result.ok && result.report.outcomes[0]!.bounce!.subType).toBe("NoEmail");
    expect(result.ok && result.report.originalMessageId).toBe(id("b001"));
    notAReport(parseReport(new Uint8Array(20 * 1024 * 1024).fill(0x41), { returnPath: RETURN_PATH }));
    expect(MAX_REPORT_BYTES).toBe(1024 * 1024);
  });

  it("nothing past the limit is read: a status part pushed beyond the first MiB is not seen", () => {
    const text = fixture("postfix-bounce-user-unknown");
    const split = text.indexOf("This is a MIME-encapsulated message.");
    const padded = `${text.slice(0, split)}${"p".repeat(MAX_REPORT_BYTES)}\n${text.slice(split)}`;
    notAReport(parseReport(padded, { returnPath: RETURN_PATH }));
    const justFits = `${text.slice(0, split)}${"p".repeat(MAX_REPORT_BYTES - text.length - 100)}\n${text.slice(split)}`;
    expect(parseReport(justFits, { returnPath: RETURN_PATH }).ok).toBe(true);
  });

  it("a DSN forwarded inside an ordinary message is not a report about that message", () => {
    const forwarded = [
      "From: colleague@example.org",
      'Content-Type: multipart/mixed; boundary="f"',
      "",
      "--f",
      "Content-Type: text/plain",
      "",
      "Look at this bounce I got.",
      "--f",
      "Content-Type: message/rfc822",
      "",
      fixture("postfix-bounce-user-unknown"),
      "--f--",
    ].join("\n");
    notAReport(parseReport(forwarded, { returnPath: RETURN_PATH }));
  });
});

describe("bounce classification", () => {
  it.each([
    ["5.1.1", "smtp; 550 5.1.1 user unknown", "Permanent", "NoEmail"],
    ["5.1.10", "smtp;550 5.1.10 RESOLVER.ADR.RecipientNotFound; Recipient not found by SMTP address lookup", "Permanent", "NoEmail"],
    ["5.1.2", "smtp; 550 5.1.2 Host unknown (Name server: example.invalid: host not found)", "Permanent", "NoEmail"],
    ["5.4.1", "smtp; 550 5.4.1 Recipient address rejected: Access denied. AS(201806281)", "Permanent", "NoEmail"],
    ["5.0.0", "smtp; 550 Requested action not taken: mailbox unavailable", "Permanent", "NoEmail"],
    ["5.0.0", "smtp; 550 5.1.1 <a@b.c>... User unknown", "Permanent", "NoEmail"],
    ["5.1.1", "smtp; 550 5.1.1 Amazon SES has suppressed sending to this address", "Permanent", "Suppressed"],
    ["5.2.2", "smtp; 552 5.2.2 Mailbox full", "Transient", "MailboxFull"],
    ["4.2.2", "smtp; 452 4.2.2 The email account that you tried to reach is over quota", "Transient", "MailboxFull"],
    ["5.0.0", "smtp; 550 user is over quota", "Transient", "MailboxFull"],
    ["5.3.4", "smtp; 552 5.3.4 Message size exceeds fixed maximum message size", "Transient", "MessageTooLarge"],
    ["5.2.3", "smtp; 552 5.2.3 Message too large", "Transient", "MessageTooLarge"],
    ["5.7.0", "smtp; 552-5.7.0 This message was blocked because its content presents a potential security issue. Please visit https://support.google.com/mail/?p=BlockedMessage to review our message and attachment content guidelines.", "Transient", "AttachmentRejected"],
    ["5.7.1", "smtp; 550 5.7.1 Message rejected as spam by Content Filtering.", "Transient", "ContentRejected"],
    ["5.7.26", "smtp; 550 5.7.26 This mail is unauthenticated, which poses a security risk to the sender and Gmail users", "Transient", "ContentRejected"],
    ["5.0.0", "smtp; 554 Service unavailable; Client host [198.51.100.20] blocked using zen.spamhaus.org", "Transient", "ContentRejected"],
    ["5.1.8", "smtp; 553 5.1.8 <bounces@send.acme.example>... Domain of sender address does not exist", "Transient", "General"],
    ["5.4.4", "smtp; 554 5.4.4 Unable to route", "Permanent", "General"],
    ["5.0.0", "smtp; 554 5.0.0 Transaction failed", "Permanent", "General"],
    ["4.4.7", "X-Postfix; delivery time expired", "Transient", "General"],
    [null, null, "Undetermined", "Undetermined"],
    [null, "host not reachable for a while", "Undetermined", "Undetermined"],
    [null, "no such user here", "Permanent", "NoEmail"],
  ])("%s %s -> %s %s", (status, diagnostic, type, subType) => {
    expect(classifyBounce(status, diagnostic)).toEqual({ type, subType });
  });

  it("reads codes out of the text without mistaking IP addresses or versions for them", () => {
    expect(findStatusCode("Status: 5.1.1 (bad mailbox)")).toBe("5.1.1");
    expect(findStatusCode("host [192.0.2.25]: 550 user unknown")).toBeNull();
    expect(findStatusCode("relay 4.5.6.7 refused")).toBeNull();
    expect(findStatusCode("Exim 4.72 said 2.0.0")).toBe("2.0.0");
    expect(findStatusCode("5.01.001")).toBe("5.1.1");
    expect(findReplyCode("smtp; 550-5.1.1 The email")).toBe(550);
    expect(findReplyCode("queued as 12345")).toBeNull();
    expect(effectiveStatus("5.0.0", "smtp; 550 5.1.1 x")).toBe("5.1.1");
    expect(effectiveStatus("5.0.0", "smtp; 451 4.1.1 x")).toBe("5.0.0");
    expect(effectiveStatus("5.7.1", "smtp; 550 5.1.1 x")).toBe("5.7.1");
    expect(effectiveStatus(null, null)).toBeNull();
  });
});

describe("report fields and MIME", () => {
  it("reads addresses and Message-IDs the way MTAs write them", () => {
    expect(bareAddress("rfc822; <A@Example.org>")).toBe("A@Example.org");
    expect(bareAddress(" a@example.org (Ana)")).toBe("a@example.org");
    expect(bareAddress("Ana <a@example.org>")).toBe("a@example.org");
    expect(bareAddress("nothing here")).toBeNull();
    expect(addressesIn('"Doe, Jane" <jane@example.org>, bob@example.org (Bob), Team: c@example.org;')).toEqual([
      "jane@example.org",
      "bob@example.org",
      "c@example.org",
    ]);
    expect(messageIdOf(" <abc@x.example> ")).toBe("abc@x.example");
    expect(messageIdOf("abc@x.example")).toBe("abc@x.example");
    expect(messageIdOf("")).toBeNull();
  });

  it("splits multiparts with transport padding and ignores a longer boundary that starts with ours", () => {
    const root = parseMessage(
      ['Content-Type: multipart/mixed; boundary="b"', "", "preamble", "--b  ", "", "one", "--bX", "still one", "--b", "", "two", "--b--  ", "epilogue"].join("\n"),
    );
    expect(root.children.map((c) => partText(c))).toEqual(["one\n--bX\nstill one", "two"]);
  });

  it("decodes quoted-printable and base64 parts and their charsets", () => {
    const root = parseMessage(
      [
        'Content-Type: multipart/mixed; boundary="b"',
        "",
        "--b",
        "Content-Type: text/plain; charset=iso-8859-1",
        "Content-Transfer-Encoding: quoted-printable",
        "",
        "Gr=FC=DFe, soft=",
        "break",
        "--b",
        "Content-Type: text/plain; charset=utf-8",
        "Content-Transfer-Encoding: base64",
        "",
        btoa(String.fromCharCode(...new TextEncoder().encode("Größe ✓"))),
        "--b",
        "Content-Type: text/plain; charset=x-unknown-charset",
        "",
        "plain",
        "--b--",
      ].join("\r\n"),
    );
    expect(root.children.map((c) => partText(c))).toEqual(["Grüße, softbreak", "Größe ✓", "plain"]);
  });
});
