// resend-dotnet (0.11.0, resend/resend-dotnet at 866ba71, 2026-08-21): every call it has that tern
// serves, as ResendClient*.cs builds it (Uri.EscapeDataString for suppressions only; contact
// topics updated with the bare array), read as System.Text.Json reads its models: ids are Guid,
// times DateTime, enums closed (JsonStringEnumValueConverter throws on a value it does not know),
// a null in a non-nullable value type fails; lists are Pagination<T> with a required has_more.
import { beforeAll, describe, expect, it } from "vitest";
import { any, arr, bool, dt, int, makeWorld, obj, oneOf, opt, runErrors, runTable, str, uuid, type Row, type T, type World } from "./harness.ts";

/** Reference types (string, List, Dictionary) read a null; value types (Guid, DateTime, bool, enums) do not. */
const s = opt(str);
const page = (item: T): T => obj({ has_more: bool, data: arr(item) });
const listOf = (item: T): T => obj({ data: arr(item) });
const objectId = obj({ id: uuid });
const region = oneOf("us-east-1", "eu-west-1", "sa-east-1", "ap-northeast-1");
const domain = obj({
  id: uuid, name: s, status: oneOf("not_started", "pending", "failed", "verified", "partially_verified", "partially_failed"), created_at: dt, region,
  open_tracking: opt(bool), click_tracking: opt(bool), tracking_subdomain: s, capabilities: opt(obj({ sending: s, receiving: s })),
  records: opt(arr(obj({ record: s, name: s, value: s, type: s, ttl: s, priority: opt(int), status: oneOf("not_started", "pending", "failed", "temporary_failure", "verified") }))),
});
const claim = obj({
  id: uuid, name: s, status: oneOf("pending", "verified", "completed", "blocked", "expired", "superseded", "canceled", "failed"), domain_id: opt(uuid), region: opt(region),
  record: opt(obj({ type: s, name: s, value: s, ttl: s })), blocked_reason: s, failure_reason: s, created_at: dt, expires_at: dt,
});
const emailStatus = oneOf("bounced", "canceled", "clicked", "complained", "delivered", "delivery_delayed", "opened", "queued", "scheduled", "sent", "suppressed", "failed");
const receipt = obj({ id: uuid, from: str, to: arr(str), subject: s, message_id: s, text: s, html: s, tags: opt(arr(obj({ name: s, value: s }))), created_at: dt, last_event: opt(emailStatus) });
const attachment = obj({ id: uuid, filename: s, content_id: s, content_type: s, content_disposition: opt(oneOf("attachment", "inline")), size: opt(int), download_url: s, expires_at: opt(dt) });
const received = obj({ id: uuid, from: str, to: arr(str), subject: s, message_id: s, text: s, html: s, attachments: opt(arr(attachment)), created_at: opt(dt) });
// Contact.Properties is Dictionary<string,string> in 0.11.0, which cannot hold Resend's own answer
// `{key: {type, value}}` (resend-node's fixtures; resend-java and resend-rust read that form), so
// a contact with properties fails in this client against Resend as against tern: not checked here.
const contact = obj({ id: uuid, email: s, first_name: s, last_name: s, created_at: dt, unsubscribed: opt(bool), properties: any });
const segment = obj({ id: uuid, name: s, created_at: dt });
const subscription = oneOf("opt_in", "opt_out");
const property = obj({ id: uuid, key: s, type: oneOf("string", "number"), fallback_value: any, created_at: dt });
const topic = obj({ id: uuid, name: s, description: s, default_subscription: subscription, created_at: dt });
const templateStatus = oneOf("draft", "published");
const template = obj({
  id: uuid, current_version_id: uuid, name: s, alias: s, status: templateStatus, published_at: opt(dt), created_at: dt, updated_at: dt, subject: s, html: s, text: s,
  variables: opt(arr(obj({ key: s, type: oneOf("string", "number", "boolean", "object", "list"), fallback_value: any }))), has_unpublished_versions: bool,
});
const broadcast = obj({
  id: uuid, name: s, segment_id: uuid, subject: s, preview_text: s, text: s, html: s, status: oneOf("draft", "queued", "sent", "scheduled", "failed"),
  created_at: dt, scheduled_at: opt(dt), sent_at: opt(dt), topic_id: opt(uuid),
});
const eventTypes = ["email.sent", "email.received", "email.delivered", "email.delivery_delayed", "email.complained", "email.bounced", "email.clicked", "email.opened", "email.failed", "email.scheduled", "email.suppressed", "contact.created", "contact.updated", "contact.deleted", "domain.created", "domain.updated", "domain.deleted"];
const webhook = obj({ id: uuid, endpoint: s, created_at: dt, status: oneOf("enabled", "disabled"), events: arr(oneOf(...eventTypes)), signing_secret: s });
const origin = oneOf("bounce", "complaint", "manual");
const suppression = obj({ id: uuid, email: s, origin, source_id: s, created_at: dt });
const removal = obj({ id: uuid, deleted: bool });
const log = obj({ id: uuid, created_at: dt, endpoint: s, method: s, response_status: int, user_agent: s, request_body: any, response_body: any });

export const DOTNET: Row[] = [
  { op: "emails.send", name: "EmailSendAsync", shape: objectId },
  { op: "emails.batch", name: "EmailBatchAsync (EmailBatchValidationMode.Permissive)", shape: obj({ data: arr(objectId), errors: opt(arr(obj({ index: int, message: s }))) }) },
  { op: "emails.get", name: "EmailRetrieveAsync", shape: receipt },
  { op: "emails.list", name: "EmailListAsync", shape: page(receipt) },
  { op: "emails.update", name: "EmailRescheduleAsync", shape: any },
  { op: "emails.cancel", name: "EmailCancelAsync", shape: any },
  { op: "emails.share", name: "EmailShareAsync", shape: obj({ object: s, id: uuid, url: s }) },
  { op: "emails.attachments.list", name: "EmailAttachmentListAsync", shape: page(attachment) },
  { op: "emails.attachments.get", name: "EmailAttachmentRetrieveAsync", shape: attachment },
  { op: "receiving.list", name: "ReceivedEmailListAsync", shape: page(received) },
  { op: "receiving.get", name: "ReceivedEmailRetrieveAsync", shape: received },
  { op: "receiving.attachments.list", name: "ReceivedEmailAttachmentListAsync", shape: page(attachment) },
  { op: "receiving.attachments.get", name: "ReceivedEmailAttachmentRetrieveAsync", shape: attachment },
  { op: "domains.create", name: "DomainAddAsync", shape: domain },
  { op: "domains.get", name: "DomainRetrieveAsync", shape: domain },
  { op: "domains.list", name: "DomainListAsync", shape: listOf(domain) },
  // DomainUpdateData: click_tracking and open_tracking are plain bools, always sent.
  { op: "domains.update", name: "DomainUpdateAsync", tweak: () => ({ body: { click_tracking: false, open_tracking: true, capabilities: { receiving: "disabled" }, tracking_subdomain: "track" } }), shape: any },
  { op: "domains.verify", name: "DomainVerifyAsync", shape: any },
  { op: "domains.claims.create", name: "DomainClaimAsync", shape: claim },
  { op: "domains.claims.get", name: "DomainClaimRetrieveAsync", shape: claim },
  { op: "domains.claims.verify", name: "DomainClaimVerifyAsync", shape: claim },
  { op: "api_keys.create", name: "ApiKeyCreateAsync", shape: obj({ id: uuid, token: s }) },
  { op: "api_keys.list", name: "ApiKeyListAsync", shape: listOf(obj({ id: uuid, name: s, created_at: dt })) },
  { op: "api_keys.update", name: "ApiKeyUpdateAsync", shape: objectId },
  { op: "segments.create", name: "SegmentCreateAsync", shape: objectId },
  { op: "segments.get", name: "SegmentRetrieveAsync", shape: segment },
  { op: "segments.list", name: "SegmentListAsync", shape: page(segment) },
  { op: "audiences.create", name: "AudienceAddAsync", shape: objectId },
  { op: "audiences.get", name: "AudienceRetrieveAsync", shape: segment },
  { op: "audiences.list", name: "AudienceListAsync", shape: listOf(segment) },
  { op: "contacts.create", name: "ContactAddAsync", shape: objectId },
  { op: "contacts.get", name: "ContactRetrieveAsync", shape: contact },
  { op: "contacts.get_by_email", name: "ContactRetrieveByEmailAsync", shape: contact },
  { op: "contacts.list", name: "ContactListAsync", shape: page(contact) },
  { op: "contacts.update", name: "ContactUpdateAsync", shape: any },
  { op: "contacts.segments.add", name: "ContactAddToSegmentAsync", shape: any },
  { op: "contacts.segments.list", name: "ContactListSegmentsAsync", shape: page(segment) },
  { op: "contacts.topics.list", name: "ContactListTopicsAsync", shape: page(obj({ id: uuid, subscription })) },
  { op: "contacts.topics.update", name: "ContactUpdateTopicsAsync", tweak: (c) => ({ body: (c.body as { topics: unknown[] }).topics }), shape: any },
  { op: "contact_properties.create", name: "ContactPropCreateAsync", shape: objectId },
  { op: "contact_properties.get", name: "ContactPropRetrieveAsync", shape: property },
  { op: "contact_properties.list", name: "ContactPropListAsync", shape: page(property) },
  { op: "contact_properties.update", name: "ContactPropUpdateAsync", shape: any },
  { op: "topics.create", name: "TopicCreateAsync", shape: objectId },
  { op: "topics.get", name: "TopicRetrieveAsync", shape: topic },
  { op: "topics.list", name: "TopicListAsync", shape: page(topic) },
  { op: "topics.update", name: "TopicUpdateAsync", shape: any },
  { op: "templates.create", name: "TemplateCreateAsync", shape: objectId },
  { op: "templates.get", name: "TemplateRetrieveAsync", shape: template },
  { op: "templates.get_by_alias", name: "TemplateRetrieveByAliasAsync", shape: template },
  { op: "templates.list", name: "TemplateListAsync", shape: page(obj({ id: uuid, name: s, alias: s, status: templateStatus, published_at: opt(dt), created_at: dt, updated_at: dt })) },
  { op: "templates.update", name: "TemplateUpdateAsync", shape: any },
  { op: "templates.publish", name: "TemplatePublishAsync", shape: any },
  { op: "templates.duplicate", name: "TemplateDuplicateAsync", shape: objectId },
  { op: "broadcasts.create", name: "BroadcastAddAsync", shape: objectId },
  { op: "broadcasts.get", name: "BroadcastRetrieveAsync", shape: broadcast },
  { op: "broadcasts.list", name: "BroadcastListAsync", shape: listOf(broadcast) },
  { op: "broadcasts.update", name: "BroadcastUpdateAsync", shape: any },
  { op: "broadcasts.send", name: "BroadcastScheduleAsync", shape: any },
  { op: "broadcasts.cancel", name: "BroadcastCancelAsync", shape: any },
  { op: "webhooks.create", name: "WebhookCreateAsync", shape: obj({ id: uuid, signing_secret: s }) },
  { op: "webhooks.get", name: "WebhookRetrieveAsync", shape: webhook },
  { op: "webhooks.list", name: "WebhookListAsync", shape: page(webhook) },
  { op: "webhooks.update", name: "WebhookUpdateAsync", shape: any },
  { op: "suppressions.add", name: "SuppressionAddAsync", shape: objectId },
  { op: "suppressions.get", name: "SuppressionRetrieveAsync", tweak: (_c, w) => ({ path: `/suppressions/${encodeURIComponent(w.suppressionEmail)}` }), shape: obj({ object: s, id: uuid, email: s, origin, source_id: s, created_at: dt }) },
  { op: "suppressions.list", name: "SuppressionListAsync", shape: page(suppression) },
  { op: "suppressions.batch.add", name: "SuppressionBatchAddAsync", shape: listOf(objectId) },
  { op: "suppressions.batch.remove", name: "SuppressionBatchRemoveAsync", shape: listOf(removal) },
  { op: "logs.list", name: "LogListAsync", shape: page(log) },
  { op: "logs.get", name: "LogRetrieveAsync", shape: log },
  { op: "contacts.segments.remove", name: "ContactRemoveFromSegmentAsync", shape: any },
  { op: "contacts.remove", name: "ContactDeleteAsync", shape: any },
  { op: "contact_properties.remove", name: "ContactPropDeleteAsync", shape: any },
  { op: "topics.remove", name: "TopicDeleteAsync", shape: any },
  { op: "templates.remove", name: "TemplateDeleteAsync", shape: any },
  { op: "broadcasts.remove", name: "BroadcastDeleteAsync", shape: any },
  { op: "webhooks.remove", name: "WebhookDeleteAsync", shape: any },
  { op: "suppressions.remove", name: "SuppressionRemoveAsync", tweak: (_c, w) => ({ path: `/suppressions/${encodeURIComponent(w.suppressionEmail)}` }), shape: obj({ object: s, id: uuid, deleted: bool }) },
  { op: "segments.remove", name: "SegmentDeleteAsync", shape: any },
  { op: "audiences.remove", name: "AudienceDeleteAsync", tweak: (_c, w) => ({ path: `/audiences/${w.spareSegmentId}` }), shape: any },
  { op: "api_keys.remove", name: "ApiKeyDeleteAsync", shape: any },
  { op: "domains.remove", name: "DomainDeleteAsync", shape: any },
];

/** Answers this client cannot read that tern gives by its contract, left to the lead:
 * BroadcastStatus knows draft|queued|sent|scheduled|failed, not tern's `sending` (mid fan-out)
 * or `canceled`; Contact.Properties cannot hold Resend's `{type, value}` (see `contact`). */
export const DOTNET_KNOWN_GAPS = ["BroadcastRetrieveAsync/BroadcastListAsync on a sending or canceled broadcast", "ContactRetrieveAsync on a contact with properties"];

/** resend-dotnet calls tern does not serve (issue 19 scope). */
export const DOTNET_OUT_OF_SCOPE = ["Automation*Async", "Event*Async", "OAuthGrant*Async"];

let w: World;
beforeAll(async () => { w = await makeWorld("dotnet"); });

describe("resend-dotnet", () => {
  it("every call it has that tern serves, read as System.Text.Json reads its models", async () => {
    await runTable("dotnet", DOTNET, w);
  });
  it("error answers: ErrorResponse with a name ErrorType knows, one 404 and one 422 per resource", async () => {
    expect(await runErrors("dotnet", w, () => true)).toBeGreaterThan(20);
  });
});
