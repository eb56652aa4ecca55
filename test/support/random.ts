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

/** Seeded choices for a fuzzing test. `reseed(name)` starts the sequence again from the base
 * seed and a case's name, so each case draws the same values whether it runs alone or not. */
export function seeded(base: number) {
  let rnd = random(base);
  const next = () => rnd();
  return {
    next,
    reseed(name: string): void {
      let h = base;
      for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193) >>> 0;
      rnd = random(h);
    },
    pick<T>(xs: readonly T[]): T {
      return xs[Math.floor(next() * xs.length)]!;
    },
    /** `n` of `xs`, in a shuffled order (a Fisher-Yates shuffle of a copy). */
    sample<T>(xs: readonly T[], n: number): T[] {
      const pool = [...xs];
      for (let i = pool.length - 1; i > 0; i--) {
        const j = Math.floor(next() * (i + 1));
        [pool[i], pool[j]] = [pool[j]!, pool[i]!];
      }
      return pool.slice(0, n);
    },
    /** A well-formed id (UUIDv4) that names nothing. */
    unknownId(): string {
      const hex = Array.from({ length: 32 }, () => Math.floor(next() * 16).toString(16));
      hex[12] = "4";
      hex[16] = "89ab"[Math.floor(next() * 4)]!;
      const h = hex.join("");
      return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
    },
  };
}
