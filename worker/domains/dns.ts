// DNS over HTTPS, JSON API (as served by Cloudflare's and Google's resolvers): the one seam
// through which tern reads DNS. Answers are classified, never thrown: a missing record and a
// resolver that could not answer are different facts (the second must not fail a domain).

export type RecordType = "TXT" | "MX" | "CNAME";
const TYPE_CODE: Record<RecordType, number> = { TXT: 16, MX: 15, CNAME: 5 };

export type Lookup =
  /** The records of that type at that name (TXT strings joined, MX as "priority host"). */
  | { kind: "records"; values: string[] }
  /** NXDOMAIN, or the name exists without records of that type. */
  | { kind: "none" }
  /** The resolver failed (SERVFAIL, timeout, unreachable, nonsense): nothing is known. */
  | { kind: "error"; message: string };

export interface Resolver {
  lookup(name: string, type: RecordType): Promise<Lookup>;
}

const TIMEOUT_MS = 5_000;

export function dohResolver(url: string, fetcher: typeof fetch = fetch): Resolver {
  return {
    async lookup(name, type) {
      const target = new URL(url);
      target.searchParams.set("name", name);
      target.searchParams.set("type", type);
      let body: unknown;
      try {
        const res = await fetcher(target, { headers: { accept: "application/dns-json" }, signal: AbortSignal.timeout(TIMEOUT_MS) });
        if (!res.ok) return { kind: "error", message: `resolver ${target.host} answered HTTP ${res.status}` };
        body = await res.json();
      } catch (err) {
        // The host (DOH_URL's) tells an operator which resolver to look at; the rest is the runtime's.
        return { kind: "error", message: `resolver ${target.host} unreachable: ${err instanceof Error ? err.message : String(err)}` };
      }
      return classify(body, type);
    },
  };
}

interface DohAnswer {
  type?: unknown;
  data?: unknown;
}

export function classify(body: unknown, type: RecordType): Lookup {
  if (!body || typeof body !== "object") return { kind: "error", message: "resolver answer is not JSON" };
  const { Status, Answer } = body as { Status?: unknown; Answer?: unknown };
  if (Status === 3) return { kind: "none" }; // NXDOMAIN
  if (Status !== 0) return { kind: "error", message: `resolver status ${String(Status)}` };
  const answers = Array.isArray(Answer) ? (Answer as DohAnswer[]) : [];
  const values = answers
    .filter((a) => a && a.type === TYPE_CODE[type] && typeof a.data === "string")
    .map((a) => normalise(type, a.data as string));
  return values.length > 0 ? { kind: "records", values } : { kind: "none" };
}

function normalise(type: RecordType, data: string): string {
  if (type === "TXT") return joinTxt(data);
  if (type === "MX") {
    const [priority, host] = data.trim().split(/\s+/);
    return `${Number(priority)} ${hostName(host ?? "")}`;
  }
  return hostName(data);
}

function hostName(host: string): string {
  return host.trim().replace(/\.$/, "").toLowerCase();
}

/** TXT data arrives as one or more quoted strings ("v=DKIM1; " "p=..."), with \" and \DDD
 * escapes; some resolvers send a single string unquoted. The strings of one record join
 * without separators (RFC 7208 3.3, RFC 6376 3.6.2.2). */
export function joinTxt(data: string): string {
  const s = data.trim();
  if (!s.startsWith('"')) return s;
  let out = "";
  let i = 0;
  while (i < s.length) {
    if (s[i] !== '"') {
      i++;
      continue;
    }
    i++;
    while (i < s.length && s[i] !== '"') {
      if (s[i] === "\\" && i + 1 < s.length) {
        const digits = s.slice(i + 1, i + 4);
        if (/^\d{3}$/.test(digits)) {
          out += String.fromCharCode(Number(digits));
          i += 4;
        } else {
          out += s[i + 1];
          i += 2;
        }
      } else {
        out += s[i++];
      }
    }
    i++; // closing quote
  }
  return out;
}
