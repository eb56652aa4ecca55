// Outbound fetches of caller-given URLs: the URL rules as tables, then real fetches from
// workerd to the loopback HTTPS file server of test/support/https-files.ts.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { checkOutboundUrl, createOutboundFetcher, type OutboundPolicy } from "../../worker/net/outbound.ts";

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
    expect(result).toEqual({ ok: false, message: "The file is larger than the limit of 1048576 bytes." });
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
    expect(result).toEqual({ ok: false, message: "The file is larger than the limit of 1048576 bytes." });
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
