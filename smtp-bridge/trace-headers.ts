// Trace and verdict header fields: written by the hosts a message passes through and by the
// receivers that judge it, never by its sender. A sender who writes them forges a hop or a
// verdict (a Received line from a trusted host, a passing Authentication-Results, X-Spam-Status:
// No) that a careless receiver or filter may believe. One definition for both sides: the API
// refuses them in `headers` (worker/sending/request.ts) and the MIME builder never writes them;
// the bridge drops them from the messages SMTP clients submit (smtp-bridge/submission.ts).
// It lives in smtp-bridge/ because the bridge ships only that folder (smtp-bridge/build.ts,
// the Dockerfile); the Worker's bundler takes it from here like any other module.

const TRACE_HEADER_NAMES = new Set([
  "received", // RFC 5321 4.4
  "x-received",
  "return-path", // RFC 5321 4.4, written at final delivery
  "delivered-to",
  "x-original-to",
  "authentication-results", // RFC 8601
  "original-authentication-results", // RFC 7960
  "received-spf", // RFC 7208 9.1
  "arc-seal", // RFC 8617
  "arc-message-signature",
  "arc-authentication-results",
  "dkim-signature", // RFC 6376: tern signs; a caller's signature would not survive anyway
  "domainkey-signature",
]);

/** Prefixes: Resent-* (RFC 5322 3.6.6, trace of a resend) and X-Spam-* (filters' verdicts). */
const TRACE_HEADER_PREFIXES = ["resent-", "x-spam-"];

/** True for a trace or verdict header name (case-insensitive): no sender may set it. */
export function isTraceHeaderName(name: string): boolean {
  const n = name.toLowerCase();
  return TRACE_HEADER_NAMES.has(n) || TRACE_HEADER_PREFIXES.some((p) => n.startsWith(p));
}
