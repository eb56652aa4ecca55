// Signed, expiring download links for received mail: the link itself is the credential, so
// it names exactly one object (the raw message or one attachment of one email), the API key
// that asked for it, and a time after which it stops working. HMAC-SHA-256 under a key
// derived from the master secret. A link works only while its key does: revoking the key
// (deleting its row) ends every link it made, at once.
import { eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { constantTimeEqual, toBase64Url } from "../bytes.ts";
import { macKey } from "../crypto/master-key.ts";
import { apiKeys } from "../db/schema.ts";

/** How long a download link works. */
export const LINK_TTL_MS = 60 * 60_000;

/** The parts of a link's query string, as received. */
export interface LinkQuery {
  key?: string | undefined;
  expires?: string | undefined;
  signature?: string | undefined;
}

async function mac(masterKey: string | undefined, subject: string, keyId: string, expires: number): Promise<string> {
  const key = await macKey(masterKey, "download-link");
  return toBase64Url(new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`${subject}\n${keyId}\n${expires}`))));
}

/** `subject` names the object: "raw:<email id>", "attachment:<email id>:<attachment id>",
 * "sent-attachment:<email id>:<attachment id>" or "share:<email id>"; `keyId` is the API key
 * the link is made for. */
export async function signedQuery(masterKey: string | undefined, subject: string, keyId: string, now: number, ttl = LINK_TTL_MS): Promise<{ query: string; expiresAt: number }> {
  const expires = now + ttl;
  const params = new URLSearchParams({ key: keyId, expires: String(expires), signature: await mac(masterKey, subject, keyId, expires) });
  return { query: params.toString(), expiresAt: expires };
}

/** True when the link is authentic, unexpired, and the key it was made for still exists. */
export async function verifyLink(d1: D1Database, masterKey: string | undefined, subject: string, q: LinkQuery, now: number): Promise<boolean> {
  // Only the spelling signedQuery writes: " 1", "1.0", "0x1" or "1e0" would be other links with the same signature.
  if (!q.expires || !/^[1-9][0-9]{0,15}$/.test(q.expires)) return false;
  const expires = Number(q.expires);
  if (!Number.isSafeInteger(expires) || expires < now || !q.signature || !q.key) return false;
  const encoder = new TextEncoder();
  if (!constantTimeEqual(encoder.encode(await mac(masterKey, subject, q.key, expires)), encoder.encode(q.signature))) return false;
  const key = await drizzle(d1).select({ id: apiKeys.id }).from(apiKeys).where(eq(apiKeys.id, q.key)).get();
  return key !== undefined;
}
