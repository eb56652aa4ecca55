// The `smtp` transport: delivery to a relay (any SMTP provider or your own MTA) through
// tern's SMTP client. It turns the relay's replies into per-recipient outcomes, and keeps
// mail whenever the fault is the connection's or the configuration's (deferred, not lost).
import { SmtpClient, SmtpError, formatReply, type SmtpReply, type SmtpSendResult } from "./smtp-client.ts";
import type { OutboundMessage, RecipientResult, Transport, TransportSession } from "./transport.ts";

export interface SmtpRelayConfig {
  host: string;
  port: number;
  security: "tls" | "starttls" | "plain";
  username?: string;
  password?: string;
  heloName: string;
  connectTimeoutMs: number;
  commandTimeoutMs: number;
  dataTimeoutMs: number;
}

export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
export const DEFAULT_COMMAND_TIMEOUT_MS = 30_000;
export const DEFAULT_DATA_TIMEOUT_MS = 120_000;

const SCHEMES: Record<string, { security: SmtpRelayConfig["security"]; defaultPort?: number }> = {
  "smtps:": { security: "tls", defaultPort: 465 },
  "smtp:": { security: "starttls", defaultPort: 587 },
  "smtp+plain:": { security: "plain" },
};

function decodeCredential(value: string, what: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    throw new Error(`relay URL: the ${what} is not valid percent-encoding`);
  }
}

/** smtps://[user:pass@]host[:465], smtp://[user:pass@]host[:587] (STARTTLS required),
 * smtp+plain://host:port (no TLS). user/pass are URL-decoded. Anything else throws an Error
 * naming the problem; the message never contains the password. */
export function parseRelayUrl(url: string, heloName: string): SmtpRelayConfig {
  let parsed: URL;
  try {
    parsed = new URL(url.trim());
  } catch {
    throw new Error("relay URL: not a valid URL (expected smtps://host:465, smtp://host:587 or smtp+plain://host:port)");
  }
  const scheme = SCHEMES[parsed.protocol];
  if (!scheme) {
    throw new Error(`relay URL: unsupported scheme "${parsed.protocol.replace(/:$/, "")}" (use smtps, smtp or smtp+plain)`);
  }
  const host = parsed.hostname.replace(/^\[(.*)\]$/, "$1");
  if (!host) throw new Error("relay URL: the host is missing");
  if ((parsed.pathname !== "" && parsed.pathname !== "/") || parsed.search || parsed.hash) {
    throw new Error("relay URL: a path, query or fragment is not allowed");
  }
  let port: number;
  if (parsed.port) {
    port = Number(parsed.port);
  } else if (scheme.defaultPort) {
    port = scheme.defaultPort;
  } else {
    throw new Error("relay URL: smtp+plain needs an explicit port (smtp+plain://host:port)");
  }
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error("relay URL: the port must be between 1 and 65535");
  if (parsed.password && !parsed.username) throw new Error("relay URL: a password is given without a user name");
  if (parsed.username && !parsed.password) throw new Error("relay URL: a user name is given without a password");
  if (!/^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$|^\[[0-9A-Fa-f:.]+\]$|^\[IPv6:[0-9A-Fa-f:.]+\]$/.test(heloName)) {
    throw new Error(`EHLO name "${heloName}" is not a valid host name or address literal`);
  }
  const config: SmtpRelayConfig = {
    host,
    port,
    security: scheme.security,
    heloName,
    connectTimeoutMs: DEFAULT_CONNECT_TIMEOUT_MS,
    commandTimeoutMs: DEFAULT_COMMAND_TIMEOUT_MS,
    dataTimeoutMs: DEFAULT_DATA_TIMEOUT_MS,
  };
  if (parsed.username) {
    config.username = decodeCredential(parsed.username, "user name");
    config.password = decodeCredential(parsed.password, "password");
  }
  return config;
}

export function createSmtpTransport(config: SmtpRelayConfig): Transport {
  return {
    // Connecting waits for the first deliver(), so opening a session never fails.
    open: async () => new SmtpSession(config),
  };
}

/** One SMTP connection carried across messages (and, in the region's sender, across queue
 * batches), reopened when it broke. If setting a connection up fails (refused, TLS, auth), the
 * rest of the session's messages are deferred at once with the same reason instead of waiting
 * out another connect each, and the pool holds the region off (delivery/session-pool.ts). */
class SmtpSession implements TransportSession {
  private client: SmtpClient | undefined;
  private failedSetup: string | undefined;
  private closed = false;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly config: SmtpRelayConfig) {}

  async deliver(message: OutboundMessage): Promise<RecipientResult[]> {
    if (this.closed) throw new Error("deliver() called on a closed SMTP session");
    // One connection carries one conversation: overlapping calls wait their turn.
    const turn = this.queue.then(() => this.deliverNow(message));
    this.queue = turn.catch(() => {});
    return turn;
  }

  private async deliverNow(message: OutboundMessage): Promise<RecipientResult[]> {
    if (message.recipients.length === 0) return [];
    const reused = this.client?.usable === true && this.client.messagesSent > 0;
    const client = await this.connection();
    if (!client) return deferAll(message.recipients, this.failedSetup ?? "could not connect to the relay");
    const smtpMessage = { from: message.envelopeFrom, recipients: message.recipients, raw: message.raw, requireTls: message.requireTls };
    let result = await client.send(smtpMessage);
    // A relay may drop an idle connection between two messages; nothing of this message went
    // through, so one fresh connection is tried before giving up on it.
    if (reused && brokeBeforeMail(result)) {
      const fresh = await this.connection();
      if (!fresh) return deferAll(message.recipients, this.failedSetup ?? "could not reconnect to the relay");
      result = await fresh.send(smtpMessage);
    }
    return toRecipientResults(result);
  }

  setupFailure(): string | undefined {
    return this.failedSetup;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.queue;
    const client = this.client;
    this.client = undefined;
    await client?.quit();
  }

  private async connection(): Promise<SmtpClient | undefined> {
    if (this.client?.usable) return this.client;
    this.client = undefined;
    if (this.failedSetup) return undefined;
    try {
      this.client = await SmtpClient.connect(this.config);
      return this.client;
    } catch (e) {
      this.failedSetup = describeSetupFailure(e);
      return undefined;
    }
  }
}

function brokeBeforeMail(result: SmtpSendResult): boolean {
  return result.error !== undefined && result.error.phase === "mail" && result.mail === undefined && result.error.code === undefined;
}

function describeSetupFailure(e: unknown): string {
  if (!(e instanceof SmtpError)) return `could not set up the SMTP session: ${e instanceof Error ? e.message : String(e)}`;
  switch (e.phase) {
    case "auth": return `relay authentication failed (check the relay credentials): ${e.message}`;
    case "starttls": return `relay TLS failed: ${e.message}`;
    default: return `relay connection failed (${e.phase}): ${e.message}`;
  }
}

function deferAll(recipients: string[], message: string): RecipientResult[] {
  return recipients.map((recipient) => ({ recipient, status: "deferred", message }));
}

function fromReply(recipient: string, status: RecipientResult["status"], reply: SmtpReply): RecipientResult {
  const result: RecipientResult = { recipient, status, code: reply.code, message: reply.text || formatReply(reply) };
  if (reply.enhancedCode) result.enhancedCode = reply.enhancedCode;
  return result;
}

/** 4xx: try again later; 5xx: permanent. */
function statusOf(reply: SmtpReply): RecipientResult["status"] | undefined {
  if (reply.code >= 200 && reply.code < 300) return "accepted";
  if (reply.code >= 500 && reply.code < 600) return "rejected";
  if (reply.code >= 400 && reply.code < 500) return "deferred";
  return undefined;
}

/** Replies to MAIL FROM that are about tern's own setup (authentication or TLS required), not the
 * message: deferred so the mail waits for the operator to fix the relay configuration. */
function isConfigurationReply(reply: SmtpReply): boolean {
  return reply.code === 530 || reply.code === 538 || reply.enhancedCode === "5.7.0";
}

function interrupted(result: SmtpSendResult): string {
  const error = result.error;
  if (!error) return "the transaction ended without a reply";
  if (result.dataSent) {
    // The one window where a retry may duplicate: the whole message and its final "." were
    // sent, and the connection broke (or timed out) before the relay's reply. The relay may
    // have taken the message; deferring risks a duplicate, rejecting would lose mail.
    return `the connection ended after the message was sent, before the relay replied (it may have been delivered): ${error.message}`;
  }
  return error.message;
}

export function toRecipientResults(result: SmtpSendResult): RecipientResult[] {
  return result.recipients.map((outcome): RecipientResult => {
    const { recipient } = outcome;
    if (outcome.localError) {
      return { recipient, status: "rejected", enhancedCode: outcome.localError.enhancedCode, message: outcome.localError.message };
    }
    if (result.error?.phase === "message") {
      return { recipient, status: result.error.transient ? "deferred" : "rejected", enhancedCode: result.error.enhancedCode, message: result.error.message };
    }
    if (result.mail && statusOf(result.mail) !== "accepted") {
      const status = statusOf(result.mail) === "rejected" && !isConfigurationReply(result.mail) ? "rejected" : "deferred";
      return fromReply(recipient, status, result.mail);
    }
    const rcpt = outcome.reply;
    if (!rcpt) return { recipient, status: "deferred", message: interrupted(result) };
    const rcptStatus = statusOf(rcpt);
    if (rcptStatus !== "accepted") return fromReply(recipient, rcptStatus ?? "deferred", rcpt);
    if (!result.data) return { recipient, status: "deferred", message: interrupted(result) };
    return fromReply(recipient, statusOf(result.data) ?? "deferred", result.data);
  });
}
