// The query of GET /emails/metrics (Resend's OpenAPI, emails/metrics), read from the URL's
// parameters: every bad parameter is a 422 validation_error that names it. Pure: the clock is
// a parameter.
import { ApiError, echoed } from "../errors.ts";
import { isUuid } from "../ids.ts";
import { BUCKET_MS } from "./rollup.ts";
import { isTimeZone, localToUtc, offsetAt, type Granularity } from "./periods.ts";

export const COUNT_METRICS = [
  "received",
  "delivered",
  "complained",
  "suppressed",
  "bounced",
  "bounced_transient",
  "bounced_permanent",
  "bounced_undetermined",
  "opened",
  "clicked",
  "unsubscribed",
  "delivery_delayed",
  "failed",
  "sent",
  "unique_opened",
  "unique_clicked",
] as const;
export const RATE_METRICS = ["delivery_rate", "open_rate", "click_rate", "bounce_rate", "complaint_rate", "unsubscribe_rate"] as const;
/** In the OpenAPI document's order: the default answer lists them so. */
export const METRICS = [...COUNT_METRICS, ...RATE_METRICS] as const;
export const DIMENSIONS = ["period", "domain", "email", "broadcast"] as const;
export const GRANULARITIES = ["hourly", "daily", "weekly", "monthly"] as const;

export type Metric = (typeof METRICS)[number];
export type Dimension = (typeof DIMENSIONS)[number];

/** The most periods a range may have, and ids a filter may list (the OpenAPI's limits). */
export const MAX_PERIODS = 10_000;
export const MAX_FILTER_IDS = 100;

export interface MetricsQuery {
  /** [start, end) in UTC milliseconds, on 15-minute bucket edges. */
  start: number;
  end: number;
  timezone: string;
  granularity: Granularity;
  metrics: Metric[];
  dimensions: Dimension[];
  domainIds: string[];
  emailIds: string[];
  broadcastIds: string[];
}

const DAY = 86_400_000;

function fail(message: string): never {
  throw new ApiError("validation_error", message);
}

function single(params: URLSearchParams, name: string): string | undefined {
  const all = params.getAll(name);
  if (all.length > 1) fail(`\`${name}\` must be given once.`);
  return all[0];
}

/** A list parameter: comma-separated, repeated, or both; each item once, in the order given. */
function list(params: URLSearchParams, name: string): string[] | undefined {
  const all = params.getAll(name);
  if (all.length === 0) return undefined;
  const items: string[] = [];
  for (const value of all) {
    for (const raw of value.split(",")) {
      const item = raw.trim();
      if (item === "") fail(`\`${name}\` has an empty item; list values separated by commas.`);
      if (!items.includes(item)) items.push(item);
    }
  }
  return items;
}

function enumList<T extends string>(params: URLSearchParams, name: string, allowed: readonly T[]): T[] | undefined {
  const items = list(params, name);
  if (!items) return undefined;
  for (const item of items) {
    if (!(allowed as readonly string[]).includes(item)) fail(`\`${name}\` has an unknown value \`${echoed(item)}\`; use any of ${allowed.map((a) => `\`${a}\``).join(", ")}.`);
  }
  return items as T[];
}

function idList(params: URLSearchParams, name: string): string[] {
  const items = list(params, name) ?? [];
  if (items.length > MAX_FILTER_IDS) fail(`\`${name}\` may list at most ${MAX_FILTER_IDS} ids; it lists ${items.length}.`);
  for (const item of items) if (!isUuid(item)) fail(`\`${name}\` must list UUIDs; \`${echoed(item)}\` is not one.`);
  return items.map((i) => i.toLowerCase());
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATETIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|z|[+-]\d{2}:?\d{2})?$/;

interface ParsedDate {
  /** The instant, or for a date the start of that day in the timezone. */
  at: number;
  dateOnly: boolean;
  /** For a date: the local midnight (local milliseconds). */
  local?: number;
}

function validCalendar(y: number, m: number, d: number, h = 0, min = 0, s = 0): boolean {
  const t = new Date(Date.UTC(y, m - 1, d, h, min, s));
  return t.getUTCFullYear() === y && t.getUTCMonth() === m - 1 && t.getUTCDate() === d && t.getUTCHours() === h && t.getUTCMinutes() === min && t.getUTCSeconds() === s && y >= 1970;
}

/** An ISO 8601 date (the day's start in `tz`) or datetime (with Z or an offset: that instant;
 * without one: a wall-clock time in `tz`). */
function parseDate(name: string, raw: string, tz: string): ParsedDate {
  // An unencoded "+05:30" in a URL arrives as " 05:30" (a form-encoded space): read it back.
  const value = raw.replace(/^(\S+T\S+) (\d{2}:?\d{2})$/, "$1+$2");
  const bad = () => fail(`\`${name}\` must be an ISO 8601 date (2026-07-01) or datetime (2026-07-01T00:00:00Z); \`${echoed(value)}\` is not one.`);
  const m = DATE.exec(value);
  if (m) {
    const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
    if (!validCalendar(y, mo, d)) bad();
    const local = Date.UTC(y, mo - 1, d);
    return { at: localToUtc(tz, local), dateOnly: true, local };
  }
  const dt = DATETIME.exec(value);
  if (!dt) return bad();
  const [y, mo, d, h, mi, s] = [1, 2, 3, 4, 5, 6].map((i) => Number(dt[i] ?? 0)) as [number, number, number, number, number, number];
  if (!validCalendar(y, mo, d, h, mi, s)) bad();
  const ms = dt[7] ? Number(dt[7].slice(0, 3).padEnd(3, "0")) : 0;
  const local = Date.UTC(y, mo - 1, d, h, mi, s, ms);
  const zone = dt[8];
  if (!zone) return { at: localToUtc(tz, local), dateOnly: false };
  if (zone === "Z" || zone === "z") return { at: local, dateOnly: false };
  const sign = zone[0] === "-" ? -1 : 1;
  const digits = zone.slice(1).replace(":", "");
  const oh = Number(digits.slice(0, 2));
  const om = Number(digits.slice(2));
  if (oh > 23 || om > 59) bad();
  return { at: local - sign * (oh * 60 + om) * 60_000, dateOnly: false };
}

/** Reads and checks the query. `now` bounds the range: a later end_date is clamped to it. */
export function parseMetricsQuery(params: URLSearchParams, now: number): MetricsQuery {
  const timezone = single(params, "timezone") ?? "UTC";
  if (!isTimeZone(timezone)) fail(`\`timezone\` must be an IANA timezone such as \`America/New_York\` or \`UTC\`; \`${echoed(timezone)}\` is not one.`);

  const granularity = (single(params, "granularity") ?? "daily") as Granularity;
  if (!(GRANULARITIES as readonly string[]).includes(granularity)) {
    fail(`\`granularity\` must be one of ${GRANULARITIES.map((g) => `\`${g}\``).join(", ")}; \`${echoed(granularity)}\` is not one.`);
  }
  const metrics = enumList(params, "metrics", METRICS) ?? [...METRICS];
  const dimensions = enumList(params, "dimensions", DIMENSIONS) ?? [];
  const domainIds = idList(params, "domain_id");
  const emailIds = idList(params, "email_id");
  const broadcastIds = idList(params, "broadcast_id");

  if (dimensions.includes("email") && dimensions.includes("broadcast")) fail("`dimensions` cannot combine `email` and `broadcast`.");
  if (emailIds.length > 0 && broadcastIds.length > 0) fail("`email_id` cannot be combined with `broadcast_id`.");
  if (emailIds.length > 0 && dimensions.includes("broadcast")) fail("`email_id` cannot be combined with the `broadcast` dimension.");
  if (broadcastIds.length > 0 && dimensions.includes("email")) fail("`broadcast_id` cannot be combined with the `email` dimension.");
  // Per-email counts come from each email's own events, so the emails must be named.
  if (dimensions.includes("email") && emailIds.length === 0) {
    fail("`dimensions` includes `email`, which needs `email_id` (the emails to break down, up to 100).");
  }

  const startRaw = single(params, "start_date");
  const endRaw = single(params, "end_date");
  const endParsed = endRaw === undefined ? undefined : parseDate("end_date", endRaw, timezone);
  // A date as end_date means the whole of that day.
  let end = endParsed === undefined ? now : endParsed.dateOnly ? localToUtc(timezone, endParsed.local! + DAY) : endParsed.at;
  end = Math.min(end, now);
  let start: number;
  if (startRaw !== undefined) start = parseDate("start_date", startRaw, timezone).at;
  else if (endParsed?.dateOnly) start = localToUtc(timezone, endParsed.local! - 6 * DAY);
  // Six days before end_date, on the wall clock (a daylight-saving change inside is not a shift).
  else start = localToUtc(timezone, end + offsetAt(timezone, end) - 6 * DAY);
  if (start > end) fail(`\`start_date\` must be on or before \`end_date\` (${new Date(end).toISOString()}${endRaw === undefined || end === now ? ", now" : ""}).`);

  // Counts are kept per 15 minutes: the range widens to whole buckets.
  start = Math.floor(start / BUCKET_MS) * BUCKET_MS;
  end = Math.ceil(end / BUCKET_MS) * BUCKET_MS;
  return { start, end, timezone, granularity, metrics, dimensions, domainIds, emailIds, broadcastIds };
}
