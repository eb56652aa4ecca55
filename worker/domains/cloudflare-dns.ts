// The tenant's own Cloudflare zone, reached with a token they hand tern for one request: find
// the zone holding a name (GET /zones?name=), list the records at a name (GET
// /zones/{id}/dns_records?name=), create one (POST /zones/{id}/dns_records). Nothing here
// updates or deletes a record. Answers are read from the v4 envelope ({success, errors,
// messages, result, result_info}) with zod; any failure is a CloudflareDnsError whose message
// names the call and Cloudflare's words, never the token.
import { z } from "zod";

/** How long one call may take: the tenant waits for every call of the request. */
const TIMEOUT_MS = 10_000;

/** Cloudflare's codes for a record that is already there (HTTP 400): another record of the
 * kind ("Record already exists.") or the very same ("An identical record already exists."). */
export const RECORD_EXISTS_CODES = [81057, 81058];
/** A CNAME cannot share its name: creating one where other records are (81053), or another
 * record where a CNAME is (81054). */
export const CNAME_CONFLICT_CODES = [81053, 81054];
/** The token is unknown or expired ("Invalid access token", 9109; "Invalid API Token", 1000),
 * lacks the permission the call needs (10000, or 9109 "Unauthorized to access requested
 * resource"), or is malformed (6003 with 6111 in its chain, HTTP 400). */
export const AUTH_CODES = [1000, 6003, 6111, 9109, 10000];

const ApiMessage = z.object({ code: z.number(), message: z.string(), error_chain: z.array(z.object({ code: z.number(), message: z.string() }).passthrough()).optional() }).passthrough();

const Envelope = z.object({
  success: z.boolean(),
  errors: z.array(ApiMessage).default([]),
  messages: z.array(z.unknown()).default([]),
  result: z.unknown(),
  result_info: z.object({ page: z.number().optional(), total_pages: z.number().optional(), count: z.number().optional(), total_count: z.number().optional() }).passthrough().optional(),
});

const ZoneSchema = z.object({ id: z.string().min(1), name: z.string().min(1), status: z.string().optional() }).passthrough();
export type Zone = z.infer<typeof ZoneSchema>;

const DnsRecordSchema = z.object({
  id: z.string().min(1),
  name: z.string(),
  type: z.string(),
  content: z.string(),
  priority: z.number().optional(),
  proxied: z.boolean().optional(),
  ttl: z.number().optional(),
}).passthrough();
export type CloudflareDnsRecord = z.infer<typeof DnsRecordSchema>;

export interface NewDnsRecord {
  type: "TXT" | "MX" | "CNAME";
  /** The full name (Cloudflare accepts it relative to the zone too; the full one is unambiguous). */
  name: string;
  content: string;
  priority?: number;
  comment?: string;
}

export class CloudflareDnsError extends Error {
  constructor(message: string, readonly status: number | null, readonly codes: number[] = [], readonly cloudflareMessage = "") {
    super(message);
    this.name = "CloudflareDnsError";
  }

  /** Cloudflare refused the token, or the permission it needs for this call. */
  get auth(): boolean {
    return this.status === 401 || this.status === 403 || this.codes.some((c) => AUTH_CODES.includes(c));
  }
}

export interface CloudflareDnsApi {
  /** The zone named exactly `name` that the token sees, or null. */
  zoneNamed(name: string): Promise<Zone | null>;
  /** The zone's records at a full name, of every type (a CNAME there matters to any record). */
  recordsAt(zoneId: string, name: string): Promise<CloudflareDnsRecord[]>;
  create(zoneId: string, record: NewDnsRecord): Promise<CloudflareDnsRecord>;
}

type Fetch = (input: string, init: RequestInit) => Promise<Response>;

export function cloudflareDns(apiUrl: string, token: string, fetcher: Fetch = (i, init) => fetch(i, init)): CloudflareDnsApi {
  async function call(method: "GET" | "POST", path: string, what: string, body?: unknown): Promise<z.infer<typeof Envelope>> {
    let res: Response;
    try {
      res = await fetcher(`${apiUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, accept: "application/json", ...(body ? { "content-type": "application/json" } : {}) },
        body: body ? JSON.stringify(body) : undefined,
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
    } catch (err) {
      const reason = err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError") ? `no answer within ${TIMEOUT_MS / 1000} s` : `could not be reached (${err instanceof Error ? err.message : String(err)})`;
      throw new CloudflareDnsError(`Cloudflare ${what}: ${redact(reason, token)}`, null);
    }
    const text = await res.text().catch(() => "");
    let parsed: z.infer<typeof Envelope> | null = null;
    try {
      const r = Envelope.safeParse(JSON.parse(text));
      if (r.success) parsed = r.data;
    } catch {}
    if (!parsed) {
      throw new CloudflareDnsError(`Cloudflare ${what}: HTTP ${res.status} with an answer that is not Cloudflare's API envelope (${res.headers.get("content-type") ?? "no content type"})`, res.status);
    }
    if (!parsed.success || !res.ok) {
      // error_chain holds the specific reason under a generic one ("DNS Validation Error").
      const words = parsed.errors.map((e) => [`${e.message} (${e.code})`, ...(e.error_chain ?? []).map((c) => `${c.message} (${c.code})`)].join(": ")).join("; ") || "no reason given";
      const codes = parsed.errors.flatMap((e) => [e.code, ...(e.error_chain ?? []).map((c) => c.code)]);
      throw new CloudflareDnsError(`Cloudflare ${what}: HTTP ${res.status}: ${redact(words, token)}`, res.status, codes, redact(words, token).slice(0, 500));
    }
    return parsed;
  }

  function listOf<T extends z.ZodType>(what: string, schema: T, result: unknown): z.infer<T>[] {
    const r = z.array(schema).safeParse(result);
    if (!r.success) throw new CloudflareDnsError(`Cloudflare ${what}: the result is not a list of what was asked (${r.error.issues[0]?.path.join(".") || "result"}: ${r.error.issues[0]?.message})`, 200);
    return r.data;
  }

  return {
    async zoneNamed(name) {
      const q = new URLSearchParams({ name, per_page: "5" });
      const env = await call("GET", `/zones?${q}`, "GET zones");
      return listOf("GET zones", ZoneSchema, env.result).find((z) => z.name.toLowerCase() === name) ?? null;
    },
    async recordsAt(zoneId, name) {
      const out: CloudflareDnsRecord[] = [];
      // A name holds a handful of records; pages are followed all the same, a few at most.
      for (let page = 1; page <= 10; page++) {
        const q = new URLSearchParams({ name, per_page: "100", page: String(page) });
        const env = await call("GET", `/zones/${encodeURIComponent(zoneId)}/dns_records?${q}`, "GET dns_records");
        out.push(...listOf("GET dns_records", DnsRecordSchema, env.result));
        if (page >= (env.result_info?.total_pages ?? 1)) break;
      }
      return out.filter((r) => r.name.toLowerCase().replace(/\.$/, "") === name);
    },
    async create(zoneId, record) {
      const env = await call("POST", `/zones/${encodeURIComponent(zoneId)}/dns_records`, "POST dns_records", {
        type: record.type,
        name: record.name,
        content: record.content,
        ttl: 1, // automatic
        ...(record.type === "MX" ? { priority: record.priority ?? 10 } : {}),
        // Resolvers must see where the CNAME points (a proxied one answers Cloudflare's addresses).
        ...(record.type === "CNAME" ? { proxied: false } : {}),
        ...(record.comment ? { comment: record.comment } : {}),
      });
      const r = DnsRecordSchema.safeParse(env.result);
      if (!r.success) throw new CloudflareDnsError("Cloudflare POST dns_records: the result is not a DNS record", 200);
      return r.data;
    },
  };
}

/** A message from elsewhere (an error, Cloudflare's own words) never repeats the token. */
export function redact(text: string, token: string): string {
  return token ? text.split(token).join("[token]") : text;
}
