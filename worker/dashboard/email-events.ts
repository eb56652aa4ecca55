// An email event as one sentence for the email's timeline ("Bounced for a@b.c: 550 5.1.1 ...
// (Permanent)"), from the data each recorder stores (delivery/outcome.ts, inbound/reports.ts,
// tracking/record.ts, sending/accept.ts). Pure: the page keeps the raw JSON beside it.
import { userAgentSummary } from "./user-agent.ts";

type Data = Record<string, unknown>;

const str = (v: unknown): string | null => (typeof v === "string" && v.trim() !== "" ? v.trim() : null);
/** A reason as a clause of our sentence: without its own closing period. */
const clause = (v: unknown): string | null => str(v)?.replace(/\.+$/, "") || null;
const obj = (v: unknown): Data => (v && typeof v === "object" && !Array.isArray(v) ? (v as Data) : {});

function recipients(data: Data): string | null {
  const list = Array.isArray(data.recipients) ? data.recipients.filter((r): r is string => typeof r === "string") : [];
  if (list.length === 0) return null;
  return list.length <= 3 ? list.join(", ") : `${list.slice(0, 3).join(", ")} and ${list.length - 3} more`;
}

/** "2026-11-25 10:00 UTC", as the dashboard writes times elsewhere. */
function when(v: unknown): string | null {
  const s = str(v);
  const d = s ? new Date(s) : null;
  return d && !Number.isNaN(d.getTime()) ? `${d.toISOString().slice(0, 16).replace("T", " ")} UTC` : null;
}

/** " to a, b" / " for a" when the event names recipients. */
const to = (data: Data, word = "to") => {
  const r = recipients(data);
  return r ? ` ${word} ${r}` : "";
};

/** The client an open or click came from: "in Chrome on Windows from 203.0.113.9". */
function client(v: Data): string {
  const ua = str(v.userAgent);
  const ip = str(v.ipAddress);
  return `${ua ? ` in ${userAgentSummary(ua)}` : ""}${ip ? ` from ${ip}` : ""}`;
}

const fromReport = (data: Data) => (data.source === "report" ? " (from a delivery report)" : "");

/** One readable sentence for an event of the email's timeline. */
export function describeEmailEvent(type: string, data: Data): string {
  switch (type) {
    case "queued":
      return `Accepted for delivery${to(data)}.`;
    case "scheduled": {
      const at = when(data.scheduled_at);
      return `Scheduled${at ? ` for ${at}` : ""}${to(data)}.`;
    }
    case "canceled":
      return "Canceled before it was sent.";
    case "sent":
      return `Handed to the receiving mail server${to(data, "for")}.`;
    case "delivered":
      return `Delivered${to(data)}${fromReport(data)}.`;
    case "delivery_delayed": {
      const why = clause(data.message);
      return `Delayed${to(data, "for")}${why ? `: ${why}` : ""}. tern tries again later${fromReport(data)}.`;
    }
    case "bounced": {
      const b = obj(data.bounce);
      const kind = [str(b.type), str(b.subType)].filter((k) => k && k !== "General" && k !== "Undetermined");
      const why = clause(b.message) ?? (Array.isArray(b.diagnosticCode) ? clause(b.diagnosticCode[0]) : null);
      return `Bounced${to(data, "for")}${why ? `: ${why}` : ""}${kind.length ? ` (${kind.join(", ")})` : ""}${fromReport(data)}.`;
    }
    case "complained": {
      const feedback = str(obj(data.complaint).feedbackType);
      return `Marked as spam${recipients(data) ? ` by ${recipients(data)}` : ""}${feedback && feedback !== "abuse" ? ` (${feedback} report)` : ""}${fromReport(data)}.`;
    }
    case "opened":
      return `Opened${client(obj(data.open))}.`;
    case "clicked": {
      const c = obj(data.click);
      const link = str(c.link);
      return `Clicked ${link ?? "a link"}${client(c)}.`;
    }
    case "failed": {
      const why = clause(obj(data.failed).reason) ?? clause(data.message);
      return `Not delivered${to(data)}${why ? `: ${why}` : ""}.`;
    }
    case "suppressed":
      return `Not sent${to(data)}: the address is on the account's suppression list.`;
    case "unsubscribed":
      return `${recipients(data) ?? "The recipient"} unsubscribed.`;
    case "outcome_unknown":
      return str(data.message) ?? `The outcome of a delivery attempt${to(data)} is unknown; it is sent again.`;
    default: {
      const why = clause(data.message);
      return `${type.replace(/_/g, " ").replace(/^./, (c) => c.toUpperCase())}${to(data)}${why ? `: ${why}` : ""}.`;
    }
  }
}
