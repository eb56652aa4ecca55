// The bridge's only way out: tern's REST API, over keep-alive HTTP(S). A submission is
// `POST /emails` with the client's key, its body written in pieces with backpressure; a key is
// checked with `GET /api-keys?limit=1`, the cheapest authenticated route, whose answer
// tells a good key (full or sending access) from a bad one. Network failures become outcomes,
// never exceptions.
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { ApiOutcome } from "./replies.ts";
import type { RequestBody } from "./submission.ts";

const MAX_ANSWER_BYTES = 64 * 1024;
const USER_AGENT = "tern-smtp-bridge/1";

export interface ApiClientOptions {
  baseUrl: string;
  timeoutMs: number;
  /** Sockets kept open to the API (one per concurrent submission at most). */
  maxSockets?: number;
}

export class ApiClient {
  readonly #base: URL;
  readonly #timeoutMs: number;
  readonly #agent: HttpAgent;
  readonly #request: typeof httpRequest;

  constructor(o: ApiClientOptions) {
    this.#base = new URL(o.baseUrl.endsWith("/") ? o.baseUrl : o.baseUrl + "/");
    this.#timeoutMs = o.timeoutMs;
    const secure = this.#base.protocol === "https:";
    // Idle sockets are kept up to the most ever in use: closing them when a burst ends only
    // meant connecting again (both sides' CPU) when the next one began.
    const maxSockets = o.maxSockets ?? 256;
    const agentOptions = { keepAlive: true, maxSockets, maxFreeSockets: maxSockets };
    this.#agent = secure ? new HttpsAgent(agentOptions) : new HttpAgent(agentOptions);
    this.#request = (secure ? httpsRequest : httpRequest) as typeof httpRequest;
  }

  /** Asks the API whether `key` authenticates. */
  checkKey(key: string): Promise<ApiOutcome> {
    return this.#call("GET", "api-keys?limit=1", key, undefined, {});
  }

  submit(key: string, body: RequestBody, idempotencyKey: string | undefined): Promise<ApiOutcome> {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (idempotencyKey !== undefined) headers["idempotency-key"] = idempotencyKey;
    return this.#call("POST", "emails", key, body, headers);
  }

  close(): void {
    this.#agent.destroy();
  }

  #call(method: string, path: string, key: string, body: RequestBody | undefined, extra: Record<string, string>): Promise<ApiOutcome> {
    const url = new URL(path, this.#base);
    return new Promise<ApiOutcome>((resolve) => {
      let settled = false;
      let sent = false;
      const settle = (o: ApiOutcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(o);
      };
      const req = this.#request(url, {
        method,
        agent: this.#agent,
        headers: {
          ...extra,
          authorization: `Bearer ${key}`,
          "user-agent": USER_AGENT,
          ...(body ? { "content-length": String(body.length) } : {}),
        },
      });
      const timer = setTimeout(() => {
        req.destroy(new Error("timeout"));
      }, this.#timeoutMs);
      req.once("error", (err: NodeJS.ErrnoException) => settle({ kind: "unreachable", reason: err.code ?? err.message, sent }));
      req.once("response", (res) => {
        readAnswer(res).then(
          (o) => settle(o),
          (err: NodeJS.ErrnoException) => settle({ kind: "unreachable", reason: err.code ?? err.message, sent: true }),
        );
      });
      if (!body) {
        sent = true;
        req.end();
        return;
      }
      writeBody(req, body).then(
        () => {
          sent = true;
        },
        // A write error is the request's own 'error', which settles it; a body that could not
        // be produced (the spool failed) ends the request, or it would wait for the timeout.
        (err: Error) => req.destroy(err),
      );
    });
  }
}

/** Pieces are gathered into writes of about this many characters: one write (one TCP segment
 * with the request's head) for a small message, instead of a write per JSON piece, which costs
 * a syscall here and a read in the API's front end for each. */
const WRITE_CHARS = 64 * 1024;

async function writeBody(req: ReturnType<typeof httpRequest>, body: RequestBody): Promise<void> {
  let pending = "";
  /** Writes `chunk` and waits until the socket is done with it: the body's buffers are lent,
   * and may change once the next piece is asked for. */
  const write = (chunk: string | Buffer) =>
    new Promise<void>((resolve, reject) => {
      if (req.destroyed) return reject(new Error("request closed"));
      const onClose = () => reject(new Error("request closed"));
      req.once("close", onClose);
      req.write(chunk, (err) => {
        req.off("close", onClose);
        if (err) reject(err);
        else resolve();
      });
    });
  for await (const chunk of body.chunks()) {
    if (typeof chunk === "string") {
      pending += chunk;
      if (pending.length < WRITE_CHARS) continue;
      const full = pending;
      pending = "";
      await write(full);
      continue;
    }
    if (pending) await write(pending);
    pending = "";
    await write(chunk);
  }
  if (req.destroyed) throw new Error("request closed");
  await new Promise<void>((resolve) => (pending ? req.end(pending, resolve) : req.end(resolve)));
}

async function readAnswer(res: IncomingMessage): Promise<ApiOutcome> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res as AsyncIterable<Buffer>) {
    if (size < MAX_ANSWER_BYTES) chunks.push(chunk);
    size += chunk.length;
  }
  let json: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    if (parsed && typeof parsed === "object") json = parsed as Record<string, unknown>;
  } catch {}
  const str = (v: unknown) => (typeof v === "string" ? v : undefined);
  const retryAfter = Number(res.headers["retry-after"]);
  return {
    kind: "answer",
    status: res.statusCode ?? 0,
    name: str(json.name),
    message: str(json.message),
    id: str(json.id),
    retryAfterSeconds: Number.isFinite(retryAfter) && res.headers["retry-after"] !== undefined ? retryAfter : undefined,
    account: str(res.headers["tern-account-id"]),
  };
}
