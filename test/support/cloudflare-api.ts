// A loopback stand-in for the part of Cloudflare's API tern uses to manage tracking hosts:
// custom hostnames of one zone (POST/GET/DELETE /client/v4/zones/{zone}/custom_hostnames...),
// (and PATCH to validate again), with the v4 envelope, Bearer auth, Cloudflare's duplicate error
// (409, code 1406) and the lifecycle of a real one: a new hostname is `pending` with its
// certificate `pending_validation`; HTTP validation succeeds when the test zone (dns-zone.ts)
// has its CNAME to the fallback origin at creation or at a PATCH asking to validate again (the
// moments Cloudflare checks at once; its own retries back off past a test's length), unless a
// test holds it pending or makes its validation fail. Started by test/global-setup.ts.
//
// Control API (same port, under /control, no auth), used by workerd tests:
//   GET  /control/hostnames                     every hostname the zone holds, and the requests seen
//   POST /control/hostnames/{name}/hold         keep it pending whatever DNS says (for a name
//                                               not created yet: from its creation on; so fail)
//   POST /control/hostnames/{name}/activate     make it active now (hostname and certificate)
//   POST /control/hostnames/{name}/fail {message}  its validation fails with that error
//   PUT  /control/outage {hostname, mode}       calls about that hostname answer "503" (an
//                                               outage), "html" (a proxy's error page), "garbage"
//                                               (an envelope with no hostname in it); mode null: normal
// Tenants' zones and their DNS records (auto-configure) are cloudflare-zones.ts's, on the same port.
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { cloudflareZones, type Publisher } from "./cloudflare-zones.ts";

export const TEST_ZONE_ID = "023e105f4ecef8ad9ca31a8372d0c353";
export const TEST_API_TOKEN = "cf-test-token-5d9c1b7e0f2a4c6e8b1d3f5a7c9e0b2d";

interface Hostname {
  id: string;
  hostname: string;
  status: string;
  ssl: { id: string; type: "dv"; method: string; status: string; settings: Record<string, unknown>; validation_errors?: { message: string }[]; validation_records?: unknown[] };
  verification_errors?: string[];
  ownership_verification: { type: "txt"; name: string; value: string };
  created_at: string;
  hold?: boolean;
}

type Mode = "503" | "html" | "garbage";

export interface CloudflareApi {
  port: number;
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** `cnameOf` answers the CNAME targets the test zone publishes at a name; tenants' records are
 * published through `dns`. */
export async function startCloudflareApi(cnameOf: (name: string) => Promise<string[]>, fallbackOrigin: string, dns?: Publisher): Promise<CloudflareApi> {
  const tenantZones = cloudflareZones(dns);
  const hostnames = new Map<string, Hostname>();
  const outages = new Map<string, Mode>();
  /** What a test asked of a name before tern created it, applied at its creation. */
  const presets = new Map<string, { action: "hold" | "fail"; body: string }>();
  const seen: { method: string; path: string; hostname: string | null }[] = [];

  const envelope = (res: ServerResponse, status: number, result: unknown, errors: { code: number; message: string }[] = [], extra: Record<string, unknown> = {}) =>
    res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify({ success: errors.length === 0, errors, messages: [], result, ...extra }));

  const view = (h: Hostname) => {
    const { hold: _hold, ...rest } = h;
    return rest;
  };

  /** A validation attempt: a pending hostname whose CNAME reaches the zone is validated. */
  async function validate(h: Hostname): Promise<void> {
    if (h.hold || h.status !== "pending" || h.ssl.status !== "pending_validation") return;
    const targets = await cnameOf(h.hostname).catch(() => []);
    if (targets.map((t) => t.toLowerCase().replace(/\.$/, "")).includes(fallbackOrigin)) {
      h.status = "active";
      h.ssl.status = "active";
      delete h.verification_errors;
      delete h.ssl.validation_records;
    }
  }

  const byName = (name: string) => [...hostnames.values()].find((h) => h.hostname === name);

  const server = createServer(async (req, res) => {
    try {
      const url = new URL(req.url ?? "/", "http://localhost");
      const path = url.pathname;
      if (path.startsWith("/control/") && (await tenantZones.control(req, res, url))) return;
      if (path.startsWith("/control/")) return await control(req, res, url);
      if (await tenantZones.api(req, res, url)) return;

      const prefix = `/client/v4/zones/${TEST_ZONE_ID}/custom_hostnames`;
      if (req.headers.authorization !== `Bearer ${TEST_API_TOKEN}`) {
        return envelope(res, 403, null, [{ code: 10000, message: "Authentication error" }]);
      }
      if (!path.startsWith(prefix)) {
        return envelope(res, 404, null, [{ code: 7003, message: "Could not route to " + path + ", perhaps your object identifier is invalid?" }]);
      }
      const id = path.slice(prefix.length).replace(/^\//, "");
      const body = req.method === "POST" ? await readBody(req) : "";
      const named = req.method === "POST" ? (JSON.parse(body || "{}") as { hostname?: string }).hostname ?? null
        : id ? hostnames.get(id)?.hostname ?? null : url.searchParams.get("hostname");
      seen.push({ method: req.method ?? "", path: path.slice(prefix.length) + url.search, hostname: named });
      const outage = named ? outages.get(named) : undefined;
      if (outage === "503") return envelope(res, 503, null, [{ code: 10013, message: "Service temporarily unavailable" }]);
      if (outage === "html") return res.writeHead(502, { "content-type": "text/html" }).end("<html><body>502 Bad Gateway</body></html>");
      if (outage === "garbage") return envelope(res, 200, { note: "not a custom hostname" });

      if (req.method === "POST" && !id) {
        const b = JSON.parse(body) as { hostname?: string; ssl?: { method?: string; type?: string; settings?: Record<string, unknown> } };
        if (!b.hostname || !b.ssl?.method || b.ssl.type !== "dv") {
          return envelope(res, 400, null, [{ code: 1400, message: "Invalid request: hostname and ssl {method, type: dv} are required" }]);
        }
        if (byName(b.hostname)) return envelope(res, 409, null, [{ code: 1406, message: "Duplicate custom hostname found." }]);
        const h: Hostname = {
          id: randomUUID(),
          hostname: b.hostname,
          status: "pending",
          ssl: {
            id: randomUUID(), type: "dv", method: b.ssl.method, status: "pending_validation", settings: b.ssl.settings ?? {},
            validation_records: [{ http_url: `http://${b.hostname}/.well-known/pki-validation/${randomUUID()}.txt`, http_body: randomUUID() }],
          },
          verification_errors: ["custom hostname does not CNAME to this zone."],
          ownership_verification: { type: "txt", name: `_cf-custom-hostname.${b.hostname}`, value: randomUUID() },
          created_at: new Date().toISOString(),
        };
        hostnames.set(h.id, h);
        const preset = presets.get(h.hostname);
        if (preset) {
          presets.delete(h.hostname);
          apply(h, preset.action, preset.body);
        }
        await validate(h);
        return envelope(res, 201, view(h));
      }
      if (req.method === "GET" && !id) {
        const wanted = url.searchParams.get("hostname");
        const list = [...hostnames.values()].filter((h) => !wanted || h.hostname === wanted);
        return envelope(res, 200, list.map(view), [], { result_info: { page: 1, per_page: 20, count: list.length, total_count: list.length } });
      }
      const h = hostnames.get(id);
      if (!h) return envelope(res, 404, null, [{ code: 1436, message: "The custom hostname was not found." }]);
      if (req.method === "GET") return envelope(res, 200, view(h));
      if (req.method === "PATCH") {
        const b = JSON.parse((await readBody(req)) || "{}") as { ssl?: { method?: string; type?: string } };
        if (b.ssl && (b.ssl.method !== h.ssl.method || b.ssl.type !== h.ssl.type)) {
          return envelope(res, 400, null, [{ code: 1400, message: "Changing the validation method is not supported here" }]);
        }
        if (b.ssl) await validate(h);
        return envelope(res, 200, view(h));
      }
      if (req.method === "DELETE") {
        hostnames.delete(id);
        return envelope(res, 200, { id });
      }
      envelope(res, 405, null, [{ code: 10405, message: "Method not allowed" }]);
    } catch (err) {
      envelope(res, 500, null, [{ code: 10001, message: String(err) }]);
    }
  });

  async function control(req: IncomingMessage, res: ServerResponse, url: URL) {
    const reply = (status: number, body: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    if (url.pathname === "/control/hostnames" && req.method === "GET") {
      return reply(200, { hostnames: [...hostnames.values()], seen });
    }
    if (url.pathname === "/control/outage" && req.method === "PUT") {
      const { hostname, mode } = JSON.parse(await readBody(req)) as { hostname: string; mode: Mode | null };
      if (mode) outages.set(hostname, mode);
      else outages.delete(hostname);
      return reply(200, { ok: true });
    }
    const m = url.pathname.match(/^\/control\/hostnames\/([^/]+)\/(hold|activate|fail)$/);
    if (m && req.method === "POST") {
      const body = await readBody(req);
      const name = decodeURIComponent(m[1]!);
      const h = byName(name);
      const action = m[2] as "hold" | "activate" | "fail";
      if (!h) {
        if (action === "activate") return reply(404, { error: `no hostname ${name}` });
        presets.set(name, { action, body });
        return reply(200, { preset: action });
      }
      apply(h, action, body);
      return reply(200, view(h));
    }
    reply(404, { error: "unknown" });
  }

  function apply(h: Hostname, action: "hold" | "activate" | "fail", body: string) {
    if (action === "hold") h.hold = true;
    if (action === "activate") {
      h.hold = false;
      h.status = "active";
      h.ssl.status = "active";
      delete h.verification_errors;
    }
    if (action === "fail") {
      h.hold = true;
      h.ssl.status = "validation_timed_out";
      h.ssl.validation_errors = [{ message: (JSON.parse(body || "{}") as { message?: string }).message ?? "caa_error: CAA records forbid issuance" }];
    }
  }

  const port = await new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)));
  return {
    port,
    close: () => new Promise((r) => server.close(() => r())),
  };
}
