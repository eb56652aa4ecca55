// The bridge's SMTP server on real sockets, with no API behind it (its URL points at a port
// nothing listens on): what it offers and refuses before a message, its limits (connections
// per address, pending TLS handshakes included; the time to log in), its health endpoint, and
// a certificate renewed on disk while it runs.
import { copyFileSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer, connect as tcpConnect, type Socket } from "node:net";
import { connect } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureLocalCertificates } from "../../dev/certs.ts";
import { configFromEnv } from "../../smtp-bridge/config.ts";
import { createLogger } from "../../smtp-bridge/log.ts";
import { startBridge, type Bridge } from "../../smtp-bridge/server.ts";
import { freePort } from "../support/processes.ts";
import { SmtpDialog } from "../support/smtp-dialog.ts";

// Under the run's temporary directory (test/node-global-setup.ts), removed when the run ends.
const dir = mkdtempSync(join(process.env.TERN_TEST_TMP ?? tmpdir(), "tern-bridge-"));
const first = ensureLocalCertificates(join(dir, "first"));
const second = ensureLocalCertificates(join(dir, "second"));
const certFile = join(dir, "cert.pem");
const keyFile = join(dir, "key.pem");
copyFileSync(first.certPath, certFile);
copyFileSync(first.keyPath, keyFile);

let bridge: Bridge;
let tlsPort: number;
let startTlsPort: number;
let healthPort: number;
const logs: string[] = [];

beforeAll(async () => {
  [tlsPort, startTlsPort, healthPort] = [await freePort(), await freePort(), await freePort()];
  const config = configFromEnv({
    TERN_API_URL: `http://127.0.0.1:${await freePort()}`, // nothing listens there
    TERN_BRIDGE_HOST: "127.0.0.1",
    TERN_BRIDGE_HOSTNAME: "mx.tern.test",
    TERN_BRIDGE_TLS_PORTS: String(tlsPort),
    TERN_BRIDGE_STARTTLS_PORTS: String(startTlsPort),
    TERN_BRIDGE_HEALTH_PORT: String(healthPort),
    TERN_BRIDGE_CERT_FILE: certFile,
    TERN_BRIDGE_KEY_FILE: keyFile,
    TERN_BRIDGE_CERT_CHECK_MS: "100",
    TERN_BRIDGE_MAX_CONNECTIONS_PER_IP: "3",
    TERN_BRIDGE_LOG_LEVEL: "debug",
  });
  bridge = await startBridge(config, createLogger("debug", (line) => logs.push(line)));
});

afterAll(async () => {
  await bridge?.close();
});

function servedFingerprint(): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: "127.0.0.1", port: tlsPort, rejectUnauthorized: false }, () => {
      resolve(s.getPeerX509Certificate()!.fingerprint256);
      s.destroy();
    });
    s.once("error", reject);
  });
}

describe("the bridge's SMTP server", () => {
  it("greets with its hostname and listens only on the configured ports", async () => {
    expect(bridge.ports).toEqual([{ port: tlsPort, tls: "implicit" }, { port: startTlsPort, tls: "starttls" }]);
    const { dialog, greeting } = await SmtpDialog.open(tlsPort, { tls: true, ca: readFileSync(first.caCertPath) });
    expect(greeting.code).toBe(220);
    expect(greeting.text).toMatch(/^mx\.tern\.test ESMTP/);
    const ehlo = await dialog.command("EHLO client.test");
    expect(ehlo.text).toMatch(/AUTH PLAIN LOGIN/);
    expect(ehlo.text).toMatch(/SIZE 41943040/);
    expect(ehlo.text).not.toMatch(/STARTTLS/);
    dialog.close();
  });

  it("answers a login it cannot check (the API is unreachable) with a temporary 454", async () => {
    const { dialog } = await SmtpDialog.open(tlsPort, { tls: true, ca: readFileSync(first.caCertPath) });
    const r = await dialog.login("tern_" + "a".repeat(40));
    expect(r.code).toBe(454);
    expect(r.text).toMatch(/^4\.7\.0 /);
    // MAIL without a login is refused.
    expect((await dialog.command("MAIL FROM:<a@tern.test>")).code).toBe(530);
    dialog.close();
  });

  it("refuses connections over the per-address limit with 421", async () => {
    const open = await Promise.all([1, 2, 3].map(() => SmtpDialog.open(startTlsPort)));
    expect(open.map((o) => o.greeting.code)).toEqual([220, 220, 220]);
    const fourth = await SmtpDialog.open(startTlsPort);
    expect(fourth.greeting.code).toBe(421);
    expect(fourth.greeting.text).toMatch(/Too many connections from your address/);
    for (const o of open) o.dialog.close();
    await new Promise((r) => setTimeout(r, 200));
    const again = await SmtpDialog.open(startTlsPort);
    expect(again.greeting.code).toBe(220);
    again.dialog.close();
  });

  it("reports its health", async () => {
    const res = await fetch(`http://127.0.0.1:${healthPort}/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: "ok", ports: bridge.ports, certificate: { subject: "CN=localhost" } });
    expect((await fetch(`http://127.0.0.1:${healthPort}/other`)).status).toBe(404);
  });

  it("serves a renewed certificate without a restart, and keeps the old one while the new pair does not load", async () => {
    const before = await servedFingerprint();
    // A half-renewed pair: the new certificate with the old key. It must not be used.
    copyFileSync(second.certPath, certFile);
    await new Promise((r) => setTimeout(r, 400));
    expect(await servedFingerprint()).toBe(before);
    expect(logs.some((l) => l.includes('"certificate_reload_failed"'))).toBe(true);
    copyFileSync(second.keyPath, keyFile);
    const deadline = Date.now() + 5_000;
    let after = before;
    while (after === before && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      after = await servedFingerprint();
    }
    expect(after).not.toBe(before);
    expect(logs.some((l) => l.includes('"certificate_reloaded"'))).toBe(true);
    // STARTTLS uses it too.
    const { dialog } = await SmtpDialog.open(startTlsPort);
    await dialog.command("EHLO client.test");
    expect((await dialog.startTls(readFileSync(second.caCertPath))).code).toBe(220);
    dialog.close();
  });

  it("never logs a key", () => {
    expect(logs.join("\n")).not.toContain("tern_aaaa");
  });

  it("finds each session's connection (its address count and login deadline)", () => {
    expect(logs.join("\n")).toContain('"session_opened"');
    expect(logs.join("\n")).not.toContain('"connection_unmatched"');
  });
});

describe("connections that never log in", () => {
  let limited: Bridge;
  let tls: number;
  let plain: number;
  const limitedLogs: string[] = [];
  const ca = readFileSync(first.caCertPath);

  beforeAll(async () => {
    [tls, plain] = [await freePort(), await freePort()];
    limited = await startBridge(
      configFromEnv({
        TERN_API_URL: `http://127.0.0.1:${await freePort()}`,
        TERN_BRIDGE_HOST: "127.0.0.1",
        TERN_BRIDGE_TLS_PORTS: String(tls),
        TERN_BRIDGE_STARTTLS_PORTS: String(plain),
        TERN_BRIDGE_HEALTH_PORT: "off",
        TERN_BRIDGE_CERT_FILE: first.certPath,
        TERN_BRIDGE_KEY_FILE: first.keyPath,
        TERN_BRIDGE_MAX_CONNECTIONS_PER_IP: "3",
        TERN_BRIDGE_LOGIN_TIMEOUT_MS: "1000",
      }),
      createLogger("debug", (line) => limitedLogs.push(line)),
    );
  });

  afterAll(async () => {
    await limited?.close();
  });

  /** A TCP connection that says nothing: on the TLS port, a handshake never started. */
  const silent = (port: number) =>
    new Promise<{ socket: Socket; closed: Promise<number> }>((resolve, reject) => {
      const socket = tcpConnect({ host: "127.0.0.1", port }, () => resolve({ socket, closed }));
      const t0 = Date.now();
      const closed = new Promise<number>((r) => socket.once("close", () => r(Date.now() - t0)));
      socket.on("data", () => {});
      socket.once("error", reject);
    });

  it("counts connections still in their TLS handshake against their address", async () => {
    const pending = await Promise.all([1, 2, 3].map(() => silent(tls)));
    // The fourth from the same address is dropped before its handshake.
    await expect(SmtpDialog.open(tls, { tls: true, ca })).rejects.toThrow();
    for (const p of pending) p.socket.destroy();
    await Promise.all(pending.map((p) => p.closed));
    await new Promise((r) => setTimeout(r, 200)); // the bridge sees them close
    const { dialog, greeting } = await SmtpDialog.open(tls, { tls: true, ca });
    expect(greeting.code).toBe(220);
    dialog.close();
  });

  it("closes a connection that has not logged in within the time allowed, active or not, handshake done or not", async () => {
    const handshake = await silent(tls);
    const idle = await SmtpDialog.open(plain);
    const busy = await SmtpDialog.open(tls, { tls: true, ca });
    expect(idle.greeting.code).toBe(220);
    expect((await busy.dialog.command("EHLO client.test")).code).toBe(250);
    // Commands do not extend the time: only a login does.
    const keepalive = setInterval(() => void (busy.dialog.closed || busy.dialog.write("NOOP\r\n")), 200);
    try {
      const told = await idle.dialog.reply(5_000);
      expect(told.code).toBe(421);
      expect(told.text).toMatch(/^4\.4\.2 No login within 1 second /);
      expect(await handshake.closed).toBeLessThan(3_000);
      let last = await busy.dialog.reply(5_000);
      while (last.code === 250) last = await busy.dialog.reply(5_000);
      expect(last.code).toBe(421);
      expect(busy.dialog.closed || (await busy.dialog.reply(2_000)).code === 0).toBe(true);
    } finally {
      clearInterval(keepalive);
      idle.dialog.close();
      busy.dialog.close();
      handshake.socket.destroy();
    }
    expect(limitedLogs.filter((l) => l.includes('"login_timeout"'))).toHaveLength(3);
  });
});

describe("addresses on a dual-stack listener", () => {
  let dual: Bridge | null = null;
  let tls: number;
  let plain: number;
  const dualLogs: string[] = [];
  const ca = readFileSync(first.caCertPath);

  beforeAll(async () => {
    // Only where the machine has IPv6 on loopback.
    const v6 = await new Promise<boolean>((resolve) => {
      const probe = createServer();
      probe.once("error", () => resolve(false));
      probe.listen(0, "::1", () => probe.close(() => resolve(true)));
    });
    if (!v6) return;
    [tls, plain] = [await freePort(), await freePort()];
    dual = await startBridge(
      configFromEnv({
        TERN_API_URL: `http://127.0.0.1:${await freePort()}`,
        TERN_BRIDGE_HOST: "::",
        TERN_BRIDGE_TLS_PORTS: String(tls),
        TERN_BRIDGE_STARTTLS_PORTS: String(plain),
        TERN_BRIDGE_HEALTH_PORT: "off",
        TERN_BRIDGE_CERT_FILE: first.certPath,
        TERN_BRIDGE_KEY_FILE: first.keyPath,
        TERN_BRIDGE_MAX_CONNECTIONS_PER_IP: "2",
        TERN_BRIDGE_LOG_LEVEL: "debug",
      }),
      createLogger("debug", (line) => dualLogs.push(line)),
    );
  });

  afterAll(async () => {
    await dual?.close();
  });

  it("counts an IPv6 client and an IPv4 one (seen as IPv4-mapped) each against its own limit", async (ctx) => {
    if (!dual) return ctx.skip();
    const v6 = [await SmtpDialog.open(plain, { host: "::1" }), await SmtpDialog.open(tls, { host: "::1", tls: true, ca })];
    const v4 = [await SmtpDialog.open(plain), await SmtpDialog.open(tls, { tls: true, ca })];
    expect([...v6, ...v4].map((o) => o.greeting.code)).toEqual([220, 220, 220, 220]);
    const third6 = await SmtpDialog.open(plain, { host: "::1" });
    expect(third6.greeting.code).toBe(421);
    expect(third6.greeting.text).toMatch(/Too many connections from your address/);
    await expect(SmtpDialog.open(tls, { host: "::1", tls: true, ca })).rejects.toThrow();
    const third4 = await SmtpDialog.open(plain);
    expect(third4.greeting.code).toBe(421);
    for (const o of [...v6, ...v4, third6, third4]) o.dialog.close();
    expect(dualLogs.join("\n")).not.toContain('"connection_unmatched"');
    expect(dualLogs.filter((l) => l.includes('"max_connections_per_ip"')).map((l) => (JSON.parse(l) as { ip: string }).ip).sort()).toEqual(["127.0.0.1", "::1", "::1"]);
  });
});
