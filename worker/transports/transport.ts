// The seam between tern and the outside world: a transport takes one finished message and
// its envelope and says, recipient by recipient, what happened. It never throws for a
// delivery problem; only a programming error escapes.

export interface OutboundMessage {
  /** The envelope sender (MAIL FROM). */
  envelopeFrom: string;
  /** The envelope recipients (RCPT TO), already de-duplicated. */
  recipients: string[];
  /** The whole RFC 5322 message with CRLF line endings, not dot-stuffed: one buffer, or
   * chunks made as they are read (tern's own messages, which are never joined). */
  raw: Uint8Array | MessageChunks;
  /** The sending domain's `tls: enforced`: never over an unencrypted hop (see smtp-client). */
  requireTls?: boolean;
}

/** A message as chunks in order, made on demand: each call of chunks() yields the whole
 * message again, so a transport can read it once per recipient or per attempt. A chunk is
 * only valid until the next one is asked for: its buffer may be used again. */
export interface MessageChunks {
  /** Its length in octets. */
  readonly length: number;
  /** Every octet is 7-bit (tern's composed messages are), so nobody needs to scan for 8-bit. */
  readonly sevenBit?: boolean;
  chunks(): AsyncIterable<Uint8Array>;
}

/** The message's chunks, whichever form it has. A chunk may come from a stream (an attachment
 * read from R2), and reading it may throw: a transport then sends nothing more of it. */
export async function* chunksOf(raw: Uint8Array | MessageChunks): AsyncGenerator<Uint8Array> {
  if (raw instanceof Uint8Array) yield raw;
  else yield* raw.chunks();
}

/** The message as one buffer. Only for a transport that can take nothing else: it costs a copy
 * of the whole message. */
export async function joinedBytes(raw: Uint8Array | MessageChunks): Promise<Uint8Array> {
  if (raw instanceof Uint8Array) return raw;
  const out = new Uint8Array(raw.length);
  let offset = 0;
  for await (const chunk of raw.chunks()) {
    if (offset + chunk.length > out.length) throw new Error(`message chunks hold more than the ${raw.length} octets announced`);
    out.set(chunk, offset);
    offset += chunk.length;
  }
  if (offset !== raw.length) throw new Error(`message chunks hold ${offset} octets, not the ${raw.length} announced`);
  return out;
}

export type RecipientStatus = "accepted" | "rejected" | "deferred";

export interface RecipientResult {
  recipient: string;
  /** accepted: the peer took responsibility; rejected: permanent (5xx); deferred: try again later. */
  status: RecipientStatus;
  /** The SMTP reply code when there was one (none for a connection failure). */
  code?: number;
  /** The enhanced status code (RFC 3463), e.g. "5.1.1", when the peer sent one. */
  enhancedCode?: string;
  /** The peer's reply text, or what went wrong locally ("connection refused", "timeout"). */
  message: string;
  /** Whether an acceptance is final delivery. Unset: the deployment says (RELAY_FINAL, true
   * only where the relay is the recipients' own server); a service that relays on, such as
   * Cloudflare Email Sending, says false whatever RELAY_FINAL is. */
  final?: boolean;
}

export interface TransportSession {
  /** Delivers one message; a broken connection is re-opened for the next message. */
  deliver(message: OutboundMessage): Promise<RecipientResult[]>;
  close(): Promise<void>;
  /** Why this session could not set up its connection (refused, silent, TLS, auth), when that
   * happened: a pool then closes it and holds the region off for a while (session-pool.ts). */
  setupFailure?(): string | undefined;
}

export interface Transport {
  /** Opens a session: one SMTP connection, opened on the first message and reopened when it
   * broke, carried across emails and queue batches by the sender's pool. */
  open(): Promise<TransportSession>;
}
