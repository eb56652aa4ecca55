// The `cloudflare` transport: Cloudflare Email Sending through the Worker's `send_email`
// binding, instead of an SMTP relay. tern's own finished message (its MIME, its DKIM
// signature) goes out as a raw EmailMessage, one per envelope recipient, since a raw
// EmailMessage names a single recipient (Bcc recipients stay out of the headers, as over SMTP).
// Cloudflare's errors (Error.code, "E_...") become tern's outcomes: faults of the
// configuration or of the service defer the mail (kept, retried); faults of the message or the
// recipient reject it.
//
// What differs from a relay: Cloudflare requires the envelope sender to be the From address
// (it runs its own return path, so tern's VERP address and the DSNs it would bring are not
// used: bounces it learns of later come back only as E_RECIPIENT_SUPPRESSED on the next send),
// and the sending domain must be onboarded to Email Sending. A domain's `tls: enforced` holds on
// the hop to Cloudflare (inside its network); onward hops follow Cloudflare's policy, as they
// follow a relay's own policy past a relay without REQUIRETLS.
import { EmailMessage } from "cloudflare:email";
import { joinedBytes, type OutboundMessage, type RecipientResult, type Transport, type TransportSession } from "./transport.ts";

type Outcome = Pick<RecipientResult, "status" | "enhancedCode"> & { why: string };

// Cloudflare's documented codes (developers.cloudflare.com/email-service/api/send-emails/workers-api/#error-codes).
const OUTCOMES: Record<string, Outcome> = {
  E_SENDER_NOT_VERIFIED: { status: "deferred", why: "the sending domain is not verified for Cloudflare Email Sending (verify it in the dashboard)" },
  E_SENDER_DOMAIN_NOT_AVAILABLE: { status: "deferred", why: "the sending domain is not onboarded to Cloudflare Email Sending (onboard it, or use a relay for this region)" },
  E_RECIPIENT_NOT_ALLOWED: { status: "deferred", why: "the send_email binding does not allow this recipient (allowed_destination_addresses)" },
  E_RATE_LIMIT_EXCEEDED: { status: "deferred", enhancedCode: "4.7.0", why: "Cloudflare's sending rate limit was reached" },
  E_DAILY_LIMIT_EXCEEDED: { status: "deferred", enhancedCode: "4.7.0", why: "Cloudflare's daily sending limit was reached" },
  E_INTERNAL_SERVER_ERROR: { status: "deferred", enhancedCode: "4.3.0", why: "Cloudflare Email Sending is temporarily unavailable" },
  E_RECIPIENT_SUPPRESSED: { status: "rejected", enhancedCode: "5.1.1", why: "Cloudflare suppresses this recipient (an earlier bounce or complaint)" },
  E_DELIVERY_FAILED: { status: "rejected", enhancedCode: "5.0.0", why: "the recipient's server refused the message" },
  E_CONTENT_TOO_LARGE: { status: "rejected", enhancedCode: "5.3.4", why: "the message is larger than Cloudflare Email Sending accepts" },
  E_VALIDATION_ERROR: { status: "rejected", enhancedCode: "5.6.0", why: "Cloudflare refused the message as invalid" },
  E_FIELD_MISSING: { status: "rejected", enhancedCode: "5.6.0", why: "Cloudflare found a required field missing" },
  E_HEADER_NOT_ALLOWED: { status: "rejected", enhancedCode: "5.6.0", why: "the message has a header Cloudflare does not allow" },
  E_HEADER_VALUE_INVALID: { status: "rejected", enhancedCode: "5.6.0", why: "the message has a header value Cloudflare refuses" },
  E_HEADER_VALUE_TOO_LONG: { status: "rejected", enhancedCode: "5.6.0", why: "a header value is longer than Cloudflare allows" },
  E_HEADER_NAME_INVALID: { status: "rejected", enhancedCode: "5.6.0", why: "a header name is invalid" },
  E_HEADERS_TOO_LARGE: { status: "rejected", enhancedCode: "5.6.0", why: "the headers are larger than Cloudflare allows" },
  E_HEADERS_TOO_MANY: { status: "rejected", enhancedCode: "5.6.0", why: "the message has more headers than Cloudflare allows" },
};

/** What a thrown error means for one recipient. Errors without a known code (the local
 * simulation throws plain Errors, and a new code may appear) are deferred: the mail is kept and
 * retried, and fails with the reason when the retries run out. */
export function outcomeOf(recipient: string, err: unknown): RecipientResult {
  const code = typeof (err as { code?: unknown })?.code === "string" ? (err as { code: string }).code : undefined;
  const text = err instanceof Error ? err.message : String(err);
  const known = code ? OUTCOMES[code] : undefined;
  if (known) {
    const result: RecipientResult = { recipient, status: known.status, message: `Cloudflare Email Sending: ${known.why} (${code}: ${text})` };
    if (known.enhancedCode) result.enhancedCode = known.enhancedCode;
    return result;
  }
  return { recipient, status: "deferred", message: `Cloudflare Email Sending refused the message${code ? ` (${code})` : ""}: ${text}` };
}

const decoder = new TextDecoder();
const strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function utf8(raw: Uint8Array): string | undefined {
  try {
    return strict.decode(raw);
  } catch {
    return undefined;
  }
}

/** The address of the message's From field (the one address Cloudflare accepts as the envelope
 * sender), read from the header block; undefined when it has none or several. */
export function fromAddress(raw: Uint8Array): string | undefined {
  const text = decoder.decode(raw.subarray(0, Math.min(raw.length, 64 * 1024)));
  const end = text.search(/\r?\n\r?\n/);
  const header = (end < 0 ? text : text.slice(0, end)).replace(/\r?\n[ \t]+/g, " ");
  const line = header.split(/\r?\n/).find((l) => /^from\s*:/i.test(l));
  if (!line) return undefined;
  const value = line.slice(line.indexOf(":") + 1);
  // Quoted display names may hold "<", "@" or ","; drop them before looking for addresses.
  const bare = value.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  const angled = [...bare.matchAll(/<([^<>\s]+@[^<>\s]+)>/g)].map((m) => m[1]!);
  const addresses = angled.length > 0 ? angled : [...bare.matchAll(/([^\s<>,;:()"]+@[^\s<>,;:()"]+)/g)].map((m) => m[1]!);
  return addresses.length === 1 ? addresses[0] : undefined;
}

/** The `send` of a `send_email` binding (SendEmail), or anything with its shape. */
export interface SendEmailBinding {
  send(message: EmailMessage): Promise<EmailSendResult>;
}

class CloudflareSession implements TransportSession {
  constructor(private readonly binding: SendEmailBinding) {}

  async deliver(message: OutboundMessage): Promise<RecipientResult[]> {
    if (message.recipients.length === 0) return [];
    // EmailMessage takes one string or stream, and a stream is unsafe here (below): this
    // transport joins tern's chunked message into one buffer, and then a string, the cost of
    // two copies of the message that the SMTP transport does not pay.
    const raw = await joinedBytes(message.raw);
    const from = fromAddress(raw);
    if (!from) {
      return message.recipients.map((recipient) => ({ recipient, status: "rejected" as const, enhancedCode: "5.6.0", message: "Cloudflare Email Sending needs a message with exactly one From address" }));
    }
    // As text when it is UTF-8 (tern's messages are): a stream the service refuses before
    // reading it is left open, and the runtime reports the send as hung.
    const text = utf8(raw);
    return Promise.all(message.recipients.map(async (recipient): Promise<RecipientResult> => {
      try {
        const sent = await this.binding.send(new EmailMessage(from, recipient, text ?? new Response(raw).body!));
        return { recipient, status: "accepted", code: 250, final: false, message: `Accepted by Cloudflare Email Sending${sent?.messageId ? ` as ${sent.messageId}` : ""}` };
      } catch (err) {
        return outcomeOf(recipient, err);
      }
    }));
  }

  async close(): Promise<void> {}
}

export function createCloudflareTransport(binding: SendEmailBinding): Transport {
  return { open: async () => new CloudflareSession(binding) };
}
