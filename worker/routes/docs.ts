// GET /openapi.json (generated from the zod schemas that validate requests) and a readable
// API reference page rendered from the same document.
import type { App } from "../app.ts";
import { renderReference } from "../reference-page.ts";

export const OPENAPI_INFO = {
  openapi: "3.1.0",
  info: {
    title: "tern API",
    version: "1.0.0",
    description: "Transactional email on Cloudflare Workers, wire-compatible with Resend's REST API.",
  },
};

export function openApiDocument(app: App) {
  return app.getOpenAPI31Document(OPENAPI_INFO) as unknown as Record<string, unknown>;
}

export function registerDocRoutes(app: App): void {
  // A bare JSON route: liveness for load balancers, and the baseline the benchmarks compare to.
  app.get("/health", (c) => c.json({ ok: true }));
  app.get("/openapi.json", (c) => c.json(openApiDocument(app)));
  app.get("/docs", (c) => c.html(renderReference(openApiDocument(app))));
  app.get("/", (c) => c.redirect("/docs"));
}
