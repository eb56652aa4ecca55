// The envelope sender of each email (VERP): `<email id>-<tag>@<return path>.<domain>`. Bounces
// and delivery reports come back to this address, which names the email they are about; the
// tag (an HMAC of the id under a key derived from the master secret) makes forged reports for
// made-up or guessed ids recognisable. The return-path subdomain shares the From domain's
// organizational domain, so SPF aligns for DMARC.
import { constantTimeEqual, toHex } from "../bytes.ts";
import { macKey } from "../crypto/master-key.ts";
import { uuidFromBytes } from "../ids.ts";

const TAG_HEX = 12;

async function tag(masterKey: string | undefined, emailId: string): Promise<string> {
  const key = await macKey(masterKey, "return-path");
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(emailId)));
  return toHex(mac).slice(0, TAG_HEX);
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
  const id = uuidFromBytes(m[1]!);
  const encoder = new TextEncoder();
  // Compared in constant time: the tag is a secret-derived value.
  return constantTimeEqual(encoder.encode(await tag(masterKey, id)), encoder.encode(m[2]!)) ? id : null;
}
