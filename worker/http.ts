// Reading requests the contract's way: a bounded body, JSON or a 400, and zod issues turned
// into the contract's 422 errors naming the field.
import type { z } from "@hono/zod-openapi";
import { concatBytes } from "./bytes.ts";
import { ApiError } from "./errors.ts";
import { REGIONS } from "./regions.ts";

export const MAX_REQUEST_BYTES = 40 * 1024 * 1024;

/** The body's bytes, at most `limit` of them: a body without a Content-Length is read piece by
 * piece and stopped there, never buffered whole first. 413 validation_error past it. */
export async function readBodyLimited(req: Request, limit: number): Promise<Uint8Array> {
  const header = req.headers.get("content-length");
  const declared = header !== null && /^\d{1,15}$/.test(header) ? Number(header) : null;
  const tooBig = () => new ApiError("validation_error", `The request body must be at most ${limit / 1024 / 1024} MB.`, 413);
  if (declared !== null && declared > limit) throw tooBig();
  if (!req.body) return new Uint8Array();
  // A body with a declared length (HTTP framing holds it to that length) is read in one call;
  // any other is read piece by piece and stopped at the limit.
  if (declared !== null) {
    const bytes = new Uint8Array(await req.arrayBuffer());
    if (bytes.byteLength > limit) throw tooBig();
    if (bytes.byteLength !== declared) throw new ApiError("validation_error", "The request body's length differs from its Content-Length.", 400);
    return bytes;
  }
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      throw tooBig();
    }
    chunks.push(value);
  }
  return concatBytes(chunks, size);
}

/** The parsed body of each request read with readJson, for the API log (worker/logs). */
const parsedBodies = new WeakMap<Request, unknown>();

export function parsedBody(req: Request): unknown {
  return parsedBodies.get(req);
}

/** The body as parsed JSON; 400 validation_error when it is not JSON. */
export async function readJson(req: Request, limit = MAX_REQUEST_BYTES): Promise<unknown> {
  let bytes: Uint8Array | undefined = await readBodyLimited(req, limit);
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw new ApiError("validation_error", "The request body must be UTF-8 encoded JSON.", 400);
  }
  // Not held through JSON.parse: near the 40 MB limit the bytes, the text and the parsed
  // strings would be three copies of the body at once (issue 20, item 3).
  bytes = undefined;
  if (text.trim() === "") throw new ApiError("validation_error", "The request body is empty; it must be JSON.", 400);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ApiError("validation_error", "The request body is not valid JSON.", 400);
  }
  parsedBodies.set(req, parsed);
  return parsed;
}

function fieldPath(path: PropertyKey[]): string {
  let out = "";
  for (const p of path) out += typeof p === "number" ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out;
}

function valueAt(input: unknown, path: PropertyKey[]): unknown {
  let v = input;
  for (const p of path) {
    if (v === null || typeof v !== "object") return undefined;
    v = (v as Record<PropertyKey, unknown>)[p];
  }
  return v;
}

/** Maps a zod failure to the contract: absent required fields -> 422 missing_required_field
 * listing them all; otherwise 422 validation_error naming the first invalid field. */
/** A union's own issue says little ("invalid input"); the branch that matched the input's
 * type says what is wrong (an array of 51 addresses: "at most 50"). */
function specific(issue: z.core.$ZodIssue): z.core.$ZodIssue {
  if (issue.code !== "invalid_union") return issue;
  for (const branch of issue.errors) {
    const first = branch[0];
    if (first && !(first.code === "invalid_type" && first.path.length === 0)) {
      return specific({ ...first, path: [...issue.path, ...first.path] } as z.core.$ZodIssue);
    }
  }
  return issue;
}

export function zodToApiError(error: z.ZodError, input: unknown, rootName = "body", at: PropertyKey[] = []): ApiError {
  const missing = error.issues
    .filter((i) => i.path.length > 0 && valueAt(input, i.path) === undefined)
    .map((i) => fieldPath([...at, ...i.path]));
  if (missing.length > 0) {
    const list = [...new Set(missing)].map((m) => `\`${m}\``).join(", ");
    return new ApiError("missing_required_field", `Missing ${list} field${missing.length > 1 ? "s" : ""}.`);
  }
  const issue = specific(error.issues[0]!);
  const regionError = regionIssue(issue, at);
  if (regionError) return regionError;
  if (issue.code === "custom" && (issue.params as { missing?: boolean } | undefined)?.missing) {
    return new ApiError("missing_required_field", issue.message);
  }
  if (issue.path.length === 0 && at.length === 0) {
    if (issue.code === "invalid_type") {
      return new ApiError("validation_error", `The request ${rootName} must be a JSON ${issue.expected}.`, 400);
    }
    return new ApiError("validation_error", issue.message);
  }
  const field = fieldPath([...at, ...issue.path]);
  // Schema messages are predicates ("must be ..."), so the field reads as their subject.
  const message = issue.message.startsWith("`")
    ? issue.message
    : /^(must|is|are|cannot|has|may) /.test(issue.message)
      ? `\`${field}\` ${issue.message}`
      : `\`${field}\` is invalid: ${lowerFirst(issue.message)}`;
  return new ApiError("validation_error", message.endsWith(".") ? message : `${message}.`);
}

/** Resend's own name for a bad `region` (contract 9: 422 invalid_region), and a clear refusal
 * to change a domain's region, which is fixed when the domain is created. */
function regionIssue(issue: z.core.$ZodIssue, at: PropertyKey[]): ApiError | undefined {
  if (at.length > 0) return undefined;
  if (issue.path.length === 1 && issue.path[0] === "region") {
    return new ApiError("invalid_region", `\`region\` must be one of ${REGIONS.join(", ")}.`);
  }
  if (issue.code === "unrecognized_keys" && issue.path.length === 0 && issue.keys.includes("region")) {
    return new ApiError("validation_error", "`region` cannot be changed: a domain's region is fixed when it is created. To send from another region, delete the domain and add it again with that region.");
  }
  return undefined;
}

function lowerFirst(s: string): string {
  return s.charAt(0).toLowerCase() + s.slice(1);
}

/** Parses with a zod schema or throws the contract's error. */
export function validate<S extends z.ZodType>(schema: S, input: unknown, rootName?: string): z.infer<S> {
  const result = schema.safeParse(input);
  if (!result.success) throw zodToApiError(result.error, input, rootName);
  return result.data;
}

/** Official clients put the resource's id in an update's body as well as its path
 * (resend-python: Domains.update sends `id`, Webhooks.update `webhook_id`): such a key is
 * accepted when it names the path's resource and dropped; any other value is a 422. */
export function dropPathId(body: unknown, pathId: string, keys: readonly string[]): unknown {
  if (body === null || typeof body !== "object" || Array.isArray(body)) return body;
  const out = { ...(body as Record<string, unknown>) };
  for (const k of keys) {
    if (!(k in out)) continue;
    const v = out[k];
    if (typeof v !== "string" || v.toLowerCase() !== pathId.toLowerCase()) {
      throw new ApiError("validation_error", `\`${k}\` must be the id in the path (${pathId}) when it is sent.`);
    }
    delete out[k];
  }
  return out;
}
