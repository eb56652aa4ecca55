// The floor of end-to-end delivery (bench/consumer.ts with FLOOR=1): the least a Worker must do
// to take an email over HTTP and hand it to a relay with the guarantees tern gives, and nothing
// else. It measures what this machine's local runtime (wrangler dev, local D1 and Queues on the
// Worker's thread) charges for that path, so tern's ratio to nodemailer can be read against
// what any Worker could reach here.
//   POST /emails   parse the JSON body, one D1 batch (the email row and its queued event), one
//                  queue send (broadcast.ts acceptBatch, with one email); no auth, validation,
//                  quota, idempotency, metrics or webhooks.
//   queue consumer claim the batch's rows in one UPDATE ... RETURNING, then on CONNECTIONS SMTP
//                  connections at once, each email in turn: build a multipart message (html and
//                  the text part tern derives from it), DKIM-sign it (RSA-SHA256), MAIL, RCPT
//                  and DATA pipelined, the body, and its outcome written (one D1 batch) before
//                  the connection carries the next. Connections are opened per batch (loopback:
//                  under a millisecond).
// The SMTP and MIME code here is deliberately minimal (parts sent 7bit, no error handling past
// failing the batch): it is a measuring instrument, not a sender.
import { connect } from "cloudflare:sockets";
import { uuidv7 } from "../../worker/ids.ts";
import { htmlToText } from "../../worker/mime/html-to-text.ts";
import { settleSimulated, SIMULATOR_DOMAIN, type BroadcastFloorEnv } from "./broadcast.ts";
import { FLOOR_ACCOUNT, FLOOR_DOMAIN_NAME, INSERT_EVENT_SQL } from "./statements.ts";

export interface DeliveryFloorEnv extends BroadcastFloorEnv {
  /** The dev relay's SMTP port on 127.0.0.1 (bench/consumer.ts passes tern's). */
  RELAY_PORT?: string;
}

/** As many as tern's region sender opens (and nodemailer's pool in the bench). */
const CONNECTIONS = 5;

interface Claimed {
  id: string;
  from_address: string;
  to_json: string;
  subject: string;
  html: string | null;
  message_id: string;
}

export async function deliverBatch(env: DeliveryFloorEnv, batch: MessageBatch<{ id: string }>): Promise<void> {
  const ids = batch.messages.map((m) => m.body.id);
  const now = Date.now();
  const claimed = (
    await env.DB.prepare(
      `UPDATE emails SET state = 'sending', lease_until = ?, attempts = attempts + 1 WHERE id IN (${ids.map(() => "?").join(", ")}) AND state = 'queued' ` +
        `RETURNING id, from_address, to_json, subject, html, message_id`,
    )
      .bind(now + 600_000, ...ids)
      .all<Claimed>()
  ).results;
  // The simulator's recipients (broadcast.ts's paths) are settled without a message.
  const simulated = claimed.filter((e) => e.to_json.includes(`@${SIMULATOR_DOMAIN}"`));
  if (simulated.length) await settleSimulated(env, simulated.map((e) => e.id));
  const relayed = claimed.filter((e) => !simulated.includes(e));
  if (!relayed.length) return;
  const key = await signingKey();
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(CONNECTIONS, relayed.length) }, async () => {
      const smtp = await Smtp.open(Number(env.RELAY_PORT));
      try {
        while (next < relayed.length) {
          const email = relayed[next++]!;
          const rcpt = (JSON.parse(email.to_json) as string[])[0]!;
          const message = await signed(key, email);
          const reply = await smtp.send(address(email.from_address), rcpt, message);
          const at = Date.now();
          const outcome = reply.startsWith("250") ? "delivered" : "bounced";
          await env.DB.batch([
            env.DB.prepare(`UPDATE emails SET state = ?, last_event = ?, lease_until = NULL WHERE id = ? AND state = 'sending'`).bind(outcome, outcome, email.id),
            env.DB.prepare(INSERT_EVENT_SQL).bind(uuidv7(at), email.id, FLOOR_ACCOUNT, outcome, JSON.stringify({ reply }), at, null),
          ]);
        }
      } finally {
        await smtp.close();
      }
    }),
  );
}

const address = (from: string) => /<([^>]+)>/.exec(from)?.[1] ?? from;

let keyPair: Promise<CryptoKey> | undefined;
/** A 2048-bit RSA key made once per isolate (tern keeps a domain's key imported the same way). */
function signingKey(): Promise<CryptoKey> {
  keyPair ??= (crypto.subtle.generateKey({ name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" }, false, ["sign", "verify"]) as Promise<CryptoKeyPair>).then(
    (k) => k.privateKey,
  );
  return keyPair;
}

const encoder = new TextEncoder();

/** A part sent as it is (7bit: the bench's html is ASCII in short lines), with CRLF line ends and
 * dot-stuffing: the least encoding a message can have. */
function crlfStuffed(text: string): string {
  return text.replace(/\r?\n/g, "\r\n").replace(/^\./gm, "..");
}

function b64(bytes: ArrayBuffer): string {
  return btoa(String.fromCharCode(...new Uint8Array(bytes)));
}

/** The message with html and its text part, DKIM-signed (relaxed/relaxed, rsa-sha256). */
async function signed(key: CryptoKey, e: Claimed): Promise<Uint8Array> {
  const boundary = `b-${e.id}`;
  const body =
    `--${boundary}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 7bit\r\n\r\n${crlfStuffed(htmlToText(e.html ?? ""))}\r\n` +
    `--${boundary}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: 7bit\r\n\r\n${crlfStuffed(e.html ?? "")}\r\n` +
    `--${boundary}--\r\n`;
  const headers: Array<[string, string]> = [
    ["From", e.from_address],
    ["To", (JSON.parse(e.to_json) as string[])[0]!],
    ["Subject", e.subject],
    ["Date", new Date().toUTCString()],
    ["Message-ID", `<${e.message_id}>`],
    ["MIME-Version", "1.0"],
    ["Content-Type", `multipart/alternative; boundary="${boundary}"`],
  ];
  const bodyHash = b64(await crypto.subtle.digest("SHA-256", encoder.encode(body)));
  const relaxed = (name: string, value: string) => `${name.toLowerCase()}:${value.replace(/\s+/g, " ").trim()}`;
  const dkimValue = `v=1; a=rsa-sha256; c=relaxed/relaxed; d=${FLOOR_DOMAIN_NAME}; s=floor; h=${headers.map(([n]) => n.toLowerCase()).join(":")}; bh=${bodyHash}; b=`;
  const signedText = headers.map(([n, v]) => relaxed(n, v) + "\r\n").join("") + relaxed("DKIM-Signature", dkimValue);
  const signature = b64(await crypto.subtle.sign("RSASSA-PKCS1-v1_5", key, encoder.encode(signedText)));
  const head = [["DKIM-Signature", dkimValue + signature], ...headers].map(([n, v]) => `${n}: ${v}\r\n`).join("");
  return encoder.encode(`${head}\r\n${body}.\r\n`);
}

/** One plain SMTP connection to the relay: EHLO once, then MAIL, RCPT and DATA pipelined. */
class Smtp {
  private buffered = "";
  private readonly decoder = new TextDecoder();
  private constructor(
    private readonly socket: Socket,
    private readonly reader: ReadableStreamDefaultReader<Uint8Array>,
    private readonly writer: WritableStreamDefaultWriter<Uint8Array>,
  ) {}

  static async open(port: number): Promise<Smtp> {
    const socket = connect({ hostname: "127.0.0.1", port });
    const smtp = new Smtp(socket, socket.readable.getReader(), socket.writable.getWriter());
    await smtp.expect("2");
    await smtp.writer.write(encoder.encode("EHLO floor.tern.test\r\n"));
    await smtp.expect("2");
    return smtp;
  }

  async send(from: string, to: string, message: Uint8Array): Promise<string> {
    await this.writer.write(encoder.encode(`MAIL FROM:<${from}>\r\nRCPT TO:<${to}>\r\nDATA\r\n`));
    await this.expect("2");
    await this.expect("2");
    await this.expect("3");
    await this.writer.write(message);
    return this.reply();
  }

  async close(): Promise<void> {
    await this.writer.write(encoder.encode("QUIT\r\n")).catch(() => {});
    await this.socket.close().catch(() => {});
  }

  private async expect(first: string): Promise<string> {
    const r = await this.reply();
    if (!r.startsWith(first)) throw new Error(`the relay answered ${r}`);
    return r;
  }

  /** The next whole reply (the last line of a multi-line one). */
  private async reply(): Promise<string> {
    for (;;) {
      let end: number;
      while ((end = this.buffered.indexOf("\r\n")) >= 0) {
        const line = this.buffered.slice(0, end);
        this.buffered = this.buffered.slice(end + 2);
        if (line[3] !== "-") return line;
      }
      const { value, done } = await this.reader.read();
      if (done) throw new Error("the relay closed the connection");
      this.buffered += this.decoder.decode(value, { stream: true });
    }
  }
}
