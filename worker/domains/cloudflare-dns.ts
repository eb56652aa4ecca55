// The tenant's own Cloudflare zone, reached with a token they hand tern for one request: find
// the zone holding a name (GET /zones?name=), list the records at a name (GET
// /zones/{id}/dns_records?name=), create one (POST /zones/{id}/dns_records). Nothing here
// updates or deletes a record. Answers are read from the v4 envelope ({success, errors,
// messages, result, result_info}) with zod; any failure is a CloudflareApiError (worker/cloudflare-api.ts).
import { z } from "zod";
import { callCloudflare, CloudflareApiError, type Envelope, type Fetch } from "../cloudflare-api.ts";

/** Cloudflare's codes for a record that is already there (HTTP 400): another record of the
 * kind ("Record already exists.") or the very same ("An identical record already exists."). */
export const RECORD_EXISTS_CODES = [81057, 81058];
/** A CNAME cannot share its name: creating one where other records are (81053), or another
 * record where a CNAME is (81054). */
export const CNAME_CONFLICT_CODES = [81053, 81054];
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

export interface CloudflareDnsApi {
  /** The zone named exactly `name` that the token sees, or null. */
  zoneNamed(name: string): Promise<Zone | null>;
  /** The zone's records at a full name, of every type (a CNAME there matters to any record). */
  recordsAt(zoneId: string, name: string): Promise<CloudflareDnsRecord[]>;
  create(zoneId: string, record: NewDnsRecord): Promise<CloudflareDnsRecord>;
}

export function cloudflareDns(apiUrl: string, token: string, fetcher: Fetch = (i, init) => fetch(i, init)): CloudflareDnsApi {
  const call = async (method: "GET" | "POST", path: string, what: string, body?: unknown): Promise<Envelope> =>
    (await callCloudflare(fetcher, `${apiUrl}${path}`, token, method, `Cloudflare ${what}`, body)).envelope;

  function listOf<T extends z.ZodType>(what: string, schema: T, result: unknown): z.infer<T>[] {
    const r = z.array(schema).safeParse(result);
    if (!r.success) throw new CloudflareApiError(`Cloudflare ${what}: the result is not a list of what was asked (${r.error.issues[0]?.path.join(".") || "result"}: ${r.error.issues[0]?.message})`, 200);
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
      if (!r.success) throw new CloudflareApiError("Cloudflare POST dns_records: the result is not a DNS record", 200);
      return r.data;
    },
  };
}
