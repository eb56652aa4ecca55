// resend-go (v3.12.0, resend/resend-go at e2c6c4e, 2026-08-20): every call it has that tern
// serves, as its *SvcImpl methods build them (paths relative to BaseURL, url.PathEscape only for
// suppressions, which leaves "@"; update bodies that repeat the id: `id`, `broadcast_id`; the
// contact-topics update sends the bare array), read as encoding/json reads into its structs:
// a JSON null is accepted anywhere, but a value of the wrong JSON type (a number for a string,
// an array for a map) fails the whole call. Shapes are the package's own structs.
import { beforeAll, describe, expect, it } from "vitest";
import { any, arr, bool, int, loose, makeWorld, map, runErrors, runTable, str, type Row, type T, type World } from "./harness.ts";

/** encoding/json: null reads as the zero value, so every field is optional; types must match. */
const o = loose;
const list = (item: T): T => o({ object: str, has_more: bool, data: arr(item) });
const ref = o({ object: str, id: str });
const removed = o({ object: str, id: str, deleted: bool });
const record = o({ record: str, name: str, type: str, ttl: str, status: str, value: str, priority: int });
const capabilities = o({ sending: str, receiving: str });
const domain = o({ id: str, object: str, name: str, created_at: str, status: str, region: str, records: arr(record), open_tracking: bool, click_tracking: bool, tracking_subdomain: str, capabilities });
const claim = o({ object: str, id: str, name: str, status: str, domain_id: str, region: str, record: o({ type: str, name: str, value: str, ttl: str }), blocked_reason: str, failure_reason: str, created_at: str, expires_at: str });
const email = o({ id: str, object: str, message_id: str, to: arr(str), from: str, created_at: str, subject: str, html: str, text: str, bcc: arr(str), cc: arr(str), reply_to: arr(str), last_event: str });
const attachment = o({ object: str, id: str, filename: str, content_type: str, content_disposition: str, content_id: str, download_url: str, expires_at: str });
const receivedAttachment = o({ id: str, filename: str, content_type: str, content_disposition: str, content_id: str });
const received = o({
  id: str, object: str, to: arr(str), from: str, created_at: str, subject: str, html: str, text: str, bcc: arr(str), cc: arr(str), reply_to: arr(str), received_for: arr(str),
  headers: map(str), message_id: str, attachments: arr(receivedAttachment), raw: o({ download_url: str, expires_at: str }),
});
const receivedItem = o({ id: str, to: arr(str), from: str, created_at: str, subject: str, bcc: arr(str), cc: arr(str), reply_to: arr(str), message_id: str, attachments: arr(receivedAttachment) });
const contact = o({ id: str, email: str, object: str, first_name: str, last_name: str, created_at: str, unsubscribed: bool, properties: map(any) });
const segment = o({ id: str, name: str, object: str, created_at: str });
const property = o({ id: str, key: str, object: str, created_at: str, type: str, fallback_value: any });
const contactImport = o({ object: str, id: str, status: str, created_at: str, counts: o({ total: int, created: int, updated: int, skipped: int, failed: int }) });
const topic = o({ id: str, name: str, description: str, default_subscription: str, created_at: str });
const template = o({
  object: str, id: str, alias: str, name: str, created_at: str, updated_at: str, status: str, published_at: str, from: str, subject: str, reply_to: any, html: str, text: str,
  variables: arr(o({ id: str, key: str, type: str, fallback_value: any, created_at: str, updated_at: str })),
});
const broadcast = o({
  object: str, id: str, name: str, segment_id: str, audience_id: str, from: str, subject: str, reply_to: arr(str), preview_text: str, status: str, created_at: str,
  scheduled_at: str, sent_at: str, html: str, text: str,
});
const webhook = o({ object: str, id: str, created_at: str, status: str, endpoint: str, events: arr(str), signing_secret: str });
const suppression = o({ object: str, id: str, email: str, origin: str, source_id: str, created_at: str });
const log = o({ object: str, id: str, created_at: str, endpoint: str, method: str, response_status: int, user_agent: str, request_body: any, response_body: any });

export const GO: Row[] = [
  { op: "emails.send", name: "Emails.SendWithOptions", shape: o({ id: str }) },
  { op: "emails.batch", name: "Batch.SendWithOptions", shape: o({ data: arr(o({ id: str })), errors: arr(o({ index: int, message: str })) }) },
  { op: "emails.get", name: "Emails.Get", shape: email },
  { op: "emails.list", name: "Emails.List", shape: list(email) },
  { op: "emails.update", name: "Emails.Update", tweak: (c, w) => ({ body: { id: w.scheduledEmailId, ...(c.body as object) } }), shape: ref },
  { op: "emails.cancel", name: "Emails.Cancel", shape: ref },
  { op: "emails.share", name: "Emails.Share", tweak: () => ({ body: {} }), shape: o({ id: str, object: str, url: str }) },
  { op: "emails.attachments.list", name: "Emails.ListAttachments", shape: list(attachment) },
  { op: "emails.attachments.get", name: "Emails.GetAttachment", shape: attachment },
  { op: "receiving.list", name: "Receiving.List", shape: list(receivedItem) },
  { op: "receiving.get", name: "Receiving.Get", shape: received },
  { op: "receiving.attachments.list", name: "Receiving.ListAttachments", shape: list(attachment) },
  { op: "receiving.attachments.get", name: "Receiving.GetAttachment", shape: attachment },
  { op: "domains.create", name: "Domains.Create", shape: domain },
  { op: "domains.get", name: "Domains.Get", shape: domain },
  { op: "domains.list", name: "Domains.List", shape: list(domain) },
  { op: "domains.update", name: "Domains.Update", tweak: (c) => ({ body: { ...(c.body as object), tracking_subdomain: "links" } }), shape: domain },
  { op: "domains.verify", name: "Domains.Verify", shape: any },
  { op: "domains.claims.create", name: "DomainClaims.Create", shape: claim },
  { op: "domains.claims.get", name: "DomainClaims.Get", shape: claim },
  { op: "domains.claims.verify", name: "DomainClaims.Verify", shape: claim },
  { op: "api_keys.create", name: "ApiKeys.Create", shape: o({ id: str, token: str }) },
  { op: "api_keys.list", name: "ApiKeys.List", shape: list(o({ id: str, name: str, created_at: str, last_used_at: str })) },
  { op: "api_keys.update", name: "ApiKeys.Update", shape: ref },
  { op: "segments.create", name: "Segments.Create", shape: o({ id: str, name: str, object: str }) },
  { op: "segments.get", name: "Segments.Get", shape: segment },
  { op: "segments.list", name: "Segments.List", shape: list(segment) },
  { op: "audiences.create", name: "Audiences.Create", shape: o({ id: str, name: str, object: str }) },
  { op: "audiences.get", name: "Audiences.Get", shape: segment },
  { op: "audiences.list", name: "Audiences.List", shape: list(segment) },
  { op: "contacts.create", name: "Contacts.Create", shape: ref },
  { op: "contacts.create_in_audience", name: "Contacts.Create (AudienceId)", tweak: (c, w) => ({ body: { ...(c.body as object), audience_id: w.segmentId } }), shape: ref },
  { op: "contacts.get", name: "Contacts.Get", shape: contact },
  { op: "contacts.get_by_email", name: "Contacts.Get (Email)", shape: contact },
  { op: "contacts.get_in_audience", name: "Contacts.Get (AudienceId)", shape: contact },
  { op: "contacts.list", name: "Contacts.List", shape: list(contact) },
  { op: "contacts.list_in_audience", name: "Contacts.List (AudienceId)", shape: list(contact) },
  { op: "contacts.list_in_segment", name: "Contacts.List (SegmentId)", shape: list(contact) },
  { op: "contacts.update", name: "Contacts.Update", tweak: (c, w) => ({ body: { id: w.contactId, ...(c.body as object) } }), shape: any },
  { op: "contacts.update_in_audience", name: "Contacts.Update (AudienceId)", tweak: (c, w) => ({ body: { id: w.contactId, audience_id: w.segmentId, ...(c.body as object) } }), shape: any },
  { op: "contacts.segments.add", name: "Contacts.Segments.Add", shape: o({ id: str, object: str }) },
  { op: "contacts.segments.list", name: "Contacts.Segments.List", shape: list(segment) },
  { op: "contacts.topics.list", name: "Contacts.Topics.List", shape: list(o({ id: str, name: str, description: str, subscription: str })) },
  { op: "contacts.topics.update", name: "Contacts.Topics.Update", tweak: (c) => ({ body: (c.body as { topics: unknown[] }).topics }), shape: o({ id: str }) },
  { op: "contact_properties.create", name: "ContactProperties.Create", shape: ref },
  { op: "contact_properties.get", name: "ContactProperties.Get", shape: property },
  { op: "contact_properties.list", name: "ContactProperties.List", shape: list(property) },
  { op: "contact_properties.update", name: "ContactProperties.Update", shape: ref },
  { op: "contacts.imports.create", name: "Contacts.Imports.Create", shape: ref },
  { op: "contacts.imports.get", name: "Contacts.Imports.Get", shape: contactImport },
  { op: "contacts.imports.list", name: "Contacts.Imports.List", shape: list(contactImport) },
  { op: "topics.create", name: "Topics.Create", shape: o({ id: str }) },
  { op: "topics.get", name: "Topics.Get", shape: topic },
  { op: "topics.list", name: "Topics.List", shape: list(topic) },
  { op: "topics.update", name: "Topics.Update", tweak: (c, w) => ({ body: { id: w.topicId, ...(c.body as object) } }), shape: o({ id: str }) },
  { op: "templates.create", name: "Templates.Create", shape: ref },
  { op: "templates.get", name: "Templates.Get", shape: template },
  { op: "templates.get_by_alias", name: "Templates.Get (alias)", shape: template },
  { op: "templates.list", name: "Templates.List", shape: list(o({ id: str, name: str, status: str, published_at: str, created_at: str, updated_at: str, alias: str })) },
  { op: "templates.update", name: "Templates.Update", shape: ref },
  { op: "templates.publish", name: "Templates.Publish", shape: ref },
  { op: "templates.duplicate", name: "Templates.Duplicate", shape: ref },
  { op: "broadcasts.create", name: "Broadcasts.Create", shape: o({ id: str }) },
  { op: "broadcasts.get", name: "Broadcasts.Get", shape: broadcast },
  { op: "broadcasts.list", name: "Broadcasts.List", shape: list(broadcast) },
  { op: "broadcasts.update", name: "Broadcasts.Update", tweak: (c, w) => ({ body: { broadcast_id: w.broadcastId, ...(c.body as object) } }), shape: o({ id: str }) },
  { op: "broadcasts.send", name: "Broadcasts.Send", tweak: (c, w) => ({ body: { broadcast_id: w.broadcastId, ...(c.body as object) } }), shape: o({ id: str }) },
  { op: "broadcasts.cancel", name: "Broadcasts.Cancel", shape: ref },
  { op: "webhooks.create", name: "Webhooks.Create", shape: o({ object: str, id: str, signing_secret: str }) },
  { op: "webhooks.get", name: "Webhooks.Get", shape: webhook },
  { op: "webhooks.list", name: "Webhooks.List", shape: list(o({ id: str, created_at: str, status: str, endpoint: str, events: arr(str) })) },
  { op: "webhooks.update", name: "Webhooks.Update", shape: ref },
  { op: "suppressions.add", name: "Suppressions.Add", shape: ref },
  { op: "suppressions.get", name: "Suppressions.Get", shape: suppression },
  { op: "suppressions.list", name: "Suppressions.List", shape: list(o({ id: str, email: str, origin: str, source_id: str, created_at: str })) },
  { op: "suppressions.batch.add", name: "Suppressions.Batch.Add", shape: o({ data: arr(ref) }) },
  { op: "suppressions.batch.remove", name: "Suppressions.Batch.Remove", shape: o({ data: arr(removed) }) },
  { op: "logs.list", name: "Logs.List", shape: list(log) },
  { op: "logs.get", name: "Logs.Get", shape: log },
  { op: "contacts.segments.remove", name: "Contacts.Segments.Remove", shape: o({ id: str, object: str, deleted: bool }) },
  { op: "contacts.remove", name: "Contacts.Remove", shape: removed },
  { op: "contact_properties.remove", name: "ContactProperties.Remove", shape: removed },
  { op: "topics.remove", name: "Topics.Remove", shape: removed },
  { op: "templates.remove", name: "Templates.Remove", shape: removed },
  { op: "broadcasts.remove", name: "Broadcasts.Remove", shape: removed },
  { op: "webhooks.remove", name: "Webhooks.Remove", shape: removed },
  { op: "suppressions.remove", name: "Suppressions.Remove", shape: removed },
  { op: "segments.remove", name: "Segments.Remove", shape: removed },
  { op: "audiences.remove", name: "Audiences.Remove", tweak: (_c, w) => ({ path: `/audiences/${w.spareSegmentId}` }), shape: removed },
  { op: "api_keys.remove", name: "ApiKeys.Remove", shape: any },
  { op: "domains.remove", name: "Domains.Remove", shape: removed },
];

/** resend-go calls tern does not serve (issue 19 scope). */
export const GO_OUT_OF_SCOPE = ["Automations.*", "Events.*", "OAuthGrants.*"];

let w: World;
beforeAll(async () => { w = await makeWorld("go"); });

describe("resend-go", () => {
  it("every call it has that tern serves, read as encoding/json reads it", async () => {
    await runTable("go", GO, w);
  });
  it("error answers: the status and an ErrorResponse it can decode, one 404 and one 422 per resource", async () => {
    expect(await runErrors("go", w, () => true)).toBeGreaterThan(20);
  });
});
