// Which delivery a received message is, so that receiving it again stores nothing new for an
// account that has it. When the email() handler throws, Email Routing answers the sender with a
// temporary failure and the sender's MTA tries again later, through Cloudflare's MX again: the
// retry carries the message as the sender queued it, under a new block of fields the MX writes at
// each attempt (a Received line and an ARC-Seal with their times, its verdicts). The raw bytes of
// two attempts never match; the envelope and what the sender wrote do.
import { sha256OfPieces, toHex } from "../bytes.ts";

/** Fields a hop writes on a message at each attempt (RFC 5321 4.4, RFC 7208 9.1, RFC 8601,
 * RFC 8617), wherever they stand: the receiving MX's own and those of the relays before it, which
 * the sender's queue keeps the same from one attempt to the next. */
const HOP_FIELDS = new Set(["received", "x-received", "received-spf", "authentication-results", "arc-seal", "arc-message-signature", "arc-authentication-results"]);
/** Cloudflare's MX also writes X-CF-* fields (a spam score), which may differ between attempts. */
const HOP_PREFIXES = ["x-cf-"];
/** Longer names are no field above (nor Message-ID), whatever they say. */
const NAME_MAX = 64;

const LF = 10;
const CR = 13;
const SP = 32;
const TAB = 9;
const COLON = 58;

/** The lower-case name of the field a header line starts; null when the line has no colon near
 * its start (a continuation line is told apart before). */
function fieldName(raw: Uint8Array, start: number, end: number): string | null {
  const colon = raw.subarray(start, Math.min(end, start + NAME_MAX + 1)).indexOf(COLON);
  if (colon === -1) return null;
  return String.fromCharCode(...raw.subarray(start, start + colon)).trimEnd().toLowerCase();
}

function isHopField(name: string): boolean {
  return HOP_FIELDS.has(name) || HOP_PREFIXES.some((p) => name.startsWith(p));
}

/** What the sender wrote, as pieces of `raw` (no copy): the header section without the hops'
 * fields (each with its continuation lines), then the body from the blank line on, byte for
 * byte; and whether a Message-ID field is among it. */
export function senderPart(raw: Uint8Array): { pieces: Uint8Array[]; messageId: boolean } {
  const pieces: Uint8Array[] = [];
  let messageId = false;
  let keptFrom = 0;
  let dropping = false;
  let start = 0;
  while (start < raw.length) {
    const lf = raw.indexOf(LF, start);
    if (lf === start || (lf === start + 1 && raw[start] === CR)) break; // the blank line: the body follows
    const end = lf === -1 ? raw.length : lf + 1;
    if (raw[start] !== SP && raw[start] !== TAB) {
      const name = fieldName(raw, start, end);
      if (name === "message-id") messageId = true;
      const drop = name !== null && isHopField(name);
      if (drop && !dropping && start > keptFrom) pieces.push(raw.subarray(keptFrom, start));
      if (!drop && dropping) keptFrom = start;
      dropping = drop;
    }
    start = end;
  }
  if (dropping) keptFrom = start;
  if (keptFrom < raw.length) pieces.push(raw.subarray(keptFrom));
  return { pieces, messageId };
}

/** Hex SHA-256 naming one delivery of a message: its envelope (sender and recipient) and what
 * its sender wrote. A message without a Message-ID does not name itself, and two with the same
 * text may be two messages (a monitor's fixed probe): its key is of every byte, the MX's times
 * included, so a retry of it may be stored twice rather than a second message dropped. */
export async function deliveryKey(envelope: { from: string; to: string }, raw: Uint8Array): Promise<string> {
  const sender = senderPart(raw);
  // JSON never writes a raw line feed: the envelope cannot run into the message's bytes.
  const head = new TextEncoder().encode(`${JSON.stringify([envelope.from, envelope.to])}\n`);
  return toHex(await sha256OfPieces([head, ...(sender.messageId ? sender.pieces : [raw])]));
}
