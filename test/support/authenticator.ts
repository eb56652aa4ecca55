// A software WebAuthn authenticator for tests that run without a browser: an ES256 key pair
// in WebCrypto, "none" attestation, and assertions signed over authenticatorData and the
// client data's hash, as the WebAuthn spec lays them out (section 6.1 and 6.3.3). The
// browser tests use Chromium's own virtual authenticator instead.
import { concatBytes, fromBase64UrlStrict, toBase64Url } from "../../worker/bytes.ts";

/** The few CBOR items WebAuthn's structures need (RFC 8949: unsigned and negative integers,
 * byte and text strings, maps). */
function cbor(value: number | string | Uint8Array | Map<number | string, unknown>): Uint8Array {
  const head = (major: number, n: number): number[] => {
    if (n < 24) return [(major << 5) | n];
    if (n < 0x100) return [(major << 5) | 24, n];
    if (n < 0x10000) return [(major << 5) | 25, n >> 8, n & 0xff];
    return [(major << 5) | 26, (n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff];
  };
  if (typeof value === "number") return new Uint8Array(value >= 0 ? head(0, value) : head(1, -1 - value));
  if (typeof value === "string") {
    const bytes = new TextEncoder().encode(value);
    return concatBytes([new Uint8Array(head(3, bytes.length)), bytes]);
  }
  if (value instanceof Uint8Array) return concatBytes([new Uint8Array(head(2, value.length)), value]);
  const parts: Uint8Array[] = [new Uint8Array(head(5, value.size))];
  for (const [k, v] of value) parts.push(cbor(k), cbor(v as never));
  return concatBytes(parts);
}


const sha256 = async (bytes: Uint8Array) => new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));

/** A raw ECDSA signature (r || s) as the DER sequence WebAuthn carries. */
function der(raw: Uint8Array): Uint8Array {
  const int = (x: Uint8Array) => {
    let i = 0;
    while (i < x.length - 1 && x[i] === 0) i++;
    const v = x.slice(i);
    const body = v[0]! & 0x80 ? concatBytes([new Uint8Array([0]), v]) : v;
    return concatBytes([new Uint8Array([0x02, body.length]), body]);
  };
  const seq = concatBytes([int(raw.slice(0, 32)), int(raw.slice(32))]);
  return concatBytes([new Uint8Array([0x30, seq.length]), seq]);
}

/** WebCrypto's key type, named the same way under Node's types and workerd's. */
type Key = Awaited<ReturnType<typeof crypto.subtle.importKey>>;

export interface SoftAuthenticator {
  credentialId: string;
  /** The signature counter it reports next (0 keeps it at zero, as synced passkeys do). */
  counter: number;
  /** A registration response to `options` (the server's JSON creation options). */
  register(options: { challenge: string; rp: { id?: string } }, origin: string): Promise<Record<string, unknown>>;
  /** An assertion for `options` (the server's JSON request options), from `origin`. */
  assert(options: { challenge: string; rpId?: string }, origin: string, flags?: { userVerified?: boolean }): Promise<Record<string, unknown>>;
}

export async function softAuthenticator(counter = 0): Promise<SoftAuthenticator> {
  const keys = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"])) as { publicKey: Key; privateKey: Key };
  const jwk = (await crypto.subtle.exportKey("jwk", keys.publicKey)) as { x?: string; y?: string };
  const cose = cbor(new Map<number, unknown>([[1, 2], [3, -7], [-1, 1], [-2, fromBase64UrlStrict(jwk.x!)!], [-3, fromBase64UrlStrict(jwk.y!)!]]));
  const rawId = crypto.getRandomValues(new Uint8Array(16));
  const count = (n: number) => new Uint8Array([(n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff]);
  const self: SoftAuthenticator = {
    credentialId: toBase64Url(rawId),
    counter,
    async register(options, origin) {
      const clientData = new TextEncoder().encode(JSON.stringify({ type: "webauthn.create", challenge: options.challenge, origin, crossOrigin: false }));
      const rpIdHash = await sha256(new TextEncoder().encode(options.rp.id ?? new URL(origin).hostname));
      // Flags: user present (0x01), user verified (0x04), attested credential data (0x40).
      const authData = concatBytes([rpIdHash, new Uint8Array([0x45]), count(self.counter), new Uint8Array(16), new Uint8Array([0, rawId.length]), rawId, cose]);
      const attestationObject = cbor(new Map<string, unknown>([["fmt", "none"], ["attStmt", new Map()], ["authData", authData]]));
      return {
        id: self.credentialId, rawId: self.credentialId, type: "public-key", clientExtensionResults: {}, authenticatorAttachment: "platform",
        response: { clientDataJSON: toBase64Url(clientData), attestationObject: toBase64Url(attestationObject), transports: ["internal"] },
      };
    },
    async assert(options, origin, flags = {}) {
      if (self.counter > 0) self.counter++;
      const clientData = new TextEncoder().encode(JSON.stringify({ type: "webauthn.get", challenge: options.challenge, origin, crossOrigin: false }));
      const rpIdHash = await sha256(new TextEncoder().encode(options.rpId ?? new URL(origin).hostname));
      const authData = concatBytes([rpIdHash, new Uint8Array([flags.userVerified === false ? 0x01 : 0x05]), count(self.counter)]);
      const signed = concatBytes([authData, await sha256(clientData)]);
      const raw = new Uint8Array(await crypto.subtle.sign({ name: "ECDSA", hash: "SHA-256" }, keys.privateKey, signed));
      return {
        id: self.credentialId, rawId: self.credentialId, type: "public-key", clientExtensionResults: {}, authenticatorAttachment: "platform",
        response: { clientDataJSON: toBase64Url(clientData), authenticatorData: toBase64Url(authData), signature: toBase64Url(der(raw)) },
      };
    },
  };
  return self;
}
