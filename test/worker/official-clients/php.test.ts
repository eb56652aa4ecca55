// resend-php (1.10.0, resend/resend-php at 736c59f, 2026-08-21): every call it has that tern
// serves, as src/Service/*.php builds it (Payload::create/get/list/update/delete on a ResourceUri,
// ids and addresses put in the path as they are, bodies only what the caller gave), read as
// HttpTransporter does: a non-JSON answer throws UnserializableResponse, and an answer is an
// error only when its `name` is one of the error names it knows; otherwise the array becomes a
// Resource (so an unknown error name would be taken for a success).
import { beforeAll, describe, expect, it } from "vitest";
import { bareTopics, makeWorld, OPS, rowsOf, runErrors, runTable, type Op, type World } from "./harness.ts";

const LACKS: Op[] = ["emails.metrics", "broadcasts.clicked_links", "broadcasts.recipients", "contacts.get_in_audience", "contacts.update_in_audience", "contacts.remove_in_audience"];
const camel = (s: string, i: number) => (i === 0 ? s : s[0]!.toUpperCase() + s.slice(1)).replace(/_(\w)/g, (_m, c: string) => c.toUpperCase());

export const PHP = rowsOf(OPS.filter((o) => !LACKS.includes(o)), (op) => `$resend->${op.split(".").map(camel).join("->")}()`, {
  // resend-php sets neither Idempotency-Key nor x-batch-validation.
  "emails.send": () => ({ headers: {} }),
  "emails.batch": () => ({ headers: {} }),
  "contacts.topics.update": bareTopics,
  "contacts.create_in_audience": (c, w) => ({ body: { ...(c.body as object), audience_id: w.segmentId } }),
  "audiences.remove": (_c, w) => ({ path: `/audiences/${w.spareSegmentId}` }),
});

/** resend-php calls tern does not serve (issue 19 scope). */
export const PHP_OUT_OF_SCOPE = ["$resend->automations", "$resend->automations->runs", "$resend->events"];

let w: World;
beforeAll(async () => { w = await makeWorld("php"); });

describe("resend-php", () => {
  it("every call it has that tern serves, JSON it turns into a Resource", async () => {
    await runTable("php", PHP, w);
  });
  it("error answers carry a name isResendError knows, one 404 and one 422 per resource", async () => {
    expect(await runErrors("php", w, () => true)).toBeGreaterThan(20);
  });
});
