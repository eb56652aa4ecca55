// The OpenAPI document is generated from the zod schemas that validate requests, and the
// reference page is rendered from it; unexpected failures answer the contract's 500.
import { exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { defineRoute, newApp } from "../../worker/app.ts";
import { CreateDomainRequest } from "../../worker/routes/domains.ts";
import { SendEmailRequest } from "../../worker/sending/request.ts";

describe("GET /openapi.json", () => {
  it("documents every route with the request schemas used for validation", async () => {
    const res = await exports.default.fetch("http://tern.test/openapi.json");
    expect(res.status).toBe(200);
    const doc = (await res.json()) as { openapi: string; paths: Record<string, Record<string, unknown>>; components: { schemas: Record<string, { properties?: Record<string, unknown>; required?: string[] }> } };
    expect(doc.openapi).toBe("3.1.0");
    const ops = Object.entries(doc.paths).flatMap(([p, m]) => Object.keys(m).map((x) => `${x.toUpperCase()} ${p}`)).sort();
    expect(ops).toEqual([
      "DELETE /api-keys/{id}", "DELETE /domains/{id}", "DELETE /webhooks/{id}", "GET /api-keys", "GET /domains", "GET /domains/{id}",
      "GET /emails", "GET /emails/receiving", "GET /emails/receiving/{id}", "GET /emails/receiving/{id}/attachments/{attachment_id}",
      "GET /emails/receiving/{id}/raw", "GET /emails/{id}", "GET /emails/{id}/events",
      "GET /webhooks", "GET /webhooks/{id}", "GET /webhooks/{id}/events", "GET /webhooks/{id}/events/{event_id}",
      "GET /webhooks/{id}/events/{event_id}/attempts", "PATCH /domains/{id}", "PATCH /emails/{id}", "PATCH /webhooks/{id}",
      "POST /api-keys", "POST /domains", "POST /domains/{id}/dkim/rotate", "POST /domains/{id}/verify",
      "POST /emails", "POST /emails/batch", "POST /emails/{id}/cancel",
      "POST /webhooks", "POST /webhooks/{id}/events/{event_id}/replay", "POST /webhooks/{id}/signing-secret/rotate",
      "POST /contacts", "GET /contacts", "GET /contacts/{id}", "PATCH /contacts/{id}", "DELETE /contacts/{id}",
      "GET /suppressions", "POST /suppressions", "DELETE /suppressions", "DELETE /suppressions/{id}",
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
    ].sort());
    const create = doc.components.schemas.CreateDomainRequest!;
    expect(Object.keys(create.properties!).sort()).toEqual(Object.keys(CreateDomainRequest.shape).sort());
    expect(create.required).toEqual(["name"]);
    const send = doc.components.schemas.SendEmailRequest!;
    expect(Object.keys(send.properties!).sort()).toEqual(Object.keys(SendEmailRequest.shape).sort());
    expect(send.required!.sort()).toEqual(["from", "subject", "to"]);
  });
});

describe("GET /docs", () => {
  it("renders a readable reference of every route, with no scripts", async () => {
    const res = await exports.default.fetch("http://tern.test/docs");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/text\/html/);
    const html = await res.text();
    expect(html).toContain("<code>/emails/batch</code>");
    expect(html).toContain("scheduled_at");
    expect(html).not.toMatch(/<script/i);
  });
});

describe("unexpected failures", () => {
  it("answer 500 application_error in the contract's shape, without internals", async () => {
    const app = newApp();
    defineRoute(app, "none", { method: "get", path: "/boom", responses: {}, hidden: true }, () => {
      throw new TypeError("secret internal detail at /worker/x.ts:12");
    });
    const res = await app.request("/boom");
    expect(res.status).toBe(500);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toEqual({ statusCode: 500, name: "application_error", message: "An unexpected error occurred. Please try again later." });
  });
});
