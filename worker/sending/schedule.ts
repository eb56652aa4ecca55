// `scheduled_at` (contract 4.1): ISO 8601, or natural language read by chrono-node with
// `now` as the reference in UTC; at most 30 days ahead, never in the past.
import { casual } from "chrono-node/en";
import type { Result } from "../result.ts";

/** How far ahead a send may be scheduled. */
export const MAX_SCHEDULE_AHEAD_MS = 30 * 24 * 60 * 60 * 1000;
/** A time this little in the past is clock skew between client and server: it means "now". */
export const SCHEDULE_CLOCK_SKEW_MS = 60 * 1000;
/** Longer input is refused before chrono reads it (the OpenAPI document states it too). */
export const MAX_SCHEDULED_AT_LENGTH = 200;

const ISO_8601 =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(Z|[+-]\d{2}(?::?\d{2})?)?)?$/i;

/** Reads `scheduled_at`; the result is an absolute instant between `now` and 30 days after it. */
export function parseScheduledAt(input: string, now: Date): Result<Date> {
  const text = input.trim();
  if (text === "") return { ok: false, message: "`scheduled_at` must not be empty." };
  if (text.length > MAX_SCHEDULED_AT_LENGTH) {
    return { ok: false, message: `\`scheduled_at\` must be at most ${MAX_SCHEDULED_AT_LENGTH} characters.` };
  }
  const parsed = /^\d{4}-\d{2}-\d{2}/.test(text) ? parseIso(text) : parseNatural(text, now);
  if (!parsed.ok) return parsed;
  const ahead = parsed.value.getTime() - now.getTime();
  if (ahead < -SCHEDULE_CLOCK_SKEW_MS) {
    return { ok: false, message: "`scheduled_at` must not be in the past." };
  }
  if (ahead > MAX_SCHEDULE_AHEAD_MS) {
    return { ok: false, message: "`scheduled_at` must be at most 30 days in the future." };
  }
  return { ok: true, value: ahead < 0 ? new Date(now.getTime()) : parsed.value };
}

/** Strict ISO 8601 (extended format); a missing offset, or a date alone, is read as UTC. */
function parseIso(text: string): Result<Date> {
  const invalid: Result<Date> = {
    ok: false,
    message: "`scheduled_at` is not a valid ISO 8601 date and time, like 2026-11-05T09:00:00Z.",
  };
  const match = ISO_8601.exec(text);
  if (!match) return invalid;
  const [, y, mo, d, h = "0", mi = "0", s = "0", fraction = "", offset = "Z"] = match;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const hour = Number(h);
  const minute = Number(mi);
  const second = Number(s);
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth || hour > 23 || minute > 59 || second > 59) {
    return invalid;
  }
  let offsetMinutes = 0;
  if (offset.toUpperCase() !== "Z") {
    const digits = offset.slice(1).replace(":", "");
    const offsetHours = Number(digits.slice(0, 2));
    const offsetMins = Number(digits.slice(2) || "0");
    if (offsetHours > 23 || offsetMins > 59) return invalid;
    offsetMinutes = (offset.startsWith("-") ? -1 : 1) * (offsetHours * 60 + offsetMins);
  }
  const millis = Number(fraction.padEnd(3, "0").slice(0, 3));
  const utc = Date.UTC(year, month - 1, day, hour, minute, second, millis) - offsetMinutes * 60_000;
  return { ok: true, value: new Date(utc) };
}

function parseNatural(text: string, now: Date): Result<Date> {
  const results = casual.parse(text, { instant: now, timezone: "UTC" }, { forwardDate: true });
  const [first] = results;
  if (first === undefined) {
    return {
      ok: false,
      message:
        '`scheduled_at` could not be understood: use ISO 8601 (like 2026-11-05T09:00:00Z) or a phrase like "in 5 minutes" or "tomorrow at 9am".',
    };
  }
  if (results.length > 1 || first.index !== 0 || first.text.length !== text.length) {
    return {
      ok: false,
      message: `\`scheduled_at\` was only partly understood (as "${first.text}"): give a date and time and nothing else, like "tomorrow at 9am", or use ISO 8601.`,
    };
  }
  if (first.end !== undefined && first.end !== null) {
    return { ok: false, message: "`scheduled_at` describes a range of time: give a single date and time." };
  }
  return { ok: true, value: first.start.date() };
}
