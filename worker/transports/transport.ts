// The seam between tern and the outside world: a transport takes one finished message and
// its envelope and says, recipient by recipient, what happened. It never throws for a
// delivery problem; only a programming error escapes.

export interface OutboundMessage {
  /** The envelope sender (MAIL FROM). */
  envelopeFrom: string;
  /** The envelope recipients (RCPT TO), already de-duplicated. */
  recipients: string[];
  /** The whole RFC 5322 message with CRLF line endings, not dot-stuffed. */
  raw: Uint8Array;
  /** The sending domain's `tls: enforced`: never over an unencrypted hop (see smtp-client). */
  requireTls?: boolean;
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
}

export interface Transport {
  /** Opens a session used for the messages of one queue batch (one SMTP connection). */
  open(): Promise<TransportSession>;
}
