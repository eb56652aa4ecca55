// Reading an incoming message's bytes with a bound: never more than `limit` bytes are held,
// however large the stream claims or turns out to be.
import { concatBytes } from "../bytes.ts";

export async function readBounded(stream: ReadableStream<Uint8Array>, limit: number): Promise<{ bytes: Uint8Array; truncated: boolean }> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { bytes: concatBytes(chunks, total), truncated: false };
      const room = limit - total;
      if (value.byteLength > room) {
        chunks.push(value.subarray(0, room));
        total += room;
        await reader.cancel().catch(() => {});
        return { bytes: concatBytes(chunks, total), truncated: true };
      }
      chunks.push(value);
      total += value.byteLength;
    }
  } finally {
    reader.releaseLock();
  }
}
