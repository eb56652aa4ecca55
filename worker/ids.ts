// UUIDv7 (RFC 9562): a UUID the .NET client can parse as a Guid, sorting by creation time so
// that cursor pagination and indexes follow insertion order.
import { toHex } from "./bytes.ts";

let lastMs = 0;
let seq = 0;
/** How far from the clock a given time may be and still join the isolate's sequence. Callers
 * pass times a few milliseconds apart (a settlement's events at now + i); a time further off is
 * a clock of its own (a test's, a webhook attempt's start, a backdated report's): it is stamped
 * as given and leaves the sequence alone. Following it would have stamped every later id of the
 * isolate with it (a month ahead: out of the retention purge's reach), or let a later id sort
 * before an earlier one of the same millisecond. */
const OWN_CLOCK_MS = 1_000;

export function uuidv7(now: number = Date.now()): string {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  if (Math.abs(now - Date.now()) > OWN_CLOCK_MS) {
    stampTime(bytes, now);
    bytes[6] = 0x70 | (bytes[6]! & 0x0f);
    bytes[8] = (bytes[8]! & 0x3f) | 0x80;
    return uuidFromBytes(bytes);
  }
  // Keep ids from one isolate strictly increasing within a millisecond (12-bit counter in rand_a).
  if (now <= lastMs) {
    now = lastMs;
    seq = (seq + 1) & 0xfff;
    if (seq === 0) now = ++lastMs;
  } else {
    seq = (bytes[6]! & 0x07) << 8 | bytes[7]!; // random start, leaves room to count up
  }
  lastMs = now;
  stampTime(bytes, now);
  bytes[6] = 0x70 | ((seq >> 8) & 0x0f);
  bytes[7] = seq & 0xff;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  return uuidFromBytes(bytes);
}

/** The smallest UUIDv7 of millisecond `ms` (every other bit zero): every id made before `ms`
 * sorts below it, as text too, so `id < uuidv7Floor(t)` is "made before t" on an index. */
export function uuidv7Floor(ms: number): string {
  const bytes = new Uint8Array(16);
  stampTime(bytes, Math.max(0, Math.floor(ms)));
  bytes[6] = 0x70;
  bytes[8] = 0x80;
  return uuidFromBytes(bytes);
}

/** The 48-bit millisecond timestamp, big-endian, in the first six bytes. */
function stampTime(bytes: Uint8Array, ms: number): void {
  const t = BigInt(ms);
  for (let i = 0; i < 6; i++) bytes[i] = Number((t >> BigInt(8 * (5 - i))) & 0xffn);
}

/** The 16 bytes of a UUID (tokens carry ids as bytes, not 36 characters). */
export function uuidToBytes(id: string): Uint8Array {
  if (!isUuid(id)) throw new TypeError("not a UUID");
  const hex = id.replace(/-/g, "");
  return Uint8Array.from({ length: 16 }, (_, i) => parseInt(hex.slice(i * 2, i * 2 + 2), 16));
}

/** A UUID's text from 16 bytes, or from its 32 hex digits. */
export function uuidFromBytes(bytes: Uint8Array | string): string {
  const hex = typeof bytes === "string" ? bytes : toHex(bytes);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export function isUuid(s: string): boolean {
  return UUID.test(s);
}
