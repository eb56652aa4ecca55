// Bounces written only for people, with no message/delivery-status part: older Exim
// ("This message was created automatically by mail delivery software") and qmail ("This is
// the qmail-send program"). Both have stable wording, so they are recognised by it and read
// for the failed addresses and the remote server's reply. Anything else that is plain text
// (an out-of-office reply sent to the return path, say) is not a bounce.

export interface PlainBounceRecipient {
  recipient: string;
  /** The lines the MTA wrote about this address, joined: usually the remote reply. */
  diagnostic: string;
}

export interface PlainBounce {
  mta: "exim" | "qmail";
  kind: "bounce" | "delay";
  recipients: PlainBounceRecipient[];
  /** The returned message (headers, maybe body) after the MTA's marker line; "" when absent. */
  returnedMessage: string;
}

const EXIM_MARK = /This message was created automatically by mail delivery software/i;
const EXIM_FAILED = /following address(?:\(es\)|es)? failed:?/i;
const EXIM_DELAYED = /has not yet been delivered to one or more of its\s+recipients/i;
const EXIM_DELAYED_LIST = /address(?:\(es\)|es)? to which the message has not yet been delivered (?:is|are):?/i;
const EXIM_COPY = /^-{3,}\s*This is a copy of the message.*$/im;
const QMAIL_MARK = /This is the qmail-send program/i;
const QMAIL_COPY = /^-{3}\s*Below this line is a copy of the message\.?\s*$/im;
const ADDRESS = /^<?([^\s<>@]+@[^\s<>:]+?)>?:?(?:\s|$)/;

export function parsePlainBounce(text: string): PlainBounce | null {
  const body = text.replace(/\r\n?/g, "\n");
  if (EXIM_MARK.test(body)) return parseExim(body);
  if (QMAIL_MARK.test(body)) return parseQmail(body);
  return null;
}

function splitAtCopy(body: string, marker: RegExp): { report: string; returnedMessage: string } {
  const m = marker.exec(body);
  if (!m) return { report: body, returnedMessage: "" };
  return { report: body.slice(0, m.index), returnedMessage: body.slice(m.index + m[0].length).replace(/^\n+/, "") };
}

function parseExim(body: string): PlainBounce | null {
  const { report, returnedMessage } = splitAtCopy(body, EXIM_COPY);
  const failed = EXIM_FAILED.exec(report);
  const delayed = EXIM_DELAYED.test(report) ? EXIM_DELAYED_LIST.exec(report) : null;
  const start = failed ?? delayed;
  if (!start) return null;
  // An indented address line starts a recipient; the lines indented deeper below it are about it.
  const recipients: PlainBounceRecipient[] = [];
  // Each recipient's lines, joined once: appending and trimming per line was quadratic.
  const lines: string[][] = [];
  let current: string[] | null = null;
  let addressIndent = -1;
  for (const line of report.slice(start.index + start[0].length).split("\n")) {
    if (line.trim() === "") continue;
    const indent = line.length - line.trimStart().length;
    if (indent === 0) {
      if (recipients.length > 0) break; // the closing paragraph
      continue;
    }
    const address = ADDRESS.exec(line.trim());
    if (address && (addressIndent === -1 || indent <= addressIndent)) {
      addressIndent = indent;
      current = [line.trim().slice(address[0].length)];
      recipients.push({ recipient: address[1]!, diagnostic: "" });
      lines.push(current);
    } else if (current) {
      current.push(line);
    }
  }
  if (recipients.length === 0) return null;
  for (const [i, r] of recipients.entries()) r.diagnostic = lines[i]!.map((l) => l.trim()).filter(Boolean).join(" ").replace(/^Delay reason:\s*/i, "");
  return { mta: "exim", kind: failed ? "bounce" : "delay", recipients, returnedMessage };
}

function parseQmail(body: string): PlainBounce | null {
  const { report, returnedMessage } = splitAtCopy(body, QMAIL_COPY);
  const recipients: PlainBounceRecipient[] = [];
  // Each recipient is a paragraph that starts with "<address>:".
  for (const paragraph of report.split(/\n\s*\n/)) {
    const [first = "", ...rest] = paragraph.trim().split("\n");
    // The address is checked for "@" apart: "<a@a@a@..." in one pattern backtracked quadratically.
    const m = /^<([^\s<>]+)>:\s*(.*)$/.exec(first.trim());
    if (!m || !/.@./.test(m[1]!)) continue;
    const diagnostic = [m[2]!, ...rest].map((l) => l.trim()).filter(Boolean).join(" ");
    recipients.push({ recipient: m[1]!, diagnostic });
  }
  if (recipients.length === 0) return null;
  return { mta: "qmail", kind: "bounce", recipients, returnedMessage };
}
