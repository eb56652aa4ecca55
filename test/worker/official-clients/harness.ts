// Shared machinery of the official-client replays (one file per client beside this one): the
// request each client's source makes, replayed against tern, and the answer read the way that
// client reads it. Field checks are built from small combinators so each client's table states
// its own types (Rust serde, Go encoding/json, .NET System.Text.Json, Java Jackson).
import { env } from "cloudflare:workers";
import { expect } from "vitest";
import { handleEmail } from "../../../worker/inbound/email-handler.ts";
import { api, createAccount, insertDomain, type TestAccount } from "../fixtures.ts";

/** A reader: the problems it found reading `v` at `at` (none when the client would read it). */
export type T = (v: unknown, at: string) => string[];

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const present = (v: unknown, at: string): string[] => (v === undefined ? [`${at} is missing`] : v === null ? [`${at} is null`] : []);
const scalar = (ok: (v: unknown) => boolean, what: string): T => (v, at) => present(v, at).length ? present(v, at) : ok(v) ? [] : [`${at} = ${JSON.stringify(v)} is not ${what}`];

export const str = scalar((v) => typeof v === "string", "a string");
export const uuid = scalar((v) => typeof v === "string" && UUID.test(v), "a Guid");
/** .NET DateTime / Java OffsetDateTime: an ISO 8601 date-time. */
export const dt = scalar((v) => typeof v === "string" && /^\d{4}-\d\d-\d\d[T ]\d\d:\d\d/.test(v) && !Number.isNaN(Date.parse(v)), "a date-time");
export const int = scalar((v) => Number.isInteger(v), "an integer");
export const num = scalar((v) => typeof v === "number", "a number");
export const bool = scalar((v) => typeof v === "boolean", "a boolean");
export const any: T = () => [];
/** A closed enum (Rust/.NET/Java enums): an unknown value fails. */
export const oneOf = (...values: string[]): T => scalar((v) => values.includes(v as string), `one of ${values.join("|")}`);
/** Option<T> / nullable / pointer: null or absent reads as none. */
export const opt = (t: T): T => (v, at) => (v === undefined || v === null ? [] : t(v, at));
/** #[serde(default)]: absent reads as the default, null does not. */
export const dflt = (t: T): T => (v, at) => (v === undefined ? [] : t(v, at));
export const arr = (t: T): T => (v, at) => (present(v, at).length ? present(v, at) : Array.isArray(v) ? v.flatMap((x, i) => t(x, `${at}[${i}]`)) : [`${at} is not an array`]);
export const map = (t: T): T => (v, at) =>
  present(v, at).length ? present(v, at) : typeof v === "object" && !Array.isArray(v) ? Object.entries(v as object).flatMap(([k, x]) => t(x, `${at}.${k}`)) : [`${at} is not an object`];
export const obj = (fields: Record<string, T>): T => (v, at) => {
  if (present(v, at).length) return present(v, at);
  if (typeof v !== "object" || Array.isArray(v)) return [`${at} is not an object`];
  return Object.entries(fields).flatMap(([k, t]) => t((v as Record<string, unknown>)[k], at ? `${at}.${k}` : k));
};
/** A tagged union (serde `#[serde(tag = ...)]`): the tag picks the variant, an unknown tag fails. */
export const tagged = (tag: string, variants: Record<string, T>): T => (v, at) => {
  if (present(v, at).length) return present(v, at);
  const t = variants[(v as Record<string, string>)[tag] ?? ""];
  return t ? t(v, at) : [`${at}.${tag} = ${JSON.stringify((v as Record<string, unknown>)[tag])} is not one of ${Object.keys(variants).join("|")}`];
};
/** Java's Jackson/Go's encoding/json coerce nothing, but read null into any reference field. */
export const loose = (fields: Record<string, T>): T => obj(Object.fromEntries(Object.entries(fields).map(([k, t]) => [k, opt(t)])));

export const USER_AGENTS = {
  // As each client sets it (request.py, resend.go, Headers.php, request.rb, config.rs,
  // HttpClient.java, ResendClient.cs), at the versions the tables were read from.
  python: "resend-python:2.39.0",
  go: "resend-go/3.12.0",
  php: "resend-php/1.10.0",
  ruby: "resend-ruby:1.10.0",
  rust: "resend-rs/0.31.0",
  java: "resend-java/4.20.0",
  dotnet: "resend-sdk/0.11.0.0 dotnet/8.0.11",
} as const;
export type Client = keyof typeof USER_AGENTS;

/** PHP's list (src/Transporters/HttpTransporter.php isResendError): other names are not errors to it. */
export const PHP_ERROR_NAMES = [
  "application_error", "concurrent_idempotent_requests", "daily_quota_exceeded", "internal_server_error", "invalid_access", "invalid_api_key",
  "invalid_attachment", "invalid_from_address", "invalid_idempotency_key", "invalid_idempotent_request", "invalid_parameter", "invalid_region",
  "method_not_allowed", "missing_api_key", "missing_required_field", "monthly_quota_exceeded", "not_found", "rate_limit_exceeded",
  "restricted_api_key", "security_error", "validation_error",
];

/** How resend-python (request.py) and resend-ruby (request.rb) tell an error from a success. */
export function isErrorForPython(status: number, body: unknown): boolean {
  const code = (body as { statusCode?: unknown } | null)?.statusCode;
  return status >= 400 || (code !== undefined && code !== null && code !== 200);
}

export interface Sent { status: number; contentType: string | null; body: unknown }

/** One call of a client, as its source makes it. */
export interface Call {
  /** The client's own name for it (e.g. `Emails.send`, `client.Domains.UpdateWithContext`). */
  name: string;
  method: "GET" | "POST" | "PATCH" | "PUT" | "DELETE";
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
}

export async function replay(token: string, client: Client, c: Call): Promise<Sent> {
  // resend-python's requests call always passes json=params: a "{}" body on every verb (fetch
  // cannot put a body on GET, so there the content-type header is what differs).
  const body = c.body ?? (client === "python" && c.method !== "GET" ? {} : undefined);
  const extra: Record<string, string> = client === "python" && c.method === "GET" ? { "content-type": "application/json" } : {};
  const res = await api(token, c.method, c.path, body, { "user-agent": USER_AGENTS[client], accept: "application/json", ...extra, ...c.headers });
  const contentType = res.headers.get("content-type");
  const text = await res.text();
  let parsed: unknown = text;
  try { parsed = JSON.parse(text); } catch { /* left as text: every reader below fails on it */ }
  return { status: res.status, contentType, body: parsed };
}

/** The client reads a success: JSON (PHP throws otherwise), no error by Python/Ruby's rule, the typed shape. */
export function readSuccess(client: Client, c: Call, r: Sent, shape?: T): void {
  const what = `${client} ${c.name}: ${c.method} ${c.path} -> ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`;
  expect.soft(r.contentType, what).toMatch(/application\/json/);
  expect.soft(r.status, what).toBeLessThan(300);
  expect.soft(isErrorForPython(r.status, r.body), what).toBe(false);
  if (shape) expect.soft(shape(r.body, ""), what).toEqual([]);
}

/** The client reads an error: JSON with the contract's fields, a name PHP knows, Rust's ErrorResponse. */
export function readError(client: Client, c: Call, r: Sent, status: number, name?: string): void {
  const what = `${client} ${c.name}: ${c.method} ${c.path} -> ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`;
  expect.soft(r.contentType, what).toMatch(/application\/json/);
  expect.soft(r.status, what).toBe(status);
  expect.soft(isErrorForPython(r.status, r.body), what).toBe(true);
  expect.soft(obj({ statusCode: int, message: str, name: str })(r.body, ""), what).toEqual([]);
  const b = r.body as { name: string; statusCode: number };
  expect.soft(b.statusCode, what).toBe(r.status);
  expect.soft(PHP_ERROR_NAMES, what).toContain(b.name);
  if (name) expect.soft(b.name, what).toBe(name);
}

/** Everything a table's calls refer to, made fresh for each client. */
export interface World {
  acct: TestAccount;
  domainId: string;
  /** A second domain the client may update and delete. */
  spareDomainId: string;
  emailId: string;
  scheduledEmailId: string;
  cancelEmailId: string;
  attachmentId: string;
  receivedId: string;
  receivedAttachmentId: string;
  contactId: string;
  contactEmail: string;
  segmentId: string;
  topicId: string;
  propertyId: string;
  templateId: string;
  templateAlias: string;
  broadcastId: string;
  sentBroadcastId: string;
  webhookId: string;
  apiKeyId: string;
  suppressionEmail: string;
  logId: string;
  importId: string;
  claimDomainId: string;
  /** A name another account holds, for the client's own claim. */
  claimableName: string;
  /** A draft broadcast left for the removal (the other one is sent and canceled on the way). */
  deletableBroadcastId: string;
  /** A second segment, for a client that removes both a segment and an audience. */
  spareSegmentId: string;
  /** A second contact, in the segment, for the audience-path removal. */
  spareContactEmail: string;
}

async function made(acct: TestAccount, method: string, path: string, body: unknown): Promise<Record<string, any>> {
  const res = await api(acct.token, method, path, body);
  const json = (await res.json()) as Record<string, any>;
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

function inbound(to: string): ReadableStream<Uint8Array> {
  const raw = [
    "From: Alice <alice@sender.example>", `To: ${to}`, "Subject: Files for you", "Message-ID: <files-1@sender.example>", "MIME-Version: 1.0",
    'Content-Type: multipart/mixed; boundary="b1"', "", "--b1", "Content-Type: text/html; charset=utf-8", "", "<p>hello</p>", "--b1",
    'Content-Type: text/csv; name="data.csv"', 'Content-Disposition: attachment; filename="data.csv"', "", "a,b\r\n1,2", "--b1--", "",
  ].join("\r\n");
  const bytes = new TextEncoder().encode(raw);
  return new ReadableStream({ start(c) { c.enqueue(bytes); c.close(); } });
}

export async function makeWorld(tag: string): Promise<World> {
  const acct = await createAccount();
  const from = `Sender <a@${acct.domain}>`;
  const spare = await insertDomain(acct.accountId, `spare-${tag}-${crypto.randomUUID().slice(0, 6)}.example.test`);
  const email = await made(acct, "POST", "/emails", {
    from, to: ["delivered@simulator.tern.test"], subject: "files", html: "<p>hi</p>", text: "hi", tags: [{ name: "k", value: "v" }],
    attachments: [{ filename: "a.txt", content: btoa("hello") }],
  });
  const attachments = await made(acct, "GET", `/emails/${email.id}/attachments`, undefined);
  const scheduled = await made(acct, "POST", "/emails", { from, to: ["delivered@simulator.tern.test"], subject: "later", text: "t", scheduled_at: "in 1 hour" });
  const cancel = await made(acct, "POST", "/emails", { from, to: ["delivered@simulator.tern.test"], subject: "later", text: "t", scheduled_at: "in 1 hour" });

  const inDomain = `in-${tag}-${crypto.randomUUID().slice(0, 6)}.example.test`;
  const { domainId: inId } = await insertDomain(acct.accountId, inDomain);
  await env.DB.prepare("UPDATE domains SET receiving = 1 WHERE id = ?").bind(inId).run();
  const to = `inbox@${inDomain}`;
  const message = { from: "alice@sender.example", to, headers: new Headers(), raw: inbound(to), rawSize: 1000, setReject() {}, forward: () => Promise.reject(new Error("unused")), reply: () => Promise.reject(new Error("unused")) } as unknown as ForwardableEmailMessage;
  const outcome = (await handleEmail(message, env)) as { kind: string; ids: string[] };
  if (outcome.kind !== "inbound") throw new Error(`inbound: ${outcome.kind}`);
  const receivedId = outcome.ids[0]!;
  const receivedAttachments = await made(acct, "GET", `/emails/receiving/${receivedId}/attachments`, undefined);

  const contactEmail = `${tag}-contact@example.com`;
  const segment = await made(acct, "POST", "/segments", { name: `${tag} segment` });
  const spareSegment = await made(acct, "POST", "/segments", { name: `${tag} spare` });
  const property = await made(acct, "POST", "/contact-properties", { key: `plan_${tag}`, type: "string", fallback_value: "free" });
  // The contact has a property, so each client reads Resend's `{key: {type, value}}` form.
  const contact = await made(acct, "POST", "/contacts", { email: contactEmail, first_name: "Ada", last_name: "L", unsubscribed: false, properties: { [`plan_${tag}`]: "pro" } });
  await made(acct, "POST", `/contacts/${contact.id}/segments/${segment.id}`, undefined);
  const spareContactEmail = `${tag}-spare@example.com`;
  await made(acct, "POST", `/audiences/${segment.id}/contacts`, { email: spareContactEmail });
  const topic = await made(acct, "POST", "/topics", { name: `${tag} news`, default_subscription: "opt_in", description: "News" });
  const templateAlias = `welcome-${tag}`;
  const template = await made(acct, "POST", "/templates", { name: "Welcome", alias: templateAlias, subject: "Hi {{{NAME}}}", html: "<p>Hi {{{NAME}}}</p>", from, variables: [{ key: "NAME", type: "string", fallback_value: "you" }] });
  const broadcast = await made(acct, "POST", "/broadcasts", { segment_id: segment.id, from, subject: "News", html: "<p>News {{{contact.first_name}}}</p>", name: "draft" });
  const sentBroadcast = await made(acct, "POST", "/broadcasts", { segment_id: segment.id, from, subject: "Sent news", html: "<p>Sent {{{contact.first_name}}}</p>", name: "sent", send: true });
  const webhook = await made(acct, "POST", "/webhooks", { endpoint: "https://hooks.example.com/tern", events: ["email.sent", "email.delivered"] });
  const key = await made(acct, "POST", "/api-keys", { name: `${tag} key` });
  const suppressionEmail = `${tag}-suppressed@example.com`;
  await made(acct, "POST", "/suppressions", { email: suppressionEmail });
  const logs = await made(acct, "GET", "/logs?limit=1", undefined);
  const imported = await contactImport(acct, tag);
  const [holder, holder2] = await Promise.all([createAccount(), createAccount()]);
  const claim = await made(acct, "POST", "/domains/claim", { name: holder.domain });
  const deletable = await made(acct, "POST", "/broadcasts", { segment_id: segment.id, from, subject: "Spare", html: "<p>x</p>", name: "spare" });
  return {
    acct, domainId: acct.domainId, spareDomainId: spare.domainId, emailId: email.id, scheduledEmailId: scheduled.id, cancelEmailId: cancel.id,
    attachmentId: attachments.data[0].id, receivedId, receivedAttachmentId: receivedAttachments.data[0].id,
    contactId: contact.id, contactEmail, segmentId: segment.id, topicId: topic.id, propertyId: property.id, templateId: template.id, templateAlias,
    broadcastId: broadcast.id, sentBroadcastId: sentBroadcast.id, webhookId: webhook.id, apiKeyId: key.id, suppressionEmail,
    logId: logs.data[0].id, importId: imported, claimDomainId: claim.domain_id,
    claimableName: holder2.domain, deletableBroadcastId: deletable.id, spareSegmentId: spareSegment.id, spareContactEmail,
  };
}

async function contactImport(acct: TestAccount, tag: string): Promise<string> {
  const form = new FormData();
  form.set("file", new File([`email,first_name\n${tag}-imp@example.com,Imp\n`], "contacts.csv", { type: "text/csv" }));
  const { exports } = await import("cloudflare:workers");
  const res = await exports.default.fetch(new Request("http://tern.test/contacts/imports", { method: "POST", headers: { authorization: `Bearer ${acct.token}` }, body: form }));
  const json = (await res.json()) as { id: string };
  if (res.status >= 300) throw new Error(`import: ${res.status} ${JSON.stringify(json)}`);
  return json.id;
}

/** A path segment escaped as a client does: the escaping functions differ in "@" and "+". */
export const escapes = {
  /** Python quote(safe=""), Ruby ERB::Util.url_encode, .NET Uri.EscapeDataString, JS encodeURIComponent. */
  full: (s: string) => encodeURIComponent(s),
  /** Go url.PathEscape, Rust/Java/PHP string formatting: "@" and "+" left as they are. */
  none: (s: string) => s,
};

export const randomId = () => crypto.randomUUID();

/** Every operation a client may have, in an order that leaves what later calls need in place. */
export const OPS = [
  "emails.send", "emails.batch", "emails.get", "emails.list", "emails.update", "emails.cancel", "emails.share",
  "emails.attachments.list", "emails.attachments.get", "emails.metrics",
  "receiving.list", "receiving.get", "receiving.attachments.list", "receiving.attachments.get",
  "domains.create", "domains.get", "domains.list", "domains.update", "domains.verify",
  "domains.claims.create", "domains.claims.get", "domains.claims.verify",
  "api_keys.create", "api_keys.list", "api_keys.update",
  "segments.create", "segments.get", "segments.list", "audiences.create", "audiences.get", "audiences.list",
  "contacts.create", "contacts.create_in_audience", "contacts.get", "contacts.get_by_email", "contacts.get_in_audience", "contacts.list", "contacts.list_in_audience", "contacts.list_in_segment", "contacts.update", "contacts.update_in_audience",
  "contacts.segments.add", "contacts.segments.list", "contacts.topics.list", "contacts.topics.update",
  "contact_properties.create", "contact_properties.get", "contact_properties.list", "contact_properties.update",
  "contacts.imports.create", "contacts.imports.get", "contacts.imports.list",
  "topics.create", "topics.get", "topics.list", "topics.update",
  "templates.create", "templates.get", "templates.get_by_alias", "templates.list", "templates.update", "templates.publish", "templates.duplicate",
  "broadcasts.create", "broadcasts.get", "broadcasts.list", "broadcasts.update", "broadcasts.send", "broadcasts.cancel", "broadcasts.recipients", "broadcasts.clicked_links",
  "webhooks.create", "webhooks.get", "webhooks.list", "webhooks.update",
  "suppressions.add", "suppressions.get", "suppressions.list", "suppressions.batch.add", "suppressions.batch.remove",
  "logs.list", "logs.get",
  // Removals last: what they remove was made for them.
  "contacts.segments.remove", "contacts.remove", "contacts.remove_in_audience", "contact_properties.remove", "topics.remove", "templates.remove",
  "broadcasts.remove", "webhooks.remove", "suppressions.remove", "segments.remove", "audiences.remove", "api_keys.remove", "domains.remove",
] as const;
export type Op = (typeof OPS)[number];

/** The request of each operation with Resend's documented body; a client's table overrides what it sends differently. */
export function canonical(w: World, op: Op, client: Client): Call {
  const from = `Sender <a@${w.acct.domain}>`;
  const u = `${client}-${crypto.randomUUID().slice(0, 8)}`;
  const r = (method: Call["method"], path: string, body?: unknown, headers?: Record<string, string>): Call => ({ name: op, method, path, body, headers });
  switch (op) {
    case "emails.send": return r("POST", "/emails", { from, to: ["delivered@simulator.tern.test"], subject: "hi", html: "<p>hi</p>", tags: [{ name: "k", value: "v" }] }, { "Idempotency-Key": u });
    case "emails.batch": return r("POST", "/emails/batch", [{ from, to: ["delivered@simulator.tern.test"], subject: "one", text: "1" }, { from, to: ["delivered@simulator.tern.test"], subject: "two", text: "2" }], { "Idempotency-Key": u, "x-batch-validation": "permissive" });
    case "emails.get": return r("GET", `/emails/${w.emailId}`);
    case "emails.list": return r("GET", "/emails?limit=10");
    case "emails.update": return r("PATCH", `/emails/${w.scheduledEmailId}`, { scheduled_at: new Date(Date.now() + 7_200_000).toISOString() });
    case "emails.cancel": return r("POST", `/emails/${w.cancelEmailId}/cancel`);
    case "emails.share": return r("POST", `/emails/${w.emailId}/share`, { expires_in: "1h" });
    case "emails.attachments.list": return r("GET", `/emails/${w.emailId}/attachments`);
    case "emails.attachments.get": return r("GET", `/emails/${w.emailId}/attachments/${w.attachmentId}`);
    case "emails.metrics": return r("GET", "/emails/metrics");
    case "receiving.list": return r("GET", "/emails/receiving?limit=10");
    case "receiving.get": return r("GET", `/emails/receiving/${w.receivedId}`);
    case "receiving.attachments.list": return r("GET", `/emails/receiving/${w.receivedId}/attachments`);
    case "receiving.attachments.get": return r("GET", `/emails/receiving/${w.receivedId}/attachments/${w.receivedAttachmentId}`);
    case "domains.create": return r("POST", "/domains", { name: `${u}.example.org`, region: "us-east-1" });
    case "domains.get": return r("GET", `/domains/${w.domainId}`);
    case "domains.list": return r("GET", "/domains");
    case "domains.update": return r("PATCH", `/domains/${w.spareDomainId}`, { open_tracking: true, click_tracking: true });
    case "domains.verify": return r("POST", `/domains/${w.spareDomainId}/verify`);
    case "domains.claims.create": return r("POST", "/domains/claim", { name: w.claimableName, region: "us-east-1" });
    case "domains.claims.get": return r("GET", `/domains/${w.claimDomainId}/claim`);
    case "domains.claims.verify": return r("POST", `/domains/${w.claimDomainId}/claim/verify`);
    case "api_keys.create": return r("POST", "/api-keys", { name: u, permission: "sending_access" });
    case "api_keys.list": return r("GET", "/api-keys");
    case "api_keys.update": return r("PATCH", `/api-keys/${w.apiKeyId}`, { name: `${u} renamed` });
    case "segments.create": return r("POST", "/segments", { name: u });
    case "segments.get": return r("GET", `/segments/${w.segmentId}`);
    case "segments.list": return r("GET", "/segments");
    case "audiences.create": return r("POST", "/audiences", { name: u });
    case "audiences.get": return r("GET", `/audiences/${w.segmentId}`);
    case "audiences.list": return r("GET", "/audiences");
    case "contacts.create": return r("POST", "/contacts", { email: `${u}@example.com`, first_name: "Grace", last_name: "H", unsubscribed: false });
    case "contacts.create_in_audience": return r("POST", `/audiences/${w.segmentId}/contacts`, { email: `${u}-a@example.com`, first_name: "Grace", unsubscribed: false });
    case "contacts.get": return r("GET", `/contacts/${w.contactId}`);
    case "contacts.get_by_email": return r("GET", `/contacts/${w.contactEmail}`);
    case "contacts.get_in_audience": return r("GET", `/audiences/${w.segmentId}/contacts/${w.contactId}`);
    case "contacts.list": return r("GET", "/contacts?limit=10");
    case "contacts.list_in_audience": return r("GET", `/audiences/${w.segmentId}/contacts`);
    case "contacts.list_in_segment": return r("GET", `/segments/${w.segmentId}/contacts`);
    case "contacts.update": return r("PATCH", `/contacts/${w.contactId}`, { first_name: "Ada B." });
    case "contacts.update_in_audience": return r("PATCH", `/audiences/${w.segmentId}/contacts/${w.contactId}`, { last_name: "Lovelace" });
    case "contacts.segments.add": return r("POST", `/contacts/${w.contactId}/segments/${w.segmentId}`);
    case "contacts.segments.list": return r("GET", `/contacts/${w.contactId}/segments`);
    case "contacts.topics.list": return r("GET", `/contacts/${w.contactId}/topics`);
    case "contacts.topics.update": return r("PATCH", `/contacts/${w.contactId}/topics`, { topics: [{ id: w.topicId, subscription: "opt_out" }] });
    case "contact_properties.create": return r("POST", "/contact-properties", { key: `k_${u.replace(/-/g, "_")}`, type: "string", fallback_value: "x" });
    case "contact_properties.get": return r("GET", `/contact-properties/${w.propertyId}`);
    case "contact_properties.list": return r("GET", "/contact-properties");
    case "contact_properties.update": return r("PATCH", `/contact-properties/${w.propertyId}`, { fallback_value: "pro" });
    case "contacts.imports.create": return r("POST", "/contacts/imports");
    case "contacts.imports.get": return r("GET", `/contacts/imports/${w.importId}`);
    case "contacts.imports.list": return r("GET", "/contacts/imports");
    case "topics.create": return r("POST", "/topics", { name: u, default_subscription: "opt_in", description: "d" });
    case "topics.get": return r("GET", `/topics/${w.topicId}`);
    case "topics.list": return r("GET", "/topics");
    case "topics.update": return r("PATCH", `/topics/${w.topicId}`, { name: `${u} news`, description: "e" });
    case "templates.create": return r("POST", "/templates", { name: u, html: "<p>{{{NAME}}}</p>", subject: "s", variables: [{ key: "NAME", type: "string", fallback_value: "x" }] });
    case "templates.get": return r("GET", `/templates/${w.templateId}`);
    case "templates.get_by_alias": return r("GET", `/templates/${w.templateAlias}`);
    case "templates.list": return r("GET", "/templates");
    case "templates.update": return r("PATCH", `/templates/${w.templateId}`, { name: `${u} t`, html: "<p>Hello {{{NAME}}}</p>" });
    case "templates.publish": return r("POST", `/templates/${w.templateId}/publish`);
    case "templates.duplicate": return r("POST", `/templates/${w.templateId}/duplicate`);
    case "broadcasts.create": return r("POST", "/broadcasts", { segment_id: w.segmentId, from, subject: "s", html: "<p>x</p>", name: u });
    case "broadcasts.get": return r("GET", `/broadcasts/${w.broadcastId}`);
    case "broadcasts.list": return r("GET", "/broadcasts");
    case "broadcasts.update": return r("PATCH", `/broadcasts/${w.broadcastId}`, { subject: "updated", name: `${u} b` });
    case "broadcasts.send": return r("POST", `/broadcasts/${w.broadcastId}/send`, { scheduled_at: "in 1 hour" });
    case "broadcasts.cancel": return r("POST", `/broadcasts/${w.broadcastId}/cancel`);
    case "broadcasts.recipients": return r("GET", `/broadcasts/${w.sentBroadcastId}/recipients?type=sent`);
    case "broadcasts.clicked_links": return r("GET", `/broadcasts/${w.sentBroadcastId}/clicked-links`);
    case "webhooks.create": return r("POST", "/webhooks", { endpoint: `https://hooks.example.com/${u}`, events: ["email.sent", "email.bounced"] });
    case "webhooks.get": return r("GET", `/webhooks/${w.webhookId}`);
    case "webhooks.list": return r("GET", "/webhooks");
    case "webhooks.update": return r("PATCH", `/webhooks/${w.webhookId}`, { endpoint: `https://hooks.example.com/${u}-2`, events: ["email.sent"], status: "enabled" });
    case "suppressions.add": return r("POST", "/suppressions", { email: `${u}+s@example.com` });
    case "suppressions.get": return r("GET", `/suppressions/${w.suppressionEmail}`);
    case "suppressions.list": return r("GET", "/suppressions?limit=10");
    case "suppressions.batch.add": return r("POST", "/suppressions/batch/add", { emails: [`${u}-1@example.com`, `${u}-2@example.com`] });
    case "suppressions.batch.remove": return r("POST", "/suppressions/batch/remove", { emails: [`${u}-1@example.com`] });
    case "logs.list": return r("GET", "/logs?limit=10");
    case "logs.get": return r("GET", `/logs/${w.logId}`);
    case "contacts.segments.remove": return r("DELETE", `/contacts/${w.contactId}/segments/${w.segmentId}`);
    case "contacts.remove": return r("DELETE", `/contacts/${w.contactId}`);
    case "contacts.remove_in_audience": return r("DELETE", `/audiences/${w.segmentId}/contacts/${w.spareContactEmail}`);
    case "contact_properties.remove": return r("DELETE", `/contact-properties/${w.propertyId}`);
    case "topics.remove": return r("DELETE", `/topics/${w.topicId}`);
    case "templates.remove": return r("DELETE", `/templates/${w.templateId}`);
    case "broadcasts.remove": return r("DELETE", `/broadcasts/${w.deletableBroadcastId}`);
    case "webhooks.remove": return r("DELETE", `/webhooks/${w.webhookId}`);
    case "suppressions.remove": return r("DELETE", `/suppressions/${w.suppressionEmail}`);
    case "segments.remove": return r("DELETE", `/segments/${w.segmentId}`);
    case "audiences.remove": return r("DELETE", `/audiences/${w.segmentId}`);
    case "api_keys.remove": return r("DELETE", `/api-keys/${w.apiKeyId}`);
    case "domains.remove": return r("DELETE", `/domains/${w.spareDomainId}`);
  }
}

/** One row of a client's table: which of its methods makes the call, what it sends differently, how it reads the answer. */
export interface Row {
  op: Op;
  /** The client's method (e.g. `resend.Emails.send`). */
  name: string;
  /** What this client sends differently from Resend's documented request. */
  tweak?: (c: Call, w: World) => Partial<Call>;
  /** How the client reads the answer (typed clients); omitted for dict-reading clients. */
  shape?: T;
}

/** A contact import as the clients send it: multipart with the CSV under `file`. */
export async function importAs(token: string, client: Client): Promise<Sent> {
  const form = new FormData();
  form.set("file", new File([`email\n${client}-${crypto.randomUUID().slice(0, 6)}@example.com\n`], "contacts.csv", { type: "text/csv" }));
  const { exports } = await import("cloudflare:workers");
  const res = await exports.default.fetch(new Request("http://tern.test/contacts/imports", { method: "POST", headers: { authorization: `Bearer ${token}`, "user-agent": USER_AGENTS[client] }, body: form }));
  return { status: res.status, contentType: res.headers.get("content-type"), body: await res.json() };
}

/** Replays a client's table in order, each answer read the client's way; removals run last. */
export async function runTable(client: Client, rows: Row[], w: World): Promise<void> {
  const byOp = new Map(rows.map((r) => [r.op, r]));
  for (const op of OPS) {
    const row = byOp.get(op);
    if (!row) continue;
    const base = canonical(w, op, client);
    const call: Call = { ...base, ...(row.tweak?.(base, w) ?? {}), name: row.name };
    const sent = op === "contacts.imports.create" ? await importAs(w.acct.token, client) : await replay(w.acct.token, client, call);
    readSuccess(client, call, sent, row.shape);
  }
}

/** Error answers a client reads: one 404 and one 422 per resource, through the client's own paths. */
export function errorCalls(w: World): { call: Call; status: number; name?: string }[] {
  const x = randomId();
  const c = (name: string, method: Call["method"], path: string, status: number, body?: unknown, err?: string) => ({ call: { name, method, path, body }, status, name: err });
  return [
    c("emails.get", "GET", `/emails/${x}`, 404, undefined, "not_found"),
    c("emails.send", "POST", "/emails", 422, { to: ["a@example.com"], subject: "no from", text: "t" }),
    c("emails.batch", "POST", "/emails/batch", 422, [{ to: ["a@example.com"] }]),
    c("emails.update", "PATCH", `/emails/${x}`, 404, { scheduled_at: "in 1 hour" }, "not_found"),
    c("emails.cancel", "POST", `/emails/${x}/cancel`, 404, undefined, "not_found"),
    c("emails.attachments.get", "GET", `/emails/${w.emailId}/attachments/${x}`, 404, undefined, "not_found"),
    c("receiving.get", "GET", `/emails/receiving/${x}`, 404, undefined, "not_found"),
    c("domains.get", "GET", `/domains/${x}`, 404, undefined, "not_found"),
    c("domains.create", "POST", "/domains", 422, { name: "not a domain" }),
    c("domains.update", "PATCH", `/domains/${w.domainId}`, 422, { open_tracking: "yes" }),
    c("domains.claims.get", "GET", `/domains/${x}/claim`, 404, undefined, "not_found"),
    c("api_keys.update", "PATCH", `/api-keys/${x}`, 404, { name: "n" }, "not_found"),
    c("api_keys.create", "POST", "/api-keys", 422, { name: "" }),
    c("segments.get", "GET", `/segments/${x}`, 404, undefined, "not_found"),
    c("audiences.create", "POST", "/audiences", 422, {}),
    c("contacts.get", "GET", `/contacts/${x}`, 404, undefined, "not_found"),
    c("contacts.create", "POST", "/contacts", 422, { email: "not an address" }),
    c("contacts.topics.update", "PATCH", `/contacts/${w.contactId}/topics`, 422, { topics: [{ id: x, subscription: "maybe" }] }),
    c("contact_properties.get", "GET", `/contact-properties/${x}`, 404, undefined, "not_found"),
    c("contact_properties.create", "POST", "/contact-properties", 422, { key: "k", type: "date" }),
    c("contacts.imports.get", "GET", `/contacts/imports/${x}`, 404, undefined, "not_found"),
    c("topics.get", "GET", `/topics/${x}`, 404, undefined, "not_found"),
    c("topics.create", "POST", "/topics", 422, { name: "t", default_subscription: "sometimes" }),
    c("templates.get", "GET", `/templates/${x}`, 404, undefined, "not_found"),
    c("templates.create", "POST", "/templates", 422, { name: "t" }),
    c("broadcasts.get", "GET", `/broadcasts/${x}`, 404, undefined, "not_found"),
    c("broadcasts.create", "POST", "/broadcasts", 422, { from: "a@example.com" }),
    c("webhooks.get", "GET", `/webhooks/${x}`, 404, undefined, "not_found"),
    c("webhooks.create", "POST", "/webhooks", 422, { endpoint: "not a url", events: ["email.sent"] }),
    c("suppressions.get", "GET", `/suppressions/${x}`, 404, undefined, "not_found"),
    c("suppressions.add", "POST", "/suppressions", 422, { email: "nope" }),
    c("logs.get", "GET", `/logs/${x}`, 404, undefined, "not_found"),
    c("logs.list", "GET", "/logs?limit=0", 422),
  ];
}

/** Replays the error answers and reads each as the client would (its error type, PHP's names, Python's rule). */
export async function runErrors(client: Client, w: World, has: (op: string) => boolean): Promise<number> {
  let n = 0;
  for (const e of errorCalls(w)) {
    if (!has(e.call.name)) continue;
    const r = await replay(w.acct.token, client, e.call);
    readError(client, e.call, r, e.status, e.name);
    n++;
  }
  return n;
}

/** Every operation but the ones a client lacks, named the client's way, with its request tweaks. */
export function rowsOf(all: readonly Op[], name: (op: Op) => string, tweaks: Partial<Record<Op, Row["tweak"]>>, shapes: Partial<Record<Op, T>> = {}): Row[] {
  return all.map((op) => ({ op, name: name(op), tweak: tweaks[op], shape: shapes[op] }));
}

/** A body with the resource's id repeated in it, as some clients send. */
export const withId = (key: string, id: (w: World) => string): Row["tweak"] => (c, w) => ({ body: { [key]: id(w), ...((c.body as object | undefined) ?? {}) } });
export const bareTopics: Row["tweak"] = (c) => ({ body: (c.body as { topics: unknown[] }).topics });
