// What one delivery attempt means for an email: the rules from per-recipient results to
// events, the next state and the retry. Pure, so every rule is tested without a socket.
import { classifyBounce } from "../reports/classify.ts";
import type { RecipientResult } from "../transports/transport.ts";

export interface AttemptResult extends RecipientResult {
  /** Acceptance by the recipients' own server (a final relay, the simulator): delivered. */
  final: boolean;
  complained?: boolean;
}

export interface EventRecord {
  type: "sent" | "delivered" | "complained" | "bounced" | "delivery_delayed" | "failed";
  data: Record<string, unknown>;
}

export interface Settlement {
  state: "queued" | "done";
  /** Recipients still to deliver. */
  pending: string[];
  events: EventRecord[];
  lastEvent: string | null;
  /** Seconds until the next attempt, when state is queued. */
  retryInSeconds: number | null;
}

export interface AttemptContext {
  /** This attempt's number, from 1. */
  attempt: number;
  /** Seconds to wait before retry n (index n-1); its length is how many retries there are. */
  retrySchedule: number[];
  /** Whether a delivery_delayed event was already recorded for this email. */
  alreadyDelayed: boolean;
}

/** The reply as a receiving MTA would quote it: "451 4.2.0 Mailbox busy". */
function replyText(r: RecipientResult): string {
  if (r.code === undefined || r.message.startsWith(String(r.code))) return r.message;
  const enhanced = r.enhancedCode && !r.message.startsWith(r.enhancedCode) ? `${r.enhancedCode} ` : "";
  return `${r.code} ${enhanced}${r.message}`;
}

function diagnostic(r: RecipientResult): string {
  return `smtp; ${replyText(r)}`;
}

export function settleAttempt(results: AttemptResult[], ctx: AttemptContext): Settlement {
  const accepted = results.filter((r) => r.status === "accepted");
  const rejected = results.filter((r) => r.status === "rejected");
  const deferred = results.filter((r) => r.status === "deferred");
  const events: EventRecord[] = [];

  if (accepted.length > 0) {
    events.push({ type: "sent", data: { recipients: accepted.map((r) => r.recipient) } });
    const delivered = accepted.filter((r) => r.final);
    if (delivered.length > 0) events.push({ type: "delivered", data: { recipients: delivered.map((r) => r.recipient) } });
    const complained = accepted.filter((r) => r.complained);
    if (complained.length > 0) {
      events.push({ type: "complained", data: { recipients: complained.map((r) => r.recipient), complaint: { feedbackType: "abuse" } } });
    }
  }
  for (const r of rejected) {
    events.push({
      type: "bounced",
      data: {
        recipients: [r.recipient],
        // One classification for a 5xx at delivery and for a bounce reported later (reports/):
        // a full mailbox or a policy block is Transient and never suppresses the address.
        bounce: { ...classifyBounce(r.enhancedCode ?? null, replyText(r)), message: replyText(r), diagnosticCode: [diagnostic(r)] },
      },
    });
  }

  let state: Settlement["state"] = "done";
  let retryInSeconds: number | null = null;
  if (deferred.length > 0) {
    const recipients = deferred.map((r) => r.recipient);
    const reason = replyText(deferred[0]!);
    if (ctx.attempt <= ctx.retrySchedule.length) {
      state = "queued";
      retryInSeconds = ctx.retrySchedule[ctx.attempt - 1]!;
      if (!ctx.alreadyDelayed) {
        events.push({ type: "delivery_delayed", data: { recipients, message: reason, diagnosticCode: deferred.map(diagnostic) } });
      }
    } else {
      events.push({ type: "failed", data: { recipients, failed: { reason: `Delivery was retried ${ctx.attempt} times and did not succeed: ${reason}` } } });
    }
  }
  return {
    state,
    pending: state === "queued" ? deferred.map((r) => r.recipient) : [],
    events,
    lastEvent: events.length > 0 ? events[events.length - 1]!.type : null,
    retryInSeconds,
  };
}
