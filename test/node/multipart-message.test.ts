// The bridge's one-pass multipart reader (smtp-bridge/multipart.ts, reached through readMessage)
// against the reference it replaces: whatever multipart message it accepts, the request it
// leads to must be, byte for byte, the request mailparser's reading (readWithMailparser) leads
// to. The request body is what the bridge finally sends, so it is what is compared: html, text,
// every attachment's type, filename, content id and bytes, and the header fields.
//
// Checked on:
// - a corpus written by nodemailer (the bench's html + binary attachment at many sizes, the
//   usual multipart shapes) and by hand (the corners of MIME: preambles, boundary look-alikes,
//   missing delimiters, broken base64, odd charsets and headers), each with the reader it must
//   take ("multipart" where the new reader should take it; elsewhere only the equality counts);
// - any chunking of the input (1 byte, split around every boundary, random sizes), since the
//   reader sees the DATA stream in whatever pieces the socket gives;
// - thousands of random mutations of the corpus, and random multipart trees;
// - the spool: large attachments in files, no file left behind after the answer, a refusal for
//   size, or a dropped connection.
import nodemailer, { type SendMailOptions } from "nodemailer";
import { mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough, Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { chunksOf, readMessage, readWithMailparser, type Reader, type ReadResult } from "../../smtp-bridge/message.ts";
import { discardParts, MemoryPool, memoryOnly, openSpool, type Spool } from "../../smtp-bridge/spool.ts";
import { requestBody, toSubmission, type MessagePart, type ParsedMessage } from "../../smtp-bridge/submission.ts";
import { random } from "../support/random.ts";

// ---------------------------------------------------------------------------------------
// Helpers

function randomBytes(n: number, seed: number): Buffer {
  const next = random(seed);
  const out = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) out[i] = Math.floor(next() * 256);
  return out;
}

const KB = 1024;
const MB = 1024 * 1024;

// A fixed date, Message-ID and boundary: the same bytes on every run.
const composer = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: "windows" });
async function compose(mail: SendMailOptions): Promise<Buffer> {
  const fixed = { date: new Date("2026-01-02T03:04:05Z"), messageId: "<fixed@tern.test>", baseBoundary: "tern-test" };
  return ((await composer.sendMail({ from: "Sender <sender@tern.test>", to: "rcpt@example.com", subject: "hello", ...fixed, ...mail })) as unknown as { message: Buffer }).message;
}

/** LF line ends to CRLF (those already CRLF stay), as bytes (latin1: "\xc1" is the byte 0xC1). */
const crlf = (s: string) => Buffer.from(s.replace(/\r?\n/g, "\r\n"), "latin1");
const HEAD = "From: Sender <sender@tern.test>\nTo: rcpt@example.com\nSubject: by hand\nMIME-Version: 1.0\n";
/** A hand-written message: the usual top-level fields, then `rest` (more header fields, a blank line, the body). */
const byHand = (rest: string) => crlf(HEAD + rest);

const html10k = (() => {
  const para = '<p style="margin:0 0 12px">Some words for the bench, <a href="https://example.com/x">a link</a> and more words.</p>\n';
  return `<!doctype html><html><body>\n${para.repeat(Math.round((10 * KB) / para.length))}</body></html>\n`;
})();

/** The whole request body the bridge would send for `message`; its parts' files are removed after. */
async function requestOf(message: ParsedMessage): Promise<Buffer> {
  try {
    const body = requestBody(toSubmission(message, { mailFrom: "sender@tern.test", rcptTo: ["rcpt@example.com"] }));
    const pieces: Buffer[] = [];
    // copies: the chunks read from a spool file share one buffer
    for await (const chunk of body.chunks()) pieces.push(typeof chunk === "string" ? Buffer.from(chunk) : Buffer.from(chunk));
    const all = Buffer.concat(pieces);
    expect(body.length, "the request's announced length").toBe(all.length);
    return all;
  } finally {
    await discardParts(message.attachments);
  }
}

type Outcome = { request: Buffer; bytes: number; reader: Reader } | { refused: string };

async function outcomeOf(reading: Promise<ReadResult>): Promise<Outcome> {
  let read: ReadResult;
  try {
    read = await reading;
  } catch (err) {
    return { refused: (err as Error).message };
  }
  if (!read.ok) return { refused: read.reason };
  return { request: await requestOf(read.message), bytes: read.bytes, reader: read.reader };
}

/** mailparser's reading of each raw message, once. */
const references = new WeakMap<Buffer, Promise<Outcome>>();
function reference(raw: Buffer): Promise<Outcome> {
  let r = references.get(raw);
  if (!r) references.set(raw, (r = outcomeOf(readWithMailparser(Readable.from([raw]), 1 << 30, memoryOnly))));
  return r;
}

const preview = (raw: Buffer) => JSON.stringify(raw.subarray(0, 300).toString("latin1"));

/** Expects two request bodies to be equal; on a difference, shows where. */
function expectSameRequest(actual: Buffer, expected: Buffer, label: string): void {
  if (actual.equals(expected)) return;
  let at = 0;
  while (at < actual.length && actual[at] === expected[at]) at++;
  const around = (b: Buffer) => `…${b.subarray(Math.max(0, at - 100), at + 100).toString()}… (${b.length} bytes)`;
  expect(around(actual), `${label}: the request differs from mailparser's at byte ${at}`).toBe(around(expected));
}

/** Reads `raw` with readMessage (from `chunks`, default one chunk) and with mailparser: the
 * requests must be equal, or both refused. Returns the reader readMessage used ("refused"
 * when mailparser refused the message too). `note` says more in a failure's label. */
async function compare(raw: Buffer, chunks?: Buffer[], spool?: Spool, note = ""): Promise<Reader | "refused"> {
  const label = `${note}${preview(raw)}${chunks ? ` in ${chunks.length} chunks (${chunks.slice(0, 4).map((c) => c.length).join(", ")}…)` : ""}`;
  const expected = await reference(raw);
  const actual = await outcomeOf(readMessage(Readable.from(chunks ?? [raw]), 1 << 30, spool ?? memoryOnly));
  if ("refused" in expected) {
    expect("refused" in actual, `${label}: mailparser refused it (${expected.refused}), readMessage did not`).toBe(true);
    return "refused";
  }
  if ("refused" in actual) throw new Error(`${label}: readMessage refused it (${actual.refused}), mailparser did not`);
  expectSameRequest(actual.request, expected.request, label);
  expect(actual.bytes, `${label}: bytes`).toBe(raw.length);
  return actual.reader;
}

/** Runs `fn` once, however many tests ask for its result. */
function once<T>(fn: () => Promise<T>): () => Promise<T> {
  let p: Promise<T> | undefined;
  return () => (p ??= fn());
}

/** `raw` cut into pieces of the given sizes, in turn. */
function chunked(raw: Buffer, sizes: (i: number) => number): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0, i = 0; at < raw.length; i++) {
    const n = Math.max(1, sizes(i));
    out.push(raw.subarray(at, at + n));
    at += n;
  }
  return out;
}

/** Every boundary the message declares (at any depth). */
function boundariesOf(raw: Buffer): string[] {
  const found = raw.toString("latin1").matchAll(/boundary=(?:"([^"\r\n]+)"|([^\s;"]+))/gi);
  return [...new Set([...found].map((m) => m[1] ?? m[2]!))];
}

/** Offsets of every "--boundary" in the message. */
function delimiterOffsets(raw: Buffer): number[] {
  const out: number[] = [];
  for (const b of boundariesOf(raw)) {
    const needle = Buffer.from(`--${b}`, "latin1");
    for (let at = raw.indexOf(needle); at >= 0; at = raw.indexOf(needle, at + 1)) out.push(at);
  }
  return out.sort((a, b) => a - b);
}

// ---------------------------------------------------------------------------------------
// The corpus

interface Case {
  name: string;
  raw: Buffer;
  /** True where the multipart reader must take the message; otherwise only equality counts. */
  multipart: boolean;
}

const ATTACHMENT_SIZES = [0, 1, 2, 3, 4, 57, 100 * KB, 300 * KB, Math.round(1.1 * MB)];
const benchShape = (size: number) =>
  compose({ html: html10k, attachments: [{ filename: "data.bin", content: randomBytes(size, size + 1), contentType: "application/octet-stream" }] });

async function composedCases(): Promise<Case[]> {
  const cases: Case[] = [];
  for (const size of ATTACHMENT_SIZES) cases.push({ name: `html + ${size} byte attachment`, raw: await benchShape(size), multipart: true });
  const csv = "name,amount\nAda,12\nGrace,34\n";
  const composed: [string, SendMailOptions][] = [
    ["text + html (alternative)", { text: "Hello\nworld\n", html: "<p>Hello <b>world</b></p>" }],
    ["text + html + 2 attachments (mixed > alternative)", { text: "see attached", html: "<p>see attached</p>", attachments: [{ filename: "a.bin", content: randomBytes(5000, 7) }, { filename: "report.pdf", content: randomBytes(1234, 8), contentType: "application/pdf" }] }],
    ["html with an inline cid image (related)", { html: '<p><img src="cid:logo@tern.test"></p>', attachments: [{ filename: "logo.png", content: randomBytes(700, 9), cid: "logo@tern.test" }] }],
    ["html with a cid image and an attachment (mixed > related)", { html: '<img src="cid:i1@x">', attachments: [{ filename: "i.png", content: randomBytes(64, 10), cid: "i1@x" }, { filename: "b.bin", content: randomBytes(65, 11) }] }],
    ["an attachment with disposition inline and a cid", { text: "t", attachments: [{ filename: "inline.png", content: randomBytes(300, 12), contentDisposition: "inline", cid: "inline@tern.test" }] }],
    ["unicode filenames (RFC 2231 and encoded words)", { text: "t", attachments: [
      { filename: "Grüße aus Köln — a file name long enough to be folded over several header lines.pdf", content: randomBytes(100, 13) },
      { filename: "日本語.txt", content: "x" },
      { filename: "naïve café.csv", content: csv },
    ] }],
    ["a text/csv attachment in 7bit", { text: "t", attachments: [{ filename: "a.csv", content: csv, contentTransferEncoding: "7bit" }] }],
    ["a text/csv attachment in base64", { text: "t", attachments: [{ filename: "b.csv", content: Buffer.from(csv).toString("base64"), encoding: "base64", contentTransferEncoding: "base64" }] }],
    ["a text/plain attachment", { text: "body", attachments: [{ filename: "notes.txt", content: "note\nline two\n", contentType: "text/plain", contentDisposition: "attachment" }] }],
    ["non-ASCII text (quoted-printable) + html", { text: "Grüße aus Köln, ça va? naïve café\n".repeat(5), html: "<p>Grüße</p>" }],
    ["non-ASCII text (base64) + attachment", { text: "日本語のテキスト 🎉\n".repeat(20), attachments: [{ filename: "x.bin", content: randomBytes(10, 14) }] }],
    // (an empty string would leave the text part out: an empty Buffer keeps it, in base64)
    ["an empty text part + html", { text: Buffer.alloc(0), html: "<p>only html</p>" }],
    ["an empty text part + attachment", { text: Buffer.alloc(0), attachments: [{ filename: "x.bin", content: randomBytes(10, 15) }] }],
  ];
  for (const [name, mail] of composed) cases.push({ name, raw: await compose(mail), multipart: true });
  return cases;
}

const MIXED = 'Content-Type: multipart/mixed; boundary="b1"\n\n';
const TEXT_PART = "--b1\nContent-Type: text/plain; charset=utf-8\n\nhello\n";
/** An attachment in base64 that starts with a stray "*": the multipart reader declines it, mailparser reads it. */
const strayBase64Part = (name: string, bytes = 40 * KB) =>
  `--b1\nContent-Type: application/octet-stream\nContent-Transfer-Encoding: base64\nContent-Disposition: attachment; filename=${name}\n\n*${Buffer.alloc(bytes, 5).toString("base64").replace(/.{76}/g, "$&\n")}\n`;
const BIN_PART = "--b1\nContent-Type: application/octet-stream; name=a.bin\nContent-Transfer-Encoding: base64\nContent-Disposition: attachment; filename=a.bin\n\n";
/** A multipart/mixed message of a text part and a base64 attachment whose body is `base64`. */
const withBase64 = (base64: string) => byHand(`${MIXED}${TEXT_PART}${BIN_PART}${base64}\n--b1--\n`);

const handCases: Case[] = [
  { name: "preamble and epilogue", raw: byHand(`${MIXED}This is a preamble.\nIt has two lines.\n${TEXT_PART}${BIN_PART}QUJD\n--b1--\nThe epilogue,\nalso two lines.\n`), multipart: true },
  {
    name: "boundary-like lines inside a text part",
    raw: byHand('Content-Type: multipart/alternative; boundary="BOUNDARY"\n\n--BOUNDARY\nContent-Type: text/plain\n\nline\n--BOUNDARYX\n--BOUNDARY-\n--BOUNDARY --\n-- signature\n--\n--BOUNDARY\nContent-Type: text/html\n\n<p>x</p>\n--BOUNDARYX\n--BOUNDARY--\n'),
    multipart: true,
  },
  {
    name: "nested multipart, inner close delimiter missing",
    raw: byHand('Content-Type: multipart/mixed; boundary=outer\n\n--outer\nContent-Type: multipart/alternative; boundary=inner\n\n--inner\nContent-Type: text/plain\n\nplain\n--inner\nContent-Type: text/html\n\n<p>html</p>\n--outer\nContent-Type: application/octet-stream; name=a.bin\nContent-Transfer-Encoding: base64\n\nQUJD\n--outer--\n'),
    multipart: false,
  },
  { name: "final close delimiter missing", raw: byHand(`${MIXED}${TEXT_PART}${BIN_PART}QUJDRA==\n`), multipart: false },
  { name: "final close delimiter missing, ends in text", raw: byHand(`${MIXED}${TEXT_PART}`), multipart: false },
  { name: "a part with an empty body", raw: byHand(`${MIXED}--b1\nContent-Type: text/plain\n\n--b1\nContent-Type: application/octet-stream\nContent-Transfer-Encoding: base64\n\n--b1--\n`), multipart: false },
  { name: "two text/plain parts in mixed", raw: byHand(`${MIXED}${TEXT_PART}--b1\nContent-Type: text/plain\n\nsecond\n--b1--\n`), multipart: false },
  { name: "text/plain after an attachment", raw: byHand(`${MIXED}${BIN_PART}QUJD\n${TEXT_PART}--b1--\n`), multipart: false },
  { name: "boundary lines with trailing whitespace", raw: byHand(`${MIXED}--b1 \t\nContent-Type: text/plain\n\nhello\n--b1  \nContent-Type: text/html\n\n<p>h</p>\n--b1-- \n`), multipart: false },
  { name: "LF-only line ends", raw: Buffer.from(`${HEAD}${MIXED}${TEXT_PART}${BIN_PART}QUJD\n--b1--\n`), multipart: false },
  { name: "a bare CR in a text part", raw: Buffer.concat([byHand(`${MIXED}--b1\nContent-Type: text/plain\n\n`), Buffer.from("one\rtwo\r\nthree\r\r\n--b1--\r\n")]), multipart: false },
  { name: "base64 lines not a multiple of 4", raw: withBase64("QUJDR\nEVGR0\nhJ"), multipart: false },
  { name: "base64 without padding", raw: withBase64("QUJDRA"), multipart: false },
  { name: "base64 with junk characters", raw: withBase64("QU JD*RE\xc1V\tGR0g="), multipart: false },
  { name: "base64 with = in the middle", raw: withBase64("QUI=QUJD\nQQ==QUJD"), multipart: false },
  { name: "base64 with non-zero padding bits", raw: withBase64("QR=="), multipart: false },
  { name: "a quoted-printable attachment", raw: byHand(`${MIXED}${TEXT_PART}--b1\nContent-Type: application/octet-stream\nContent-Transfer-Encoding: quoted-printable\nContent-Disposition: attachment; filename=q.bin\n\nA=3DB=\nC=00=FF \n--b1--\n`), multipart: false },
  ...["inline", "attachment"].map((disposition) => ({
    name: `a message/rfc822 part, disposition ${disposition}`,
    raw: byHand(`${MIXED}${TEXT_PART}--b1\nContent-Type: message/rfc822\nContent-Disposition: ${disposition}\n\nFrom: x@y\nSubject: inner\nContent-Type: text/plain\n\ninner body\n--b1--\n`),
    multipart: false,
  })),
  { name: "text in iso-8859-1", raw: byHand(`${MIXED}--b1\nContent-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: 8bit\n\ncaf\xe9 cr\xe8me\n--b1--\n`), multipart: false },
  { name: "format=flowed text", raw: byHand(`${MIXED}--b1\nContent-Type: text/plain; charset=utf-8; format=flowed\n\nsoft \nbreak\n>quoted\n--b1--\n`), multipart: false },
  { name: "a part with no header (blank line first)", raw: byHand(`${MIXED}--b1\n\nbody without a header\n--b1--\n`), multipart: false },
  { name: "a part with no header (no blank line)", raw: byHand(`${MIXED}--b1\nbody without a header\n\nsecond line\n--b1--\n`), multipart: false },
  { name: "multipart without a boundary parameter", raw: byHand("Content-Type: multipart/mixed\n\n--b1\nContent-Type: text/plain\n\nhello\n--b1--\n"), multipart: false },
  { name: "a text/plain part with a boundary parameter", raw: byHand(`${MIXED}--b1\nContent-Type: text/plain; boundary=b2\n\nhello\n--b2\nnot a part\n--b2--\n--b1--\n`), multipart: false },
  { name: "an 8-bit (UTF-8) filename in a part header", raw: byHand(`${MIXED}${TEXT_PART}--b1\nContent-Type: application/octet-stream; name="caf\xc3\xa9.bin"\nContent-Transfer-Encoding: base64\nContent-Disposition: attachment; filename="caf\xc3\xa9.bin"\n\nQUJD\n--b1--\n`), multipart: false },
  // The last line unfinished (no SMTP data ends so; a test may) and starting with a CR: mailsplit
  // moves the line end before it onto it and reads it as body, not as the closing line.
  { name: "an unfinished last line that starts with a CR", raw: Buffer.concat([byHand(`${MIXED}${TEXT_PART}--b1\nContent-Type: application/octet-stream\n\nabc\n`), Buffer.from("\r--b1--")]), multipart: false },
  { name: "an unfinished closing line, no line end at all", raw: Buffer.concat([byHand(`${MIXED}${TEXT_PART}`), Buffer.from("--b1--")]), multipart: false },
  {
    name: "folded lines in part headers",
    raw: byHand(`${MIXED}--b1\nContent-Type: text/plain;\n\tcharset="utf-8"\nContent-Transfer-Encoding:\n quoted-printable\n\nfolded =C3=A9\n--b1\nContent-Type: application/octet-stream;\n name="a.bin"\nContent-Disposition: attachment;\n filename="a.bin"\nContent-Transfer-Encoding: base64\n\nQUJD\n--b1--\n`),
    multipart: false,
  },
];

const corpus: Case[] = [...(await composedCases()), ...handCases];
const byName = (name: string) => corpus.find((c) => c.name === name)!.raw;
/** The multipart reader's corpus, small enough to mutate many times. */
const fuzzCorpus = corpus.filter((c) => c.multipart && c.raw.length < 64 * KB);

// ---------------------------------------------------------------------------------------

describe("the bridge's multipart reader leads to mailparser's request", () => {
  for (const c of corpus) {
    it(`${c.name}${c.multipart ? " (multipart reader)" : ""}`, async () => {
      // the case is what it claims to be: a multipart message
      if (c.multipart) expect(c.raw.toString("latin1").match(/^Content-Type:\s*([^;\r\n]*)/im)?.[1]).toMatch(/^multipart\//);
      const reader = await compare(c.raw);
      if (c.multipart) expect(reader, c.name).toBe("multipart");
    });
  }

  it("the comparison sees a difference of one attachment byte", async () => {
    const one = async (content: Buffer) => {
      const read = await readWithMailparser(Readable.from([await compose({ html: "<p>x</p>", attachments: [{ filename: "a.bin", content }] })]), 1 << 30, memoryOnly);
      if (!read.ok) throw new Error("refused");
      return requestOf(read.message);
    };
    const a = await one(Buffer.from([1, 2, 3, 4]));
    const b = await one(Buffer.from([1, 2, 3, 5]));
    expect(() => expectSameRequest(a, b, "one byte apart")).toThrow(/differs from mailparser's at byte/);
    expect(() => expectSameRequest(a, Buffer.from(a), "equal")).not.toThrow();
  });

  it("keeps the content id of a cid image and of an inline attachment", async () => {
    const expected: [string, (string | undefined)[]][] = [
      ["html with an inline cid image (related)", ["logo@tern.test"]],
      ["html with a cid image and an attachment (mixed > related)", ["i1@x", undefined]],
      ["an attachment with disposition inline and a cid", ["inline@tern.test"]],
    ];
    for (const [name, ids] of expected) {
      const read = await readMessage(Readable.from([byName(name)]), 1 << 30, memoryOnly);
      if (!read.ok) throw new Error("refused");
      const request = JSON.parse((await requestOf(read.message)).toString()) as { attachments: { content_id?: string }[] };
      expect(request.attachments.map((a) => a.content_id), name).toEqual(ids);
    }
  });
});

describe("the multipart reader in any chunking", () => {
  const chosen = [
    "text + html (alternative)",
    "text + html + 2 attachments (mixed > alternative)",
    "html with an inline cid image (related)",
    "preamble and epilogue",
    "boundary-like lines inside a text part",
    "html + 57 byte attachment",
    "html + 307200 byte attachment",
  ];

  /** Reads `raw` from `chunks`: the same request as mailparser's. Returns a note when the
   * reader taken is not the one taken with the message in one chunk. */
  async function inChunks(raw: Buffer, chunks: Buffer[], whole: Reader | "refused"): Promise<string[]> {
    const reader = await compare(raw, chunks);
    const sizes = chunks.length > 8 ? `${chunks.length} chunks` : `chunks of ${chunks.map((c) => c.length).join(", ")} bytes`;
    return reader === whole ? [] : [`${preview(raw.subarray(0, 120))} in ${sizes}: ${reader}, whole: ${whole}`];
  }

  // Each chunking runs once; its test checks the requests, the last test the readers taken.
  const oneByte = once(async () => {
    const changes: string[] = [];
    for (const name of chosen) {
      const raw = byName(name);
      if (raw.length <= 64 * KB) changes.push(...(await inChunks(raw, chunked(raw, () => 1), await compare(raw))));
    }
    return changes;
  });
  const splitAroundBoundaries = once(async () => {
    const changes: string[] = [];
    for (const name of chosen) {
      const raw = byName(name);
      const whole = await compare(raw);
      // within the top-level header too: where the first chunk ends decides nothing
      for (const at of [0, ...delimiterOffsets(raw)]) {
        for (let cut = Math.max(1, at - 100); cut <= Math.min(raw.length - 1, at + 100); cut++) {
          changes.push(...(await inChunks(raw, [raw.subarray(0, cut), raw.subarray(cut)], whole)));
        }
      }
    }
    return changes;
  });
  const randomSizes = once(async () => {
    const next = random(0xc4);
    const changes: string[] = [];
    for (const name of [...chosen, "html + 1153434 byte attachment"]) {
      const raw = byName(name);
      const whole = await compare(raw);
      for (let round = 0; round < 5; round++) changes.push(...(await inChunks(raw, chunked(raw, () => 1 + Math.floor(next() * 70_000)), whole)));
    }
    return changes;
  });

  it("reads 1-byte chunks as one", () => oneByte(), 60_000);
  it("reads a message split in two anywhere around a boundary as one", () => splitAroundBoundaries(), 120_000);
  it("reads random chunk sizes (1 to 70000 bytes) as one", () => randomSizes(), 60_000);

  it("takes the reader it takes with the message in one chunk, in any chunking", async () => {
    const changes = [...(await oneByte()), ...(await splitAroundBoundaries()), ...(await randomSizes())];
    expect(changes.slice(0, 5), `${changes.length} chunkings changed the reader`).toEqual([]);
  }, 120_000);
});

// ---------------------------------------------------------------------------------------
// Fuzzers

interface FuzzRun {
  tried: number;
  multipart: number;
}

const PIECES = ["\r\n", "\n", "\r", "--", "=", "==", "QUJD", "\xc1", " ", "Content-Type: text/html\r\n", "Content-Transfer-Encoding: base64\r\n", "\r\n\r\n", '"', ";", "\x00"];

/** `original` with 1 to 3 random edits, most of them near a delimiter or the end of a header;
 * and what they were. */
function mutate(original: Buffer, next: () => number): { raw: Buffer; edits: string } {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(next() * list.length)]!;
  const hot = delimiterOffsets(original);
  for (let at = original.indexOf("\r\n\r\n"); at >= 0; at = original.indexOf("\r\n\r\n", at + 1)) hot.push(at);
  const boundaries = boundariesOf(original);
  const anyByte = () => String.fromCharCode(Math.floor(next() * 256));
  const boundary = () => `${next() < 0.5 ? "--" : ""}${pick(boundaries)}${next() < 0.3 ? "--" : ""}${next() < 0.5 ? "\r\n" : ""}`;
  let raw = original;
  const edits: string[] = [];
  for (let e = 1 + Math.floor(next() * 3); e > 0; e--) {
    const at = next() < 0.6 && hot.length ? Math.max(0, Math.min(raw.length, pick(hot) + Math.floor(next() * 80) - 40)) : Math.floor(next() * raw.length);
    const kind = next();
    // replace a byte, insert one, delete 1 to 4, insert a boundary line or a piece
    const [insert, remove] =
      kind < 0.2 ? [anyByte(), 1] : kind < 0.35 ? [anyByte(), 0] : kind < 0.5 ? ["", 1 + Math.floor(next() * 4)] : kind < 0.65 && boundaries.length ? [boundary(), 0] : [pick(PIECES), 0];
    edits.push(`at ${at}: ${JSON.stringify(raw.subarray(at, at + remove).toString("latin1"))} -> ${JSON.stringify(insert)}`);
    raw = Buffer.concat([raw.subarray(0, at), Buffer.from(insert, "latin1"), raw.subarray(at + remove)]);
  }
  return { raw, edits: edits.join(", ") };
}

const mutationRun = once(async (): Promise<FuzzRun> => {
  const next = random(0x3a17);
  const run: FuzzRun = { tried: 0, multipart: 0 };
  for (const c of fuzzCorpus) {
    for (let m = 0; m < 160; m++) {
      run.tried++;
      const { raw, edits } = mutate(c.raw, next);
      const note = `${c.name}, mutation ${m} (${edits}): `;
      if ((await compare(raw, undefined, undefined, note)) === "multipart") run.multipart++;
      // and a third of them in small random chunks too
      if (next() < 1 / 3) await compare(raw, chunked(raw, () => 1 + Math.floor(next() * 300)), undefined, note);
    }
  }
  return run;
});

/** A random multipart tree, as raw MIME (header lines, blank line, body; CRLF line ends). */
function randomEntity(next: () => number, depth: number, counter: { n: number }): string {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(next() * list.length)]!;
  const maybe = (p: number, s: string) => (next() < p ? s : "");
  if (depth === 0 || (depth < 3 && next() < 0.4)) {
    const subtype = pick(["mixed", "mixed", "alternative", "related"]);
    const boundary = pick(["b", "=_b", "----=_Part_", "b'()+_,-./:=?", "bb", "b b"]) + counter.n++;
    const quoted = next() < 0.7 || boundary.includes(" ") || boundary.includes("'") ? `"${boundary}"` : boundary;
    const parts: string[] = [];
    for (let i = 1 + Math.floor(next() * 3); i > 0; i--) parts.push(randomEntity(next, depth + 1, counter));
    let body = maybe(0.1, "preamble\r\n");
    for (const p of parts) body += `--${boundary}\r\n${p}\r\n`;
    body += `--${boundary}--\r\n${maybe(0.1, "epilogue\r\n")}`;
    return `Content-Type: multipart/${subtype};${pick([" ", "\r\n "])}boundary=${quoted}\r\n\r\n${body}`;
  }
  const type = pick(["text/plain", "text/plain", "text/html", "text/html", "application/octet-stream", "image/png", "text/csv", "application/pdf"]);
  const isText = type.startsWith("text/");
  let header = `Content-Type: ${type}${isText ? pick(["; charset=utf-8", '; charset="UTF-8"', "; charset=us-ascii", ""]) : ""}`;
  const filename = pick([null, null, "a.txt", '"my file.pdf"', "*=utf-8''%C3%A9t%C3%A9.txt", '"=?UTF-8?B?w6l0w6kudHh0?="']);
  if (filename && next() < 0.5) header += `; name${filename.startsWith("*") ? "" : "="}${filename}`;
  header += "\r\n";
  const disposition = pick([null, null, "inline", "attachment"]);
  if (disposition) header += `Content-Disposition: ${disposition}${filename ? `; filename${filename.startsWith("*") ? "" : "="}${filename}` : ""}\r\n`;
  if (next() < 0.3) header += `Content-ID: <c${counter.n++}@tern.test>\r\n`;
  const words = isText ? ["hello", " ", "world", "\r\n", "Grüße", "日本", "<p>", "=", "--", "café", "\t"] : [];
  const content = isText
    ? Buffer.from(Array.from({ length: Math.floor(next() * 40) }, () => pick(words)).join(""))
    : randomBytes(Math.floor(next() * 400), Math.floor(next() * 0xffff));
  const ascii = content.every((b) => b < 0x80 && b !== 0);
  const encoding = isText ? pick(ascii ? [null, "7bit", "8bit", "quoted-printable", "base64"] : ["8bit", "quoted-printable", "base64"]) : pick(["base64", "base64", "binary"]);
  if (encoding) header += `Content-Transfer-Encoding: ${encoding}\r\n`;
  let body: string;
  if (encoding === "base64") body = content.toString("base64").replace(/.{76}(?=.)/g, "$&\r\n");
  else if (encoding === "quoted-printable") body = quotedPrintable(content);
  else body = content.toString("latin1");
  return `${header}\r\n${body}`;
}

/** A simple quoted-printable encoding (soft breaks before 76 characters). */
function quotedPrintable(content: Buffer): string {
  let out = "";
  let line = 0;
  for (let i = 0; i < content.length; i++) {
    const b = content[i]!;
    if (b === 0x0d && content[i + 1] === 0x0a) {
      out += "\r\n";
      line = 0;
      i++;
      continue;
    }
    const s = (b >= 33 && b <= 126 && b !== 61) || (b === 32 && content[i + 1] !== 0x0d && i + 1 < content.length) ? String.fromCharCode(b) : `=${b.toString(16).toUpperCase().padStart(2, "0")}`;
    if (line + s.length > 75) {
      out += "=\r\n";
      line = 0;
    }
    out += s;
    line += s.length;
  }
  return out;
}

const TREES = 3_000;
const structureRun = once(async (): Promise<FuzzRun> => {
  const next = random(0x7ee);
  const run: FuzzRun = { tried: 0, multipart: 0 };
  for (let i = 0; i < TREES; i++) {
    const raw = Buffer.from(`${HEAD.replace(/\n/g, "\r\n")}${randomEntity(next, 0, { n: 0 })}`, "latin1");
    run.tried++;
    const note = `tree ${i}: ${raw.length < 2000 ? JSON.stringify(raw.toString("latin1")) : ""}\n`;
    if ((await compare(raw, undefined, undefined, note)) === "multipart") run.multipart++;
    if (next() < 1 / 3) await compare(raw, chunked(raw, () => 1 + Math.floor(next() * 300)), undefined, note);
  }
  return run;
});

describe("random messages", () => {
  it("every random mutation of the corpus leads to mailparser's request", async () => {
    const run = await mutationRun();
    expect(run.tried).toBeGreaterThan(2_000);
  }, 120_000);

  it("the mutations exercise the multipart reader (more than 20% take it)", async () => {
    const run = await mutationRun();
    expect(run.multipart, `${run.multipart} of ${run.tried}`).toBeGreaterThan(run.tried * 0.2);
  }, 120_000);

  it("every random multipart tree leads to mailparser's request", async () => {
    const run = await structureRun();
    expect(run.tried).toBe(TREES);
  }, 120_000);

  it("the random trees exercise the multipart reader (more than 20% take it)", async () => {
    const run = await structureRun();
    expect(run.multipart, `${run.multipart} of ${run.tried}`).toBeGreaterThan(run.tried * 0.2);
  }, 120_000);
});

// ---------------------------------------------------------------------------------------
// The spool

describe("the multipart reader and the spool", () => {
  // Each test has a spool of its own in a fresh directory, so that a file one leaves behind
  // cannot be blamed on another; the directory is removed after the test.
  async function withSpool(test: (spool: Spool, left: () => string[]) => Promise<void>): Promise<void> {
    const base = mkdtempSync(join(tmpdir(), "tern-multipart-test-"));
    const spool = openSpool(base, 64 * KB);
    try {
      await test(spool, () => readdirSync(spool.dir!));
    } finally {
      spool.close();
      rmSync(base, { recursive: true, force: true });
    }
  }
  const big = byName("html + 307200 byte attachment");
  const huge = byName("html + 1153434 byte attachment");

  it("reads large attachments through the spool, equal to mailparser, and removes its files", () =>
    withSpool(async (spool, left) => {
      const readers: string[] = [];
      for (const raw of [big, huge]) {
        readers.push(await compare(raw, undefined, spool));
        expect(left()).toEqual([]);
        // while the message waits for its answer, its large attachment is in a file, not in memory
        for (const chunks of [[raw], chunked(raw, () => 16 * KB)]) {
          const read = await readMessage(Readable.from(chunks), 1 << 30, spool);
          if (!read.ok) throw new Error("refused");
          expect(left().length, `${chunks.length} chunks: files while waiting`).toBeGreaterThan(0);
          expect(read.message.attachments.reduce((n, a) => n + a.chunks.reduce((m, c) => m + c.length, 0), 0), "attachment bytes in memory").toBeLessThanOrEqual(64 * KB);
          await discardParts(read.message.attachments);
          expect(left(), `${chunks.length} chunks: files after the answer`).toEqual([]);
        }
      }
      expect(readers).toEqual(["multipart", "multipart"]);
    }));

  it("keeps messages in memory while the spool's memory has room (the rest in files), and gives every byte back", async () => {
    const base = mkdtempSync(join(tmpdir(), "tern-multipart-test-"));
    // Room for one `big` message in memory and 100 KB more; a message may hold up to 2 MB.
    const spool = openSpool(base, 2 * 1024 * KB, big.length + 100 * KB);
    const files = () => readdirSync(spool.dir!);
    const read = async (raw: Buffer, chunks = [raw]) => {
      const r = await readMessage(Readable.from(chunks), 1 << 30, spool);
      if (!r.ok) throw new Error("refused");
      return r.message.attachments;
    };
    const where = (parts: MessagePart[]) => parts.map((p) => (p.file || p.raw?.store.spilled ? "file" : "memory"));
    try {
      // The multipart reader: the first message stays in memory, the second does not fit beside it.
      const first = await read(big, chunked(big, () => 16 * KB));
      expect(where(first)).toEqual(["memory"]);
      expect(files()).toEqual([]);
      expect(spool.memory.used).toBe(big.length);
      const second = await read(big, chunked(big, () => 16 * KB));
      expect(where(second)).toEqual(["file"]);
      expect(spool.memory.used, "the second gave back what it held before its file").toBe(big.length);
      await discardParts(first);
      expect(spool.memory.used).toBe(0);
      const third = await read(big);
      expect(where(third), "room again once the first was answered").toEqual(["memory"]);
      await discardParts(third);
      await discardParts(second);
      expect(spool.memory.used).toBe(0);
      expect(files()).toEqual([]);
      // A message past its own threshold goes to a file whatever the room.
      const past = await read(huge);
      expect(where(past)).toEqual(["file"]);
      await discardParts(past);
      expect(spool.memory.used).toBe(0);
      // mailparser's path (base64 with a stray "*"): three 40 KB attachments, room for two.
      const small = openSpool(base, 2 * 1024 * KB, 100 * KB);
      const raw = byHand(`${MIXED}${TEXT_PART}${strayBase64Part("a.bin")}${strayBase64Part("b.bin")}${strayBase64Part("c.bin")}--b1--\n`);
      const r = await readMessage(Readable.from([raw]), 1 << 30, small);
      if (!r.ok) throw new Error("refused");
      expect(r.reader).toBe("mailparser");
      expect(where(r.message.attachments)).toEqual(["memory", "memory", "file"]);
      expect(small.memory.used).toBe(80 * KB);
      await discardParts(r.message.attachments);
      expect(small.memory.used).toBe(0);
      // A part that held a block before the room ran out gives it back when it goes to its file.
      const onePart = byHand(`${MIXED}${TEXT_PART}${strayBase64Part("a.bin", 150 * KB)}--b1--\n`);
      const o = await readMessage(Readable.from([onePart]), 1 << 30, small);
      if (!o.ok) throw new Error("refused");
      expect([o.reader, ...where(o.message.attachments), o.message.attachments[0]!.size]).toEqual(["mailparser", "file", 150 * KB]);
      expect(small.memory.used).toBe(0);
      await discardParts(o.message.attachments);
      small.close();
      // Refused, dropped or declined part way: nothing stays counted.
      expect(await readMessage(Readable.from(chunked(big, () => 16 * KB)), big.length - 1000, spool)).toMatchObject({ ok: false, reason: "too-big" });
      const input = new PassThrough();
      const dropped = readMessage(input, 1 << 30, spool).catch((e: Error) => e.message);
      input.write(big.subarray(0, 150 * KB));
      await new Promise((r) => setImmediate(r));
      input.destroy(new Error("Connection closed"));
      expect(await dropped).toBe("Connection closed");
      const declined = Buffer.concat([big.subarray(0, 200 * KB), Buffer.from("\r\n*\r\n"), big.subarray(200 * KB)]);
      const d = await readMessage(Readable.from(chunked(declined, () => 16 * KB)), 1 << 30, spool);
      if (!d.ok) throw new Error("refused");
      expect(d.reader).toBe("mailparser");
      await discardParts(d.message.attachments);
      expect(spool.memory.used).toBe(0);
      expect(files()).toEqual([]);
    } finally {
      spool.close();
      rmSync(base, { recursive: true, force: true });
    }
  });

  it("refuses a message over the size limit and leaves no file", () =>
    withSpool(async (spool, left) => {
      for (const chunks of [[big], chunked(big, () => 16 * KB)]) {
        expect(await readMessage(Readable.from(chunks), big.length - 1000, spool), `${chunks.length} chunks`).toEqual({ ok: false, reason: "too-big", bytes: big.length });
        expect(left(), `${chunks.length} chunks`).toEqual([]);
      }
    }));

  it("answers when the client drops the connection half way, and leaves no file", () =>
    withSpool(async (spool, left) => {
      for (const cut of [150 * KB, 12 * KB, delimiterOffsets(big)[1]! + 3]) {
        const input = new PassThrough();
        const read = readMessage(input, 1 << 30, spool).then(
          (r) => `resolved ${JSON.stringify({ ok: r.ok })}`,
          (e: Error) => e.message,
        );
        for (const piece of chunked(big.subarray(0, cut), () => 16 * KB)) {
          input.write(piece);
          await new Promise((r) => setImmediate(r));
        }
        input.destroy(new Error("Connection closed"));
        const answer = await Promise.race([read, new Promise((r) => setTimeout(() => r("no answer within 5 s"), 5_000))]);
        expect(answer, `cut at ${cut}`).toBe("Connection closed");
        expect(left(), `cut at ${cut}`).toEqual([]);
        await new Promise((r) => setTimeout(r, 100)); // nor a file written late
        expect(left(), `cut at ${cut}, a little later`).toEqual([]);
      }
    }));

  it("holds at most the threshold of a message in memory on mailparser's path too, whatever its parts' sizes", () =>
    withSpool(async (spool) => {
      // three 40 KB attachments (base64 with a stray "*": mailparser's) against a 64 KB threshold:
      // each is under it, but the second and third would take the message past it
      const raw = byHand(`${MIXED}${TEXT_PART}${strayBase64Part("a.bin")}${strayBase64Part("b.bin")}${strayBase64Part("c.bin")}--b1--\n`);
      const read = await readMessage(Readable.from([raw]), 1 << 30, spool);
      if (!read.ok) throw new Error("refused");
      expect(read.reader).toBe("mailparser");
      expect(read.message.attachments.map((a) => [a.filename, a.size, a.file === undefined ? "memory" : "file"])).toEqual([
        ["a.bin", 40 * KB, "memory"],
        ["b.bin", 40 * KB, "file"],
        ["c.bin", 40 * KB, "file"],
      ]);
      expect(await compare(raw, undefined, spool)).toBe("mailparser");
      await discardParts(read.message.attachments);
    }));

  it("hears a stream error that comes while the first chunks are written to the spool", () =>
    withSpool(async (spool, left) => {
      // The first chunk passes the spool threshold: the reader waits for its write, and the
      // stream fails meanwhile. Unheard, that error would be an uncaught exception.
      const input = new PassThrough();
      const read = readMessage(input, 1 << 30, spool).then(() => "resolved", (e: Error) => e.message);
      input.write(huge.subarray(0, 300 * KB)); // past the spool's write block: its write is waited for
      await new Promise((r) => setImmediate(r));
      input.destroy(new Error("Connection closed"));
      expect(await Promise.race([read, new Promise((r) => setTimeout(() => r("no answer within 5 s"), 5_000))])).toBe("Connection closed");
      await new Promise((r) => setTimeout(r, 100));
      expect(left()).toEqual([]);
    }));

  it("closes the files of a message mailparser was reading when the connection drops", () =>
    withSpool(async (spool, left) => {
      // base64 with a stray "*" is declined by the multipart reader: mailparser reads it, and its
      // attachment (228 KB) goes to a file of the spool
      const lines = Buffer.alloc(57 * 4000, 7).toString("base64").replace(/.{76}/g, "$&\n");
      const declined = byHand(`${MIXED}${TEXT_PART}--b1\nContent-Type: application/octet-stream\nContent-Transfer-Encoding: base64\n\n*${lines}\n--b1--\n`);
      const input = new PassThrough();
      const read = readMessage(input, 1 << 30, spool).catch((e: Error) => e.message);
      for (const piece of chunked(declined.subarray(0, 300 * KB), () => 16 * KB)) {
        input.write(piece);
        await new Promise((r) => setImmediate(r));
      }
      // the attachment mailparser has begun to write (the message was declined before its raw
      // bytes passed the threshold: they are not in a file)
      for (let waited = 0; left().length < 1 && waited < 5_000; waited += 10) await new Promise((r) => setTimeout(r, 10));
      expect(left().length).toBe(1);
      input.destroy(new Error("Connection closed"));
      expect(await read).toBe("Connection closed");
      const open = readdirSync("/proc/self/fd").flatMap((fd) => {
        try {
          return [readlinkSync(`/proc/self/fd/${fd}`)];
        } catch {
          return [];
        }
      });
      expect(open.filter((path) => path.startsWith(spool.dir!))).toEqual([]);
    }));
});

describe("the multipart reader's failures and costs", () => {
  it("answers with the spool's error, and reads the rest of DATA, when the spool fails after the reader declined", async () => {
    // The spool's directory is a file: the raw message cannot be written once it passes the
    // threshold. The message is declined (its second part is in iso-8859-1) before anything is
    // written, so the failure comes when mailparser would read it again from the spool.
    const base = mkdtempSync(join(tmpdir(), "tern-multipart-test-"));
    const notADirectory = join(base, "file");
    writeFileSync(notADirectory, "");
    try {
      const raw = byHand(`${MIXED}--b1\nContent-Type: text/plain\n\n${"x".repeat(4000)}\n--b1\nContent-Type: text/plain; charset=iso-8859-1\n\ncaf\xe9\n--b1--\n`);
      const input = new PassThrough();
      const read = readMessage(input, 1 << 30, { dir: notADirectory, threshold: 1024, memory: new MemoryPool(Infinity), close() {} }).then(() => "resolved", (e: Error) => e.constructor.name);
      let ended = false;
      input.once("end", () => (ended = true));
      input.write(raw);
      // What the client still sends is read and dropped, so that the session can answer at the
      // end of DATA (an SMTP reply can only come then).
      await new Promise((r) => setTimeout(r, 50));
      input.end(Buffer.alloc(64 * KB));
      expect(await Promise.race([read, new Promise((r) => setTimeout(() => r("no answer within 5 s"), 5_000))])).toBe("SpoolError");
      expect(ended).toBe(true);
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });

  it("reads a part header that arrives a byte at a time in linear time", async () => {
    // A 60 KB part header in 1-byte chunks: joining and reading it again at every byte took
    // seconds. The bound is mailparser's own time for the same bytes, with room for noise.
    const header = Array.from({ length: 1_000 }, (_, i) => `X-Filler-${i}: ${"v".repeat(40)}\n`).join("");
    const raw = byHand(`X-Top: ${"t".repeat(40)}\n${MIXED}--b1\n${header}Content-Type: text/plain\n\nbody\n--b1--\n`);
    const bytes = chunked(raw, () => 1);
    let t0 = performance.now();
    const reference = await readWithMailparser(Readable.from(bytes), 1 << 30, memoryOnly);
    const mailparserMs = performance.now() - t0;
    t0 = performance.now();
    const read = await readMessage(Readable.from(bytes), 1 << 30, memoryOnly);
    const ms = performance.now() - t0;
    expect(read.ok && reference.ok && read.message.text).toBe(reference.ok && reference.message.text);
    expect(read.ok && read.reader).toBe("multipart");
    expect(ms, `readMessage ${ms.toFixed(0)} ms, mailparser ${mailparserMs.toFixed(0)} ms`).toBeLessThan(3 * mailparserMs + 500);
  }, 60_000);
});

describe("chunksOf: the DATA stream a chunk at a time", () => {
  it("gives each chunk as it was written, however many wait in the stream (a paused stream's read() would join them: a copy)", async () => {
    const input = new PassThrough();
    input.pause();
    const written = Array.from({ length: 50 }, (_, i) => Buffer.alloc(1000 + i, i));
    for (const c of written) input.write(c);
    input.end();
    const rest = chunksOf(input);
    const got: Buffer[] = [];
    for (let c = await rest.next(); c; c = await rest.next()) got.push(c);
    rest.stop();
    expect(got.length).toBe(written.length);
    expect(got.every((c, i) => c === written[i])).toBe(true); // the very buffers: no copies
  });

  it("rejects with the stream's error, and when it closes before its end", async () => {
    const failing = new PassThrough();
    const a = chunksOf(failing);
    failing.write(Buffer.from("one"));
    expect((await a.next())!.toString()).toBe("one");
    failing.destroy(new Error("connection lost"));
    await expect(a.next()).rejects.toThrow("connection lost");
    a.stop();
    const cut = new PassThrough();
    const b = chunksOf(cut);
    cut.destroy();
    await expect(b.next()).rejects.toThrow(/premature close/i);
    b.stop();
  });

  it("reads and drops the rest when it is stopped part way, so that the stream ends (the SMTP session can answer)", async () => {
    const input = new PassThrough({ highWaterMark: 1024 });
    const rest = chunksOf(input);
    let accepted = 0;
    const writer = (async () => {
      for (let i = 0; i < 200; i++) {
        if (!input.write(Buffer.alloc(1024, i))) await new Promise((r) => input.once("drain", r));
        accepted++;
      }
      input.end();
    })();
    await rest.next();
    // Stopped while the next chunk waits in the reader, the stream paused behind it.
    while (!input.isPaused()) await new Promise((r) => setImmediate(r));
    rest.stop();
    await writer; // without the drain, the writer would wait for room forever
    await new Promise((r) => input.once("end", r));
    expect(accepted).toBe(200);
  });
});
