// A TLS reverse proxy that answers as api.resend.com and forwards to a tern, for clients
// with no base-URL option (resend-java always calls https://api.resend.com):
//   npm run resend-host-proxy -- --upstream https://tern.example.com [--listen 127.0.0.1:443] [--dir DIR]
// It presents a certificate for api.resend.com signed by a CA of its own, made once in DIR
// (default .tern/resend-host-proxy), and writes there what the JVM needs to use it: `hosts`
// (for -Djdk.net.hosts.file) and `truststore.p12` (for -Djavax.net.ssl.trustStore, made with
// the JDK's keytool when it is on the PATH). HTTP/2 and HTTP/1.1, as OkHttp negotiates either.
import { execFileSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from "node:http";
import { createSecureServer, type Http2ServerRequest, type Http2ServerResponse } from "node:http2";
import { request as httpsRequest } from "node:https";
import { isIP } from "node:net";
import { join, resolve } from "node:path";
import { ensureLocalCertificates } from "../dev/certs.ts";

const HOST = "api.resend.com";
export const TRUST_STORE_PASSWORD = "changeit";

// Headers that describe one connection, not the message (RFC 9110 7.6.1), and HTTP/2's
// pseudo-headers: never forwarded either way. Host is set to the upstream's own.
const HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer", "host"]);

function forwardable(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || name.startsWith(":") || HOP.has(name)) continue;
    out[name] = value;
  }
  return out;
}

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

export interface ProxyFiles { dir: string; caCertPath: string; hostsPath: string; trustStorePath: string | null }

/** The CA, the api.resend.com leaf, the JVM hosts file and (with keytool) the trust store. */
export function prepareProxyFiles(dir: string, listenHost: string): ProxyFiles {
  const certs = ensureLocalCertificates(dir, { name: HOST, subjectAltName: `DNS:${HOST}`, caName: "tern resend-host-proxy CA" });
  const hostsPath = join(dir, "hosts");
  // The JVM's hosts file replaces DNS for the whole JVM: other names the application resolves
  // must be added to it (the README says so).
  writeFileSync(hostsPath, `${listenHost === "0.0.0.0" ? "127.0.0.1" : listenHost} ${HOST}\n`);
  let trustStorePath: string | null = join(dir, "truststore.p12");
  try {
    rmSync(trustStorePath, { force: true });
    execFileSync("keytool", ["-importcert", "-noprompt", "-alias", "tern-resend-host-proxy", "-file", certs.caCertPath,
      "-keystore", trustStorePath, "-storetype", "PKCS12", "-storepass", TRUST_STORE_PASSWORD], { stdio: "pipe" });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    trustStorePath = null; // no JDK here: the README shows the keytool command to run where it is
  }
  return { dir, caCertPath: certs.caCertPath, hostsPath, trustStorePath };
}

export function main(argv: string[]): void {
  const args = [...argv];
  const flag = (name: string) => {
    const i = args.indexOf(name);
    if (i < 0) return undefined;
    const [, value] = args.splice(i, 2);
    return value ?? fail(`${name} needs a value`);
  };
  const upstreamText = flag("--upstream") ?? process.env.TERN_URL ?? fail("usage: npm run resend-host-proxy -- --upstream https://tern.example.com [--listen 127.0.0.1:443] [--dir DIR]");
  const listen = flag("--listen") ?? "127.0.0.1:443";
  const dir = resolve(flag("--dir") ?? join(import.meta.dirname, "..", ".tern", "resend-host-proxy"));
  if (args.length) fail(`unknown arguments: ${args.join(" ")}`);

  let upstream: URL;
  try {
    upstream = new URL(upstreamText);
  } catch {
    fail(`--upstream must be a URL such as https://tern.example.com, not ${upstreamText}`);
  }
  if (upstream.protocol !== "https:" && upstream.protocol !== "http:") fail("--upstream must be an http(s) URL");
  // API keys cross this hop: in clear only to this machine.
  const loopback = ["localhost", "127.0.0.1", "[::1]"].includes(upstream.hostname);
  if (upstream.protocol === "http:" && !loopback) fail(`--upstream ${upstream.origin} is plain http on another machine: use https`);
  const base = upstream.pathname.replace(/\/$/, "");

  const colon = listen.lastIndexOf(":");
  const listenHost = listen.slice(0, colon).replace(/^\[|\]$/g, "");
  const listenPort = Number(listen.slice(colon + 1));
  if (colon < 0 || !isIP(listenHost) || !Number.isInteger(listenPort) || listenPort < 1 || listenPort > 65535) {
    fail(`--listen must be an IP address and port, such as 127.0.0.1:443, not ${listen}`);
  }

  const files = prepareProxyFiles(dir, listenHost);
  const send = upstream.protocol === "https:" ? httpsRequest : httpRequest;

  const server = createSecureServer(
    { cert: readFileSync(join(dir, `${HOST}.crt`)), key: readFileSync(join(dir, `${HOST}.key`)), allowHTTP1: true },
    (req: Http2ServerRequest, res: Http2ServerResponse) => {
      const out = send(new URL(base + req.url, upstream), { method: req.method, headers: { ...forwardable(req.headers), host: upstream.host } }, (answer: IncomingMessage) => {
        res.writeHead(answer.statusCode ?? 502, forwardable(answer.headers));
        answer.pipe(res);
      });
      out.on("error", (err) => {
        console.error(`resend-host-proxy: ${req.method} ${req.url}: ${err.message}`);
        if (res.headersSent) return void res.stream?.destroy();
        // The contract's error shape, so clients report it as they report tern's own errors.
        res.writeHead(502, { "content-type": "application/json" });
        res.end(JSON.stringify({ statusCode: 502, name: "application_error", message: `The proxy for ${HOST} could not reach tern at ${upstream.origin}: ${err.message}` }));
      });
      res.on("close", () => { if (!res.writableFinished) out.destroy(); });
      req.pipe(out);
    },
  );
  server.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code === "EADDRINUSE") fail(`resend-host-proxy: ${listen} is taken by another process; stop it or pick another --listen address`);
    if (err.code === "EACCES") fail(`resend-host-proxy: binding ${listen} needs root (or CAP_NET_BIND_SERVICE) below port 1024`);
    fail(`resend-host-proxy: ${err.message}`);
  });
  server.listen(listenPort, listenHost, () => {
    const jvm = [`-Djdk.net.hosts.file=${files.hostsPath}`];
    if (files.trustStorePath) jvm.push(`-Djavax.net.ssl.trustStore=${files.trustStorePath}`, `-Djavax.net.ssl.trustStorePassword=${TRUST_STORE_PASSWORD}`);
    console.log(`resend-host-proxy: https://${HOST} on ${listen} -> ${upstream.origin}${base}`);
    console.log(`  CA: ${files.caCertPath}`);
    if (!files.trustStorePath) console.log(`  no keytool on this PATH: run keytool -importcert -alias tern -file ${files.caCertPath} -keystore truststore.p12 -storetype PKCS12 -storepass ${TRUST_STORE_PASSWORD}`);
    console.log(`  run the JVM with: java ${jvm.join(" ")} ...`);
  });
  // Clients keep connections open; nothing is in flight that a restart would not retry.
  const stop = () => process.exit(0);
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) main(process.argv.slice(2));
