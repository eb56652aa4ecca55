// The error table of contract section 2: the only error names tern answers with, and the one
// place that turns a failure into a response.

export const ERROR_STATUS = {
  validation_error: 422,
  invalid_idempotency_key: 400,
  missing_api_key: 401,
  restricted_api_key: 401,
  invalid_api_key: 403,
  not_found: 404,
  method_not_allowed: 405,
  invalid_idempotent_request: 409,
  concurrent_idempotent_requests: 409,
  missing_required_field: 422,
  invalid_attachment: 422,
  invalid_region: 422,
  rate_limit_exceeded: 429,
  daily_quota_exceeded: 429,
  monthly_quota_exceeded: 429,
  application_error: 500,
} as const;

export type ErrorName = keyof typeof ERROR_STATUS;

export type ErrorBody = {
  statusCode: number;
  name: ErrorName;
  message: string;
};

/** A failure that the client is told about in the contract's shape. */
export class ApiError extends Error {
  readonly status: number;
  readonly errorName: ErrorName;
  readonly headers: Record<string, string>;

  /** status defaults to the table's; validation_error also answers 400, 403 and 413. */
  constructor(errorName: ErrorName, message: string, status?: number, headers: Record<string, string> = {}) {
    super(message);
    this.errorName = errorName;
    this.status = status ?? ERROR_STATUS[errorName];
    this.headers = headers;
  }

  get body(): ErrorBody {
    return { statusCode: this.status, name: this.errorName, message: this.message };
  }
}

export function errorResponse(err: ApiError, headers: HeadersInit = {}): Response {
  const h = new Headers(headers);
  for (const [k, v] of Object.entries(err.headers)) h.set(k, v);
  h.set("content-type", "application/json");
  return new Response(JSON.stringify(err.body), { status: err.status, headers: h });
}

/** A short id for one failure: shown to whoever saw it and written on the log line with the
 * cause, so an operator finds the one from the other (`ref=1a2b3c4d`). */
export function errorReference(): string {
  const b = crypto.getRandomValues(new Uint8Array(4));
  return [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
}

/** Logs a failure in full under a fresh reference, and answers the reference. */
export function logFailure(what: string, cause: unknown): string {
  const ref = errorReference();
  console.error(`${what} ref=${ref}`, describeFailure(cause));
  return ref;
}

/** What is logged of a failure: its stack and its causes', without the values a query was
 * bound to and at most LOGGED_FAILURE_CHARS. drizzle's query errors carry every bound value in
 * their message (bodies, addresses: megabytes of a person's content), and the database's own
 * reason only in their cause. */
export function describeFailure(err: unknown, depth = 0): string {
  let text = err instanceof Error ? (err.stack ?? err.message) : String(err);
  text = text.replace(/\nparams: [\s\S]*?(?=\n {4}at |$)/, "\nparams: (not logged)");
  if (err instanceof Error && err.cause !== undefined && depth < 3) text += `\ncaused by: ${describeFailure(err.cause, depth + 1)}`;
  return text.length > LOGGED_FAILURE_CHARS ? `${text.slice(0, LOGGED_FAILURE_CHARS)}… (${text.length} characters)` : text;
}
const LOGGED_FAILURE_CHARS = 8192;

/** Text from the request, quoted back in an error message: at most `max` characters (whole ones:
 * never half a surrogate pair), with control characters written as escapes, so that a NUL or a
 * terminal escape sequence sent in an id never reaches whoever reads the message. */
export function echoed(text: string, max = 80): string {
  const chars = [...text];
  const shown = chars.length > max ? `${chars.slice(0, max).join("")}...` : text;
  return shown.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** Anything unexpected: logged in full server-side, answered without internals but with the
 * log line's reference. */
export function unexpectedError(cause: unknown): ApiError {
  const ref = logFailure("unexpected error", cause);
  return new ApiError("application_error", `An unexpected error occurred (reference ${ref}). Please try again later; if it keeps happening, give the operator this reference.`);
}
