// Domains (contract section 5): create with a DKIM key pair, list, read, change tracking/TLS/
// receiving, delete, verify over DNS, rotate the DKIM key.
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App, type Ctx } from "../app.ts";
import { readConfig } from "../config.ts";
import {
  checkDomain,
  createDomain,
  deleteDomain,
  domainView,
  findDomain,
  listDomains,
  MAX_SENDING_DOMAIN_NAME,
  patchDomain,
  rotateDkim,
  type DomainWithKeys,
} from "../domains/service.ts";
import { AUTO_CONFIGURE_RESULTS, autoConfigureDomain } from "../domains/auto-configure.ts";
import { DOMAIN_STATUSES, RECORD_STATUSES } from "../domains/verification.ts";
import { dropPathId, readJson, validate } from "../http.ts";
import { ApiError } from "../errors.ts";
import { ListQuery, listSchema, readPage } from "../pagination.ts";
import { DeletedSchema, errorResponses, IdParam, json, jsonBody } from "./schemas.ts";

import { REGIONS } from "../regions.ts";

/** DNS's own limit on a name, without its final dot. */
const MAX_DOMAIN_NAME_LENGTH = 253;

/** A DNS name as tern stores it: lower case, A-labels, at least two labels, no IP address. */
export function normaliseDomainName(input: string): string | null {
  const trimmed = input.trim().replace(/\.$/, "").toLowerCase();
  // A percent-escape is decoded by the URL parser ("ex%61mple.org" would become example.org).
  if (trimmed === "" || trimmed.length > MAX_DOMAIN_NAME_LENGTH || /[\s/@:?#\\%]/.test(trimmed)) return null;
  let host: string;
  try {
    host = new URL(`http://${trimmed}/`).hostname;
  } catch {
    return null;
  }
  const labels = host.split(".");
  if (labels.length < 2 || host.length > MAX_DOMAIN_NAME_LENGTH) return null;
  if (!labels.every((l) => /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/.test(l))) return null;
  if (/^\d+$/.test(labels.at(-1)!)) return null; // an IPv4 address, or a numeric TLD
  return host;
}

const ReturnPath = z
  .string()
  .trim()
  .toLowerCase()
  .regex(/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/, "`custom_return_path` must be a subdomain label such as `send` or `bounces`.")
  .max(63, "`custom_return_path` must be at most 63 characters.");

/** Resend's tracking subdomain: a DNS label. Once its Tracking record is verified (the CNAME, and
 * where tern manages custom hostnames the host's certificate), the domain's open and click links
 * use that host instead of the deployment's PUBLIC_URL. */
const TrackingSubdomain = z
  .string({ error: "`tracking_subdomain` must be a string." })
  .trim()
  .toLowerCase()
  .regex(/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/, "`tracking_subdomain` must be a single DNS label such as `links`.")
  .openapi({ description: "The label of the domain's own host for open and click links (`links`: links.<domain>). The domain's records then include a Tracking CNAME to the deployment's host; once it is verified, tracked links and the open pixel use https://<label>.<domain>. Where the deployment has Cloudflare issue the host's certificate, the Tracking record stays `pending` until that certificate is active too (`failed` if Cloudflare gives up on it). Until then they use the deployment's PUBLIC_URL." });

const Capability = z.enum(["enabled", "disabled"], { error: "a capability must be `enabled` or `disabled`." });
/** Resend's form of receiving; sending cannot be turned off for a tern domain (delete it instead). */
const Capabilities = z
  .object({
    sending: z.literal("enabled", { error: "`capabilities.sending` must be `enabled`: tern cannot turn sending off for a domain (delete the domain instead)." }).optional(),
    receiving: Capability.optional(),
  })
  .strict();

const Tls = z.enum(["opportunistic", "enforced"], { error: "`tls` must be `opportunistic` or `enforced`." });

export const CreateDomainRequest = z
  .object({
    name: z
      .string({ error: "`name` must be a string." })
      .transform((s, ctx) => {
        const n = normaliseDomainName(s);
        if (!n) {
          ctx.addIssue({ code: "custom", message: "`name` must be a domain name such as `example.com`." });
          return z.NEVER;
        }
        return n;
      })
      .openapi({ type: "string", maxLength: MAX_SENDING_DOMAIN_NAME, description: `A domain name of at least two labels, each at most 63 characters, and at most ${MAX_SENDING_DOMAIN_NAME} in all (its DKIM record's name must fit DNS's 253).`, example: "example.com" }),
    region: z.enum(REGIONS, { error: `\`region\` must be one of ${REGIONS.join(", ")}.` }).default("us-east-1"),
    custom_return_path: ReturnPath.default("send"),
    open_tracking: z.boolean({ error: "`open_tracking` must be a boolean." }).default(false),
    click_tracking: z.boolean({ error: "`click_tracking` must be a boolean." }).default(false),
    tls: Tls.default("opportunistic"),
    receiving: z.boolean({ error: "`receiving` must be a boolean." }).default(false),
    capabilities: Capabilities.optional(),
    tracking_subdomain: TrackingSubdomain.optional(),
    dkim_algorithm: z
      .enum(["rsa", "ed25519", "rsa+ed25519"], { error: "`dkim_algorithm` must be `rsa`, `ed25519` or `rsa+ed25519`." })
      .default("rsa")
      .openapi({ description: "rsa: RSA 2048. ed25519: Ed25519 only (some receivers cannot check it). rsa+ed25519: both sign." }),
  })
  .openapi("CreateDomainRequest");

export const UpdateDomainRequest = z
  .object({
    open_tracking: z.boolean({ error: "`open_tracking` must be a boolean." }).optional(),
    click_tracking: z.boolean({ error: "`click_tracking` must be a boolean." }).optional(),
    tls: Tls.optional(),
    receiving: z.boolean({ error: "`receiving` must be a boolean." }).optional(),
    capabilities: Capabilities.optional(),
    // null takes the tracking host away (links go through PUBLIC_URL again).
    tracking_subdomain: TrackingSubdomain.nullable().optional(),
  })
  .strict()
  .openapi("UpdateDomainRequest");

export const RotateDkimRequest = z
  .object({ algorithm: z.enum(["rsa", "ed25519"], { error: "`algorithm` must be `rsa` or `ed25519`." }).optional() })
  .openapi("RotateDkimRequest");

/** A Cloudflare API token as Cloudflare makes them (40 characters today); any printable text
 * without spaces is let through to Cloudflare, which judges it. The token is never echoed: every
 * message here is fixed. */
const CloudflareToken = z
  .string({ error: "`api_token` must be a string: a Cloudflare API token." })
  .trim()
  .min(20, "`api_token` is too short to be a Cloudflare API token: paste the whole token.")
  .max(512, "`api_token` is too long to be a Cloudflare API token.")
  .regex(/^[\x21-\x7e]+$/, "`api_token` must be a Cloudflare API token: printable characters without spaces.")
  .openapi({ description: "A Cloudflare API token with the permission Zone > DNS > Edit on the zone that holds the domain (the \"Edit zone DNS\" template). Used for this request only: never stored, logged or repeated." });

export const AutoConfigureRequest = z
  .object({
    provider: z.literal("cloudflare", { error: "`provider` must be `cloudflare`: the only DNS host tern sets records up at." }),
    api_token: CloudflareToken,
  })
  .strict()
  .openapi("AutoConfigureDomainRequest");

const DomainRecord = z
  .object({
    record: z.enum(["DKIM", "SPF", "Receiving", "Tracking"]),
    name: z.string(),
    type: z.enum(["TXT", "MX", "CNAME"]),
    ttl: z.literal("Auto"),
    status: z.enum(RECORD_STATUSES),
    value: z.string(),
    priority: z.number().int().optional(),
  })
  .openapi("DomainRecord");

const Domain = z
  .object({
    object: z.literal("domain"),
    id: z.string(),
    name: z.string(),
    status: z.enum(DOMAIN_STATUSES),
    created_at: z.string(),
    region: z.enum(REGIONS),
    custom_return_path: z.string(),
    open_tracking: z.boolean(),
    click_tracking: z.boolean(),
    tls: z.enum(["opportunistic", "enforced"]),
    receiving: z.boolean(),
    capabilities: z.object({ sending: Capability, receiving: Capability }),
    tracking_subdomain: z.string().nullable(),
    records: z.array(DomainRecord),
    dmarc: z
      .object({
        found: z.boolean(),
        policy: z.enum(["none", "quarantine", "reject"]).nullable(),
        record: z.string().nullable(),
        inherited: z.boolean(),
      })
      .nullable()
      .openapi({ description: "What the last check found at _dmarc (recommended, not required)." }),
  })
  .openapi("Domain");

const AutoConfigured = z
  .object({
    object: z.literal("domain_auto_configure"),
    id: z.string(),
    zone: z.object({ id: z.string(), name: z.string(), status: z.string().nullable().openapi({ description: "Cloudflare's status of the zone: one not `active` (its nameservers not yet Cloudflare's) holds the records but serves none." }) }),
    records: z.array(z.object({
      record: z.enum(["DKIM", "SPF", "Receiving", "Tracking", "DMARC"]),
      name: z.string(),
      type: z.enum(["TXT", "MX", "CNAME"]),
      value: z.string(),
      priority: z.number().int().optional(),
      result: z.enum(AUTO_CONFIGURE_RESULTS),
      detail: z.string().optional().openapi({ description: "conflict: what is there and what to change by hand; failed: Cloudflare's error; skipped: why nothing was done." }),
    })),
    domain: Domain,
  })
  .openapi("DomainAutoConfigure");

const DomainItem = z
  .object({
    id: z.string(), name: z.string(), status: z.enum(DOMAIN_STATUSES), created_at: z.string(), region: z.string(),
    open_tracking: z.boolean(), click_tracking: z.boolean(), capabilities: z.object({ sending: Capability, receiving: Capability }),
  })
  .openapi("DomainListItem");

/** `receiving`, or Resend's `capabilities.receiving`; the two must agree when both are given. */
function receivingOf(body: { receiving?: boolean; capabilities?: { receiving?: "enabled" | "disabled" } }): boolean | undefined {
  const cap = body.capabilities?.receiving;
  if (cap === undefined) return body.receiving;
  if (body.receiving !== undefined && body.receiving !== (cap === "enabled")) {
    throw new ApiError("validation_error", "`receiving` and `capabilities.receiving` disagree: give one of them.");
  }
  return cap === "enabled";
}

async function domainOr404(c: Ctx): Promise<DomainWithKeys> {
  return findDomain(c.env.DB, c.get("principal").accountId, c.req.param("id")!);
}

export function registerDomainRoutes(app: App): void {
  defineRoute(
    app,
    "full",
    createRoute({
      method: "post",
      path: "/domains",
      tags: ["Domains"],
      summary: "Add a domain",
      description: "Creates the domain with a DKIM key pair and answers the DNS records to publish.",
      request: jsonBody(CreateDomainRequest),
      responses: { 201: json(Domain, "The new domain and its records"), ...errorResponses(400, 401, 403, 422) },
    }),
    async (c) => {
      const body = validate(CreateDomainRequest, await readJson(c.req.raw));
      const config = readConfig(c.env);
      const view = await createDomain(c.env, config, c.get("principal").accountId, {
        name: body.name,
        region: body.region,
        customReturnPath: body.custom_return_path,
        openTracking: body.open_tracking,
        clickTracking: body.click_tracking,
        tls: body.tls,
        receiving: receivingOf(body) ?? false,
        trackingSubdomain: body.tracking_subdomain ?? null,
        dkimAlgorithm: body.dkim_algorithm,
      }, Date.now());
      return c.json(view, 201);
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/domains",
      tags: ["Domains"],
      summary: "List domains",
      request: { query: ListQuery },
      responses: { 200: json(listSchema(DomainItem), "Domains of the account, newest first"), ...errorResponses(401, 403, 422) },
    }),
    async (c) => {
      return c.json(await listDomains(c.env.DB, c.get("principal").accountId, readPage(c.req.query())));
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/domains/{id}",
      tags: ["Domains"],
      summary: "Retrieve a domain",
      request: { params: IdParam },
      responses: { 200: json(Domain, "The domain, its records and their status"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => c.json(domainView(await domainOr404(c), readConfig(c.env))),
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "patch",
      path: "/domains/{id}",
      tags: ["Domains"],
      summary: "Update a domain",
      description: "Open and click tracking, TLS, receiving, the tracking subdomain. Turning receiving on adds the Receiving MX record, and a new tracking subdomain its Tracking CNAME, checked at once.",
      request: { params: IdParam, ...jsonBody(UpdateDomainRequest) },
      responses: { 200: json(Domain, "The updated domain"), ...errorResponses(400, 401, 403, 404, 422) },
    }),
    async (c) => {
      const body = validate(UpdateDomainRequest, dropPathId(await readJson(c.req.raw), c.req.param("id")!, ["id", "domain_id"]));
      const config = readConfig(c.env);
      return c.json(await patchDomain(c.env, config, c.get("principal").accountId, c.req.param("id")!, {
        openTracking: body.open_tracking,
        clickTracking: body.click_tracking,
        tls: body.tls,
        receiving: receivingOf(body),
        trackingSubdomain: body.tracking_subdomain,
      }, Date.now()));
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "delete",
      path: "/domains/{id}",
      tags: ["Domains"],
      summary: "Delete a domain",
      description: "Its DKIM keys are destroyed; emails from it that are still waiting are failed, never sent unsigned.",
      request: { params: IdParam },
      responses: { 200: json(DeletedSchema, "Deleted"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const current = await domainOr404(c);
      await deleteDomain(c.env, readConfig(c.env), current, Date.now());
      return c.json({ object: "domain", id: current.row.id, deleted: true as const });
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "post",
      path: "/domains/{id}/verify",
      tags: ["Domains"],
      summary: "Verify a domain",
      description:
        "Checks every record over DNS now and answers the result. A domain not yet verified gets 72 hours to publish its records, re-checked on a schedule; calling this again starts a new window.",
      request: { params: IdParam },
      responses: { 200: json(Domain, "The domain after the check"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const config = readConfig(c.env);
      const checked = await checkDomain(c.env, config, await domainOr404(c), Date.now(), { restart: true });
      return c.json(domainView(checked, config));
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "post",
      path: "/domains/{id}/dkim/rotate",
      tags: ["Domains"],
      summary: "Rotate the DKIM key",
      description:
        "Adds a new DKIM key with a new selector. The current key keeps signing until the new record is published and verified; then the new key signs and the old one is retired (keep its DNS record a few days for mail in transit). The new key replaces the active key of its algorithm, or every active key when the domain did not sign with that algorithm yet (a switch from RSA to Ed25519).",
      request: { params: IdParam, body: { required: false, content: { "application/json": { schema: RotateDkimRequest } } } },
      responses: { 200: json(Domain, "The domain with the new key's record"), ...errorResponses(400, 401, 403, 404, 422) },
    }),
    async (c) => {
      const hasBody = (c.req.header("content-length") ?? "0") !== "0" || c.req.header("transfer-encoding");
      const body = hasBody ? validate(RotateDkimRequest, await readJson(c.req.raw)) : {};
      const config = readConfig(c.env);
      const current = await domainOr404(c);
      const rotated = await rotateDkim(c.env, config, current, body.algorithm, Date.now());
      return c.json(domainView(rotated, config));
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "post",
      path: "/domains/{id}/auto-configure",
      tags: ["Domains"],
      summary: "Set the domain's DNS records up at Cloudflare",
      description:
        "tern's extension of Resend's API. With a Cloudflare API token of the tenant's (permission Zone > DNS > Edit, used for this request only and never kept), finds the Cloudflare zone holding the domain and creates each record the domain needs that is missing (DKIM, SPF, Receiving and Tracking as `records` lists them, and the recommended DMARC record when no DMARC policy is published). A record already there is left; a different record in the way (another SPF record, a CNAME) is never overwritten or deleted but reported as a `conflict` with what to change by hand. Then the domain is checked as `POST /domains/{id}/verify` does. A token Cloudflare refuses, or one that sees no zone for the domain, is a 422 saying which permission to give; Cloudflare not answering is a 502.",
      request: { params: IdParam, ...jsonBody(AutoConfigureRequest) },
      responses: { 200: json(AutoConfigured, "What was done with each record, and the domain after its check"), ...errorResponses(400, 401, 403, 404, 422, 502) },
    }),
    async (c) => {
      const body = validate(AutoConfigureRequest, await readJson(c.req.raw));
      const config = readConfig(c.env);
      const current = await domainOr404(c);
      const done = await autoConfigureDomain(c.env, config, current, body.api_token, Date.now());
      return c.json(autoConfigureView(done, config));
    },
  );
}

/** The API's answer: the records without their full names (the domain's records do the same). */
export function autoConfigureView(done: Awaited<ReturnType<typeof autoConfigureDomain>>, config: ReturnType<typeof readConfig>) {
  return {
    object: "domain_auto_configure" as const,
    id: done.domain.row.id,
    zone: done.zone,
    records: done.records.map(({ fqdn: _fqdn, ...r }) => r),
    domain: domainView(done.domain, config),
  };
}
