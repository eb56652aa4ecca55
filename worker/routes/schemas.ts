// Response pieces shared by routes.
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

export const IdParam = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: "01928f3e-7b1c-7cc0-9c3a-4d1a2b3c4d5e" }),
});

export const DeletedSchema = z.object({ object: z.string(), id: z.string(), deleted: z.literal(true) });

export const iso = (ms: number | null | undefined): string | null => (ms == null ? null : new Date(ms).toISOString());
