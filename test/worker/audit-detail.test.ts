// The audit log's detail column, as a person reads it (worker/dashboard/viewer.ts).
import { describe, expect, it } from "vitest";
import { auditDetailText, auditTopicIds } from "../../worker/dashboard/viewer.ts";

describe("an audit entry's detail", () => {
  it("reads as words: keys without underscores, lists joined, sign-in steps named", () => {
    expect(auditDetailText(JSON.stringify({ method: "password+verify-backup-code" }))).toBe("method: password + recovery code");
    expect(auditDetailText(JSON.stringify({ role: "admin", previous_role: "member" }))).toBe("role: admin · previous role: member");
    expect(auditDetailText(JSON.stringify({ added: ["a", "b"], removed: [] }))).toBe("added: a, b · removed: none");
  });

  it("reads a contact's topic choices by the topic's name, by its id when there is none, and a count as a count", () => {
    const detail = JSON.stringify({ topics: [{ id: "t1", subscription: "opt_out" }, { id: "t2", subscription: "opt_in" }] });
    expect(auditDetailText(detail, new Map([["t1", "Product news"]]))).toBe("topic Product news: opted out · topic t2: subscribed");
    expect(auditDetailText(detail)).toBe("topic t1: opted out · topic t2: subscribed");
    // contacts.import_started counts the topics; an empty list of choices says none.
    expect(auditDetailText(JSON.stringify({ on_conflict: "skip", segments: 1, topics: 2 }))).toBe("on conflict: skip · segments: 1 · topics: 2");
    expect(auditDetailText(JSON.stringify({ topics: [] }))).toBe("topics: none");
    // Objects of another shape stay as they were.
    expect(auditDetailText(JSON.stringify({ topics: [{ id: "t" }] }))).toBe('topics: {"id":"t"}');
  });

  it("lists the topic ids a page's entries name, once each, for one lookup", () => {
    const entries = [
      JSON.stringify({ topics: [{ id: "t1", subscription: "opt_out" }, { id: "t2", subscription: "opt_in" }] }),
      JSON.stringify({ topics: [{ id: "t1", subscription: "opt_in" }] }),
      JSON.stringify({ topics: 3 }),
      JSON.stringify({ role: "admin" }),
      "not json",
      null,
    ];
    expect(auditTopicIds(entries)).toEqual(["t1", "t2"]);
    expect(auditTopicIds([null, JSON.stringify({ added: ["a"] })])).toEqual([]);
  });

  it("leaves what is not an object of fields as it was, and nothing as nothing", () => {
    expect(auditDetailText(null)).toBeNull();
    expect(auditDetailText("not json")).toBe("not json");
    expect(auditDetailText("[1,2]")).toBe("[1,2]");
  });
});
