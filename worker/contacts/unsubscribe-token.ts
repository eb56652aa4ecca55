// Signed unsubscribe tokens: one names an account, one recipient address and the email it was
// sent in, so the one-click endpoint (RFC 8058) can mark exactly that contact unsubscribed
// with no lookup and no way to unsubscribe anyone else.
//
// Layout, then URL-safe base64 without padding:
//   version(1) kind=3(1) email id(16) account id(16) mac(16) recipient (UTF-8, lower case)
// mac = the first 16 bytes of HMAC-SHA256(key, "tern-unsubscribe" NUL <every byte but the mac>).
// The key is the tracking tokens' ("link-token"); the label and kind keep the two apart.
import type { Result } from "../result.ts";
import { concatBytes as concat, constantTimeEqual, fromBase64UrlStrict, toBase64Url } from "../bytes.ts";
import { uuidFromBytes, uuidToBytes } from "../ids.ts";

const VERSION = 1;
const KIND_UNSUBSCRIBE = 3;
const MAC_BYTES = 16;
const HEAD_BYTES = 2 + 16 + 16;
/** An address is at most 254 octets; a little room for UTF-8 local parts. */
const MAX_RECIPIENT_BYTES = 512;
const LABEL = new TextEncoder().encode("tern-unsubscribe\0");

/** The path the unsubscribe endpoint answers on; the token follows the prefix. */
export const UNSUBSCRIBE_PATH_PREFIX = "/u/";

export interface UnsubscribeClaim {
  accountId: string;
  emailId: string;
  /** Lower case. */
  recipient: string;
}

export async function signUnsubscribeToken(key: CryptoKey, claim: UnsubscribeClaim): Promise<string> {
  const recipient = new TextEncoder().encode(claim.recipient.toLowerCase());
  if (recipient.length === 0 || recipient.length > MAX_RECIPIENT_BYTES) throw new RangeError("recipient address length out of range");
  const head = new Uint8Array(HEAD_BYTES);
  head[0] = VERSION;
  head[1] = KIND_UNSUBSCRIBE;
  head.set(uuidToBytes(claim.emailId), 2);
  head.set(uuidToBytes(claim.accountId), 18);
  const mac = await macOf(key, head, recipient);
  return toBase64Url(concat([head, mac, recipient]));
}

const INVALID = { ok: false, message: "The unsubscribe link is not valid." } as const;

export async function verifyUnsubscribeToken(key: CryptoKey, token: string): Promise<Result<UnsubscribeClaim>> {
  if (typeof token !== "string" || token.length > 1024) return INVALID;
  const bytes = fromBase64UrlStrict(token);
  if (bytes === null || bytes.length <= HEAD_BYTES + MAC_BYTES || bytes[0] !== VERSION || bytes[1] !== KIND_UNSUBSCRIBE) return INVALID;
  const head = bytes.subarray(0, HEAD_BYTES);
  const recipient = bytes.subarray(HEAD_BYTES + MAC_BYTES);
  if (!constantTimeEqual(await macOf(key, head, recipient), bytes.subarray(HEAD_BYTES, HEAD_BYTES + MAC_BYTES))) return INVALID;
  let address: string;
  try {
    address = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(recipient);
  } catch {
    return INVALID;
  }
  return { ok: true, value: { emailId: uuidFromBytes(head.subarray(2, 18)), accountId: uuidFromBytes(head.subarray(18, 34)), recipient: address } };
}

async function macOf(key: CryptoKey, head: Uint8Array, recipient: Uint8Array): Promise<Uint8Array> {
  const signed = await crypto.subtle.sign("HMAC", key, concat([LABEL, head, recipient]) as BufferSource);
  return new Uint8Array(signed, 0, MAC_BYTES);
}
