// Cloudflare's v4 API as tern's two callers reach it (custom hostnames in the operator's zone,
// worker/tracking/custom-hostnames.ts; DNS records in a tenant's, worker/domains/cloudflare-dns.ts):
// one call with a Bearer token and a timeout, its envelope ({success, errors, messages, result,
// result_info}) read with zod, and any failure a CloudflareApiError that names the call and
// Cloudflare's words, never the token.
import { z } from "zod";

/** How long one call may take: a request waits for it. */
export const TIMEOUT_MS = 10_000;

/** The token is unknown or expired ("Invalid access token", 9109; "Invalid API Token", 1000),
 * lacks the permission the call needs (10000, or 9109 "Unauthorized to access requested
 * resource"), or is malformed (6003 with 6111 in its chain, HTTP 400). */
export const AUTH_CODES = [1000, 6003, 6111, 9109, 10000];

const ApiMessage = z.object({ code: z.number(), message: z.string(), error_chain: z.array(z.object({ code: z.number(), message: z.string() }).passthrough()).optional() }).passthrough();

export const Envelope = z.object({
  success: z.boolean(),
  errors: z.array(ApiMessage).default([]),
  messages: z.array(z.unknown()).default([]),
  result: z.unknown(),
  result_info: z.object({ page: z.number().optional(), total_pages: z.number().optional(), count: z.number().optional(), total_count: z.number().optional() }).passthrough().optional(),
});
export type Envelope = z.infer<typeof Envelope>;

export type Fetch = (input: string, init: RequestInit) => Promise<Response>;

export class CloudflareApiError extends Error {
  /** `cloudflareMessage`: Cloudflare's own words for the refusal (redacted), for a person. */
  constructor(message: string, readonly status: number | null, readonly codes: number[] = [], readonly cloudflareMessage = "") {
    super(message);
    this.name = "CloudflareApiError";
  }

  /** Cloudflare refused the token, or the permission it needs for this call. */
  get auth(): boolean {
    return this.status === 401 || this.status === 403 || this.codes.some((c) => AUTH_CODES.includes(c));
  }
}

/** One call: `what` names it in errors ("Cloudflare POST custom_hostnames"). */
export async function callCloudflare(fetcher: Fetch, url: string, token: string, method: string, what: string, body?: unknown): Promise<{ status: number; envelope: Envelope }> {
  let res: Response;
  try {
    res = await fetcher(url, {
      method,
      headers: { authorization: `Bearer ${token}`, accept: "application/json", ...(body ? { "content-type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch (err) {
    const reason = err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError") ? `no answer within ${TIMEOUT_MS / 1000} s` : `could not be reached (${err instanceof Error ? err.message : String(err)})`;
    throw new CloudflareApiError(`${what}: ${redact(reason, token)}`, null);
  }
  const text = await res.text().catch(() => "");
  let parsed: Envelope | null = null;
  try {
    const r = Envelope.safeParse(JSON.parse(text));
    if (r.success) parsed = r.data;
  } catch {}
  if (!parsed) {
    throw new CloudflareApiError(`${what}: HTTP ${res.status} with an answer that is not Cloudflare's API envelope (${res.headers.get("content-type") ?? "no content type"})`, res.status);
  }
  if (!parsed.success || !res.ok) {
    // error_chain holds the specific reason under a generic one ("DNS Validation Error").
    const words = redact(parsed.errors.map((e) => [`${e.message} (${e.code})`, ...(e.error_chain ?? []).map((c) => `${c.message} (${c.code})`)].join(": ")).join("; ") || "no reason given", token);
    const codes = parsed.errors.flatMap((e) => [e.code, ...(e.error_chain ?? []).map((c) => c.code)]);
    throw new CloudflareApiError(`${what}: HTTP ${res.status}: ${words}`, res.status, codes, words.slice(0, 500));
  }
  return { status: res.status, envelope: parsed };
}

/** A message from elsewhere (an error, Cloudflare's own words) never repeats the token. */
export function redact(text: string, token: string): string {
  return token ? text.split(token).join("[token]") : text;
}
