// resend-rust (crate `resend-rs` 0.31.0, resend/resend-rust at 70ca6fe, 2026-08-23): every call it
// has that tern serves, as src/*.rs builds it (reqwest, no path escaping but `urlencoding` for a
// contact's id-or-email; the contact-topics update sends a bare JSON array; the contact-segments
// list ends in a slash), read as serde reads it: non-Option fields present and not null, enums
// closed, `ListResponse { has_more: bool, data }`; errors as `ErrorResponse { statusCode: u16,
// message, name }`. The shapes below are the crate's own `types` structs, field for field.
import { beforeAll, describe, expect, it } from "vitest";
import { arr, bool, dflt, int, makeWorld, map, num, obj, oneOf, opt, runErrors, runTable, str, tagged, any, type Row, type T, type World } from "./harness.ts";

const list = (item: T): T => obj({ has_more: bool, data: arr(item) });
const id = obj({ id: str });
const deleted = obj({ id: str, deleted: bool });
const recordStatus = oneOf("pending", "verified", "failed", "temporary_failure", "not_started");
const region = oneOf("us-east-1", "eu-west-1", "sa-east-1", "ap-northeast-1");
const baseRecord = { name: str, value: str, ttl: str, status: recordStatus };
const domainRecord = tagged("record", {
  SPF: obj({ ...baseRecord, type: oneOf("MX", "TXT"), routing_policy: opt(str), priority: opt(int), proxy_status: opt(oneOf("Enable", "Disable")) }),
  DKIM: obj({ ...baseRecord, type: oneOf("CNAME", "TXT"), routing_policy: opt(str), priority: opt(int), proxy_status: opt(oneOf("Enable", "Disable")) }),
  "Receiving MX": obj({ ...baseRecord, type: oneOf("MX"), priority: int }),
  Tracking: obj({ ...baseRecord, type: oneOf("CNAME") }),
  TrackingCAA: obj({ ...baseRecord, type: oneOf("CAA") }),
});
const capability = oneOf("enabled", "disabled");
const domain = obj({
  id: str, name: str, status: oneOf("pending", "verified", "failed", "not_started", "partially_verified", "partially_failed"), created_at: str, region,
  records: opt(arr(domainRecord)), capabilities: obj({ sending: capability, receiving: capability }), open_tracking: opt(bool), click_tracking: opt(bool),
});
const claim = obj({
  id: str, name: str, status: oneOf("pending", "verified", "completed", "blocked", "expired", "superseded", "canceled", "failed"), domain_id: opt(str), region: opt(region),
  record: obj({ type: oneOf("TXT"), name: str, value: str, ttl: str }), blocked_reason: opt(oneOf("grace_period", "recent_owner_activity", "pending_scheduled_emails")),
  failure_reason: opt(str), created_at: str, expires_at: str,
});
const nullableVec = (t: T): T => opt(arr(t));
const email = obj({
  id: str, message_id: opt(str), from: str, to: arr(str), subject: str, created_at: str, html: opt(str), text: opt(str), bcc: nullableVec(str), cc: nullableVec(str),
  reply_to: opt(arr(str)), last_event: oneOf("bounced", "canceled", "clicked", "complained", "delivered", "delivery_delayed", "failed", "opened", "queued", "scheduled", "sent"),
  scheduled_at: opt(str),
});
const attachment = obj({ id: str, filename: opt(str), size: int, content_type: str, content_disposition: oneOf("inline", "attachment"), content_id: opt(str), download_url: str, expires_at: str });
const metricNames = ["received", "delivered", "complained", "suppressed", "bounced", "bounced_transient", "bounced_permanent", "bounced_undetermined", "opened", "clicked", "unsubscribed", "delivery_delayed", "failed", "sent", "unique_opened", "unique_clicked", "delivery_rate", "open_rate", "click_rate", "bounce_rate", "complaint_rate", "unsubscribe_rate"];
const metrics = obj({
  start_date: str, end_date: str, metrics: arr(oneOf(...metricNames)), dimensions: arr(oneOf("period", "domain", "email", "broadcast")),
  granularity: oneOf("hourly", "daily", "weekly", "monthly"), totals: map(num), data: opt(arr(any)),
});
const inboundAttachment = obj({ id: str, filename: opt(str), size: opt(int), content_type: str, content_id: opt(str), content_disposition: opt(str) });
const inbound = obj({
  id: str, to: arr(str), from: str, created_at: str, subject: str, bcc: dflt(arr(str)), cc: dflt(arr(str)), reply_to: dflt(arr(str)), received_for: dflt(arr(str)),
  html: opt(str), text: opt(str), headers: dflt(map(str)), message_id: str, raw: opt(obj({ download_url: str, expires_at: str })), attachments: dflt(arr(inboundAttachment)),
});
const propertyType = oneOf("string", "number");
const contact = obj({ id: str, email: str, first_name: opt(str), last_name: opt(str), unsubscribed: bool, created_at: str, properties: dflt(opt(map(obj({ value: str, type: propertyType })))) });
const subscription = oneOf("opt_in", "opt_out");
const contactTopic = obj({ id: str, name: str, description: opt(str), subscription, created_at: str });
const segment = obj({ id: str, name: str, created_at: str });
const property = obj({ id: str, created_at: str, key: str, type: propertyType, fallback_value: any });
const contactImport = obj({
  id: str, status: oneOf("queued", "in_progress", "completed", "failed"), created_at: str, completed_at: opt(str),
  counts: obj({ total: int, created: int, updated: int, skipped: int, failed: int }),
});
const topic = obj({ id: str, name: str, description: opt(str), default_subscription: subscription, visibility: oneOf("public", "private"), created_at: str });
const template = obj({
  id: str, alias: opt(str), name: str, created_at: str, updated_at: str, status: oneOf("draft", "published"), published_at: opt(str), from: opt(str), subject: opt(str),
  reply_to: opt(arr(str)), html: opt(str), text: opt(str), variables: dflt(opt(arr(obj({ key: str, type: oneOf("string", "number"), fallback_value: any })))),
});
const broadcast = obj({
  id: str, name: str, audience_id: str, status: str, created_at: str, scheduled_at: opt(str), sent_at: opt(str), from: opt(str), subject: opt(str),
  reply_to: opt(arr(str)), preview_text: opt(str), text: opt(str), html: opt(str),
});
const recipient = obj({ id: str, contact_id: opt(str), email: str, count: opt(int), bounce_type: opt(oneOf("permanent", "transient", "undetermined")), clicked_links: opt(arr(obj({ url: str, clicks: int }))) });
const clickedLink = obj({ id: str, url: str, clicks: int, unique_clicks: int });
const webhook = obj({ id: str, created_at: str, status: str, endpoint: str, events: dflt(arr(str)) });
const suppression = obj({ id: str, email: str, created_at: str, origin: oneOf("bounce", "complaint", "manual"), source_id: opt(str) });
const log = obj({ id: str, created_at: str, endpoint: str, method: str, response_status: int, user_agent: opt(str), request_body: any, response_body: any });

/** Contacts by id or email go through `urlencoding::encode`. */
const enc = (c: { path: string }) => ({ path: c.path.replace(/^\/contacts\/([^/]+)/, (_m, x: string) => `/contacts/${encodeURIComponent(decodeURIComponent(x))}`) });

export const RUST: Row[] = [
  { op: "emails.send", name: "Emails::send", shape: id },
  { op: "emails.batch", name: "Batch::send_with_batch_validation", shape: obj({ data: arr(id), errors: dflt(arr(obj({ index: int, message: str }))) }) },
  { op: "emails.get", name: "Emails::get", shape: email },
  { op: "emails.list", name: "Emails::list", shape: list(email) },
  { op: "emails.update", name: "Emails::update", shape: id },
  { op: "emails.cancel", name: "Emails::cancel", shape: id },
  { op: "emails.share", name: "Emails::share", shape: obj({ id: str, url: str }) },
  { op: "emails.attachments.list", name: "Emails::list_attachments", shape: list(attachment) },
  { op: "emails.attachments.get", name: "Emails::get_attachment", shape: attachment },
  { op: "emails.metrics", name: "Emails::metrics", shape: metrics },
  { op: "receiving.list", name: "Receiving::list", shape: list(inbound) },
  { op: "receiving.get", name: "Receiving::get", shape: inbound },
  { op: "receiving.attachments.list", name: "Receiving::list_attachments", shape: list(attachment) },
  { op: "receiving.attachments.get", name: "Receiving::get_attachment", shape: attachment },
  { op: "domains.create", name: "Domains::add", shape: domain },
  { op: "domains.get", name: "Domains::get", shape: domain },
  { op: "domains.list", name: "Domains::list", shape: list(domain) },
  { op: "domains.update", name: "Domains::update", shape: id },
  { op: "domains.verify", name: "Domains::verify", shape: id },
  { op: "domains.claims.create", name: "Domains::claim", shape: claim },
  { op: "domains.claims.get", name: "Domains::get_claim", shape: claim },
  { op: "domains.claims.verify", name: "Domains::verify_claim", shape: claim },
  { op: "api_keys.create", name: "ApiKeys::create", shape: obj({ id: str, token: str }) },
  { op: "api_keys.list", name: "ApiKeys::list", shape: list(obj({ id: str, name: str, created_at: str, last_used_at: opt(str) })) },
  { op: "api_keys.update", name: "ApiKeys::update", shape: id },
  { op: "segments.create", name: "Segments::create", shape: obj({ id: str, name: str }) },
  { op: "segments.get", name: "Segments::get", shape: segment },
  { op: "segments.list", name: "Segments::list", shape: list(segment) },
  { op: "contacts.create", name: "Contacts::create", shape: id },
  { op: "contacts.create_in_audience", name: "Contacts::create (audience_id set)", shape: id },
  { op: "contacts.get", name: "Contacts::get", tweak: enc, shape: contact },
  { op: "contacts.get_by_email", name: "Contacts::get (by email)", tweak: enc, shape: contact },
  { op: "contacts.list_in_audience", name: "Contacts::list", shape: list(contact) },
  { op: "contacts.update", name: "Contacts::update", tweak: enc, shape: id },
  { op: "contacts.segments.add", name: "Contacts::add_contact_segment", tweak: enc, shape: id },
  { op: "contacts.segments.list", name: "Contacts::list_contact_segment", tweak: (c) => ({ path: `${c.path}/` }), shape: list(segment) },
  { op: "contacts.topics.list", name: "Contacts::get_contact_topics", tweak: enc, shape: list(contactTopic) },
  { op: "contacts.topics.update", name: "Contacts::update_contact_topics", tweak: (c) => ({ body: (c.body as { topics: unknown[] }).topics }), shape: id },
  { op: "contact_properties.create", name: "Contacts::create_property", shape: id },
  { op: "contact_properties.get", name: "Contacts::get_property", shape: property },
  { op: "contact_properties.list", name: "Contacts::list_properties", shape: list(property) },
  { op: "contact_properties.update", name: "Contacts::update_property", shape: id },
  { op: "contacts.imports.create", name: "Contacts::create_import", shape: id },
  { op: "contacts.imports.get", name: "Contacts::get_import", shape: contactImport },
  { op: "contacts.imports.list", name: "Contacts::list_imports", shape: list(contactImport) },
  { op: "topics.create", name: "Topics::create", shape: id },
  { op: "topics.get", name: "Topics::get", shape: topic },
  { op: "topics.list", name: "Topics::list", shape: list(topic) },
  { op: "topics.update", name: "Topics::update", shape: id },
  { op: "templates.create", name: "Templates::create", shape: id },
  { op: "templates.get", name: "Templates::get", shape: template },
  { op: "templates.get_by_alias", name: "Templates::get (alias)", shape: template },
  { op: "templates.list", name: "Templates::list", shape: list(obj({ id: str, name: str, created_at: str, updated_at: str, status: oneOf("draft", "published"), published_at: opt(str), alias: opt(str) })) },
  { op: "templates.update", name: "Templates::update", shape: id },
  { op: "templates.publish", name: "Templates::publish", shape: id },
  { op: "templates.duplicate", name: "Templates::duplicate", shape: id },
  { op: "broadcasts.create", name: "Broadcasts::create", shape: id },
  { op: "broadcasts.get", name: "Broadcasts::get", shape: broadcast },
  { op: "broadcasts.list", name: "Broadcasts::list", shape: list(broadcast) },
  { op: "broadcasts.update", name: "Broadcasts::update", shape: id },
  { op: "broadcasts.send", name: "Broadcasts::send", shape: id },
  { op: "broadcasts.cancel", name: "Broadcasts::cancel", shape: id },
  { op: "broadcasts.recipients", name: "Broadcasts::list_recipients", shape: list(recipient) },
  { op: "broadcasts.clicked_links", name: "Broadcasts::list_clicked_links", shape: list(clickedLink) },
  { op: "webhooks.create", name: "Webhooks::create", shape: obj({ id: str, signing_secret: str }) },
  { op: "webhooks.get", name: "Webhooks::get", shape: webhook },
  { op: "webhooks.list", name: "Webhooks::list", shape: list(webhook) },
  { op: "webhooks.update", name: "Webhooks::update", shape: id },
  { op: "suppressions.add", name: "Suppressions::add", shape: id },
  { op: "suppressions.get", name: "Suppressions::get", shape: suppression },
  { op: "suppressions.list", name: "Suppressions::list", shape: list(suppression) },
  { op: "suppressions.batch.add", name: "Suppressions::batch_add", shape: obj({ data: arr(id) }) },
  { op: "suppressions.batch.remove", name: "Suppressions::batch_remove", shape: obj({ data: arr(deleted) }) },
  { op: "logs.list", name: "Logs::list", shape: list(log) },
  { op: "logs.get", name: "Logs::get", shape: log },
  { op: "contacts.segments.remove", name: "Contacts::delete_contact_segment", tweak: enc, shape: deleted },
  { op: "contacts.remove", name: "Contacts::delete", tweak: enc, shape: obj({ contact: str, deleted: bool }) },
  { op: "contact_properties.remove", name: "Contacts::delete_property", shape: deleted },
  { op: "topics.remove", name: "Topics::delete", shape: deleted },
  { op: "templates.remove", name: "Templates::delete", shape: deleted },
  { op: "broadcasts.remove", name: "Broadcasts::delete", shape: deleted },
  { op: "webhooks.remove", name: "Webhooks::delete", shape: deleted },
  { op: "suppressions.remove", name: "Suppressions::remove", shape: deleted },
  { op: "segments.remove", name: "Segments::delete", shape: deleted },
  { op: "api_keys.remove", name: "ApiKeys::delete", shape: any },
  { op: "domains.remove", name: "Domains::delete", shape: deleted },
];

/** Answers this client cannot read, as against Resend itself: EmailEvent has no `suppressed`
 * (Resend's own last_event enum has it), ContactPropertyResponse.value is a String (a number
 * property's value is a number in Resend's answers too). */
export const RUST_KNOWN_GAPS = ["Emails::get of a suppressed email", "Contacts::get of a contact with a number property"];

/** resend-rust methods tern does not serve (issue 19 scope): listed so the table is visibly whole. */
export const RUST_OUT_OF_SCOPE = ["Automations::*", "Events::*", "OAuth::*", "Receiving::forward (client-side: fetches the raw message, then Emails::send)"];

let w: World;
beforeAll(async () => { w = await makeWorld("rust"); });

describe("resend-rust", () => {
  it("every call it has that tern serves, read as serde reads it", async () => {
    await runTable("rust", RUST, w);
  });
  it("error answers parse as ErrorResponse, one 404 and one 422 per resource", async () => {
    expect(await runErrors("rust", w, (op) => RUST.some((r) => r.op === op) || op.startsWith("audiences"))).toBeGreaterThan(20);
  });
});
