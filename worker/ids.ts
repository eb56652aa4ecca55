// UUIDv7 (RFC 9562): a UUID the .NET client can parse as a Guid, sorting by creation time so
// that cursor pagination and indexes follow insertion order.
import { toHex } from "./bytes.ts";

// Every email's accept and settlement makes several ids: a profile of a broadcast put the old
// way (a getRandomValues call, BigInt shifts and padStart per byte for each) at 8 us an email;
// in Node it took 2.4 us an id against about 0.4 us now.
// Random bytes now come from a pool filled 4 KB at a time (the same CSPRNG), the time is
// written with plain arithmetic and the text from a byte-to-hex table (toHex).
const POOL_BYTES = 4096;
const pool = new Uint8Array(POOL_BYTES);
let poolAt = POOL_BYTES;

/** 16 bytes with bytes 6 to 15 random (the first six are the time's). */
function randomId(): Uint8Array {
  if (poolAt + 10 > POOL_BYTES) {
    crypto.getRandomValues(pool);
    poolAt = 0;
  }
  const bytes = new Uint8Array(16);
  bytes.set(pool.subarray(poolAt, poolAt + 10), 6);
  poolAt += 10;
  return bytes;
}

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
  const bytes = randomId();
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

/** The 48-bit millisecond timestamp, big-endian, in the first six bytes (a time up to 2^48 ms
 * is exact in a double, so no BigInt is needed). */
export function stampTime(bytes: Uint8Array, ms: number): void {
  const high = Math.floor(ms / 2 ** 32) & 0xffff;
  const low = ms >>> 0;
  bytes[0] = high >>> 8;
  bytes[1] = high & 0xff;
  bytes[2] = low >>> 24;
  bytes[3] = (low >>> 16) & 0xff;
  bytes[4] = (low >>> 8) & 0xff;
  bytes[5] = low & 0xff;
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
