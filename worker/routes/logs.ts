// The API request log (Resend's /logs): every request an account's keys make, kept for the
// retention window. Recording is worker/logs/record.ts's.
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App } from "../app.ts";
import { getLog, listLogs } from "../logs/service.ts";
import { ListQuery, listSchema, readPage } from "../pagination.ts";
import { errorResponses, json } from "./schemas.ts";

const LogSummary = z
  .object({
    object: z.literal("log"),
    id: z.string(),
    created_at: z.string(),
    endpoint: z.string(),
    method: z.string(),
    response_status: z.number().int(),
    user_agent: z.string().nullable(),
  })
  .openapi("LogSummary");

const Log = LogSummary.extend({
  request_body: z.unknown().nullable().openapi({ description: "The JSON body sent, without secrets and attachment contents; a non-object body (a batch's array) as `{data: ...}`." }),
  response_body: z.unknown().nullable().openapi({ description: "The JSON answer, without secrets." }),
}).openapi("Log");

const LogParam = z.object({ log_id: z.string().openapi({ param: { name: "log_id", in: "path" } }) });

export function registerLogRoutes(app: App): void {
  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/logs",
      tags: ["Logs"],
      summary: "List API request logs",
      description: "Every API request the account's keys made within the retention window, newest first.",
      request: { query: ListQuery },
      responses: { 200: json(listSchema(LogSummary), "Logs, newest first"), ...errorResponses(401, 403, 422) },
    }),
    async (c) => c.json(await listLogs(c.env.DB, c.get("principal").accountId, readPage(c.req.query()))),
  );

  defineRoute(
    app,
    "full",
    createRoute({
      method: "get",
      path: "/logs/{log_id}",
      tags: ["Logs"],
      summary: "Retrieve an API request log",
      request: { params: LogParam },
      responses: { 200: json(Log, "The request and its answer"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => c.json(await getLog(c.env.DB, c.get("principal").accountId, c.req.param("log_id")!)),
  );
}
