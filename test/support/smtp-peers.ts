// Loopback SMTP peers for the worker tests (started by test/global-setup.ts), standing in for
// relays of every kind. Their ports reach workerd as env.TEST_PEERS, by name.
//
// On every peer the recipient's local part picks the outcome:
//   tempfail*@ -> RCPT 451 4.2.0     reject*@   -> RCPT 550 5.1.1
//   datatemp*@ -> 451 after DATA     dataperm*@ -> 554 after DATA
//   hangup*@   -> the socket is destroyed once the DATA body arrived, with no reply
//   anything@throttled.example -> RCPT 421 4.7.28 (the relay's rate limit for that domain)
//   anything else is accepted, and the accepted message is captured.
// Captured messages are served by the `control` HTTP server:
//   GET /messages?peer=NAME&rcpt=ADDRESS  -> JSON list of CapturedMessage (both filters optional)
//   DELETE /messages                      -> forgets every captured message
// Other ports: `closed` (nothing listens: connection refused), `silent` (accepts TCP, never greets).
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { createServer as createNetServer, type AddressInfo, type Server as NetServer, type Socket } from "node:net";
import type { CapturedMessage } from "./captured.ts";
import { SMTPServer, type SMTPServerOptions, type SMTPServerSession } from "smtp-server";
import { prepareTestCertificates } from "./certificates.ts";

export interface SmtpPeers {
  ports: Record<string, number>;
  close(): Promise<void>;
}


export const PEER_USER = "relay-user";
export const PEER_PASSWORD = "relay-pass";

type Outcome = "accept" | "tempfail" | "reject" | "policy" | "datatemp" | "dataperm" | "hangup" | "throttle";

function outcomeOf(address: string): Outcome {
  if (address.toLowerCase().endsWith("@throttled.example")) return "throttle";
  const local = address.split("@")[0]?.toLowerCase() ?? "";
  for (const o of ["tempfail", "reject", "policy", "datatemp", "dataperm", "hangup"] as const) if (local.startsWith(o)) return o;
  return "accept";
}

/** What happens after DATA: the strongest behaviour among the accepted recipients. */
function dataOutcome(recipients: string[]): Outcome {
  const outcomes = recipients.map(outcomeOf);
  for (const o of ["hangup", "dataperm", "datatemp"] as const) if (outcomes.includes(o)) return o;
  return "accept";
}

function smtpError(code: number, message: string): Error & { responseCode: number } {
  return Object.assign(new Error(message), { responseCode: code });
}

const RCPT_REPLIES: Partial<Record<Outcome, [number, string]>> = {
  tempfail: [451, "4.2.0 Mailbox temporarily unavailable, try again later"],
  reject: [550, "5.1.1 No such user here"],
  policy: [550, "5.7.1 Message rejected by local policy"],
  throttle: [421, "4.7.28 Too many messages to throttled.example, slow down"],
};
const DATA_REPLIES: Partial<Record<Outcome, [number, string]>> = {
  datatemp: [451, "4.3.0 Temporary failure after DATA, try again later"],
  dataperm: [554, "5.6.0 Message refused after DATA"],
};

function listen(server: NetServer | HttpServer): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve((server.address() as AddressInfo).port));
  });
}

export async function startSmtpPeers(): Promise<SmtpPeers> {
  const certs = prepareTestCertificates();
  const tlsFiles = { key: readFileSync(certs.keyPath), cert: readFileSync(certs.certPath) };
  const captured: CapturedMessage[] = [];
  const ports: Record<string, number> = {};
  const closers: Array<() => Promise<void>> = [];

  function smtpPeer(name: string, options: SMTPServerOptions): Promise<number> {
    const server: SMTPServer = new SMTPServer({
      logger: false,
      disableReverseLookup: true,
      hideENHANCEDSTATUSCODES: true, // the replies below carry their own enhanced codes
      closeTimeout: 500,
      authOptional: true,
      authMethods: ["PLAIN", "LOGIN"],
      ...tlsFiles,
      onAuth(auth, _session, callback) {
        if (auth.username === PEER_USER && auth.password === PEER_PASSWORD) return callback(null, { user: auth.username });
        callback(smtpError(535, "5.7.8 Authentication credentials invalid"));
      },
      onRcptTo(address, _session, callback) {
        const reply = RCPT_REPLIES[outcomeOf(address.address)];
        callback(reply ? smtpError(reply[0], reply[1]) : undefined);
      },
      onData(stream, session, callback) {
        const chunks: Buffer[] = [];
        stream.on("data", (c: Buffer) => chunks.push(c));
        stream.on("end", () => {
          if ((stream as { sizeExceeded?: boolean }).sizeExceeded) return callback(smtpError(552, "5.3.4 Message too big"));
          const recipients = session.envelope.rcptTo.map((r) => r.address);
          const outcome = dataOutcome(recipients);
          if (outcome === "hangup") {
            for (const connection of (server as unknown as { connections: Set<{ session: SMTPServerSession; _socket: Socket }> }).connections) {
              if (connection.session === session) connection._socket.destroy();
            }
            return;
          }
          const reply = DATA_REPLIES[outcome];
          if (reply) return callback(smtpError(reply[0], reply[1]));
          const mailFrom = session.envelope.mailFrom;
          captured.push({
            peer: name,
            connectionId: session.id,
            envelopeFrom: mailFrom ? mailFrom.address : "",
            recipients,
            mailParams: mailFrom ? Object.fromEntries(Object.entries((mailFrom as { args?: Record<string, string | true> }).args ?? {}).map(([k, v]) => [k.toUpperCase(), v])) : {},
            ehloName: session.hostNameAppearsAs,
            secure: session.secure,
            user: typeof session.user === "string" ? session.user : null,
            rawBase64: Buffer.concat(chunks).toString("base64"),
          });
          callback(null, "2.6.0 Queued");
        });
      },
      ...options,
    });
    // A client failing its TLS handshake must not take the test process down.
    server.on("error", () => {});
    closers.push(() => new Promise((resolve) => server.close(() => resolve())));
    return listen(server.server).then((port) => (ports[name] = port));
  }

  await Promise.all([
    smtpPeer("plain", { disabledCommands: ["STARTTLS"] }),
    smtpPeer("nostarttls", { disabledCommands: ["STARTTLS"] }),
    smtpPeer("starttls", {}),
    // Offers REQUIRETLS (RFC 8689) once the session is encrypted.
    smtpPeer("requiretls", { hideREQUIRETLS: false }),
    smtpPeer("tls", { secure: true }),
    smtpPeer("auth", { authOptional: false }),
    smtpPeer("authlogin", { authOptional: false, authMethods: ["LOGIN"] }),
    smtpPeer("size", { disabledCommands: ["STARTTLS"], size: 10_000 }),
    scriptedPeer("fragmented", captured, closers, ports),
    scriptedPeer("pipelining", captured, closers, ports),
    scriptedPeer("heloonly", captured, closers, ports),
    silentPeer(closers, ports),
    closedPort(ports),
  ]);

  const control = createHttpServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    if (url.pathname === "/messages" && req.method === "GET") {
      const peer = url.searchParams.get("peer");
      const rcpt = url.searchParams.get("rcpt")?.toLowerCase();
      const list = captured.filter((m) => (!peer || m.peer === peer) && (!rcpt || m.recipients.some((r) => r.toLowerCase() === rcpt)));
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(list));
    } else if (url.pathname === "/messages" && req.method === "DELETE") {
      captured.length = 0;
      res.writeHead(204).end();
    } else {
      res.writeHead(404).end();
    }
  });
  ports.control = await listen(control);
  closers.push(() => new Promise((resolve) => control.close(() => resolve())));

  return {
    ports,
    close: async () => {
      await Promise.all(closers.map((close) => close()));
    },
  };
}

/** Accepts TCP connections and never says a word. */
async function silentPeer(closers: Array<() => Promise<void>>, ports: Record<string, number>): Promise<void> {
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    socket.on("close", () => sockets.delete(socket));
  });
  ports.silent = await listen(server);
  closers.push(() => new Promise((resolve) => {
    for (const s of sockets) s.destroy();
    server.close(() => resolve());
  }));
}

/** A port that was free a moment ago and has no listener: connecting is refused. Taken from
 * 10000-19999, below Linux's ephemeral range (32768-60999) and the end-to-end tests' ports
 * (test/support/processes.ts, 20000-31999): a port the kernel handed out and took back could be
 * handed to another process of the run (it once was: the "refused" connection waited out its
 * timeout instead). */
async function closedPort(ports: Record<string, number>): Promise<void> {
  for (;;) {
    const port = 10_000 + Math.floor(Math.random() * 10_000);
    const server = createNetServer();
    const bound = await new Promise<boolean>((resolve) => {
      server.once("error", () => resolve(false));
      server.listen(port, "127.0.0.1", () => resolve(true));
    });
    if (!bound) continue;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    ports.closed = port;
    return;
  }
}

/**
 * A hand-written plain-text SMTP peer for reply framing smtp-server does not produce:
 * - fragmented: every reply dribbled out a few bytes at a time (multi-line greeting and EHLO
 *   split mid-line across TCP reads);
 * - pipelining: offers PIPELINING and answers a burst of commands with one write, so several
 *   replies arrive in one read;
 * - heloonly: refuses EHLO with 502, accepts HELO.
 */
async function scriptedPeer(
  mode: "fragmented" | "pipelining" | "heloonly",
  captured: CapturedMessage[],
  closers: Array<() => Promise<void>>,
  ports: Record<string, number>,
): Promise<void> {
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.setNoDelay(true);
    socket.on("error", () => {});
    socket.on("close", () => sockets.delete(socket));
    const connectionId = randomUUID();
    let ehloName = "";
    let from: string | undefined;
    let mailParams: Record<string, string | true> = {};
    let rcpts: string[] = [];
    let inData = false;
    let input = Buffer.alloc(0);
    let sending: Promise<void> = Promise.resolve();

    const send = (text: string) => {
      const bytes = Buffer.from(text, "utf8");
      if (mode !== "fragmented") {
        socket.write(bytes);
        return;
      }
      sending = sending.then(async () => {
        for (let i = 0; i < bytes.length; i += 3) {
          if (socket.destroyed) return;
          socket.write(bytes.subarray(i, i + 3));
          await new Promise((r) => setTimeout(r, 2));
        }
      });
    };

    const ehloLines = ["scripted.test greets you", "SIZE 20000000", "8BITMIME", "ENHANCEDSTATUSCODES", ...(mode === "pipelining" ? ["PIPELINING"] : [])];
    const command = (line: string): string => {
      const verb = line.split(" ")[0]!.toUpperCase();
      switch (verb) {
        case "EHLO":
          if (mode === "heloonly") return "502 5.5.1 EHLO not implemented\r\n";
          ehloName = line.slice(5).trim().toLowerCase();
          return ehloLines.map((l, i) => `250${i < ehloLines.length - 1 ? "-" : " "}${l}\r\n`).join("");
        case "HELO":
          ehloName = line.slice(5).trim().toLowerCase();
          return "250 scripted.test\r\n";
        case "MAIL": {
          const m = /^MAIL FROM:<([^>]*)>(.*)$/i.exec(line);
          if (!m) return "501 5.5.4 Syntax error\r\n";
          from = m[1]!;
          mailParams = {};
          for (const p of m[2]!.trim().split(/\s+/).filter(Boolean)) {
            const [k, v] = p.split("=");
            mailParams[k!.toUpperCase()] = v ?? true;
          }
          rcpts = [];
          return "250 2.1.0 Sender OK\r\n";
        }
        case "RCPT": {
          if (from === undefined) return "503 5.5.1 Need MAIL first\r\n";
          const m = /^RCPT TO:<([^>]*)>/i.exec(line);
          if (!m) return "501 5.5.4 Syntax error\r\n";
          const reply = RCPT_REPLIES[outcomeOf(m[1]!)];
          if (reply) return `${reply[0]} ${reply[1]}\r\n`;
          rcpts.push(m[1]!);
          return "250 2.1.5 Recipient OK\r\n";
        }
        case "DATA":
          if (rcpts.length === 0) return "554 5.5.1 No valid recipients\r\n";
          inData = true;
          return "354 End data with <CR><LF>.<CR><LF>\r\n";
        case "RSET":
          from = undefined;
          rcpts = [];
          return "250 2.0.0 OK\r\n";
        case "NOOP":
          return "250 2.0.0 OK\r\n";
        case "QUIT":
          sending.then(() => socket.end());
          return "221 2.0.0 Bye\r\n";
        default:
          return "500 5.5.2 Command not recognized\r\n";
      }
    };

    const finishData = (body: Buffer): string => {
      inData = false;
      // Undo dot-stuffing: a line starting with ".." loses one dot.
      const text = body.toString("latin1").replace(/(^|\r\n)\.\./g, "$1.");
      const outcome = dataOutcome(rcpts);
      const envelope = { from: from ?? "", rcpts };
      from = undefined;
      rcpts = [];
      if (outcome === "hangup") {
        socket.destroy();
        return "";
      }
      const reply = DATA_REPLIES[outcome];
      if (reply) return `${reply[0]} ${reply[1]}\r\n`;
      captured.push({
        peer: mode,
        connectionId,
        envelopeFrom: envelope.from,
        recipients: envelope.rcpts,
        mailParams,
        ehloName,
        secure: false,
        user: null,
        rawBase64: Buffer.from(text, "latin1").toString("base64"),
      });
      return "250 2.6.0 Queued\r\n";
    };

    socket.on("data", (chunk: Buffer) => {
      input = Buffer.concat([input, chunk]);
      let out = "";
      for (;;) {
        if (inData) {
          // The terminator is CRLF.CRLF, or ".CRLF" when the body is empty.
          if (input.subarray(0, 3).toString("latin1") === ".\r\n") {
            input = input.subarray(3);
            out += finishData(Buffer.alloc(0));
            continue;
          }
          const end = input.indexOf("\r\n.\r\n");
          if (end < 0) break;
          const body = input.subarray(0, end + 2);
          input = input.subarray(end + 5);
          out += finishData(body);
          if (socket.destroyed) return;
          continue;
        }
        const lf = input.indexOf("\r\n");
        if (lf < 0) break;
        const line = input.subarray(0, lf).toString("utf8");
        input = input.subarray(lf + 2);
        out += command(line);
      }
      // Everything answered in this read goes back in one write.
      if (out) send(out);
    });

    send(mode === "fragmented" ? "220-scripted.test ESMTP\r\n220-a multi-line greeting\r\n220 ready\r\n" : "220 scripted.test ESMTP ready\r\n");
  });
  ports[mode] = await listen(server);
  closers.push(() => new Promise((resolve) => {
    for (const s of sockets) s.destroy();
    server.close(() => resolve());
  }));
}
