// The MIME builder, run inside workerd. Decoding here is done by small independent helpers
// (RFC 2047, quoted-printable, RFC 2231, a MIME tree splitter) written against the RFCs, not
// against the code under test; test/node/mime-parse.test.ts cross-checks with mailparser.
import { describe, expect, it } from "vitest";
import { domainOf, formatMailbox, parseMailbox, toAsciiEmail } from "../../worker/mime/address.ts";
import { attachmentBound, buildMessage, isOwnedHeaderName, isValidContentId, largestAttachmentWithin, messageBaseBound, type MimeMessageInput } from "../../worker/mime/build.ts";
import { base64LinesLength } from "../../worker/mime/encoding.ts";
import { mimeInput } from "../support/mime-input.ts";
import {
  asciiFallbackName,
  encodeBase64Lines,
  encodeQuotedPrintable,
  encodeWords,
  fileNameParams,
  isSevenBitSafe,
  listField,
  parameterField,
  parseContentType,
  unstructuredField,
} from "../../worker/mime/encoding.ts";
import { htmlToText } from "../../worker/mime/html-to-text.ts";

// --- independent decoders -------------------------------------------------------------------

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function unfold(field: string): string {
  return field.replace(/\r\n(?=[ \t])/g, "");
}

/** Decodes one RFC 2047 word; throws if its bytes are not complete UTF-8 on their own. */
function decodeWord(word: string): string {
  const m = /^=\?([^?]+)\?([QqBb])\?([^?]*)\?=$/.exec(word);
  if (!m) throw new Error(`not an encoded-word: ${word}`);
  expect(m[1]!.toLowerCase()).toBe("utf-8");
  let bytes: number[];
  if (m[2]!.toUpperCase() === "B") {
    bytes = Array.from(atob(m[3]!), (c) => c.charCodeAt(0));
  } else {
    bytes = [];
    const s = m[3]!;
    for (let i = 0; i < s.length; i++) {
      if (s[i] === "_") bytes.push(0x20);
      else if (s[i] === "=") {
        bytes.push(parseInt(s.slice(i + 1, i + 3), 16));
        i += 2;
      } else bytes.push(s.charCodeAt(i));
    }
  }
  return strictUtf8.decode(Uint8Array.from(bytes));
}

/** The value of an unfolded unstructured field, RFC 2047 decoded (whitespace between two
 * adjacent encoded-words is dropped, other whitespace kept). */
function decodeUnstructured(value: string): string {
  const tokens = value.split(/([ \t]+)/);
  let out = "";
  let lastWasEncoded = false;
  let pendingSpace = "";
  for (const t of tokens) {
    if (t === "") continue;
    if (/^[ \t]+$/.test(t)) {
      pendingSpace += t;
      continue;
    }
    const encoded = /^=\?[^?]+\?[QqBb]\?[^?]*\?=$/.test(t);
    if (!(encoded && lastWasEncoded)) out += pendingSpace;
    pendingSpace = "";
    out += encoded ? decodeWord(t) : t;
    lastWasEncoded = encoded;
  }
  return out + pendingSpace;
}

/** Decodes a whole `Name: value` field as produced for unstructured values. */
function fieldValue(field: string, name: string): string {
  const unfolded = unfold(field);
  expect(unfolded.startsWith(`${name}:`)).toBe(true);
  const rest = unfolded.slice(name.length + 1);
  return decodeUnstructured(rest.startsWith(" ") ? rest.slice(1) : rest);
}

function decodeQp(encoded: string): string {
  // Structure first: "=" is only a soft break or a triplet of uppercase hex.
  expect(encoded).not.toMatch(/=(?![0-9A-F]{2}|\r\n|$)/);
  const bytes: number[] = [];
  const s = encoded.replace(/=\r\n/g, "");
  for (let i = 0; i < s.length; i++) {
    if (s[i] === "=") {
      bytes.push(parseInt(s.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(s.charCodeAt(i));
  }
  return strictUtf8.decode(Uint8Array.from(bytes));
}

function decodeBase64(s: string): Uint8Array {
  return Uint8Array.from(atob(s.replace(/\r\n/g, "")), (c) => c.charCodeAt(0));
}

/** RFC 2231: the value of `key` from a list of parameters (extended form preferred). */
function decode2231(params: string[], key: string): string {
  const sections = params
    .map((p) => new RegExp(`^${key}\\*(?:(\\d+)\\*)?=(.*)$`).exec(p))
    .filter((m): m is RegExpExecArray => m !== null)
    .sort((a, b) => Number(a[1] ?? 0) - Number(b[1] ?? 0));
  expect(sections.length).toBeGreaterThan(0);
  sections.forEach((m, i) => {
    if (m[1] !== undefined) expect(Number(m[1])).toBe(i);
    // Each section holds whole characters.
    strictUtf8.decode(percentDecode(i === 0 ? m[2]!.replace(/^UTF-8''/, "") : m[2]!));
  });
  const joined = sections.map((m) => m[2]).join("");
  expect(joined.startsWith("UTF-8''")).toBe(true);
  return strictUtf8.decode(percentDecode(joined.slice("UTF-8''".length)));
}

function percentDecode(s: string): Uint8Array {
  const bytes: number[] = [];
  for (let i = 0; i < s.length; i++) {
    if (s[i] === "%") {
      bytes.push(parseInt(s.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(s.charCodeAt(i));
  }
  return Uint8Array.from(bytes);
}


interface Entity {
  /** Unfolded header fields in order, names as written. */
  headers: [string, string][];
  rawHeaders: string;
  body: string;
  parts: Entity[];
}

/** Splits a message into its MIME tree (RFC 2046 5.1.1 delimiters). */
function parseEntity(raw: string): Entity {
  const sep = raw.indexOf("\r\n\r\n");
  expect(sep).toBeGreaterThan(0);
  const rawHeaders = raw.slice(0, sep);
  const body = raw.slice(sep + 4);
  const headers = unfold(rawHeaders)
    .split("\r\n")
    .map((line): [string, string] => {
      const colon = line.indexOf(":");
      expect(colon).toBeGreaterThan(0);
      return [line.slice(0, colon), line.slice(colon + 1).trim()];
    });
  const entity: Entity = { headers, rawHeaders, body, parts: [] };
  const type = header(entity, "content-type") ?? "";
  if (/^multipart\//i.test(type)) {
    const boundary = /boundary="([^"]+)"/.exec(type)![1]!;
    const pieces = ("\r\n" + body).split(`\r\n--${boundary}`);
    expect(pieces[0]).toBe(""); // no preamble
    expect(pieces[pieces.length - 1]!.startsWith("--")).toBe(true);
    entity.parts = pieces.slice(1, -1).map((p) => {
      expect(p.startsWith("\r\n")).toBe(true);
      return parseEntity(p.slice(2));
    });
  }
  return entity;
}

function header(e: Entity, name: string): string | undefined {
  return e.headers.find(([n]) => n.toLowerCase() === name)?.[1];
}

/** A compact picture of the tree: "multipart/mixed[text/plain,application/pdf]". */
function shape(e: Entity): string {
  const type = (header(e, "content-type") ?? "").split(";")[0]!.trim();
  return e.parts.length ? `${type}[${e.parts.map(shape).join(",")}]` : type;
}

function partBody(e: Entity): string {
  const cte = header(e, "content-transfer-encoding");
  if (cte === "quoted-printable") return decodeQp(e.body);
  expect(cte).toBe("7bit");
  return e.body;
}

/** 7-bit, CRLF-only, every line within 998 octets, ends with CRLF. Returns the text. */
function wireText(bytes: Uint8Array): string {
  const high = bytes.findIndex((b) => b > 127);
  expect(high).toBe(-1);
  const text = strictUtf8.decode(bytes);
  expect(text.replace(/\r\n/g, "")).not.toMatch(/[\r\n]/);
  expect(text.endsWith("\r\n")).toBe(true);
  const longest = Math.max(...text.split("\r\n").map((l) => l.length));
  expect(longest).toBeLessThanOrEqual(998);
  return text;
}

function headerLines(text: string): string[] {
  return text.slice(0, text.indexOf("\r\n\r\n")).split("\r\n");
}

// Deterministic pseudo-random strings (mulberry32).
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
function randomString(next: () => number, pool: string[], length: number): string {
  let s = "";
  for (let i = 0; i < length; i++) s += pool[Math.floor(next() * pool.length)];
  return s;
}
const HEADER_POOL = ["a", "Z", "0", " ", " ", "\t", "=", "?", "_", ".", ",", '"', "é", "€", "😀", "日", "\u0301", "\u0001", "=?"];
const BODY_POOL = [...HEADER_POOL, "\n", "\r\n", "\r", "\u0000", ".", " \n", "\t\r\n"];

const baseInput = mimeInput;

function build(over: Partial<MimeMessageInput> = {}): { text: string; root: Entity } {
  const text = wireText(buildMessage(baseInput(over)));
  return { text, root: parseEntity(text) };
}

// --- addresses ------------------------------------------------------------------------------

describe("parseMailbox", () => {
  const local64 = "l".repeat(64);
  const label63 = "d".repeat(63);
  const long254 = `${"a".repeat(64)}@${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(57)}.com`;
  it.each<[string, { name?: string; email: string }]>([
    ["a@b.co", { email: "a@b.co" }],
    ["  a@b.co  ", { email: "a@b.co" }],
    ["<a@b.co>", { email: "a@b.co" }],
    ["Name <a@b.co>", { name: "Name", email: "a@b.co" }],
    ["Acme Inc. <hello@acme.test>", { name: "Acme Inc.", email: "hello@acme.test" }],
    ['"Quoted, Name" <a@b.co>', { name: "Quoted, Name", email: "a@b.co" }],
    ['"Say \\"hi\\" \\\\ <now>" <a@b.co>', { name: 'Say "hi" \\ <now>', email: "a@b.co" }],
    ['"" <a@b.co>', { email: "a@b.co" }],
    ["Zoë Müller <zoe@example.com>", { name: "Zoë Müller", email: "zoe@example.com" }],
    ["山田太郎 <taro@example.jp>", { name: "山田太郎", email: "taro@example.jp" }],
    ["User.Name+tag@Sub.Example.COM", { email: "User.Name+tag@sub.example.com" }],
    ["o'brien!#$%&*/=?^_`{|}~-@ex-ample.co.uk", { email: "o'brien!#$%&*/=?^_`{|}~-@ex-ample.co.uk" }],
    ["a@BÜCHER.de", { email: "a@bücher.de" }],
    // One spelling per domain (canonicalDomain): A-labels read back as U-labels, full-width
    // letters as the ASCII ones IDNA maps them to.
    ["a@xn--bcher-kva.de", { email: "a@bücher.de" }],
    ["a@XN--BCHER-KVA.de", { email: "a@bücher.de" }],
    ["sup@\uff45xample.com", { email: "sup@example.com" }],
    ["Name <a@\uff21\uff23\uff2d\uff25.test>", { name: "Name", email: "a@acme.test" }],
    [`${local64}@b.co`, { email: `${local64}@b.co` }],
    [`a@${label63}.co`, { email: `a@${label63}.co` }],
    [long254, { email: long254 }],
  ])("accepts %j", (input, expected) => {
    expect(parseMailbox(input)).toEqual(expected);
  });

  it.each<string>([
    "",
    "   ",
    "a",
    "a@b",
    "@b.co",
    "a@",
    "a@.b.co",
    "a@b..co",
    "a@b.co.",
    "a@-b.co",
    "a@b-.co",
    "a@b_c.co",
    "a@1.2.3.4",
    "a@[1.2.3.4]",
    "a..b@c.co",
    ".a@b.co",
    "a.@b.co",
    "a@b@c.co",
    '"quoted local"@b.co',
    "ünï@b.co",
    "a b@c.co",
    "Name <a b@c.co>",
    "Name <a@b .co>",
    "Name a@b.co",
    "a@b.co>",
    "Name <a@b.co> trailing",
    "Name <<a@b.co>>",
    '"unterminated <a@b.co>',
    '"a" b <a@b.co>',
    "a@b.co, d@e.fg",
    "a@b.co d@e.fg",
    "a@b.co;d@e.fg",
    "A <a@b.co>, B <d@e.fg>",
    "Doe, John <a@b.co>",
    "Group: a@b.co;",
    "Group: <a@b.co>;",
    "Group: Name <a@b.co>",
    "undisclosed-recipients:;",
    "a@b.co\r\nBcc: x@y.zz",
    "a@b.co\nBcc: x@y.zz",
    "a@b.co\rBcc: x@y.zz",
    "Name <a@b.co>\r\nBcc: x@y.zz",
    "Na\r\nme <a@b.co>",
    '"Na\r\nme" <a@b.co>',
    "Name <a@b.co\r\n>",
    "a\u0000@b.co",
    "Na\u0000me <a@b.co>",
    "a@b.co\u0000",
    "Tab\tName <a@b.co>",
    `${"l".repeat(65)}@b.co`,
    `a@${"d".repeat(64)}.co`,
    `${"a".repeat(64)}@${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(58)}.com`,
  ])("rejects %j", (input) => {
    expect(parseMailbox(input)).toBeNull();
  });
});

describe("canonical addresses", () => {
  it("parse again as themselves, whatever spelling they came from", () => {
    const spellings = [
      "a@b.co", "A@B.CO", "a@BÜCHER.de", "a@xn--bcher-kva.de", "a@XN--BCHER-KVA.DE", "a@bu\u0308cher.de", "sup@\uff45xample.com",
      "x@xn--ls8h.la", "x@xn--mnchen-3ya.de", "x@m\u00fcnchen.de", "x@xn--80ak6aa92e.com", "x@\u0430\u0440\u0440\u04cf\u0435.com",
      "x@xn--fiqs8s.cn", "x@\u4e2d\u56fd.cn", "x@xn--6frz82g", "x@xn--ab-fna.example", "x@xn--0ca.example",
    ];
    for (const input of spellings) {
      const once = parseMailbox(input);
      if (once === null) continue;
      expect(parseMailbox(once.email), input).toEqual(once);
      expect(toAsciiEmail(once.email), input).toBe(toAsciiEmail(input));
    }
    // An A-label whose U-label tern would refuse (an emoji) stays an A-label.
    expect(parseMailbox("x@xn--ls8h.la")).toEqual({ email: "x@xn--ls8h.la" });
    // NFD and NFC, full-width and plain, are one mailbox.
    expect(parseMailbox("a@bu\u0308cher.de")!.email).toBe(parseMailbox("a@b\u00fccher.de")!.email);
  });
});

describe("formatMailbox", () => {
  it.each<[{ name?: string; email: string }, string]>([
    [{ email: "a@b.co" }, "a@b.co"],
    [{ name: "", email: "a@b.co" }, "a@b.co"],
    [{ name: "John Smith", email: "a@b.co" }, "John Smith <a@b.co>"],
    [{ name: "Doe, John", email: "a@b.co" }, '"Doe, John" <a@b.co>'],
    [{ name: "Acme Inc.", email: "a@b.co" }, '"Acme Inc." <a@b.co>'],
    [{ name: 'Say "hi" \\', email: "a@b.co" }, '"Say \\"hi\\" \\\\" <a@b.co>'],
    [{ name: "Bcc: x@y.zz", email: "a@b.co" }, '"Bcc: x@y.zz" <a@b.co>'],
    [{ email: "a@bücher.de" }, "a@xn--bcher-kva.de"],
  ])("formats %j as %j", (a, expected) => {
    expect(formatMailbox(a)).toBe(expected);
  });

  it.each<string>([
    "Zoë Müller",
    "山田太郎",
    "😀 party",
    "=?UTF-8?Q?not_an_encoded_word?=",
    "Evil\r\nBcc: victim@example.com",
    "x".repeat(200),
    "a, ".repeat(60),
  ])("encodes the display name %j so it reads back exactly", (name) => {
    const formatted = formatMailbox({ name, email: "a@b.co" });
    expect(formatted).not.toMatch(/[\r\n\u0080-\uffff]/);
    expect(formatted.endsWith(" <a@b.co>")).toBe(true);
    const phrase = formatted.slice(0, -" <a@b.co>".length);
    const decoded = phrase.startsWith('"') ? phrase.slice(1, -1).replace(/\\(.)/g, "$1") : decodeUnstructured(phrase);
    expect(decoded).toBe(name);
    for (const token of phrase.split(" ")) expect(token.length).toBeLessThanOrEqual(76);
  });

  it("round-trips ASCII names through parseMailbox", () => {
    for (const name of ["Doe, John", 'Q "x" \\ y', "a.b (c) [d]", "plain name"]) {
      expect(parseMailbox(formatMailbox({ name, email: "a@b.co" }))).toEqual({ name, email: "a@b.co" });
    }
  });

  it("refuses to format an address that could break the header", () => {
    for (const email of ["a@b.co\r\nBcc: x@y.zz", "a b@c.co", "<a@b.co>", "a@b", ""]) {
      expect(() => formatMailbox({ email })).toThrow(TypeError);
    }
  });

  it("gives the domain lower-cased and the envelope form in A-labels", () => {
    expect(domainOf("User@Sub.Example.COM")).toBe("sub.example.com");
    expect(domainOf("a@BÜCHER.de")).toBe("bücher.de");
    expect(toAsciiEmail("User@BÜCHER.de")).toBe("User@xn--bcher-kva.de");
  });
});

// --- header encodings -----------------------------------------------------------------------

describe("encoded-words and unstructured fields", () => {
  const samples = [
    "Hello",
    "Héllo wörld",
    "Ünïcödé ".repeat(30),
    "日本語のテキストはとても長い件名になります。".repeat(5),
    "😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩😘😗".repeat(4),
    "e\u0301".repeat(60),
    "under_score question? equals= =?utf-8?q?x?= tabs\tand  double  spaces",
    "  leading and trailing spaces  ",
    "a".repeat(998),
    "x".repeat(70) + " é",
    "\u0001 control",
  ];

  it.each(samples)("Subject %j round-trips and folds within 78 characters", (subject) => {
    const field = unstructuredField("Subject", subject, "text");
    expect(fieldValue(field, "Subject")).toBe(subject);
    for (const line of field.split("\r\n")) {
      expect(line.length).toBeLessThanOrEqual(78);
      expect(line).not.toMatch(/^[ \t]*$/);
    }
    for (const word of field.match(/=\?[^?]+\?[QB]\?[^?]*\?=/g) ?? []) {
      expect(word.length).toBeLessThanOrEqual(75);
      decodeWord(word); // every word is whole UTF-8 by itself
    }
    expect(field).not.toMatch(/[^\x20-\x7e\r\n\t]/);
  });

  it("keeps a short ASCII subject as it is", () => {
    expect(unstructuredField("Subject", "Your receipt #42", "text")).toBe("Subject: Your receipt #42");
  });

  it("folds a long ASCII subject at spaces without encoding it", () => {
    const subject = Array.from({ length: 40 }, (_, i) => `word${i}`).join(" ");
    const field = unstructuredField("Subject", subject, "text");
    expect(field).not.toContain("=?");
    expect(field.split("\r\n").length).toBeGreaterThan(1);
    expect(unfold(field)).toBe(`Subject: ${subject}`);
  });

  it("encodes every character on its own boundary, whatever the room", () => {
    const next = rng(7);
    for (let i = 0; i < 300; i++) {
      const text = randomString(next, HEADER_POOL, 1 + Math.floor(next() * 120));
      const firstRoom = 24 + Math.floor(next() * 52);
      const words = encodeWords(text, firstRoom);
      expect(words[0]!.length).toBeLessThanOrEqual(firstRoom);
      for (const w of words) expect(w.length).toBeLessThanOrEqual(75);
      expect(words.map(decodeWord).join("")).toBe(text);
    }
  });

  it("round-trips random subjects and custom header values", () => {
    const next = rng(42);
    for (let i = 0; i < 300; i++) {
      const value = randomString(next, HEADER_POOL, Math.floor(next() * 200));
      const subject = unstructuredField("Subject", value, "text");
      expect(fieldValue(subject, "Subject")).toBe(value);
      for (const line of subject.split("\r\n")) expect(line.length).toBeLessThanOrEqual(78);
      const custom = unstructuredField("X-Custom-Header", value, "verbatim");
      expect(fieldValue(custom, "X-Custom-Header")).toBe(value);
      for (const line of custom.split("\r\n")) expect(line.length).toBeLessThanOrEqual(998);
    }
  });

  it("writes a caller's ASCII header verbatim, even a long unbreakable one", () => {
    const value = `<https://example.com/unsubscribe/${"a".repeat(120)}>, <mailto:unsub@example.com?subject=unsubscribe>`;
    const field = unstructuredField("List-Unsubscribe", value, "verbatim");
    expect(field).not.toContain("=?");
    expect(unfold(field)).toBe(`List-Unsubscribe: ${value}`);
    expect(unstructuredField("X-Pre", "=?UTF-8?B?w6k=?=", "verbatim")).toBe("X-Pre: =?UTF-8?B?w6k=?=");
  });

  it("encodes a caller's header only when a line would pass 998 octets", () => {
    const value = "y".repeat(2000);
    const field = unstructuredField("X-Long", value, "verbatim");
    for (const line of field.split("\r\n")) expect(line.length).toBeLessThanOrEqual(78);
    expect(fieldValue(field, "X-Long")).toBe(value);
  });

  it("starts the value on the next line when the field name leaves no room", () => {
    const name = "X-" + "N".repeat(70);
    const field = unstructuredField(name, "grüße", "verbatim");
    expect(field.split("\r\n")[0]).toBe(`${name}:`);
    expect(fieldValue(field, name)).toBe("grüße");
  });

  it("folds address lists after commas, never inside an address", () => {
    const items = Array.from({ length: 40 }, (_, i) => [`Person${i}`, `<person${i}@example.com>`]);
    const field = listField("To", items);
    const lines = field.split("\r\n");
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(78);
    for (const line of lines.slice(0, -1)) expect(line).toMatch(/,$/);
    expect(unfold(field)).toBe("To: " + items.map((t) => t.join(" ")).join(", "));
  });

  it("folds structured parameters before a parameter", () => {
    const field = parameterField("Content-Type", "multipart/related", ['type="multipart/alternative"', 'boundary="=_tern_r_0123456789abcdef"']);
    expect(field).toBe('Content-Type: multipart/related; type="multipart/alternative";\r\n boundary="=_tern_r_0123456789abcdef"');
  });
});

describe("attachment file names (RFC 2231)", () => {
  it("keeps a short ASCII name as a quoted-string", () => {
    expect(fileNameParams("filename", "report.pdf")).toEqual(['filename="report.pdf"']);
    expect(fileNameParams("filename", 'a "b" \\c.txt')).toEqual(['filename="a \\"b\\" \\\\c.txt"']);
    expect(fileNameParams("filename", "semi;colon 'q' %p *s.txt")).toEqual([`filename="semi;colon 'q' %p *s.txt"`]);
  });

  it.each([
    "résumé.pdf",
    "日本語のファイル名.xlsx",
    "😀 emoji report 2026.csv",
    "Überweisungsbestätigung für die Rechnung Nummer 2026-0001 vom ersten Januar.pdf",
    "長".repeat(120) + ".txt",
    "a".repeat(200) + ".txt",
    "semi;colon 'quote' %percent *star ü.txt",
  ])("writes %j as an ASCII fallback plus UTF-8 sections within 78 columns", (name) => {
    const params = fileNameParams("filename", name);
    const fallback = /^filename="((?:[^"\\]|\\.)*)"$/.exec(params[0]!);
    expect(fallback).not.toBeNull();
    expect(fallback![1]).toMatch(/^[\x20-\x7e]+$/);
    expect(decode2231(params.slice(1), "filename")).toBe(name);
    const field = parameterField("Content-Disposition", "attachment", params);
    for (const line of field.split("\r\n")) expect(line.length).toBeLessThanOrEqual(78);
  });

  it("makes a readable ASCII fallback that keeps the extension", () => {
    expect(asciiFallbackName("résumé.pdf")).toBe("resume.pdf");
    expect(asciiFallbackName("日本語.xlsx")).toBe("attachment.xlsx");
    expect(asciiFallbackName("..\\..//etc/passwd")).not.toMatch(/[/\\]/);
    expect(asciiFallbackName("é".repeat(300) + ".pdf", 40)).toHaveLength(40);
  });
});

describe("content types", () => {
  it.each<[string, { type: string; params: string[] } | null]>([
    ["application/pdf", { type: "application/pdf", params: [] }],
    ["Image/PNG", { type: "image/png", params: [] }],
    ["text/calendar; method=REQUEST; charset=utf-8", { type: "text/calendar", params: ["method=REQUEST", "charset=utf-8"] }],
    ['text/plain; name="old.txt"; format=flowed', { type: "text/plain", params: ["format=flowed"] }],
    ["text/plain;", { type: "text/plain", params: [] }],
    ["application/pdf\r\nBcc: x@y.zz", null],
    ["pdf", null],
    ["a/b/c", null],
    ["text/plain; charset", null],
    ["text/plain; a=b c", null],
    ["text/plain; a=\"b\r\n\"", null],
  ])("parses %j", (input, expected) => {
    expect(parseContentType(input)).toEqual(expected);
  });
});

// --- body encodings -------------------------------------------------------------------------

describe("quoted-printable", () => {
  it.each<[string, string]>([
    ["plain", "plain"],
    ["trailing space ", "trailing space=20"],
    ["trailing tab\t", "trailing tab=09"],
    ["inner  spaces\tand tabs stay", "inner  spaces\tand tabs stay"],
    ["a=b", "a=3Db"],
    ["café", "caf=C3=A9"],
    ["line1\nline2\r\nline3\rline4", "line1\r\nline2\r\nline3\r\nline4"],
    ["ends with newline\n", "ends with newline\r\n"],
    ["space before break \nnext", "space before break=20\r\nnext"],
    [".", "."],
    ["a\n.\nb", "a\r\n.\r\nb"],
    ["nul\u0000", "nul=00"],
    ["", ""],
  ])("encodes %j", (input, expected) => {
    expect(encodeQuotedPrintable(input)).toBe(expected);
  });

  it("breaks long lines softly at 76 characters without splitting an escape", () => {
    for (const line of ["x".repeat(500), "é".repeat(300), "a=".repeat(200), ("word " + "ü").repeat(80), " ".repeat(200)]) {
      const encoded = encodeQuotedPrintable(line);
      const lines = encoded.split("\r\n");
      expect(lines.length).toBeGreaterThan(1);
      for (const l of lines) expect(l.length).toBeLessThanOrEqual(76);
      for (const l of lines.slice(0, -1)) expect(l.endsWith("=")).toBe(true);
      expect(decodeQp(encoded)).toBe(line);
    }
  });

  it("fills lines to exactly 76 characters", () => {
    expect(encodeQuotedPrintable("x".repeat(76))).toBe("x".repeat(76));
    expect(encodeQuotedPrintable("x".repeat(77))).toBe("x".repeat(75) + "=\r\nxx");
  });

  it("round-trips random text with every kind of line break", () => {
    const next = rng(1234);
    for (let i = 0; i < 200; i++) {
      const text = randomString(next, BODY_POOL, Math.floor(next() * 400));
      const encoded = encodeQuotedPrintable(text);
      expect(decodeQp(encoded)).toBe(text.replace(/\r\n|\r|\n/g, "\r\n"));
      for (const line of encoded.split("\r\n")) {
        expect(line.length).toBeLessThanOrEqual(76);
        expect(line).not.toMatch(/[ \t]$/);
        expect(line).toMatch(/^[\x20-\x7e\t]*$/);
      }
    }
  });

  it("chooses 7bit only for short printable ASCII lines", () => {
    expect(isSevenBitSafe("Hello\nWorld\r\n.\n")).toBe(true);
    expect(isSevenBitSafe("x".repeat(78))).toBe(true);
    expect(isSevenBitSafe("x".repeat(79))).toBe(false);
    expect(isSevenBitSafe("café")).toBe(false);
    expect(isSevenBitSafe("trailing \nspace")).toBe(false);
    expect(isSevenBitSafe("nul\u0000")).toBe(false);
    expect(isSevenBitSafe("looks like =_tern_a_ boundary")).toBe(false);
  });
});

describe("base64", () => {
  it("matches btoa in 76-character lines for every length", () => {
    for (let n = 0; n <= 200; n++) {
      const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 37 + n) & 255);
      const encoded = encodeBase64Lines(bytes);
      const lines = encoded === "" ? [] : encoded.split("\r\n");
      for (const line of lines.slice(0, -1)) expect(line).toHaveLength(76);
      expect(lines.at(-1)?.length ?? 0).toBeLessThanOrEqual(76);
      expect(encoded.replace(/\r\n/g, "")).toBe(btoa(String.fromCharCode(...bytes)));
    }
  });
});

// --- whole messages -------------------------------------------------------------------------

describe("buildMessage", () => {
  it("writes the header fields in the contract's order", () => {
    const { text } = build({
      to: [{ email: "a@example.com" }, { name: "B", email: "b@example.com" }],
      cc: [{ email: "c@example.com" }],
      replyTo: [{ email: "r@example.com" }],
      headers: { "X-Entity-Ref-ID": "abc", "List-Unsubscribe": "<https://acme.test/u>" },
    });
    expect(headerLines(text)).toEqual([
      "From: Acme <hello@acme.test>",
      "To: a@example.com, B <b@example.com>",
      "Cc: c@example.com",
      "Reply-To: r@example.com",
      "Subject: Hello",
      "Date: Thu, 01 Jan 2026 09:05:07 +0000",
      "Message-ID: <0192d4c0-7b3a-7000-8000-000000000001@tern.test>",
      "MIME-Version: 1.0",
      "X-Entity-Ref-ID: abc",
      "List-Unsubscribe: <https://acme.test/u>",
      "Content-Type: text/plain; charset=utf-8",
      "Content-Transfer-Encoding: 7bit",
    ]);
    expect(text.endsWith("\r\n\r\nHi there\r\n")).toBe(true);
  });

  it("leaves out Cc and Reply-To when there are none, and To when it is empty", () => {
    const { root } = build({ to: [] });
    const names = root.headers.map(([n]) => n.toLowerCase());
    expect(names).not.toContain("cc");
    expect(names).not.toContain("reply-to");
    expect(names).not.toContain("to");
  });

  it("never writes a Bcc header, whatever the caller puts in headers or names", () => {
    const { text } = build({
      headers: { Bcc: "spy@evil.test", BCC: "spy@evil.test", bcc: "spy@evil.test", "X-Ok": "1" },
      to: [{ name: "Bcc: spy@evil.test", email: "a@example.com" }],
      subject: "Bcc: spy@evil.test",
    });
    for (const line of text.split("\r\n")) expect(line).not.toMatch(/^bcc\s*:/i);
    expect(text).toContain("X-Ok: 1");
  });

  it("ignores every header name tern owns, in any case", () => {
    const owned = ["From", "TO", "cc", "Bcc", "subject", "DATE", "Message-Id", "mime-version", "Content-Type", "content-transfer-encoding", "Content-Disposition", "Content-ID", "DKIM-Signature", "Sender", "Return-Path"];
    const headers = Object.fromEntries(owned.map((n) => [n, "injected"]));
    const { text, root } = build({ headers });
    expect(text).not.toContain("injected");
    for (const n of owned) expect(isOwnedHeaderName(n)).toBe(true);
    expect(isOwnedHeaderName("X-Custom")).toBe(false);
    expect(root.headers.filter(([n]) => n.toLowerCase() === "from")).toHaveLength(1);
  });

  it("never writes a trace or verdict header (an email accepted before the API refused them)", () => {
    const trace = ["Received", "Authentication-Results", "ARC-Seal", "Resent-From", "Received-SPF", "Delivered-To", "X-Spam-Status"];
    const { text } = build({ headers: { ...Object.fromEntries(trace.map((n) => [n, "forged"])), "X-Ok": "1" } });
    expect(text).not.toContain("forged");
    expect(text).toContain("X-Ok: 1");
  });

  it("writes a custom Reply-To only when the message has no replyTo of its own", () => {
    expect(build({ headers: { "Reply-To": "custom@example.com" } }).text).toContain("Reply-To: custom@example.com");
    const { root } = build({ headers: { "Reply-To": "custom@example.com" }, replyTo: [{ email: "r@example.com" }] });
    expect(root.headers.filter(([n]) => n.toLowerCase() === "reply-to")).toEqual([["Reply-To", "r@example.com"]]);
  });

  it("refuses header injection that slipped past validation", () => {
    expect(() => buildMessage(baseInput({ headers: { "X-A": "v\r\nBcc: spy@evil.test" } }))).toThrow(TypeError);
    expect(() => buildMessage(baseInput({ headers: { "X-A": "v\nBcc: spy@evil.test" } }))).toThrow(TypeError);
    expect(() => buildMessage(baseInput({ headers: { "X-A\r\nBcc": "spy@evil.test" } }))).toThrow(TypeError);
    expect(() => buildMessage(baseInput({ headers: { "Bad Name": "v" } }))).toThrow(TypeError);
    expect(() => buildMessage(baseInput({ subject: "Hi\r\nBcc: spy@evil.test" }))).toThrow(TypeError);
    expect(() => buildMessage(baseInput({ to: [{ email: "a@b.co\r\nBcc: spy@evil.test" }] }))).toThrow(TypeError);
    expect(() => buildMessage(baseInput({ messageId: "x>\r\nBcc: y@z" }))).toThrow(TypeError);
  });

  it("encodes non-ASCII custom header values and subjects", () => {
    const { root } = build({ subject: "Grüße aus Köln 🎉", headers: { "X-Greeting": "Grüße" } });
    const raw = root.rawHeaders.split("\r\n");
    const field = (name: string) => {
      const start = raw.findIndex((l) => l.startsWith(`${name}:`));
      let end = start + 1;
      while (end < raw.length && /^[ \t]/.test(raw[end]!)) end++;
      return raw.slice(start, end).join("\r\n");
    };
    expect(fieldValue(field("Subject"), "Subject")).toBe("Grüße aus Köln 🎉");
    expect(fieldValue(field("X-Greeting"), "X-Greeting")).toBe("Grüße");
  });

  describe("structure", () => {
    const png = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 255]);
    const inline = { filename: "logo.png", contentType: "image/png", content: png, contentId: "logo" };
    const pdf = { filename: "a.pdf", contentType: "application/pdf", content: Uint8Array.from([1, 2, 3]) };

    it("sends only text as a single text/plain part", () => {
      const { root } = build({ text: "Only text" });
      expect(shape(root)).toBe("text/plain");
      expect(header(root, "content-type")).toBe("text/plain; charset=utf-8");
      expect(partBody(root)).toBe("Only text\r\n");
    });

    it("sends only html as a single text/html part (an empty text opts out)", () => {
      expect(shape(build({ text: undefined, html: "<p>x</p>" }).root)).toBe("text/html");
      expect(shape(build({ text: "", html: "<p>x</p>" }).root)).toBe("text/html");
    });

    it("puts text before html in multipart/alternative", () => {
      const { root } = build({ text: "T", html: "<p>H</p>" });
      expect(shape(root)).toBe("multipart/alternative[text/plain,text/html]");
      expect(partBody(root.parts[0]!)).toBe("T");
      expect(partBody(root.parts[1]!)).toBe("<p>H</p>");
    });

    it("wraps the alternative and inline parts in multipart/related", () => {
      const { root } = build({ text: "T", html: '<img src="cid:logo">', attachments: [inline] });
      expect(shape(root)).toBe("multipart/related[multipart/alternative[text/plain,text/html],image/png]");
      expect(header(root, "content-type")).toMatch(/^multipart\/related; type="multipart\/alternative"; boundary="/);
      const part = root.parts[1]!;
      expect(header(part, "content-id")).toBe("<logo>");
      expect(header(part, "content-disposition")).toBe('inline; filename="logo.png"');
      expect(header(part, "content-transfer-encoding")).toBe("base64");
      expect(decodeBase64(part.body)).toEqual(png);
    });

    it("uses text/html as the related root when there is no text", () => {
      const { root } = build({ text: undefined, html: '<img src="cid:logo">', attachments: [{ ...inline, contentId: "<logo>" }] });
      expect(shape(root)).toBe("multipart/related[text/html,image/png]");
      expect(header(root, "content-type")).toMatch(/type="text\/html"/);
      expect(header(root.parts[1]!, "content-id")).toBe("<logo>");
    });

    it("puts regular attachments in multipart/mixed on the outside", () => {
      const { root } = build({ text: "T", html: '<img src="cid:logo">', attachments: [pdf, inline] });
      expect(shape(root)).toBe(
        "multipart/mixed[multipart/related[multipart/alternative[text/plain,text/html],image/png],application/pdf]",
      );
      const att = root.parts[1]!;
      expect(header(att, "content-disposition")).toBe('attachment; filename="a.pdf"');
      expect(header(att, "content-type")).toBe('application/pdf; name="a.pdf"');
      expect(decodeBase64(att.body)).toEqual(pdf.content);
      expect(shape(build({ text: "T", attachments: [pdf] }).root)).toBe("multipart/mixed[text/plain,application/pdf]");
    });

    it("sends inline parts as attachments when there is no html to reference them", () => {
      const { root } = build({ text: "T", attachments: [inline] });
      expect(shape(root)).toBe("multipart/mixed[text/plain,image/png]");
      expect(header(root.parts[1]!, "content-id")).toBe("<logo>");
    });

    it("sends an unknown, invalid or non-base64able content type as application/octet-stream", () => {
      for (const contentType of ["not a type", "message/rfc822", "multipart/mixed", "x/y\r\nBcc: a@b.co"]) {
        const { root } = build({ attachments: [{ ...pdf, contentType }] });
        expect(header(root.parts[1]!, "content-type")).toBe('application/octet-stream; name="a.pdf"');
      }
      const { root } = build({ attachments: [{ ...pdf, contentType: "text/calendar; method=REQUEST" }] });
      expect(header(root.parts[1]!, "content-type")).toBe('text/calendar; method=REQUEST; name="a.pdf"');
    });

    it("refuses a Content-ID that could break its header", () => {
      expect(isValidContentId("logo@acme")).toBe(true);
      expect(isValidContentId("<logo>")).toBe(true);
      for (const bad of ["", "a b", "a>b", "x\r\nBcc: y", "é"]) {
        expect(isValidContentId(bad)).toBe(false);
        expect(() => buildMessage(baseInput({ html: "<p>x</p>", attachments: [{ ...inline, contentId: bad || "<>" }] }))).toThrow(TypeError);
      }
    });
  });

  it("chooses 7bit for short ASCII and quoted-printable for everything else", () => {
    const cte = (text: string) => header(build({ text }).root, "content-transfer-encoding");
    expect(cte("Short ASCII\nlines.")).toBe("7bit");
    expect(cte("café")).toBe("quoted-printable");
    expect(cte("x".repeat(100))).toBe("quoted-printable");
    expect(cte("trailing ")).toBe("quoted-printable");
  });

  it("is byte-for-byte deterministic with a boundary seed", () => {
    const input = baseInput({ text: "T", html: "<p>H</p>", attachments: [{ filename: "a.bin", contentType: "application/octet-stream", content: new Uint8Array(10) }] });
    const a = buildMessage(input);
    const b = buildMessage({ ...input });
    expect(b).toEqual(a);
    const other = wireText(buildMessage({ ...input, boundarySeed: "seed-2" }));
    expect(other).not.toBe(wireText(a));
    const boundariesOf = (t: string) => [...t.matchAll(/boundary="([^"]+)"/g)].map((m) => m[1]!);
    const bs = boundariesOf(wireText(a));
    expect(new Set(bs).size).toBe(2);
    for (const x of bs) for (const y of bs) if (x !== y) expect(x.startsWith(y)).toBe(false);
    const random1 = boundariesOf(wireText(buildMessage({ ...input, boundarySeed: undefined })));
    const random2 = boundariesOf(wireText(buildMessage({ ...input, boundarySeed: undefined })));
    expect(random1).not.toEqual(random2);
  });

  it("keeps big and odd messages 7-bit, CRLF-only and within 998 octets per line", () => {
    const next = rng(99);
    const oddText = randomString(next, BODY_POOL, 20_000);
    const input = baseInput({
      from: { name: "Ünïcödé ".repeat(40), email: "sender@bücher.de" },
      to: Array.from({ length: 50 }, (_, i) => ({ name: `Recipient ${i} with a fairly long name, Inc.`, email: `r${i}@example.com` })),
      cc: [{ name: "日本".repeat(100), email: "cc@example.jp" }],
      replyTo: [{ email: "reply@example.com" }],
      subject: "S".repeat(998),
      text: oddText,
      html: "<p>" + "x".repeat(1_000_000) + "</p>\r<p>\u0000\r\n.</p>\n\n.\n",
      headers: { "X-Long": "z".repeat(3000), "X-Spaces": "word ".repeat(400), "X-Tabs": "\tlead\tand\ttrail\t" },
      attachments: [
        { filename: "f".repeat(300) + "é.bin", contentType: "application/octet-stream", content: Uint8Array.from({ length: 100_000 }, () => Math.floor(next() * 256)) },
        { filename: "", contentType: "text/plain", content: new Uint8Array(0) },
      ],
    });
    const text = wireText(buildMessage(input));
    const root = parseEntity(text);
    for (const line of headerLines(text)) {
      // Only unbreakable caller tokens may pass 78.
      if (line.length > 78) expect(line).toMatch(/^X-Long:|^ z+$/);
    }
    const alt = root.parts[0]!;
    expect(partBody(alt.parts[0]!)).toBe(oddText.replace(/\r\n|\r|\n/g, "\r\n"));
    expect(partBody(alt.parts[1]!)).toBe("<p>" + "x".repeat(1_000_000) + "</p>\r\n<p>\u0000\r\n.</p>\r\n\r\n.\r\n");
    expect(decodeBase64(root.parts[1]!.body)).toEqual(input.attachments[0]!.content);
    expect(root.parts[2]!.body).toBe("");
    expect(fieldValue(`Subject: ${header(root, "subject")}`, "Subject")).toBe("S".repeat(998));
  });

  it("keeps a body line that is only a dot (the transport dot-stuffs)", () => {
    const { text } = build({ text: "a\n.\n..\nb" });
    expect(text).toContain("\r\n.\r\n..\r\nb\r\n");
  });
});

describe("htmlToText", () => {
  it("renders links, skips images and hidden parts, and keeps heading case", () => {
    const html = `<html><head><title>T</title><style>p{color:red}</style></head><body>
      <div style="display:none">preheader</div>
      <h1>Welcome Back</h1>
      <p>Visit <a href="https://acme.test/a">our site</a> or <a href="https://acme.test/">https://acme.test/</a>.
      <img src="https://acme.test/logo.png" alt="Logo"></p>
      <table><tr><td>Left cell</td><td>Right cell</td></tr></table>
      <ul><li>one</li><li>two</li></ul></body></html>`;
    const text = htmlToText(html);
    expect(text).toContain("Welcome Back");
    expect(text).toContain("our site [https://acme.test/a]");
    expect(text).toContain("https://acme.test/.");
    expect(text).not.toContain("[https://acme.test/]");
    expect(text).not.toMatch(/logo|preheader|color:red|\bT\b/i);
    expect(text).toMatch(/Left cell\s*\n\s*Right cell/);
    expect(text).toContain(" * one\n * two");
  });

  it("does not wrap long paragraphs", () => {
    const words = Array.from({ length: 50 }, (_, i) => `word${i}`).join(" ");
    expect(htmlToText(`<p>${words}</p>`)).toBe(words);
  });
});

// The send path holds a message to 40 MB with these bounds before it is built (issue 20,
// item 3): they must never count less than buildMessage writes.
describe("message size bounds", () => {
  const format = (a: { name?: string; email: string }) => (a.name ? `${a.name} <${a.email}>` : a.email);
  const texts = [
    "", "short", "x".repeat(78), "x".repeat(79), "=".repeat(5000), "a=_b\n".repeat(300), " trailing \n".repeat(100),
    "Grüße ✓ 😀 ".repeat(2000), "\r\n\r\n\n\r".repeat(500), "\u00ff".repeat(10_000), "😀".repeat(10_000), "\t x\t\n".repeat(400),
  ];
  it.each(texts.map((t, i) => [i, t] as const))("never undercount: text and html %#", (_, body) => {
    const subject = body.slice(0, 900).replace(/[\r\n]/g, " ") || "s";
    const headers = { "X-Mixed": body.slice(0, 1500).replace(/[\r\n]/g, " "), "X-Plain": "1" };
    const filename = "Überweisung 😀 " + "n".repeat(200);
    const attachments = [{ filename, contentType: "application/pdf", content: new Uint8Array(1000 + body.length % 977), contentId: "logo" }];
    const input = mimeInput({ subject, headers, text: body || undefined, html: body ? `<p>${body}</p>` : undefined, attachments });
    const built = buildMessage(input).byteLength;
    const bound = messageBaseBound({
      subject, headers, html: input.html ?? null, text: input.text ?? null,
      addresses: [format(input.from), ...input.to.map(format)],
    }) + attachmentBound(attachments[0]!.content.byteLength, attachments[0]!);
    expect(built).toBeLessThanOrEqual(bound);
    // ...and not by much: the bound is for refusing, so it must stay close.
    expect(bound - built).toBeLessThan(Math.max(20_000, built * 0.1));
  });

  it("largestAttachmentWithin is the largest size whose bound fits", () => {
    const meta = { contentType: "application/octet-stream" };
    for (const room of [0, 500, 9_000, 9_500, 100_000, 40 * 1024 * 1024, 12_345_678]) {
      const n = largestAttachmentWithin(room, meta);
      if (n > 0) expect(attachmentBound(n, meta)).toBeLessThanOrEqual(room);
      expect(attachmentBound(n + 1, meta)).toBeGreaterThan(room);
    }
    expect(base64LinesLength(57)).toBe(76);
  });
});
