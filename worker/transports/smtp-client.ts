// A small SMTP client over `cloudflare:sockets`: one connection, messages sent one after
// another. It speaks the protocol and reports what the relay said; deciding what a reply
// means for a recipient is the transport's job (smtp.ts). Written here rather than taken
// from worker-mailer, whose protocol core falls back to plain text, hangs on a closed
// socket and cannot send a pre-built (DKIM-signed) message.
import { connect } from "cloudflare:sockets";
import { chunksOf, type MessageChunks } from "./transport.ts";

export type SmtpSecurity = "tls" | "starttls" | "plain";

/** Where in the conversation something went wrong. */
export type SmtpPhase = "connect" | "greeting" | "ehlo" | "starttls" | "auth" | "mail" | "rcpt" | "data" | "message";

export interface SmtpClientOptions {
  host: string;
  port: number;
  /** tls: implicit TLS; starttls: STARTTLS required, never plain; plain: no TLS at all. */
  security: SmtpSecurity;
  /** The name given in EHLO/HELO. */
  heloName: string;
  /** Authenticate only when both are set (AUTH PLAIN, else LOGIN). */
  username?: string;
  password?: string;
  /** Until the TCP (and, for tls, the TLS) connection is open. */
  connectTimeoutMs: number;
  /** Each reply, the greeting included. */
  commandTimeoutMs: number;
  /** Each chunk of the message body, and the relay's reply after the final ".". */
  dataTimeoutMs: number;
}

export interface SmtpReply {
  code: number;
  /** RFC 3463 code from the start of the text ("5.1.1"), when the relay sent one. */
  enhancedCode?: string;
  /** The text of each line, without the code and the enhanced code. */
  lines: string[];
  /** The lines joined by a space. */
  text: string;
}

export interface SmtpCapabilities {
  /** The relay sent SIZE (RFC 1870), so MAIL FROM carries SIZE=. */
  sizeAdvertised: boolean;
  /** The largest message the relay accepts; undefined when it names no limit. */
  maxSize?: number;
  starttls: boolean;
  /** AUTH mechanisms, upper case. */
  auth: string[];
  eightBitMime: boolean;
  smtpUtf8: boolean;
  pipelining: boolean;
  enhancedStatusCodes: boolean;
  /** RFC 8689: the relay will only pass the message on over TLS when MAIL FROM asks. */
  requireTls: boolean;
}

export interface SmtpErrorDetails {
  code?: number;
  enhancedCode?: string;
  /** Defaults to: 4xx or no reply at all -> transient, 5xx -> permanent. */
  transient?: boolean;
  cause?: unknown;
}

/** A failure of the conversation. Its message never contains the password. */
export class SmtpError extends Error {
  readonly phase: SmtpPhase;
  readonly code?: number;
  readonly enhancedCode?: string;
  readonly transient: boolean;

  constructor(phase: SmtpPhase, message: string, details: SmtpErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = "SmtpError";
    this.phase = phase;
    this.code = details.code;
    this.enhancedCode = details.enhancedCode;
    this.transient = details.transient ?? (details.code === undefined || details.code < 500);
  }

  static fromReply(phase: SmtpPhase, what: string, reply: SmtpReply): SmtpError {
    return new SmtpError(phase, `${what}: ${formatReply(reply)}`, { code: reply.code, enhancedCode: reply.enhancedCode });
  }
}

/** The envelope and the finished message (CRLF line endings, not dot-stuffed). */
export interface SmtpMessage {
  from: string;
  recipients: string[];
  /** One buffer, or chunks made as they are read (never joined here). */
  raw: Uint8Array | MessageChunks;
  /** The sending domain enforces TLS: this hop must be encrypted, and REQUIRETLS (RFC 8689)
   * asks the relay to keep every onward hop encrypted when it offers that. */
  requireTls?: boolean;
}

export interface SmtpRecipientOutcome {
  recipient: string;
  /** The relay's reply to RCPT TO, when it was sent and answered. */
  reply?: SmtpReply;
  /** Set when the recipient was refused here, before anything was sent for it. */
  localError?: SmtpError;
}

export interface SmtpSendResult {
  /** One entry per recipient, in the order given. */
  recipients: SmtpRecipientOutcome[];
  /** The reply to MAIL FROM, when there was one. */
  mail?: SmtpReply;
  /** The reply ending the transaction: the one after the final ".", or a refused DATA command. */
  data?: SmtpReply;
  /** Why the transaction stopped short (connection, timeout, a local refusal of the message). */
  error?: SmtpError;
  /** The final "." was (being) written: a failure after this may follow a delivery. */
  dataSent: boolean;
}

const CR = 13;
const LF = 10;
const DOT = 46;
const BODY_CHUNK_BYTES = 64 * 1024;
const MAX_REPLY_BYTES = 64 * 1024;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function formatReply(reply: SmtpReply): string {
  return [String(reply.code), reply.enhancedCode, reply.text].filter(Boolean).join(" ");
}

/** The whole DATA payload in chunks of about chunkBytes: bare CR or LF become CRLF (so no relay
 * can read an early end of data: SMTP smuggling), a line starting with "." gets another, and
 * CRLF.CRLF ends it. The message may come in chunks of any size; one output chunk at a time is
 * made, so stuffing never copies the whole message. `sizeHint`, the message's length when it is
 * known, sizes the buffers for it (a 10 KB message had two 128 KB buffers made and zeroed). */
export async function* dataChunks(raw: Uint8Array | Iterable<Uint8Array> | AsyncIterable<Uint8Array>, chunkBytes = BODY_CHUNK_BYTES, sizeHint?: number): AsyncGenerator<Uint8Array> {
  let lineStart = true;
  let afterCR = false;
  // A slice of input at most doubles (every byte a bare CR or LF); the tail adds at most
  // CR LF + CR LF . CR LF. Two buffers take turns: a chunk stays valid until the one after the
  // next is asked for, which lets the writer send one while the next is made (a new buffer per
  // chunk was twice the message in garbage, which the isolate holds until its next collection).
  const sliceBytes = Math.max(1, Math.min(chunkBytes, sizeHint ?? chunkBytes));
  const buffers = [new Uint8Array(sliceBytes * 2 + 8), new Uint8Array(sliceBytes * 2 + 8)];
  let turn = 0;
  let out = buffers[0]!;
  let n = 0;
  const next = () => {
    out = buffers[(turn = 1 - turn)]!;
    n = 0;
  };
  for await (const source of raw instanceof Uint8Array ? [raw] : raw) {
    for (let start = 0; start < source.length; start += chunkBytes) {
      const slice = source.subarray(start, Math.min(source.length, start + chunkBytes));
      const len = slice.length;
      // Room for this slice's worst case, after what the buffer holds: else the buffer goes
      // first (and a hint that was too small gives way to buffers of the full size).
      if (n + len * 2 + 8 > out.length) {
        if (n > 0) {
          yield out.subarray(0, n);
          next();
        }
        if (len * 2 + 8 > out.length) buffers[turn] = out = new Uint8Array(chunkBytes * 2 + 8);
      }
      // Runs of ordinary bytes are copied whole (the positions of the next CR and LF are kept,
      // so each is searched for once per line, natively): a byte at a time was 12 ns a byte.
      let nextCR = -1;
      let nextLF = -1;
      let i = 0;
      while (i < len) {
        if (afterCR) {
          afterCR = false;
          out[n++] = LF;
          lineStart = true;
          if (slice[i] === LF) {
            i++;
            continue;
          }
        }
        const b = slice[i]!;
        if (b === CR) {
          out[n++] = CR;
          afterCR = true;
          i++;
          continue;
        }
        if (b === LF) {
          out[n++] = CR;
          out[n++] = LF;
          lineStart = true;
          i++;
          continue;
        }
        if (lineStart && b === DOT) out[n++] = DOT;
        lineStart = false;
        if (nextCR < i) nextCR = slice.indexOf(CR, i) >>> 0; // not found: past any index
        if (nextLF < i) nextLF = slice.indexOf(LF, i) >>> 0;
        const end = Math.min(nextCR, nextLF, len);
        out.set(slice.subarray(i, end), n);
        n += end - i;
        i = end;
      }
      if (n >= chunkBytes) {
        yield out.subarray(0, n);
        next();
      }
    }
  }
  // Every slice left 8 bytes of room: the tail (at most 5) fits.
  if (afterCR) {
    out[n++] = LF;
    lineStart = true;
  }
  if (!lineStart) {
    out[n++] = CR;
    out[n++] = LF;
  }
  out[n++] = DOT;
  out[n++] = CR;
  out[n++] = LF;
  yield out.subarray(0, n);
}

async function hasEightBit(raw: Uint8Array | MessageChunks): Promise<boolean> {
  if (!(raw instanceof Uint8Array) && raw.sevenBit) return false;
  for await (const chunk of chunksOf(raw)) for (let i = 0; i < chunk.length; i++) if (chunk[i]! > 0x7f) return true;
  return false;
}

function isAscii(s: string): boolean {
  return /^[\x00-\x7f]*$/.test(s);
}

/** Refuses what would break the command line or the <> brackets (CR, LF, controls, <, >, space). */
function addressProblem(address: string, allowEmpty: boolean): string | undefined {
  if (address === "") return allowEmpty ? undefined : "the address is empty";
  if (/[\x00-\x20\x7f<>]/.test(address)) return "the address contains a space, a control character or < >";
  if (address.length > 998) return "the address is too long";
  return undefined;
}

function base64Utf8(s: string): string {
  let binary = "";
  for (const b of encoder.encode(s)) binary += String.fromCharCode(b);
  return btoa(binary);
}

function describeCause(e: unknown): string {
  if (e instanceof Error) return e.message || e.name;
  return String(e);
}

/** Parses one reply line: "250-text", "250 text" or "250". */
const REPLY_LINE = /^(\d{3})([ -]|$)(.*)$/s;
const ENHANCED_CODE = /^([245])\.(\d{1,3})\.(\d{1,3})(?=\s|$)\s*/;

export function parseCapabilities(lines: string[]): SmtpCapabilities {
  const caps: SmtpCapabilities = {
    sizeAdvertised: false,
    starttls: false,
    auth: [],
    eightBitMime: false,
    smtpUtf8: false,
    pipelining: false,
    enhancedStatusCodes: false,
    requireTls: false,
  };
  // The first line of an EHLO reply is the relay's greeting, not a capability.
  for (const line of lines.slice(1)) {
    const [keyword = "", ...params] = line.trim().split(/[\s=]+/);
    switch (keyword.toUpperCase()) {
      case "SIZE": {
        caps.sizeAdvertised = true;
        const limit = Number(params[0]);
        if (Number.isSafeInteger(limit) && limit > 0) caps.maxSize = limit;
        break;
      }
      case "STARTTLS": caps.starttls = true; break;
      case "AUTH":
        for (const m of params) if (m && !caps.auth.includes(m.toUpperCase())) caps.auth.push(m.toUpperCase());
        break;
      case "8BITMIME": caps.eightBitMime = true; break;
      case "SMTPUTF8": caps.smtpUtf8 = true; break;
      case "PIPELINING": caps.pipelining = true; break;
      case "ENHANCEDSTATUSCODES": caps.enhancedStatusCodes = true; break;
      case "REQUIRETLS": caps.requireTls = true; break;
    }
  }
  return caps;
}

interface Deadline {
  promise: Promise<never>;
  clear(): void;
}

function deadline(ms: number, onTimeout: () => Error): Deadline {
  let timer: ReturnType<typeof setTimeout> | null = null;
  const promise = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms);
  });
  promise.catch(() => {});
  return { promise, clear: () => clearTimeout(timer) };
}

/** One SMTP connection. Open it with `SmtpClient.connect`, send messages one at a time. */
export class SmtpClient {
  private socket!: Socket;
  private reader!: ReadableStreamDefaultReader<Uint8Array>;
  private writer!: WritableStreamDefaultWriter<Uint8Array>;
  private buffer = new Uint8Array(0);
  private broken = false;
  private capabilitiesValue: SmtpCapabilities = parseCapabilities([]);
  private secureValue: boolean;
  private authenticatedValue = false;
  private sentMessages = 0;

  private constructor(private readonly options: SmtpClientOptions) {
    this.secureValue = options.security === "tls";
  }

  /** Connects, reads the greeting, says EHLO, upgrades with STARTTLS and authenticates as
   * configured. Throws an SmtpError when any of it fails; the socket is closed then. */
  static async connect(options: SmtpClientOptions): Promise<SmtpClient> {
    const client = new SmtpClient(options);
    try {
      await client.establish();
      return client;
    } catch (e) {
      client.abort();
      if (e instanceof SmtpError) throw e;
      throw new SmtpError("connect", `could not set up the SMTP session with ${client.where}: ${describeCause(e)}`, { cause: e });
    }
  }

  get capabilities(): SmtpCapabilities {
    return this.capabilitiesValue;
  }
  /** The connection is encrypted (implicit TLS or after STARTTLS). */
  get secure(): boolean {
    return this.secureValue;
  }
  get authenticated(): boolean {
    return this.authenticatedValue;
  }
  /** False once the connection broke, timed out, or was closed. */
  get usable(): boolean {
    return !this.broken;
  }
  /** How many messages this connection has carried to their final reply. */
  get messagesSent(): number {
    return this.sentMessages;
  }

  private get where(): string {
    return `${this.options.host}:${this.options.port}`;
  }

  private async establish(): Promise<void> {
    const { security } = this.options;
    if (!/^[A-Za-z0-9.\-_:[\]]+$/.test(this.options.heloName)) {
      throw new SmtpError("ehlo", "the EHLO name is not a valid host name or address literal", { transient: true });
    }
    let socket: Socket;
    try {
      socket = connect(
        { hostname: this.options.host, port: this.options.port },
        { secureTransport: security === "tls" ? "on" : security === "starttls" ? "starttls" : "off", allowHalfOpen: false },
      );
    } catch (e) {
      throw new SmtpError("connect", `could not connect to ${this.where}: ${describeCause(e)}`, { cause: e });
    }
    this.attach(socket);
    let greeting: SmtpReply;
    try {
      await this.waitOpened(socket, "connect");
      greeting = await this.readReply("greeting", this.options.commandTimeoutMs);
    } catch (e) {
      // workerd reports a failed handshake as a generic connection error: say TLS was involved.
      if (security === "tls" && e instanceof SmtpError && e.code === undefined && !/timed out/.test(e.message)) {
        throw new SmtpError(e.phase, `${e.message} (implicit TLS: the relay may be unreachable, not speak TLS, or present a certificate that is not trusted for ${this.options.host})`, { cause: e });
      }
      throw e;
    }
    if (greeting.code !== 220) throw SmtpError.fromReply("greeting", `${this.where} refused the session`, greeting);

    await this.hello();

    if (security === "starttls") {
      if (!this.capabilitiesValue.starttls) {
        throw new SmtpError("starttls", `${this.where} does not offer STARTTLS, which security "starttls" requires; refusing to continue without TLS`, { transient: true });
      }
      const reply = await this.command("STARTTLS", "starttls");
      if (reply.code !== 220) throw SmtpError.fromReply("starttls", "STARTTLS refused", reply);
      // Anything already received after the 220 was sent in plain text before the handshake
      // and must not be read as coming from the encrypted session (CVE-2011-0411 style).
      if (this.buffer.length > 0) throw new SmtpError("starttls", "the relay sent data after its STARTTLS reply; refusing the session", { transient: true });
      this.reader.releaseLock();
      this.writer.releaseLock();
      let tlsSocket: Socket;
      try {
        tlsSocket = this.socket.startTls();
      } catch (e) {
        throw new SmtpError("starttls", `TLS upgrade failed: ${describeCause(e)}`, { cause: e });
      }
      this.attach(tlsSocket);
      this.secureValue = true;
      try {
        await this.hello();
      } catch (e) {
        // A failed handshake (an untrusted certificate, say) shows up as the first I/O error.
        if (e instanceof SmtpError && e.code === undefined) {
          throw new SmtpError("starttls", `TLS session with ${this.where} failed (is its certificate trusted and valid for ${this.options.host}?): ${e.message}`, { cause: e });
        }
        throw e;
      }
    }

    if (this.options.username !== undefined && this.options.password !== undefined) {
      await this.authenticate(this.options.username, this.options.password);
    }
  }

  private attach(socket: Socket): void {
    this.socket = socket;
    // Settled by the runtime whatever happens; nobody else listens to them.
    socket.opened.catch(() => {});
    socket.closed.catch(() => {});
    this.reader = socket.readable.getReader() as ReadableStreamDefaultReader<Uint8Array>;
    this.writer = socket.writable.getWriter() as WritableStreamDefaultWriter<Uint8Array>;
  }

  private async waitOpened(socket: Socket, phase: SmtpPhase): Promise<void> {
    const timer = deadline(this.options.connectTimeoutMs, () =>
      new SmtpError(phase, `timed out after ${this.options.connectTimeoutMs} ms connecting to ${this.where}`));
    try {
      await Promise.race([socket.opened, timer.promise]);
    } catch (e) {
      if (e instanceof SmtpError) throw e;
      throw new SmtpError(phase, `could not connect to ${this.where}: ${describeCause(e)}`, { cause: e });
    } finally {
      timer.clear();
    }
  }

  /** EHLO, or HELO when the relay refuses EHLO with a 5xx; sets the capabilities. */
  private async hello(): Promise<void> {
    const ehlo = await this.command(`EHLO ${this.options.heloName}`, "ehlo");
    if (ehlo.code === 250) {
      this.capabilitiesValue = parseCapabilities(ehlo.lines);
      return;
    }
    if (ehlo.code >= 500 && ehlo.code < 600) {
      const helo = await this.command(`HELO ${this.options.heloName}`, "ehlo");
      if (helo.code === 250) {
        this.capabilitiesValue = parseCapabilities([]);
        return;
      }
      throw SmtpError.fromReply("ehlo", "HELO refused", helo);
    }
    throw SmtpError.fromReply("ehlo", "EHLO refused", ehlo);
  }

  private async authenticate(username: string, password: string): Promise<void> {
    if (!this.secureValue && this.options.security !== "plain") {
      throw new SmtpError("auth", "refusing to send credentials over an unencrypted connection", { transient: true });
    }
    const offered = this.capabilitiesValue.auth;
    const who = `authentication as "${username}" failed`;
    if (offered.includes("PLAIN")) {
      // The command carries the secret: it is never put into an error or a log.
      const reply = await this.command(`AUTH PLAIN ${base64Utf8(`\0${username}\0${password}`)}`, "auth");
      if (reply.code !== 235) throw SmtpError.fromReply("auth", who, reply);
    } else if (offered.includes("LOGIN")) {
      let reply = await this.command("AUTH LOGIN", "auth");
      if (reply.code !== 334) throw SmtpError.fromReply("auth", who, reply);
      reply = await this.command(base64Utf8(username), "auth");
      if (reply.code !== 334) throw SmtpError.fromReply("auth", who, reply);
      reply = await this.command(base64Utf8(password), "auth");
      if (reply.code !== 235) throw SmtpError.fromReply("auth", who, reply);
    } else if (offered.length === 0) {
      throw new SmtpError("auth", `credentials are configured but ${this.where} does not offer AUTH`, { transient: true });
    } else {
      throw new SmtpError("auth", `${this.where} offers AUTH ${offered.join(" ")}; tern supports PLAIN and LOGIN`, { transient: true });
    }
    this.authenticatedValue = true;
  }

  /** Sends one message. Never throws for an SMTP or connection problem: the result says what
   * happened. After a failed transaction the connection is reset (RSET) for the next one, or
   * marked unusable when it broke. */
  async send(message: SmtpMessage): Promise<SmtpSendResult> {
    const result: SmtpSendResult = {
      recipients: message.recipients.map((recipient) => ({ recipient })),
      dataSent: false,
    };
    if (this.broken) {
      result.error = new SmtpError("mail", `the connection to ${this.where} is closed`);
      return result;
    }
    const caps = this.capabilitiesValue;

    if (message.requireTls && !this.secure) {
      // Deferred, not refused: it is tern's relay configuration that must change, not the mail.
      result.error = new SmtpError("message", `the sending domain enforces TLS and the connection to ${this.where} is not encrypted`, { enhancedCode: "4.7.10", transient: true });
      return result;
    }
    const fromProblem = addressProblem(message.from, true);
    if (fromProblem) {
      result.error = new SmtpError("message", `envelope sender refused: ${fromProblem}`, { enhancedCode: "5.1.7", transient: false });
      return result;
    }
    if (!isAscii(message.from) && !caps.smtpUtf8) {
      result.error = new SmtpError("message", "the envelope sender is not ASCII and the relay does not offer SMTPUTF8", { enhancedCode: "5.6.7", transient: false });
      return result;
    }
    if (caps.maxSize !== undefined && message.raw.length > caps.maxSize) {
      result.error = new SmtpError("message", `the message is ${message.raw.length} bytes; the relay accepts at most ${caps.maxSize} (SIZE)`, { enhancedCode: "5.3.4", transient: false });
      return result;
    }
    for (const outcome of result.recipients) {
      const problem = addressProblem(outcome.recipient, false);
      if (problem) outcome.localError = new SmtpError("rcpt", `recipient refused: ${problem}`, { enhancedCode: "5.1.3", transient: false });
      else if (!isAscii(outcome.recipient) && !caps.smtpUtf8) {
        outcome.localError = new SmtpError("rcpt", "the recipient address is not ASCII and the relay does not offer SMTPUTF8", { enhancedCode: "5.6.7", transient: false });
      }
    }
    const sendable = result.recipients.filter((r) => !r.localError);
    if (sendable.length === 0) return result;

    let mailCommand = `MAIL FROM:<${message.from}>`;
    if (caps.sizeAdvertised) mailCommand += ` SIZE=${message.raw.length}`;
    // Without 8BITMIME on offer the bytes go as they are: refusing would help nobody.
    if (caps.eightBitMime && (await hasEightBit(message.raw))) mailCommand += " BODY=8BITMIME";
    if (caps.smtpUtf8 && (!isAscii(message.from) || sendable.some((r) => !isAscii(r.recipient)))) mailCommand += " SMTPUTF8";
    if (message.requireTls && caps.requireTls) mailCommand += " REQUIRETLS";
    const rcptCommands = sendable.map((r) => `RCPT TO:<${r.recipient}>`);

    let phase: SmtpPhase = "mail";
    try {
      let go: SmtpReply | undefined;
      if (caps.pipelining) {
        // RFC 2920: MAIL, the RCPTs and DATA go in one write (DATA may end a group); the replies
        // come back in order. One round trip per message instead of two.
        await this.write(encoder.encode([mailCommand, ...rcptCommands, "DATA"].join("\r\n") + "\r\n"), "mail", this.options.commandTimeoutMs);
        result.mail = await this.readReply("mail", this.options.commandTimeoutMs);
        phase = "rcpt";
        const replies: SmtpReply[] = [];
        for (let i = 0; i < sendable.length; i++) replies.push(await this.readReply("rcpt", this.options.commandTimeoutMs));
        // After a refused MAIL the RCPT replies only say "no MAIL first": they mean nothing.
        if (isPositive(result.mail)) sendable.forEach((r, i) => (r.reply = replies[i]));
        phase = "data";
        go = await this.readReply("data", this.options.commandTimeoutMs);
        if (go.code === 354 && (!isPositive(result.mail) || !sendable.some((r) => r.reply && isPositive(r.reply)))) {
          // A relay that says 354 with no recipient accepted waits for a message: an empty one
          // ends it (it has nobody to deliver it to), and the transaction is reset below.
          await this.write(encoder.encode(".\r\n"), "data", this.options.commandTimeoutMs);
          this.noteClosing(await this.readReply("data", this.options.commandTimeoutMs));
        }
      } else {
        result.mail = await this.command(mailCommand, "mail");
        if (isPositive(result.mail)) {
          phase = "rcpt";
          for (let i = 0; i < sendable.length; i++) sendable[i]!.reply = await this.command(rcptCommands[i]!, "rcpt");
        }
      }
      if (!isPositive(result.mail) || !sendable.some((r) => r.reply && isPositive(r.reply))) {
        this.noteClosing(result.mail, ...sendable.map((r) => r.reply));
        await this.reset();
        return result;
      }

      phase = "data";
      go ??= await this.command("DATA", "data");
      if (go.code !== 354) {
        result.data = go;
        this.noteClosing(go);
        await this.reset();
        return result;
      }
      // A chunk is written once the one after it is made (dataChunks' two buffers allow that):
      // only then is it known whether it holds the final ".", after which a failure may follow
      // a delivery. If making a chunk fails (an attachment could not be read), the connection
      // is dropped without the final ".": the relay discards what it got.
      const chunks = dataChunks(chunksOf(message.raw), BODY_CHUNK_BYTES, message.raw.length);
      try {
        let pending = await chunks.next();
        while (!pending.done) {
          const next = await chunks.next();
          if (next.done) result.dataSent = true;
          await this.write(pending.value, "data", this.options.dataTimeoutMs);
          pending = next;
        }
      } finally {
        // A write that failed leaves the message half read: its attachments' R2 reads are closed.
        await chunks.return(undefined).catch(() => {});
      }
      result.data = await this.readReply("data", this.options.dataTimeoutMs);
      this.sentMessages++;
      this.noteClosing(result.data);
      if (!isPositive(result.data)) await this.reset();
    } catch (e) {
      result.error = e instanceof SmtpError ? e : new SmtpError(phase, describeCause(e), { cause: e });
      this.abort();
    }
    return result;
  }

  /** A 421 means the relay is closing the connection: do not reuse it. */
  private noteClosing(...replies: Array<SmtpReply | undefined>): void {
    if (replies.some((r) => r?.code === 421)) this.abort();
  }

  /** RSET after a failed transaction; a connection that cannot be reset is not reused. */
  private async reset(): Promise<void> {
    if (this.broken) return;
    try {
      const reply = await this.command("RSET", "mail");
      if (reply.code !== 250) this.abort();
    } catch {
      this.abort();
    }
  }

  /** QUIT and close. Never throws. */
  async quit(): Promise<void> {
    if (!this.broken) {
      try {
        await this.command("QUIT", "mail");
      } catch {
        // The relay may hang up first; the socket is closed below either way.
      }
    }
    this.abort();
  }

  /** Closes the socket at once; the connection is unusable afterwards. */
  abort(): void {
    this.broken = true;
    try {
      this.socket?.close().catch(() => {});
    } catch {
      // Already closed.
    }
  }

  private async command(line: string, phase: SmtpPhase): Promise<SmtpReply> {
    if (/[\r\n]/.test(line)) throw new Error("an SMTP command line cannot contain CR or LF");
    await this.write(encoder.encode(line + "\r\n"), phase, this.options.commandTimeoutMs);
    return this.readReply(phase, this.options.commandTimeoutMs);
  }

  private async write(bytes: Uint8Array, phase: SmtpPhase, timeoutMs: number): Promise<void> {
    if (this.broken) throw new SmtpError(phase, `the connection to ${this.where} is closed`);
    const timer = deadline(timeoutMs, () => new SmtpError(phase, `timed out after ${timeoutMs} ms sending to ${this.where}`));
    try {
      const written = this.writer.write(bytes);
      written.catch(() => {});
      await Promise.race([written, timer.promise]);
    } catch (e) {
      this.abort();
      if (e instanceof SmtpError) throw e;
      throw new SmtpError(phase, `the connection to ${this.where} failed while sending: ${describeCause(e)}`, { cause: e });
    } finally {
      timer.clear();
    }
  }

  /** Reads one whole reply: from what is buffered, reading more as needed, until the deadline.
   * Ends when the socket closes or errors; a timeout closes the connection. */
  private async readReply(phase: SmtpPhase, timeoutMs: number): Promise<SmtpReply> {
    const timer = deadline(timeoutMs, () => new SmtpError(phase, `timed out after ${timeoutMs} ms waiting for ${this.where} to reply`));
    try {
      for (;;) {
        const reply = this.takeReply(phase);
        if (reply) return reply;
        if (this.broken) throw new SmtpError(phase, `the connection to ${this.where} is closed`);
        const read = this.readChunk(phase);
        read.catch(() => {});
        const chunk = await Promise.race([read, timer.promise]);
        const merged = new Uint8Array(this.buffer.length + chunk.length);
        merged.set(this.buffer);
        merged.set(chunk, this.buffer.length);
        this.buffer = merged;
      }
    } catch (e) {
      this.abort();
      throw e;
    } finally {
      timer.clear();
    }
  }

  private async readChunk(phase: SmtpPhase): Promise<Uint8Array> {
    let result: ReadableStreamReadResult<Uint8Array>;
    try {
      result = await this.reader.read();
    } catch (e) {
      throw new SmtpError(phase, `the connection to ${this.where} failed: ${describeCause(e)}`, { cause: e });
    }
    if (result.done) throw new SmtpError(phase, `${this.where} closed the connection`);
    return result.value;
  }

  /** Removes and returns the first complete reply in the buffer, if there is one. */
  private takeReply(phase: SmtpPhase): SmtpReply | undefined {
    const lines: string[] = [];
    let code = 0;
    let pos = 0;
    for (;;) {
      const lf = this.buffer.indexOf(LF, pos);
      if (lf < 0) {
        if (this.buffer.length > MAX_REPLY_BYTES) throw new SmtpError(phase, `${this.where} sent a reply longer than ${MAX_REPLY_BYTES} bytes`);
        return undefined;
      }
      const end = lf > pos && this.buffer[lf - 1] === CR ? lf - 1 : lf;
      const line = decoder.decode(this.buffer.subarray(pos, end));
      pos = lf + 1;
      const m = REPLY_LINE.exec(line);
      if (!m) throw new SmtpError(phase, `${this.where} sent a malformed reply: ${JSON.stringify(line.slice(0, 200))}`);
      code = Number(m[1]);
      lines.push(m[3] ?? "");
      if (m[2] !== "-") break;
    }
    this.buffer = this.buffer.slice(pos);
    return makeReply(code, lines);
  }
}

function isPositive(reply: SmtpReply | undefined): boolean {
  return reply !== undefined && reply.code >= 200 && reply.code < 300;
}

/** Builds a reply, taking the enhanced code from the first line when its class matches the code's. */
export function makeReply(code: number, rawLines: string[]): SmtpReply {
  const first = ENHANCED_CODE.exec(rawLines[0] ?? "");
  const enhancedCode = first && first[1] === String(code)[0] ? `${first[1]}.${first[2]}.${first[3]}` : undefined;
  const lines = enhancedCode
    ? rawLines.map((l) => {
        const m = ENHANCED_CODE.exec(l);
        return m && `${m[1]}.${m[2]}.${m[3]}` === enhancedCode ? l.slice(m[0].length) : l;
      })
    : rawLines;
  const reply: SmtpReply = { code, lines, text: lines.join(" ").trim() };
  if (enhancedCode) reply.enhancedCode = enhancedCode;
  return reply;
}
