// resend-ruby (1.10.0, resend/resend-ruby at ad9a767, 2026-08-21): every call it has that tern
// serves, as lib/resend/*.rb builds it (HTTParty; paths without escaping but ERB::Util.url_encode
// for suppressions; no body when the params are empty; update bodies that keep the id: Emails
// `email_id`, Domains and ApiKeys `id`, Topics `topic_id`, Broadcasts `broadcast_id`, Contacts
// `id`; Contacts::Topics.update sends the bare array), read as request.rb reads it: JSON or a
// parse error, and an error when the body's statusCode says so (Resend::Error::ERRORS by code).
import { beforeAll, describe, expect, it } from "vitest";
import { bareTopics, makeWorld, OPS, rowsOf, runErrors, runTable, withId, type Op, type World } from "./harness.ts";

const LACKS: Op[] = ["emails.metrics", "broadcasts.clicked_links", "broadcasts.recipients", "contacts.list_in_segment"];
const camel = (s: string) => s.split("_").map((p) => p[0]!.toUpperCase() + p.slice(1)).join("");

export const RUBY = rowsOf(OPS.filter((o) => !LACKS.includes(o)), (op) => {
  const parts = op.split(".");
  return `Resend::${parts.slice(0, -1).map(camel).join("::")}.${parts.at(-1)}`;
}, {
  "emails.update": withId("email_id", (w) => w.scheduledEmailId),
  "domains.update": withId("id", (w) => w.spareDomainId),
  "api_keys.update": withId("id", (w) => w.apiKeyId),
  "topics.update": withId("topic_id", (w) => w.topicId),
  "broadcasts.update": withId("broadcast_id", (w) => w.broadcastId),
  "broadcasts.send": withId("broadcast_id", (w) => w.broadcastId),
  "contacts.update": withId("id", (w) => w.contactId),
  "contacts.update_in_audience": (c, w) => ({ body: { id: w.contactId, audience_id: w.segmentId, ...(c.body as object) } }),
  "contacts.create_in_audience": (c, w) => ({ body: { ...(c.body as object), audience_id: w.segmentId } }),
  "contacts.topics.update": bareTopics,
  "suppressions.get": (_c, w) => ({ path: `/suppressions/${encodeURIComponent(w.suppressionEmail)}` }),
  "suppressions.remove": (_c, w) => ({ path: `/suppressions/${encodeURIComponent(w.suppressionEmail)}` }),
  "audiences.remove": (_c, w) => ({ path: `/audiences/${w.spareSegmentId}` }),
});

/** resend-ruby calls tern does not serve (issue 19 scope). */
export const RUBY_OUT_OF_SCOPE = ["Resend::Automations.*", "Resend::Automations::Runs.*", "Resend::Events.*", "Resend::OAuthGrants.*"];

let w: World;
beforeAll(async () => { w = await makeWorld("ruby"); });

describe("resend-ruby", () => {
  it("every call it has that tern serves, read as request.rb reads it", async () => {
    await runTable("ruby", RUBY, w);
  });
  it("error answers raise by statusCode, one 404 and one 422 per resource", async () => {
    expect(await runErrors("ruby", w, () => true)).toBeGreaterThan(20);
  });
});
