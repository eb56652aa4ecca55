// DKIM signing (RFC 6376) with rsa-sha256 and ed25519-sha256 (RFC 8463), relaxed/relaxed.
// Each key adds its own DKIM-Signature field on top of the message; signatures do not cover
// each other, so a receiver that knows only RSA still finds one it can check.
import type { Bytes, Key } from "../crypto/types.ts";
import { concatBytes, sha256Stream, toBase64 } from "../bytes.ts";
import { RelaxedBodyStream, relaxedBody, relaxedHeader, splitMessage } from "./canonical.ts";
import { headerBytes, type ComposedMessage } from "../mime/build.ts";
import type { MessageChunks } from "../transports/transport.ts";

export type DkimAlgorithm = "rsa" | "ed25519";

export interface SigningKey {
  /** The signing domain (d=), lower case A-labels. */
  domain: string;
  selector: string;
  algorithm: DkimAlgorithm;
  /** A private CryptoKey: RSASSA-PKCS1-v1_5/SHA-256 or Ed25519, usage "sign". */
  privateKey: Key;
}

/** Signed when present, in this order; From is signed once more than it occurs ("over-
 * signed"), so nobody can add a second From below the signature. */
export const SIGNED_HEADERS = [
  "from",
  "to",
  "cc",
  "subject",
  "date",
  "message-id",
  "mime-version",
  "content-type",
  "reply-to",
  "list-unsubscribe",
  "list-unsubscribe-post",
] as const;
const OVERSIGNED = new Set(["from"]);

const encoder = new TextEncoder();

/** The h= list and the canonical header data it covers (RFC 6376 5.4.2: instances are taken
 * from the bottom up; a name listed once more than present signs an absent field). */
function selectHeaders(fields: string[]): { names: string[]; data: string } {
  const byName = new Map<string, string[]>();
  for (const f of fields) {
    const name = f.slice(0, f.indexOf(":")).trim().toLowerCase();
    if (!byName.has(name)) byName.set(name, []);
    byName.get(name)!.push(f);
  }
  const names: string[] = [];
  let data = "";
  for (const name of SIGNED_HEADERS) {
    const present = byName.get(name) ?? [];
    if (present.length === 0) continue;
    for (let i = present.length - 1; i >= 0; i--) {
      names.push(name);
      data += relaxedHeader(present[i]!) + "\r\n";
    }
    if (OVERSIGNED.has(name)) names.push(name);
  }
  return { names, data };
}

async function sha256(bytes: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Bytes));
}

/** Splits a long tag value over folded lines; whitespace in b= and bh= is ignored (3.5). */
function foldValue(value: string, width = 72): string {
  const parts: string[] = [];
  for (let i = 0; i < value.length; i += width) parts.push(value.slice(i, i + width));
  return parts.join("\r\n\t ");
}

async function signature(key: SigningKey, headerData: string): Promise<Uint8Array> {
  const data = encoder.encode(headerData);
  if (key.algorithm === "ed25519") {
    // RFC 8463: PureEdDSA over the SHA-256 hash of the data.
    return new Uint8Array(await crypto.subtle.sign("Ed25519", key.privateKey, (await sha256(data)) as Bytes));
  }
  return new Uint8Array(await crypto.subtle.sign("RSASSA-PKCS1-v1_5", key.privateKey, data as Bytes));
}

export interface SignOptions {
  /** Signature timestamp (t=), Unix seconds; default now. */
  timestamp?: number;
}

/** The DKIM-Signature fields (with their CRLFs) for a finished message, one per key. */
export async function dkimSignatureFields(raw: Uint8Array, keys: SigningKey[], opts: SignOptions = {}): Promise<string> {
  if (keys.length === 0) return "";
  const { fields, body } = splitMessage(raw);
  return signatureFields(fields, toBase64(await sha256(relaxedBody(body))), keys, opts);
}

async function signatureFields(fields: string[], bodyHash: string, keys: SigningKey[], opts: SignOptions): Promise<string> {
  const { names, data } = selectHeaders(fields);
  const t = opts.timestamp ?? Math.floor(Date.now() / 1000);
  let out = "";
  for (const key of keys) {
    const head =
      `DKIM-Signature: v=1; a=${key.algorithm === "ed25519" ? "ed25519-sha256" : "rsa-sha256"}; c=relaxed/relaxed;\r\n` +
      `\td=${key.domain}; s=${key.selector}; t=${t};\r\n` +
      `\th=${names.join(":")};\r\n` +
      `\tbh=${bodyHash};\r\n` +
      `\tb=`;
    // The field itself is signed last, with b= empty and without its CRLF (3.7).
    const sig = await signature(key, data + relaxedHeader(head));
    out += head + foldValue(toBase64(sig)) + "\r\n";
  }
  return out;
}

/** The message with its DKIM-Signature fields prepended. */
export async function signMessage(raw: Uint8Array, keys: SigningKey[], opts: SignOptions = {}): Promise<Uint8Array> {
  const fields = await dkimSignatureFields(raw, keys, opts);
  return fields ? concatBytes([encoder.encode(fields), raw]) : raw;
}

/** The relaxed body hash of a body read in pieces (base64), one piece in memory at a time. */
export async function bodyHash(chunks: Iterable<Uint8Array> | AsyncIterable<Uint8Array>): Promise<string> {
  const digest = sha256Stream();
  const writer = digest.getWriter();
  const relaxed = new RelaxedBodyStream();
  for await (const chunk of chunks) for (const part of relaxed.push(chunk)) await writer.write(part);
  for (const part of relaxed.end()) await writer.write(part);
  await writer.close();
  return toBase64(new Uint8Array(await digest.digest));
}

/** A composed message signed, as the chunks a transport writes: the DKIM-Signature fields,
 * the header section, then the body as it is made. Never joined into one buffer: for a
 * message near the 40 MB bound, a joined copy alone was a third of the isolate's memory. */
export async function signComposed(message: ComposedMessage, keys: SigningKey[], opts: SignOptions & { bodyHash?: string } = {}): Promise<MessageChunks> {
  const hash = keys.length === 0 ? "" : (opts.bodyHash ?? (await bodyHash(message.body.chunks())));
  const signature = keys.length === 0 ? new Uint8Array(0) : encoder.encode(await signatureFields(message.fields, hash, keys, opts));
  const head = headerBytes(message.fields);
  const body = message.body;
  return {
    length: signature.length + head.length + body.length,
    sevenBit: true,
    async *chunks() {
      if (signature.length > 0) yield signature;
      yield head;
      yield* body.chunks();
    },
  };
}
