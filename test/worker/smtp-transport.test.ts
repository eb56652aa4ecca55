// The smtp transport: relay URLs, and per-recipient outcomes against real loopback peers.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { address, bytesOf, capturedFor } from "./peers.ts";
import { createSmtpTransport, parseRelayUrl, type SmtpRelayConfig } from "../../worker/transports/smtp.ts";
import type { OutboundMessage, RecipientResult } from "../../worker/transports/transport.ts";


const encoder = new TextEncoder();

function relay(peer: string, security: SmtpRelayConfig["security"], extra: Partial<SmtpRelayConfig> = {}): SmtpRelayConfig {
  const port = env.TEST_PEERS[peer];
  if (!port) throw new Error(`no test peer named ${peer}`);
  return { host: "127.0.0.1", port, security, heloName: "mta.tern.test", connectTimeoutMs: 2000, commandTimeoutMs: 2000, dataTimeoutMs: 5000, ...extra };
}


function outbound(recipients: string[], body = "Hello.\r\n"): OutboundMessage {
  const raw = encoder.encode(`From: Tern <sender@tern.test>\r\nTo: ${recipients.join(", ")}\r\nSubject: transport test\r\nMessage-ID: <${crypto.randomUUID()}@tern.test>\r\n\r\n${body}`);
  return { envelopeFrom: "bounces@tern.test", recipients, raw };
}

async function deliverOnce(config: SmtpRelayConfig, message: OutboundMessage): Promise<RecipientResult[]> {
  const session = await createSmtpTransport(config).open();
  try {
    return await session.deliver(message);
  } finally {
    await session.close();
  }
}



describe("parseRelayUrl", () => {
  const valid: Array<[string, Partial<SmtpRelayConfig>]> = [
    ["smtps://smtp.example.com", { host: "smtp.example.com", port: 465, security: "tls" }],
    ["smtps://smtp.example.com:2465", { host: "smtp.example.com", port: 2465, security: "tls" }],
    ["smtp://smtp.example.com", { host: "smtp.example.com", port: 587, security: "starttls" }],
    ["smtp://relay-user:relay-pass@127.0.0.1:2587", { host: "127.0.0.1", port: 2587, security: "starttls", username: "relay-user", password: "relay-pass" }],
    ["smtp+plain://127.0.0.1:2525", { host: "127.0.0.1", port: 2525, security: "plain" }],
    ["smtps://apikey%40example.com:p%2Fss%3Aw%40rd@smtp.example.com/", { username: "apikey@example.com", password: "p/ss:w@rd" }],
    ["smtp://[::1]:2587", { host: "::1", port: 2587 }],
    ["  smtps://smtp.example.com  ", { host: "smtp.example.com" }],
  ];
  it.each(valid)("reads %s", (url, expected) => {
    const config = parseRelayUrl(url, "mta.tern.test");
    expect(config).toMatchObject({ heloName: "mta.tern.test", ...expected });
    expect(config.connectTimeoutMs).toBeGreaterThan(0);
    expect(config.commandTimeoutMs).toBeGreaterThan(0);
    expect(config.dataTimeoutMs).toBeGreaterThan(config.commandTimeoutMs);
    if (!expected.username) expect(config.username).toBeUndefined();
  });

  const invalid: Array<[string, RegExp]> = [
    ["", /not a valid URL/],
    ["smtp.example.com:587", /unsupported scheme|not a valid URL/],
    ["http://smtp.example.com", /unsupported scheme "http"/],
    ["smtp+plain://127.0.0.1", /explicit port/],
    ["smtps://", /host is missing|not a valid URL/],
    ["smtps://smtp.example.com:0", /port/],
    ["smtps://smtp.example.com:70000", /port|not a valid URL/],
    ["smtps://smtp.example.com/path", /path, query or fragment/],
    ["smtps://smtp.example.com?tls=off", /path, query or fragment/],
    ["smtps://user@smtp.example.com", /without a password/],
    ["smtps://:hunter2-secret@smtp.example.com", /without a user name/],
    ["smtps://user:bad%zzhunter2-secret@smtp.example.com", /password is not valid percent-encoding/],
  ];
  it.each(invalid)("refuses %j", (url, message) => {
    let error: unknown;
    try {
      parseRelayUrl(url, "mta.tern.test");
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toContain("hunter2-secret");
  });

  it("refuses an EHLO name that is not a host name", () => {
    expect(() => parseRelayUrl("smtps://smtp.example.com", "not a name")).toThrow(/EHLO name/);
    expect(() => parseRelayUrl("smtps://smtp.example.com", "")).toThrow(/EHLO name/);
    expect(parseRelayUrl("smtps://smtp.example.com", "[127.0.0.1]").heloName).toBe("[127.0.0.1]");
  });
});

describe("smtp transport", () => {
  it.each([
    ["plain", "plain", false],
    ["starttls", "starttls", true],
    ["tls", "tls", true],
  ] as const)("delivers to the %s peer with the configured EHLO name", async (peer, security, secure) => {
    const to = address("ok");
    const [result] = await deliverOnce(relay(peer, security), outbound([to]));
    expect(result).toMatchObject({ recipient: to, status: "accepted", code: 250 });
    const [got] = await capturedFor(to);
    expect(got).toMatchObject({ peer, ehloName: "mta.tern.test", secure, envelopeFrom: "bounces@tern.test", recipients: [to] });
  });

  it("defers rather than send in plain text when the relay does not offer STARTTLS", async () => {
    const to = address("ok");
    const [result] = await deliverOnce(relay("nostarttls", "starttls"), outbound([to]));
    expect(result?.status).toBe("deferred");
    expect(result?.message).toMatch(/STARTTLS/);
    expect(await capturedFor(to)).toEqual([]);
  });

  it("authenticates with the configured credentials", async () => {
    const to = address("ok");
    const [result] = await deliverOnce(relay("auth", "starttls", { username: "relay-user", password: "relay-pass" }), outbound([to]));
    expect(result?.status).toBe("accepted");
    expect((await capturedFor(to))[0]).toMatchObject({ peer: "auth", user: "relay-user", secure: true });
  });

  it("defers every recipient when authentication fails, without the password in the message", async () => {
    const recipients = [address("ok"), address("other")];
    const results = await deliverOnce(relay("auth", "starttls", { username: "relay-user", password: "not-the-pass-42" }), outbound(recipients));
    expect(results.map((r) => r.status)).toEqual(["deferred", "deferred"]);
    expect(results[0]?.message).toMatch(/authentication/);
    expect(results[0]?.message).toContain("535");
    expect(JSON.stringify(results)).not.toContain("not-the-pass-42");
  });

  it("defers when the relay requires authentication and none is configured", async () => {
    const [result] = await deliverOnce(relay("auth", "starttls"), outbound([address("ok")]));
    expect(result).toMatchObject({ status: "deferred", code: 530 });
  });

  it("reports each recipient of one message on its own", async () => {
    const [ok, temp, rejected] = [address("ok"), address("tempfail"), address("reject")];
    const results = await deliverOnce(relay("plain", "plain"), outbound([ok, temp, rejected]));
    expect(results).toEqual([
      { recipient: ok, status: "accepted", code: 250, enhancedCode: "2.6.0", message: "Queued" },
      expect.objectContaining({ recipient: temp, status: "deferred", code: 451, enhancedCode: "4.2.0" }),
      expect.objectContaining({ recipient: rejected, status: "rejected", code: 550, enhancedCode: "5.1.1", message: "No such user here" }),
    ]);
    expect((await capturedFor(ok))[0]?.recipients).toEqual([ok]);
  });

  it("defers the accepted recipients when the relay answers the message with a 4xx", async () => {
    const [temp, rejected] = [address("datatemp"), address("reject")];
    const results = await deliverOnce(relay("plain", "plain"), outbound([temp, rejected]));
    expect(results.map((r) => [r.status, r.code])).toEqual([["deferred", 451], ["rejected", 550]]);
  });

  it("rejects the accepted recipients when the relay answers the message with a 5xx", async () => {
    const [perm, ok] = [address("dataperm"), address("ok")];
    const results = await deliverOnce(relay("starttls", "starttls"), outbound([perm, ok]));
    expect(results).toEqual([
      expect.objectContaining({ status: "rejected", code: 554, enhancedCode: "5.6.0" }),
      expect.objectContaining({ status: "rejected", code: 554, enhancedCode: "5.6.0" }),
    ]);
    expect(await capturedFor(ok)).toEqual([]);
  });

  it("defers when the relay hangs up after the message, saying it may have been delivered", async () => {
    const results = await deliverOnce(relay("plain", "plain"), outbound([address("hangup"), address("ok")]));
    expect(results.map((r) => r.status)).toEqual(["deferred", "deferred"]);
    expect(results[0]?.code).toBeUndefined();
    expect(results[0]?.message).toMatch(/may have been delivered/);
  });

  it("defers quickly when the connection is refused", async () => {
    const started = Date.now();
    const [result] = await deliverOnce(relay("closed", "plain"), outbound([address("ok")]));
    expect(result?.status).toBe("deferred");
    expect(result?.code).toBeUndefined();
    expect(result?.message).toMatch(/connect/);
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it("defers within the configured timeout when the relay never greets", async () => {
    const started = Date.now();
    const [result] = await deliverOnce(relay("silent", "plain", { commandTimeoutMs: 400 }), outbound([address("ok")]));
    const elapsed = Date.now() - started;
    expect(result?.status).toBe("deferred");
    expect(result?.message).toMatch(/timed out after 400 ms/);
    expect(elapsed).toBeLessThan(1500);
  });

  it("after a failed connection, defers the session's next messages without waiting again", async () => {
    const session = await createSmtpTransport(relay("silent", "plain", { commandTimeoutMs: 300 })).open();
    const first = await session.deliver(outbound([address("ok")]));
    const started = Date.now();
    const second = await session.deliver(outbound([address("ok")]));
    await session.close();
    expect(Date.now() - started).toBeLessThan(100);
    expect(second[0]).toMatchObject({ status: "deferred", message: first[0]?.message });
  });

  it("keeps dot-stuffed lines intact end to end", async () => {
    const to = address("ok");
    const message = outbound([to], ".\r\n..x\r\n.leading dot\r\nmiddle . dot\r\n.\r\nlast\r\n");
    const [result] = await deliverOnce(relay("plain", "plain"), message);
    expect(result?.status).toBe("accepted");
    const [got] = await capturedFor(to);
    expect(bytesOf(got!.rawBase64)).toEqual(message.raw);
  });

  it("sends successive messages of a session over one connection", async () => {
    const session = await createSmtpTransport(relay("starttls", "starttls")).open();
    const recipients = [address("ok"), address("ok"), address("ok")];
    for (const to of recipients) expect((await session.deliver(outbound([to])))[0]?.status).toBe("accepted");
    await session.close();
    const ids = await Promise.all(recipients.map(async (to) => (await capturedFor(to))[0]?.connectionId));
    expect(ids[0]).toBeTruthy();
    expect(new Set(ids).size).toBe(1);
  });

  it("takes overlapping deliver() calls one after the other on the one connection", async () => {
    const session = await createSmtpTransport(relay("plain", "plain")).open();
    const [a, b] = [address("ok"), address("ok")];
    const results = await Promise.all([session.deliver(outbound([a])), session.deliver(outbound([b]))]);
    await session.close();
    expect(results.map((r) => r[0]?.status)).toEqual(["accepted", "accepted"]);
    expect((await capturedFor(a))[0]?.connectionId).toBe((await capturedFor(b))[0]?.connectionId);
  });

  it("reconnects for the next message when the connection broke", async () => {
    const session = await createSmtpTransport(relay("plain", "plain")).open();
    const [a, b] = [address("ok"), address("ok")];
    await session.deliver(outbound([a]));
    expect((await session.deliver(outbound([address("hangup")])))[0]?.status).toBe("deferred");
    expect((await session.deliver(outbound([b])))[0]?.status).toBe("accepted");
    await session.close();
    const [first] = await capturedFor(a);
    const [second] = await capturedFor(b);
    expect(second?.connectionId).toBeTruthy();
    expect(second?.connectionId).not.toBe(first?.connectionId);
  });

  it("rejects locally a message bigger than the relay's SIZE limit", async () => {
    const to = address("ok");
    const [result] = await deliverOnce(relay("size", "plain"), outbound([to], "y".repeat(10_000) + "\r\n"));
    expect(result).toMatchObject({ status: "rejected", enhancedCode: "5.3.4" });
    expect(result?.code).toBeUndefined();
    expect(result?.message).toMatch(/at most 10000/);
    expect(await capturedFor(to)).toEqual([]);
  });

  it("round-trips a 2 MB message byte for byte", async () => {
    const to = address("ok");
    const lines: string[] = [];
    let size = 0;
    for (let i = 0; size < 2 * 1024 * 1024; i++) {
      const line = i % 97 === 0 ? `.line ${i} starts with a dot` : i % 89 === 0 ? "." : `line ${i} ${"abcdefghijklmnopqrstuvwxyz0123456789".repeat(2)}`;
      lines.push(line);
      size += line.length + 2;
    }
    const message = outbound([to], lines.join("\r\n") + "\r\n");
    expect(message.raw.length).toBeGreaterThan(2 * 1024 * 1024);
    const [result] = await deliverOnce(relay("tls", "tls"), message);
    expect(result?.status).toBe("accepted");
    const [got] = await capturedFor(to);
    const received = bytesOf(got!.rawBase64);
    expect(received.length).toBe(message.raw.length);
    expect(received).toEqual(message.raw);
  });
});

describe("a message given in pieces", () => {
  it("round-trips 3 MB cut where a CRLF or a leading dot straddles two pieces, written in bounded chunks", async () => {
    const to = address("ok");
    const whole = outbound([to], Array.from({ length: 40_000 }, (_, i) => (i % 7 === 0 ? `.dot ${i}` : i % 13 === 0 ? "." : `line ${i} ${"x".repeat(60)}`)).join("\r\n") + "\r\n").raw as Uint8Array;
    // Pieces of odd sizes, each cut falling on a different place in a line.
    const pieces: Uint8Array[] = [];
    for (let at = 0, n = 1; at < whole.length; at += n, n = (n * 31 + 17) % 70_000 + 1) pieces.push(whole.subarray(at, Math.min(whole.length, at + n)));
    const sizes: number[] = [];
    const realWrite = WritableStreamDefaultWriter.prototype.write;
    WritableStreamDefaultWriter.prototype.write = function (chunk?: unknown) {
      if (chunk instanceof Uint8Array) sizes.push(chunk.length);
      return realWrite.call(this, chunk);
    };
    let result: RecipientResult[];
    try {
      result = await deliverOnce(relay("plain", "plain"), { envelopeFrom: "bounces@tern.test", recipients: [to], raw: { length: whole.length, chunks: async function* () { yield* pieces; } } });
    } finally {
      WritableStreamDefaultWriter.prototype.write = realWrite;
    }
    expect(result[0]?.status).toBe("accepted");
    const [got] = await capturedFor(to);
    expect(bytesOf(got!.rawBase64)).toEqual(whole);
    // Dot-stuffing makes no copy of the whole message: no write is much over 64 KB.
    expect(Math.max(...sizes)).toBeLessThanOrEqual(2 * 64 * 1024 + 8);
    expect(sizes.reduce((a, b) => a + b, 0)).toBeGreaterThan(whole.length);
  });
});

describe("a domain that enforces TLS", () => {
  it("asks the relay for REQUIRETLS when it offers it, after STARTTLS", async () => {
    const to = address("ok");
    const [r] = await deliverOnce(relay("requiretls", "starttls"), { ...outbound([to]), requireTls: true });
    expect(r).toMatchObject({ status: "accepted" });
    const [got] = await capturedFor(to);
    expect(got).toMatchObject({ secure: true, mailParams: { REQUIRETLS: true } });
  });

  it("still sends over an encrypted hop to a relay without REQUIRETLS (the relay's onward policy is its own)", async () => {
    const to = address("ok");
    const [r] = await deliverOnce(relay("starttls", "starttls"), { ...outbound([to]), requireTls: true });
    expect(r).toMatchObject({ status: "accepted" });
    const [got] = await capturedFor(to);
    expect(got!.secure).toBe(true);
    expect(got!.mailParams.REQUIRETLS).toBeUndefined();
  });

  it("is deferred, never sent in clear, over a plain relay connection", async () => {
    const to = address("ok");
    const [r] = await deliverOnce(relay("plain", "plain"), { ...outbound([to]), requireTls: true });
    expect(r).toMatchObject({ status: "deferred", enhancedCode: "4.7.10" });
    expect(r!.message).toMatch(/enforces TLS/);
    expect(await capturedFor(to)).toEqual([]);
    // Without the requirement the same relay takes it.
    const [plain] = await deliverOnce(relay("plain", "plain"), outbound([to]));
    expect(plain!.status).toBe("accepted");
  });
});
