// Outbound fetches of caller-given URLs: the URL rules as tables, then real fetches from
// workerd to the loopback HTTPS file server of test/support/https-files.ts.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { checkOutboundUrl, createOutboundFetcher, type OutboundPolicy } from "../../worker/net/outbound.ts";
import { IANA_IPV4_SPECIAL, IANA_IPV6_SPECIAL } from "../fixtures/iana-special-purpose.ts";

const strict = { allowPrivate: false, allowHttp: false };
const base = `https://localhost:${env.TEST_PEERS.https}`;
const local: OutboundPolicy = { allowPrivate: true, allowHttp: false, maxBytes: 1024 * 1024, timeoutMs: 5_000, maxRedirects: 3 };
const PDF = "%PDF-1.4\n% tern test file\n%%EOF\n";

describe("checkOutboundUrl", () => {
  it.each([
    "https://example.com/file.pdf",
    "https://files.example.com:443/a/b.pdf?x=1",
    "https://example.com:80/file.pdf",
    "https://8.8.8.8/file.pdf",
    "https://[2606:4700::1111]/file.pdf",
    "https://[::ffff:8.8.8.8]/file.pdf", // IPv4-mapped, public
    "https://[64:ff9b::808:808]/file.pdf", // NAT64 of 8.8.8.8
    "https://172.32.0.1/",
    "https://100.128.0.1/",
    "https://198.20.0.1/",
    "https://192.0.1.1/",
    "https://localhost.example.com/",
  ])("allows %s", (url) => {
    const result = checkOutboundUrl(url, strict);
    expect(result.ok).toBe(true);
  });

  it.each([
    ["not a url", "The URL is not a valid absolute URL."],
    ["/relative/file.pdf", "The URL is not a valid absolute URL."],
    ["http://example.com/file.pdf", "The URL must use https."],
    ["ftp://example.com/file.pdf", "The URL must use https."],
    ["file:///etc/passwd", "The URL must use https."],
    ["data:text/plain,hi", "The URL must use https."],
    ["https://user:pass@example.com/", "The URL must not contain a user name or password."],
    ["https://user@example.com/", "The URL must not contain a user name or password."],
    ["https://example.com:8443/", "The URL must use port 443 or 80."],
    ["https://example.com:22/", "The URL must use port 443 or 80."],
  ])("refuses %s", (url, message) => {
    expect(checkOutboundUrl(url, strict)).toEqual({ ok: false, message });
  });

  const privateHost = "The URL must point to a public host, not a local, private or reserved address.";
  it.each([
    "https://localhost/",
    "https://LOCALHOST./",
    "https://app.localhost/",
    "https://printer.local/",
    "https://metadata.google.internal/",
    "https://router.home.arpa/",
    "https://intranet/",
    // IPv4, including spellings the URL parser normalises
    "https://0.0.0.0/",
    "https://0/",
    "https://10.1.2.3/",
    "https://100.64.0.1/",
    "https://100.127.255.255/",
    "https://127.0.0.1/",
    "https://127.1/",
    "https://0x7f.0.0.1/",
    "https://2130706433/",
    "https://0177.0.0.1/",
    "https://127.0.0.1./",
    "https://169.254.169.254/",
    "https://172.16.0.1/",
    "https://172.31.255.255/",
    "https://192.0.0.8/",
    "https://192.168.1.1/",
    "https://198.18.0.1/",
    "https://198.19.255.255/",
    "https://224.0.0.1/",
    "https://239.255.255.250/",
    "https://240.0.0.1/",
    "https://255.255.255.255/",
    // IPv6
    "https://[::]/",
    "https://[::1]/",
    "https://[0:0:0:0:0:0:0:1]/",
    "https://[fc00::1]/",
    "https://[fd12:3456::1]/",
    "https://[fe80::1]/",
    "https://[febf::1]/",
    "https://[ff02::1]/",
    "https://[::ffff:127.0.0.1]/",
    "https://[::ffff:7f00:1]/",
    "https://[::ffff:10.0.0.1]/",
    "https://[::ffff:169.254.169.254]/",
    "https://[64:ff9b::10.0.0.1]/",
    "https://[64:ff9b::c0a8:101]/",
    "https://[::127.0.0.1]/",
  ])("refuses the non-public host of %s", (url) => {
    expect(checkOutboundUrl(url, strict)).toEqual({ ok: false, message: privateHost });
  });

  it("allows private hosts and any port only with allowPrivate", () => {
    for (const url of ["https://localhost:8443/", "https://127.0.0.1/", "https://[::1]:9/", "https://10.0.0.1/"]) {
      expect(checkOutboundUrl(url, strict).ok).toBe(false);
      expect(checkOutboundUrl(url, { allowPrivate: true, allowHttp: false }).ok).toBe(true);
    }
  });

  it("still refuses credentials and other schemes with allowPrivate", () => {
    const loose = { allowPrivate: true, allowHttp: true };
    expect(checkOutboundUrl("https://u:p@localhost/", loose).ok).toBe(false);
    expect(checkOutboundUrl("ftp://localhost/", loose)).toEqual({ ok: false, message: "The URL must use https or http." });
  });

  it("allows http only with allowHttp", () => {
    expect(checkOutboundUrl("http://example.com/", strict).ok).toBe(false);
    expect(checkOutboundUrl("http://example.com/", { allowPrivate: false, allowHttp: true }).ok).toBe(true);
  });
});

// Issue 20, item 6: IPv6 addresses that embed or route to IPv4 (6to4, Teredo, NAT64) were let
// through to loopback and metadata addresses, and so were other special-purpose blocks.
describe("checkOutboundUrl against IANA's special-purpose registries", () => {
  const refused = (host: string) => checkOutboundUrl(`https://${host}/`, strict).ok === false;
  const v4 = (text: string) => text.split(".").reduce((n, o) => n * 256 + Number(o), 0);
  const v4Text = (n: number) => [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join(".");
  const v4Range = (cidr: string) => {
    const [base, bits] = cidr.split("/");
    const size = 2 ** (32 - Number(bits));
    const first = Math.floor(v4(base!) / size) * size;
    return { first, last: first + size - 1 };
  };
  const v6 = (text: string): bigint => {
    const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined];
    const h = head ? head.split(":") : [];
    const t = tail ? tail.split(":") : [];
    const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill("0"), ...t];
    return groups.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n);
  };
  const v6Text = (n: bigint) => Array.from({ length: 8 }, (_, i) => ((n >> BigInt(112 - 16 * i)) & 0xffffn).toString(16)).join(":");
  const v6Range = (cidr: string) => {
    const [base, bits] = cidr.split("/");
    const hostBits = BigInt(128 - Number(bits));
    const first = (v6(base!) >> hostBits) << hostBits;
    return { first, last: first + (1n << hostBits) - 1n };
  };
  // The oracle for IPv4: the registry's blocks and multicast (224.0.0.0/4) are not public.
  const v4Public = (n: number) =>
    ![...IANA_IPV4_SPECIAL.map((b) => b.block), "224.0.0.0/4"].some((b) => {
      const r = v4Range(b);
      return n >= r.first && n <= r.last;
    });
  // IPv6 blocks that carry an IPv4 address: where it sits, and whether it is inverted (Teredo's client).
  const embedded: Record<string, (n: bigint) => number[]> = {
    "::ffff:0:0/96": (n) => [Number(n & 0xffffffffn)],
    "64:ff9b::/96": (n) => [Number(n & 0xffffffffn)],
    "2002::/16": (n) => [Number((n >> 80n) & 0xffffffffn)],
    "2001::/32": (n) => [Number((n >> 64n) & 0xffffffffn), Number(~n & 0xffffffffn)],
  };
  // A fixed pseudo-random sequence, so that a failure can be replayed.
  let seed = 20;
  const random32 = () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed;
  };
  const inside = (first: bigint, last: bigint) => {
    const r = (BigInt(random32()) << 96n) | (BigInt(random32()) << 64n) | (BigInt(random32()) << 32n) | BigInt(random32());
    return first + (r % (last - first + 1n));
  };

  it.each(IANA_IPV4_SPECIAL.map((b) => [b.block, b.name] as const))("refuses IPv4 %s (%s) in every spelling", (block) => {
    const { first, last } = v4Range(block);
    const samples = [first, last, first + Math.floor((last - first) / 2), ...Array.from({ length: 8 }, () => first + (random32() % (last - first + 1)))];
    for (const n of samples) {
      const a = v4Text(n);
      const hi = (n >>> 16).toString(16);
      const lo = (n & 0xffff).toString(16);
      const inverted = (0xffffffff - n) >>> 0;
      for (const host of [
        a,
        String(n), // one number
        `[::ffff:${a}]`,
        `[::${a}]`,
        `[64:ff9b::${a}]`,
        `[2002:${hi}:${lo}::1]`, // 6to4
        `[2001:0:${hi}:${lo}::1]`, // Teredo server
        `[2001:0:808:808:0:0:${(inverted >>> 16).toString(16)}:${(inverted & 0xffff).toString(16)}]`, // Teredo client
      ]) {
        expect(refused(host), host).toBe(true);
      }
    }
  });

  it.each(IANA_IPV6_SPECIAL.map((b) => [b.block, b.name] as const))("refuses IPv6 %s (%s), or judges the IPv4 address inside", (block) => {
    const { first, last } = v6Range(block);
    const samples = [first, last, ...Array.from({ length: 16 }, () => inside(first, last))];
    for (const n of samples) {
      const host = `[${v6Text(n)}]`;
      const carried = embedded[block];
      const expected = carried ? !carried(n).every(v4Public) : true;
      expect(refused(host), host).toBe(expected);
    }
  });

  it.each([
    ["2002:7f00:1::", "6to4 of 127.0.0.1"],
    ["2002:a9fe:a9fe::1", "6to4 of 169.254.169.254"],
    ["2002:c0a8:101:1::1", "6to4 of 192.168.1.1"],
    ["2001:0:808:808:0:0:80ff:fffe", "Teredo, client 127.0.0.1"],
    ["2001:0:7f00:1:0:0:f7f7:f7f7", "Teredo, server 127.0.0.1"],
    ["64:ff9b::7f00:1", "NAT64 of 127.0.0.1"],
    ["64:ff9b::a9fe:a9fe", "NAT64 of 169.254.169.254"],
    ["64:ff9b:1::808:808", "local-use NAT64"],
    ["64:ff9b:1:7f00:1::", "local-use NAT64 of 127.0.0.1 (/48)"],
    ["::ffff:0:7f00:1", "IPv4-translated (SIIT) 127.0.0.1"],
    ["100::1", "discard"],
    ["5f00::1", "SRv6"],
    ["3fff::1", "documentation"],
    ["1::1", "unallocated, outside 2000::/3"],
    ["4000::1", "unallocated, outside 2000::/3"],
  ])("refuses [%s] (%s)", (address) => {
    expect(refused(`[${address}]`)).toBe(true);
  });

  it.each([
    ["2606:4700:4700::1111", "global unicast"],
    ["2a00:1450:4001:80b::200e", "global unicast"],
    ["2002:808:808::1", "6to4 of 8.8.8.8"],
    ["2001:0:808:808:0:0:fefe:fefe", "Teredo, server 8.8.8.8, client 1.1.1.1"],
    ["64:ff9b::101:101", "NAT64 of 1.1.1.1"],
    ["::ffff:101:101", "IPv4-mapped 1.1.1.1"],
  ])("allows [%s] (%s)", (address) => {
    expect(refused(`[${address}]`)).toBe(false);
  });
});

describe("createOutboundFetcher", () => {
  it("fetches a file over https with its content type", async () => {
    const result = await createOutboundFetcher(local)(`${base}/file.pdf`);
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(new TextDecoder().decode(result.value.body)).toBe(PDF);
    expect(result.value.contentType).toBe("application/pdf");
    expect(result.value.finalUrl).toBe(`${base}/file.pdf`);
  });

  it("refuses the same local URL when private addresses are not allowed, without fetching", async () => {
    const result = await createOutboundFetcher({ ...local, allowPrivate: false })(`${base}/file.pdf`);
    expect(result).toEqual({ ok: false, message: "The URL must use port 443 or 80." });
    const samePort = await createOutboundFetcher({ ...local, allowPrivate: false })("https://localhost/file.pdf");
    expect(samePort).toEqual({
      ok: false,
      message: "The URL must point to a public host, not a local, private or reserved address.",
    });
  });

  it("follows a redirect and reports the final URL", async () => {
    const result = await createOutboundFetcher(local)(`${base}/redirect-ok`);
    expect(result.ok && new TextDecoder().decode(result.value.body)).toBe(PDF);
    expect(result.ok && result.value.finalUrl).toBe(`${base}/file.pdf`);
  });

  it("stops after maxRedirects", async () => {
    expect(await createOutboundFetcher({ ...local, maxRedirects: 0 })(`${base}/redirect-ok`)).toEqual({
      ok: false,
      message: "The URL redirected more than 0 times.",
    });
    expect(await createOutboundFetcher(local)(`${base}/redirect-loop`)).toEqual({
      ok: false,
      message: "The URL redirected more than 3 times.",
    });
  });

  it("checks every redirect hop: plain http is refused", async () => {
    const result = await createOutboundFetcher(local)(`${base}/redirect-private?to=http`);
    expect(result).toEqual({ ok: false, message: "The redirect target must use https." });
  });

  // The first hop must pass the private-address check, so it is a public-looking name that a
  // resolver override (this fetchImpl, standing in for DNS) sends to the loopback server.
  const viaPublicName: typeof fetch = (input, init) =>
    fetch(String(input).replace("https://files.example.com/", `${base}/`), init);

  it("checks every redirect hop: a redirect to a private address is refused", async () => {
    const fetcher = createOutboundFetcher({ ...local, allowPrivate: false }, viaPublicName);
    const direct = await fetcher("https://files.example.com/file.pdf");
    expect(direct.ok).toBe(true); // the first hop itself is allowed
    expect(await fetcher("https://files.example.com/redirect-ok")).toMatchObject({ ok: true });
    expect(await fetcher("https://files.example.com/redirect-private")).toEqual({
      ok: false,
      message: "The redirect target must point to a public host, not a local, private or reserved address.",
    });
  });

  it("reports a non-2xx status", async () => {
    expect(await createOutboundFetcher(local)(`${base}/404`)).toEqual({
      ok: false,
      message: "The server answered with status 404.",
    });
  });

  it("stops reading a body that grows past maxBytes", async () => {
    const result = await createOutboundFetcher({ ...local, maxBytes: 1024 * 1024 })(`${base}/big`);
    expect(result).toEqual({ ok: false, tooBig: true, message: "The file is larger than the limit of 1048576 bytes." });
  });

  it("holds one fetch to a tighter limit with its own message, declared or streamed", async () => {
    const limit = { maxBytes: 1000, message: "Only 1000 bytes were left." };
    const fetcher = createOutboundFetcher({ ...local, maxBytes: 10 * 1024 * 1024 });
    expect(await fetcher(`${base}/big`, limit)).toEqual({ ok: false, tooBig: true, message: "Only 1000 bytes were left." });
    expect(await fetcher(`${base}/big-declared`, limit)).toEqual({ ok: false, tooBig: true, message: "Only 1000 bytes were left." });
    expect(await fetcher(`${base}/file.pdf`, limit)).toMatchObject({ ok: true });
    // A limit looser than the policy's does not loosen it.
    expect(await createOutboundFetcher(local)(`${base}/big`, { maxBytes: 10 * 1024 * 1024, message: "x" }))
      .toEqual({ ok: false, tooBig: true, message: "The file is larger than the limit of 1048576 bytes." });
  });

  it("accepts a body up to maxBytes", async () => {
    const result = await createOutboundFetcher({ ...local, maxBytes: 5 * 1024 * 1024 })(`${base}/big`);
    expect(result.ok && result.value.body.byteLength).toBe(5 * 1024 * 1024);
    const exact = await createOutboundFetcher({ ...local, maxBytes: PDF.length })(`${base}/file.pdf`);
    expect(exact.ok).toBe(true);
    const under = await createOutboundFetcher({ ...local, maxBytes: PDF.length - 1 })(`${base}/file.pdf`);
    expect(under.ok).toBe(false);
  });

  it("refuses at once when Content-Length is over maxBytes", async () => {
    // The server declares 5 MB and sends nothing: only the header check can answer before the timeout.
    const started = Date.now();
    const result = await createOutboundFetcher({ ...local, timeoutMs: 10_000 })(`${base}/big-declared`);
    expect(result).toEqual({ ok: false, tooBig: true, message: "The file is larger than the limit of 1048576 bytes." });
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("gives up on a body that never finishes after timeoutMs", async () => {
    const started = Date.now();
    const result = await createOutboundFetcher({ ...local, timeoutMs: 300 })(`${base}/slow`);
    expect(result).toEqual({ ok: false, message: "The server did not send the whole file within 300 ms." });
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("says a server cannot be reached without internals", async () => {
    // A port nothing listens on: the error names no address, library or system call.
    const result = await createOutboundFetcher(local)("https://127.0.0.1:1/file.pdf");
    expect(result).toEqual({ ok: false, message: "The server could not be reached." });
  });
});
