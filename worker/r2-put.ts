// Streamed writes to R2. A put of a stream must know its length (FixedLengthStream); one of
// pieces already in memory goes the same way, so they are never joined into one buffer.

/** Writes `chunks` (`length` bytes in all) to R2 under `key` as one put, a piece at a time. */
export async function putFixed(bucket: R2Bucket, key: string, chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>, length: number): Promise<number> {
  const fixed = new FixedLengthStream(length);
  const put = bucket.put(key, fixed.readable);
  const writer = fixed.writable.getWriter();
  try {
    // Pieces that break off (a fetched body past its declared length, or cut short) throw before
    // the close, and the put is aborted: nothing is stored.
    for await (const chunk of chunks) await writer.write(chunk);
    await writer.close();
  } catch (err) {
    await writer.abort(err).catch(() => {});
    await put.catch(() => {});
    throw err;
  }
  await put;
  return length;
}
