// The bridge's single-part path (smtp-bridge/simple-message.ts) against the reference it
// replaces: whatever message it accepts, it must read exactly as mailparser does (the bridge's
// mailparser path, readWithMailparser). Checked on a corpus written by nodemailer and by hand,
// on thousands of random mutations of it, and for the quoted-printable decoder against libqp.
import libqp from "libqp";
import nodemailer, { type SendMailOptions } from "nodemailer";
import { PassThrough, Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { readMessage, readWithMailparser, SIMPLE_MAX_BYTES, startOf } from "../../smtp-bridge/message.ts";
import { decodeQuotedPrintable, readSimpleMessage } from "../../smtp-bridge/simple-message.ts";
import { memoryOnly, partBytes } from "../../smtp-bridge/spool.ts";
import type { MessagePart, ParsedMessage } from "../../smtp-bridge/submission.ts";
import { random } from "../support/random.ts";

/** A part's decoded bytes, whichever reader read it (a range of the raw message, or chunks). */
async function contentOf(part: MessagePart): Promise<Buffer> {
  const pieces: Buffer[] = [];
  for await (const piece of partBytes(part)) pieces.push(Buffer.from(piece));
  return Buffer.concat(pieces);
}
/** A message with each attachment as its content type, name, id and decoded bytes. */
async function comparable(m: ParsedMessage): Promise<object> {
  const attachments = await Promise.all(m.attachments.map(async (a) => ({ contentType: a.contentType, filename: a.filename, contentId: a.contentId, size: a.size, content: await contentOf(a) })));
  return { ...m, attachments };
}

const composer = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: "windows" });
async function compose(mail: SendMailOptions): Promise<Buffer> {
  return ((await composer.sendMail({ from: "Sender <sender@tern.test>", to: "rcpt@example.com", subject: "hello", ...mail })) as unknown as { message: Buffer }).message;
}

async function reference(raw: Buffer): Promise<ParsedMessage> {
  const read = await readWithMailparser(Readable.from([raw]), 1 << 30, memoryOnly);
  if (!read.ok) throw new Error("mailparser refused the message");
  return read.message;
}

/** Reads `raw` on the single-part path; when that accepts it, its reading must be mailparser's.
 * True when it was accepted. */
async function acceptedAsMailparser(raw: Buffer, label: string): Promise<boolean> {
  const fast = readSimpleMessage(raw);
  if (!fast) return false;
  expect(fast, label).toEqual(await reference(raw));
  return true;
}

const LONG = "A line that goes on and on, with words, commas, = signs and =3D lookalikes, ".repeat(8);
const corpus = async (): Promise<{ name: string; raw: Buffer; simple: boolean }[]> => {
  const crlf = (s: string) => Buffer.from(s.replace(/\r?\n/g, "\r\n"), "latin1");
  return [
    { name: "html, quoted-printable", raw: await compose({ html: "<p style=\"margin:0\">Hello <b>world</b></p>\n".repeat(40) }), simple: true },
    { name: "text, 7bit", raw: await compose({ text: "Hello\nworld\n" }), simple: true },
    { name: "text, long lines", raw: await compose({ text: `${LONG}\n${LONG}  \n\ttabbed \n` }), simple: true },
    { name: "text, non-ASCII (quoted-printable)", raw: await compose({ text: "Grüße aus Köln, ça va? naïve café\n".repeat(5) }), simple: true },
    { name: "text, mostly non-ASCII (base64)", raw: await compose({ text: "日本語のテキスト 🎉\n".repeat(20) }), simple: true },
    { name: "html, forced base64", raw: await compose({ html: "<p>base64 body ✓</p>", textEncoding: "base64" }), simple: true },
    { name: "text, forced quoted-printable", raw: await compose({ text: "plain = text\nwith trailing space \n", textEncoding: "quoted-printable" }), simple: true },
    {
      name: "every address field, encoded names, custom headers",
      raw: await compose({
        from: '"Doe, Jane" <jane@tern.test>',
        to: ["Zoë Ünicode <zoe@example.com>", "plain@example.com", '"Quote \\"me\\"" <q@example.com>'],
        cc: "Çc Person <cc@example.com>",
        replyTo: "Replies <reply@example.com>",
        subject: "Grüße — a subject long enough to be folded over more than one line of the header, with ünïcödé",
        headers: { "X-Tern-Tags": "category=welcome, plan=free", "Tern-Idempotency-Key": "key-1", "X-Custom": "value with ; and ,", "X-Long": "word ".repeat(40) },
        text: "body\n",
      }),
      simple: true,
    },
    { name: "empty text", raw: await compose({ text: "" }), simple: true },
    { name: "text and html (multipart)", raw: await compose({ text: "t", html: "<p>h</p>" }), simple: false },
    { name: "with an attachment", raw: await compose({ text: "t", attachments: [{ filename: "a.txt", content: "x" }] }), simple: false },
    { name: "by hand: group address, no Content-Type", raw: crlf("From: a@tern.test\nTo: Team: one@example.com, Two <two@example.com>;\nSubject: group\n\nline one\nline two\n"), simple: true },
    { name: "by hand: us-ascii, 8bit, folded custom header", raw: crlf('From: a@tern.test\nTo: b@example.com\nX-Folded: one\n two\n\tthree\nContent-Type: text/plain; charset="US-ASCII"\nContent-Transfer-Encoding: 8bit\n\nbody\n'), simple: true },
    { name: "by hand: invalid quoted-printable", raw: crlf("From: a@tern.test\nTo: b@example.com\nContent-Type: text/html; charset=utf-8\nContent-Transfer-Encoding: Quoted-Printable\n\n=ZZ =4 =\n=4=\n1 end= \n== =3d=3D tail=") , simple: true },
    { name: "by hand: base64 with junk between lines", raw: crlf("From: a@tern.test\nTo: b@example.com\nContent-Transfer-Encoding: base64\n\naGVsbG8g\n*d29y bGQ\n=\n"), simple: true },
    { name: "by hand: base64 padded inside", raw: crlf("From: a@tern.test\nTo: b@example.com\nContent-Transfer-Encoding: base64\n\naGk=\naGk=\n"), simple: false },
    { name: "by hand: invalid UTF-8 bytes", raw: Buffer.concat([crlf("From: a@tern.test\nTo: b@example.com\nContent-Transfer-Encoding: 8bit\n\n"), Buffer.from([0xc3, 0x28, 0xff, 0x41, 0x0d, 0x0a])]), simple: true },
    { name: "by hand: latin-1", raw: crlf("From: a@tern.test\nTo: b@example.com\nContent-Type: text/plain; charset=iso-8859-1\n\ncaf\xe9\n"), simple: false },
    { name: "by hand: format=flowed", raw: crlf("From: a@tern.test\nTo: b@example.com\nContent-Type: text/plain; format=flowed\n\nsoft \nbreak\n"), simple: false },
    { name: "by hand: text attachment", raw: crlf("From: a@tern.test\nTo: b@example.com\nContent-Disposition: attachment; filename=a.txt\n\nfile\n"), simple: false },
    { name: "by hand: LF line ends", raw: Buffer.from("From: a@tern.test\nTo: b@example.com\n\nbody\n"), simple: false },
    { name: "by hand: 8-bit header", raw: Buffer.from("From: a@tern.test\r\nTo: b@example.com\r\nSubject: caf\xc3\xa9\r\n\r\nbody\r\n", "latin1"), simple: false },
    { name: "by hand: no body", raw: crlf("From: a@tern.test\nTo: b@example.com\n"), simple: false },
    { name: "by hand: unknown transfer encoding", raw: crlf("From: a@tern.test\nTo: b@example.com\nContent-Transfer-Encoding: x-uuencode\n\nbody\n"), simple: false },
  ];
};

describe("the bridge's single-part path reads as mailparser does", () => {
  it("accepts the common messages and reads them exactly as mailparser; declines the rest", async () => {
    for (const c of await corpus()) {
      const fast = readSimpleMessage(c.raw);
      expect(fast !== null, c.name).toBe(c.simple);
      if (fast) expect(fast, c.name).toEqual(await reference(c.raw));
    }
  });

  it("reads every random mutation it accepts exactly as mailparser does", async () => {
    const next = random(0x7e2a);
    // 0xC1 and 0xBD are "A" and "=" to mailparser's base64 decoder (it clears the high bit)
    const bytes = [..."\r\n \t=:;,<>\"'()@.-_/AaD3fz0+", "\u0000", "\u0080", "\u00ab", "\u00bd", "\u00c1", "\u00ff"].map((ch) => ch.charCodeAt(0));
    let accepted = 0;
    let tried = 0;
    for (const c of await corpus()) {
      for (let m = 0; m < 150; m++) {
        const raw = Buffer.from(c.raw);
        const edits = 1 + Math.floor(next() * 3);
        const out = [...raw];
        for (let e = 0; e < edits; e++) {
          const at = Math.floor(next() * out.length);
          const b = bytes[Math.floor(next() * bytes.length)]!;
          const kind = next();
          if (kind < 0.4) out[at] = b;
          else if (kind < 0.8) out.splice(at, 0, b);
          else out.splice(at, 1);
        }
        const mutated = Buffer.from(out);
        tried++;
        if (await acceptedAsMailparser(mutated, `${c.name}, mutation ${m}: ${JSON.stringify(mutated.toString("latin1").slice(0, 400))}`)) accepted++;
      }
    }
    // The mutations must exercise the path, not just be declined.
    expect(accepted).toBeGreaterThan(tried * 0.3);
  }, 120_000);

  it("reads every header it accepts, built from the fields that decide the path, as mailparser does", async () => {
    const next = random(0x4ead);
    const pick = <T>(list: T[]): T => list[Math.floor(next() * list.length)]!;
    const types = ["", "text/plain", "text/html", "TEXT/HTML", "text/plain ", "multipart/mixed", "message/rfc822", "text/enriched", "text/plain (c)"];
    const params = ["", "; charset=utf-8", '; charset="UTF-8"', "; charset=us-ascii", "; charset=latin1", '; charset=""', "; boundary=x", '; boundary="--x"', "; name=a.txt",
      "; format=flowed", "; format=fixed", "; delsp=yes", "; charset=utf-8; charset=latin1", "; charset*=utf-8''utf-8", '; charset="utf-8" (comment)'];
    const encodings = [null, "7bit", "8bit", "binary", "base64", "Base64", "quoted-printable", "Quoted-Printable", " quoted-printable ", "x-uue", ""];
    const dispositions = [null, "inline", "attachment", "inline; filename=a.txt", "Inline", "form-data", ""];
    const pieces = ["a", "b", "=", "=3D", "=C3=A9", " ", "\t", "\r\n", "\n", "\r", "--x", "----x", "--x--", "QUJD", "aGk=", "==", "\xc3\xa9", "\xe9", "\xc1", "\xbd", "\x00", ".", "From: z@y\r\n", "\r\n\r\n", "Content-Type: text/html\r\n"];
    let accepted = 0;
    for (let i = 0; i < 3_000; i++) {
      let header = "From: a@tern.test\r\nTo: b@example.com\r\n";
      const types_ = next() < 0.1 ? 2 : next() < 0.8 ? 1 : 0;
      for (let k = 0; k < types_; k++) header += `Content-Type: ${pick(types)}${pick(params)}${next() < 0.2 ? pick(params) : ""}\r\n`;
      const encoding = pick(encodings);
      if (encoding !== null) header += `Content-Transfer-Encoding: ${encoding}\r\n`;
      if (next() < 0.05) header += `Content-Transfer-Encoding: ${pick(encodings)}\r\n`;
      const disposition = pick(dispositions);
      if (disposition !== null) header += `Content-Disposition: ${disposition}\r\n`;
      let body = "";
      for (let k = Math.floor(next() * 12); k > 0; k--) body += pick(pieces);
      const raw = Buffer.from(`${header}\r\n${body}`, "latin1");
      if (await acceptedAsMailparser(raw, JSON.stringify(raw.toString("latin1")))) accepted++;
    }
    expect(accepted).toBeGreaterThan(500);
  }, 60_000);

  it("decodes quoted-printable byte for byte as libqp does", () => {
    const next = random(0x51);
    const alphabet = [..."==== \t\r\n\r\nAF09afgZx3D", "\u00e9"].map((ch) => ch.charCodeAt(0));
    for (let i = 0; i < 20_000; i++) {
      const length = Math.floor(next() * 24);
      const input = Buffer.from(Array.from({ length }, () => alphabet[Math.floor(next() * alphabet.length)]!));
      expect(decodeQuotedPrintable(input), JSON.stringify(input.toString("latin1"))).toEqual(libqp.decode(input));
    }
    const all = Buffer.from(Array.from({ length: 4096 }, () => Math.floor(next() * 256)));
    expect(decodeQuotedPrintable(all)).toEqual(libqp.decode(all));
  });

  it("takes linear time on long runs of spaces, where libqp's regular expression is quadratic", () => {
    const input = Buffer.from(`a${" ".repeat(1_000_000)}b\r\n`);
    const t = performance.now();
    const out = decodeQuotedPrintable(input);
    expect(performance.now() - t).toBeLessThan(500);
    expect(out.length).toBe(input.length);
  });

  it("reads base64 bodies it accepts as mailparser's stream decoder does", async () => {
    const next = random(0xb64);
    const alphabet = [..."QUJDRA==aGk+/\r\n *-_", "\u00bd", "\u00c1"].map((ch) => ch.charCodeAt(0));
    let checked = 0;
    for (let i = 0; i < 3_000; i++) {
      const length = Math.floor(next() * 40);
      const body = Buffer.from(Array.from({ length }, () => alphabet[Math.floor(next() * alphabet.length)]!));
      const raw = Buffer.concat([Buffer.from("From: a@tern.test\r\nTo: b@example.com\r\nContent-Transfer-Encoding: base64\r\n\r\n"), body]);
      if (await acceptedAsMailparser(raw, JSON.stringify(body.toString("latin1")))) checked++;
    }
    expect(checked).toBeGreaterThan(300);
  }, 60_000);
});

describe("readMessage: which path a message takes", () => {
  it("knows from the header alone, without gathering the body, that a message is not a single text part", async () => {
    for (const c of await corpus()) {
      const end = c.raw.indexOf("\r\n\r\n");
      if (end < 0) continue;
      const header = c.raw.subarray(0, end + 4);
      const start = startOf(header);
      // what the header says agrees with what reading the whole message decides, but for a body
      // the path cannot decode (base64 padded inside), which only the body shows
      const simple = typeof start === "object" && "simple" in start ? start.simple : null;
      if (c.simple) expect(simple, c.name).not.toBeNull();
      else if (c.name !== "by hand: base64 padded inside") expect(simple, c.name).toBeNull();
      // what the header gave is what reading the whole message would read
      if (simple) expect(readSimpleMessage(c.raw, simple), c.name).toEqual(readSimpleMessage(c.raw));
    }
    expect(startOf(Buffer.from("From: a@tern.test\r\nTo: b@exa"))).toBe("incomplete");
    expect(startOf(Buffer.from("From: a@tern.test\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n"))).toMatchObject({ multipart: { end: 64 } });
    expect(startOf(Buffer.from("From: a@tern.test\r\nContent-Type: application/pdf\r\n\r\n"))).toBe("other");
    expect(startOf(Buffer.from("From: a@tern.test\nTo: b@example.com\n"))).toBe("other");
  });

  const chunked = (raw: Buffer, sizes: number[]) => {
    const out: Buffer[] = [];
    let at = 0;
    for (let i = 0; at < raw.length; i++) {
      const n = sizes[i % sizes.length]!;
      out.push(raw.subarray(at, at + n));
      at += n;
    }
    return Readable.from(out);
  };

  it("gives the same result in any chunking, on both paths", async () => {
    for (const c of await corpus()) {
      const expected = await reference(c.raw);
      for (const sizes of [[1], [7, 3], [4096]]) {
        const read = await readMessage(chunked(c.raw, sizes), 1 << 30, memoryOnly);
        expect(read.ok, c.name).toBe(true);
        if (read.ok) {
          expect(read.bytes).toBe(c.raw.length);
          // attachments are streamed parts or ranges of the raw message: compare their decoded bytes
          expect(await comparable(read.message), c.name).toEqual(await comparable(expected));
        }
      }
    }
  });

  it("hands a message larger than the gathering limit to mailparser whole, what was gathered first", async () => {
    const text = "0123456789abcdef\n".repeat(Math.ceil((SIMPLE_MAX_BYTES * 1.5) / 17));
    const raw = await compose({ text });
    expect(raw.length).toBeGreaterThan(SIMPLE_MAX_BYTES);
    const read = await readMessage(chunked(raw, [16 * 1024]), 1 << 30, memoryOnly);
    expect(read.ok && read.message.text).toBe(text.replace(/\n$/, ""));
    expect(read.bytes).toBe(raw.length);
  });

  it("reads a large multipart message the same whichever chunk its header decides in", async () => {
    const content = Buffer.alloc(600 * 1024, 7);
    const raw = await compose({ html: "<p>see attached</p>", attachments: [{ filename: "data.bin", content }] });
    const expected = await reference(raw);
    for (const sizes of [[16 * 1024], [100, 16 * 1024], [3]]) {
      const read = await readMessage(chunked(raw, sizes), 1 << 30, memoryOnly);
      expect(read.ok && read.message.html).toBe(expected.html);
      expect(read.ok && (await contentOf(read.message.attachments[0]!)).equals(content)).toBe(true);
      expect(read.bytes).toBe(raw.length);
    }
  });

  it("answers when the client drops the connection in the middle of an attachment", async () => {
    const header = "From: a@tern.test\r\nTo: b@example.com\r\nContent-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\nContent-Type: text/plain\r\n\r\nhi\r\n--x\r\n" +
      "Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n";
    for (const size of [1_000, 300_000]) {
      const input = new PassThrough();
      const read = readMessage(input, 1 << 30, memoryOnly).then(() => "answered", (e: Error) => e.message);
      input.write(Buffer.from(header + "QUJD".repeat(size / 4) + "\r\n"));
      setTimeout(() => input.destroy(new Error("Connection closed")), 50);
      expect(await Promise.race([read, new Promise((r) => setTimeout(() => r("no answer within 3 s"), 3_000))])).toBe("Connection closed");
    }
  });

  it("refuses a message over the size limit on either side of the gathering limit", async () => {
    const small = await compose({ text: "x".repeat(5_000) });
    expect(await readMessage(chunked(small, [1000]), 4_000, memoryOnly)).toEqual({ ok: false, reason: "too-big", bytes: small.length });
    const big = await compose({ text: "y\n".repeat(SIMPLE_MAX_BYTES) });
    expect(await readMessage(chunked(big, [65_536]), SIMPLE_MAX_BYTES + 10, memoryOnly)).toEqual({ ok: false, reason: "too-big", bytes: big.length });
  });
});
