// Standard Webhooks signing (https://www.standardwebhooks.com), which is byte for byte what
// Svix does: HMAC-SHA256 over "id.timestamp.body", keyed with the base64 bytes of the
// `whsec_` secret. Receivers verify with either library, so every header is sent under both
// names. Web Crypto only: the same module signs in workerd and in Node.
import { fromBase64, toBase64 } from "../bytes.ts";

export const SECRET_PREFIX = "whsec_";
/** 24 random bytes: 192 bits, and a secret shaped like Svix's (`whsec_` + 32 characters). */
export const SECRET_BYTES = 24;
/** Secrets we accept back (rotation, imports): the Standard Webhooks range. */
export const MIN_SECRET_BYTES = 24;
export const MAX_SECRET_BYTES = 64;

export interface WebhookHeaders {
  "webhook-id": string;
  "webhook-timestamp": string;
  "webhook-signature": string;
  "svix-id": string;
  "svix-timestamp": string;
  "svix-signature": string;
}

export interface WebhookMessage {
  /** The event's id: the same on every attempt, so receivers can deduplicate. */
  id: string;
  /** When this attempt was signed, in Unix seconds (a Date is truncated to seconds). */
  timestamp: number | Date;
  /** The exact body that will be sent: signatures cover its UTF-8 bytes. */
  body: string;
}

/** A new signing secret for an endpoint. */
export function generateWebhookSecret(): string {
  return SECRET_PREFIX + toBase64(crypto.getRandomValues(new Uint8Array(SECRET_BYTES)));
}

/** The key bytes of a `whsec_` secret, or null when it is not one we issue or accept. */
export function decodeWebhookSecret(secret: string): Uint8Array<ArrayBuffer> | null {
  if (typeof secret !== "string" || !secret.startsWith(SECRET_PREFIX)) return null;
  const bytes = fromPaddedBase64(secret.slice(SECRET_PREFIX.length));
  if (bytes === null || bytes.length < MIN_SECRET_BYTES || bytes.length > MAX_SECRET_BYTES) return null;
  return bytes;
}

/**
 * The headers of one signed delivery. With several secrets (during a rotation both the old
 * and the new one sign), the signature header lists one `v1,<base64>` per secret, separated
 * by spaces, so a receiver holding either secret verifies. Throws on a secret that
 * `decodeWebhookSecret` refuses or an id that cannot be a header value: both are
 * programming errors, never caller input.
 */
export async function signWebhook(message: WebhookMessage, secrets: readonly string[]): Promise<WebhookHeaders> {
  if (secrets.length === 0) throw new TypeError("signWebhook needs at least one secret");
  // The id and timestamp are joined with "." in the signed content and sent as headers.
  if (!/^[\x21-\x7e]{1,256}$/.test(message.id) || message.id.includes(".")) {
    throw new TypeError("webhook id must be 1..256 visible ASCII characters without '.'");
  }
  const seconds = message.timestamp instanceof Date ? Math.floor(message.timestamp.getTime() / 1000) : message.timestamp;
  if (!Number.isSafeInteger(seconds) || seconds < 0) throw new TypeError("webhook timestamp must be whole Unix seconds");
  const content = new TextEncoder().encode(`${message.id}.${seconds}.${message.body}`);
  const signatures = await Promise.all(
    secrets.map(async (secret) => {
      const bytes = decodeWebhookSecret(secret);
      if (bytes === null) throw new TypeError("not a valid whsec_ signing secret");
      const key = await crypto.subtle.importKey("raw", bytes, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
      return `v1,${toBase64(new Uint8Array(await crypto.subtle.sign("HMAC", key, content)))}`;
    }),
  );
  const timestamp = String(seconds);
  const signature = signatures.join(" ");
  return {
    "webhook-id": message.id,
    "webhook-timestamp": timestamp,
    "webhook-signature": signature,
    "svix-id": message.id,
    "svix-timestamp": timestamp,
    "svix-signature": signature,
  };
}

/** Standard padded base64 only: the receivers' libraries cannot decode any other form. */
function fromPaddedBase64(text: string): Uint8Array<ArrayBuffer> | null {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) return null;
  return fromBase64(text) as Uint8Array<ArrayBuffer> | null;
}
