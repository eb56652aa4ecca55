// Fetches of URLs a caller gave us (attachment `path`s): https only, never toward private,
// loopback or reserved addresses, redirects checked hop by hop, size and time bounded.
// Every failure is an explicit result whose message is safe to show to the API caller.
import { concatBytes } from "../bytes.ts";
import type { Result } from "../result.ts";


export interface OutboundPolicy {
  /** Allow loopback, private and reserved hosts and any port (local development and tests only). */
  allowPrivate: boolean;
  /** Allow plain http as well as https. */
  allowHttp: boolean;
  /** The largest body accepted, in bytes. */
  maxBytes: number;
  /** The whole fetch, redirects and body included, is abandoned after this many milliseconds. */
  timeoutMs: number;
  /** How many redirects are followed before giving up. */
  maxRedirects: number;
}

export interface OutboundFile {
  body: Uint8Array;
  /** The Content-Type header of the final answer, as sent. */
  contentType?: string;
  /** The URL the body came from, after redirects. */
  finalUrl: string;
}

/** Why a fetch failed, safe to show; `tooBig` when the body was over the size limit. */
export type OutboundFailure = { message: string; tooBig?: true };

/** A tighter size limit for one fetch than the policy's, and what to say when it is passed. */
export interface FetchLimit {
  maxBytes: number;
  message: string;
}


const LOCAL_NAME_SUFFIXES = [".localhost", ".local", ".internal", ".home.arpa"];

/** IPv4 ranges refused: every block of IANA's IPv4 special-purpose registry (test data:
 * test/fixtures/iana-special-purpose.ts), and multicast, which has a registry of its own.
 * The few registry blocks that are globally reachable (anycast relays, AS112 sinks) serve
 * no files or webhooks either. */
const BLOCKED_V4: ReadonlyArray<readonly [string, number]> = [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.31.196.0", 24],
  ["192.52.193.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["192.175.48.0", 24],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
];

/** Where an IPv6 address carries an IPv4 address the packet really goes to (or comes from):
 * judged by the IPv4 rules. `at` is the 16-bit group the IPv4 address starts at; Teredo's
 * client address is stored inverted (RFC 4380 4) and its server's sits at group 2. */
const EMBEDDING_V4: ReadonlyArray<{ base: string; prefix: number; at: number[]; inverted?: number }> = [
  { base: "::ffff:0:0", prefix: 96, at: [6] }, // IPv4-mapped (RFC 4291)
  { base: "::", prefix: 96, at: [6] }, // IPv4-compatible, deprecated (RFC 4291); :: and ::1 fall in 0.0.0.0/8
  { base: "64:ff9b::", prefix: 96, at: [6] }, // NAT64 well-known prefix (RFC 6052)
  { base: "2002::", prefix: 16, at: [1] }, // 6to4 (RFC 3056)
  { base: "2001::", prefix: 32, at: [2, 6], inverted: 6 }, // Teredo server and client (RFC 4380)
];

/** IPv6 ranges refused: the rest of IANA's IPv6 special-purpose registry, plus the
 * deprecated site-local and multicast ranges. Addresses outside 2000::/3, the only space
 * IANA allocates for global unicast, are refused as well (see isPublicIpv6), which covers
 * the local-use NAT64 prefix 64:ff9b:1::/48 (its IPv4 position depends on a local prefix
 * length), the discard prefix 100::/64 and SRv6 5f00::/16; they are listed for clarity. */
const BLOCKED_V6: ReadonlyArray<readonly [string, number]> = [
  ["::", 128],
  ["::1", 128],
  ["64:ff9b:1::", 48],
  ["100::", 64],
  ["2001::", 23], // IETF protocol assignments: Teredo (decoded above), anycast, ORCHID, AMT, AS112...
  ["2001:db8::", 32],
  ["2620:4f:8000::", 48],
  ["3fff::", 20],
  ["5f00::", 16],
  ["fc00::", 7],
  ["fe80::", 10],
  ["fec0::", 10], // deprecated site-local
  ["ff00::", 8],
];

/** The rules a URL must pass before anything is fetched from it. */
export interface OutboundUrlPolicy extends Pick<OutboundPolicy, "allowPrivate" | "allowHttp"> {
  /** Any port on a public host (webhook endpoints often listen on 8443 and the like);
   * without it only 443 and 80, which is all an attachment URL needs. */
  allowAnyPort?: boolean;
}

/**
 * Checks a URL against the policy without fetching it. Host checks see the URL parser's
 * normalised host, so every IPv4 spelling (0x7f.1, 2130706433, 127.1) is caught.
 * `subject` names the URL in the messages ("The endpoint must use https.").
 */
export function checkOutboundUrl(url: string, policy: OutboundUrlPolicy, subject = "The URL"): Result<URL> {
  return checkUrl(url, policy, subject);
}

function checkUrl(url: string, policy: OutboundUrlPolicy, subject: string): Result<URL> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { ok: false, message: `${subject} is not a valid absolute URL.` };
  }
  if (parsed.protocol !== "https:" && !(policy.allowHttp && parsed.protocol === "http:")) {
    return { ok: false, message: `${subject} must use ${policy.allowHttp ? "https or http" : "https"}.` };
  }
  if (parsed.username !== "" || parsed.password !== "") {
    return { ok: false, message: `${subject} must not contain a user name or password.` };
  }
  if (policy.allowPrivate) return { ok: true, value: parsed };
  if (!policy.allowAnyPort && parsed.port !== "" && parsed.port !== "443" && parsed.port !== "80") {
    return { ok: false, message: `${subject} must use port 443 or 80.` };
  }
  if (!isPublicHost(parsed.hostname)) {
    return { ok: false, message: `${subject} must point to a public host, not a local, private or reserved address.` };
  }
  return { ok: true, value: parsed };
}

function isPublicHost(hostname: string): boolean {
  if (hostname.startsWith("[")) {
    const groups = parseIpv6(hostname.slice(1, -1));
    return groups !== null && isPublicIpv6(groups);
  }
  const v4 = parseIpv4(hostname);
  if (v4 !== null) return isPublicIpv4(v4);
  const name = hostname.replace(/\.+$/, "").toLowerCase();
  if (name === "localhost" || LOCAL_NAME_SUFFIXES.some((suffix) => name.endsWith(suffix))) return false;
  // A single-label name is never a public host; it could only resolve through a search domain.
  return name.includes(".");
}

/** Dotted-quad only: the URL parser has already normalised the other spellings to it. */
function parseIpv4(text: string): number | null {
  const match = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (!match) return null;
  let value = 0;
  for (const part of match.slice(1)) {
    const octet = Number(part);
    if (octet > 255) return null;
    value = value * 256 + octet;
  }
  return value;
}

function isPublicIpv4(address: number): boolean {
  return !BLOCKED_V4.some(([base, prefix]) => {
    const baseValue = parseIpv4(base) as number;
    const size = 2 ** (32 - prefix);
    return Math.floor(address / size) === Math.floor(baseValue / size);
  });
}

/** Eight 16-bit groups, or null when the text is not an IPv6 address. */
export function parseIpv6(text: string): number[] | null {
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const parseGroups = (part: string, mayEndInV4: boolean): number[] | null => {
    if (part === "") return [];
    const pieces = part.split(":");
    const groups: number[] = [];
    for (const [i, piece] of pieces.entries()) {
      if (mayEndInV4 && i === pieces.length - 1 && piece.includes(".")) {
        const v4 = parseIpv4(piece);
        if (v4 === null) return null;
        groups.push(Math.floor(v4 / 65536), v4 % 65536);
      } else if (/^[0-9a-f]{1,4}$/i.test(piece)) {
        groups.push(parseInt(piece, 16));
      } else {
        return null;
      }
    }
    return groups;
  };
  if (halves.length === 1) {
    const groups = parseGroups(halves[0] ?? "", true);
    return groups !== null && groups.length === 8 ? groups : null;
  }
  const head = parseGroups(halves[0] ?? "", false);
  const tail = parseGroups(halves[1] ?? "", true);
  if (head === null || tail === null || head.length + tail.length > 7) return null;
  return [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}

function inIpv6Range(groups: number[], base: string, prefix: number): boolean {
  const baseGroups = parseIpv6(base) as number[];
  for (let i = 0; i < 8 && prefix > 0; i++, prefix -= 16) {
    const bits = Math.min(16, prefix);
    const shift = 16 - bits;
    if ((groups[i] ?? 0) >> shift !== (baseGroups[i] ?? 0) >> shift) return false;
  }
  return true;
}

function isPublicIpv6(groups: number[]): boolean {
  for (const { base, prefix, at, inverted } of EMBEDDING_V4) {
    if (!inIpv6Range(groups, base, prefix)) continue;
    return at.every((i) => {
      const v4 = (groups[i] ?? 0) * 65536 + (groups[i + 1] ?? 0);
      return isPublicIpv4(i === inverted ? 0xffffffff - v4 : v4);
    });
  }
  if (BLOCKED_V6.some(([base, prefix]) => inIpv6Range(groups, base, prefix))) return false;
  return inIpv6Range(groups, "2000::", 3);
}

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

/** A fetched body handed over as it arrives (OutboundFetcher.stream): its chunks stop with an
 * OutboundBodyError when it passes the size limit, breaks off or runs out of time, and a body
 * shorter or longer than its declared Content-Length is a broken one. */
export interface OutboundBody {
  chunks: AsyncIterable<Uint8Array>;
  /** The Content-Length the server declared (at most the limit), or null. */
  declaredLength: number | null;
  /** The Content-Type header of the final answer, as sent. */
  contentType?: string;
  /** The URL the body came from, after redirects. */
  finalUrl: string;
}

/** Why a streamed body stopped; `failure` is what the fetch answers. */
export class OutboundBodyError extends Error {
  constructor(readonly failure: OutboundFailure) {
    super(failure.message);
  }
}

export interface OutboundFetcher {
  /** The whole body in one buffer. */
  (url: string, limit?: FetchLimit): Promise<Result<OutboundFile, OutboundFailure>>;
  /** The body handed to `consume` as it arrives, so a large file need never be held whole. A
   * failure of the fetch or of the body (OutboundBodyError thrown inside `consume`) is a
   * failed result; anything else `consume` throws is thrown. */
  stream<T>(url: string, limit: FetchLimit | undefined, consume: (body: OutboundBody) => Promise<T>): Promise<Result<T, OutboundFailure>>;
}

/**
 * A fetcher bound to a policy. `fetchImpl` defaults to the global fetch.
 * DNS rebinding: in production, Cloudflare's fetch never routes to private networks, so a public name resolving to a private address is not reachable.
 */
export function createOutboundFetcher(policy: OutboundPolicy, fetchImpl?: typeof fetch): OutboundFetcher {
  const doFetch: typeof fetch = fetchImpl ?? ((input, init) => fetch(input, init));
  const timedOut = (): OutboundFailure => ({ message: `The server did not send the whole file within ${policy.timeoutMs} ms.` });
  const broken = (signal: AbortSignal): OutboundFailure =>
    signal.aborted ? timedOut() : { message: "The server's answer broke off before it was complete." };

  /** The final answer after redirects, its body not yet read; a failure once it is settled. */
  async function open(url: string, limit: FetchLimit | undefined, signal: AbortSignal): Promise<Result<{ response: Response; finalUrl: string; maxBytes: number; declared: number | null; tooBig: OutboundFailure }, OutboundFailure>> {
    const maxBytes = Math.min(policy.maxBytes, limit?.maxBytes ?? Infinity);
    let current = checkUrl(url, policy, "The URL");
    if (!current.ok) return current;
    for (let redirects = 0; ; redirects++) {
      let response: Response;
      try {
        response = await doFetch(current.value.href, { method: "GET", redirect: "manual", signal });
      } catch {
        return signal.aborted ? { ok: false, ...timedOut() } : { ok: false, message: "The server could not be reached." };
      }
      if (REDIRECT_STATUSES.has(response.status)) {
        await discard(response);
        const location = response.headers.get("location");
        if (location === null) {
          return { ok: false, message: `The server answered with a redirect (status ${response.status}) but no location.` };
        }
        if (redirects >= policy.maxRedirects) {
          return { ok: false, message: `The URL redirected more than ${policy.maxRedirects} times.` };
        }
        let next: string;
        try {
          next = new URL(location, current.value).href;
        } catch {
          return { ok: false, message: "The server redirected to an invalid URL." };
        }
        current = checkUrl(next, policy, "The redirect target");
        if (!current.ok) return current;
        continue;
      }
      if (response.status < 200 || response.status > 299) {
        await discard(response);
        return { ok: false, message: `The server answered with status ${response.status}.` };
      }
      const tooBig: OutboundFailure = {
        tooBig: true,
        message: limit && limit.maxBytes < policy.maxBytes ? limit.message : `The file is larger than the limit of ${policy.maxBytes} bytes.`,
      };
      // A declared length over the limit is refused before any of the body is read.
      const header = response.headers.get("content-length");
      const declared = header !== null && /^\d+$/.test(header.trim()) ? Number(header.trim()) : null;
      if (declared !== null && declared > maxBytes) {
        await discard(response);
        return { ok: false, ...tooBig };
      }
      return { ok: true, value: { response, finalUrl: current.value.href, maxBytes, declared, tooBig } };
    }
  }

  const fetchWhole = async (url: string, limit?: FetchLimit): Promise<Result<OutboundFile, OutboundFailure>> => {
    const signal = AbortSignal.timeout(policy.timeoutMs);
    const opened = await open(url, limit, signal);
    if (!opened.ok) return opened;
    const { response, finalUrl, maxBytes, declared, tooBig } = opened.value;
    const body = await readBounded(response, maxBytes, signal, declared);
    if (body === "too_big") return { ok: false, ...tooBig };
    if (body === "failed") return { ok: false, ...broken(signal) };
    const contentType = response.headers.get("content-type");
    return { ok: true, value: { body, finalUrl, ...(contentType !== null ? { contentType } : {}) } };
  };

  const stream = async <T>(url: string, limit: FetchLimit | undefined, consume: (body: OutboundBody) => Promise<T>): Promise<Result<T, OutboundFailure>> => {
    const signal = AbortSignal.timeout(policy.timeoutMs);
    const opened = await open(url, limit, signal);
    if (!opened.ok) return opened;
    const { response, finalUrl, maxBytes, declared, tooBig } = opened.value;
    const contentType = response.headers.get("content-type");
    try {
      const value = await consume({
        chunks: boundedChunks(response, maxBytes, signal, declared, tooBig, () => broken(signal)),
        declaredLength: declared,
        finalUrl,
        ...(contentType !== null ? { contentType } : {}),
      });
      return { ok: true, value };
    } catch (err) {
      await discard(response);
      if (err instanceof OutboundBodyError) return { ok: false, ...err.failure };
      throw err;
    }
  };

  return Object.assign(fetchWhole, { stream });
}

/** What one read of a streamed body may bring. */
const READ_BYTES = 64 * 1024;

/** The body's chunks, counted against `maxBytes` (and the declared length) as they come. A
 * chunk is only valid until the next one is asked for: its buffer is read into again. */
async function* boundedChunks(response: Response, maxBytes: number, signal: AbortSignal, declared: number | null, tooBig: OutboundFailure, broken: () => OutboundFailure): AsyncGenerator<Uint8Array> {
  if (response.body === null) {
    if (declared !== null && declared > 0) throw new OutboundBodyError(broken());
    return;
  }
  // One buffer read into again and again (a BYOB reader): a new buffer for each chunk was the
  // whole file again in garbage that the isolate keeps until its next collection.
  const reader = response.body.getReader({ mode: "byob" });
  const aborted = new Promise<never>((_, reject) => {
    if (signal.aborted) reject(new Error("aborted"));
    signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true });
  });
  aborted.catch(() => {});
  let buffer = new ArrayBuffer(READ_BYTES);
  let total = 0;
  let done = false;
  try {
    for (;;) {
      let read: Awaited<ReturnType<typeof reader.read>>;
      try {
        read = await Promise.race([settled(reader.read(new Uint8Array(buffer))), aborted]);
      } catch {
        throw new OutboundBodyError(broken());
      }
      if (read.done) break;
      const chunk = new Uint8Array(read.value.buffer, read.value.byteOffset, read.value.byteLength);
      buffer = chunk.buffer as ArrayBuffer;
      total += chunk.byteLength;
      if (total > maxBytes) throw new OutboundBodyError(tooBig);
      // More than the server declared: its answer is not what it said it was.
      if (declared !== null && total > declared) throw new OutboundBodyError(broken());
      yield chunk;
    }
    if (declared !== null && total !== declared) throw new OutboundBodyError(broken());
    done = true;
  } finally {
    if (!done) reader.cancel().catch(() => {});
  }
}

/** A read that may lose a race against the timeout: its later failure ("Network connection
 * lost" once the body is cancelled) is expected, not an unhandled rejection. */
function settled<T>(read: Promise<T>): Promise<T> {
  read.catch(() => {});
  return read;
}

async function discard(response: Response): Promise<void> {
  try {
    await response.body?.cancel();
  } catch {
    // Nothing to free.
  }
}

/** Reads the body as a stream, stopping as soon as it passes `maxBytes` or the signal fires.
 * With a declared length the bytes go straight into one buffer of that size: a 30 MB file
 * then costs 30 MB, not its chunks and their copy. */
async function readBounded(response: Response, maxBytes: number, signal: AbortSignal, declared: number | null): Promise<Uint8Array | "too_big" | "failed"> {
  if (response.body === null) return new Uint8Array(0);
  const reader = response.body.getReader();
  const aborted = new Promise<never>((_, reject) => {
    if (signal.aborted) reject(new Error("aborted"));
    signal.addEventListener("abort", () => reject(new Error("aborted")), { once: true });
  });
  aborted.catch(() => {});
  const chunks: Uint8Array[] = [];
  const whole = declared !== null ? new Uint8Array(declared) : null;
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await Promise.race([settled(reader.read()), aborted]);
      if (done) break;
      if (total + value.byteLength > maxBytes) {
        reader.cancel().catch(() => {});
        return "too_big";
      }
      if (whole) {
        // More than the server declared: its answer is not what it said it was.
        if (total + value.byteLength > whole.length) throw new Error("longer than declared");
        whole.set(value, total);
      } else {
        chunks.push(value);
      }
      total += value.byteLength;
    }
  } catch {
    reader.cancel().catch(() => {});
    return "failed";
  }
  return whole ? whole.subarray(0, total) : concatBytes(chunks, total);
}
