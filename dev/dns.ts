// The dev DNS zone of `npm start`: a DNS-over-HTTPS responder (the JSON API tern's checks use,
// worker/domains/dns.ts) on 127.0.0.1 that answers for the domains added locally with the
// records their pages list (dev/dns-records.ts), so Add domain and Verify work on a machine
// without DNS the way they would with real DNS. Names it does not hold answer NXDOMAIN.
//
// It reads the local D1 file that wrangler dev writes (read-only, at each query, so a domain
// is answered for as soon as it is added). It lives only in this Node process: the Worker
// has no code for it, only its DOH_URL pointed here, and a deployed Worker cannot reach a
// developer's loopback, so no setting can turn it on in a deployment.
import { existsSync, readdirSync, statSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { DatabaseSync } from "node:sqlite";
import { buildZone, zoneKey, type LocalClaim, type LocalDomain, type LocalKey, type Zone, type ZoneHosts } from "./dns-records.ts";

export interface DevDns {
  /** The DOH_URL to give the Worker. */
  url: string;
  port: number;
  close(): Promise<void>;
}

export interface DevDnsOptions {
  /** wrangler's --persist-to directory (its D1 databases are under v3/d1). */
  persistTo: string;
  /** 0: any free port. */
  port: number;
  /** The Worker's hosts (workerHosts), asked for at the first query and kept. */
  hosts: () => Promise<ZoneHosts>;
  log: (line: string) => void;
}

const TYPE_CODE: Record<string, number> = { CNAME: 5, MX: 15, TXT: 16 };

/** node:sqlite is stable enough for reading and ships with Node 22; its one-line
 * "experimental" warning at load would only confuse `npm start`'s output. */
async function loadSqlite(): Promise<typeof import("node:sqlite")> {
  const emit = process.emitWarning;
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    if (!String(warning).includes("SQLite is an experimental feature")) (emit as (...a: unknown[]) => void).call(process, warning, ...rest);
  }) as typeof process.emitWarning;
  try {
    return await import("node:sqlite");
  } finally {
    process.emitWarning = emit;
  }
}

/** The D1 database file wrangler keeps for the DB binding: the one with a domains table. */
function d1File(persistTo: string, sqlite: typeof import("node:sqlite")): string | null {
  const dir = join(persistTo, "v3", "d1", "miniflare-D1DatabaseObject");
  if (!existsSync(dir)) return null;
  const files = readdirSync(dir)
    .filter((f) => f.endsWith(".sqlite") && f !== "metadata.sqlite")
    .map((f) => join(dir, f))
    .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
  for (const file of files) {
    const db = new sqlite.DatabaseSync(file, { readOnly: true });
    try {
      if (db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'domains'").get()) return file;
    } finally {
      db.close();
    }
  }
  return null;
}

/** TXT values over 255 characters go out as several strings, as real zones serve them. */
function quoteTxt(value: string): string {
  const chunks: string[] = [];
  for (let i = 0; i < value.length; i += 255) chunks.push(value.slice(i, i + 255));
  return (chunks.length ? chunks : [""]).map((c) => `"${c.replace(/["\\]/g, "\\$&")}"`).join(" ");
}

/** The DoH JSON answer for one question against a zone. */
export function answer(zone: Zone, name: string, type: string): Record<string, unknown> {
  const n = name.toLowerCase().replace(/\.$/, "");
  const t = type.toUpperCase();
  const values = zone.get(zoneKey(n, t)) ?? [];
  const exists = values.length > 0 || [...zone.keys()].some((k) => k.startsWith(`${n} `));
  const records = values.map((v) => ({
    name: `${n}.`,
    type: TYPE_CODE[t] ?? 0,
    TTL: 60,
    data: t === "TXT" ? quoteTxt(v) : t === "MX" || t === "CNAME" ? `${v}.` : v,
  }));
  return { Status: exists ? 0 : 3, TC: false, RD: true, RA: true, AD: false, CD: false, Question: [{ name: `${n}.`, type: TYPE_CODE[t] ?? 0 }], ...(records.length ? { Answer: records } : {}) };
}

/** The Worker's own reading of its vars (worker/config.ts), so the zone holds exactly the hosts
 * it will check for. Imported by a computed name: the module is typed against the Worker's
 * globals (Env), which this Node project does not declare; at run time it is plain code. */
export async function workerHosts(vars: Record<string, string>): Promise<ZoneHosts> {
  const path = "../worker/config.ts";
  const { readConfig } = (await import(path)) as { readConfig(env: Record<string, string>): ZoneHosts };
  return readConfig(vars);
}

export async function startDevDns(o: DevDnsOptions): Promise<DevDns> {
  const sqlite = await loadSqlite();
  let db: DatabaseSync | null = null;

  let hosts: ZoneHosts | undefined;
  async function readZone(): Promise<Zone> {
    hosts ??= await o.hosts();
    if (!db) {
      const file = d1File(o.persistTo, sqlite);
      if (!file) throw new Error(`no local D1 database under ${o.persistTo}`);
      db = new sqlite.DatabaseSync(file, { readOnly: true });
    }
    const domains = db.prepare("SELECT id, name, region, return_path AS returnPath, receiving FROM domains").all() as unknown as (Omit<LocalDomain, "receiving"> & { receiving: number })[];
    const keys = db.prepare("SELECT id, domain_id AS domainId, selector, algorithm, public_key AS publicKey, state, status FROM dkim_keys WHERE state != 'retired'").all() as unknown as LocalKey[];
    const claims = db.prepare("SELECT name, token FROM domain_claims WHERE status = 'pending'").all() as unknown as LocalClaim[];
    return buildZone(domains.map((d) => ({ ...d, receiving: Boolean(d.receiving) })), keys, claims, hosts);
  }

  const server: Server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const name = url.searchParams.get("name");
    if (url.pathname !== "/dns-query" || !name) return void res.writeHead(400, { "content-type": "text/plain" }).end("GET /dns-query?name=<name>&type=<TXT|MX|CNAME>\n");
    const type = url.searchParams.get("type") ?? "A";
    let body: Record<string, unknown>;
    // The database is busy for a moment while wrangler commits a batch: try again shortly.
    for (let attempt = 0; ; attempt++) {
      try {
        body = answer(await readZone(), name, type);
        break;
      } catch (err) {
        if (attempt < 5) {
          await new Promise((r) => setTimeout(r, 50));
          continue;
        }
        o.log(`could not read the local domains: ${err instanceof Error ? err.message : String(err)}`);
        body = { Status: 2, Question: [{ name, type: TYPE_CODE[type.toUpperCase()] ?? 0 }] }; // SERVFAIL: tern says DNS could not be reached
        break;
      }
    }
    res.writeHead(200, { "content-type": "application/dns-json" }).end(JSON.stringify(body));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(o.port, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/dns-query`,
    port,
    async close() {
      await new Promise((r) => server.close(r));
      (db as DatabaseSync | null)?.close();
    },
  };
}
