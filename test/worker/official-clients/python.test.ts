// resend-python (2.39.0, resend/resend-python at b972ed9, 2026-08-21): every call it has that
// tern serves, as request.py makes it: requests with json=params always, so a `{}` body with a
// JSON content type even on GET and DELETE; urllib quote(safe="") for a contact's id-or-email and
// a suppression's; update bodies that repeat the id (Domains.update `id`, Emails.update `id`,
// Webhooks.update `webhook_id`, Broadcasts.update/send `broadcast_id`, Contacts.update `id`,
// Topics.update `id`); Contacts.Topics.update sends the bare array. Answers are dicts: what
// matters is JSON, and request.py's rule that an answer is an error when the status is >= 400
// or the body's `statusCode` is set and not 200.
import { beforeAll, describe, expect, it } from "vitest";
import { bareTopics, makeWorld, OPS, rowsOf, runErrors, runTable, withId, type Op, type World } from "./harness.ts";

const LACKS: Op[] = ["emails.metrics", "broadcasts.clicked_links", "broadcasts.recipients"];
const quoteContact = (c: { path: string }) => ({ path: c.path.replace(/^\/contacts\/([^/]+)/, (_m, x: string) => `/contacts/${encodeURIComponent(x)}`) });

export const PYTHON = rowsOf(OPS.filter((o) => !LACKS.includes(o)), (op) => `resend.${op.split(".").map((p) => p[0]!.toUpperCase() + p.slice(1)).join(".")}`, {
  "domains.update": withId("id", (w) => w.spareDomainId),
  "emails.update": withId("id", (w) => w.scheduledEmailId),
  "webhooks.update": withId("webhook_id", (w) => w.webhookId),
  "broadcasts.update": withId("broadcast_id", (w) => w.broadcastId),
  "broadcasts.send": withId("broadcast_id", (w) => w.broadcastId),
  "contacts.update": (c, w) => ({ ...quoteContact(c), body: { id: w.contactId, ...(c.body as object) } }),
  "contacts.update_in_audience": withId("id", (w) => w.contactId),
  "contacts.create_in_audience": (c, w) => ({ body: { ...(c.body as object), audience_id: w.segmentId } }),
  "contacts.get": quoteContact,
  "contacts.get_by_email": quoteContact,
  "contacts.remove": quoteContact,
  "contacts.remove_in_audience": (c) => ({ path: c.path.replace(/[^/]+$/, (x) => encodeURIComponent(x)) }),
  // Contacts.Segments.add posts its params (segment_id and contact_id) as the body.
  "contacts.segments.add": (c, w) => ({ ...quoteContact(c), body: { segment_id: w.segmentId, contact_id: w.contactId } }),
  "contacts.topics.update": bareTopics,
  "topics.update": withId("id", (w) => w.topicId),
  "suppressions.get": (_c, w) => ({ path: `/suppressions/${encodeURIComponent(w.suppressionEmail)}` }),
  "suppressions.remove": (_c, w) => ({ path: `/suppressions/${encodeURIComponent(w.suppressionEmail)}` }),
  "audiences.remove": (_c, w) => ({ path: `/audiences/${w.spareSegmentId}` }),
});

/** resend-python calls tern does not serve (issue 19 scope). */
export const PYTHON_OUT_OF_SCOPE = ["resend.Automations.*", "resend.Events.*", "resend.OAuthGrants.*"];

let w: World;
beforeAll(async () => { w = await makeWorld("python"); });

describe("resend-python", () => {
  it("every call it has that tern serves, read by request.py's rule", async () => {
    await runTable("python", PYTHON, w);
  });
  it("error answers raise (status >= 400, statusCode set), one 404 and one 422 per resource", async () => {
    expect(await runErrors("python", w, () => true)).toBeGreaterThan(20);
  });
});
