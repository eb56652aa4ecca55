// The test DNS zone (test/support/dns-zone.ts) from workerd: publish and remove records that
// tern's DNS-over-HTTPS checks will see, and ask mailauth for its verdict on a message.
import { env } from "cloudflare:workers";
import type { Captured } from "./peers.ts";

const control = () => `http://127.0.0.1:${env.TEST_PEERS.dns}`;

export async function publish(name: string, type: "TXT" | "MX" | "CNAME", values: string[]): Promise<void> {
  const res = await fetch(`${control()}/records`, { method: "PUT", body: JSON.stringify({ name, type, values }) });
  if (!res.ok) throw new Error(`zone: ${res.status}`);
}

export async function unpublish(name: string, type?: "TXT" | "MX" | "CNAME"): Promise<void> {
  const q = new URLSearchParams({ name, ...(type ? { type } : {}) });
  const res = await fetch(`${control()}/records?${q}`, { method: "DELETE" });
  if (!res.ok) throw new Error(`zone: ${res.status}`);
}

/** Makes the resolver answer SERVFAIL for a name (null: answer normally again). */
export async function failLookups(name: string, mode: "servfail" | null): Promise<void> {
  await fetch(`${control()}/failure`, { method: "PUT", body: JSON.stringify({ name, mode }) });
}

export interface DomainRecord {
  record: string;
  name: string;
  type: "TXT" | "MX" | "CNAME";
  value: string;
  status: string;
  priority?: number;
}

/** Publishes the records a domain answer lists (all of them, or those `which` picks). */
export async function publishRecords(domain: string, records: DomainRecord[], which: (r: DomainRecord) => boolean = () => true): Promise<void> {
  const byName = new Map<string, DomainRecord[]>();
  for (const r of records.filter(which)) {
    const fqdn = r.name === "@" ? domain : `${r.name}.${domain}`;
    const k = `${fqdn}|${r.type}`;
    byName.set(k, [...(byName.get(k) ?? []), r]);
  }
  for (const [k, rs] of byName) {
    const [fqdn, type] = k.split("|") as [string, "TXT" | "MX"];
    await publish(fqdn, type, rs.map((r) => (r.type === "MX" ? `${r.priority ?? 10} ${r.value}` : r.value)));
  }
}

export interface AuthVerdict {
  dkim: { result: string; comment: string | null; domain: string; selector: string; algo: string; aligned: string | null }[];
  spf: { result: string; domain: string } | null;
  dmarc: { result: string; policy: string | null; alignment: unknown } | null;
  headers: string;
}

/** mailauth's verdict on a message as the receiving peer got it (its envelope and client). */
export async function authenticateCaptured(msg: Captured, rawBase64 = msg.rawBase64): Promise<AuthVerdict> {
  const res = await fetch(`${control()}/authenticate`, {
    method: "POST",
    body: JSON.stringify({ rawBase64, ip: "127.0.0.1", helo: msg.ehloName, mailFrom: msg.envelopeFrom }),
  });
  if (!res.ok) throw new Error(`authenticate: ${res.status} ${await res.text()}`);
  return res.json();
}
