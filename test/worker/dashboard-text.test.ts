// What the dashboard writes for people instead of raw data: an email event as a sentence (the
// email's timeline) and a User-Agent as "Chrome 131 on Linux" (sessions, opens and clicks).
// Pure functions, run inside workerd where the pages run; the event data is the shape each
// recorder stores (delivery/outcome.ts, inbound/reports.ts, tracking/record.ts).
import { describe, expect, it } from "vitest";
import { describeEmailEvent } from "../../worker/dashboard/email-events.ts";
import { healthSummary } from "../../worker/dashboard/metrics.tsx";
import { userAgentSummary } from "../../worker/dashboard/user-agent.ts";

const UA = {
  headless: "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36",
  chromeWindows: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
  edge: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.2903.70",
  safariMac: "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15",
  safariIphone: "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1",
  chromeIpad: "Mozilla/5.0 (iPad; CPU OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1",
  chromeAndroid: "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
  firefoxLinux: "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
  firefoxMac: "Mozilla/5.0 (Macintosh; Intel Mac OS X 10.15; rv:132.0) Gecko/20100101 Firefox/132.0",
  opera: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 OPR/115.0.0.0",
  samsung: "Mozilla/5.0 (Linux; Android 13; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/23.0 Chrome/115.0.0.0 Mobile Safari/537.36",
  chromeOs: "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
  googlebot: "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
};

describe("a User-Agent as a person names it", () => {
  it.each([
    [UA.headless, "Chrome 131 (headless) on Linux"],
    [UA.chromeWindows, "Chrome 131 on Windows"],
    [UA.edge, "Microsoft Edge 131 on Windows"],
    [UA.safariMac, "Safari 17 on macOS"],
    [UA.safariIphone, "Safari 17 on iOS"],
    [UA.chromeIpad, "Chrome 131 on iOS (tablet)"],
    [UA.chromeAndroid, "Chrome 131 on Android"],
    [UA.firefoxLinux, "Firefox 132 on Linux"],
    [UA.firefoxMac, "Firefox 132 on macOS"],
    [UA.opera, "Opera 115 on Windows"],
    [UA.samsung, "Samsung Internet for Android 23 on Android"],
    [UA.chromeOs, "Chrome 131 on Chrome OS"],
    [UA.googlebot, "Googlebot 2"],
  ])("%s", (ua, expected) => {
    expect(userAgentSummary(ua)).toBe(expected);
  });

  it("names a client that is not a browser by its first word, and an empty one as unknown", () => {
    expect(userAgentSummary("curl/8.5.0")).toBe("curl/8.5.0");
    // bowser's fallback reads a "name/version" it does not know as a client and its version.
    expect(userAgentSummary("python-requests/2.32.3 CPython/3.12")).toBe("python-requests 2");
    expect(userAgentSummary(`x${"y".repeat(200)}`)).toHaveLength(40);
    for (const nothing of ["", "   ", null, undefined]) expect(userAgentSummary(nothing)).toBe("Unknown browser");
  });
});

describe("an email event as a sentence", () => {
  it("says who a bounce was for, the server's words and the kind, without a doubled period", () => {
    const message = "550 5.1.1 The email account that you tried to reach does not exist (simulated).";
    const data = { recipients: ["bounced@resend.dev"], bounce: { type: "Permanent", subType: "NoEmail", message, diagnosticCode: [`smtp; ${message}`] } };
    expect(describeEmailEvent("bounced", data)).toBe(
      "Bounced for bounced@resend.dev: 550 5.1.1 The email account that you tried to reach does not exist (simulated) (Permanent, NoEmail).",
    );
    // A report's bounce (inbound/reports.ts) with the general subtype, and only a diagnostic code.
    expect(describeEmailEvent("bounced", { recipients: ["a@x.example"], status: "5.2.2", source: "report", bounce: { type: "Transient", subType: "General", message: "", diagnosticCode: ["smtp; 552 5.2.2 Mailbox full"] } }))
      .toBe("Bounced for a@x.example: smtp; 552 5.2.2 Mailbox full (Transient) (from a delivery report).");
  });

  it("reads every event tern records", () => {
    const r = { recipients: ["a@x.example", "b@x.example"] };
    expect(describeEmailEvent("queued", r)).toBe("Accepted for delivery to a@x.example, b@x.example.");
    expect(describeEmailEvent("scheduled", { ...r, scheduled_at: "2026-12-01T09:30:00.000Z" })).toBe("Scheduled for 2026-12-01 09:30 UTC to a@x.example, b@x.example.");
    expect(describeEmailEvent("scheduled", { scheduled_at: "2026-12-02T08:00:00.000Z" })).toBe("Scheduled for 2026-12-02 08:00 UTC.");
    expect(describeEmailEvent("canceled", {})).toBe("Canceled before it was sent.");
    expect(describeEmailEvent("sent", r)).toBe("Handed to the receiving mail server for a@x.example, b@x.example.");
    expect(describeEmailEvent("delivered", { recipients: ["a@x.example"] })).toBe("Delivered to a@x.example.");
    expect(describeEmailEvent("delivery_delayed", { recipients: ["a@x.example"], message: "451 4.7.1 Try again later", diagnosticCode: ["smtp; 451 4.7.1 Try again later"] }))
      .toBe("Delayed for a@x.example: 451 4.7.1 Try again later. tern tries again later.");
    expect(describeEmailEvent("complained", { recipients: ["a@x.example"], complaint: { feedbackType: "abuse" } })).toBe("Marked as spam by a@x.example.");
    expect(describeEmailEvent("complained", { recipients: ["a@x.example"], source: "report", complaint: { feedbackType: "fraud" } })).toBe("Marked as spam by a@x.example (fraud report) (from a delivery report).");
    expect(describeEmailEvent("opened", { open: { ipAddress: "203.0.113.9", timestamp: "2026-11-25T10:00:00.000Z", userAgent: UA.safariIphone } }))
      .toBe("Opened in Safari 17 on iOS from 203.0.113.9.");
    expect(describeEmailEvent("clicked", { click: { ipAddress: "203.0.113.9", link: "https://acme.example/order/1042", timestamp: "2026-11-25T10:00:00.000Z", userAgent: UA.chromeWindows } }))
      .toBe("Clicked https://acme.example/order/1042 in Chrome 131 on Windows from 203.0.113.9.");
    expect(describeEmailEvent("failed", { recipients: ["a@x.example"], failed: { reason: "Delivery was retried 3 times and did not succeed: 421 busy." } }))
      .toBe("Not delivered to a@x.example: Delivery was retried 3 times and did not succeed: 421 busy.");
    expect(describeEmailEvent("suppressed", { recipients: ["a@x.example"], message: "The address is on the account's suppression list; tern did not send to it." }))
      .toBe("Not sent to a@x.example: the address is on the account's suppression list.");
    expect(describeEmailEvent("unsubscribed", { recipients: ["a@x.example"] })).toBe("a@x.example unsubscribed.");
    expect(describeEmailEvent("outcome_unknown", { recipients: ["a@x.example"], message: "tern stopped after handing this message to the relay." })).toBe("tern stopped after handing this message to the relay.");
  });

  it("shortens long recipient lists and never throws on data of another shape", () => {
    const many = { recipients: ["a@x.example", "b@x.example", "c@x.example", "d@x.example", "e@x.example"] };
    expect(describeEmailEvent("delivered", many)).toBe("Delivered to a@x.example, b@x.example, c@x.example and 2 more.");
    expect(describeEmailEvent("bounced", {})).toBe("Bounced.");
    expect(describeEmailEvent("bounced", { recipients: "not a list", bounce: "nope" })).toBe("Bounced.");
    expect(describeEmailEvent("clicked", { click: null })).toBe("Clicked a link.");
    expect(describeEmailEvent("scheduled", { scheduled_at: "not a date" })).toBe("Scheduled.");
    expect(describeEmailEvent("some_future_event", { message: "Something happened." })).toBe("Some future event: Something happened.");
  });
});

describe("account health in a sentence", () => {
  const rate = (status: "healthy" | "warning" | "over_limit") => ({ value: 0, warning: 0, limit: 0, status });
  it("names both rates once when they stand alike, and each on its own otherwise", () => {
    expect(healthSummary({ bounce_rate: rate("over_limit"), complaint_rate: rate("over_limit") })).toBe("The bounce and complaint rates are over their limits.");
    expect(healthSummary({ bounce_rate: rate("warning"), complaint_rate: rate("warning") })).toBe("The bounce and complaint rates are close to their limits.");
    expect(healthSummary({ bounce_rate: rate("over_limit"), complaint_rate: rate("healthy") })).toBe("The bounce rate is over its limit.");
    expect(healthSummary({ bounce_rate: rate("healthy"), complaint_rate: rate("warning") })).toBe("The complaint rate is close to its limit.");
    // The one over its limit first.
    expect(healthSummary({ bounce_rate: rate("warning"), complaint_rate: rate("over_limit") })).toBe("The complaint rate is over its limit. The bounce rate is close to its limit.");
    expect(healthSummary({ bounce_rate: rate("healthy"), complaint_rate: rate("healthy") })).toBe("");
  });
});
