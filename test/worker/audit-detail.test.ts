// The audit log's detail column, as a person reads it (worker/dashboard/viewer.ts).
import { describe, expect, it } from "vitest";
import { auditDetailText } from "../../worker/dashboard/viewer.ts";

describe("an audit entry's detail", () => {
  it("reads as words: keys without underscores, lists joined, sign-in steps named", () => {
    expect(auditDetailText(JSON.stringify({ method: "password+verify-backup-code" }))).toBe("method: password + recovery code");
    expect(auditDetailText(JSON.stringify({ role: "admin", previous_role: "member" }))).toBe("role: admin · previous role: member");
    expect(auditDetailText(JSON.stringify({ added: ["a", "b"], removed: [] }))).toBe("added: a, b · removed: none");
    expect(auditDetailText(JSON.stringify({ topics: [{ id: "t", subscription: "opt_in" }] }))).toBe('topics: {"id":"t","subscription":"opt_in"}');
  });

  it("leaves what is not an object of fields as it was, and nothing as nothing", () => {
    expect(auditDetailText(null)).toBeNull();
    expect(auditDetailText("not json")).toBe("not json");
    expect(auditDetailText("[1,2]")).toBe("[1,2]");
  });
});
