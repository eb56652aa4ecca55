// Calendar periods in a timezone: where each hour, day, ISO week (Monday) or month of an IANA
// timezone begins, as UTC instants, daylight-saving changes and +05:30/+05:45 offsets
// included. The UTC offset is piecewise constant, so it is asked of Intl only at a few samples
// (one a day, and a binary search where two samples differ); the periods themselves are then
// plain arithmetic in "local milliseconds" (the local wall-clock time read as if it were UTC).

export type Granularity = "hourly" | "daily" | "weekly" | "monthly";

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone: tz,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    formatters.set(tz, f);
  }
  return f;
}

/** An IANA timezone name Intl knows ("UTC", "America/New_York", "Asia/Kathmandu"). Offsets
 * such as "+05:30" are not names: the IANA name says when daylight saving changes them. */
export function isTimeZone(tz: string): boolean {
  if (!/^[A-Za-z][A-Za-z0-9_+\-]*(\/[A-Za-z0-9_+\-]+)*$/.test(tz) || tz.length > 64) return false;
  try {
    formatter(tz);
    return true;
  } catch {
    return false;
  }
}

function isUtc(tz: string): boolean {
  return tz === "UTC" || tz === "Etc/UTC" || tz === "Etc/GMT" || tz === "GMT";
}

/** Milliseconds to add to a UTC instant for the local wall-clock time at that instant. */
export function offsetAt(tz: string, t: number): number {
  if (isUtc(tz)) return 0;
  const whole = Math.floor(t / 1000) * 1000;
  const p: Record<string, number> = {};
  for (const part of formatter(tz).formatToParts(whole)) if (part.type !== "literal") p[part.type] = Number(part.value);
  return Date.UTC(p.year!, p.month! - 1, p.day!, p.hour!, p.minute!, p.second!) - whole;
}

/** The UTC instant of a local wall-clock time. A time that exists twice (daylight saving
 * ends) is its first; one that does not exist (skipped) is read with the offset before the gap,
 * which lands after it, as Temporal's "compatible" choice does. */
export function localToUtc(tz: string, local: number): number {
  const before = offsetAt(tz, local - DAY);
  const after = offsetAt(tz, local + DAY);
  const tBefore = local - before;
  const tAfter = local - after;
  const validBefore = offsetAt(tz, tBefore) === before;
  const validAfter = offsetAt(tz, tAfter) === after;
  if (validBefore && validAfter) return Math.min(tBefore, tAfter);
  if (validBefore) return tBefore;
  if (validAfter) return tAfter;
  return tBefore;
}

export interface Segment {
  from: number;
  to: number;
  offset: number;
}

/** [from, to) cut where the offset changes. Offsets change at most a few times a year, never
 * twice within a day, so one sample a day finds every change (to the minute). */
export function offsetSegments(tz: string, from: number, to: number): Segment[] {
  if (isUtc(tz) || to <= from) return [{ from, to: Math.max(from, to), offset: 0 }];
  // Far-apart ranges sample more sparsely, so no request costs more than ~40,000 samples.
  const step = Math.max(DAY, Math.ceil((to - from) / 40_000 / DAY) * DAY);
  const segments: Segment[] = [];
  let start = from;
  let offset = offsetAt(tz, from);
  for (let t = from; t < to; ) {
    const next = Math.min(t + step, to);
    const o = next < to ? offsetAt(tz, next) : offsetAt(tz, to - 1);
    if (o !== offset) {
      let lo = t;
      let hi = next < to ? next : to - 1;
      while (hi - lo > MINUTE) {
        const mid = lo + Math.floor((hi - lo) / 2 / MINUTE) * MINUTE || lo + MINUTE;
        if (offsetAt(tz, mid) === offset) lo = mid;
        else hi = mid;
      }
      const change = Math.ceil(hi / MINUTE) * MINUTE;
      segments.push({ from: start, to: change, offset });
      start = change;
      offset = offsetAt(tz, change);
    }
    t = next;
  }
  segments.push({ from: start, to, offset });
  return segments;
}

function floorLocal(local: number, g: Granularity): number {
  switch (g) {
    case "hourly":
      return Math.floor(local / HOUR) * HOUR;
    case "daily":
      return Math.floor(local / DAY) * DAY;
    case "weekly": {
      const day = Math.floor(local / DAY);
      // 1970-01-01 was a Thursday: (day + 3) % 7 is days since Monday.
      return (day - (((day + 3) % 7) + 7) % 7) * DAY;
    }
    case "monthly": {
      const d = new Date(local);
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
    }
  }
}

function nextLocal(local: number, g: Granularity): number {
  switch (g) {
    case "hourly":
      return local + HOUR;
    case "daily":
      return local + DAY;
    case "weekly":
      return local + 7 * DAY;
    case "monthly": {
      const d = new Date(local);
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
    }
  }
}

/** How far before a range its first period may begin. */
const REACH: Record<Granularity, number> = { hourly: DAY, daily: 2 * DAY, weekly: 8 * DAY, monthly: 32 * DAY };

/**
 * The UTC starts of every period that overlaps [from, to), sorted; the first may begin before
 * `from`. A repeated hour (daylight saving ends) is two hourly periods; a day stays one day of
 * 23 or 25 hours. Null when there would be more than `limit`.
 */
export function periodStarts(tz: string, g: Granularity, from: number, to: number, limit = 10_000): number[] | null {
  if (to <= from) return [];
  const segments = offsetSegments(tz, from - REACH[g], to);
  // The first instant whose local time is at or after `local`, seen from segment i back.
  const startOf = (local: number, i: number): number => {
    for (let j = i; j >= 0; j--) {
      const s = segments[j]!;
      const t = local - s.offset;
      if (t >= s.to) return s.to;
      if (t >= s.from) return t;
    }
    return local - segments[0]!.offset;
  };
  const starts = new Set<number>();
  for (const [i, s] of segments.entries()) {
    for (let local = floorLocal(s.from + s.offset, g); ; local = nextLocal(local, g)) {
      const t = startOf(local, i);
      if (t >= s.to) break;
      starts.add(t);
      if (starts.size > limit + 64) return null;
    }
  }
  const sorted = [...starts].sort((a, b) => a - b);
  const out: number[] = [];
  for (let k = 0; k < sorted.length; k++) {
    const next = sorted[k + 1];
    if (sorted[k]! < to && (next === undefined || next > from)) out.push(sorted[k]!);
  }
  return out.length > limit ? null : out;
}

/** The index of the period `t` falls in: the last start at or before it (-1: before all). */
export function periodIndex(starts: readonly number[], t: number): number {
  let lo = 0;
  let hi = starts.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (starts[mid]! <= t) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}
