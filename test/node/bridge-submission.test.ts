// How the bridge turns an SMTP message into a `POST /emails` body, without sockets: real MIME
// written by nodemailer, read by the bridge's reader (mailparser), converted and streamed.
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, statSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import nodemailer from "nodemailer";
import type Mail from "nodemailer/lib/mailer";
import { describe, expect, it } from "vitest";
import { ApiClient } from "../../smtp-bridge/api.ts";
import { readMessage, readWithMailparser, type Envelope } from "../../smtp-bridge/message.ts";
import { RawStore } from "../../smtp-bridge/raw.ts";
import { discardParts, memoryOnly, openSpool } from "../../smtp-bridge/spool.ts";
import { formatMailbox, headerValue, isHeaderNotPassed, parseTags, requestBody, toSubmission, type Submission } from "../../smtp-bridge/submission.ts";
import { isTraceHeaderName } from "../../smtp-bridge/trace-headers.ts";
import { isOwnedHeaderName } from "../../worker/mime/build.ts";
import { SendEmailRequest } from "../../worker/sending/request.ts";

const composer = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: "windows" });

async function mime(options: Mail.Options): Promise<{ raw: Buffer; envelope: Envelope }> {
  const info = (await composer.sendMail(options)) as unknown as { message: Buffer; envelope: { from: string; to: string[] } };
  return { raw: info.message, envelope: { mailFrom: info.envelope.from || null, rcptTo: info.envelope.to } };
}

async function convert(options: Mail.Options, envelope?: Partial<Envelope>): Promise<Submission> {
  const m = await mime(options);
  const read = await readMessage(Readable.from([m.raw]), 40 * 1024 * 1024, memoryOnly);
  if (!read.ok) throw new Error("too big");
  return toSubmission(read.message, { ...m.envelope, ...envelope });
}

async function bodyJson(s: Submission): Promise<{ json: Record<string, unknown>; length: number; bytes: number; largest: number }> {
  const body = requestBody(s);
  const chunks: Buffer[] = [];
  for await (const c of body.chunks()) chunks.push(Buffer.from(c)); // a buffer piece is lent
  const all = Buffer.concat(chunks);
  return { json: JSON.parse(all.toString("utf8")), length: body.length, bytes: all.length, largest: Math.max(...chunks.map((c) => c.length)) };
}

describe("an SMTP message becomes the send request", () => {
  it("maps From, To, Cc, Reply-To, Subject, html, text, attachments and inline parts", async () => {
    const pdf = randomBytes(100_001);
    const png = randomBytes(4_000);
    const s = await convert({
      from: '"Acme, Inc." <hello@tern.test>',
      to: ["Alice <alice@example.com>", "bob@example.com"],
      cc: "Carol Ünïcode <carol@example.com>",
      bcc: "secret@example.com",
      replyTo: "support@example.com",
      subject: "Grüße ✓ and a long subject that is folded over more than one line when nodemailer writes it",
      text: "Hello — plain",
      html: '<p>Hello <img src="cid:logo@tern"></p>',
      attachments: [
        { filename: "report.pdf", content: pdf },
        { filename: "logo.png", content: png, cid: "logo@tern" },
      ],
    });
    const { json, length, bytes } = await bodyJson(s);
    expect(length).toBe(bytes);
    expect(json).toMatchObject({
      from: '"Acme, Inc." <hello@tern.test>',
      to: ["Alice <alice@example.com>", "bob@example.com"],
      cc: ["Carol Ünïcode <carol@example.com>"],
      bcc: ["secret@example.com"],
      reply_to: ["support@example.com"],
      subject: "Grüße ✓ and a long subject that is folded over more than one line when nodemailer writes it",
      text: "Hello — plain",
      html: '<p>Hello <img src="cid:logo@tern"></p>',
    });
    const attachments = json.attachments as { filename: string; content_type: string; content_id?: string; content: string }[];
    // In the order of the MIME tree: the inline image sits in multipart/related, before the attachment.
    expect(attachments.map(({ content, ...meta }) => meta)).toEqual([
      { filename: "logo.png", content_type: "image/png", content_id: "logo@tern" },
      { filename: "report.pdf", content_type: "application/pdf" },
    ]);
    expect(Buffer.compare(Buffer.from(attachments[0]!.content, "base64"), png)).toBe(0);
    expect(Buffer.compare(Buffer.from(attachments[1]!.content, "base64"), pdf)).toBe(0);
  });

  it("makes envelope recipients that are in neither To nor Cc the Bcc, once each", async () => {
    const s = await convert(
      { from: "a@tern.test", to: "To@Example.com", cc: "cc@example.com", subject: "s", text: "t" },
      { rcptTo: ["to@example.com", "cc@example.com", "hidden@example.com", "HIDDEN@example.com", "other@example.com"] },
    );
    expect(s.fields.bcc).toEqual(["hidden@example.com", "other@example.com"]);
  });

  it("passes custom headers through, skips the ones the API writes, and reads X-Tern-Tags and the idempotency headers", async () => {
    const s = await convert({
      from: "a@tern.test",
      to: "b@example.com",
      subject: "s",
      text: "t",
      messageId: "<client@example.com>",
      headers: {
        "X-Campaign": "spring",
        "List-Unsubscribe": "<https://example.com/u>",
        "In-Reply-To": "<earlier@example.com>",
        "X-Long": "a ".repeat(60) + "end",
        "X-Tern-Tags": "category=welcome, plan = pro",
        "Tern-Idempotency-Key": "tern-key-1",
        "Resend-Idempotency-Key": "resend-key-1",
        Sender: "someone@example.com",
        "DKIM-Signature": "v=1; a=rsa-sha256",
        Received: "from somewhere",
      },
    });
    expect(s.fields.headers).toEqual({
      "X-Campaign": "spring",
      "List-Unsubscribe": "<https://example.com/u>",
      "In-Reply-To": "<earlier@example.com>",
      "X-Long": "a ".repeat(60) + "end",
    });
    expect(s.fields.tags).toEqual([{ name: "category", value: "welcome" }, { name: "plan", value: "pro" }]);
    expect(s.idempotencyKey).toBe("tern-key-1");
    const resendOnly = await convert({ from: "a@tern.test", to: "b@example.com", subject: "s", text: "t", headers: { "Resend-Idempotency-Key": "r-2" } });
    expect(resendOnly.idempotencyKey).toBe("r-2");
  });

  it("never passes a header name the API would refuse as its own", () => {
    const names = ["From", "To", "Cc", "Bcc", "Subject", "Date", "Message-ID", "MIME-Version", "Content-Type", "Content-Transfer-Encoding",
      "Content-Disposition", "Content-ID", "DKIM-Signature", "Sender", "Return-Path", "Reply-To", "Received", "X-Mailer", "References", "X-Priority"];
    for (const name of names) {
      if (isOwnedHeaderName(name) || name.toLowerCase() === "reply-to") expect(isHeaderNotPassed(name), name).toBe(true);
    }
    expect(isHeaderNotPassed("X-Mailer")).toBe(false);
    expect(isHeaderNotPassed("References")).toBe(false);
  });

  // Issue 20, item 9: one definition of trace and verdict headers; the API refuses them, the
  // bridge drops them, so an SMTP client's relayed message is never refused for its Received lines.
  const TRACE = ["Received", "X-Received", "Return-Path", "Delivered-To", "X-Original-To", "Authentication-Results",
    "Original-Authentication-Results", "Received-SPF", "ARC-Seal", "ARC-Message-Signature", "ARC-Authentication-Results",
    "DKIM-Signature", "DomainKey-Signature", "Resent-From", "Resent-Date", "resent-message-id", "X-Spam-Status", "X-Spam-Flag", "x-spam-score"];

  it("drops every trace and verdict header the API refuses, from the one shared list", async () => {
    for (const name of TRACE) {
      expect(isTraceHeaderName(name), name).toBe(true);
      expect(isHeaderNotPassed(name), name).toBe(true);
    }
    for (const name of ["X-Mailer", "References", "X-Entity-Ref-ID", "X-Spammy-Name", "Receivedx"]) {
      expect(isTraceHeaderName(name), name).toBe(false);
    }
    const headers = Object.fromEntries(TRACE.filter((n) => !/^resent-/i.test(n)).map((n) => [n, "forged by the client"]));
    const s = await convert({ from: "a@tern.test", to: "b@example.com", subject: "s", text: "t", headers: { ...headers, "X-Kept": "yes" } });
    expect(s.fields.headers).toEqual({ "X-Kept": "yes" });
    // What the bridge passes on is a request the API accepts; the dropped headers it would refuse.
    expect(SendEmailRequest.safeParse({ ...s.fields, text: "t" }).success).toBe(true);
    expect(SendEmailRequest.safeParse({ ...s.fields, text: "t", headers: { "Received-SPF": "pass" } }).success).toBe(false);
  });

  it("leaves text out of an html-only message, so the API derives it as it does for REST", async () => {
    const s = await convert({ from: "a@tern.test", to: "b@example.com", subject: "s", html: "<p>only html</p>" });
    expect(s.html).toBe("<p>only html</p>");
    expect(s.text).toBeUndefined();
    expect((await bodyJson(s)).json).not.toHaveProperty("text");
    const textOnly = await convert({ from: "a@tern.test", to: "b@example.com", subject: "s", text: "two lines\nand no final break" });
    expect(textOnly.text).toBe("two lines\nand no final break");
    expect(textOnly.html).toBeUndefined();
  });

  it("sends a subject and filenames that decode to control characters as one line of text, whichever reader read them", async () => {
    // Encoded words (RFC 2047) and parameters (RFC 2231) can carry NUL, ESC, CR, LF and C1; the
    // API refuses some of these (422) and would keep the others.
    const word = (s: string) => `=?utf-8?b?${Buffer.from(s, "utf8").toString("base64")}?=`;
    const subject = "Invoice\x00 ready\x1b[2J\r\nBcc: victim@example.org\ttoday\u0085\u007f — ünï\u2028😀";
    const oneLineSubject = "Invoice ready[2J  Bcc: victim@example.org today — ünï 😀";
    const head = `From: a@tern.test\r\nTo: b@example.com\r\nSubject: ${word(subject)}\r\nMIME-Version: 1.0\r\n`;
    const single = Buffer.from(`${head}Content-Type: text/plain; charset=utf-8\r\n\r\nHello\r\n`);
    const multipart = Buffer.from([
      `${head}Content-Type: multipart/mixed; boundary="b"`, "", "--b", "Content-Type: text/plain; charset=utf-8", "", "See attached.", "--b",
      `Content-Type: application/pdf`, `Content-Disposition: attachment; filename="${word("Q3\x00 report\x1b[31m\r\nred\ttab\u009b — ünï 😀.pdf")}"`, "", "%PDF", "--b",
      "Content-Type: text/csv", "Content-Disposition: attachment; filename*=utf-8''data%00%0D%0A%1B%09%C2%85%F0%9F%98%80.csv", "", "a,b", "--b",
      // Nothing but controls: no filename at all.
      "Content-Type: text/plain", `Content-Disposition: attachment; filename="${word("\x00\x1b\u0085")}"`, "", "x", "--b--", "",
    ].join("\r\n"));
    const filenames = ["Q3 report[31m  red tab — ünï 😀.pdf", "data   😀.csv", undefined];
    const readers = [
      ["single-part", single, () => readMessage(Readable.from([single]), 1024 * 1024, memoryOnly)],
      ["multipart", multipart, () => readMessage(Readable.from([multipart]), 1024 * 1024, memoryOnly)],
      ["mailparser", single, () => readWithMailparser(Readable.from([single]), 1024 * 1024, memoryOnly)],
      ["mailparser", multipart, () => readWithMailparser(Readable.from([multipart]), 1024 * 1024, memoryOnly)],
    ] as const;
    for (const [reader, raw, read] of readers) {
      const result = await read();
      if (!result.ok) throw new Error("too big");
      expect(result.reader).toBe(reader);
      const { json } = await bodyJson(toSubmission(result.message, { mailFrom: "a@tern.test", rcptTo: ["b@example.com"] }));
      expect(json.subject, reader).toBe(oneLineSubject);
      const attachments = (json.attachments ?? []) as { filename?: string }[];
      expect(attachments.map((a) => a.filename), reader).toEqual(raw === single ? [] : filenames);
      // The request passes the API's checks of these fields.
      expect(SendEmailRequest.safeParse(json).success, reader).toBe(true);
      for (const a of attachments) expect(a.filename ?? "").not.toMatch(/[\u0000-\u001f\u007f-\u009f]/);
    }
  });

  it("uses the envelope sender when the message has no From", async () => {
    const raw = Buffer.from("To: b@example.com\r\nSubject: no from\r\n\r\nbody\r\n");
    const read = await readMessage(Readable.from([raw]), 1024, memoryOnly);
    if (!read.ok) throw new Error("too big");
    expect(toSubmission(read.message, { mailFrom: "printer@tern.test", rcptTo: ["b@example.com"] }).fields.from).toBe("printer@tern.test");
  });

  it("refuses a message over the limit and keeps none of it", async () => {
    const { raw } = await mime({ from: "a@tern.test", to: "b@example.com", subject: "s", text: "t", attachments: [{ filename: "x.bin", content: randomBytes(200_000) }] });
    const read = await readMessage(Readable.from([raw.subarray(0, 100_000), raw.subarray(100_000)]), 100_000, memoryOnly);
    expect(read).toEqual({ ok: false, reason: "too-big", bytes: raw.length });
  });
});

describe("the request body is streamed", () => {
  it("equals JSON.stringify of the whole request, in pieces of bounded size, for every attachment length and chunking", async () => {
    for (const size of [0, 1, 2, 3, 4, 49_151, 49_152, 49_153, 1_000_003]) {
      const bytes = randomBytes(size);
      // Chunks of odd sizes, as a parser hands them over.
      const chunks: Buffer[] = [];
      for (let at = 0; at < size; at += 7_919) chunks.push(bytes.subarray(at, Math.min(size, at + 7_919)));
      const s: Submission = {
        fields: { from: "a@tern.test", to: ["b@example.com"], subject: 'quote " and \\ and \n' },
        html: "<p>😀</p>".repeat(100_000), // surrogate pairs across every slice boundary
        text: "line\r\n\t\u0001 ünï 😀".repeat(30_000),
        attachments: [{ filename: "f.bin", contentType: "application/octet-stream", chunks, size }],
        idempotencyKey: undefined,
      };
      const { json, length, bytes: written, largest } = await bodyJson(s);
      const expected = { ...s.fields, html: s.html, text: s.text, attachments: [{ content_type: "application/octet-stream", filename: "f.bin", content: bytes.toString("base64") }] };
      expect(json).toEqual(expected);
      expect(length).toBe(written);
      expect(length).toBe(Buffer.byteLength(JSON.stringify(expected)));
      expect(largest).toBeLessThanOrEqual(2 * 1024 * 1024);
    }
  });
});

describe("the request on the wire", () => {
  it("arrives whole with its Content-Length, the JSON pieces gathered into few writes", async () => {
    const received: { length: number; body: Buffer; reads: number }[] = [];
    // A plain HTTP peer in the API's place: it records what arrives and answers as the API does.
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        received.push({ length: Number(req.headers["content-length"]), body: Buffer.concat(chunks), reads: chunks.length });
        res.writeHead(200, { "content-type": "application/json" }).end('{"id":"x"}');
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const api = new ApiClient({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, timeoutMs: 10_000 });
    try {
      for (const size of [0, 700_001]) {
        const bytes = randomBytes(size);
        const s: Submission = {
          fields: { from: "a@tern.test", to: ["b@example.com"], subject: "s" },
          html: "<p>ünï 😀</p>".repeat(700),
          text: undefined,
          attachments: size ? [{ filename: "f.bin", contentType: "application/octet-stream", chunks: [bytes], size }] : [],
          idempotencyKey: undefined,
        };
        const body = requestBody(s);
        expect(await api.submit("tern_key", body, undefined)).toMatchObject({ kind: "answer", status: 200, id: "x" });
        const got = received.at(-1)!;
        expect(got.length).toBe(body.length);
        expect(got.body.length).toBe(body.length);
        const json = JSON.parse(got.body.toString("utf8")) as { html: string; attachments?: { content: string }[] };
        expect(json.html).toBe(s.html);
        if (size) expect(Buffer.compare(Buffer.from(json.attachments![0]!.content, "base64"), bytes)).toBe(0);
        // About one read per 64 KB written (a write per JSON piece would be dozens).
        expect(got.reads).toBeLessThanOrEqual(Math.ceil(body.length / 16_384) + 2);
      }
      // A body that cannot be produced (its message's spool file is gone) ends the request at
      // once: the message gets its temporary failure now, not after the API timeout (10 s here).
      const raw = new RawStore(memoryOnly);
      raw.append(Buffer.from("QUJD\r\n"));
      await raw.close();
      const broken: Submission = {
        fields: { from: "a@tern.test", to: ["b@example.com"], subject: "s" },
        html: "<p>x</p>".repeat(20_000),
        text: undefined,
        attachments: [{ filename: "f.bin", contentType: "application/octet-stream", chunks: [], size: 3, raw: { store: raw, start: 0, end: 6, base64Length: 4 } }],
        idempotencyKey: undefined,
      };
      const t0 = Date.now();
      expect(await api.submit("tern_key", requestBody(broken), undefined)).toMatchObject({ kind: "unreachable" });
      expect(Date.now() - t0).toBeLessThan(5_000);
    } finally {
      api.close();
      server.close();
    }
  });
});

describe("the request's lent buffers", () => {
  it("are written whole before the next piece is read into them, however slowly the API reads", async () => {
    // A spooled base64 attachment is written in pieces of one buffer, reused for each. 16 MB
    // of it is more than the sockets' buffers hold while the API does not read, so writes wait
    // in the request: a piece read into the buffer before its write completed would be sent
    // in place of the one before it.
    const bytes = randomBytes(12 * 1024 * 1024);
    const text = bytes.toString("base64");
    const spool = openSpool(undefined, 0);
    const store = new RawStore(spool);
    for (let at = 0; at < text.length; at += 76 * 1000) {
      const lines = text.slice(at, at + 76 * 1000).match(/.{1,76}/g)!.join("\r\n") + "\r\n";
      const written = store.append(Buffer.from(lines, "latin1"));
      if (written) await written;
    }
    await store.finish();
    expect(store.spilled).toBe(true);
    let body: Buffer | null = null;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.pause();
      setTimeout(() => req.resume(), 500); // the sockets fill, then the API reads at its pace
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        body = Buffer.concat(chunks);
        res.writeHead(200, { "content-type": "application/json" }).end('{"id":"x"}');
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const api = new ApiClient({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, timeoutMs: 30_000 });
    try {
      const s: Submission = {
        fields: { from: "a@tern.test", to: ["b@example.com"], subject: "s" },
        html: "<p>x</p>",
        text: undefined,
        attachments: [{ filename: "f.bin", contentType: "application/octet-stream", chunks: [], size: bytes.length, raw: { store, start: 0, end: store.length, base64Length: text.length } }],
        idempotencyKey: undefined,
      };
      expect(await api.submit("tern_key", requestBody(s), undefined)).toMatchObject({ kind: "answer", status: 200 });
      const json = JSON.parse(body!.toString("latin1")) as { attachments: { content: string }[] };
      expect(json.attachments[0]!.content.length).toBe(text.length);
      expect(json.attachments[0]!.content === text, "the attachment's base64 as stored").toBe(true);
    } finally {
      api.close();
      server.close();
      await store.close();
      spool.close();
    }
  });
});

describe("large attachments wait in the spool", () => {
  it("writes an attachment past the threshold to a private file, streams it into the body, and removes it after", async () => {
    const spool = openSpool(undefined, 100_000);
    try {
      expect(statSync(spool.dir!).mode & 0o777).toBe(0o700);
      const small = randomBytes(50_000);
      const big = randomBytes(1_000_001);
      const m = await mime({ from: "a@tern.test", to: "b@example.com", subject: "s", text: "t", attachments: [{ filename: "small.bin", content: small }, { filename: "big.bin", content: big }] });
      const read = await readMessage(Readable.from([m.raw]), 40 * 1024 * 1024, spool);
      if (!read.ok) throw new Error("too big");
      // The multipart reader keeps the message raw, once: in one private file of the spool
      // past the threshold, the attachments being ranges of it.
      expect(read.reader).toBe("multipart");
      const [a, b] = read.message.attachments;
      expect(a!.raw?.store).toBe(b!.raw?.store);
      expect(b!.raw?.store.spilled).toBe(true);
      const files = readdirSync(spool.dir!);
      expect(files).toHaveLength(1);
      expect(statSync(`${spool.dir}/${files[0]}`).size).toBe(m.raw.length);
      expect(statSync(`${spool.dir}/${files[0]}`).mode & 0o777).toBe(0o600);
      const { json, length, bytes } = await bodyJson(toSubmission(read.message, m.envelope));
      expect(length).toBe(bytes);
      const attachments = json.attachments as { content: string }[];
      expect(Buffer.compare(Buffer.from(attachments[0]!.content, "base64"), small)).toBe(0);
      expect(Buffer.compare(Buffer.from(attachments[1]!.content, "base64"), big)).toBe(0);
      await discardParts(read.message.attachments);
      expect(readdirSync(spool.dir!)).toEqual([]);
      // A refused message leaves nothing behind either.
      const refused = await readMessage(Readable.from([m.raw]), 600_000, spool);
      expect(refused.ok).toBe(false);
      expect(readdirSync(spool.dir!)).toEqual([]);
    } finally {
      spool.close();
    }
    expect(existsSync(spool.dir!)).toBe(false);
  });
});

describe("small rules", () => {
  it("formats mailboxes the way the API parses them", () => {
    expect(formatMailbox({ name: "", address: "a@b.c" })).toBe("a@b.c");
    expect(formatMailbox({ name: "Ann Lee", address: "a@b.c" })).toBe("Ann Lee <a@b.c>");
    expect(formatMailbox({ name: 'Lee, "Ann"', address: "a@b.c" })).toBe('"Lee, \\"Ann\\"" <a@b.c>');
    expect(formatMailbox({ name: "Evil\r\nBcc: x@y.z", address: "a@b.c" })).toBe('"Evil Bcc: x@y.z" <a@b.c>');
  });

  it("unfolds header values and splits tags", () => {
    expect(headerValue("X-A:  one\r\n two\r\n\tthree")).toBe("one two\tthree");
    expect(parseTags(["a=b, c=d", "e = f,", "novalue"])).toEqual([
      { name: "a", value: "b" }, { name: "c", value: "d" }, { name: "e", value: "f" }, { name: "novalue", value: "" },
    ]);
  });
});
