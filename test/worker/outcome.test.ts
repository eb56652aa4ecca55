// The rules from one attempt's per-recipient results to events, state and retry.
import { describe, expect, it } from "vitest";
import { settleAttempt, type AttemptResult } from "../../worker/delivery/outcome.ts";

const ok = (recipient: string, final = false): AttemptResult => ({ recipient, status: "accepted", code: 250, message: "250 ok", final });
const rejected = (recipient: string, enhancedCode = "5.1.1", text = "no such user"): AttemptResult => ({ recipient, status: "rejected", code: 550, enhancedCode, message: `550 ${enhancedCode} ${text}`, final: false });
const deferred = (recipient: string): AttemptResult => ({ recipient, status: "deferred", code: 451, message: "451 try later", final: false });
const ctx = { attempt: 1, retrySchedule: [60, 300], alreadyDelayed: false };

describe("settling an attempt", () => {
  it("acceptance by a relay that is not final means sent, not delivered", () => {
    const s = settleAttempt([ok("a@x.test")], ctx);
    expect(s.events.map((e) => e.type)).toEqual(["sent"]);
    expect(s).toMatchObject({ state: "done", pending: [], lastEvent: "sent", retryInSeconds: null });
  });
  it("acceptance by a final relay means sent and delivered", () => {
    const s = settleAttempt([ok("a@x.test", true)], ctx);
    expect(s.events.map((e) => e.type)).toEqual(["sent", "delivered"]);
    expect(s.lastEvent).toBe("delivered");
  });
  it("a 5xx is a permanent bounce with the diagnostic code", () => {
    const s = settleAttempt([rejected("a@x.test")], ctx);
    expect(s.state).toBe("done");
    expect(s.events).toEqual([{
      type: "bounced",
      data: { recipients: ["a@x.test"], bounce: { type: "Permanent", subType: "NoEmail", message: "550 5.1.1 no such user", diagnosticCode: ["smtp; 550 5.1.1 no such user"] } },
    }]);
  });
  it("a 4xx is retried on schedule and reported as delayed once", () => {
    const first = settleAttempt([deferred("a@x.test")], ctx);
    expect(first).toMatchObject({ state: "queued", pending: ["a@x.test"], retryInSeconds: 60, lastEvent: "delivery_delayed" });
    const second = settleAttempt([deferred("a@x.test")], { ...ctx, attempt: 2, alreadyDelayed: true });
    expect(second).toMatchObject({ state: "queued", retryInSeconds: 300, events: [] });
  });
  it("running out of retries fails the email", () => {
    const s = settleAttempt([deferred("a@x.test")], { ...ctx, attempt: 3, alreadyDelayed: true });
    expect(s.state).toBe("done");
    expect(s.events[0]!.type).toBe("failed");
    expect((s.events[0]!.data.failed as { reason: string }).reason).toMatch(/451 try later/);
  });
  it("mixed results: only the deferred recipients stay pending", () => {
    const s = settleAttempt([ok("a@x.test", true), rejected("b@x.test", "5.0.0", "requested action not taken"), deferred("c@x.test")], ctx);
    expect(s.pending).toEqual(["c@x.test"]);
    expect(s.events.map((e) => e.type)).toEqual(["sent", "delivered", "bounced", "delivery_delayed"]);
    expect((s.events[2]!.data.bounce as { subType: string }).subType).toBe("General");
  });
  it.each([
    ["5.1.1", "user unknown", "Permanent", "NoEmail"],
    ["5.2.2", "mailbox full", "Transient", "MailboxFull"],
    ["5.3.4", "message too big", "Transient", "MessageTooLarge"],
    ["5.7.1", "rejected by policy", "Transient", "ContentRejected"],
  ])("a %s reply at delivery is classified as reports are: %s", (code, text, type, subType) => {
    const s = settleAttempt([rejected("b@x.test", code, text)], ctx);
    expect(s.events[0]!.data.bounce).toMatchObject({ type, subType });
  });
});
