// The SMTP client against real loopback peers (test/support/smtp-peers.ts), inside workerd.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { address, bytesOf, capturedFor } from "./peers.ts";
import { SmtpClient, SmtpError, dataChunks, makeReply, parseCapabilities, type SmtpClientOptions } from "../../worker/transports/smtp-client.ts";


const encoder = new TextEncoder();
const decoder = new TextDecoder();

function options(peer: string, security: SmtpClientOptions["security"], extra: Partial<SmtpClientOptions> = {}): SmtpClientOptions {
  const port = env.TEST_PEERS[peer];
  if (!port) throw new Error(`no test peer named ${peer}`);
  return { host: "127.0.0.1", port, security, heloName: "client.tern.test", connectTimeoutMs: 2000, commandTimeoutMs: 2000, dataTimeoutMs: 5000, ...extra };
}


function message(body: string): Uint8Array {
  return encoder.encode(`From: sender@tern.test\r\nTo: someone@example.test\r\nSubject: client test\r\nMessage-ID: <${crypto.randomUUID()}@tern.test>\r\n\r\n${body}`);
}



async function connectError(opts: SmtpClientOptions): Promise<SmtpError> {
  const error = await SmtpClient.connect(opts).then(
    async (client) => {
      await client.quit();
      throw new Error("connected, but should not have");
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(SmtpError);
  return error as SmtpError;
}

/** Each chunk decoded as it comes: dataChunks uses its buffers again. */
async function joined(chunks: AsyncIterable<Uint8Array>): Promise<string> {
  let out = "";
  for await (const c of chunks) out += decoder.decode(c);
  return out;
}

describe("DATA encoding", async () => {
  it("doubles a leading dot on every line and ends with CRLF.CRLF", async () => {
    expect(await joined(dataChunks(encoder.encode(".\r\n..x\r\na.b\r\n.end\r\n")))).toBe("..\r\n...x\r\na.b\r\n..end\r\n.\r\n");
  });

  it("adds the missing CRLF before the final dot and handles an empty message", async () => {
    expect(await joined(dataChunks(encoder.encode("no newline")))).toBe("no newline\r\n.\r\n");
    expect(await joined(dataChunks(new Uint8Array(0))))
      .toBe(".\r\n");
  });

  it("turns bare CR and LF into CRLF so no relay can see an early end of data", async () => {
    expect(await joined(dataChunks(encoder.encode("a\n.\nb\r.\rc\r")))).toBe("a\r\n..\r\nb\r\n..\r\nc\r\n.\r\n");
  });

  it("gives the same bytes whatever the chunk size, even when CRLF or a dot straddles two chunks", async () => {
    const raw = encoder.encode("x\r\n.\r\n..y\r\nz\n.w\r");
    const whole = await joined(dataChunks(raw, 1 << 20));
    for (const size of [1, 2, 3, 5]) expect(await joined(dataChunks(raw, size))).toBe(whole);
  });
});

/** The stuffing rules a byte at a time, as the spec reads: what dataChunks must write. */
function stuffedReference(raw: Uint8Array): Uint8Array {
  const out: number[] = [];
  let lineStart = true;
  let afterCR = false;
  for (const b of raw) {
    if (afterCR) {
      afterCR = false;
      out.push(10);
      lineStart = true;
      if (b === 10) continue;
    }
    if (b === 13) {
      out.push(13);
      afterCR = true;
    } else if (b === 10) {
      out.push(13, 10);
      lineStart = true;
    } else {
      if (lineStart && b === 46) out.push(46);
      out.push(b);
      lineStart = false;
    }
  }
  if (afterCR) out.push(10);
  else if (!lineStart) out.push(13, 10);
  out.push(46, 13, 10);
  return Uint8Array.from(out);
}

/** The chunks read as the SMTP client reads them: each one held while the next is made (it is
 * written only then), and checked to be unchanged by the making of the next. */
async function joinedBytes(chunks: AsyncGenerator<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let pending = await chunks.next();
  while (!pending.done) {
    const copy = pending.value.slice();
    const next = await chunks.next();
    expect(pending.value).toEqual(copy);
    parts.push(copy);
    pending = next;
  }
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) out.set(p, (at += p.length) - p.length);
  return out;
}

describe("DATA encoding, against the rules a byte at a time", () => {
  it("writes the same bytes for any input, source chunks, chunk size and size hint (right, low or missing)", async () => {
    let seed = 7;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) % n);
    const alphabet = [13, 10, 46, 97, 98, 32];
    for (let round = 0; round < 300; round++) {
      const raw = Uint8Array.from({ length: rand(400) }, () => alphabet[rand(alphabet.length)]!);
      const want = stuffedReference(raw);
      // The message in source chunks of random sizes.
      const sources: Uint8Array[] = [];
      for (let at = 0; at < raw.length;) {
        const size = 1 + rand(50);
        sources.push(raw.subarray(at, at + size));
        at += size;
      }
      const chunkBytes = 1 + rand(64);
      const hint = [undefined, raw.length, rand(raw.length + 1)][rand(3)];
      expect(await joinedBytes(dataChunks(sources, chunkBytes, hint)), `round ${round}`).toEqual(want);
    }
  });

  it("keeps every byte when a run of bare line feeds follows a part-filled buffer", async () => {
    // Two sources: a line, then 64 KB of bare LFs, each of which becomes two bytes.
    const line = encoder.encode(`${"x".repeat(98)}\r\n`);
    const raw = [line, new Uint8Array(65536).fill(10)];
    const out = await joinedBytes(dataChunks(raw));
    expect(out.length).toBe(100 + 65536 * 2 + 3);
    const whole = new Uint8Array(100 + 65536);
    whole.set(line);
    whole.set(raw[1]!, 100);
    expect(out).toEqual(stuffedReference(whole));
  });
});

describe("reply parsing", () => {
  it("takes the enhanced status code from the text when its class matches the reply code", () => {
    expect(makeReply(550, ["5.1.1 No such user"])).toEqual({ code: 550, enhancedCode: "5.1.1", lines: ["No such user"], text: "No such user" });
    expect(makeReply(250, ["4.1.1 odd"]).enhancedCode).toBeUndefined();
    expect(makeReply(250, [""]).text).toBe("");
  });

  it("reads the EHLO capabilities", () => {
    const caps = parseCapabilities(["relay greets you", "SIZE 10000", "STARTTLS", "AUTH PLAIN LOGIN", "AUTH=CRAM-MD5", "8BITMIME", "SMTPUTF8", "PIPELINING", "ENHANCEDSTATUSCODES", "REQUIRETLS"]);
    expect(caps).toEqual({ sizeAdvertised: true, maxSize: 10000, starttls: true, auth: ["PLAIN", "LOGIN", "CRAM-MD5"], eightBitMime: true, smtpUtf8: true, pipelining: true, enhancedStatusCodes: true, requireTls: true });
    const unlimited = parseCapabilities(["hi", "SIZE"]);
    expect(unlimited.sizeAdvertised).toBe(true);
    expect(unlimited.maxSize).toBeUndefined();
  });
});

describe("SmtpClient against real peers", () => {
  it("sends over plain text with the configured EHLO name and reads the capabilities", async () => {
    const client = await SmtpClient.connect(options("plain", "plain"));
    expect(client.secure).toBe(false);
    expect(client.capabilities).toMatchObject({ starttls: false, pipelining: true, eightBitMime: true, smtpUtf8: true, auth: ["PLAIN", "LOGIN"] });
    const to = address("ok");
    const result = await client.send({ from: "bounce@tern.test", recipients: [to], raw: message("hello\r\n") });
    await client.quit();
    expect(result.error).toBeUndefined();
    expect(result.data?.code).toBe(250);
    const [got] = await capturedFor(to);
    expect(got).toMatchObject({ peer: "plain", envelopeFrom: "bounce@tern.test", recipients: [to], ehloName: "client.tern.test", secure: false, user: null });
  });

  it("does not authenticate when no credentials are configured, even though the relay offers AUTH", async () => {
    const client = await SmtpClient.connect(options("plain", "plain"));
    expect(client.capabilities.auth.length).toBeGreaterThan(0);
    expect(client.authenticated).toBe(false);
    await client.quit();
  });

  it("upgrades with STARTTLS and says EHLO again", async () => {
    const client = await SmtpClient.connect(options("starttls", "starttls"));
    expect(client.secure).toBe(true);
    expect(client.capabilities.starttls).toBe(false); // the capabilities are those given after TLS
    const to = address("ok");
    await client.send({ from: "bounce@tern.test", recipients: [to], raw: message("over starttls\r\n") });
    await client.quit();
    expect((await capturedFor(to))[0]).toMatchObject({ peer: "starttls", secure: true, ehloName: "client.tern.test" });
  });

  it("speaks implicit TLS", async () => {
    const client = await SmtpClient.connect(options("tls", "tls"));
    expect(client.secure).toBe(true);
    const to = address("ok");
    await client.send({ from: "bounce@tern.test", recipients: [to], raw: message("over tls\r\n") });
    await client.quit();
    expect((await capturedFor(to))[0]).toMatchObject({ peer: "tls", secure: true });
  });

  it("refuses to go on in plain text when STARTTLS is required but not offered", async () => {
    const error = await connectError(options("nostarttls", "starttls"));
    expect(error.phase).toBe("starttls");
    expect(error.transient).toBe(true);
    expect(error.message).toMatch(/does not offer STARTTLS/);
  });

  it("stays in plain text on a STARTTLS peer only when plain is configured", async () => {
    const client = await SmtpClient.connect(options("starttls", "plain"));
    expect(client.secure).toBe(false);
    const to = address("ok");
    await client.send({ from: "bounce@tern.test", recipients: [to], raw: message("plain\r\n") });
    await client.quit();
    expect((await capturedFor(to))[0]).toMatchObject({ peer: "starttls", secure: false });
  });

  it("authenticates with AUTH PLAIN after STARTTLS", async () => {
    const client = await SmtpClient.connect(options("auth", "starttls", { username: "relay-user", password: "relay-pass" }));
    expect(client.authenticated).toBe(true);
    const to = address("ok");
    await client.send({ from: "bounce@tern.test", recipients: [to], raw: message("authenticated\r\n") });
    await client.quit();
    expect((await capturedFor(to))[0]).toMatchObject({ peer: "auth", secure: true, user: "relay-user" });
  });

  it("authenticates with AUTH LOGIN when that is all the relay offers", async () => {
    const client = await SmtpClient.connect(options("authlogin", "starttls", { username: "relay-user", password: "relay-pass" }));
    expect(client.authenticated).toBe(true);
    const to = address("ok");
    await client.send({ from: "bounce@tern.test", recipients: [to], raw: message("login\r\n") });
    await client.quit();
    expect((await capturedFor(to))[0]).toMatchObject({ peer: "authlogin", user: "relay-user" });
  });

  it("fails authentication with bad credentials without echoing the password", async () => {
    const error = await connectError(options("auth", "starttls", { username: "relay-user", password: "wrong-secret" }));
    expect(error.phase).toBe("auth");
    expect(error.code).toBe(535);
    expect(error.enhancedCode).toBe("5.7.8");
    expect(error.message).not.toContain("wrong-secret");
  });

  it("reads replies split across many TCP reads, multi-line greeting included", async () => {
    const client = await SmtpClient.connect(options("fragmented", "plain"));
    expect(client.capabilities).toMatchObject({ sizeAdvertised: true, maxSize: 20000000, enhancedStatusCodes: true, pipelining: false });
    const ok = address("ok");
    const rejected = address("reject");
    const result = await client.send({ from: "bounce@tern.test", recipients: [ok, rejected], raw: message("slowly\r\n") });
    await client.quit();
    expect(result.recipients[1]?.reply).toMatchObject({ code: 550, enhancedCode: "5.1.1", text: "No such user here" });
    expect(result.data).toMatchObject({ code: 250, enhancedCode: "2.6.0" });
    expect((await capturedFor(ok))[0]).toMatchObject({ peer: "fragmented", recipients: [ok], mailParams: { SIZE: String(message("slowly\r\n").length) } });
  });

  it("pipelines MAIL, RCPT and DATA and reads several replies arriving in one read", async () => {
    const client = await SmtpClient.connect(options("pipelining", "plain"));
    expect(client.capabilities.pipelining).toBe(true);
    const [ok, temp, rejected] = [address("ok"), address("tempfail"), address("reject")];
    const result = await client.send({ from: "bounce@tern.test", recipients: [ok, temp, rejected], raw: message("pipelined\r\n") });
    expect(result.mail?.code).toBe(250);
    expect(result.recipients.map((r) => r.reply?.code)).toEqual([250, 451, 550]);
    expect(result.recipients[1]?.reply?.enhancedCode).toBe("4.2.0");
    expect(result.data?.code).toBe(250);
    // The connection is still in step for the next message.
    const second = address("ok");
    const again = await client.send({ from: "bounce@tern.test", recipients: [second], raw: message("again\r\n") });
    await client.quit();
    expect(again.data?.code).toBe(250);
    expect((await capturedFor(second))[0]?.connectionId).toBe((await capturedFor(ok))[0]?.connectionId);
  });

  it("pipelined DATA with every recipient refused: the relay's refusal of DATA is read, and the connection stays in step", async () => {
    const client = await SmtpClient.connect(options("pipelining", "plain"));
    const refused = address("reject");
    const result = await client.send({ from: "bounce@tern.test", recipients: [refused], raw: message("nobody\r\n") });
    expect(result.recipients[0]?.reply).toMatchObject({ code: 550 });
    expect(result.data).toBeUndefined();
    expect(client.usable).toBe(true);
    const next = address("ok");
    const again = await client.send({ from: "bounce@tern.test", recipients: [next], raw: message("next\r\n") });
    await client.quit();
    expect(again.data?.code).toBe(250);
    expect(await capturedFor(refused)).toEqual([]);
    expect((await capturedFor(next))[0]?.peer).toBe("pipelining");
  });

  it("falls back to HELO when EHLO is refused with a 5xx", async () => {
    const client = await SmtpClient.connect(options("heloonly", "plain"));
    expect(client.capabilities.pipelining).toBe(false);
    const to = address("ok");
    await client.send({ from: "bounce@tern.test", recipients: [to], raw: message("helo\r\n") });
    await client.quit();
    expect((await capturedFor(to))[0]).toMatchObject({ peer: "heloonly", ehloName: "client.tern.test" });
  });

  it("resets after a failed transaction and sends the next message on the same connection", async () => {
    const client = await SmtpClient.connect(options("plain", "plain"));
    const failed = await client.send({ from: "bounce@tern.test", recipients: [address("reject")], raw: message("x\r\n") });
    expect(failed.data).toBeUndefined();
    expect(failed.recipients[0]?.reply?.code).toBe(550);
    const temp = await client.send({ from: "bounce@tern.test", recipients: [address("datatemp")], raw: message("x\r\n") });
    expect(temp.data?.code).toBe(451);
    expect(client.usable).toBe(true);
    const [a, b] = [address("ok"), address("ok")];
    await client.send({ from: "bounce@tern.test", recipients: [a], raw: message("one\r\n") });
    await client.send({ from: "bounce@tern.test", recipients: [b], raw: message("two\r\n") });
    await client.quit();
    expect((await capturedFor(a))[0]?.connectionId).toBe((await capturedFor(b))[0]?.connectionId);
  });

  it("declares SIZE and BODY=8BITMIME when the relay offers them", async () => {
    const client = await SmtpClient.connect(options("size", "plain"));
    expect(client.capabilities).toMatchObject({ sizeAdvertised: true, maxSize: 10000, eightBitMime: true });
    const to = address("ok");
    const raw = message("caf\u00e9 cr\u00e8me\r\n");
    await client.send({ from: "bounce@tern.test", recipients: [to], raw });
    await client.quit();
    const [got] = await capturedFor(to);
    expect(got?.mailParams).toMatchObject({ SIZE: String(raw.length), BODY: "8BITMIME" });
    expect(bytesOf(got!.rawBase64)).toEqual(raw);
  });

  it("refuses locally a message larger than the relay's SIZE, before MAIL FROM", async () => {
    const client = await SmtpClient.connect(options("size", "plain"));
    const to = address("ok");
    const result = await client.send({ from: "bounce@tern.test", recipients: [to], raw: message("y".repeat(12_000) + "\r\n") });
    expect(result.mail).toBeUndefined();
    expect(result.error).toMatchObject({ phase: "message", transient: false, enhancedCode: "5.3.4" });
    expect(client.usable).toBe(true);
    await client.quit();
    expect(await capturedFor(to)).toEqual([]);
  });

  it("refuses locally an envelope address that would break the command line", async () => {
    const client = await SmtpClient.connect(options("plain", "plain"));
    const ok = address("ok");
    const result = await client.send({ from: "bounce@tern.test", recipients: ["evil@example.test>\r\nRSET", ok], raw: message("z\r\n") });
    await client.quit();
    expect(result.recipients[0]?.localError?.phase).toBe("rcpt");
    expect(result.recipients[1]?.reply?.code).toBe(250);
    expect((await capturedFor(ok))[0]?.recipients).toEqual([ok]);
  });

  it("reports a hang-up after the final dot as a broken connection with the data sent", async () => {
    const client = await SmtpClient.connect(options("plain", "plain"));
    const result = await client.send({ from: "bounce@tern.test", recipients: [address("hangup")], raw: message("bye\r\n") });
    expect(result.dataSent).toBe(true);
    expect(result.error).toMatchObject({ phase: "data", transient: true });
    expect(client.usable).toBe(false);
    await client.quit();
  });

  it("fails fast when the connection is refused", async () => {
    // A connect timeout far above the bound: a refusal is told apart from waiting it out even
    // on a loaded machine (with 2 s it once took 2.1 s, the timeout, while other tests ran).
    const started = Date.now();
    const error = await connectError(options("closed", "plain", { connectTimeoutMs: 20_000 }));
    expect(error.phase).toBe("connect");
    expect(error.message).not.toMatch(/timed out/);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it("gives up on a peer that never greets within the command timeout", async () => {
    const started = Date.now();
    const error = await connectError(options("silent", "plain", { commandTimeoutMs: 300 }));
    const elapsed = Date.now() - started;
    expect(error.phase).toBe("greeting");
    expect(error.message).toMatch(/timed out after 300 ms/);
    expect(elapsed).toBeGreaterThanOrEqual(250);
    expect(elapsed).toBeLessThan(1500);
  });
});
