// The Hono app: one place for errors, 404/405, authentication and the OpenAPI registry.
// Routes are declared with defineRoute: the same zod-openapi definition documents the route
// and, through validate(), checks its input.
import { OpenAPIHono, type RouteConfig } from "@hono/zod-openapi";
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import { authenticate, requireFullAccess, type Principal } from "./auth.ts";
import { MasterKeyMissingError } from "./crypto/master-key.ts";
import { ApiError, errorResponse, unexpectedError } from "./errors.ts";
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

const knownPaths: { pattern: RegExp; methods: Set<string> }[] = [];

// A path parameter is a resource id (a UUID) unless its route says otherwise, so
// `/emails/batch` never reads as an id.
const ID = "[0-9a-fA-F-]{36}";

function toHonoPath(openapiPath: string, param: string): string {
  return openapiPath.replace(/\{(\w+)\}/g, `:$1{${param}}`);
}

function recordPath(path: string, method: string, param: string): void {
  const source = "^" + path.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\\?\{\w+\\?\}/g, param) + "/?$";
  let entry = knownPaths.find((k) => k.pattern.source === source);
  if (!entry) knownPaths.push((entry = { pattern: new RegExp(source), methods: new Set() }));
  entry.methods.add(method.toUpperCase());
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
  app.notFound((c) => {
    const path = new URL(c.req.url).pathname;
    const known = knownPaths.find((k) => k.pattern.test(path));
    if (known && !known.methods.has(c.req.method.toUpperCase())) {
      const allow = [...known.methods].join(", ");
      return errorResponse(new ApiError("method_not_allowed", `Method ${c.req.method} is not allowed on ${path}. Allowed: ${allow}.`), { allow });
    }
    return errorResponse(new ApiError("not_found", "The requested endpoint could not be found."));
  });
  return app;
}
