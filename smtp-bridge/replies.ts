// What the API answered, as an SMTP reply (contract section 7). Validation and verification
// errors are permanent (5.x.x) and carry the API's message; 429, 5xx and an API that cannot be
// reached are temporary (4.x.x), so the client keeps the message and tries again. The
// enhanced status code (RFC 3463) leads the text, as Postfix writes it.

/** How a submission ended, seen from the bridge. */
export type ApiOutcome =
  | {
      kind: "answer"; status: number; name: string | undefined; message: string | undefined; id: string | undefined; retryAfterSeconds: number | undefined;
      /** The key's account, as tern names it (the tern-account-id header) on an authenticated answer. */
      account?: string | undefined;
    }
  /** No answer: refused connection, reset, timeout. `sent`: the whole request had been written. */
  | { kind: "unreachable"; reason: string; sent: boolean };

export interface SmtpReply {
  code: number;
  /** The text after the code, enhanced status code first. */
  text: string;
  /** accepted, or the client must not retry, or it should. */
  class: "accepted" | "permanent" | "temporary";
}

function oneLine(s: string | undefined, fallback: string): string {
  const t = (s ?? "").replace(/[\u0000-\u001f\u007f]+/g, " ").trim();
  return (t || fallback).slice(0, 400);
}

export function replyForSubmission(o: ApiOutcome): SmtpReply {
  if (o.kind === "unreachable") {
    return { code: 451, text: "4.4.1 tern's API could not be reached; the message was not accepted, try again later", class: "temporary" };
  }
  const msg = oneLine(o.message, `The API answered ${o.status}.`);
  const permanent = (code: number, enhanced: string): SmtpReply => ({ code, text: `${enhanced} ${msg}`, class: "permanent" });
  const temporary = (code: number, enhanced: string): SmtpReply => ({ code, text: `${enhanced} ${msg}`, class: "temporary" });
  if (o.status >= 200 && o.status < 300) {
    return { code: 250, text: `2.0.0 OK: queued as ${o.id ?? "(no id)"}`, class: "accepted" };
  }
  switch (o.status) {
    case 400:
      return permanent(554, "5.6.0");
    case 401:
    case 403:
      // invalid_api_key: the key was revoked since login; validation_error: the From domain is
      // not verified, or not the one the key is restricted to.
      return o.name === "invalid_api_key" || o.name === "missing_api_key" || o.name === "restricted_api_key"
        ? permanent(554, "5.7.8")
        : permanent(550, "5.7.1");
    case 409:
      // The same idempotency key with another message is final; the first one still running is not.
      return o.name === "concurrent_idempotent_requests" ? temporary(451, "4.3.0") : permanent(554, "5.6.0");
    case 413:
      return permanent(552, "5.3.4");
    case 422:
      return permanent(554, "5.6.0");
    case 429:
      return temporary(451, "4.7.0");
  }
  // 5xx, and anything the contract does not list for a send (a wrong API URL answering 404, a
  // proxy's 502): the operator can fix it, so the client should keep the message.
  return { code: 451, text: `4.3.0 Temporary failure at tern's API (${o.status}); try again later`, class: "temporary" };
}

/** The verdict on a key from the answer to `GET /api-keys` (see api.ts). */
export function keyVerdictFor(o: ApiOutcome): "valid" | "invalid" | "unknown" {
  if (o.kind === "unreachable") return "unknown";
  // Authentication comes first in the Worker: a 200, a restricted_api_key (a sending_access
  // key on a full_access route) and a 429 (the rate limit is taken after authentication)
  // all say the key is good.
  if (o.status === 200 || o.status === 429 || (o.status === 401 && o.name === "restricted_api_key")) return "valid";
  if (o.status === 403 || o.status === 401) return "invalid";
  return "unknown";
}
