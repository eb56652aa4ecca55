// UUIDv7 ids: version and variant bits, the millisecond they carry, order within a millisecond,
// and the same text as the plain encodings they replaced (BigInt time, hex per byte).
import { describe, expect, it } from "vitest";
import { toHex } from "../../worker/bytes.ts";
import { isUuid, stampTime, uuidFromBytes, uuidToBytes, uuidv7, uuidv7Floor } from "../../worker/ids.ts";

const timeOf = (id: string) => Number.parseInt(id.replace(/-/g, "").slice(0, 12), 16);

describe("uuidv7", () => {
  it("writes the time as the BigInt encoding did, for any 48-bit millisecond", () => {
    const bigint = (ms: number) => {
      const b = new Uint8Array(6);
      const t = BigInt(ms);
      for (let i = 0; i < 6; i++) b[i] = Number((t >> BigInt(8 * (5 - i))) & 0xffn);
      return b;
    };
    const times = [0, 1, 255, 256, 2 ** 32 - 1, 2 ** 32, 2 ** 40 + 12345, Date.now(), 2 ** 48 - 1, ...Array.from({ length: 200 }, () => Math.floor(Math.random() * 2 ** 48))];
    for (const ms of times) {
      const b = new Uint8Array(16);
      stampTime(b, ms);
      expect(b.subarray(0, 6), String(ms)).toEqual(bigint(ms));
    }
  });

  it("is a version 7, variant 10 UUID carrying its millisecond, text as the per-byte hex was", () => {
    for (const ms of [Date.now(), Date.now() - 86_400_000 * 40, 1_000]) {
      const id = uuidv7(ms);
      expect(isUuid(id)).toBe(true);
      expect(id[14]).toBe("7");
      expect("89ab").toContain(id[19]);
      // A time near the clock joins the isolate's sequence, which may stand a few ms later.
      if (Math.abs(ms - Date.now()) > 1_000) expect(timeOf(id)).toBe(ms);
      else expect(timeOf(id) - ms).toBeGreaterThanOrEqual(0);
      const bytes = uuidToBytes(id);
      const hex = toHex(bytes);
      expect(uuidFromBytes(bytes)).toBe(`${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`);
    }
    expect(uuidv7Floor(1_000)).toBe("00000000-03e8-7000-8000-000000000000");
  });

  it("never repeats and sorts in the order made, within a millisecond and across the pool's refills", () => {
    const now = Date.now();
    const ids = Array.from({ length: 5000 }, () => uuidv7(now));
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
    // Random bits differ between ids (not one pool slice used twice).
    const tails = new Set(ids.map((id) => id.slice(19)));
    expect(tails.size).toBe(ids.length);
  });
});
