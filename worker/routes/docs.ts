// GET /openapi.json (generated from the zod schemas that validate requests) and the
// interactive API reference at /docs: Scalar's renderer (@scalar/api-reference), served as a
// static asset (/docs/scalar.js, copied there by dev/build-reference.ts) so it works offline.
// Its CSP lets the page reach tern alone: "try it" sends the caller's key to this origin and
// nowhere else, no font, script or telemetry is fetched from elsewhere.
import type { App } from "../app.ts";
import { etag as scalarEtag } from "../generated/scalar-standalone.js";

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

export const REFERENCE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self' blob:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tern API reference</title>
</head>
<body>
<noscript><p>The API reference needs JavaScript. The OpenAPI document is at <a href="/openapi.json">/openapi.json</a>.</p></noscript>
<div id="app"></div>
<script src="/docs/scalar.js?v=${scalarEtag}"></script>
<script src="/docs/init.js?v=${scalarEtag}"></script>
</body>
</html>`;

// The configuration: the document is this origin's, requests go to this origin (no proxy),
// nothing is fetched from Scalar's services, and the key typed in is kept for the tab only.
const CONFIG = {
  url: "/openapi.json",
  proxyUrl: "",
  withDefaultFonts: false,
  hideClientButton: true,
  telemetry: false,
  persistAuth: false,
  agent: { disabled: true },
  mcp: { disabled: true },
  showDeveloperTools: "never",
  documentDownloadType: "json",
  authentication: { preferredSecurityScheme: "bearerAuth" },
  metaData: { title: "tern API reference" },
};

/** The page's configuration script; `origin` is the only server "try it" can call. */
export function referenceInit(origin: string): string {
  return `Scalar.createApiReference("#app", ${JSON.stringify({ ...CONFIG, servers: [{ url: origin, description: "This tern" }] })});\n`;
}

export function registerDocRoutes(app: App): void {
  // A bare JSON route: liveness for load balancers, and the baseline the benchmarks compare to.
  app.get("/health", (c) => c.json({ ok: true }));
  app.get("/openapi.json", (c) => c.json(openApiDocument(app)));
  const security = { "content-security-policy": REFERENCE_CSP, "x-content-type-options": "nosniff", "referrer-policy": "no-referrer" };
  app.get("/docs", (c) => c.html(PAGE, 200, security));
  app.get("/docs/init.js", (c) => new Response(referenceInit(new URL(c.req.url).origin), {
    headers: { ...security, "content-type": "text/javascript; charset=utf-8", "cache-control": "no-cache" },
  }));
  app.get("/", (c) => c.redirect("/docs"));
}
