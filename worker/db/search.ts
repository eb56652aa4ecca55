// Substring search over what a person typed, for the dashboard's search boxes. Not LIKE: D1
// refuses a LIKE or GLOB pattern over 50 bytes ("pattern too complex"), and a pattern has to
// escape %, _ and \. instr() takes the text as it is, at any length. Columns stored in a
// canonical form (addresses, lowercased when written) are searched for the term in that form;
// others with lower() on both sides, LIKE's own case rule (SQLite folds ASCII letters only).
// The test runs on each row the index walk meets, as LIKE's did, so no plan changes.
import { sql, type SQL } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";

/** The longest search term the dashboard uses; the rest is dropped, and the page says so. */
export const MAX_SEARCH_CHARS = 200;

type Text = SQLiteColumn | SQL;

/** True when `col` holds `needle` exactly (null never matches): for a column kept in a
 * canonical form, with the term put in the same form. */
export const contains = (col: Text, needle: string): SQL => sql`instr(${col}, ${needle}) > 0`;

/** True when `col` holds `needle`, ASCII letters in any case (null never matches). */
export const holds = (col: Text, needle: string): SQL => sql`instr(lower(${col}), lower(${needle})) > 0`;

/** True when `col` ends with `tail`, ASCII letters in any case. substr() with a negative
 * start counts characters from the end, as length() counts them. */
export const endsWith = (col: Text, tail: string): SQL => sql`substr(lower(${col}), -length(${tail})) = lower(${tail})`;

/** A search box's value: trimmed, at most MAX_SEARCH_CHARS characters (whole code points), and
 * whether it was cut, for the page to say. */
export function searchTerm(raw: string | undefined): { q: string | undefined; cut: boolean } {
  const trimmed = raw?.trim() ?? "";
  const chars = [...trimmed];
  const q = chars.slice(0, MAX_SEARCH_CHARS).join("").trim();
  return { q: q || undefined, cut: chars.length > MAX_SEARCH_CHARS };
}

/** What a page says above its results when the search was cut. */
export const CUT_NOTE = `Searches use at most ${MAX_SEARCH_CHARS} characters: only the first ${MAX_SEARCH_CHARS} of yours were searched for.`;
