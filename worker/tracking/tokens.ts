// Signed tokens for the open pixel and click redirects. A token names one email (and, for a
// click, one link of it) and carries a MAC, so a token cannot be forged, altered or moved to
// another email or link: the redirect then goes only where that email's own link pointed.
//
// Layout, then URL-safe base64 without padding:
//   open:  version(1) kind=1(1) email id(16)                                  mac(16)
//   click: version(1) kind=2(1) email id(16) link index(2) link hash(8)       mac(16)
// mac = the first 16 bytes of HMAC-SHA256(key, "tern-tracking" NUL <the bytes before it>);
// version 2 is a token issued for a domain's own tracking host: its mac also covers that host
// ("tern-tracking" NUL host NUL <bytes>), so it is authentic there and nowhere else, and a
// version 1 token (the deployment's own host) is not authentic at any domain's host.
// link hash = the first 8 bytes of SHA-256 of the link as written in the email. The hash
// lets a click be checked against the stored link; the MAC is checked first, so a forged
// token costs no storage read.
import { concatBytes, constantTimeEqual, fromBase64UrlStrict, toBase64Url } from "../bytes.ts";
import { uuidFromBytes, uuidToBytes } from "../ids.ts";
import type { Result } from "../result.ts";

const VERSION = 1;
const VERSION_HOST = 2;
const KIND_OPEN = 1;
const KIND_CLICK = 2;
const MAC_BYTES = 16;
const LINK_HASH_BYTES = 8;
const OPEN_BYTES = 2 + 16 + MAC_BYTES;
const CLICK_BYTES = 2 + 16 + 2 + LINK_HASH_BYTES + MAC_BYTES;
/** Link indexes fit in two bytes. */
export const MAX_LINK_INDEX = 0xffff;
const LABEL = new TextEncoder().encode("tern-tracking\0");

/** The paths the tracking routes answer on; the token follows the prefix. */
export const OPEN_PATH_PREFIX = "/t/o/";
export const CLICK_PATH_PREFIX = "/t/c/";

export interface ClickClaim {
  emailId: string;
  linkIndex: number;
  /** The first bytes of SHA-256 of the link the token was made for. */
  linkHash: Uint8Array;
}

/**
 * An HMAC-SHA256 key from a secret, for tests and tools. The Worker uses a key derived from
 * its master secret for this one purpose (worker/crypto's "link-token" key); any HMAC-SHA256
 * CryptoKey that can sign works.
 */
export async function importTrackingKey(secret: string | Uint8Array): Promise<CryptoKey> {
  const bytes = typeof secret === "string" ? new TextEncoder().encode(secret) : secret;
  if (bytes.length < 32) throw new RangeError("a tracking key needs at least 32 bytes of secret");
  return crypto.subtle.importKey("raw", bytes as BufferSource, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
}

/** `host`: the domain's own tracking host the token is for; none for the deployment's own. */
export async function signOpenToken(key: CryptoKey, emailId: string, host?: string): Promise<string> {
  const head = new Uint8Array(2 + 16);
  head[0] = host === undefined ? VERSION : VERSION_HOST;
  head[1] = KIND_OPEN;
  head.set(uuidToBytes(emailId), 2);
  return toBase64Url(concatBytes([head, await mac(key, head, host)]));
}

export async function signClickToken(key: CryptoKey, emailId: string, linkIndex: number, link: string, host?: string): Promise<string> {
  if (!Number.isInteger(linkIndex) || linkIndex < 0 || linkIndex > MAX_LINK_INDEX) throw new RangeError("link index out of range");
  const head = new Uint8Array(CLICK_BYTES - MAC_BYTES);
  head[0] = host === undefined ? VERSION : VERSION_HOST;
  head[1] = KIND_CLICK;
  head.set(uuidToBytes(emailId), 2);
  head[18] = linkIndex >> 8;
  head[19] = linkIndex & 0xff;
  head.set(await linkHash(link), 20);
  return toBase64Url(concatBytes([head, await mac(key, head, host)]));
}

const INVALID = { ok: false, message: "The tracking token is not valid." } as const;

/** The email an open token was made for; any other token (a click token included) is refused.
 * `host`: the domain tracking host the request came to (none: the deployment's own). */
export async function verifyOpenToken(key: CryptoKey, token: string, host?: string): Promise<Result<{ emailId: string }>> {
  const bytes = await authentic(key, token, KIND_OPEN, OPEN_BYTES, host);
  if (bytes === null) return INVALID;
  return { ok: true, value: { emailId: uuidFromBytes(bytes.subarray(2, 18)) } };
}

/** What a click token claims, once its MAC is checked. The link itself comes from storage: see clickTarget. */
export async function verifyClickToken(key: CryptoKey, token: string, host?: string): Promise<Result<ClickClaim>> {
  const bytes = await authentic(key, token, KIND_CLICK, CLICK_BYTES, host);
  if (bytes === null) return INVALID;
  return {
    ok: true,
    value: {
      emailId: uuidFromBytes(bytes.subarray(2, 18)),
      linkIndex: (bytes[18]! << 8) | bytes[19]!,
      linkHash: bytes.slice(20, 20 + LINK_HASH_BYTES),
    },
  };
}

/** The stored link a verified claim points to, or null when the email has no such link (or it changed). */
export async function clickTarget(claim: ClickClaim, links: readonly string[]): Promise<string | null> {
  const link = links[claim.linkIndex];
  if (link === undefined) return null;
  return constantTimeEqual(await linkHash(link), claim.linkHash) ? link : null;
}

/**
 * A click token all the way to its redirect target: MAC first, then the email's stored
 * links (`loadLinks` is asked only for authentic tokens; it answers null for an unknown email).
 */
export async function resolveClick(
  key: CryptoKey,
  token: string,
  loadLinks: (emailId: string) => Promise<readonly string[] | null>,
  host?: string,
): Promise<Result<{ emailId: string; linkIndex: number; link: string }>> {
  const claim = await verifyClickToken(key, token, host);
  if (!claim.ok) return claim;
  const links = await loadLinks(claim.value.emailId);
  const link = links === null ? null : await clickTarget(claim.value, links);
  if (link === null) return { ok: false, message: "The link of this tracking token is not known." };
  return { ok: true, value: { emailId: claim.value.emailId, linkIndex: claim.value.linkIndex, link } };
}

/** The token's bytes when it is well formed, of the expected kind, issued for this host (a
 * domain's tracking host, or none: the deployment's own) and its MAC matches; otherwise null. */
async function authentic(key: CryptoKey, token: string, kind: number, length: number, host?: string): Promise<Uint8Array | null> {
  if (typeof token !== "string" || token.length > 128) return null;
  const bytes = fromBase64UrlStrict(token);
  if (bytes === null || bytes.length !== length || bytes[0] !== (host === undefined ? VERSION : VERSION_HOST) || bytes[1] !== kind) return null;
  const head = bytes.subarray(0, length - MAC_BYTES);
  const expected = await mac(key, head, host);
  return constantTimeEqual(expected, bytes.subarray(length - MAC_BYTES)) ? bytes : null;
}

async function mac(key: CryptoKey, head: Uint8Array, host?: string): Promise<Uint8Array> {
  const bound = host === undefined ? [LABEL, head] : [LABEL, new TextEncoder().encode(`${host}\0`), head];
  const signed = await crypto.subtle.sign("HMAC", key, concatBytes(bound) as BufferSource);
  return new Uint8Array(signed, 0, MAC_BYTES);
}

async function linkHash(link: string): Promise<Uint8Array> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(link) as BufferSource);
  return new Uint8Array(digest, 0, LINK_HASH_BYTES);
}
