// DKIM key pairs: generated with Web Crypto, the public half published as the DNS record's
// p=, the private half kept only as sealed PKCS#8 (worker/crypto/sealed.ts).
import type { Bytes, Key } from "../crypto/types.ts";
import { fromBase64, toBase64, toHex } from "../bytes.ts";
import { open, seal } from "../crypto/sealed.ts";
import type { DkimAlgorithm } from "./sign.ts";

const RSA = {
  name: "RSASSA-PKCS1-v1_5",
  modulusLength: 2048,
  publicExponent: new Uint8Array([1, 0, 1]),
  hash: "SHA-256",
};

export interface GeneratedKey {
  algorithm: DkimAlgorithm;
  /** The DNS p= value: base64 SubjectPublicKeyInfo for RSA, the raw 32 bytes for Ed25519. */
  publicKey: string;
  /** PKCS#8 private key; seal it before it is stored anywhere. */
  pkcs8: Uint8Array;
}

export async function generateDkimKey(algorithm: DkimAlgorithm): Promise<GeneratedKey> {
  const pair = (await crypto.subtle.generateKey(algorithm === "rsa" ? RSA : { name: "Ed25519" }, true, ["sign", "verify"])) as { publicKey: Key; privateKey: Key };
  const pub = new Uint8Array((await crypto.subtle.exportKey(algorithm === "rsa" ? "spki" : "raw", pair.publicKey)) as ArrayBuffer);
  const pkcs8 = new Uint8Array((await crypto.subtle.exportKey("pkcs8", pair.privateKey)) as ArrayBuffer);
  return { algorithm, publicKey: toBase64(pub), pkcs8 };
}

/** The TXT record value a domain publishes at <selector>._domainkey.<domain>. */
export function dkimRecordValue(algorithm: DkimAlgorithm, publicKey: string): string {
  return `v=DKIM1; k=${algorithm === "ed25519" ? "ed25519" : "rsa"}; p=${publicKey}`;
}

/** Every selector's length ("tern" and 8 hex digits): a DKIM record's name is this, then
 * "._domainkey.", then the domain. */
export const SELECTOR_LENGTH = 12;

/** A fresh selector: "tern" and 8 random hex digits, unique enough for rotations. */
export function newSelector(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(4));
  return "tern" + toHex(bytes);
}

/** The sealing context binds a sealed key to its domain and selector. */
function context(domainId: string, selector: string): string {
  return `dkim:${domainId}:${selector}`;
}

export function sealPrivateKey(masterKey: string | undefined, domainId: string, selector: string, pkcs8: Uint8Array): Promise<string> {
  return seal(masterKey, "dkim-private-key", pkcs8, context(domainId, selector));
}

/** The private key as a non-extractable CryptoKey, opened from its sealed form. */
export async function openPrivateKey(
  masterKey: string | undefined,
  key: { domainId: string; selector: string; algorithm: DkimAlgorithm; privateKeySealed: string },
): Promise<Key> {
  const pkcs8 = await open(masterKey, "dkim-private-key", key.privateKeySealed, context(key.domainId, key.selector));
  try {
    return await crypto.subtle.importKey("pkcs8", pkcs8 as Bytes, key.algorithm === "rsa" ? RSA : { name: "Ed25519" }, false, ["sign"]);
  } finally {
    pkcs8.fill(0);
  }
}

/** The p= of a DKIM TXT record, whitespace removed; null when there is none. */
export function publicKeyOfRecord(txt: string): { p: string; k: string } | null {
  const tags = new Map<string, string>();
  for (const part of txt.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    tags.set(part.slice(0, eq).trim().toLowerCase(), part.slice(eq + 1).replace(/\s+/g, ""));
  }
  const v = tags.get("v");
  if (v !== undefined && v !== "DKIM1") return null;
  const p = tags.get("p");
  if (!p || !fromBase64(p)) return null;
  return { p, k: (tags.get("k") ?? "rsa").toLowerCase() };
}
