// The bench's floor (bench/floor/) is a minimal Worker that makes exactly the D1 batch tern's
// accept path makes for a plain send. `npm run bench` checks that before it measures; this
// test makes the same check in `npm test`, so a change to the accept path that leaves the
// floor behind fails here, not twenty minutes into a bench run.
import { describe, expect, it } from "vitest";
import { checkFloorStatements } from "../../bench/floor.ts";

describe("the bench's floor", () => {
  it("sends the very statements tern's accept path sends, and reads as GET /emails/<id> reads", async () => {
    const { send, read } = await checkFloorStatements();
    expect(send.map((s) => s.sql.split(" ").slice(0, 3).join(" "))).toEqual(expect.arrayContaining(['insert into "emails"', 'insert into "email_events"']));
    expect(read.sql).toMatch(/^select .* from "emails" where/);
  });
});
