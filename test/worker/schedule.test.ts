// `scheduled_at` (contract 4.1), parsed inside workerd: chrono-node runs here too.
import { describe, expect, it } from "vitest";
import { parseScheduledAt } from "../../worker/sending/schedule.ts";

// A Wednesday afternoon, UTC.
const now = new Date("2026-11-04T15:30:00Z");

describe("parseScheduledAt", () => {
  it.each([
    ["2026-11-05T09:00:00Z", "2026-11-05T09:00:00.000Z"],
    ["2026-11-05T09:00:00.250Z", "2026-11-05T09:00:00.250Z"],
    ["2026-11-05t09:00:00z", "2026-11-05T09:00:00.000Z"],
    ["2026-11-05T09:00:00+02:00", "2026-11-05T07:00:00.000Z"],
    ["2026-11-05T09:00:00-0530", "2026-11-05T14:30:00.000Z"],
    ["2026-11-05T09:00+01", "2026-11-05T08:00:00.000Z"],
    ["2026-11-05T09:00:00", "2026-11-05T09:00:00.000Z"], // no offset: UTC
    ["2026-11-05 09:00", "2026-11-05T09:00:00.000Z"],
    ["2026-11-05", "2026-11-05T00:00:00.000Z"], // date only: midnight UTC
    ["  2026-11-05T09:00:00Z \n", "2026-11-05T09:00:00.000Z"],
  ])("reads ISO 8601 %j as %s", (input, expected) => {
    const result = parseScheduledAt(input, now);
    expect(result).toEqual({ ok: true, value: new Date(expected) });
  });

  it.each([
    ["in 1 min", "2026-11-04T15:31:00.000Z"],
    ["in 5 minutes", "2026-11-04T15:35:00.000Z"],
    ["in 2 hours", "2026-11-04T17:30:00.000Z"],
    ["In An Hour", "2026-11-04T16:30:00.000Z"],
    ["tomorrow at 9am", "2026-11-05T09:00:00.000Z"],
    ["next monday 10:00", "2026-11-09T10:00:00.000Z"],
    ["friday 3pm UTC", "2026-11-06T15:00:00.000Z"],
    ["friday 3pm", "2026-11-06T15:00:00.000Z"], // no zone named: UTC
    ["tomorrow 9am PST", "2026-11-05T17:00:00.000Z"],
    ["in 30 days", "2026-12-04T15:30:00.000Z"],
    ["now", "2026-11-04T15:30:00.000Z"],
  ])("reads natural language %j relative to now in UTC as %s", (input, expected) => {
    const result = parseScheduledAt(input, now);
    expect(result).toEqual({ ok: true, value: new Date(expected) });
  });

  it("treats up to 60 seconds in the past as clock skew and answers now", () => {
    expect(parseScheduledAt("2026-11-04T15:29:01Z", now)).toEqual({ ok: true, value: now });
    expect(parseScheduledAt("2026-11-04T15:29:00Z", now)).toEqual({ ok: true, value: now });
  });

  it("accepts exactly 30 days ahead", () => {
    expect(parseScheduledAt("2026-12-04T15:30:00Z", now)).toEqual({ ok: true, value: new Date("2026-12-04T15:30:00Z") });
  });

  it.each([
    ["2026-11-04T15:28:59Z", "`scheduled_at` must not be in the past."],
    ["2026-11-04", "`scheduled_at` must not be in the past."],
    ["yesterday", "`scheduled_at` must not be in the past."],
    ["2026-12-04T15:30:01Z", "`scheduled_at` must be at most 30 days in the future."],
    ["in 31 days", "`scheduled_at` must be at most 30 days in the future."],
    ["2027-01-01T00:00:00Z", "`scheduled_at` must be at most 30 days in the future."],
    ["", "`scheduled_at` must not be empty."],
    ["   ", "`scheduled_at` must not be empty."],
  ])("refuses %j", (input, message) => {
    expect(parseScheduledAt(input, now)).toEqual({ ok: false, message });
  });

  it.each([
    "2026-02-30T10:00:00Z",
    "2026-13-01T10:00:00Z",
    "2026-11-05T24:00:00Z",
    "2026-11-05T10:60:00Z",
    "2026-11-05T10:00:00+25:00",
    "2026-11-05T10:00:00 UTC",
    "2026-11-05Tnoon",
  ])("refuses the malformed ISO date %j", (input) => {
    const result = parseScheduledAt(input, now);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.message).toMatch(/^`scheduled_at` is not a valid ISO 8601 date/);
  });

  it.each(["hello", "soon", "asap", "12345"])("refuses the unparseable %j", (input) => {
    const result = parseScheduledAt(input, now);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.message).toMatch(/^`scheduled_at` could not be understood/);
  });

  it.each(["whenever tomorrow maybe", "tomorrow at 9am please", "tomorrow or friday", "send it in 5 minutes"])(
    "refuses the partly understood %j",
    (input) => {
      const result = parseScheduledAt(input, now);
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.message).toMatch(/^`scheduled_at` was only partly understood/);
    },
  );

  it("refuses a range of time", () => {
    const result = parseScheduledAt("tomorrow from 9am to 10am", now);
    expect(result).toEqual({ ok: false, message: "`scheduled_at` describes a range of time: give a single date and time." });
  });

  it("refuses overly long input before parsing it", () => {
    const result = parseScheduledAt("tomorrow ".repeat(50), now);
    expect(result).toEqual({ ok: false, message: "`scheduled_at` must be at most 200 characters." });
  });
});
