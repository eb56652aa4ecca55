// The OpenAPI document is generated from the zod schemas that validate requests, and the
// reference page is rendered from it; unexpected failures answer the contract's 500.
import { exports } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { defineRoute, newApp } from "../../worker/app.ts";
import type { ApiError } from "../../worker/errors.ts";
import { validate } from "../../worker/http.ts";
import { createOutboundFetcher } from "../../worker/net/outbound.ts";
import { CreateBroadcastRequest } from "../../worker/routes/broadcasts.ts";
import { CreateContactRequest } from "../../worker/routes/contacts.ts";
import { CreateDomainRequest, normaliseDomainName } from "../../worker/routes/domains.ts";
import { CreateWebhookRequest } from "../../worker/routes/webhooks.ts";
import { resolveAttachment } from "../../worker/sending/attachments.ts";
import { checkKey } from "../../worker/sending/idempotency.ts";
import { SendEmailRequest } from "../../worker/sending/request.ts";
import { parseScheduledAt } from "../../worker/sending/schedule.ts";
import { WEBHOOK_EVENT_TYPES } from "../../worker/webhooks/payloads.ts";
import { call, createAccount } from "./fixtures.ts";

describe("GET /openapi.json", () => {
  it("documents every route with the request schemas used for validation", async () => {
    const res = await exports.default.fetch("http://tern.test/openapi.json");
    expect(res.status).toBe(200);
    const doc = (await res.json()) as { openapi: string; paths: Record<string, Record<string, unknown>>; components: { schemas: Record<string, { properties?: Record<string, unknown>; required?: string[] }> } };
    expect(doc.openapi).toBe("3.1.0");
    const ops = Object.entries(doc.paths).flatMap(([p, m]) => Object.keys(m).map((x) => `${x.toUpperCase()} ${p}`)).sort();
    // Every route is documented; test/worker/resend-parity.test.ts checks them against Resend's.
    expect(ops).toEqual(expect.arrayContaining([
      "DELETE /api-keys/{id}", "DELETE /domains/{id}", "DELETE /webhooks/{id}", "GET /api-keys", "GET /domains", "GET /domains/{id}",
      "GET /emails", "GET /emails/receiving", "GET /emails/receiving/{id}", "GET /emails/receiving/{id}/attachments/{attachment_id}",
      "GET /emails/receiving/{id}/raw", "GET /emails/{id}", "GET /emails/{id}/events", "GET /emails/metrics", "GET /emails/{id}/insights", "GET /account/health",
      "GET /webhooks", "GET /webhooks/{id}", "GET /webhooks/{id}/events", "GET /webhooks/{id}/events/{event_id}",
      "GET /webhooks/{id}/events/{event_id}/attempts", "PATCH /domains/{id}", "PATCH /emails/{id}", "PATCH /webhooks/{id}",
      "POST /api-keys", "POST /domains", "POST /domains/{id}/dkim/rotate", "POST /domains/{id}/verify", "POST /domains/{id}/auto-configure",
      "POST /emails", "POST /emails/batch", "POST /emails/{id}/cancel",
      "POST /webhooks", "POST /webhooks/{id}/events/{event_id}/replay", "POST /webhooks/{id}/signing-secret/rotate",
      "POST /contacts", "GET /contacts", "GET /contacts/{id}", "PATCH /contacts/{id}", "DELETE /contacts/{id}",
      "GET /suppressions", "POST /suppressions", "DELETE /suppressions", "DELETE /suppressions/{id}",
      "GET /suppressions/{id}", "POST /suppressions/batch/add", "POST /suppressions/batch/remove", "PATCH /api-keys/{id}",
      "GET /emails/{id}/attachments", "GET /emails/{id}/attachments/{attachment_id}", "GET /emails/receiving/{id}/attachments",
      "POST /emails/{id}/share", "GET /logs", "GET /logs/{log_id}", "POST /domains/claim", "GET /domains/{id}/claim", "POST /domains/{id}/claim/verify",
      // Segments, audiences, topics and contact properties (issue 17).
      ...["/segments", "/audiences"].flatMap((b) => [`POST ${b}`, `GET ${b}`, `GET ${b}/{id}`, `PATCH ${b}/{id}`, `DELETE ${b}/{id}`, `GET ${b}/{audience_id}/contacts`]),
      "POST /audiences/{audience_id}/contacts", "GET /audiences/{audience_id}/contacts/{id}", "PATCH /audiences/{audience_id}/contacts/{id}", "DELETE /audiences/{audience_id}/contacts/{id}",
      "GET /contacts/{contact_id}/segments", "POST /contacts/{contact_id}/segments/{segment_id}", "DELETE /contacts/{contact_id}/segments/{segment_id}",
      "GET /contacts/{contact_id}/topics", "PATCH /contacts/{contact_id}/topics",
      "POST /contacts/imports", "GET /contacts/imports", "GET /contacts/imports/{id}",
      ...["/topics", "/contact-properties", "/templates"].flatMap((b) => [`POST ${b}`, `GET ${b}`, `GET ${b}/{id}`, `PATCH ${b}/{id}`, `DELETE ${b}/{id}`]),
      "POST /templates/{id}/publish", "POST /templates/{id}/duplicate",
      "POST /broadcasts", "GET /broadcasts", "GET /broadcasts/{id}", "PATCH /broadcasts/{id}", "DELETE /broadcasts/{id}",
      "POST /broadcasts/{id}/send", "POST /broadcasts/{id}/cancel", "POST /broadcasts/{id}/duplicate", "GET /broadcasts/{id}/recipients", "GET /broadcasts/{id}/clicked-links",
    ]));
    const create = doc.components.schemas.CreateDomainRequest!;
    expect(Object.keys(create.properties!).sort()).toEqual(Object.keys(CreateDomainRequest.shape).sort());
    expect(create.required).toEqual(["name"]);
    const send = doc.components.schemas.SendEmailRequest!;
    expect(Object.keys(send.properties!).sort()).toEqual(Object.keys(SendEmailRequest.shape).sort());
    expect(send.required!.sort()).toEqual(["from", "subject", "to"]);
  });
});

type Schema = { type?: string; required?: string[]; description?: string; properties?: Record<string, Schema>; additionalProperties?: Schema; anyOf?: Schema[]; items?: Schema; minLength?: number; maxLength?: number; minItems?: number; maxItems?: number; maxProperties?: number };
type Doc = { paths: Record<string, Record<string, { parameters?: { name: string; in: string; schema: Schema }[] }>>; components: { schemas: Record<string, Schema> } };

async function document(): Promise<Doc> {
  return (await (await exports.default.fetch("http://tern.test/openapi.json")).json()) as Doc;
}

/** The error validate() answers, or undefined when the input passes. */
function refusal(schema: Parameters<typeof validate>[0], input: unknown): ApiError | undefined {
  try {
    validate(schema, input);
    return undefined;
  } catch (err) {
    return err as ApiError;
  }
}

// Each limit is read from the document and tried on what enforces it, at the bound and one
// past it: the document and the API cannot disagree without one of these failing.
describe("the document states the limits the API enforces", () => {
  const email = { from: "a@example.com", to: "b@example.com", subject: "Hi", text: "Hello" };
  const headers = (n: number, value = "v") => Object.fromEntries(Array.from({ length: n }, (_, i) => [`X-Custom-${i}`, value]));

  it("custom headers: at most maxProperties of them, each value at most maxLength", async () => {
    const schema = (await document()).components.schemas.SendEmailRequest!.properties!.headers!;
    const most = schema.maxProperties!;
    const longest = schema.additionalProperties!.maxLength!;
    expect([most, longest]).toEqual([100, 2000]);
    expect(refusal(SendEmailRequest, { ...email, headers: headers(most) })).toBeUndefined();
    expect(refusal(SendEmailRequest, { ...email, headers: headers(most + 1) })?.message).toBe("`headers` must have at most 100 headers.");
    expect(refusal(SendEmailRequest, { ...email, headers: headers(1, "v".repeat(longest)) })).toBeUndefined();
    expect(refusal(SendEmailRequest, { ...email, headers: headers(1, "v".repeat(longest + 1)) })?.message).toBe("`headers.X-Custom-0` must be at most 2000 characters.");
  });

  it("scheduled_at: at most maxLength characters wherever a request takes it", async () => {
    const s = (await document()).components.schemas;
    const fields = [s.SendEmailRequest, s.RescheduleRequest, s.CreateBroadcastRequest, s.SendBroadcastRequest].map((r) => r!.properties!.scheduled_at!);
    const longest = fields[0]!.maxLength!;
    expect(longest).toBe(200);
    expect(fields.map((f) => f.maxLength)).toEqual([longest, longest, longest, longest]);
    const now = new Date();
    const at = parseScheduledAt("in 5 minutes".padEnd(longest, "x"), now);
    expect(at.ok || at.message).not.toMatch(/characters/);
    expect(parseScheduledAt("in 5 minutes".padEnd(longest + 1, "x"), now)).toEqual({ ok: false, message: "`scheduled_at` must be at most 200 characters." });
  });

  it("contact properties: at most maxProperties keys, string values at most maxLength", async () => {
    const s = (await document()).components.schemas;
    const schema = s.CreateContactRequest!.properties!.properties!;
    expect(s.UpdateContactRequest!.properties!.properties).toEqual(schema);
    const most = schema.maxProperties!;
    const longest = schema.additionalProperties!.anyOf!.find((b) => b.type === "string")!.maxLength!;
    expect([most, longest]).toEqual([100, 2000]);
    const keys = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, null]));
    expect(refusal(CreateContactRequest, { email: "c@example.com", properties: keys(most) })).toBeUndefined();
    expect(refusal(CreateContactRequest, { email: "c@example.com", properties: keys(most + 1) })?.message).toBe("`properties` may set at most 100 keys.");

    // Values are checked against the account's properties, so this one needs an account.
    const t = await createAccount();
    expect((await call(t, "POST", "/contact-properties", { key: "plan", type: "string" })).status).toBe(201);
    expect((await call(t, "POST", "/contacts", { email: "c1@example.com", properties: { plan: "x".repeat(longest) } })).status).toBe(201);
    expect(await call(t, "POST", "/contacts", { email: "c2@example.com", properties: { plan: "x".repeat(longest + 1) } })).toEqual({
      status: 422, body: { statusCode: 422, name: "validation_error", message: "`properties.plan` must be at most 2000 characters." },
    });
  });

  it("POST /broadcasts: segment_id (or audience_id) is required besides from and subject, as the description says", async () => {
    const schema = (await document()).components.schemas.CreateBroadcastRequest!;
    expect(schema.required).toEqual(["from", "subject"]);
    expect(schema.description).toMatch(/`segment_id` \(or its older name `audience_id`\) are required/);
    expect(schema.properties!.segment_id!.description).toMatch(/Required/);
    const draft = { from: "a@example.com", subject: "News" };
    const missing = refusal(CreateBroadcastRequest, draft);
    expect([missing?.errorName, missing?.message]).toEqual(["missing_required_field", "Missing `segment_id` field."]);
    expect(refusal(CreateBroadcastRequest, { ...draft, segment_id: "01928f3e-7b1c-7cc0-9c3a-4d1a2b3c4d5e" })).toBeUndefined();
    expect(refusal(CreateBroadcastRequest, { ...draft, audience_id: "01928f3e-7b1c-7cc0-9c3a-4d1a2b3c4d5e" })).toBeUndefined();
  });

  it("Idempotency-Key: minLength to maxLength characters, on both send routes", async () => {
    const doc = await document();
    const params = ["/emails", "/emails/batch"].map((p) => doc.paths[p]!.post!.parameters!.find((x) => x.name === "idempotency-key" && x.in === "header")!.schema);
    expect(params[1]).toEqual(params[0]);
    const { minLength, maxLength } = params[0]!;
    expect([minLength, maxLength]).toEqual([1, 256]);
    expect(() => checkKey("k".repeat(minLength!))).not.toThrow();
    expect(() => checkKey("k".repeat(maxLength!))).not.toThrow();
    for (const bad of ["k".repeat(minLength! - 1), "k".repeat(maxLength! + 1)]) {
      expect(() => checkKey(bad)).toThrow(expect.objectContaining({ errorName: "invalid_idempotency_key", status: 400, message: "The idempotency key must be 1 to 256 characters long." }));
    }
  });

  it("webhook events: minItems to maxItems event types", async () => {
    const s = (await document()).components.schemas;
    const events = s.CreateWebhookRequest!.properties!.events!;
    expect(s.UpdateWebhookRequest!.properties!.events).toEqual(events);
    expect([events.minItems, events.maxItems]).toEqual([1, WEBHOOK_EVENT_TYPES.length]);
    const endpoint = "https://example.com/hook";
    expect(refusal(CreateWebhookRequest, { endpoint, events: [] })?.message).toBe("`events` must name at least one event type.");
    expect(refusal(CreateWebhookRequest, { endpoint, events: [...WEBHOOK_EVENT_TYPES] })).toBeUndefined();
    expect(refusal(CreateWebhookRequest, { endpoint, events: [...WEBHOOK_EVENT_TYPES, "email.sent"] })?.message).toBe(`\`events\` must have at most ${WEBHOOK_EVENT_TYPES.length} items.`);
  });

  it("a domain name: at most maxLength characters (DNS's 253, less what its DKIM record's name adds)", async () => {
    const longest = (await document()).components.schemas.CreateDomainRequest!.properties!.name!.maxLength!;
    expect(longest).toBe(229);
    const name = (n: number) => `${"a".repeat(62)}.`.repeat(4).slice(0, n - 4) + ".com";
    expect(normaliseDomainName(name(longest))).toBe(name(longest));
    const acct = await createAccount();
    const over = await call(acct, "POST", "/domains", { name: name(longest + 1) });
    expect(over.status).toBe(422);
    expect((over.body as { message: string }).message).toMatch(/at most 229 characters/);
  });

  it("an attachment's filename and content_id: at most maxLength characters", async () => {
    const fields = (await document()).components.schemas.Attachment!.properties!;
    const [filename, contentId] = [fields.filename!.maxLength!, fields.content_id!.maxLength!];
    expect([filename, contentId, fields.inline_content_id!.maxLength]).toEqual([255, 127, 127]);
    const fetcher = createOutboundFetcher({ allowPrivate: false, allowHttp: false, maxBytes: 1024, timeoutMs: 1_000, maxRedirects: 0 });
    const attach = (extra: Record<string, string>) => resolveAttachment({ content: "aGk=", ...extra }, 0, fetcher);
    expect((await attach({ filename: "f".repeat(filename) })).ok).toBe(true);
    expect(await attach({ filename: "f".repeat(filename + 1) })).toMatchObject({ ok: false, message: "`attachments[0].filename` must be at most 255 characters." });
    expect((await attach({ content_id: "c".repeat(contentId) })).ok).toBe(true);
    expect(await attach({ content_id: "c".repeat(contentId + 1) })).toMatchObject({ ok: false, message: "`attachments[0].content_id` must be shorter than 128 characters." });
  });
});

describe("GET /docs", () => {
  it("serves Scalar's reference from tern itself, under a CSP that lets the page reach tern alone", async () => {
    const res = await exports.default.fetch("http://tern.test/docs");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/text\/html/);
    const csp = res.headers.get("content-security-policy")!;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toContain("script-src 'self'");
    const html = await res.text();
    const scripts = [...html.matchAll(/<script[^>]*src="([^"]+)"/g)].map((m) => m[1]!);
    expect(scripts.map((s) => s.split("?")[0])).toEqual(["/docs/scalar.js", "/docs/init.js"]);
    expect(html).not.toMatch(/<script(?![^>]*src=)/); // no inline script
    expect(html).not.toMatch(/https?:\/\//); // nothing from elsewhere

    // /docs/scalar.js is a static asset (test/e2e/resend-client.test.ts fetches it from wrangler dev).
    const init = await (await exports.default.fetch(`http://tern.test${scripts[1]}`)).text();
    const config = JSON.parse(init.slice(init.indexOf("{"), init.lastIndexOf("}") + 1)) as Record<string, unknown>;
    expect(config).toMatchObject({ url: "/openapi.json", proxyUrl: "", servers: [{ url: "http://tern.test" }], withDefaultFonts: false, telemetry: false, persistAuth: false });
  });
});

describe("unexpected failures", () => {
  it("answer 500 application_error in the contract's shape, without internals", async () => {
    const app = newApp();
    defineRoute(app, "none", { method: "get", path: "/boom", responses: {}, hidden: true }, () => {
      throw new TypeError("secret internal detail at /worker/x.ts:12");
    });
    const logged = vi.spyOn(console, "error").mockImplementation(() => {});
    const res = await app.request("/boom");
    const lines = logged.mock.calls.map(([line, cause]) => [line, String(cause)]);
    logged.mockRestore();
    expect(res.status).toBe(500);
    const body = (await res.json()) as { message: string };
    const ref = body.message.match(/reference ([0-9a-f]{8})/)?.[1];
    expect(body).toEqual({ statusCode: 500, name: "application_error", message: `An unexpected error occurred (reference ${ref}). Please try again later; if it keeps happening, give the operator this reference.` });
    expect(JSON.stringify(body)).not.toMatch(/secret|worker\/x/);
    // The reference marks the log line that holds the cause.
    expect(lines).toContainEqual([`unexpected error ref=${ref}`, expect.stringContaining("secret internal detail")]);
  });
});
