// Signed, expiring download links for received mail: the link itself is the credential, so
// it names exactly one object (the raw message or one attachment of one email) and a time
// after which it stops working. HMAC-SHA-256 under a key derived from the master secret.
import { constantTimeEqual, toBase64Url } from "../bytes.ts";
import { macKey } from "../crypto/master-key.ts";

/** How long a download link works. */
export const LINK_TTL_MS = 60 * 60_000;

async function mac(masterKey: string | undefined, subject: string, expires: number): Promise<string> {
  const key = await macKey(masterKey, "download-link");
  return toBase64Url(new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`${subject}\n${expires}`))));
}

/** `subject` names the object: "raw:<email id>", "attachment:<email id>:<attachment id>",
 * "sent-attachment:<email id>:<attachment id>" or "share:<email id>". */
export async function signedQuery(masterKey: string | undefined, subject: string, now: number, ttl = LINK_TTL_MS): Promise<{ query: string; expiresAt: number }> {
  const expires = now + ttl;
  return { query: `expires=${expires}&signature=${await mac(masterKey, subject, expires)}`, expiresAt: expires };
}

export async function verifyLink(masterKey: string | undefined, subject: string, expiresText: string | undefined, signature: string | undefined, now: number): Promise<boolean> {
  const expires = Number(expiresText);
  if (!Number.isSafeInteger(expires) || expires < now || !signature) return false;
  const encoder = new TextEncoder();
  return constantTimeEqual(encoder.encode(await mac(masterKey, subject, expires)), encoder.encode(signature));
}
