// Cross-checks the MIME builder with an independent parser: what mailparser (the parser
// behind many Node mail tools) reads back must be exactly what tern was asked to send.
import { simpleParser, type AddressObject, type ParsedMail } from "mailparser";
import { describe, expect, it } from "vitest";
import { buildMessage, type MimeAttachment, type MimeMessageInput } from "../../worker/mime/build.ts";
import { mimeInput } from "../support/mime-input.ts";

const input = mimeInput;

async function roundTrip(over: Partial<MimeMessageInput> = {}): Promise<{ mail: ParsedMail; raw: string }> {
  const bytes = buildMessage(input(over));
  // keepCidLinks: compare the html exactly as sent instead of with cid: turned into data: URLs.
  const mail = await simpleParser(Buffer.from(bytes), { keepCidLinks: true });
  return { mail, raw: Buffer.from(bytes).toString("latin1") };
}

function addresses(field: AddressObject | AddressObject[] | undefined): { name: string; address?: string }[] {
  const list = Array.isArray(field) ? field : field ? [field] : [];
  return list.flatMap((o) => o.value.map((v) => ({ name: v.name, address: v.address })));
}

function pseudoRandomBytes(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 255;
  }
  return out;
}

const ALL_BYTES = Uint8Array.from({ length: 256 }, (_, i) => i);

describe("headers read back by mailparser", () => {
  it("round-trips non-ASCII subjects, names and addresses exactly", async () => {
    const subject = "Grüße aus Köln 🎉 — 日本語の件名 e\u0301 " + "long words ".repeat(12) + "über_alles? =?not?= end";
    const { mail } = await roundTrip({
      subject,
      from: { name: "Zoë Müller-Lüdenscheidt", email: "zoe@bücher.de" },
      to: [
        { name: "山田 太郎", email: "taro@example.jp" },
        { name: "Doe, John", email: "john@example.com" },
        { name: 'Say "hi" \\ now', email: "say@example.com" },
        { email: "plain@example.com" },
      ],
      cc: [{ name: "😀 Party People", email: "party@example.com" }],
      replyTo: [{ name: "Support", email: "support@acme.test" }],
    });
    expect(mail.subject).toBe(subject);
    expect(addresses(mail.from)).toEqual([{ name: "Zoë Müller-Lüdenscheidt", address: "zoe@bücher.de" }]);
    expect(addresses(mail.to)).toEqual([
      { name: "山田 太郎", address: "taro@example.jp" },
      { name: "Doe, John", address: "john@example.com" },
      { name: 'Say "hi" \\ now', address: "say@example.com" },
      { name: "", address: "plain@example.com" },
    ]);
    expect(addresses(mail.cc)).toEqual([{ name: "😀 Party People", address: "party@example.com" }]);
    expect(addresses(mail.replyTo)).toEqual([{ name: "Support", address: "support@acme.test" }]);
    expect(mail.bcc).toBeUndefined();
    expect(mail.messageId).toBe("<0192d4c0-7b3a-7000-8000-000000000001@tern.test>");
    expect(mail.date?.toISOString()).toBe("2026-01-01T09:05:07.000Z");
  });

  it("round-trips a 998-character subject", async () => {
    const subject = "Ab".repeat(499);
    expect((await roundTrip({ subject })).mail.subject).toBe(subject);
  });

  it("keeps custom headers, and writes no Bcc even when asked to", async () => {
    const { mail } = await roundTrip({ headers: { "X-Entity-Ref-ID": "ref-1", Bcc: "spy@evil.test", "List-Unsubscribe": "<https://acme.test/u/1>" } });
    expect(mail.headers.get("x-entity-ref-id")).toBe("ref-1");
    expect(mail.headers.has("bcc")).toBe(false);
    expect(mail.bcc).toBeUndefined();
    expect(mail.headerLines.some((l) => /^bcc$/i.test(l.key))).toBe(false);
  });
});

describe("bodies read back by mailparser", () => {
  it("gives back the text and html parts exactly", async () => {
    const text = "Hallo Zoë,\n\nyour order #42 is ready. 🎉\nPrice: 10 €\n= not a soft break =\ntrailing spaces   \n\ttab";
    const html = '<!doctype html><html><body><p style="color:#333">Hallo Zoë, <b>€10</b> = ok</p>\n<p>日本語</p></body></html>';
    const { mail } = await roundTrip({ text, html });
    expect(mail.text).toBe(text);
    expect(mail.html).toBe(html);
    expect(mail.headers.get("content-type")).toMatchObject({ value: "multipart/alternative" });
  });

  it("keeps lines that start with dots and very long lines", async () => {
    const text = [".", "..", "...", ".leading dot", "x".repeat(5000), "é".repeat(2000), ". ", "end"].join("\n");
    const html = "<p>" + "word ".repeat(3000) + "</p>\n.\n..<br>";
    const { mail, raw } = await roundTrip({ text, html });
    expect(mail.text).toBe(text);
    expect(mail.html).toBe(html);
    for (const line of raw.split("\r\n")) expect(line.length).toBeLessThanOrEqual(78);
  });

  it("round-trips 1 MB text and html bodies", async () => {
    const paragraph = "Ünïcödé text with a € sign and an emoji 😀, then = and dots.\n.\n";
    const text = paragraph.repeat(Math.ceil(1_000_000 / paragraph.length));
    const html = "<div>" + "<span>€</span>x".repeat(100_000) + "</div>";
    const { mail, raw } = await roundTrip({ text, html });
    expect(Buffer.byteLength(text)).toBeGreaterThan(1_000_000);
    expect(mail.text).toBe(text);
    expect(mail.html).toBe(html);
    expect(Math.max(...raw.split("\r\n").map((l) => l.length))).toBeLessThanOrEqual(78);
  });

  it("sends a text-only message as one text/plain part", async () => {
    const { mail } = await roundTrip({ text: "Just text.\nSecond line." });
    // A message ends with CRLF (RFC 5321 DATA), and in a single-part message that is the body's.
    expect(mail.text).toBe("Just text.\nSecond line.\n");
    expect(mail.headers.get("content-type")).toMatchObject({ value: "text/plain", params: { charset: "utf-8" } });
    expect(mail.attachments).toEqual([]);
  });
});

describe("attachments read back by mailparser", () => {
  it("gives back every byte value and a large random file unchanged", async () => {
    const random = pseudoRandomBytes(300_001, 42);
    const attachments: MimeAttachment[] = [
      { filename: "all-bytes.bin", contentType: "application/octet-stream", content: ALL_BYTES },
      { filename: "random.dat", contentType: "application/octet-stream", content: random },
      { filename: "empty.txt", contentType: "text/plain", content: new Uint8Array(0) },
      { filename: "one.bin", contentType: "application/octet-stream", content: Uint8Array.of(255) },
    ];
    const { mail } = await roundTrip({ html: "<p>files</p>", attachments });
    expect(mail.headers.get("content-type")).toMatchObject({ value: "multipart/mixed" });
    expect(mail.attachments.map((a) => a.filename)).toEqual(["all-bytes.bin", "random.dat", "empty.txt", "one.bin"]);
    mail.attachments.forEach((a, i) => {
      expect(new Uint8Array(a.content)).toEqual(attachments[i]!.content);
      expect(a.contentDisposition).toBe("attachment");
    });
    expect(mail.attachments[2]!.contentType).toBe("text/plain");
  });

  it.each([
    "résumé.pdf",
    "日本語のファイル名.xlsx",
    "😀 emoji report.csv",
    "Überweisungsbestätigung für die Rechnung Nummer 2026-0001 vom ersten Januar.pdf",
    "長".repeat(100) + ".txt",
    "a very long plain ascii file name that does not fit on one header line at all.txt",
    "semi;colon 'quote' %percent ü.txt",
  ])("gives back the file name %j", async (filename) => {
    const { mail } = await roundTrip({ attachments: [{ filename, contentType: "application/pdf", content: ALL_BYTES }] });
    expect(mail.attachments).toHaveLength(1);
    expect(mail.attachments[0]!.filename).toBe(filename);
    expect(new Uint8Array(mail.attachments[0]!.content)).toEqual(ALL_BYTES);
  });

  it("puts an inline image in multipart/related with its Content-ID", async () => {
    const png = pseudoRandomBytes(5000, 7);
    const html = '<p>Logo: <img src="cid:logo@acme"></p>';
    const { mail, raw } = await roundTrip({
      text: "Logo",
      html,
      attachments: [
        { filename: "logo.png", contentType: "image/png", content: png, contentId: "logo@acme" },
        { filename: "terms.pdf", contentType: "application/pdf", content: ALL_BYTES },
      ],
    });
    expect(mail.html).toBe(html);
    expect(mail.text).toBe("Logo");
    const [logo, terms] = mail.attachments;
    expect(logo).toMatchObject({ filename: "logo.png", contentType: "image/png", contentId: "<logo@acme>", cid: "logo@acme", related: true, contentDisposition: "inline" });
    expect(new Uint8Array(logo!.content)).toEqual(png);
    expect(terms).toMatchObject({ filename: "terms.pdf", contentDisposition: "attachment" });
    expect(terms!.related).toBeFalsy();
    // mixed[related[alternative[text, html], png], pdf], in that nesting order.
    const types = [...raw.matchAll(/^Content-Type: ([^;\r\n]+)/gm)].map((m) => m[1]);
    expect(types).toEqual(["multipart/mixed", "multipart/related", "multipart/alternative", "text/plain", "text/html", "image/png", "application/pdf"]);
  });
});
