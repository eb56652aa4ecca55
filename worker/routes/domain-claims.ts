// Domain claims (Resend's /domains/claim, /domains/{id}/claim, /domains/{id}/claim/verify):
// the rules are worker/domains/claims.ts's.
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App } from "../app.ts";
import { readConfig } from "../config.ts";
import { createClaim, getClaim, verifyClaim } from "../domains/claims.ts";
import { readJson, validate } from "../http.ts";
import { CreateDomainRequest } from "./domains.ts";
import { errorResponses, IdParam, json, jsonBody } from "./schemas.ts";

const DomainClaim = z
  .object({
    object: z.literal("domain_claim"),
    id: z.string(),
    name: z.string(),
    status: z.enum(["pending", "completed", "superseded", "expired"]),
    domain_id: z.string().openapi({ description: "The claimant's domain of that name (created by the claim when it had none)." }),
    region: z.string(),
    record: z.object({ type: z.literal("TXT"), name: z.string(), value: z.string(), ttl: z.string() }).openapi({ description: "Publish this TXT record at the domain's name, then verify the claim." }),
    blocked_reason: z.null(),
    failure_reason: z.null(),
    created_at: z.string(),
    expires_at: z.string(),
  })
  .openapi("DomainClaim");

export function registerDomainClaimRoutes(app: App): void {
  defineRoute(
    app,
    "full",
    createRoute({
      method: "post",
      path: "/domains/claim",
      tags: ["Domains"],
      summary: "Claim a domain another account holds",
      description:
        "Adds the domain to this account (fresh DKIM keys) when it is not there yet, and answers a TXT record to publish at its name. Verifying the claim once the record is published deletes every other account's copy of the domain. The body is that of POST /domains.",
      request: jsonBody(CreateDomainRequest),
      responses: { 201: json(DomainClaim, "Claim created"), 200: json(DomainClaim, "A pending claim of this name already existed"), ...errorResponses(400, 401, 403, 422) },
    }),
    async (c) => {
      const body = validate(CreateDomainRequest, await readJson(c.req.raw));
      const { created, claim } = await createClaim(c.env, readConfig(c.env), c.get("principal").accountId, {
        name: body.name,
        region: body.region,
        customReturnPath: body.custom_return_path,
        openTracking: body.open_tracking,
        clickTracking: body.click_tracking,
        tls: body.tls,
        receiving: body.receiving,
        trackingSubdomain: body.tracking_subdomain ?? null,
        dkimAlgorithm: body.dkim_algorithm,
      });
      return c.json(claim, created ? 201 : 200);
    },
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/domains/{id}/claim",
      tags: ["Domains"],
      summary: "Retrieve a domain's latest claim",
      request: { params: IdParam },
      responses: { 200: json(DomainClaim, "The claim"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => c.json(await getClaim(c.env.DB, c.get("principal").accountId, c.req.param("id")!)),
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "post",
      path: "/domains/{id}/claim/verify",
      tags: ["Domains"],
      summary: "Verify a domain claim",
      description:
        "Looks for the claim's TXT record now. Found: the other accounts' copies are deleted and the claim is `completed` (then publish this domain's DKIM records and verify it as usual). Not found yet: the claim stays `pending`.",
      request: { params: IdParam },
      responses: { 200: json(DomainClaim, "The claim after the check"), ...errorResponses(401, 403, 404, 422) },
    }),
    async (c) => c.json(await verifyClaim(c.env, readConfig(c.env), c.get("principal").accountId, c.req.param("id")!)),
  );
}
