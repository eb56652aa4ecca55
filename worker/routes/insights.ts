// GET /emails/{id}/insights (tern's own, contract 9): the deliverability checks of one email.
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App } from "../app.ts";
import { readConfig } from "../config.ts";
import { ApiError } from "../errors.ts";
import { emailInsights } from "../insights/service.ts";
import { errorResponses, IdParam, json } from "./schemas.ts";

const Insight = z
  .object({
    id: z.string().openapi({ example: "dmarc_missing" }),
    status: z.enum(["passed", "warning", "failed"]),
    title: z.string(),
    detail: z.string().openapi({ description: "What was found and how to fix it, with the rule or requirement that weighs it." }),
  })
  .openapi("EmailInsight");

const InsightList = z.object({ object: z.literal("list"), data: z.array(Insight) }).openapi("EmailInsightList");

export function registerInsightRoutes(app: App): void {
  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/emails/{id}/insights",
      tags: ["Emails"],
      summary: "Deliverability insights of an email (tern's own)",
      description: "Checks of the stored message and its domain: Resend's insight ids (link_domain_mismatch, dmarc_missing, missing_text_part, no_reply_sender, large_body, url_shortener, root_domain_sender, shared_tracking_domain) and more, each passed, warning or failed.",
      request: { params: IdParam },
      responses: { 200: json(InsightList, "The checks"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const data = await emailInsights(c.env, readConfig(c.env), c.get("principal").accountId, c.req.param("id")!);
      if (!data) throw new ApiError("not_found", "Email not found.");
      return c.json({ object: "list" as const, data });
    },
  );
}
