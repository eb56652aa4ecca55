// The bytes of a patterned /sized body (test/support/https-files.ts), shared with the workerd
// tests that check them.

/** The byte at `offset`: every value, no period a chunk or a base64 line would align with. */
export function sizedPattern(offset: number): number {
  return (offset * 131 + (offset >>> 13)) & 255;
}
