// GET /emails/metrics (Resend's emails/metrics): counts and rates of the account's email events
// over a date range, optionally by period, domain, email or broadcast. The route reads the URL;
// worker/metrics/ checks the query and answers it.
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App } from "../app.ts";
import { DIMENSIONS, GRANULARITIES, METRICS, parseMetricsQuery } from "../metrics/query.ts";
import { emailMetrics } from "../metrics/service.ts";
import { accountHealth } from "../metrics/health.ts";
import { readConfig } from "../config.ts";
import { errorResponses, json } from "./schemas.ts";

const list = (description: string, values?: readonly string[]) =>
  z.string().optional().openapi({ description: `${description} Comma-separated, the parameter repeated, or both.${values ? ` Any of: ${values.join(", ")}.` : ""}` });

/** Documents the query; parseMetricsQuery validates it (lists may repeat, which a zod object
 * of the parsed query cannot see), with the same value lists. */
const MetricsQueryDoc = z.object({
  start_date: z.string().optional().openapi({ description: "ISO 8601 date or datetime; on or before end_date. A date is that day's start in `timezone`. Defaults to 6 days before end_date. Widened to a 15-minute edge.", example: "2026-07-01" }),
  end_date: z.string().optional().openapi({ description: "ISO 8601 date (the whole day) or datetime. Later than now is clamped to now. Defaults to now.", example: "2026-07-07" }),
  timezone: z.string().optional().openapi({ description: "IANA timezone periods are bucketed in (daylight saving included). Default UTC.", example: "America/New_York" }),
  granularity: z.enum(GRANULARITIES).optional().openapi({ description: "Period size when `period` is a dimension; at most 10,000 periods. Default daily." }),
  metrics: list("Metrics to answer; default all. Rates are fractions (0.25 is 25%).", METRICS),
  dimensions: list("Break the answer down by these; default none (totals only). `email` needs `email_id` and excludes `broadcast`.", DIMENSIONS),
  domain_id: list("Only these sending domains (up to 100)."),
  email_id: list("Only these emails (up to 100); not with `broadcast_id` or the broadcast dimension."),
  broadcast_id: list("Only these broadcasts (up to 100); not with `email_id` or the email dimension."),
});

const MetricsRow = z
  .object({
    period: z.string().optional(),
    domain_id: z.string().optional(),
    domain_name: z.string().nullable().optional(),
    email_id: z.string().optional(),
    broadcast_id: z.string().optional(),
  })
  .catchall(z.number())
  .openapi("EmailMetricsDataRow");

const MetricsResponse = z
  .object({
    object: z.literal("metrics"),
    start_date: z.string(),
    end_date: z.string(),
    metrics: z.array(z.enum(METRICS)),
    dimensions: z.array(z.enum(DIMENSIONS)),
    granularity: z.enum(GRANULARITIES),
    totals: z.record(z.string(), z.number()),
    data: z.array(MetricsRow).optional(),
  })
  .openapi("GetEmailsMetricsResponse");

const RateHealth = z.object({
  value: z.number(),
  warning: z.number(),
  limit: z.number(),
  status: z.enum(["healthy", "warning", "over_limit"]),
});

const AccountHealthResponse = z
  .object({
    object: z.literal("account_health"),
    window_start: z.string(),
    window_end: z.string(),
    window_days: z.number().int(),
    received: z.number().int(),
    sent: z.number().int(),
    bounced_permanent: z.number().int(),
    complained: z.number().int(),
    enough_volume: z.boolean(),
    bounce_rate: RateHealth,
    complaint_rate: RateHealth,
    status: z.enum(["healthy", "warning", "over_limit"]),
    pause_enabled: z.boolean(),
    sending_paused: z.boolean(),
  })
  .openapi("AccountHealth");

export function registerMetricsRoutes(app: App): void {
  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/account/health",
      tags: ["tern"],
      summary: "Account health: bounce and complaint rates (tern's own)",
      description:
        "Hard bounces per recipient accepted and complaints per recipient sent (as GET /emails/metrics' complaint_rate) over the last 7 days, against 4% and 0.08% (warning at 3% and 0.06%); statuses need 100 recipients in the window. With HEALTH_PAUSE on, an account over a limit gets 403 on new sends. Resend has no such endpoint.",
      responses: { 200: json(AccountHealthResponse, "Account health"), ...errorResponses(401, 403) },
    }),
    async (c) => c.json(await accountHealth(c.env.DB, c.get("principal").accountId, Date.now(), readConfig(c.env).healthPause)),
  );


  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/emails/metrics",
      tags: ["Emails"],
      summary: "Retrieve account-level email metrics",
      description:
        "Delivery outcomes count recipients; opens, clicks and unsubscribes count one each; unique opens and clicks count each email once, at its first. Counts are kept per 15 minutes, so any timezone's periods are exact.",
      request: { query: MetricsQueryDoc },
      responses: { 200: json(MetricsResponse, "Metrics"), ...errorResponses(401, 403, 422) },
    }),
    async (c) => {
      const query = parseMetricsQuery(new URL(c.req.url).searchParams, Date.now());
      return c.json(await emailMetrics(c.env.DB, c.get("principal").accountId, query));
    },
  );
}
