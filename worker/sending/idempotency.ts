// Idempotency keys (contract 4.3) on POST /emails and /emails/batch, and on SMTP submissions
// that carry Tern-Idempotency-Key: one mechanism, keyed by (account, method + path, key).
// A request without a key never comes here.
import type { Principal } from "../auth.ts";
import { toHex } from "../bytes.ts";
import { ApiError } from "../errors.ts";
import { emailCount, performSend, type Answer, type SendRequest } from "./send.ts";

export const MAX_KEY_LENGTH = 256;

export function checkKey(key: string): void {
  if (key.length < 1 || key.length > MAX_KEY_LENGTH) {
    throw new ApiError("invalid_idempotency_key", `The idempotency key must be 1 to ${MAX_KEY_LENGTH} characters long.`);
  }
}

/** JSON with object keys sorted at every depth: key order and whitespace do not make two
 * bodies different. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.keys(value).sort().filter((k) => (value as Record<string, unknown>)[k] !== undefined);
    return `{${entries.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

export async function fingerprint(req: SendRequest): Promise<string> {
  const text = `${req.kind}\n${req.kind === "batch" ? req.batchMode : ""}\n${canonicalJson(req.body)}`;
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return toHex(new Uint8Array(digest));
}

export function keyObjectName(accountId: string, route: string, key: string): string {
  return `${accountId}:${route}:${key}`;
}

/** Sends at most once per key: replays the stored answer (with idempotent-replayed: true). */
export async function sendIdempotently(env: Env, principal: Principal, route: string, key: string, req: SendRequest): Promise<Answer> {
  checkKey(key);
  const fp = await fingerprint(req);
  const stub = env.IDEMPOTENCY.getByName(keyObjectName(principal.accountId, route, key));
  const begin = await stub.begin(fp, emailCount(req));
  switch (begin.kind) {
    case "conflict":
      throw new ApiError("invalid_idempotent_request", "This idempotency key was already used with a different request body.");
    case "in_flight":
      throw new ApiError("concurrent_idempotent_requests", "A request with this idempotency key is still being processed. Retry in a moment.");
    case "replay":
      return { ...begin.answer, headers: { ...begin.answer.headers, "idempotent-replayed": "true" } };
    case "run": {
      const answer = await performSend(env, principal, req, begin.ids);
      try {
        await stub.finish(fp, answer);
      } catch (err) {
        // The send is recorded; the answer is still the client's. A retry with this key waits
        // out the lease, then finds the reserved ids recorded and answers the same.
        console.error("could not store the idempotent answer", err);
      }
      return answer;
    }
  }
}
