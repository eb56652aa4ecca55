// The bridge's settings, read from the environment once at start. Every value has a default
// fit for production except the API's address and the certificate files; a bad value stops
// the start with a message naming the variable.
import { hostname } from "node:os";

export type TlsMode = "implicit" | "starttls";

export interface PortSetting {
  port: number;
  tls: TlsMode;
  /** Written `465?`: when the port cannot be bound (privileged, in use), it is skipped. */
  optional: boolean;
}

export interface BridgeConfig {
  /** Base URL of tern's API (the Worker), e.g. https://api.example.com. */
  apiUrl: string;
  /** Interface the SMTP ports listen on. */
  host: string;
  ports: PortSetting[];
  /** The name in the greeting and EHLO answer; also the certificate's name. */
  hostname: string;
  certFile: string;
  keyFile: string;
  /** How often the certificate files are checked for a change. */
  certCheckMs: number;
  /** The health endpoint; port null turns it off. */
  healthHost: string;
  healthPort: number | null;
  /** Advertised with SIZE and enforced. */
  maxMessageBytes: number;
  maxConnections: number;
  maxConnectionsPerIp: number;
  maxRecipients: number;
  /** Messages read and submitted at once (a small one only while it is read): the other
   * sessions wait for their turn at their first RCPT, before they may send DATA, so memory stays
   * bounded however many sessions send at the same moment. */
  maxSubmissions: number;
  /** Slots one account may hold at once, whichever of its keys its sessions use (tern names a
   * key's account when the key is checked), so one tenant cannot take them all; its other
   * sessions wait while other accounts' sessions go ahead. */
  maxSubmissionsPerAccount: number;
  /** How long a session may hold a slot without starting DATA: then it is told 421 and closed. */
  submissionHoldMs: number;
  /** How long a connection may go without logging in (TLS handshake included), busy or idle:
   * then it is told 421 and closed. Far shorter than socketTimeoutMs, so connections that never
   * log in cannot fill the bridge. */
  loginTimeoutMs: number;
  /** Idle time allowed between commands (and between chunks of DATA). */
  socketTimeoutMs: number;
  /** The whole submission to the API, body upload included. */
  apiTimeoutMs: number;
  /** How long a key's verdict is trusted before the API is asked again. */
  authCacheMs: number;
  /** A wrong password is answered only after this delay (doubled for each recent failure). */
  authFailureDelayMs: number;
  authFailureDelayMaxMs: number;
  /** After this many failed logins within the window, the address is refused for the rest of it. */
  authMaxFailures: number;
  authFailureWindowMs: number;
  /** On a 429 rate_limit_exceeded the bridge waits retry-after and tries again, for up to this long in all. */
  rateLimitWaitMs: number;
  /** Where a message's content waits for the API's answer when it does not stay in memory (spool.ts). */
  spoolDir: string | undefined;
  /** What one message may hold in memory, and all messages together. */
  spoolThresholdBytes: number;
  spoolMemoryBytes: number;
  /** On SIGTERM: how long sessions in flight may take to finish. */
  shutdownGraceMs: number;
  logLevel: "debug" | "info" | "warn" | "error";
}

export class ConfigError extends Error {}

export const MB = 1024 * 1024;

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) throw new ConfigError(`${name} must be an integer from ${min} to ${max}, not ${JSON.stringify(raw)}.`);
  return n;
}

/** "465?, 2465" -> ports; "" or "off" -> none. */
export function parsePorts(name: string, raw: string, tls: TlsMode): PortSetting[] {
  if (raw.trim() === "" || raw.trim().toLowerCase() === "off") return [];
  return raw.split(",").map((item) => {
    const m = item.trim().match(/^(\d{1,5})(\?)?$/);
    const port = Number(m?.[1]);
    if (!m || port < 1 || port > 65535) throw new ConfigError(`${name} must list ports like "465,2465" (a trailing ? makes a port optional), not ${JSON.stringify(raw)}.`);
    return { port, tls, optional: m[2] === "?" };
  });
}

export function configFromEnv(env: Env): BridgeConfig {
  const apiUrl = (env.TERN_API_URL ?? "").trim().replace(/\/+$/, "");
  if (!/^https?:\/\/[^/]+/.test(apiUrl)) throw new ConfigError("TERN_API_URL must be the http(s) URL of tern's API, e.g. https://api.example.com.");
  const ports = [
    ...parsePorts("TERN_BRIDGE_TLS_PORTS", env.TERN_BRIDGE_TLS_PORTS ?? "465,2465", "implicit"),
    ...parsePorts("TERN_BRIDGE_STARTTLS_PORTS", env.TERN_BRIDGE_STARTTLS_PORTS ?? "25,587,2587", "starttls"),
  ];
  const seen = new Set<number>();
  for (const p of ports) {
    if (seen.has(p.port)) throw new ConfigError(`Port ${p.port} is listed twice in TERN_BRIDGE_TLS_PORTS / TERN_BRIDGE_STARTTLS_PORTS.`);
    seen.add(p.port);
  }
  if (ports.length === 0) throw new ConfigError("Every SMTP port is turned off: set TERN_BRIDGE_TLS_PORTS or TERN_BRIDGE_STARTTLS_PORTS.");
  const certFile = env.TERN_BRIDGE_CERT_FILE ?? "";
  const keyFile = env.TERN_BRIDGE_KEY_FILE ?? "";
  if (!certFile || !keyFile) throw new ConfigError("TERN_BRIDGE_CERT_FILE and TERN_BRIDGE_KEY_FILE must name the PEM certificate (with its chain) and private key.");
  const healthRaw = (env.TERN_BRIDGE_HEALTH_PORT ?? "2580").trim().toLowerCase();
  const logLevel = (env.TERN_BRIDGE_LOG_LEVEL ?? "info").toLowerCase();
  if (!["debug", "info", "warn", "error"].includes(logLevel)) throw new ConfigError("TERN_BRIDGE_LOG_LEVEL must be debug, info, warn or error.");
  const name = (env.TERN_BRIDGE_HOSTNAME ?? hostname()).trim().toLowerCase();
  if (!/^[a-z0-9.-]{1,253}$/.test(name)) throw new ConfigError(`TERN_BRIDGE_HOSTNAME must be a host name, not ${JSON.stringify(name)}.`);
  const maxSubmissions = int(env, "TERN_BRIDGE_MAX_SUBMISSIONS", 32, 1);
  return {
    apiUrl,
    host: env.TERN_BRIDGE_HOST ?? "0.0.0.0",
    ports,
    hostname: name,
    certFile,
    keyFile,
    certCheckMs: int(env, "TERN_BRIDGE_CERT_CHECK_MS", 30_000, 50),
    healthHost: env.TERN_BRIDGE_HEALTH_HOST ?? "127.0.0.1",
    healthPort: healthRaw === "" || healthRaw === "off" ? null : int(env, "TERN_BRIDGE_HEALTH_PORT", 2580, 0, 65535),
    maxMessageBytes: int(env, "TERN_BRIDGE_MAX_MESSAGE_BYTES", 40 * MB, 1024, 40 * MB),
    maxConnections: int(env, "TERN_BRIDGE_MAX_CONNECTIONS", 1000, 1),
    maxConnectionsPerIp: int(env, "TERN_BRIDGE_MAX_CONNECTIONS_PER_IP", 50, 1),
    maxRecipients: int(env, "TERN_BRIDGE_MAX_RECIPIENTS", 150, 1, 150),
    maxSubmissions,
    maxSubmissionsPerAccount: int(env, "TERN_BRIDGE_MAX_SUBMISSIONS_PER_ACCOUNT", Math.max(1, Math.floor(maxSubmissions / 4)), 1, maxSubmissions),
    submissionHoldMs: int(env, "TERN_BRIDGE_SUBMISSION_HOLD_MS", 30_000, 100),
    loginTimeoutMs: int(env, "TERN_BRIDGE_LOGIN_TIMEOUT_MS", 20_000, 100),
    socketTimeoutMs: int(env, "TERN_BRIDGE_SOCKET_TIMEOUT_MS", 120_000, 1000),
    apiTimeoutMs: int(env, "TERN_BRIDGE_API_TIMEOUT_MS", 120_000, 1000),
    authCacheMs: int(env, "TERN_BRIDGE_AUTH_CACHE_MS", 5_000, 0, 60_000),
    authFailureDelayMs: int(env, "TERN_BRIDGE_AUTH_FAILURE_DELAY_MS", 1_000, 0),
    authFailureDelayMaxMs: int(env, "TERN_BRIDGE_AUTH_FAILURE_DELAY_MAX_MS", 8_000, 0),
    authMaxFailures: int(env, "TERN_BRIDGE_AUTH_MAX_FAILURES", 10, 1),
    authFailureWindowMs: int(env, "TERN_BRIDGE_AUTH_FAILURE_WINDOW_MS", 15 * 60_000, 1000),
    rateLimitWaitMs: int(env, "TERN_BRIDGE_RATE_LIMIT_WAIT_MS", 10_000, 0),
    spoolDir: env.TERN_BRIDGE_SPOOL_DIR || undefined,
    spoolThresholdBytes: int(env, "TERN_BRIDGE_SPOOL_THRESHOLD_BYTES", 256 * 1024, 0, 40 * MB),
    spoolMemoryBytes: int(env, "TERN_BRIDGE_SPOOL_MEMORY_BYTES", 16 * MB, 0),
    shutdownGraceMs: int(env, "TERN_BRIDGE_SHUTDOWN_GRACE_MS", 30_000, 0),
    logLevel: logLevel as BridgeConfig["logLevel"],
  };
}
