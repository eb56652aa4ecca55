// SQL LIKE patterns from what a person typed: %, _ and \ match only themselves (the queries say
// ESCAPE '\'), so a search for "50%" finds "50%", not everything starting "50".
export const escapeLike = (s: string) => s.replace(/[\\%_]/g, (ch) => `\\${ch}`);

/** A pattern matching any text that holds `s`. */
export const containsPattern = (s: string) => `%${escapeLike(s)}%`;
