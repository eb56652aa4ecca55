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
  // A body with a declared length (HTTP framing holds it to that length) is read in one call;
  // any other, and any compressed one, is read piece by piece and stopped at the limit (so a
  // small gzip bomb stops there too).
  const declared = declaredLength(req);
  if (declared !== null && declared <= limit && req.body && encoding(req) === null) {
    const bytes = new Uint8Array(await req.arrayBuffer().catch((err: unknown) => { throw cutShort(err); }));
    if (bytes.byteLength > limit) throw tooBig(req, limit);
    if (bytes.byteLength !== declared) throw lengthDiffers();
    return bytes;
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of readBodyChunks(req, limit)) {
    chunks.push(chunk);
    size += chunk.byteLength;
  }
  return concatBytes(chunks, size);
}

/** The body's pieces as they arrive (decompressed, as its Content-Encoding says), at most `limit`
 * bytes in all: 413 validation_error as soon as a piece passes it, the rest never read. A caller
 * that stops early (a break or a throw in its loop) cancels the rest of the body. */
export async function* readBodyChunks(req: Request, limit: number): AsyncGenerator<Uint8Array, void, undefined> {
  const declared = declaredLength(req);
  if (declared !== null && declared > limit) throw tooBig(req, limit);
  if (!req.body) return;
  const format = encoding(req);
  const reader = (format === null ? req.body : req.body.pipeThrough(new DecompressionStream(format))).getReader();
  let size = 0;
  let ended = false;
  try {
    for (;;) {
      const { done, value } = await reader.read().catch((err: unknown) => {
        if (format !== null && !(err instanceof Error && /connection lost|disconnected|aborted/i.test(err.message))) {
          throw new ApiError("validation_error", `The request body is not valid ${format} data, as its Content-Encoding says it is.`, 400);
        }
        throw cutShort(err);
      });
      if (done) break;
      size += value.byteLength;
      if (size > limit) throw tooBig(req, limit);
      yield value;
    }
    ended = true;
  } finally {
    if (!ended) await reader.cancel().catch(() => {});
  }
  if (declared !== null && format === null && size !== declared) throw lengthDiffers();
}

function declaredLength(req: Request): number | null {
  const header = req.headers.get("content-length");
  return header !== null && /^\d{1,15}$/.test(header) ? Number(header) : null;
}

function tooBig(req: Request, limit: number): ApiError {
  const most = limit >= 1024 * 1024 ? `${limit / 1024 / 1024} MB` : `${Math.floor(limit / 1024)} KB`;
  return new ApiError("validation_error", `The request body must be at most ${most}${encoding(req) ? " once decompressed" : ""}.`, 413);
}

const lengthDiffers = () => new ApiError("validation_error", "The request body's length differs from its Content-Length.", 400);

/** A client that goes away mid-body leaves the read failing ("Network connection lost"): that
 * is the request's fault, a 400, not tern's 500 (nobody is left to read it, but the log is). */
function cutShort(err: unknown): ApiError {
  console.error("request body cut short", err instanceof Error ? err.message : String(err));
  return new ApiError("validation_error", "The request body ended before it was complete.", 400);
}

/** The Content-Encoding of a request body, as DecompressionStream names it; null for none.
 * Some HTTP clients compress what they send; other encodings (br, zstd) are a 415 that says
 * what to send instead. */
function encoding(req: Request): "gzip" | "deflate" | null {
  const value = (req.headers.get("content-encoding") ?? "").trim().toLowerCase();
  if (value === "" || value === "identity") return null;
  if (value === "gzip" || value === "x-gzip") return "gzip";
  if (value === "deflate") return "deflate";
  throw new ApiError("validation_error", `Content-Encoding \`${value.slice(0, 40)}\` is not supported: send the body uncompressed, or with gzip or deflate.`, 415);
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
  refuseProtoKeys(text, parsed);
  parsedBodies.set(req, parsed);
  return parsed;
}

/** JSON.parse makes `__proto__` an own key, but every object zod builds from it drops that key
 * without a word (a property, header or variable by that name would vanish): refused instead,
 * for every JSON tern reads (bodies, form fields, the dashboard's). The walk runs only when the
 * text names it or has escapes that could spell it. */
export function refuseProtoKeys(text: string, parsed: unknown): void {
  if ((text.includes("__proto__") || text.includes("\\u")) && hasProtoKey(parsed)) {
    throw new ApiError("validation_error", "`__proto__` cannot be used as a name (of a property, header, variable or any other key).");
  }
}

function hasProtoKey(value: unknown): boolean {
  const stack = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (v === null || typeof v !== "object") continue;
    if (!Array.isArray(v) && Object.hasOwn(v, "__proto__")) return true;
    for (const inner of Array.isArray(v) ? v : Object.values(v)) if (inner !== null && typeof inner === "object") stack.push(inner);
  }
  return false;
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
    // A body that is none of the shapes a union takes (null for an object or an array).
    const kinds = issue.code === "invalid_union" ? unionKinds(issue.errors) : [];
    if (kinds.length > 0) return new ApiError("validation_error", `The request ${rootName} must be ${kinds.join(" or ")}.`, 400);
    // A rule of the whole body ("must have at most 100 items") needs the body as its subject.
    const whole = /^(must|is|are|cannot|has|may) /.test(issue.message) ? `The request ${rootName} ${issue.message}` : issue.message;
    return new ApiError("validation_error", whole.endsWith(".") ? whole : `${whole}.`);
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
  const result = schema.safeParse(input, plainErrors(schema));
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

// ---- zod's own messages, as sentences ----------------------------------------------------
// zod's defaults read like a type checker ("Invalid input: expected number, received NaN").
// A schema's own message always wins; for the rest, plainErrors says what the field must be,
// from the field's whole schema where it can be found ("must be a whole number from 1 to
// 100" for a bad, too small or too big `limit`), else from the issue. The phrases are
// predicates: zodToApiError puts the field in front ("`limit` must be ...").

type Def = { type: string; innerType?: z.ZodType; in?: z.ZodType; shape?: Record<string, z.ZodType>; element?: z.ZodType; valueType?: z.ZodType; checks?: { _zod: { def: CheckDef } }[]; entries?: Record<string, unknown> };
type CheckDef = { check: string; value?: unknown; inclusive?: boolean; minimum?: number; maximum?: number; length?: number; format?: string };

const defOf = (s: z.ZodType): Def => (s as unknown as { _zod: { def: Def } })._zod.def;

const WRAPPERS = new Set(["optional", "nullable", "default", "prefault", "readonly", "catch", "nonoptional"]);

function unwrap(s: z.ZodType | undefined): z.ZodType | undefined {
  for (let i = 0; s && i < 20; i++) {
    const d = defOf(s);
    if (WRAPPERS.has(d.type)) s = d.innerType;
    else if (d.type === "pipe") s = d.in;
    else return s;
  }
  return s;
}

/** The schema of the field at `path`, when the way there is plain objects, arrays and records. */
function fieldSchema(root: z.ZodType, path: PropertyKey[]): z.ZodType | undefined {
  let s = unwrap(root);
  for (const key of path) {
    if (!s) return undefined;
    const d = defOf(s);
    if (d.type === "object" && typeof key === "string") s = unwrap(d.shape?.[key]);
    else if (d.type === "array" && typeof key === "number") s = unwrap(d.element);
    else if (d.type === "record") s = unwrap(d.valueType);
    else return undefined;
  }
  return s;
}

const checksOf = (s: z.ZodType | undefined): CheckDef[] => (s ? (defOf(s).checks ?? []).map((c) => c._zod.def) : []);

const FORMATS: Record<string, string> = {
  uuid: "a UUID, like 01a20f86-1a38-7307-9dc6-c29aa74bf40f",
  guid: "a UUID, like 01a20f86-1a38-7307-9dc6-c29aa74bf40f",
  email: "an email address, like a@example.com",
  url: "a URL, like https://example.com/path",
  datetime: "an ISO 8601 date and time, like 2026-11-05T09:00:00Z",
  date: "a date written YYYY-MM-DD",
  time: "a time written HH:MM:SS",
  base64: "base64-encoded",
  ipv4: "an IPv4 address",
  ipv6: "an IPv6 address",
};

/** "a whole number from 1 to 100", from the number schema's checks. */
function numberPhrase(s: z.ZodType | undefined, fallback: { whole?: boolean; lo?: [number, boolean]; hi?: [number, boolean] } = {}): string {
  const checks = checksOf(s);
  const whole = fallback.whole || checks.some((c) => c.check === "number_format" && /int/.test(c.format ?? ""));
  const lo = checks.find((c) => c.check === "greater_than");
  const hi = checks.find((c) => c.check === "less_than");
  const low: [number, boolean] | undefined = lo ? [Number(lo.value), lo.inclusive !== false] : fallback.lo;
  const high: [number, boolean] | undefined = hi ? [Number(hi.value), hi.inclusive !== false] : fallback.hi;
  const noun = whole ? "a whole number" : "a number";
  if (low && high && low[1] && high[1]) return `${noun} from ${low[0]} to ${high[0]}`;
  const bounds = [
    low ? (low[1] ? `of at least ${low[0]}` : `greater than ${low[0]}`) : null,
    high ? (high[1] ? `${low?.[1] ? "" : "of "}at most ${high[0]}` : `less than ${high[0]}`) : null,
  ].filter(Boolean);
  return bounds.length ? `${noun} ${bounds.join(" and ")}` : noun;
}

/** "must be 1 to 50 characters long", from the string's or list's length checks (or, without
 * them, the issue's bound). */
function lengthPhrase(checks: CheckDef[], unit: "characters" | "items", issue?: { min?: number; max?: number }): string {
  const exact = checks.find((c) => c.check === "length_equals")?.length;
  const min = checks.find((c) => c.check === "min_length")?.minimum ?? issue?.min;
  const max = checks.find((c) => c.check === "max_length")?.maximum ?? issue?.max;
  const size = exact !== undefined ? `exactly ${exact}` : min !== undefined && max !== undefined ? `${min} to ${max}` : max !== undefined ? `at most ${max}` : min !== undefined && min > 1 ? `at least ${min}` : null;
  if (size === null) return min !== undefined ? "must not be empty" : `has the wrong number of ${unit}`;
  return unit === "characters" ? `must be ${size} characters long` : `must have ${size} items`;
}

const quoteList = (values: readonly unknown[], last = "or") => {
  const q = values.map((v) => `\`${String(v)}\``);
  return q.length > 1 ? `${q.slice(0, -1).join(", ")} ${last} ${q[q.length - 1]}` : (q[0] ?? "");
};

const TYPES: Record<string, string> = {
  string: "a string", boolean: "true or false", array: "a list (a JSON array)", object: "an object", record: "an object",
  date: "a date", bigint: "a whole number", null: "null", int: "a whole number",
};

/** What each branch of a failed union wanted, when every branch refused the value's type
 * itself ("a string or a list (a JSON array)"); empty when a branch got further. */
function unionKinds(branches: unknown): string[] {
  const kinds: string[] = [];
  for (const branch of (branches as Array<Array<{ code?: string; path?: unknown[]; expected?: unknown }>> | undefined) ?? []) {
    const first = branch[0];
    if (!first || first.code !== "invalid_type" || (first.path?.length ?? 0) > 0) return [];
    const expected = String(first.expected);
    const noun = expected === "number" ? "a number" : TYPES[expected];
    if (!noun) return [];
    if (!kinds.includes(noun)) kinds.push(noun);
  }
  return kinds;
}

type RawIssue = z.core.$ZodRawIssue;

/** The sentence for one of zod's issues, or undefined to keep zod's own. */
export function plainMessage(issue: RawIssue, root?: z.ZodType): string | undefined {
  const i = issue as RawIssue & Record<string, unknown>;
  const field = root ? fieldSchema(root, (i.path as PropertyKey[] | undefined) ?? []) : undefined;
  const kind = field ? defOf(field).type : undefined;
  const origin = i.origin as string | undefined;
  const nullNote = i.input === null ? ", not null" : "";
  if (kind === "number" || origin === "number" || i.expected === "number" || i.expected === "int") {
    if (i.code === "not_multiple_of") return `must be a multiple of ${String(i.divisor)}`;
    if (["invalid_type", "too_small", "too_big"].includes(i.code ?? "")) {
      const lo: [number, boolean] | undefined = i.code === "too_small" ? [Number(i.minimum), i.inclusive !== false] : undefined;
      const hi: [number, boolean] | undefined = i.code === "too_big" ? [Number(i.maximum), i.inclusive !== false] : undefined;
      return `must be ${numberPhrase(field, { whole: i.expected === "int", lo, hi })}${nullNote}`;
    }
  }
  switch (i.code) {
    case "invalid_type": {
      const expected = String(i.expected);
      const noun = TYPES[expected];
      return noun ? `must be ${noun}${nullNote}` : undefined;
    }
    case "too_small":
    case "too_big": {
      const bound = i.code === "too_small" ? { min: Number(i.minimum) } : { max: Number(i.maximum) };
      if (origin === "string") return lengthPhrase(checksOf(field), "characters", bound);
      if (origin === "array" || origin === "set") return lengthPhrase(checksOf(field), "items", bound);
      if (origin === "date") return i.code === "too_small" ? "is too early" : "is too late";
      return undefined;
    }
    case "invalid_format": {
      const format = String(i.format);
      if (format === "starts_with") return `must start with \`${String(i.prefix)}\``;
      if (format === "ends_with") return `must end with \`${String(i.suffix)}\``;
      if (format === "includes") return `must include \`${String(i.includes)}\``;
      if (format === "regex") return "is not in the expected format";
      return `must be ${FORMATS[format] ?? `a valid ${format}`}`;
    }
    case "invalid_value": {
      const values = (i.values as unknown[] | undefined) ?? [];
      return values.length === 1 ? `must be ${quoteList(values)}` : `must be one of ${quoteList(values)}`;
    }
    case "invalid_union": {
      const kinds = unionKinds(i.errors);
      return kinds.length > 0 ? `must be ${kinds.join(" or ")}${nullNote}` : undefined;
    }
    case "unrecognized_keys": {
      const keys = ((i.keys as string[] | undefined) ?? []).map((k) => fieldPath([...((i.path as PropertyKey[] | undefined) ?? []), k]));
      return keys.length === 1 ? `\`${keys[0]}\` is not a field this request takes.` : `${quoteList(keys, "and")} are not fields this request takes.`;
    }
    default:
      return undefined;
  }
}

/** safeParse's options that put plainMessage in place of zod's default messages. */
export function plainErrors(root: z.ZodType): { error: (issue: RawIssue) => string | undefined } {
  return { error: (issue) => plainMessage(issue, root) };
}
