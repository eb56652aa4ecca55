// Calendar periods in a timezone (worker/metrics/periods.ts), pure: where hours, days, ISO
// weeks and months begin as UTC instants, across daylight-saving changes and the +05:30,
// +05:45 and half-hour-shift zones.
import { describe, expect, it } from "vitest";
import { isTimeZone, localToUtc, offsetAt, offsetSegments, periodIndex, periodStarts } from "../../worker/metrics/periods.ts";
import { spanFor, spanStart, SPANS } from "../../worker/metrics/rollup.ts";

const iso = (ts: number[] | null) => ts?.map((t) => new Date(t).toISOString());
const H = 3_600_000;

describe("timezones", () => {
  it("knows IANA names and refuses offsets and nonsense", () => {
    for (const tz of ["UTC", "America/New_York", "Asia/Kolkata", "Asia/Kathmandu", "Australia/Lord_Howe", "Etc/GMT+5"]) expect(isTimeZone(tz), tz).toBe(true);
    for (const tz of ["+05:30", "Mars/Olympus", "", "America/New York", "../etc/passwd", "a".repeat(80)]) expect(isTimeZone(tz), tz).toBe(false);
  });

  it("reads offsets, and wall-clock times back to instants (a repeated hour's first, a skipped one's after)", () => {
    expect(offsetAt("Asia/Kathmandu", Date.UTC(2026, 0, 1))).toBe(5.75 * H);
    expect(offsetAt("America/New_York", Date.UTC(2026, 6, 1))).toBe(-4 * H);
    expect(localToUtc("America/New_York", Date.UTC(2026, 10, 1, 1, 30))).toBe(Date.UTC(2026, 10, 1, 5, 30)); // EDT's 01:30
    expect(localToUtc("America/New_York", Date.UTC(2026, 2, 8, 2, 30))).toBe(Date.UTC(2026, 2, 8, 7, 30)); // no 02:30 that day
    expect(localToUtc("Asia/Kolkata", Date.UTC(2026, 0, 1))).toBe(Date.UTC(2025, 11, 31, 18, 30));
  });

  it("cuts a range where the offset changes, to the minute", () => {
    const segs = offsetSegments("Australia/Lord_Howe", Date.UTC(2026, 3, 1), Date.UTC(2026, 3, 10));
    expect(segs.map((s) => [new Date(s.from).toISOString(), s.offset / 60_000])).toEqual([
      ["2026-04-01T00:00:00.000Z", 660],
      ["2026-04-04T15:00:00.000Z", 630],
    ]);
  });
});

describe("period starts", () => {
  it("days of 23 and 25 hours and the hours around them in New York", () => {
    expect(iso(periodStarts("America/New_York", "daily", Date.UTC(2026, 2, 7, 5), Date.UTC(2026, 2, 10, 4)))).toEqual([
      "2026-03-07T05:00:00.000Z", "2026-03-08T05:00:00.000Z", "2026-03-09T04:00:00.000Z",
    ]);
    expect(iso(periodStarts("America/New_York", "hourly", Date.UTC(2026, 10, 1, 4), Date.UTC(2026, 10, 1, 8)))).toEqual([
      "2026-11-01T04:00:00.000Z", "2026-11-01T05:00:00.000Z", "2026-11-01T06:00:00.000Z", "2026-11-01T07:00:00.000Z",
    ]);
  });

  it("hours on :15 and :30 in Kathmandu and Kolkata; days at their midnights", () => {
    expect(iso(periodStarts("Asia/Kathmandu", "hourly", Date.UTC(2026, 0, 1, 0, 15), Date.UTC(2026, 0, 1, 2, 15)))).toEqual(["2026-01-01T00:15:00.000Z", "2026-01-01T01:15:00.000Z"]);
    expect(iso(periodStarts("Asia/Kolkata", "daily", Date.UTC(2026, 0, 1), Date.UTC(2026, 0, 2)))).toEqual(["2025-12-31T18:30:00.000Z", "2026-01-01T18:30:00.000Z"]);
  });

  it("ISO weeks from Monday and calendar months; the first period may begin before the range", () => {
    expect(iso(periodStarts("UTC", "weekly", Date.UTC(2026, 6, 8), Date.UTC(2026, 6, 21)))).toEqual(["2026-07-06T00:00:00.000Z", "2026-07-13T00:00:00.000Z", "2026-07-20T00:00:00.000Z"]);
    expect(iso(periodStarts("Europe/London", "monthly", Date.UTC(2026, 1, 15), Date.UTC(2026, 4, 1)))).toEqual([
      "2026-02-01T00:00:00.000Z", "2026-03-01T00:00:00.000Z", "2026-03-31T23:00:00.000Z", "2026-04-30T23:00:00.000Z",
    ]);
  });

  it("a Lord Howe day across its half-hour change is one day", () => {
    expect(iso(periodStarts("Australia/Lord_Howe", "daily", Date.UTC(2026, 3, 4, 13), Date.UTC(2026, 3, 5, 14)))).toEqual([
      "2026-04-04T13:00:00.000Z", "2026-04-05T13:30:00.000Z",
    ]);
  });

  it("stops at the limit instead of building a huge list, and finds a period by binary search", () => {
    expect(periodStarts("UTC", "hourly", 0, 10_001 * H, 10_000)).toBeNull();
    expect(periodStarts("UTC", "hourly", 0, 10_000 * H, 10_000)).toHaveLength(10_000);
    const starts = [10, 20, 30];
    expect([5, 10, 19, 20, 35].map((t) => periodIndex(starts, t))).toEqual([-1, 0, 0, 1, 2]);
  });
});

describe("the span a query's periods read", () => {
  const edgesOf = (tz: string, g: "hourly" | "daily", days: number) => {
    const from = Date.UTC(2026, 5, 1);
    return periodStarts(tz, g, from, from + days * 24 * H)!.map((t) => Math.floor(t / (H / 4))).slice(1);
  };
  it("reads UTC days, UTC hours, hours from :15 and :30, and quarter hours only where nothing coarser fits", () => {
    expect(spanFor([]).id).toBe(96);
    expect(spanFor(edgesOf("UTC", "daily", 30)).id).toBe(96);
    expect(spanFor(edgesOf("America/New_York", "daily", 30)).id).toBe(4);
    expect(spanFor(edgesOf("UTC", "hourly", 2)).id).toBe(4);
    expect(spanFor(edgesOf("Asia/Kathmandu", "hourly", 2)).id).toBe(401);
    expect(spanFor(edgesOf("Asia/Kathmandu", "daily", 30)).id).toBe(401);
    expect(spanFor(edgesOf("Asia/Kolkata", "hourly", 2)).id).toBe(402);
    expect(spanFor(edgesOf("America/St_Johns", "daily", 30)).id).toBe(402);
    // Lord Howe's daylight saving moves its midnights by 30 minutes: April 2026 holds both.
    const from = Date.UTC(2026, 3, 1);
    const lordHowe = periodStarts("Australia/Lord_Howe", "daily", from, from + 10 * 24 * H)!.map((t) => t / (H / 4)).slice(1);
    expect(spanFor(lordHowe).id).toBe(1);
  });
  it("puts each span's rows on its grid", () => {
    const b = Math.floor(Date.UTC(2026, 5, 1, 10, 50) / (H / 4)); // 10:45
    expect(SPANS.map((s) => [s.id, (spanStart(s, b) * H) / 4 - Date.UTC(2026, 5, 1)])).toEqual([
      [1, 10.75 * H], [4, 10 * H], [96, 0], [401, 10.25 * H], [402, 10.5 * H],
    ]);
  });
});
