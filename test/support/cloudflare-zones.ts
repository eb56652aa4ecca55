// The tenants' side of the Cloudflare stand-in (cloudflare-api.ts mounts it): zones a test makes,
// each with its own tokens, and their DNS records, as tern's auto-configure reaches them:
//   GET  /client/v4/zones?name=                      the zones the token sees by that name
//   GET  /client/v4/zones/{id}/dns_records?name=&type=  the zone's records (filters optional)
//   POST /client/v4/zones/{id}/dns_records           create one, with Cloudflare's validation
//                                                    (1004 with its error_chain), duplicate
//                                                    (81057, 81058) and CNAME (81053, 81054) errors
// Auth as Cloudflare answers it: a malformed Authorization header is 400 6003 (chain 6111), an
// unknown token 403 9109 "Invalid access token"; a zone's token sees its zone by name whatever its
// permission; listing records needs DNS read (else 403 9109 "Unauthorized to access requested
// resource"), creating needs DNS edit (else 403 10000 "Authentication error"). Records the zone
// holds (seeded or created) are published into the test DNS zone (dns-zone.ts), so a check over
// DNS sees them.
//
// Control API (under /control, no auth):
//   POST /control/zones {name, records?: [{type, name, content, priority?, proxied?}]}
//        -> {id, name, tokens: {edit, read, zone}}  (DNS edit, DNS read, zone read only)
//   GET  /control/zones/{id}                      its records and the requests it saw
//   PUT  /control/zones/{id}/outage {mode, method?}  "503" | "html" | "garbage" | null for every
//                                                 call about the zone (its lookup by name too),
//                                                 or only those of one method ("POST": creates)
import { randomBytes, randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { RecordType } from "./dns-zone.ts";

type Permission = "edit" | "read" | "zone";
type Mode = "503" | "html" | "garbage";

interface DnsRecord {
  id: string;
  zone_id: string;
  zone_name: string;
  name: string;
  type: string;
  content: string;
  proxiable: boolean;
  proxied: boolean;
  ttl: number;
  priority?: number;
  comment: string | null;
  tags: string[];
  created_on: string;
  modified_on: string;
}

interface Zone {
  id: string;
  name: string;
  /** "pending": its nameservers are not Cloudflare's yet (it holds records but serves none). */
  status: "active" | "pending";
  records: DnsRecord[];
  tokens: Map<string, Permission>;
  outage: { mode: Mode; method?: string } | null;
  seen: { method: string; path: string; body: string; authorization: string }[];
}

/** Where records the zones hold are published (the test DNS zone). */
export interface Publisher {
  set(name: string, type: RecordType, values: string[]): void;
  remove(name: string, type?: RecordType): void;
}

const SUPPORTED = new Set(["A", "AAAA", "CNAME", "MX", "TXT", "NS", "CAA", "SRV"]);

/** A TXT content as DNS serves it: quoted strings joined, else the text itself. */
function txtValue(content: string): string {
  const s = content.trim();
  if (!s.startsWith('"')) return s;
  return [...s.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!.replace(/\\(.)/g, "$1")).join("");
}

const newToken = () => randomBytes(30).toString("base64url"); // 40 characters, as Cloudflare's

export function cloudflareZones(dns: Publisher | undefined) {
  const zones = new Map<string, Zone>();

  const envelope = (res: ServerResponse, status: number, result: unknown, errors: unknown[] = [], extra: Record<string, unknown> = {}): void => {
    res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify({ success: errors.length === 0, errors, messages: [], result, ...extra }));
  };

  /** What DNS serves for (name, type) after a change: every record the zones hold there. */
  function publish(name: string, type: string): void {
    if (!dns || !["TXT", "MX", "CNAME", "A"].includes(type)) return;
    const all = [...zones.values()].flatMap((z) => z.records).filter((r) => r.name === name && r.type === type);
    if (all.length === 0) return dns.remove(name, type as RecordType);
    dns.set(name, type as RecordType, all.map((r) => (type === "TXT" ? txtValue(r.content) : type === "MX" ? `${r.priority ?? 0} ${r.content}` : r.content)));
  }

  /** Cloudflare's checks of a new record; null when it may be made. */
  function refusal(z: Zone, b: Record<string, unknown>): { status: number; errors: unknown[] } | null {
    const invalid = (code: number, message: string) => ({ status: 400, errors: [{ code: 1004, message: "DNS Validation Error", error_chain: [{ code, message }] }] });
    const type = typeof b.type === "string" ? b.type.toUpperCase() : "";
    if (!SUPPORTED.has(type)) return invalid(9000, "Invalid or missing record type.");
    if (typeof b.name !== "string" || !b.name) return invalid(9007, "Invalid or missing name.");
    const name = b.name.toLowerCase().replace(/\.$/, "");
    const full = name === "@" ? z.name : name === z.name || name.endsWith(`.${z.name}`) ? name : `${name}.${z.name}`;
    if (typeof b.content !== "string" || !b.content) return invalid(9008, "Content is required.");
    if (b.ttl !== undefined && (typeof b.ttl !== "number" || (b.ttl !== 1 && (b.ttl < 60 || b.ttl > 86400)))) return invalid(9021, "Invalid TTL. Must be between 60 and 86400 seconds, or 1 for Automatic.");
    if (b.proxied === true && !["A", "AAAA", "CNAME"].includes(type)) return invalid(9004, "This record type cannot be proxied.");
    if (type === "MX" && (typeof b.priority !== "number" || b.priority < 0 || b.priority > 65535)) return invalid(9100, "MX records require a priority between 0 and 65535.");
    if (type === "TXT" && b.content.length > 4096) return invalid(9104, "Content for TXT record is too long.");
    const at = z.records.filter((r) => r.name === full);
    if (type === "CNAME" && at.length > 0) return { status: 400, errors: [{ code: 81053, message: "An A, AAAA, or CNAME record with that host already exists." }] };
    if (type !== "CNAME" && at.some((r) => r.type === "CNAME")) return { status: 400, errors: [{ code: 81054, message: "A CNAME record with that host already exists." }] };
    if (at.some((r) => r.type === type && r.content === b.content && (type !== "MX" || r.priority === b.priority))) return { status: 400, errors: [{ code: 81058, message: "An identical record already exists." }] };
    return null;
  }

  function add(z: Zone, b: Record<string, unknown>): DnsRecord {
    const type = String(b.type).toUpperCase();
    const name = String(b.name).toLowerCase().replace(/\.$/, "");
    const full = name === "@" ? z.name : name === z.name || name.endsWith(`.${z.name}`) ? name : `${name}.${z.name}`;
    const now = new Date().toISOString();
    const r: DnsRecord = {
      id: randomUUID().replace(/-/g, ""), zone_id: z.id, zone_name: z.name, name: full, type, content: String(b.content),
      proxiable: ["A", "AAAA", "CNAME"].includes(type), proxied: b.proxied === true, ttl: typeof b.ttl === "number" ? b.ttl : 1,
      ...(type === "MX" ? { priority: Number(b.priority) } : {}), comment: typeof b.comment === "string" ? b.comment : null, tags: [], created_on: now, modified_on: now,
    };
    z.records.push(r);
    // A pending zone holds records but serves none: its nameservers are not Cloudflare's yet.
    if (z.status === "active") publish(full, type);
    return r;
  }

  async function readBody(req: IncomingMessage): Promise<string> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString("utf8");
  }

  function outageAnswer(res: ServerResponse, mode: Mode): void {
    if (mode === "503") return envelope(res, 503, null, [{ code: 10013, message: "Service temporarily unavailable" }]);
    if (mode === "html") return void res.writeHead(502, { "content-type": "text/html" }).end("<html><body><h1>502 Bad Gateway</h1>cloudflare</body></html>");
    return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ note: "not an API envelope" }));
  }

  /** Handles /client/v4/zones... except the custom hostnames of cloudflare-api.ts's own zone;
   * false when the path is not one of these. */
  async function api(req: IncomingMessage, res: ServerResponse, url: URL): Promise<boolean> {
    const path = url.pathname;
    const list = path === "/client/v4/zones" || path === "/client/v4/zones/";
    const m = path.match(/^\/client\/v4\/zones\/([^/]+)\/dns_records\/?$/);
    if (!list && !m) return false;
    const body = req.method === "POST" ? await readBody(req) : "";
    const zone = m ? zones.get(m[1]!) : [...zones.values()].find((z) => z.name === (url.searchParams.get("name") ?? "").toLowerCase());
    const auth = req.headers.authorization ?? "";
    zone?.seen.push({ method: req.method ?? "", path: path + url.search, body, authorization: auth });
    if (zone?.outage && (!zone.outage.method || zone.outage.method === req.method)) {
      outageAnswer(res, zone.outage.mode);
      return true;
    }
    const token = auth.match(/^Bearer ([A-Za-z0-9_-]{40})$/)?.[1];
    if (!token) {
      envelope(res, 400, null, [{ code: 6003, message: "Invalid request headers", error_chain: [{ code: 6111, message: "Invalid format for Authorization header" }] }]);
      return true;
    }
    const owner = [...zones.values()].find((z) => z.tokens.has(token));
    if (!owner) {
      envelope(res, 403, null, [{ code: 9109, message: "Invalid access token" }]);
      return true;
    }
    if (list) {
      if (req.method !== "GET") return void envelope(res, 405, null, [{ code: 10405, message: "Method not allowed" }]), true;
      const named = (url.searchParams.get("name") ?? "").toLowerCase();
      const visible = [...zones.values()].filter((z) => z.name === named && z.tokens.has(token))
        .map((z) => ({ id: z.id, name: z.name, status: z.status, paused: false, type: "full", name_servers: ["ada.ns.cloudflare.com", "bob.ns.cloudflare.com"], account: { id: "acc", name: "Tenant" } }));
      envelope(res, 200, visible, [], { result_info: { page: 1, per_page: 20, count: visible.length, total_count: visible.length, total_pages: 1 } });
      return true;
    }
    if (!zone) {
      envelope(res, 404, null, [{ code: 7003, message: "Could not route to " + path + ", perhaps your object identifier is invalid?" }]);
      return true;
    }
    const permission = zone.tokens.get(token);
    if (req.method === "GET") {
      if (permission !== "edit" && permission !== "read") return void envelope(res, 403, null, [{ code: 9109, message: "Unauthorized to access requested resource" }]), true;
      const name = url.searchParams.get("name")?.toLowerCase().replace(/\.$/, "");
      const type = url.searchParams.get("type")?.toUpperCase();
      const found = zone.records.filter((r) => (!name || r.name === name) && (!type || r.type === type));
      const perPage = Math.min(Math.max(Number(url.searchParams.get("per_page")) || 100, 5), 5000);
      const page = Math.max(Number(url.searchParams.get("page")) || 1, 1);
      const slice = found.slice((page - 1) * perPage, page * perPage);
      envelope(res, 200, slice, [], { result_info: { page, per_page: perPage, count: slice.length, total_count: found.length, total_pages: Math.max(1, Math.ceil(found.length / perPage)) } });
      return true;
    }
    if (req.method === "POST") {
      if (permission !== "edit") return void envelope(res, 403, null, [{ code: 10000, message: "Authentication error" }]), true;
      let b: Record<string, unknown>;
      try {
        b = JSON.parse(body) as Record<string, unknown>;
      } catch {
        return void envelope(res, 400, null, [{ code: 9207, message: "Request body is invalid." }]), true;
      }
      const refused = refusal(zone, b);
      if (refused) return void envelope(res, refused.status, null, refused.errors), true;
      envelope(res, 200, add(zone, b));
      return true;
    }
    envelope(res, 405, null, [{ code: 10405, message: "Method not allowed" }]);
    return true;
  }

  async function control(req: IncomingMessage, res: ServerResponse, url: URL): Promise<boolean> {
    const reply = (status: number, body: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    if (url.pathname === "/control/zones" && req.method === "POST") {
      const b = JSON.parse(await readBody(req)) as { name: string; records?: Record<string, unknown>[]; status?: "active" | "pending" };
      const tokens = { edit: newToken(), read: newToken(), zone: newToken() };
      const z: Zone = {
        id: randomBytes(16).toString("hex"), name: b.name.toLowerCase(), status: b.status ?? "active", records: [], outage: null, seen: [],
        tokens: new Map([[tokens.edit, "edit"], [tokens.read, "read"], [tokens.zone, "zone"]]),
      };
      zones.set(z.id, z);
      for (const r of b.records ?? []) add(z, r);
      reply(200, { id: z.id, name: z.name, tokens });
      return true;
    }
    const m = url.pathname.match(/^\/control\/zones\/([^/]+)(\/outage)?$/);
    const z = m ? zones.get(m[1]!) : undefined;
    if (!m) return false;
    if (!z) return reply(404, { error: "no such zone" }), true;
    if (!m[2] && req.method === "GET") return reply(200, { id: z.id, name: z.name, records: z.records, seen: z.seen }), true;
    if (m[2] && req.method === "PUT") {
      const b = JSON.parse(await readBody(req)) as { mode: Mode | null; method?: string };
      z.outage = b.mode ? { mode: b.mode, method: b.method } : null;
      return reply(200, { ok: true }), true;
    }
    return false;
  }

  return { api, control };
}
