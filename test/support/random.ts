// A seeded pseudo-random source for fuzzing tests: the same cases on every run.

/** xorshift32: numbers in [0, 1), the same sequence for the same seed. */
export function random(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 0x1_0000_0000;
  };
}
