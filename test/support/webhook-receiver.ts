// A webhook receiver for tests: an HTTP server on loopback that records every delivery
// (headers, body, time), verifies each with the two libraries receivers use (svix, reading
// the svix-* headers, and standardwebhooks, reading the webhook-* headers) against the
// secrets it is given, and answers as a test scripts it per path: fail a few times then
// succeed, answer slowly, hang, drop the connection, or be down altogether.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { Webhook as StandardWebhook } from "standardwebhooks";
import { Webhook as SvixWebhook } from "svix";

/** How the receiver answers one delivery. */
export type Answer =
  /** An HTTP answer, after `delayMs` if given. */
  | { status: number; body?: string; delayMs?: number }
  /** Never answers; the connection stays open until the sender gives up or the receiver closes. */
  | { hang: true }
  /** Drops the connection without answering. */
  | { reset: true };

export interface Verification {
  secret: string;
  /** null when the library accepted the delivery, else its error message. */
  svix: string | null;
  standardwebhooks: string | null;
}

export interface Delivery {
  path: string;
  method: string;
  /** Lower-cased names; repeated headers joined with ", ". */
  headers: Record<string, string>;
  body: string;
  /** Unix ms when the whole body had arrived. */
  receivedAt: number;
  answer: Answer;
  /** One per secret the receiver held for this path. */
  verifications: Verification[];
  /** Some secret is accepted by both libraries. */
  verified: boolean;
  /** Signed timestamp minus the receiver's clock, in seconds; null without a timestamp header. */
  timestampSkewSeconds: number | null;
}

export interface ReceiverOptions {
  /** Secrets for every path without its own (setSecrets). */
  secrets?: string[];
  /**
   * "real": the libraries check the signed timestamp against this machine's clock (5 minutes
   * either way), as a real receiver does. "signature-only": they check it against itself, so a
   * test that drives tern's clock can still verify signatures; the skew is recorded instead.
   */
  timestamps?: "real" | "signature-only";
}

export interface WebhookReceiver {
  port: number;
  /** The loopback URL of a path ("/hooks/a"). */
  url(path?: string): string;
  /** Deliveries so far, of one path or all, in arrival order. */
  deliveries(path?: string): Delivery[];
  /** The answers for the next deliveries to `path`, in order; afterwards `then` (by default 200). */
  script(path: string, answers: Answer[], then?: Answer): void;
  setSecrets(secrets: string[], path?: string): void;
  /** Resolves once `count` deliveries (to `path`, if given) have arrived; rejects after `timeoutMs`. */
  waitForDeliveries(count: number, options?: { path?: string; timeoutMs?: number }): Promise<Delivery[]>;
  /** Stops listening: connections are refused until up(). Open connections are dropped. */
  down(): Promise<void>;
  /** Listens again on the same port. */
  up(): Promise<void>;
  /** Forgets deliveries and scripts (secrets stay). */
  reset(): void;
  close(): Promise<void>;
}

const OK: Answer = { status: 200, body: '{"ok":true}' };

export async function startWebhookReceiver(options: ReceiverOptions = {}): Promise<WebhookReceiver> {
  const host = "127.0.0.1";
  const mode = options.timestamps ?? "real";
  let defaultSecrets = [...(options.secrets ?? [])];
  const pathSecrets = new Map<string, string[]>();
  const scripts = new Map<string, { queue: Answer[]; then: Answer }>();
  let received: Delivery[] = [];
  const sockets = new Set<Socket>();
  const hanging = new Set<ServerResponse>();

  const nextAnswer = (path: string): Answer => {
    const script = scripts.get(path);
    if (!script) return OK;
    return script.queue.shift() ?? script.then;
  };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("error", () => {});
    req.on("end", () => {
      const path = new URL(req.url ?? "/", `http://${host}`).pathname;
      const body = Buffer.concat(chunks).toString("utf8");
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(", ") : value;
      }
      const answer = nextAnswer(path);
      const secrets = pathSecrets.get(path) ?? defaultSecrets;
      const verifications = secrets.map((secret) => verify(secret, body, headers, mode));
      const signed = Number(headers["webhook-timestamp"] ?? headers["svix-timestamp"]);
      received.push({
        path,
        method: req.method ?? "",
        headers,
        body,
        receivedAt: Date.now(),
        answer,
        verifications,
        verified: verifications.some((v) => v.svix === null && v.standardwebhooks === null),
        timestampSkewSeconds: Number.isFinite(signed) ? signed - Math.floor(Date.now() / 1000) : null,
      });
      respond(answer, req, res);
    });
  });

  const respond = (answer: Answer, req: IncomingMessage, res: ServerResponse) => {
    if ("reset" in answer) {
      req.socket.destroy();
      return;
    }
    if ("hang" in answer) {
      hanging.add(res);
      res.on("close", () => hanging.delete(res));
      return;
    }
    const send = () => {
      if (res.destroyed) return;
      res.writeHead(answer.status, { "content-type": "application/json" });
      res.end(answer.body ?? "");
    };
    if (answer.delayMs) setTimeout(send, answer.delayMs);
    else send();
  };

  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  server.on("error", () => {});
  server.on("clientError", (_err, socket) => socket.destroy());

  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, host, () => {
        server.off("error", reject);
        resolve();
      });
    });
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const res of hanging) res.destroy();
      for (const socket of sockets) socket.destroy();
      if (!server.listening) return resolve();
      server.close(() => resolve());
    });

  await listen(0);
  const port = (server.address() as AddressInfo).port;

  return {
    port,
    url: (path = "/") => `http://${host}:${port}${path.startsWith("/") ? path : `/${path}`}`,
    deliveries: (path) => received.filter((d) => path === undefined || d.path === path),
    script(path, answers, then = OK) {
      scripts.set(path, { queue: [...answers], then });
    },
    setSecrets(secrets, path) {
      if (path === undefined) defaultSecrets = [...secrets];
      else pathSecrets.set(path, [...secrets]);
    },
    async waitForDeliveries(count, { path, timeoutMs = 10_000 } = {}) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = received.filter((d) => path === undefined || d.path === path);
        if (found.length >= count) return found;
        if (Date.now() > deadline) {
          throw new Error(`webhook receiver: ${found.length} of ${count} deliveries${path ? ` to ${path}` : ""} after ${timeoutMs} ms`);
        }
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    down: stop,
    up: () => listen(port),
    reset() {
      received = [];
      scripts.clear();
    },
    close: stop,
  };
}

/** Both libraries, each given only the header names it is documented to read. */
function verify(secret: string, body: string, headers: Record<string, string>, mode: "real" | "signature-only"): Verification {
  const pick = (prefix: string) => ({
    [`${prefix}-id`]: headers[`${prefix}-id`] ?? "",
    [`${prefix}-timestamp`]: headers[`${prefix}-timestamp`] ?? "",
    [`${prefix}-signature`]: headers[`${prefix}-signature`] ?? "",
  });
  const attempt = (check: () => void, timestamp: string | undefined): string | null => {
    try {
      if (mode === "signature-only") atClock(timestamp, check);
      else check();
      return null;
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    }
  };
  return {
    secret,
    svix: attempt(() => new SvixWebhook(secret).verify(body, pick("svix")), headers["svix-timestamp"]),
    standardwebhooks: attempt(() => new StandardWebhook(secret).verify(body, pick("webhook")), headers["webhook-timestamp"]),
  };
}

/** Runs a synchronous check with Date.now() reading the signed timestamp: the libraries have no clock option. */
function atClock(timestamp: string | undefined, check: () => void): void {
  const seconds = Number(timestamp);
  if (!Number.isFinite(seconds)) return check();
  const realNow = Date.now;
  Date.now = () => seconds * 1000;
  try {
    check();
  } finally {
    Date.now = realNow;
  }
}
