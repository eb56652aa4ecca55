// A test DNS zone served two ways: over DNS-over-HTTPS (JSON API, the way Cloudflare's and
// Google's resolvers answer) for tern's domain checks, and as a mailauth resolver for the
// independent DKIM/SPF/DMARC verification of what tern delivered. Both read the same records,
// so what a test publishes is what both sides see.
//
// Control API (plain HTTP, loopback), used by workerd tests:
//   PUT    /records  {name, type, values[]}   replace the records of (name, type)
//   DELETE /records?name=&type=               remove them (type omitted: every type)
//   PUT    /failure  {name, mode}             make lookups of name fail: "servfail" | "none"
//   POST   /authenticate {rawBase64, ip, helo, mailFrom}
//                                             mailauth's verdict on a message, against this zone
import { readFileSync } from "node:fs";
import { createServer as createHttpServer, type IncomingMessage, type Server } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { authenticate } from "mailauth";
import { prepareTestCertificates } from "./certificates.ts";

export type RecordType = "TXT" | "MX" | "CNAME" | "A";
const TYPE_CODE: Record<string, number> = { A: 1, CNAME: 5, MX: 15, TXT: 16 };

export interface DnsZone {
  /** The DoH endpoint (https, trusted by workerd through the local CA). */
  dohPort: number;
  controlPort: number;
  set(name: string, type: RecordType, values: string[]): void;
  remove(name: string, type?: RecordType): void;
  resolver(name: string, type: string): Promise<unknown>;
  close(): Promise<void>;
}

function key(name: string, type: string): string {
  return `${name.toLowerCase().replace(/\.$/, "")} ${type.toUpperCase()}`;
}

/** TXT values longer than 255 characters go out as several strings, as real zones serve them. */
function quoteTxt(value: string): string {
  const chunks: string[] = [];
  for (let i = 0; i < value.length; i += 255) chunks.push(value.slice(i, i + 255));
  return (chunks.length ? chunks : [""]).map((c) => `"${c.replace(/["\\]/g, "\\$&")}"`).join(" ");
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port)));
}

export async function startDnsZone(): Promise<DnsZone> {
  const records = new Map<string, string[]>();
  const failures = new Map<string, "servfail" | "none">();

  const names = () => new Set([...records.keys()].map((k) => k.split(" ")[0]));
  function lookup(name: string, type: string): { status: number; values: string[] } {
    const n = name.toLowerCase().replace(/\.$/, "");
    const failure = failures.get(n);
    if (failure === "servfail") return { status: 2, values: [] };
    const values = records.get(key(n, type)) ?? [];
    if (values.length > 0) return { status: 0, values };
    return { status: names().has(n) ? 0 : 3, values: [] };
  }

  const certs = prepareTestCertificates();
  const doh = createHttpsServer({ cert: readFileSync(certs.certPath), key: readFileSync(certs.keyPath) }, (req, res) => {
    const url = new URL(req.url ?? "/", "https://localhost");
    const name = url.searchParams.get("name") ?? "";
    const type = (url.searchParams.get("type") ?? "A").toUpperCase();
    if (url.pathname !== "/dns-query" || !name) return void res.writeHead(400).end();
    const { status, values } = lookup(name, type);
    const answer = values.map((v) => ({
      name: name.replace(/\.?$/, "."),
      type: TYPE_CODE[type] ?? 0,
      TTL: 300,
      data: type === "TXT" ? quoteTxt(v) : type === "MX" || type === "CNAME" ? v.replace(/\.?$/, ".") : v,
    }));
    res.writeHead(200, { "content-type": "application/dns-json" });
    res.end(JSON.stringify({ Status: status, TC: false, RD: true, RA: true, AD: false, CD: false, Question: [{ name, type: TYPE_CODE[type] ?? 0 }], ...(answer.length ? { Answer: answer } : {}) }));
  });

  // mailauth asks the way dns.promises.resolve answers: TXT as arrays of strings, MX as
  // {exchange, priority}; a missing name is an ENOTFOUND/ENODATA error.
  async function resolver(name: string, type: string): Promise<unknown> {
    const { status, values } = lookup(name, type);
    if (status === 2) throw Object.assign(new Error(`queryTxt ESERVFAIL ${name}`), { code: "ESERVFAIL" });
    if (values.length === 0) throw Object.assign(new Error(`query ${status === 3 ? "ENOTFOUND" : "ENODATA"} ${name}`), { code: status === 3 ? "ENOTFOUND" : "ENODATA" });
    if (type === "TXT") return values.map((v) => { const parts: string[] = []; for (let i = 0; i < v.length; i += 255) parts.push(v.slice(i, i + 255)); return parts; });
    if (type === "MX") return values.map((v) => { const [p, h] = v.split(/\s+/); return { priority: Number(p), exchange: h }; });
    return values;
  }

  const zone = {
    set(name: string, type: RecordType, values: string[]) {
      records.set(key(name, type), values);
    },
    remove(name: string, type?: RecordType) {
      for (const k of [...records.keys()]) if (type ? k === key(name, type) : k.startsWith(key(name, "").trimEnd() + " ")) records.delete(k);
    },
  };

  const control = createHttpServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    const reply = (status: number, body: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    try {
      if (url.pathname === "/records" && req.method === "PUT") {
        const { name, type, values } = JSON.parse(await readBody(req)) as { name: string; type: RecordType; values: string[] };
        zone.set(name, type, values);
        return reply(200, { ok: true });
      }
      if (url.pathname === "/records" && req.method === "DELETE") {
        zone.remove(url.searchParams.get("name") ?? "", (url.searchParams.get("type") ?? undefined) as RecordType | undefined);
        return reply(200, { ok: true });
      }
      if (url.pathname === "/failure" && req.method === "PUT") {
        const { name, mode } = JSON.parse(await readBody(req)) as { name: string; mode: "servfail" | "none" | null };
        if (mode) failures.set(name.toLowerCase(), mode);
        else failures.delete(name.toLowerCase());
        return reply(200, { ok: true });
      }
      if (url.pathname === "/authenticate" && req.method === "POST") {
        const { rawBase64, ip, helo, mailFrom } = JSON.parse(await readBody(req)) as { rawBase64: string; ip: string; helo: string; mailFrom: string };
        const result = await authenticate(Buffer.from(rawBase64, "base64"), { ip, helo, sender: mailFrom, mta: "mx.test.invalid", resolver: resolver as never });
        return reply(200, {
          dkim: result.dkim.results.map((r) => ({ result: r.status.result, comment: r.status.comment ?? null, domain: r.signingDomain, selector: r.selector, algo: r.algo, aligned: r.status.aligned ?? null })),
          spf: result.spf ? { result: result.spf.status.result, domain: result.spf.domain } : null,
          dmarc: result.dmarc ? { result: result.dmarc.status.result, policy: result.dmarc.policy ?? null, alignment: result.dmarc.alignment ?? null } : null,
          headers: result.headers,
        });
      }
      reply(404, { error: "unknown" });
    } catch (err) {
      reply(500, { error: String(err) });
    }
  });

  const [dohPort, controlPort] = [await listen(doh as unknown as Server), await listen(control)];
  return {
    dohPort,
    controlPort,
    ...zone,
    resolver,
    async close() {
      await Promise.all([new Promise((r) => doh.close(r)), new Promise((r) => control.close(r))]);
    },
  };
}
