// The SMTP bridge: one smtp-server per configured port (implicit TLS or STARTTLS), sessions
// that log in with an API key, and one `POST /emails` per message. Limits (connections in all
// and per address, recipients, size, idle time, time to log in, submission slots in all and per
// key) are enforced here; the rules about email stay in the API. close() drains: it stops
// accepting, lets sessions in the middle of a message finish it, and tells idle ones to come
// back later.
import type { Server as HttpServer } from "node:http";
import type { Socket } from "node:net";
import { SMTPServer, type SMTPServerAuthentication, type SMTPServerAuthenticationResponse, type SMTPServerDataStream, type SMTPServerOptions, type SMTPServerSession } from "smtp-server";
import { ApiClient } from "./api.ts";
import { canonicalAddress, clientKey, FailureThrottle, keyFingerprint, KeyVerdicts } from "./auth.ts";
import { watchCertificates, type CertificatePair, type CertificateWatcher } from "./certificates.ts";
import type { BridgeConfig, TlsMode } from "./config.ts";
import { MB } from "./config.ts";
import { startHealthServer, type HealthStatus } from "./health.ts";
import type { Logger } from "./log.ts";
import { readMessage } from "./message.ts";
import { discardParts, openSpool, SpoolError } from "./spool.ts";
import { keyVerdictFor, replyForSubmission, type ApiOutcome } from "./replies.ts";
import { FairSlots } from "./slots.ts";
import { requestBody, toSubmission } from "./submission.ts";

/** The API refuses request bodies over 40 MB (contract section 4.1). */
export const API_MAX_BODY_BYTES = 40 * MB;
/** A submission whose request is at most this big gives its slot back once it is read (it
 * holds no more than that while it waits for the API); larger ones keep it until answered. */
export const SMALL_REQUEST_BYTES = 64 * 1024;

export interface Bridge {
  ports: { port: number; tls: TlsMode }[];
  healthPort: number | null;
  sessions(): number;
  /** Drains and stops; resolves when every session has ended (or the grace period ran out). */
  close(): Promise<void>;
}

/** What smtp-server keeps of a connection (not in its type declarations). */
interface Connection {
  session: SMTPServerSession;
  send(code: number, text: string): void;
  close(): void;
}

/** One accepted connection, from the moment it is accepted (before an implicit-TLS handshake)
 * until its socket closes: what it counts against its address's limit, and its deadline to log in. */
interface Peer {
  socket: Socket | null;
  server: SMTPServer | null;
  implicitTls: boolean;
  client: string;
  key: string;
  /** Counted in perClient (until forget()). */
  counted: boolean;
  loginTimer: NodeJS.Timeout | null;
  state: SessionState | null;
}

interface SessionState {
  id: string;
  client: string;
  peer: Peer;
  remoteAddress: string;
  port: number;
  /** The API key the session logged in with (only ever sent to the API), and what the logs
   * call it (auth.ts keyFingerprint). */
  login: { key: string; fingerprint: string } | null;
  /** Inside onData: a message is being read or submitted. */
  busy: boolean;
  /** The session holds a submission slot: from its first accepted RCPT to the end of its message. */
  holding: boolean;
  /** The key (fingerprint) whose share the slot held counts in. */
  slotOwner: string | null;
  /** Ends the session if it holds its slot for too long without starting DATA. */
  holdTimer: NodeJS.Timeout | null;
  /** An AUTH is being checked; `overdue`: the time to log in ran out meanwhile. */
  authenticating: boolean;
  overdue: boolean;
  closed: boolean;
  connection: Connection | null;
}

type SmtpError = Error & { responseCode: number };
const smtpError = (code: number, text: string): SmtpError => Object.assign(new Error(text), { responseCode: code });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const seconds = (ms: number) => {
  const n = Math.round(ms / 100) / 10;
  return `${n} second${n === 1 ? "" : "s"}`;
};
/** A connection as both Node's socket and smtp-server's session name it. */
const endpointKey = (remoteAddress: string, remotePort: number, localAddress: string, localPort: number) =>
  `${canonicalAddress(remoteAddress)} ${remotePort} ${canonicalAddress(localAddress)} ${localPort}`;
const memoryMb = () => {
  const m = process.memoryUsage();
  const mb = (n: number) => Math.round(n / 1024 / 102.4) / 10;
  return { rss: mb(m.rss), heapTotal: mb(m.heapTotal), heapUsed: mb(m.heapUsed), external: mb(m.external), arrayBuffers: mb(m.arrayBuffers) };
};

export async function startBridge(config: BridgeConfig, log: Logger): Promise<Bridge> {
  const started = Date.now();
  const api = new ApiClient({ baseUrl: config.apiUrl, timeoutMs: config.apiTimeoutMs });
  // The account each good key belongs to (by fingerprint), as the API named it: submission
  // slots are shared per account, so an account cannot take more by using more keys.
  const accountOfKey = new Map<string, string>();
  const verdicts = new KeyVerdicts(async (key) => {
    const answer = await api.checkKey(key);
    if (answer.kind === "answer" && answer.account) {
      if (accountOfKey.size >= 100_000) accountOfKey.clear();
      accountOfKey.set(keyFingerprint(key), answer.account);
    }
    return keyVerdictFor(answer);
  }, config.authCacheMs);
  const throttle = new FailureThrottle({
    maxFailures: config.authMaxFailures,
    windowMs: config.authFailureWindowMs,
    baseDelayMs: config.authFailureDelayMs,
    maxDelayMs: config.authFailureDelayMaxMs,
  });
  const spool = openSpool(config.spoolDir, config.spoolThresholdBytes, config.spoolMemoryBytes);
  const sessions = new Map<string, SessionState>();
  const slots = new FairSlots(config.maxSubmissions, config.maxSubmissionsPerAccount);
  /** Open connections by client address (clientKey), pending TLS handshakes included. */
  const perClient = new Map<string, number>();
  const peers = new Map<string, Peer>();
  const servers: { server: SMTPServer; port: number; tls: TlsMode }[] = [];
  let draining = false;

  const certificates: CertificateWatcher = watchCertificates(
    config.certFile,
    config.keyFile,
    config.certCheckMs,
    (pair: CertificatePair) => {
      for (const s of servers) s.server.updateSecureContext({ cert: pair.cert, key: pair.key });
      log.info("certificate_reloaded", { subject: pair.subject, not_after: pair.notAfter, fingerprint: pair.fingerprint });
    },
    (err) => log.error("certificate_reload_failed", { error: err.message }),
  );

  const connectionOf = (state: SessionState, sessionId: string): Connection | null => {
    if (state.connection) return state.connection;
    for (const s of servers) {
      for (const c of (s.server as unknown as { connections: Set<Connection> }).connections) {
        if (c.session?.id === sessionId) return (state.connection = c);
      }
    }
    return null;
  };
  /** Tells the session `421 <text>` and closes it. */
  const hangUp = (state: SessionState, text: string) => {
    const c = connectionOf(state, state.id);
    if (!c) return;
    c.send(421, text);
    c.close();
  };
  const shuttingDown = "4.3.2 The service is shutting down; try again later";
  const loginTimeoutText = `4.4.2 No login within ${seconds(config.loginTimeoutMs)} of connecting; closing`;

  const loginOverdue = (peer: Peer) => {
    peer.loginTimer = null;
    const state = peer.state;
    if (state?.login) return;
    // A key being checked gets its answer; a wrong one then closes the session (onAuth).
    if (state?.authenticating) {
      state.overdue = true;
      return;
    }
    if (state) {
      log.warn("login_timeout", { session: state.id, ip: state.remoteAddress });
      return hangUp(state, loginTimeoutText);
    }
    if (!peer.socket) return;
    // No session yet, so nothing can be said to it. A plain socket (a STARTTLS port's, before
    // its greeting) is simply destroyed; on an implicit-TLS port it is the TLS socket over it
    // that must go (smtp-server keeps it among its pending sockets while the handshake runs):
    // tearing the wrap down from below crashes Node.
    const pending = (peer.server as unknown as { _pendingSockets?: Map<Socket, Socket> } | null)?._pendingSockets;
    const top = peer.implicitTls ? pending?.get(peer.socket) : peer.socket;
    if (top && (top !== peer.socket || !peer.implicitTls)) {
      log.warn("login_timeout", { session: null, ip: peer.socket.remoteAddress ?? null, handshake: peer.implicitTls ? "unfinished" : null });
      return top.destroy();
    }
    // The handshake is done (or about to start): the session is told once it has begun.
    peer.loginTimer = setTimeout(() => loginOverdue(peer), 500);
    peer.loginTimer.unref();
  };

  /** Counts a connection against its address and starts its time to log in. */
  const admit = (socket: Socket | null, remoteAddress: string, key: string): Peer => {
    const client = clientKey(remoteAddress);
    const peer: Peer = { socket, server: null, implicitTls: false, client, key, counted: true, loginTimer: setTimeout(() => loginOverdue(peer), config.loginTimeoutMs), state: null };
    peer.loginTimer!.unref();
    perClient.set(client, (perClient.get(client) ?? 0) + 1);
    peers.set(key, peer);
    return peer;
  };
  const forget = (peer: Peer) => {
    if (!peer.counted) return;
    peer.counted = false;
    if (peers.get(peer.key) === peer) peers.delete(peer.key);
    if (peer.loginTimer) clearTimeout(peer.loginTimer);
    peer.loginTimer = null;
    const left = (perClient.get(peer.client) ?? 1) - 1;
    if (left > 0) perClient.set(peer.client, left);
    else perClient.delete(peer.client);
  };

  // Every accepted socket counts against its address from the start: an implicit-TLS port's
  // connection that never finishes its handshake has no session (onConnect comes after the
  // handshake), yet holds a socket as long as one that does.
  const onSocket = (server: SMTPServer, tls: TlsMode, port: number) => (socket: Socket): boolean => {
    const remoteAddress = socket.remoteAddress ?? "";
    const peer = admit(socket, remoteAddress, endpointKey(remoteAddress, socket.remotePort ?? 0, socket.localAddress ?? "", socket.localPort ?? 0));
    peer.server = server;
    peer.implicitTls = tls === "implicit";
    socket.once("close", () => forget(peer));
    // Before the handshake nothing can be written: the connection is dropped (a STARTTLS port
    // answers 421 in onConnect instead).
    if (tls === "implicit" && (perClient.get(peer.client) ?? 0) > config.maxConnectionsPerIp) {
      log.warn("connection_refused", { ip: remoteAddress, port, reason: "max_connections_per_ip" });
      socket.destroy();
      return false;
    }
    return true;
  };

  const onConnect = (tls: TlsMode, port: number) => (session: SMTPServerSession, callback: (err?: Error | null) => void) => {
    const key = endpointKey(session.remoteAddress, session.remotePort, session.localAddress, session.localPort);
    let peer = peers.get(key);
    if (!peer) {
      // Not seen by onSocket (it always should be): counted and timed from here instead.
      log.error("connection_unmatched", { ip: session.remoteAddress, port });
      peer = admit(null, session.remoteAddress, key);
    }
    const client = peer.client;
    const refuse = (code: number, text: string, reason: string) => {
      log.warn("connection_refused", { ip: session.remoteAddress, port, reason });
      if (!peer.socket) forget(peer);
      callback(smtpError(code, text));
    };
    if (draining) return refuse(421, shuttingDown, "draining");
    if (throttle.blocked(client)) return refuse(421, "4.7.0 Too many failed logins from your address; try again later", "auth_throttled");
    if (sessions.size >= config.maxConnections) return refuse(421, "4.3.2 Too many connections; try again later", "max_connections");
    // This connection is counted already.
    if ((perClient.get(client) ?? 0) > config.maxConnectionsPerIp) return refuse(421, "4.7.0 Too many connections from your address; try again later", "max_connections_per_ip");
    const state: SessionState = {
      id: session.id,
      client,
      peer,
      remoteAddress: session.remoteAddress,
      port,
      login: null,
      busy: false,
      holding: false,
      slotOwner: null,
      holdTimer: null,
      authenticating: false,
      overdue: false,
      closed: false,
      connection: null,
    };
    peer.state = state;
    sessions.set(session.id, state);
    // Before STARTTLS, AUTH is neither offered nor accepted (and MAIL is refused in onMailFrom).
    if (tls === "starttls") (session as SMTPServerSession & { disabledCommands?: string[] }).disabledCommands = ["AUTH"];
    log.debug("session_opened", { session: session.id, ip: session.remoteAddress, port });
    callback();
  };

  const onSecure = (_socket: unknown, session: SMTPServerSession, callback: (err?: Error | null) => void) => {
    delete (session as SMTPServerSession & { disabledCommands?: string[] }).disabledCommands;
    callback();
  };

  const onAuth = (auth: SMTPServerAuthentication, session: SMTPServerSession, callback: (err: Error | null | undefined, response?: SMTPServerAuthenticationResponse) => void) => {
    const state = sessions.get(session.id);
    if (!state || !session.secure) return callback(smtpError(538, "5.7.11 Encryption required: use STARTTLS first"));
    state.authenticating = true;
    /** Answers the AUTH; a session whose time to log in ran out meanwhile, and did not log in, is then closed. */
    const answer = (err: SmtpError | null, user?: string) => {
      state.authenticating = false;
      callback(err, user ? { user } : undefined);
      if (err && state.overdue) setImmediate(() => hangUp(state, loginTimeoutText));
    };
    // Counted from now, before the key is checked: parallel logins from one address are bounded
    // by the limit as much as one after the other (those past it wait for earlier ones to end).
    throttle.begin(state.client).then((attempt) => {
      if (!attempt) {
        log.warn("auth_refused", { session: session.id, ip: state.remoteAddress, reason: "throttled" });
        return answer(smtpError(454, "4.7.0 Too many failed logins from your address; try again later"));
      }
      const fail = (reason: string) => {
        const delay = attempt.fail();
        log.warn("auth_failed", { session: session.id, ip: state.remoteAddress, reason, delay_ms: delay });
        setTimeout(() => answer(smtpError(535, "5.7.8 Authentication credentials invalid: the user is tern and the password an API key")), delay);
      };
      const key = auth.password ?? "";
      if ((auth.username ?? "").toLowerCase() !== "tern" || !key) return fail("wrong_user");
      verdicts.verdict(key).then((verdict) => {
        if (verdict === "invalid") return fail("invalid_key");
        attempt.withdraw();
        if (verdict === "unknown") {
          log.warn("auth_unavailable", { session: session.id, ip: state.remoteAddress });
          return answer(smtpError(454, "4.7.0 Temporary authentication failure: tern's API could not be reached; try again later"));
        }
        const fingerprint = keyFingerprint(key);
        state.login = { key, fingerprint };
        if (state.peer.loginTimer) clearTimeout(state.peer.loginTimer);
        state.peer.loginTimer = null;
        log.info("auth_ok", { session: session.id, ip: state.remoteAddress, key: fingerprint });
        answer(null, fingerprint);
      });
    });
  };

  const release = (state: SessionState) => {
    if (state.holdTimer) clearTimeout(state.holdTimer);
    state.holdTimer = null;
    if (!state.holding) return;
    state.holding = false;
    slots.release(state.slotOwner!);
    state.slotOwner = null;
  };
  /** Waits for a submission slot, in turn among the keys waiting; false when the session ended
   * meanwhile (the slot is given back). */
  const hold = async (state: SessionState): Promise<boolean> => {
    if (state.holding) return true;
    // Per account where the API named it; per key otherwise (an older API).
    const owner = accountOfKey.get(state.login!.fingerprint) ?? state.login!.fingerprint;
    await slots.acquire(owner);
    if (state.closed) {
      slots.release(owner);
      return false;
    }
    state.holding = true;
    state.slotOwner = owner;
    return true;
  };
  const holdText = `4.4.2 No DATA within ${seconds(config.submissionHoldMs)} of the first recipient; closing`;
  /** A slot held at RCPT must be used: a session that does not start DATA in time loses it and
   * is closed, or a few sessions kept alive with NOOP would hold the slots for as long as they like. */
  const limitHold = (state: SessionState) => {
    state.holdTimer = setTimeout(() => {
      state.holdTimer = null;
      if (!state.holding || state.busy) return;
      log.warn("submission_hold_timeout", { session: state.id, ip: state.remoteAddress, key: state.slotOwner });
      release(state);
      hangUp(state, holdText);
    }, config.submissionHoldMs);
    state.holdTimer.unref();
  };

  const onMailFrom = (_address: unknown, session: SMTPServerSession, callback: (err?: Error | null) => void) => {
    const state = sessions.get(session.id);
    // A new transaction: a slot still held by one abandoned with RSET goes back.
    if (state) release(state);
    if (!session.secure) return callback(smtpError(530, "5.7.0 Must issue a STARTTLS command first"));
    if (!state?.login || !session.user) return callback(smtpError(530, "5.7.0 Authentication required"));
    if (draining) {
      callback(smtpError(421, shuttingDown));
      setImmediate(() => connectionOf(state, session.id)?.close());
      return;
    }
    callback();
  };

  // The first recipient is answered once the session holds a submission slot, so a client
  // never starts DATA (which it may only send after 354) while the bridge could not read it:
  // a session waiting for a slot holds no message bytes here, only in its own send queue.
  const onRcptTo = (_address: unknown, session: SMTPServerSession, callback: (err?: Error | null) => void) => {
    if (session.envelope.rcptTo.length >= config.maxRecipients) {
      return callback(smtpError(550, `5.5.3 Too many recipients: at most ${config.maxRecipients} per message (50 each in To, Cc and Bcc)`));
    }
    const state = sessions.get(session.id);
    if (!state || state.holding) return callback();
    if (!state.login) return callback(smtpError(530, "5.7.0 Authentication required"));
    hold(state).then((held) => {
      if (held) limitHold(state);
      callback();
    });
  };

  const submit = async (key: string, body: ReturnType<typeof requestBody>, idempotencyKey: string | undefined): Promise<{ outcome: ApiOutcome; attempts: number }> => {
    let waited = 0;
    for (let attempts = 1; ; attempts++) {
      const outcome = await api.submit(key, body, idempotencyKey);
      // The account's rate limit refuses before anything is recorded: waiting and trying
      // again is safe, and spares clients that do not retry a 4xx on their own.
      if (outcome.kind === "answer" && outcome.status === 429 && outcome.name === "rate_limit_exceeded") {
        const wait = Math.max(100, (outcome.retryAfterSeconds ?? 1) * 1000) * (0.5 + Math.random() / 2);
        if (waited + wait <= config.rateLimitWaitMs && !draining) {
          waited += wait;
          await sleep(wait);
          continue;
        }
      }
      return { outcome, attempts };
    }
  };

  const onData = (stream: SMTPServerDataStream, session: SMTPServerSession, callback: (err?: Error | null, message?: string) => void) => {
    const state = sessions.get(session.id);
    const t0 = Date.now();
    if (!state?.login) {
      if (state) release(state);
      stream.resume();
      return callback(smtpError(530, "5.7.0 Authentication required"));
    }
    const { key, fingerprint } = state.login;
    state.busy = true;
    if (state.holdTimer) clearTimeout(state.holdTimer);
    state.holdTimer = null;
    const envelope = {
      mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : null,
      rcptTo: session.envelope.rcptTo.map((r) => r.address),
    };
    const fields = { session: session.id, ip: state.remoteAddress, key: fingerprint, recipients: envelope.rcptTo.length };
    const finish = (err: SmtpError | null, text?: string) => {
      state.busy = false;
      release(state);
      callback(err, text);
      if (draining) setImmediate(() => hangUp(state, shuttingDown));
    };
    (async () => {
      // Held since the first RCPT (unless that one was refused).
      if (!(await hold(state))) return finish(smtpError(421, "4.4.2 The connection was closed"));
      const read = await readMessage(stream, config.maxMessageBytes, spool);
      const readMs = Date.now() - t0;
      if (!read.ok) {
        log.warn("message_refused", { ...fields, bytes: read.bytes, reason: "too_big" });
        return finish(smtpError(552, `5.3.4 Message too big: the limit is ${config.maxMessageBytes} bytes`));
      }
      let reply: { error: SmtpError | null; text?: string };
      try {
        const submission = toSubmission(read.message, envelope);
        const body = requestBody(submission);
        if (body.length > API_MAX_BODY_BYTES) {
          log.warn("message_refused", { ...fields, bytes: read.bytes, json_bytes: body.length, reason: "too_big_as_json" });
          reply = { error: smtpError(552, `5.3.4 Message too big: as a request to the API it is ${body.length} bytes, over its limit of ${API_MAX_BODY_BYTES}`) };
        } else {
          // A small message is read: what it still holds while the API answers is its request, a
          // few KB, so its slot goes to the next session now instead of after the API's round trip.
          if (body.length <= SMALL_REQUEST_BYTES) release(state);
          const { outcome, attempts } = await submit(key, body, submission.idempotencyKey);
          const answer = replyForSubmission(outcome);
          if (outcome.kind === "answer" && outcome.name === "invalid_api_key") verdicts.forget(key);
          log[answer.class === "accepted" ? "info" : "warn"]("message", {
            ...fields,
            bytes: read.bytes,
            json_bytes: body.length,
            attachments: submission.attachments.length,
            spooled: submission.attachments.filter((a) => a.file || a.raw?.store.spilled).length,
            reader: read.reader,
            idempotent: submission.idempotencyKey !== undefined,
            status: outcome.kind === "answer" ? outcome.status : null,
            error: outcome.kind === "answer" ? (outcome.name ?? null) : outcome.reason,
            email_id: outcome.kind === "answer" ? (outcome.id ?? null) : null,
            reply: answer.code,
            attempts,
            ms: Date.now() - t0,
            read_ms: readMs,
          });
          reply = answer.class === "accepted" ? { error: null, text: answer.text } : { error: smtpError(answer.code, answer.text) };
        }
      } finally {
        // Whatever happened, the message's parts go (its files, its share of the spool's
        // memory) before the client has its answer.
        await discardParts(read.message.attachments);
      }
      finish(reply.error, reply.text);
    })().catch((err: Error) => {
      log.error("message_failed", { ...fields, error: err.message });
      if (err instanceof SpoolError) finish(smtpError(452, "4.3.1 Insufficient system storage; try again later"));
      else finish(smtpError(554, "5.6.0 The message could not be read"));
    });
  };

  const onClose = (session: SMTPServerSession) => {
    const state = sessions.get(session.id);
    if (!state) return;
    sessions.delete(session.id);
    state.closed = true;
    if (!state.busy) release(state); // a message in onData gives its slot back when it is answered
    // The socket's close does this too; a session onSocket never saw has only this.
    forget(state.peer);
    log.debug("session_closed", { session: session.id, ip: state.remoteAddress });
  };

  const listen = (server: SMTPServer, port: number) =>
    new Promise<number>((resolve, reject) => {
      const onError = (err: Error) => reject(err);
      server.server.once("error", onError);
      server.listen(port, config.host, () => {
        server.server.off("error", onError);
        resolve((server.server.address() as { port: number }).port);
      });
    });

  const pair = certificates.current();
  try {
    for (const p of config.ports) {
      const options: SMTPServerOptions = {
        secure: p.tls === "implicit",
        name: config.hostname,
        banner: "tern SMTP bridge: log in with user tern and an API key",
        size: config.maxMessageBytes,
        authMethods: ["PLAIN", "LOGIN"],
        maxClients: config.maxConnections,
        socketTimeout: config.socketTimeoutMs,
        closeTimeout: config.shutdownGraceMs,
        disableReverseLookup: true,
        logger: false,
        cert: pair.cert,
        key: pair.key,
        minVersion: "TLSv1.2",
        onConnect: onConnect(p.tls, p.port),
        onSecure,
        onAuth,
        onMailFrom,
        onRcptTo,
        onData,
        onClose,
      };
      const server = new SMTPServer(options);
      // onSocket sees each socket first and hands on only those it admits: one dropped after
      // smtp-server began its handshake would have to be torn down from the TLS side.
      const accept = server.server.listeners("connection") as ((socket: Socket) => void)[];
      server.server.removeAllListeners("connection");
      const admitted = onSocket(server, p.tls, p.port);
      server.server.on("connection", (socket: Socket) => {
        if (admitted(socket)) for (const l of accept) l.call(server.server, socket);
      });
      // Without a listener a failed TLS handshake would end the process.
      server.on("error", (err: Error & { code?: string; meta?: { remoteAddress?: string } }) => {
        log.debug("connection_error", { port: p.port, error: err.message, code: err.code ?? null, ip: err.meta?.remoteAddress ?? null });
      });
      try {
        const port = await listen(server, p.port);
        servers.push({ server, port, tls: p.tls });
        log.info("listening", { host: config.host, port, tls: p.tls });
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (p.optional && (code === "EACCES" || code === "EADDRINUSE" || code === "EPERM")) {
          log.warn("port_skipped", { port: p.port, tls: p.tls, reason: code });
          continue;
        }
        throw new Error(`cannot listen on ${config.host}:${p.port}: ${(err as Error).message}`);
      }
    }
    if (servers.length === 0) throw new Error("no SMTP port could be opened");
  } catch (err) {
    certificates.stop();
    spool.close();
    await Promise.all(servers.map((s) => new Promise<void>((r) => s.server.close(() => r()))));
    api.close();
    throw err;
  }

  const status = (): HealthStatus => {
    const c = certificates.current();
    return {
      status: draining ? "draining" : "ok",
      ports: servers.map((s) => ({ port: s.port, tls: s.tls })),
      sessions: sessions.size,
      submissions: { active: slots.held, waiting: slots.waiting },
      certificate: { subject: c.subject, notAfter: c.notAfter, fingerprint: c.fingerprint, loadedAt: c.loadedAt },
      uptimeSeconds: Math.round((Date.now() - started) / 1000),
      memory: memoryMb(),
    };
  };
  let health: HttpServer | null = null;
  if (config.healthPort !== null) {
    health = await startHealthServer(config.healthHost, config.healthPort, status);
    log.info("health_listening", { host: config.healthHost, port: (health.address() as { port: number }).port });
  }

  let closing: Promise<void> | null = null;
  return {
    ports: servers.map((s) => ({ port: s.port, tls: s.tls })),
    healthPort: health ? (health.address() as { port: number }).port : null,
    sessions: () => sessions.size,
    close: () =>
      (closing ??= (async () => {
        draining = true;
        log.info("draining", { sessions: sessions.size, busy: [...sessions.values()].filter((s) => s.busy).length, grace_ms: config.shutdownGraceMs });
        certificates.stop();
        const closed = servers.map((s) => new Promise<void>((r) => s.server.close(() => r())));
        // Sessions between messages are told to come back later; the others finish first.
        for (const [id, state] of sessions) {
          const c = connectionOf(state, id);
          if (c && !state.busy && !c.session.envelope.mailFrom) hangUp(state, shuttingDown);
        }
        await Promise.all(closed);
        api.close();
        spool.close();
        if (health) {
          const h = health;
          await new Promise<void>((r) => {
            h.close(() => r());
            h.closeAllConnections();
          });
        }
        log.info("stopped", { sessions: sessions.size });
      })()),
  };
}
