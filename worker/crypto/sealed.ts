// Data sealed at rest with AES-256-GCM under a key derived from the master secret. The
// context (for a DKIM key: its domain id and selector) is bound as associated data, so a
// sealed value copied onto another row does not open there.
import type { Bytes } from "./types.ts";
import { fromBase64, toBase64Url } from "../bytes.ts";
import { sealingKey, type KeyPurpose } from "./master-key.ts";

const VERSION = "v1";

export async function seal(secret: string | undefined, purpose: KeyPurpose, plaintext: Uint8Array, context: string): Promise<string> {
  const key = await sealingKey(secret, purpose);
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const ct = await crypto.subtle.encrypt(
    { name: "AES-GCM", iv, additionalData: new TextEncoder().encode(context) },
    key,
    plaintext as Bytes,
  );
  return `${VERSION}.${toBase64Url(iv)}.${toBase64Url(new Uint8Array(ct))}`;
}

export class SealedDataError extends Error {}

export async function open(secret: string | undefined, purpose: KeyPurpose, sealed: string, context: string): Promise<Uint8Array> {
  const [version, ivText, ctText, extra] = sealed.split(".");
  const iv = ivText ? fromBase64(ivText) : null;
  const ct = ctText ? fromBase64(ctText) : null;
  if (version !== VERSION || !iv || !ct || extra !== undefined) throw new SealedDataError("sealed value is malformed");
  const key = await sealingKey(secret, purpose);
  try {
    const pt = await crypto.subtle.decrypt(
      { name: "AES-GCM", iv: iv as Bytes, additionalData: new TextEncoder().encode(context) },
      key,
      ct as Bytes,
    );
    return new Uint8Array(pt);
  } catch {
    throw new SealedDataError("sealed value does not open with this key and context");
  }
}
