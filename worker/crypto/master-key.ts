// One operator secret (MASTER_KEY) and keys derived from it per purpose with HKDF, so a key
// for one purpose (sealing DKIM private keys) says nothing about another (return-path tags).
// The secret never leaves this module; derived keys are non-extractable CryptoKeys.
import type { Bytes, DeriveAlgorithm, Key, Usages } from "./types.ts";
import { fromBase64 } from "../bytes.ts";

export type KeyPurpose = "dkim-private-key" | "return-path" | "link-token" | "download-link" | "webhook-secret" | "dashboard";

/** The secret is at least 32 bytes: base64 of random bytes, or a long random string. */
export const MIN_MASTER_KEY_BYTES = 32;

export class MasterKeyMissingError extends Error {
  constructor() {
    super("The MASTER_KEY secret is not set (or shorter than 32 bytes): see README, Configuration.");
  }
}

function secretBytes(secret: string | undefined): Uint8Array {
  if (!secret) throw new MasterKeyMissingError();
  const decoded = /^[A-Za-z0-9+/_-]{43,}={0,2}$/.test(secret) ? fromBase64(secret) : null;
  const bytes = decoded && decoded.length >= MIN_MASTER_KEY_BYTES ? decoded : new TextEncoder().encode(secret);
  if (bytes.length < MIN_MASTER_KEY_BYTES) throw new MasterKeyMissingError();
  return bytes;
}

const cache = new Map<string, Promise<Key>>();

async function derive(secret: string | undefined, purpose: KeyPurpose, algorithm: DeriveAlgorithm, usages: Usages): Promise<Key> {
  const base = await crypto.subtle.importKey("raw", secretBytes(secret) as Bytes, "HKDF", false, ["deriveKey"]);
  return crypto.subtle.deriveKey(
    { name: "HKDF", hash: "SHA-256", salt: new Uint8Array(32), info: new TextEncoder().encode(`tern/${purpose}/v1`) },
    base,
    algorithm,
    false,
    usages,
  );
}

function cached(secret: string | undefined, purpose: KeyPurpose, make: () => Promise<Key>): Promise<Key> {
  secretBytes(secret); // fail fast, outside the cache
  const id = `${purpose}:${secret}`;
  let key = cache.get(id);
  if (!key) {
    if (cache.size > 16) cache.clear();
    key = make();
    key.catch(() => cache.delete(id));
    cache.set(id, key);
  }
  return key;
}

/** AES-256-GCM key for sealing data at rest. */
export function sealingKey(secret: string | undefined, purpose: KeyPurpose): Promise<Key> {
  return cached(secret, purpose, () => derive(secret, purpose, { name: "AES-GCM", length: 256 }, ["encrypt", "decrypt"]));
}

/** HMAC-SHA-256 key for tags and tokens. */
export function macKey(secret: string | undefined, purpose: KeyPurpose): Promise<Key> {
  return cached(secret, purpose, () => derive(secret, purpose, { name: "HMAC", hash: "SHA-256", length: 256 }, ["sign", "verify"]));
}
