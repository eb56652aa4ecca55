// The top-level header fields the bridge reads of a message, from the header map mailparser's
// processHeaders gives (on both paths of message.ts).
import type { AddressObject, EmailAddress, HeaderValue } from "mailparser";
import type { Mailbox, ParsedMessage } from "./submission.ts";

function mailboxes(value: HeaderValue | undefined): Mailbox[] {
  if (value === undefined) return [];
  const objects = (Array.isArray(value) ? value : [value]) as AddressObject[];
  const out: Mailbox[] = [];
  const walk = (list: EmailAddress[]) => {
    for (const a of list) {
      if (a.group) walk(a.group);
      else if (a.address) out.push({ name: a.name ?? "", address: a.address });
    }
  };
  for (const o of objects) if (o && Array.isArray(o.value)) walk(o.value);
  return out;
}

/** The top-level header fields the bridge uses, from mailparser's processed header map. */
export function applyHeaders(message: ParsedMessage, headers: Map<string, HeaderValue>): void {
  message.from = mailboxes(headers.get("from"));
  message.to = mailboxes(headers.get("to"));
  message.cc = mailboxes(headers.get("cc"));
  message.replyTo = mailboxes(headers.get("reply-to"));
  const subject = headers.get("subject");
  message.subject = typeof subject === "string" ? subject : undefined;
}
