// Cloudflare for SaaS custom hostnames, the narrow seam tern manages domains' tracking hosts
// through: create, get, find by name, delete (POST/GET/DELETE /zones/{zone}/custom_hostnames).
// A custom hostname is what gives links.<domain> a certificate and routes it to the Worker.
// Calls, answers and errors as worker/cloudflare-api.ts makes them.
import { z } from "zod";
import { callCloudflare, CloudflareApiError, type Fetch } from "../cloudflare-api.ts";
import type { CustomHostnamesConfig } from "../config.ts";

export { CloudflareApiError };

/** Cloudflare's code for a hostname the zone already has (HTTP 409). */
export const DUPLICATE_HOSTNAME_CODE = 1406;

/** The fields of a custom hostname tern reads (Cloudflare sends many more). */
const CustomHostnameSchema = z.object({
  id: z.string().min(1),
  hostname: z.string().min(1),
  /** pending, active, moved, blocked, deleted, pending_deletion, ... */
  status: z.string().optional(),
  /** When Cloudflare made it (ISO 8601): tells tern's own create from a hostname it adopted. */
  created_at: z.string().optional(),
  verification_errors: z.array(z.unknown()).optional(),
  ssl: z.object({
    /** initializing, pending_validation, pending_issuance, pending_deployment, active,
     * validation_timed_out, issuance_timed_out, expired, ... */
    status: z.string().optional(),
    validation_errors: z.array(z.object({ message: z.string().optional() }).passthrough()).optional(),
  }).passthrough().nullish(),
}).passthrough();

export type CustomHostname = z.infer<typeof CustomHostnameSchema>;

export interface CustomHostnamesApi {
  /** Creates the hostname, or answers the zone's existing one of that name (`adopted`). */
  create(hostname: string): Promise<{ hostname: CustomHostname; adopted: boolean }>;
  /** null: Cloudflare has no hostname of that id (deleted outside tern). */
  get(id: string): Promise<CustomHostname | null>;
  find(hostname: string): Promise<CustomHostname | null>;
  /** Deleting one already gone is not an error. */
  remove(id: string): Promise<void>;
  /** Asks Cloudflare to validate the certificate again now (the same ssl settings sent back):
   * HTTP validation of a hostname created before its CNAME existed otherwise waits for
   * Cloudflare's retry schedule, which backs off to hours. */
  revalidate(id: string): Promise<CustomHostname>;
}

/** Every hostname's certificate: HTTP validation through the tenant's CNAME, TLS 1.2 at least. */
const SSL_SETTINGS = { method: "http", type: "dv", settings: { min_tls_version: "1.2" } } as const;


export function cloudflareCustomHostnames(config: CustomHostnamesConfig, fetcher: Fetch = (i, init) => fetch(i, init)): CustomHostnamesApi {
  const base = `${config.apiUrl}/zones/${encodeURIComponent(config.zoneId)}/custom_hostnames`;
  const call = (method: string, path: string, body?: unknown) =>
    callCloudflare(fetcher, `${base}${path}`, config.token, method, `Cloudflare ${method} custom_hostnames${path.startsWith("?") ? "" : path}`, body);

  function hostnameOf(what: string, result: unknown): CustomHostname {
    const r = CustomHostnameSchema.safeParse(result);
    if (!r.success) throw new CloudflareApiError(`Cloudflare ${what}: the result is not a custom hostname (${r.error.issues[0]?.path.join(".") || "result"}: ${r.error.issues[0]?.message})`, 200);
    return r.data;
  }

  const api: CustomHostnamesApi = {
    async create(hostname) {
      try {
        const { envelope } = await call("POST", "", { hostname, ssl: SSL_SETTINGS });
        return { hostname: hostnameOf("POST custom_hostnames", envelope.result), adopted: false };
      } catch (err) {
        // Already there (an earlier attempt whose answer was lost, or the operator's own): adopt it.
        if (err instanceof CloudflareApiError && (err.status === 409 || err.codes.includes(DUPLICATE_HOSTNAME_CODE))) {
          const existing = await api.find(hostname);
          if (existing) return { hostname: existing, adopted: true };
        }
        throw err;
      }
    },
    async get(id) {
      try {
        const { envelope } = await call("GET", `/${encodeURIComponent(id)}`);
        return hostnameOf("GET custom_hostnames", envelope.result);
      } catch (err) {
        if (err instanceof CloudflareApiError && err.status === 404) return null;
        throw err;
      }
    },
    async find(hostname) {
      const { envelope } = await call("GET", `?hostname=${encodeURIComponent(hostname)}`);
      const list = z.array(z.unknown()).safeParse(envelope.result);
      if (!list.success) throw new CloudflareApiError("Cloudflare GET custom_hostnames: the result is not a list", 200);
      const found = list.data.map((r) => hostnameOf("GET custom_hostnames", r)).find((h) => h.hostname.toLowerCase() === hostname);
      return found ?? null;
    },
    async revalidate(id) {
      const { envelope } = await call("PATCH", `/${encodeURIComponent(id)}`, { ssl: SSL_SETTINGS });
      return hostnameOf("PATCH custom_hostnames", envelope.result);
    },
    async remove(id) {
      try {
        await call("DELETE", `/${encodeURIComponent(id)}`);
      } catch (err) {
        if (err instanceof CloudflareApiError && err.status === 404) return;
        throw err;
      }
    },
  };
  return api;
}


/** What a custom hostname's state means for links on it. */
export type CertificateState =
  | { state: "active" }
  | { state: "pending"; detail: string }
  | { state: "failed"; detail: string };

const FAILED_HOSTNAME = new Set(["blocked", "moved", "deleted", "pending_deletion", "test_blocked", "test_failed"]);
const FAILED_SSL = new Set(["validation_timed_out", "issuance_timed_out", "deployment_timed_out", "initializing_timed_out", "expired", "deleted", "deactivating", "inactive"]);

/** Reads a hostname's last known state (as tern stored it) as one of three: serving, still
 * going, or stuck until someone acts. */
export function certificateState(h: { status: string | null; sslStatus: string | null; validationError: string | null } | null): CertificateState {
  if (!h || h.status === null) return { state: "pending", detail: "tern has not created the custom hostname at Cloudflare yet" };
  if (h.status === "active" && h.sslStatus === "active") return { state: "active" };
  if (FAILED_HOSTNAME.has(h.status)) return { state: "failed", detail: h.validationError ?? `Cloudflare reports the hostname ${h.status.replace(/_/g, " ")}` };
  if (h.sslStatus && FAILED_SSL.has(h.sslStatus)) return { state: "failed", detail: h.validationError ?? `the certificate's validation ended: ${h.sslStatus.replace(/_/g, " ")}` };
  if (h.validationError) return { state: "failed", detail: h.validationError };
  return { state: "pending", detail: (h.sslStatus && PENDING_WORDS[h.sslStatus]) ?? `Cloudflare reports it ${(h.sslStatus ?? h.status).replace(/_/g, " ")}` };
}

const PENDING_WORDS: Record<string, string> = {
  initializing: "Cloudflare is setting it up",
  pending_validation: "waiting for Cloudflare to validate the hostname",
  pending_issuance: "the certificate authority is issuing it",
  pending_deployment: "being deployed to Cloudflare's edge",
};

/** Why the certificate authority refused the hostname's validation, as Cloudflare reports it;
 * for a hostname Cloudflare gave up on (blocked, moved), its own verification error. A hostname
 * merely waiting for its CNAME ("does not CNAME to this zone") is not a failure. */
export function validationErrorOf(h: CustomHostname): string | null {
  const ssl = h.ssl?.validation_errors?.map((e) => e.message).find((m) => typeof m === "string" && m.length > 0);
  if (ssl) return ssl.slice(0, 500);
  if (!h.status || !FAILED_HOSTNAME.has(h.status)) return null;
  const own = h.verification_errors?.find((e) => typeof e === "string" && e.length > 0);
  return typeof own === "string" ? own.slice(0, 500) : null;
}
