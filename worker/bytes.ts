/** The chunks of a stream as one array (total: their summed length, when already known). */
export function concatBytes(chunks: Uint8Array[], total = chunks.reduce((n, c) => n + c.byteLength, 0)): Uint8Array {
  const out = new Uint8Array(total);
  let offset = 0;
  for (const c of chunks) {
    out.set(c, offset);
    offset += c.byteLength;
  }
  return out;
}

/** Standard base64 (no line breaks) of bytes; works in workerd and Node alike. */
export function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

/** Bytes of standard or URL-safe base64; null when it is not base64. */
export function fromBase64(text: string): Uint8Array | null {
  const normal = text.replace(/-/g, "+").replace(/_/g, "/");
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(normal)) return null;
  try {
    const binary = atob(normal.padEnd(Math.ceil(normal.length / 4) * 4, "="));
    return Uint8Array.from(binary, (c) => c.charCodeAt(0));
  } catch {
    return null;
  }
}

/** URL-safe base64 without padding (RFC 4648 section 5). */
export function toBase64Url(bytes: Uint8Array): string {
  return toBase64(bytes).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** Strict URL-safe base64 for tokens: only that alphabet, no padding, and one spelling per byte
 * string (stray low bits in the last character would give a second token for the same bytes). */
export function fromBase64UrlStrict(text: string): Uint8Array | null {
  if (!/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) return null;
  const bytes = fromBase64(text);
  return bytes !== null && toBase64Url(bytes) === text ? bytes : null;
}

const HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, "0"));

/** Lower-case hex of bytes (from a table: every id's text is made with it, worker/ids.ts). */
export function toHex(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) out += HEX[b]!;
  return out;
}

/** Compares every byte whatever the first difference, so timing tells nothing about a MAC. */
export function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

/** workerd's incremental digest (a WritableStream), typed here because this module is also
 * typechecked for Node, whose Crypto does not have it. */
type DigestStreamClass = new (algorithm: string) => WritableStream<ArrayBufferView> & { digest: Promise<ArrayBuffer> };

/** A SHA-256 fed a piece at a time (workerd's crypto.DigestStream): the digest of everything
 * written, without the pieces ever joined. */
export function sha256Stream(): WritableStream<ArrayBufferView> & { digest: Promise<ArrayBuffer> } {
  return new (crypto as unknown as { DigestStream: DigestStreamClass }).DigestStream("SHA-256");
}

/** SHA-256 of `pieces` one after another: the digest of their concatenation, without making it
 * (a second copy of a 25 MiB message is a fifth of the isolate's memory). */
export async function sha256OfPieces(pieces: Iterable<Uint8Array>): Promise<Uint8Array> {
  const digest = sha256Stream();
  const writer = digest.getWriter();
  for (const piece of pieces) await writer.write(piece);
  await writer.close();
  return new Uint8Array(await digest.digest);
}
