// `template: {id, variables}` on POST /emails and /emails/batch: the request is completed from
// the template's published version before it is validated like any other send, so a template
// send obeys every rule of a send. The request's own from, subject and reply_to win.
import { z } from "@hono/zod-openapi";
import { ApiError } from "../errors.ts";
import { zodToApiError } from "../http.ts";
import { renderTemplateForSend } from "./templates.ts";

export const EmailTemplateInput = z.object({
  id: z.string({ error: "must be a template id or alias." }).min(1, "must be a template id or alias.").max(256),
  variables: z.record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null(), z.array(z.unknown()), z.record(z.string(), z.unknown())])).optional(),
}).openapi("EmailTemplateInput", { description: "A published template and the values of its variables; html and text then come from it." });

/** The send request with its template applied; a request without `template` is returned as it is. */
export async function applyTemplate(db: D1Database, accountId: string, body: unknown, where = "", at: PropertyKey[] = []): Promise<unknown> {
  if (body === null || typeof body !== "object" || Array.isArray(body) || !("template" in body)) return body;
  const { template, ...rest } = body as Record<string, unknown>;
  const parsed = z.object({ template: EmailTemplateInput }).safeParse({ template });
  if (!parsed.success) throw zodToApiError(parsed.error, { template }, "body", at);
  const prefix = where ? `${where} ` : "";
  if (rest.html !== undefined || rest.text !== undefined) throw new ApiError("validation_error", `${prefix}\`template\` cannot be combined with \`html\` or \`text\`: the template gives them.`);
  const t = await renderTemplateForSend(db, accountId, parsed.data.template, where);
  return {
    ...rest,
    from: rest.from ?? t.from ?? undefined,
    subject: rest.subject ?? t.subject ?? undefined,
    reply_to: rest.reply_to ?? t.reply_to ?? undefined,
    html: t.html,
    // No text in the template: derived from html, as for any send.
    ...(t.text !== null ? { text: t.text } : {}),
  };
}
