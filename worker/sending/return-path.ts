// The envelope sender of each message (VERP): `<email id>-<mark>-<tag>@<return path>.<domain>`,
// one per recipient. Bounces and delivery reports come back to this address, which names the
// email and the one recipient the message was for: a report arriving there speaks only for that
// recipient, so a reader who mails a forged report naming a co-recipient suppresses nobody. The
// mark is a keyed hash of the recipient (the address never appears in clear), the tag an HMAC
// of id and mark, both under a key derived from the master secret: a recipient cannot make the
// return path of another. The return-path subdomain shares the From domain's organizational
// domain, so SPF aligns for DMARC.
import { constantTimeEqual, toHex } from "../bytes.ts";
import { macKey } from "../crypto/master-key.ts";
import { uuidFromBytes } from "../ids.ts";
import { toAsciiEmail } from "../mime/address.ts";

const MARK_HEX = 10;
const TAG_HEX = 12;

async function mac(masterKey: string | undefined, text: string, hex: number): Promise<string> {
  const key = await macKey(masterKey, "return-path");
  return toHex(new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(text)))).slice(0, hex);
}

/** How a recipient is compared: the envelope's ASCII form, case-blind. */
export function canonicalRecipient(address: string): string {
  try {
    return toAsciiEmail(address).toLowerCase();
  } catch {
    return address.toLowerCase();
  }
}

function recipientMark(masterKey: string | undefined, emailId: string, recipient: string): Promise<string> {
  return mac(masterKey, `recipient\n${emailId}\n${canonicalRecipient(recipient)}`, MARK_HEX);
}

/** The tag of a per-recipient return path; a per-email one (`<id>-<tag>`, before return paths
 * named a recipient) signed the id alone. The inputs cannot collide: an id has no slash. */
function tag(masterKey: string | undefined, emailId: string, mark: string | null): Promise<string> {
  return mac(masterKey, mark === null ? emailId : `${emailId}/${mark}`, TAG_HEX);
}

/** The address the message for `recipient` is sent from in MAIL FROM. */
export async function returnPathAddress(masterKey: string | undefined, emailId: string, recipient: string, returnPath: string, domain: string): Promise<string> {
  const mark = await recipientMark(masterKey, emailId, recipient);
  return `${emailId.replace(/-/g, "")}-${mark}-${await tag(masterKey, emailId, mark)}@${returnPath}.${domain}`;
}

export interface ReturnPath {
  emailId: string;
  /** Which recipient it was made for (see recipientOfReturnPath); null for a per-email return
   * path made before return paths named a recipient. */
  mark: string | null;
}

/** What a return-path address says, or null when it is not one tern made (wrong shape, or a
 * tag that does not match). Local parts are compared case-blind: some MTAs fold case on the
 * way back. */
export async function parseReturnPath(masterKey: string | undefined, address: string): Promise<ReturnPath | null> {
  const local = address.slice(0, address.lastIndexOf("@")).toLowerCase();
  const m = new RegExp(`^([0-9a-f]{32})(?:-([0-9a-f]{${MARK_HEX}}))?-([0-9a-f]{${TAG_HEX}})$`).exec(local);
  if (!m) return null;
  const emailId = uuidFromBytes(m[1]!);
  const mark = m[2] ?? null;
  const encoder = new TextEncoder();
  // Compared in constant time: the tag is a secret-derived value.
  const ok = constantTimeEqual(encoder.encode(await tag(masterKey, emailId, mark)), encoder.encode(m[3]!));
  return ok ? { emailId, mark } : null;
}

/** The email id a return-path address belongs to, or null when tern did not make it. */
export async function emailIdOfReturnPath(masterKey: string | undefined, address: string): Promise<string | null> {
  return (await parseReturnPath(masterKey, address))?.emailId ?? null;
}

/** Which of the email's recipients a per-recipient return path was made for, or null. */
export async function recipientOfReturnPath(masterKey: string | undefined, rp: ReturnPath, recipients: Iterable<string>): Promise<string | null> {
  if (rp.mark === null) return null;
  for (const r of recipients) if ((await recipientMark(masterKey, rp.emailId, r)) === rp.mark) return r;
  return null;
}
