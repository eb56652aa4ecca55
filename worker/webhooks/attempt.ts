// One delivery attempt of a signed webhook: a POST bounded in time, whose outcome is recorded
// for the endpoint's attempt log (status, duration, a short excerpt of the answer). Every
// failure is a result with a message fit to show the account; nothing throws.
import type { OutboundUrlPolicy } from "../net/outbound.ts";
import { checkEndpoint } from "./endpoint.ts";
import { ATTEMPT_TIMEOUT_MS, isAcknowledged } from "./retry.ts";
import type { WebhookHeaders } from "./signing.ts";

/** The attempt log keeps at most this much of the receiver's answer. */
export const RESPONSE_EXCERPT_BYTES = 1024;

export const USER_AGENT = "tern-webhooks/1";

export interface WebhookRequest {
  url: string;
  /** From signWebhook: the same id on every attempt, a fresh timestamp and signature per attempt. */
  headers: WebhookHeaders;
  /** The signed body, sent as is. */
  body: string;
}

export interface AttemptRecord {
  /** A 2xx answer: the event is delivered to this endpoint. */
  ok: boolean;
  /** The receiver's HTTP status; null when there was no answer. */
  status: number | null;
  /** Unix ms when the attempt started. */
  startedAt: number;
  durationMs: number;
  /** The first RESPONSE_EXCERPT_BYTES of the answer, as text (incomplete characters dropped). */
  responseExcerpt: string;
  /** Why the attempt failed, in words for the account; null on success. */
  error: string | null;
}

export interface AttemptOptions {
  /** The endpoint policy (endpointPolicy in endpoint.ts), checked again before sending. */
  policy: OutboundUrlPolicy;
  timeoutMs?: number;
  /** Defaults to the global fetch; tests and the integration may pass their own. */
  fetch?: typeof fetch;
  /** Defaults to Date.now. */
  now?: () => number;
}

/** POSTs the webhook once. Redirects are not followed: a moved endpoint must be updated by its owner. */
export async function attemptDelivery(request: WebhookRequest, options: AttemptOptions): Promise<AttemptRecord> {
  const now = options.now ?? Date.now;
  const timeoutMs = options.timeoutMs ?? ATTEMPT_TIMEOUT_MS;
  const doFetch: typeof fetch = options.fetch ?? ((input, init) => fetch(input, init));
  const startedAt = now();
  const record = (status: number | null, responseExcerpt: string, error: string | null): AttemptRecord => ({
    ok: error === null,
    status,
    startedAt,
    durationMs: Math.max(0, now() - startedAt),
    responseExcerpt,
    error,
  });

  const target = checkEndpoint(request.url, options.policy);
  if (!target.ok) return record(null, "", target.message);

  const signal = AbortSignal.timeout(timeoutMs);
  const seconds = timeoutMs % 1000 === 0 ? `${timeoutMs / 1000} seconds` : `${timeoutMs} ms`;
  let response: Response;
  try {
    response = await doFetch(target.value.href, {
      method: "POST",
      headers: { ...request.headers, "content-type": "application/json", "user-agent": USER_AGENT },
      body: request.body,
      redirect: "manual",
      signal,
    });
  } catch {
    return record(null, "", signal.aborted ? `The endpoint did not answer within ${seconds}.` : "The endpoint could not be reached.");
  }
  // Once the status is in, the answer is decided; the excerpt is read within what is left of the deadline.
  const excerpt = await readExcerpt(response, signal);
  if (isAcknowledged(response.status)) return record(response.status, excerpt, null);
  const error =
    response.status >= 300 && response.status <= 399
      ? `The endpoint answered with a redirect (status ${response.status}); redirects are not followed.`
      : `The endpoint answered with status ${response.status}.`;
  return record(response.status, excerpt, error);
}

/** Up to RESPONSE_EXCERPT_BYTES of the body; the rest is cancelled unread. */
async function readExcerpt(response: Response, signal: AbortSignal): Promise<string> {
  if (response.body === null) return "";
  const reader = response.body.getReader();
  const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: false });
  const aborted = new Promise<"aborted">((resolve) => {
    if (signal.aborted) resolve("aborted");
    signal.addEventListener("abort", () => resolve("aborted"), { once: true });
  });
  let text = "";
  let room = RESPONSE_EXCERPT_BYTES;
  try {
    while (room > 0) {
      const next = await Promise.race([reader.read(), aborted]);
      if (next === "aborted" || next.done) break;
      const chunk = next.value.subarray(0, room);
      room -= chunk.byteLength;
      // stream: true keeps an incomplete trailing character out of the excerpt.
      text += decoder.decode(chunk, { stream: true });
    }
  } catch {
    // A body that breaks off still leaves what was read.
  }
  reader.cancel().catch(() => {});
  return text;
}
