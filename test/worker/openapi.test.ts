// The OpenAPI document is generated from the zod schemas that validate requests, and the
// reference page is rendered from it; unexpected failures answer the contract's 500.
import { exports } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
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
    // Every route is documented; test/worker/resend-parity.test.ts checks them against Resend's.
    expect(ops).toEqual(expect.arrayContaining([
      "DELETE /api-keys/{id}", "DELETE /domains/{id}", "DELETE /webhooks/{id}", "GET /api-keys", "GET /domains", "GET /domains/{id}",
      "GET /emails", "GET /emails/receiving", "GET /emails/receiving/{id}", "GET /emails/receiving/{id}/attachments/{attachment_id}",
      "GET /emails/receiving/{id}/raw", "GET /emails/{id}", "GET /emails/{id}/events", "GET /emails/metrics", "GET /emails/{id}/insights", "GET /account/health",
      "GET /webhooks", "GET /webhooks/{id}", "GET /webhooks/{id}/events", "GET /webhooks/{id}/events/{event_id}",
      "GET /webhooks/{id}/events/{event_id}/attempts", "PATCH /domains/{id}", "PATCH /emails/{id}", "PATCH /webhooks/{id}",
      "POST /api-keys", "POST /domains", "POST /domains/{id}/dkim/rotate", "POST /domains/{id}/verify",
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
