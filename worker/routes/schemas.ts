// Request and response pieces shared by routes.
import { z } from "@hono/zod-openapi";

export const ErrorSchema = z
  .object({
    statusCode: z.number().int(),
    name: z.string(),
    message: z.string(),
  })
  .openapi("Error");

export function errorResponses(...statuses: number[]) {
  const out: Record<number, { description: string; content: { "application/json": { schema: typeof ErrorSchema } } }> = {};
  for (const s of statuses) out[s] = { description: `Error (${s})`, content: { "application/json": { schema: ErrorSchema } } };
  return out;
}

export function json<T extends z.ZodType>(schema: T, description: string) {
  return { description, content: { "application/json": { schema } } };
}

export function jsonBody<T extends z.ZodType>(schema: T) {
  return { body: { required: true, content: { "application/json": { schema } } } };
}

/** One line of plain text: no C0 or C1 control character (tab, CR, LF, NUL, DEL...), no Unicode
 * line or paragraph separator, and no bidirectional embedding, override or isolate (which can
 * make a name display as other text). A pattern, so the OpenAPI document states it too. */
export const ONE_LINE = /^[^\u0000-\u001F\u007F-\u009F\u2028\u2029\u202A-\u202E\u2066-\u2069]*$/;

/** A label a user gives to a thing (a name, a topic's description): one line, since labels reach
 * mail, lists and logs, where a line break or a NUL breaks or forges a line. Trimmed first (a
 * name read from a file often ends in a line break, which was always dropped), then checked;
 * required unless `mayBeEmpty`. */
export function label(field: string, max: number, { mayBeEmpty = false } = {}) {
  const text = z.string({ error: `\`${field}\` must be a string.` }).trim()
    .regex(ONE_LINE, `\`${field}\` must be one line of text, without tabs, line breaks or other control characters.`);
  return (mayBeEmpty ? text : text.min(1, `\`${field}\` must not be empty.`)).max(max, `\`${field}\` must be at most ${max} characters.`);
}

/** A name made elsewhere (an OAuth profile, a passkey's device) cleaned to one line instead of
 * refused: by then there is nobody to show an error to. */
export function oneLineOf(name: string, max: number): string {
  let out = "";
  // At most `max` UTF-16 units (as zod's max counts), never half of a surrogate pair.
  for (const ch of [...name].filter((c) => ONE_LINE.test(c)).join("").trim()) {
    if (out.length + ch.length > max) break;
    out += ch;
  }
  return out.trim();
}

export const IdParam = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: "01928f3e-7b1c-7cc0-9c3a-4d1a2b3c4d5e" }),
});

export const DeletedSchema = z.object({ object: z.string(), id: z.string(), deleted: z.literal(true) });

export const iso = (ms: number | null | undefined): string | null => (ms == null ? null : new Date(ms).toISOString());
