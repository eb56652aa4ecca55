// The envelope sender of each email (VERP): `<email id>-<tag>@<return path>.<domain>`. Bounces
// and delivery reports come back to this address, which names the email they are about; the
// tag (an HMAC of the id under a key derived from the master secret) makes forged reports for
// made-up or guessed ids recognisable. The return-path subdomain shares the From domain's
// organizational domain, so SPF aligns for DMARC.
import { macKey } from "../crypto/master-key.ts";

const TAG_HEX = 12;

function hex(bytes: Uint8Array): string {
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function tag(masterKey: string | undefined, emailId: string): Promise<string> {
  const key = await macKey(masterKey, "return-path");
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(emailId)));
  return hex(mac).slice(0, TAG_HEX);
}

/** The address an email is sent from in MAIL FROM. */
export async function returnPathAddress(masterKey: string | undefined, emailId: string, returnPath: string, domain: string): Promise<string> {
  return `${emailId.replace(/-/g, "")}-${await tag(masterKey, emailId)}@${returnPath}.${domain}`;
}

/** The email id a return-path address belongs to, or null when the address is not one tern
 * made (wrong shape or a tag that does not match). Local parts are compared case-blind:
 * some MTAs fold case on the way back. */
export async function emailIdOfReturnPath(masterKey: string | undefined, address: string): Promise<string | null> {
  const local = address.slice(0, address.lastIndexOf("@")).toLowerCase();
  const m = /^([0-9a-f]{32})-([0-9a-f]{12})$/.exec(local);
  if (!m) return null;
  const h = m[1]!;
  const id = `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  const expected = await tag(masterKey, id);
  // Compare in constant time: the tag is a secret-derived value.
  let diff = 0;
  for (let i = 0; i < TAG_HEX; i++) diff |= expected.charCodeAt(i) ^ m[2]!.charCodeAt(i);
  return diff === 0 ? id : null;
}
