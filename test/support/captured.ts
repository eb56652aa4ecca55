// What the loopback SMTP peers record of each accepted message; shared by the Node peers
// and the workerd tests that read them.
export interface CapturedMessage {
  peer: string;
  /** One id per SMTP connection: equal ids mean the messages shared a connection. */
  connectionId: string;
  envelopeFrom: string;
  recipients: string[];
  /** MAIL FROM parameters as sent (SIZE, BODY, SMTPUTF8), keys upper case. */
  mailParams: Record<string, string | true>;
  /** The name the client gave in EHLO/HELO (lower case). */
  ehloName: string;
  secure: boolean;
  user: string | null;
  /** The message as received, dot-stuffing undone, base64. */
  rawBase64: string;
}
