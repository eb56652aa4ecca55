// The Hono app: one place for errors, 404/405, authentication and the OpenAPI registry.
// Routes are declared with defineRoute: the same zod-openapi definition documents the route
// and, through validate(), checks its input.
import { OpenAPIHono, type RouteConfig } from "@hono/zod-openapi";
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import { authenticate, requireFullAccess, type Principal } from "./auth.ts";
import { MasterKeyMissingError } from "./crypto/master-key.ts";
import { ApiError, echoed, errorResponse, unexpectedError } from "./errors.ts";
import { isLogRead, readAnswer, writeLog, type SendLog } from "./logs/record.ts";
import { rateHeaders, takeRequest } from "./rate-limit.ts";

/** The response header that names the authenticated key's account. */
export const ACCOUNT_HEADER = "tern-account-id";

export type AppEnv = { Bindings: Env; Variables: { principal: Principal; /** Set by a send that logs itself in its own batch. */ sendLog?: SendLog } };
export type App = OpenAPIHono<AppEnv>;
export type Ctx = Context<AppEnv>;

/** full: full_access keys only; sending: any key; none: public; link-or-full: public with a
 * signed link's `signature` query (the link is the credential), full otherwise. */
export type Access = "full" | "sending" | "none" | "link-or-full";

/** Every path the API routes, with the methods it answers: for 405s (every method the path
 * has, whichever route declared it) and for ids of the wrong shape (see unroutedAnswer). */
interface KnownPath {
  /** Its parameters as the routes match them (a UUID unless a route says otherwise). */
  pattern: RegExp;
  /** Any value in each parameter: a path that matches only this way has a malformed id. */
  loose: RegExp;
  /** The path's parts: a literal, or a parameter (null). */
  parts: (string | null)[];
  paramPattern: string;
  methods: Set<string>;
}
const knownPaths = new Map<string, KnownPath>();

// A path parameter is a resource id (a UUID) unless its route says otherwise, so
// `/emails/batch` never reads as an id.
const ID = "[0-9a-fA-F-]{36}";

function toHonoPath(openapiPath: string, param: string): string {
  return openapiPath.replace(/\{(\w+)\}/g, `:$1{${param}}`);
}

const pathSource = (path: string, param: string) =>
  "^" + path.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\\?\{\w+\\?\}/g, `(${param})`) + "/?$";

function recordPath(path: string, method: string, param: string): void {
  const key = `${path} ${param}`;
  let entry = knownPaths.get(key);
  if (!entry) {
    const parts = path.split("/").slice(1).map((p) => (/^\{\w+\}$/.test(p) ? null : p));
    knownPaths.set(key, (entry = { pattern: new RegExp(pathSource(path, param)), loose: new RegExp(pathSource(path, "[^/]+")), parts, paramPattern: param, methods: new Set() }));
  }
  entry.methods.add(method.toUpperCase());
}

/** What the resource behind a path segment is called in its not-found message. */
const RESOURCE_NAMES: Record<string, string> = {
  emails: "Email", receiving: "Received email", attachments: "Attachment", domains: "Domain",
  "api-keys": "API key", webhooks: "Webhook", events: "Webhook event", contacts: "Contact",
  imports: "Contact import", segments: "Segment", audiences: "Audience", topics: "Topic",
  "contact-properties": "Contact property", templates: "Template", broadcasts: "Broadcast",
  suppressions: "Suppression", logs: "Log", shared: "Shared email",
};

/** The answer to a request no route took: 405 naming every method of a known path; the
 * resource's own 404 when the path is known but an id in it is not an id (`/emails/abc`),
 * saying what an id looks like; otherwise the contract's "no such endpoint". */
export function unroutedAnswer(method: string, path: string): Response {
  const all = [...knownPaths.values()];
  const exact = all.filter((k) => k.pattern.test(path));
  const loose = exact.length > 0 ? exact : all.filter((k) => k.loose.test(path));
  const methods = new Set(loose.flatMap((k) => [...k.methods]));
  if (loose.length > 0 && !methods.has(method.toUpperCase())) {
    const allow = [...methods].sort().join(", ");
    return errorResponse(new ApiError("method_not_allowed", `Method ${method} is not allowed on ${echoed(path)}. Allowed: ${allow}.`), { allow });
  }
  if (exact.length === 0 && loose.length > 0) {
    // The most specific template (most literal parts) that answers this method.
    const known = loose.filter((k) => k.methods.has(method.toUpperCase()))
      .sort((a, b) => b.parts.filter(Boolean).length - a.parts.filter(Boolean).length)[0]!;
    const segments = path.split("/").slice(1);
    const strict = new RegExp(`^(${known.paramPattern})$`);
    const i = known.parts.findIndex((p, j) => p === null && !strict.test(segments[j] ?? ""));
    if (i >= 0) {
      const name = RESOURCE_NAMES[known.parts[i - 1] ?? ""] ?? "Resource";
      return errorResponse(new ApiError("not_found", `${name} not found: ids are UUIDs, and \`${echoed(decoded(segments[i]!))}\` is not one.`));
    }
  }
  return errorResponse(new ApiError("not_found", "The requested endpoint could not be found."));
}

function decoded(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

export function defineRoute(
  app: App,
  access: Access,
  config: RouteConfig & { hidden?: boolean; /** What its path parameters match instead of a UUID (a regular expression's source). */ paramPattern?: string },
  handler: (c: Ctx) => Promise<Response> | Response,
): void {
  const { paramPattern = ID, ...route } = config;
  if (!config.hidden) {
    app.openAPIRegistry.registerPath({
      ...route,
      security: access === "none" ? [] : access === "link-or-full" ? [{ bearerAuth: [] }, {}] : [{ bearerAuth: [] }],
    });
  }
  recordPath(config.path, config.method, paramPattern);
  app.on(config.method.toUpperCase(), toHonoPath(config.path, paramPattern), async (c) => {
    if (access === "none" || (access === "link-or-full" && c.req.query("signature") !== undefined)) return handler(c);
    const principal = await authenticate(c.env.DB, c.req.header("authorization"), (p) => c.executionCtx.waitUntil(p));
    if (access === "full" || access === "link-or-full") {
      try {
        requireFullAccess(principal);
      } catch (err) {
        // A sending key is still a good key of its account: say which (see below).
        const refused = errorToResponse(err);
        refused.headers.set(ACCOUNT_HEADER, principal.accountId);
        return refused;
      }
    }
    c.set("principal", principal);
    const headers = rateHeaders(await takeRequest(c.env, principal));
    let res: Response;
    try {
      res = await handler(c);
    } catch (err) {
      res = errorToResponse(err);
    }
    for (const [k, v] of Object.entries(headers)) res.headers.set(k, v);
    // The key's account, for clients that share limits per account (the SMTP bridge's slots).
    // The caller holds a key of that account, so this tells it nothing it could not ask for.
    res.headers.set(ACCOUNT_HEADER, principal.accountId);
    if (c.get("sendLog")?.written || isLogRead(c.req.raw)) return res;
    const answer = await readAnswer(res);
    afterAnswer(c, writeLog(c.env.DB, { req: c.req.raw, principal }, answer.res.status, answer.text));
    return answer.res;
  });
}

/** Work that finishes after the answer; without an execution context (app.request in a
 * unit test) it simply runs. */
function afterAnswer(c: Ctx, work: Promise<unknown>): void {
  try {
    c.executionCtx.waitUntil(work);
  } catch {
    void work;
  }
}

function errorToResponse(err: unknown): Response {
  if (err instanceof ApiError) return errorResponse(err);
  if (err instanceof MasterKeyMissingError) {
    // An operator's omission, not a bug: say what is missing (the secret's name, not a value).
    console.error(err.message);
    return errorResponse(new ApiError("application_error", "This deployment has no MASTER_KEY secret configured, which keys, webhooks and links need. See the README, Configuration."));
  }
  if (err instanceof HTTPException && err.status < 500) {
    return errorResponse(new ApiError("validation_error", err.message || "The request is invalid.", err.status));
  }
  return errorResponse(unexpectedError(err));
}

export function newApp(): App {
  // strict: false: a trailing slash names the same route (resend-rust lists a contact's
  // segments at `/contacts/{id}/segments/`).
  const app = new OpenAPIHono<AppEnv>({ strict: false });
  app.openAPIRegistry.registerComponent("securitySchemes", "bearerAuth", {
    type: "http",
    scheme: "bearer",
    description: "An API key: `Authorization: Bearer tern_...`",
  });
  app.onError(errorToResponse);
  app.notFound((c) => unroutedAnswer(c.req.method, new URL(c.req.url).pathname));
  return app;
}
