// `template: {id, variables}` on POST /emails and /emails/batch: the request is completed from
// the template's published version before it is validated like any other send, so a template
// send obeys every rule of a send. The request's own from, subject and reply_to win.
import { z } from "@hono/zod-openapi";
import { ApiError } from "../errors.ts";
import { plainErrors, zodToApiError } from "../http.ts";
import { renderTemplateForSend } from "./templates.ts";
import { EmailTemplateInput } from "../sending/request.ts";

export { EmailTemplateInput };

/** The send request with its template applied; a request without `template` is returned as it is. */
export async function applyTemplate(db: D1Database, accountId: string, body: unknown, where = "", at: PropertyKey[] = []): Promise<unknown> {
  if (body === null || typeof body !== "object" || Array.isArray(body) || !("template" in body)) return body;
  const { template, ...rest } = body as Record<string, unknown>;
  const schema = z.object({ template: EmailTemplateInput });
  const parsed = schema.safeParse({ template }, plainErrors(schema));
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
