// Malformed and hostile mail never crashes anything, and accepted mail is never lost. A seeded
// generator feeds the Worker's email() handler what strangers can send: truncated and
// colon-less header lines, enormous and countless headers, 8-bit and invalid UTF-8, broken
// RFC 2047 words, base64 and quoted-printable with garbage, multiparts with missing, empty or
// duplicate boundaries and hundreds of levels of nesting, hostile attachment filenames, broken
// Content-Type parameters, and delivery reports (DSNs, ARF) that name other accounts' emails.
// Each message is refused with an SMTP reason and leaves nothing behind, or is stored whole and
// reads back through the API as well-formed strings; a report never touches another account.
import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { handleEmail, type EmailOutcome } from "../../worker/inbound/email-handler.ts";
import { INBOUND_MAX_BYTES, INBOUND_MAX_LINES } from "../../worker/inbound/receive.ts";
import { MAX_REPORT_BYTES, parseReport } from "../../worker/reports/parse.ts";
import { returnPathAddress } from "../../worker/sending/return-path.ts";
import worker from "../../worker/index.ts";
import { random } from "../support/random.ts";
import { api, createAccount, insertDomain, type TestAccount } from "./fixtures.ts";
import { incoming as incomingFrom } from "./incoming.ts";

const SEED = 20261112;

// ---- the generator -------------------------------------------------------------------------
// Messages are built as binary strings (one char per byte) so that 8-bit and invalid UTF-8
// go through exactly as written; utf8() puts real UTF-8 in.

type Rand = () => number;
const int = (r: Rand, lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));
const pick = <T,>(r: Rand, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
const chance = (r: Rand, p: number) => r() < p;
const utf8 = (s: string) => String.fromCharCode(...new TextEncoder().encode(s));
const bytesOf = (s: string) => Uint8Array.from(s, (c) => c.charCodeAt(0) & 0xff);
const junk = (r: Rand, n: number) => Array.from({ length: n }, () => String.fromCharCode(int(r, 0, 255))).join("");
const b64 = (binary: string) => btoa(binary);

/** Byte sequences that are not UTF-8: lone continuations, overlongs, surrogates, truncations. */
const INVALID_UTF8 = ["\xff", "\xfe\xff", "\xc0\x80", "\xed\xa0\x80", "\xe2\x82", "\xf4\x90\x80\x80", "\x80\x80", "\xf0\x9f\x98"];
const CONTROLS = ["\x00", "\x01", "\x07", "\x08", "\x0b", "\x0c", "\x1b[2J", "\x7f", "\x1b]0;pwned\x07"];

const HOSTILE_NAMES = [
  "../../../../etc/passwd", "..\\..\\..\\windows\\system32\\cmd.exe", "/absolute/path.txt", "a/../../b.pdf", "%2e%2e%2f%2e%2e%2fx",
  "", " ", ".", "..", "\x00", "evil\x00.pdf.exe", "line\r\nContent-Type: text/html", "tab\there", "\x1b[31mred\x1b[0m.txt",
  "x".repeat(5000), `${"d/".repeat(300)}deep.txt`, "CON", "nul.txt", ".htaccess", utf8("\u202egpj.exe"), utf8("ünïcödé ✓.txt"),
  "\xff\xfe.bin", '"quoted".txt', "semi;colon.txt", "a\\\"b.txt",
];

/** A hostile filename written one of the ways MIME allows. */
function filenameParam(r: Rand, name: string): string {
  switch (int(r, 0, 4)) {
    case 0: return `filename="${name}"`;
    case 1: return `filename=${name}`;
    case 2: return `filename*=utf-8''${[...name].map((c) => `%${c.charCodeAt(0).toString(16).padStart(2, "0")}`).join("")}`;
    case 3: return `filename="=?UTF-8?B?${b64(name)}?="`;
    default: return `filename*0="${name.slice(0, 3)}"; filename*1="${name.slice(3)}"; filename*3=broken`;
  }
}

/** A header value that breaks RFC 2047 (or uses it to smuggle bytes). */
function encodedWord(r: Rand): string {
  return pick(r, [
    "=?UTF-8?B?!!!not base64!!!?=", "=?UTF-8?B?SGVsbG8", "=?UTF-8?Q?=ZZ=0=?=", "=?x-no-such-charset?Q?abc?=", "=?UTF-8?X?abc?=", "=??B?QUJD?=",
    `=?UTF-8?B?${b64("\x00\x01\x1b[2J")}?=`, "=?UTF-8?Q?Bcc=3A_victim@example.org=0D=0AX-Injected:_1?=", `=?UTF-8?B?${b64("\xff\xfe\xc0\x80")}?=`,
    `=?UTF-8?B?${b64(`=?UTF-8?B?${b64("nested")}?=`)}?=`, `=?ISO-2022-JP?B?${b64("\x1b$B\x1b(B\x1b$")}?=`, `=?UTF-16?B?${b64("\xd8\x00")}?=`,
    "=?UTF-8*en?Q?a?= =?UTF-8?Q?b", `=?UTF-8?Q?${"=E2=82".repeat(50)}?=`,
  ]);
}

/** One header field that is wrong in some way. */
function badHeader(r: Rand): string {
  switch (int(r, 0, 13)) {
    case 0: return "This line has no colon at all";
    case 1: return `X-Long: ${"a".repeat(int(r, 1000, 60_000))}`;
    case 2: return `X-8bit: ${junk(r, int(r, 1, 200)).replace(/[\r\n]/g, "")}`;
    case 3: return `X-Invalid: ${pick(r, INVALID_UTF8)}${pick(r, INVALID_UTF8)}`;
    case 4: return `X-Encoded: ${encodedWord(r)}`;
    case 5: return `X-Control: a${pick(r, CONTROLS)}b`;
    case 6: return `${pick(r, ["__proto__", "constructor", "toString", "hasOwnProperty", "X Space", "X\x01Ctl", "\xffName", ""])}: value`;
    case 7: return " folded continuation with nothing before it";
    case 8: return "X-Empty:";
    case 9: return ":";
    case 10: return `Content-Type: ${pick(r, [";;;", "multipart/mixed; boundary", "text/plain; charset=\"unterminated", "text/plain; charset=x-nope", "/", "text/", "multipart/mixed; boundary=\"\"", "text/plain; charset*=utf-8''%ff%fe", "text/plain; =", "multipart/alternative; boundary=a; boundary=b"])}`;
    case 11: return `Content-Transfer-Encoding: ${pick(r, ["x-unknown", "base64; junk", "BASE64", "quoted-printable quoted-printable", "7bit\x00", "binary"])}`;
    case 12: return `Date: ${pick(r, ["yesterday", "Mon, 32 Foo 99999 25:61:61 +9999", "", "\xff"])}`;
    default: return `Message-ID: ${pick(r, ["<>", "<<<a@b>>>", "no-brackets", `<${"m".repeat(3000)}@x>`, "<a\x00b@c>", "<a@b> <c@d>"])}`;
  }
}

/** A leaf part's body, in some encoding, maybe broken. */
function leaf(r: Rand): { headers: string[]; body: string } {
  const text = chance(r, 0.5) ? utf8("Héllo wörld ✓ ") + junk(r, int(r, 0, 40)) : pick(r, INVALID_UTF8).repeat(int(r, 1, 20));
  switch (int(r, 0, 6)) {
    case 0: return { headers: ["Content-Type: text/plain; charset=utf-8"], body: text };
    case 1: return { headers: ["Content-Type: text/html", "Content-Transfer-Encoding: base64"], body: `${b64(`<p>${text.replace(/[\r\n]/g, "")}</p>`)}!!!@@@===AAAA=\n====` };
    case 2: return { headers: ["Content-Type: text/plain; charset=iso-8859-1", "Content-Transfer-Encoding: quoted-printable"], body: "bad =ZZ escapes =\n=0 and =E9t=C3=A9 =" };
    case 3: return { headers: [`Content-Type: text/plain; charset=${pick(r, ["x-unknown", "utf-7", "utf-16", "ucs-4", "\"\"", "gb2312"])}`], body: text };
    case 4: return { headers: ["Content-Type: message/rfc822", "Content-Transfer-Encoding: base64"], body: b64(`Subject: ${encodedWord(r)}\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n=3D=3D${text}`) };
    case 5: {
      const name = pick(r, HOSTILE_NAMES);
      return {
        headers: [`Content-Type: ${pick(r, ["application/octet-stream", "application/pdf", "image/png", "../../x", "text/plain; name=\"a\x00b\""])}; ${chance(r, 0.5) ? filenameParam(r, name).replace("filename", "name") : "x=y"}`, `Content-Disposition: ${pick(r, ["attachment", "inline", "ATTACHMENT", "bogus", ""])}; ${filenameParam(r, name)}`, `Content-ID: ${pick(r, ["<cid@x>", "", "<\x00>", "no-brackets"])}`, "Content-Transfer-Encoding: base64"],
        body: chance(r, 0.7) ? b64(junk(r, int(r, 0, 3000))) : "%%%not base64 at all%%%",
      };
    }
    default: return { headers: [], body: junk(r, int(r, 0, 200)) };
  }
}

/** A multipart body, maybe broken: wrong, missing, empty or repeated boundaries, nesting. */
function multipart(r: Rand, depth: number): { headers: string[]; body: string } {
  const boundary = pick(r, [`b${depth}`, "same", "", " ", "a b", "\"", "x".repeat(200), "--", "b\xffq"]);
  const parts = Array.from({ length: int(r, 0, 4) }, () => (depth > 0 && chance(r, 0.4) ? multipart(r, depth - 1) : leaf(r)));
  const delimiter = pick(r, [boundary, boundary, boundary, "other", `${boundary}x`]);
  const lines = ["preamble"];
  for (const p of parts) lines.push(`--${delimiter}`, ...p.headers, ...(chance(r, 0.9) ? [""] : []), p.body);
  if (chance(r, 0.7)) lines.push(`--${delimiter}--`);
  if (chance(r, 0.2)) lines.push(`--${delimiter}`, "after the close");
  const header = pick(r, [`multipart/mixed; boundary="${boundary}"`, `multipart/mixed; boundary=${boundary}`, "multipart/mixed", `multipart/alternative; boundary="${boundary}"; boundary="other"`, `multipart/related; boundary="${boundary}`]);
  return { headers: [`Content-Type: ${header}`], body: lines.join("\r\n") };
}

/** A message for `to` (as a binary string), mangled in a few of the ways above. */
function hostileMessage(r: Rand, to: string): string {
  const headers = [
    ...(chance(r, 0.9) ? [`From: ${pick(r, ["Alice <alice@sender.example>", `"${pick(r, CONTROLS)}Name" <ctl@sender.example>`, `${encodedWord(r)} <enc@sender.example>`, "no address at all", "<>", "a@b, c@d, ,,,", "\xff\xfe <eight@bit.example>"])}`] : []),
    ...(chance(r, 0.9) ? [`To: ${pick(r, [to, `Support <${to}>`, `${to}, ${"x@y.example, ".repeat(int(r, 0, 300))}`, "undisclosed-recipients:;", `"\x00" <${to}>`])}`] : []),
    ...(chance(r, 0.8) ? [`Subject: ${pick(r, ["Hello", encodedWord(r), junk(r, 30).replace(/[\r\n]/g, ""), `${encodedWord(r)} ${encodedWord(r)}`])}`] : []),
    ...(chance(r, 0.3) ? [`Cc: ${pick(r, ["=?UTF-8?B?AA==?= <cc@x.example>", "group: a@b.example, c@d.example;", "(((", "\x01@\x02"])}`] : []),
    "MIME-Version: 1.0",
  ];
  for (let i = int(r, 0, 6); i > 0; i--) headers.splice(int(r, 0, headers.length), 0, badHeader(r));
  if (chance(r, 0.05)) for (let i = 0; i < 3000; i++) headers.push(`X-Many-${i}: ${i}`);
  const content = chance(r, 0.6) ? multipart(r, int(r, 0, 4)) : leaf(r);
  const eol = pick(r, ["\r\n", "\r\n", "\n", "\r"]);
  let message = [...headers, ...content.headers, "", content.body].join(eol);
  // Cut anywhere (inside the headers, too): what a dropped connection or a broken relay leaves.
  if (chance(r, 0.1)) message = message.slice(0, int(r, 0, message.length));
  return message;
}

/** Multiparts nested `levels` deep (every level a fresh boundary, or all the same one). */
function nested(levels: number, same: boolean): string {
  let body = "Content-Type: text/plain\r\n\r\ninnermost";
  for (let i = 0; i < levels; i++) {
    const b = same ? "b" : `b${i}`;
    body = `Content-Type: multipart/mixed; boundary="${b}"\r\n\r\n--${b}\r\n${body}\r\n--${b}--`;
  }
  return `From: a@sender.example\r\nTo: x@y.example\r\nSubject: deep\r\n${body}`;
}

// ---- the harness ----------------------------------------------------------------------------

/** A message from a stranger's address, as Email Routing hands it over. */
const incoming = (to: string, raw: Uint8Array, claimedSize?: number) => incomingFrom("sender@sender.example", to, raw, claimedSize);

/** C0 and C1 controls and DEL: never in a string the API hands out as a name, address or header. */
const CONTROL = /[\x00-\x08\x0a-\x1f\x7f-\x9f]/;

function expectCleanString(value: unknown, where: string): void {
  expect(typeof value, where).toBe("string");
  expect((value as string).isWellFormed(), `${where} is not well-formed UTF-16`).toBe(true);
  expect(CONTROL.test(value as string), `${where} holds a control character: ${JSON.stringify(value).slice(0, 200)}`).toBe(false);
}

async function blobKeys(prefix: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await env.BLOBS.list({ prefix, cursor });
    keys.push(...page.objects.map((o) => o.key));
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return keys;
}

async function inboundCount(accountId: string): Promise<number> {
  return (await env.DB.prepare("SELECT count(*) AS n FROM inbound_emails WHERE account_id = ?").bind(accountId).first<{ n: number }>())!.n;
}

/** Under D1's 2,000,000-byte row limit with room for the other columns. */
const D1_ROW_BUDGET = 1_900_000;

const fetchWorker = (url: string) => worker.fetch(new Request(url), env, {} as ExecutionContext);

/** The received email reads back through every endpoint, whole and well-formed. */
async function expectStoredWhole(acct: TestAccount, id: string, raw: Uint8Array, label: string): Promise<void> {
  const row = (await env.DB.prepare("SELECT raw_key, content_key, attachments_json, size FROM inbound_emails WHERE id = ?").bind(id).first<{ raw_key: string; content_key: string; attachments_json: string; size: number }>())!;
  const prefix = `inbound/${acct.accountId}/${id}`;
  expect(row.raw_key, label).toBe(`${prefix}/raw.eml`);
  expect(row.content_key, label).toBe(`${prefix}/content.json`);
  expect(row.size, label).toBe(raw.length);
  for (const a of JSON.parse(row.attachments_json) as { key: string }[]) expect(a.key, label).toMatch(new RegExp(`^${prefix}/attachments/[0-9a-f-]{36}$`));
  // D1 refuses a row over 2,000,000 bytes (the local simulator does not): the row and its
  // email.received event must fit, whatever the headers held.
  const rowBytes = await env.DB.prepare("SELECT length(CAST(from_address AS BLOB)) + length(CAST(to_json AS BLOB)) + length(CAST(cc_json AS BLOB)) + length(CAST(subject AS BLOB)) + length(CAST(coalesce(message_id, '') AS BLOB)) + length(CAST(attachments_json AS BLOB)) AS n FROM inbound_emails WHERE id = ?").bind(id).first<{ n: number }>();
  expect(rowBytes!.n, `${label}: row size`).toBeLessThan(D1_ROW_BUDGET);
  const eventBytes = await env.DB.prepare("SELECT max(length(CAST(payload_json AS BLOB))) AS n FROM webhook_events WHERE account_id = ? AND type = 'email.received' AND payload_json LIKE ?").bind(acct.accountId, `%${id}%`).first<{ n: number }>();
  expect(eventBytes!.n, `${label}: event size`).toBeLessThan(D1_ROW_BUDGET);

  const res = await api(acct.token, "GET", `/emails/receiving/${id}`);
  expect(res.status, label).toBe(200);
  const got = (await res.json()) as Record<string, any>;
  expectCleanString(got.from, `${label}: from`);
  expectCleanString(got.subject, `${label}: subject`);
  for (const a of [...got.to, ...got.cc]) expectCleanString(a, `${label}: to/cc`);
  if (got.message_id !== null) expectCleanString(got.message_id, `${label}: message_id`);
  for (const body of [got.text, got.html]) if (body !== null) expect(typeof body === "string" && body.isWellFormed(), label).toBe(true);
  for (const [name, value] of Object.entries(got.headers as Record<string, unknown>)) {
    expectCleanString(name, `${label}: header name`);
    expectCleanString(value, `${label}: header ${name}`);
  }

  const rawRes = await fetchWorker(got.raw.download_url);
  expect(rawRes.status, label).toBe(200);
  expect(new Uint8Array(await rawRes.arrayBuffer()), label).toEqual(raw);

  const list = await api(acct.token, "GET", `/emails/receiving/${id}/attachments?limit=100`);
  expect(list.status, label).toBe(200);
  expect(((await list.json()) as { data: unknown[] }).data.length, label).toBe(got.attachments.length);
  for (const a of got.attachments as Record<string, any>[]) {
    if (a.filename !== null) expectCleanString(a.filename, `${label}: filename`);
    expectCleanString(a.content_type, `${label}: content_type`);
    if (a.content_id !== null) expectCleanString(a.content_id, `${label}: content_id`);
    if (a.content_disposition !== null) expectCleanString(a.content_disposition, `${label}: content_disposition`);
    const one = await api(acct.token, "GET", `/emails/receiving/${id}/attachments/${a.id}`);
    expect(one.status, label).toBe(200);
    const download = await fetchWorker(a.download_url);
    expect(download.status, `${label}: download of ${JSON.stringify(a.filename)?.slice(0, 80)}`).toBe(200);
    expect((await download.arrayBuffer()).byteLength, label).toBe(a.size);
  }
}

/** Delivers `raw` to `to` and checks the outcome is one the handler is designed to give:
 * refused with an SMTP reason and nothing kept, or stored whole for each owner. */
async function deliver(acct: TestAccount, to: string, raw: Uint8Array, label: string, claimedSize?: number): Promise<EmailOutcome> {
  const rowsBefore = await inboundCount(acct.accountId);
  const blobsBefore = await blobKeys(`inbound/${acct.accountId}/`);
  const msg = incoming(to, raw, claimedSize);
  let outcome: EmailOutcome;
  try {
    outcome = await handleEmail(msg.message, env);
  } catch (err) {
    throw new Error(`${label}: the handler threw: ${err instanceof Error ? err.stack : String(err)}`);
  }
  if (outcome.kind === "rejected") {
    // An SMTP reply line: a 5xx code, an enhanced status, printable ASCII.
    expect(msg.rejected(), label).toMatch(/^5\d\d 5\.\d{1,3}\.\d{1,3} [\x20-\x7e]+$/);
    expect(await inboundCount(acct.accountId), `${label}: a refused message left a row`).toBe(rowsBefore);
    expect(await blobKeys(`inbound/${acct.accountId}/`), `${label}: a refused message left objects`).toEqual(blobsBefore);
  } else {
    expect(outcome.kind, label).toBe("inbound");
    expect(msg.rejected(), label).toBeNull();
    const { ids } = outcome as { ids: string[] };
    expect(ids, label).toHaveLength(1);
    expect(await inboundCount(acct.accountId), label).toBe(rowsBefore + 1);
    await expectStoredWhole(acct, ids[0]!, raw, label);
  }
  return outcome;
}

// ---- inbound mail ---------------------------------------------------------------------------

let acct: TestAccount;
let domain: string;

// The handler logs each report it drops; hundreds of those would bury a failure.
const quiet = vi.spyOn(console, "log").mockImplementation(() => {});
afterAll(() => quiet.mockRestore());

beforeAll(async () => {
  acct = await createAccount({ listening: true });
  domain = `fuzz-${crypto.randomUUID().slice(0, 8)}.example.test`;
  const { domainId } = await insertDomain(acct.accountId, domain);
  await env.DB.prepare("UPDATE domains SET receiving = 1 WHERE id = ?").bind(domainId).run();
});

describe("hostile inbound mail", () => {
  it("every generated message is refused with a reason or stored whole and readable", { timeout: 60_000 }, async () => {
    const r = random(SEED);
    const kinds = { inbound: 0, rejected: 0 };
    for (let i = 0; i < 160; i++) {
      const raw = bytesOf(hostileMessage(r, `support@${domain}`));
      const outcome = await deliver(acct, `support@${domain}`, raw, `message ${i} (seed ${SEED})`);
      kinds[outcome.kind as "inbound" | "rejected"]++;
    }
    // The generator reaches both outcomes: most hostile mail is still mail.
    expect(kinds.inbound).toBeGreaterThan(80);
    expect(kinds.rejected).toBeGreaterThan(0);
    // The list of all of it reads.
    expect((await api(acct.token, "GET", "/emails/receiving?limit=100")).status).toBe(200);
  });

  it.each([
    ["an empty message", () => ""],
    ["a message of one blank line", () => "\r\n"],
    ["headers cut off mid-line", () => "From: a@sender.example\r\nTo: x@y.example\r\nSubj"],
    ["a header block of colon-less lines", () => "no colon here\r\nnor here\r\n\r\nbody"],
    ["a 900 KiB header line", () => `From: a@sender.example\r\nTo: x@y.example\r\nX-Huge: ${"h".repeat(900 * 1024)}\r\n\r\nbody`],
    ["headers over postal-mime's 1 MiB", () => `From: a@sender.example\r\nTo: x@y.example\r\n${"X-Pad: padding padding padding padding padding\r\n".repeat(24_000)}\r\nbody`],
    ["20,000 header fields", () => `From: a@sender.example\r\nTo: x@y.example\r\n${Array.from({ length: 20_000 }, (_, i) => `X-F${i}: ${i}`).join("\r\n")}\r\n\r\nbody`],
    ["multiparts nested 300 deep, fresh boundaries", () => nested(300, false)],
    ["multiparts nested 300 deep, one boundary", () => nested(300, true)],
    ["multiparts nested 40 deep", () => nested(40, false)],
    ["a multipart with an empty boundary", () => 'From: a@sender.example\r\nTo: x@y.example\r\nContent-Type: multipart/mixed; boundary=""\r\n\r\n--\r\nContent-Type: text/plain\r\n\r\nx\r\n----\r\n'],
    ["a multipart whose boundary never appears", () => 'From: a@sender.example\r\nTo: x@y.example\r\nContent-Type: multipart/mixed; boundary="nope"\r\n\r\n--other\r\n\r\nx\r\n--other--\r\n'],
    ["a NUL-filled message", () => "\x00".repeat(4096)],
    ["only invalid UTF-8", () => INVALID_UTF8.join("").repeat(500)],
    ["a subject of encoded NULs and line breaks", () => `From: a@sender.example\r\nTo: x@y.example\r\nSubject: =?UTF-8?B?${b64("a\x00b\r\nBcc: v@x.example\r\n\x1b[2J")}?=\r\n\r\nbody`],
    ["a 100 KiB encoded filename", () => `From: a@sender.example\r\nTo: x@y.example\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Disposition: attachment; filename="${"n".repeat(100 * 1024)}.txt"\r\n\r\nx\r\n--b--\r\n`],
    ["1 MiB of 8-bit header fields (each byte a 3-byte U+FFFD)", () => `From: ${"\xff".repeat(200_000)} <a@sender.example>\r\nTo: ${Array.from({ length: 4000 }, (_, i) => `"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" <r${i}@y.example>`).join(", ")}\r\nSubject: ${"\xff".repeat(300_000)}\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n${Array.from({ length: 40 }, () => `--b\r\nContent-Disposition: attachment; filename="${"\xff".repeat(5000)}"\r\n\r\nx\r\n`).join("")}--b--\r\n`],
    ["100 attachments, each with a hostile name", () => `From: a@sender.example\r\nTo: x@y.example\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n${Array.from({ length: 100 }, (_, i) => `--b\r\nContent-Disposition: attachment; ${filenameParam(random(i + 1), HOSTILE_NAMES[i % HOSTILE_NAMES.length]!)}\r\n\r\nx\r\n`).join("")}--b--\r\n`],
    ["a filename of encoded control characters", () => `From: a@sender.example\r\nTo: x@y.example\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Disposition: attachment; filename*=utf-8''..%2F..%2F%00%0D%0A%1B.txt\r\n\r\nx\r\n--b--\r\n`],
  ])("%s: refused with a reason, or stored whole", { timeout: 20_000 }, async (label, raw) => {
    await deliver(acct, `support@${domain}`, bytesOf(raw()), label);
  });

  it("a million lines are kept; more, which could take postal-mime past the CPU limit, are refused", { timeout: 30_000 }, async () => {
    const head = "From: a@sender.example\r\nTo: x@y.example\r\nContent-Type: text/plain\r\n\r\n";
    const at = bytesOf(`${head}${"a\n".repeat(INBOUND_MAX_LINES - 4)}`);
    expect(await handleEmail(incoming(`support@${domain}`, at).message, env)).toMatchObject({ kind: "inbound" });
    const over = bytesOf(`${head}${"\n".repeat(INBOUND_MAX_LINES - 3)}`);
    const outcome = await deliver(acct, `support@${domain}`, over, "a line too many");
    expect(outcome).toMatchObject({ kind: "rejected", reason: expect.stringMatching(/^552 5\.3\.4 /) });
    // 25 MiB of part boundaries: five million parts, refused before any is parsed.
    const parts = bytesOf(`From: a@sender.example\r\nTo: x@y.example\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n${"--b\r\n".repeat(5_000_000)}`);
    const started = Date.now();
    expect(await handleEmail(incoming(`support@${domain}`, parts).message, env)).toMatchObject({ kind: "rejected" });
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("a message with more attachments than a row can list is refused, not half-kept", async () => {
    const raw = `From: a@sender.example\r\nTo: x@y.example\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n${"--b\r\nContent-Disposition: attachment; filename=a.txt\r\n\r\nx\r\n".repeat(3000)}--b--\r\n`;
    const outcome = await deliver(acct, `support@${domain}`, bytesOf(raw), "3,000 attachments");
    expect(outcome).toMatchObject({ kind: "rejected", reason: expect.stringMatching(/^552 5\.3\.4 /) });
  });

  it("a receive that fails to record leaves no objects behind, and says so by throwing", async () => {
    // D1 down (or a row it will not take): the objects already in R2 are named by no row.
    const failing = new Proxy(env.DB, {
      get: (target, prop) => (prop === "batch" ? () => Promise.reject(new Error("D1 is down")) : (Reflect.get(target, prop) as (...a: unknown[]) => unknown).bind(target)),
    });
    const before = await blobKeys(`inbound/${acct.accountId}/`);
    const rows = await inboundCount(acct.accountId);
    const raw = bytesOf(`From: a@sender.example\r\nTo: x@y.example\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Disposition: attachment; filename=a.txt\r\n\r\nx\r\n--b--\r\n`);
    await expect(handleEmail(incoming(`support@${domain}`, raw).message, { ...env, DB: failing })).rejects.toThrow("D1 is down");
    expect(await blobKeys(`inbound/${acct.accountId}/`)).toEqual(before);
    expect(await inboundCount(acct.accountId)).toBe(rows);
  });

  it("a receive whose upload R2 refuses leaves none of its other objects behind", async () => {
    // The other uploads are still under way when one is refused: they must land before the delete.
    const refusing = new Proxy(env.BLOBS, {
      get: (target, prop) => (prop === "put"
        ? (key: string, ...rest: unknown[]) => (key.endsWith("/raw.eml") ? Promise.reject(new Error("R2 is down")) : (target.put as (...a: unknown[]) => Promise<unknown>)(key, ...rest))
        : (Reflect.get(target, prop) as (...a: unknown[]) => unknown).bind(target)),
    });
    const before = await blobKeys(`inbound/${acct.accountId}/`);
    const raw = bytesOf(`From: a@sender.example\r\nTo: x@y.example\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Disposition: attachment; filename=a.txt\r\n\r\nx\r\n--b--\r\n`);
    await expect(handleEmail(incoming(`support@${domain}`, raw).message, { ...env, BLOBS: refusing })).rejects.toThrow("R2 is down");
    expect(await blobKeys(`inbound/${acct.accountId}/`)).toEqual(before);
  });

  it("a header named __proto__ reads back like any other", async () => {
    const raw = bytesOf("From: a@sender.example\r\nTo: x@y.example\r\n__proto__: kept\r\nconstructor: also kept\r\n\r\nbody");
    const outcome = await deliver(acct, `support@${domain}`, raw, "__proto__");
    const got = (await (await api(acct.token, "GET", `/emails/receiving/${(outcome as { ids: string[] }).ids[0]}`)).json()) as { headers: Record<string, string> };
    expect(Object.getOwnPropertyDescriptor(got.headers, "__proto__")?.value).toBe("kept");
    expect(got.headers.constructor).toBe("also kept");
  });

  it("mail for a domain tern does not receive for is refused, whatever it holds", async () => {
    const r = random(SEED + 1);
    for (const to of ["x@nowhere.example", "", "no-at-sign", "@", `x@${domain}.evil.example`, `x@sub.${domain}`, "a@b@c", `x@${"d".repeat(300)}.example`]) {
      const msg = incoming(to, bytesOf(hostileMessage(r, to)));
      expect(await handleEmail(msg.message, env), to).toMatchObject({ kind: "rejected" });
      expect(msg.rejected(), to).toMatch(/^550 5\.1\.1 /);
    }
  });

  it("mail at the 25 MiB limit is kept; over it, or claiming to be, it is refused", { timeout: 30_000 }, async () => {
    const head = `From: a@sender.example\r\nTo: x@y.example\r\nSubject: big\r\nContent-Type: application/octet-stream\r\n\r\n`;
    const at = new Uint8Array(INBOUND_MAX_BYTES).fill(0x61);
    at.set(bytesOf(head));
    for (let i = head.length + 76; i < at.length; i += 78) at.set([13, 10], i);
    const kept = await handleEmail(incoming(`support@${domain}`, at).message, env);
    expect(kept.kind).toBe("inbound");
    const id = (kept as { ids: string[] }).ids[0]!;
    expect((await env.BLOBS.head(`inbound/${acct.accountId}/${id}/raw.eml`))?.size).toBe(INBOUND_MAX_BYTES);

    const over = new Uint8Array(INBOUND_MAX_BYTES + 1);
    over.set(at);
    over[INBOUND_MAX_BYTES] = 0x61;
    await deliver(acct, `support@${domain}`, over, "one byte over");
    // Email Routing's size is a claim: a stream longer than it said is cut and refused too.
    const lying = await deliver(acct, `support@${domain}`, over, "over, claiming to be small", 1000);
    expect(lying).toMatchObject({ kind: "rejected", reason: expect.stringMatching(/^552 5\.3\.4/) });
  });
});

// ---- reports at the return path -------------------------------------------------------------

interface Sent {
  account: TestAccount;
  id: string;
  reader: string;
  returnPath: string;
}

async function sentEmail(account: TestAccount, reader: string): Promise<Sent> {
  const res = await api(account.token, "POST", "/emails", { from: `news@${account.domain}`, to: [reader], subject: "Report me", text: "x" });
  const { id } = (await res.json()) as { id: string };
  return { account, id, reader, returnPath: await returnPathAddress(env.MASTER_KEY, id, reader, "send", account.domain) };
}

async function reportEvents(emailId: string): Promise<{ type: string; data_json: string }[]> {
  return (await env.DB.prepare("SELECT type, data_json FROM email_events WHERE email_id = ? AND data_json LIKE '%\"source\":\"report\"%' ORDER BY id").bind(emailId).all<{ type: string; data_json: string }>()).results;
}

async function accountState(accountId: string): Promise<unknown> {
  const events = await env.DB.prepare("SELECT id, type, data_json FROM email_events WHERE account_id = ? ORDER BY id").bind(accountId).all();
  const suppressions = await env.DB.prepare("SELECT email, reason FROM suppressions WHERE account_id = ? ORDER BY email").bind(accountId).all();
  const emails = await env.DB.prepare("SELECT id, last_event FROM emails WHERE account_id = ? ORDER BY id").bind(accountId).all();
  return { events: events.results, suppressions: suppressions.results, emails: emails.results };
}

/** A report (DSN, ARF, plain bounce) about `about`, mangled; it may name `other` (another
 * account's email and reader) wherever a report names something. */
function hostileReport(r: Rand, about: Sent, other: Sent): string {
  const named = () => pick(r, [about.reader, about.reader.toUpperCase(), other.reader, other.returnPath, `"${other.reader}"`, `${about.reader}\x00`, "", "rfc822;", "not an address", `<${other.reader}>, <${about.reader}>`]);
  const status = () => pick(r, ["5.1.1", "4.2.2", "2.0.0", "5.0.0", "9.9.9", "", "5.1", "5.5.5.5.5.5.5.5", "\xff", "5.1.1 (extra)", "x.y.z"]);
  const action = () => pick(r, ["failed", "delayed", "delivered", "relayed", "expanded", "", "FAILED", "bogus", "failed; comment"]);
  const field = (name: string, value: string) => (chance(r, 0.1) ? `${name} ${value}` : chance(r, 0.05) ? `${name}: ${value}${"\r\n continued".repeat(int(r, 1, 50))}` : `${name}: ${value}`);
  const recipientGroup = () => [
    ...(chance(r, 0.85) ? [field("Final-Recipient", `${pick(r, ["rfc822; ", "rfc822;", "", "x-unknown; ", ";;"])}${named()}`)] : []),
    ...(chance(r, 0.2) ? [field("Original-Recipient", `rfc822; ${named()}`)] : []),
    ...(chance(r, 0.85) ? [field("Action", action())] : []),
    ...(chance(r, 0.85) ? [field("Status", status())] : []),
    ...(chance(r, 0.5) ? [field("Diagnostic-Code", pick(r, ["smtp; 550 5.1.1 User unknown", "smtp; 552 mailbox full", "", "x".repeat(int(r, 100, 20_000)), `smtp; ${junk(r, 50).replace(/[\r\n]/g, "")}`, "5.5.5.5.5.5.5.5.5.5.5.5"]))] : []),
    ...(chance(r, 0.3) ? [field("Remote-MTA", pick(r, ["dns; mx.example.org", "", "\x00"]))] : []),
  ].join("\r\n");
  const returned = [
    `Return-Path: <${pick(r, [about.returnPath, other.returnPath, other.returnPath.replace(/.@/, "0@"), "<>"])}>`,
    `Message-ID: <${pick(r, [about.id, other.id, "nothing"])}@${pick(r, [about.account.domain, other.account.domain])}>`,
    `To: ${named()}`,
    `X-HmXmrOriginalRecipient: ${named()}`,
    `From: news@${other.account.domain}`,
    "Subject: Report me",
  ].filter(() => chance(r, 0.8)).join("\r\n");
  const boundary = pick(r, ["rb", "rb", "rb", "", "missing"]);
  const declared = pick(r, [boundary, boundary, "other"]);
  const cte = pick(r, ["", "", "Content-Transfer-Encoding: base64\r\n", "Content-Transfer-Encoding: quoted-printable\r\n"]);
  const encode = (s: string) => (cte.includes("base64") ? (chance(r, 0.5) ? b64(s) : `${b64(s)}!!garbage!!`) : cte.includes("quoted") ? s.replace(/=/g, "=ZZ") : s);

  let machine: string;
  let reportType: string;
  switch (int(r, 0, 3)) {
    case 0: {
      reportType = "delivery-status";
      const groups = [`Reporting-MTA: dns; ${pick(r, ["mx.example.org", "", "\xff\xfe"])}`, ...Array.from({ length: chance(r, 0.05) ? 2000 : int(r, 0, 4) }, recipientGroup)];
      machine = `Content-Type: ${pick(r, ["message/delivery-status", "message/global-delivery-status", "message/delivery-status; charset=x-nope", "text/plain"])}\r\n${cte}\r\n${encode(groups.join(pick(r, ["\r\n\r\n", "\r\n", "\r\n \r\n"])))}`;
      break;
    }
    case 1: {
      reportType = "feedback-report";
      const fields = [
        ...(chance(r, 0.85) ? [field("Feedback-Type", pick(r, ["abuse", "fraud", "not-spam", "auth-failure", "", "ABUSE; x", "\x00", "other"]))] : []),
        field("User-Agent", "fuzz/1.0"), field("Version", "1"),
        ...(chance(r, 0.5) ? [field("Original-Mail-From", `<${pick(r, [about.returnPath, other.returnPath, "garbage"])}>`)] : []),
        ...Array.from({ length: int(r, 0, 3) }, () => field("Original-Rcpt-To", named())),
        ...(chance(r, 0.2) ? [field("Removal-Recipient", named())] : []),
      ];
      machine = `Content-Type: message/feedback-report\r\n${cte}\r\n${encode(fields.join("\r\n"))}`;
      break;
    }
    case 2: {
      // Machine parts missing, empty, or only the human-readable part.
      reportType = pick(r, ["delivery-status", "feedback-report", ""]);
      machine = pick(r, ["Content-Type: message/delivery-status\r\n\r\n", "Content-Type: message/feedback-report\r\n\r\n\r\n", "Content-Type: text/plain\r\n\r\nnothing machine-readable", ""]);
      break;
    }
    default: {
      reportType = "";
      machine = `Content-Type: text/plain\r\n\r\nThis message was created automatically by mail delivery software.\r\n\r\nA message that you sent could not be delivered to one or more of its recipients. The following address(es) failed:\r\n\r\n  ${named()}\r\n    ${pick(r, ["SMTP error from remote mail server after RCPT TO: 550 5.1.1 User unknown", "x".repeat(10_000), ""])}\r\n\r\n------ This is a copy of the message, including all the headers. ------\r\n\r\n${returned}`;
    }
  }
  const parts = [
    "Content-Type: text/plain\r\n\r\nYour message could not be delivered.",
    machine,
    `Content-Type: ${pick(r, ["message/rfc822", "text/rfc822-headers", "message/global-headers", "application/octet-stream"])}\r\n${cte}\r\n${encode(returned)}`,
  ].filter(() => chance(r, 0.9));
  const nestedDepth = chance(r, 0.05) ? int(r, 20, 200) : 0;
  let body = parts.map((p) => `--${boundary}\r\n${p}`).join("\r\n") + (chance(r, 0.7) ? `\r\n--${boundary}--\r\n` : "");
  let contentType = `multipart/report; report-type=${reportType}; boundary="${declared}"`;
  for (let i = 0; i < nestedDepth; i++) {
    body = `--n${i}\r\nContent-Type: ${contentType}\r\n\r\n${body}\r\n--n${i}--`;
    contentType = `multipart/mixed; boundary="n${i}"`;
  }
  const head = [
    ...(chance(r, 0.9) ? ["From: MAILER-DAEMON@mx.example.org"] : []),
    `To: ${about.returnPath}`,
    "Subject: Undelivered Mail Returned to Sender",
    ...(chance(r, 0.9) ? [`Content-Type: ${contentType}`] : []),
    ...Array.from({ length: int(r, 0, 3) }, () => badHeader(r)),
  ];
  let message = `${head.join("\r\n")}\r\n\r\n${body}`;
  if (chance(r, 0.1)) message = message.slice(0, int(r, 0, message.length));
  return message;
}

/** A DSN with one recipient group that holds `field`. */
const dsnWith = (field: string) =>
  `From: MAILER-DAEMON@x\r\nContent-Type: multipart/report; report-type=delivery-status; boundary=b\r\n\r\n--b\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; x\r\n\r\n${field}\r\nAction: failed\r\nStatus: 5.1.1\r\n\r\n--b--\r\n`;

describe("hostile reports at the return path", () => {
  let ours: Sent;
  let theirs: Sent;
  beforeAll(async () => {
    ours = await sentEmail(acct, `reader-${crypto.randomUUID().slice(0, 8)}@example.org`);
    theirs = await sentEmail(await createAccount(), `victim-${crypto.randomUUID().slice(0, 8)}@example.org`);
  });

  it("never throws, never bounces, speaks only for its own reader, and leaves other accounts alone", { timeout: 60_000 }, async () => {
    const r = random(SEED + 2);
    const before = await accountState(theirs.account.accountId);
    const kinds = { applied: 0, ignored: 0 };
    for (let i = 0; i < 200; i++) {
      const raw = bytesOf(hostileReport(r, ours, theirs));
      const msg = incoming(ours.returnPath, raw);
      let outcome: EmailOutcome;
      try {
        outcome = await handleEmail(msg.message, env);
      } catch (err) {
        throw new Error(`report ${i}: the handler threw: ${err instanceof Error ? err.stack : String(err)}`);
      }
      expect(outcome.kind, `report ${i}`).toBe("report");
      // Chatter or junk at a return path is dropped, never bounced back at whoever sent it.
      expect(msg.rejected(), `report ${i}`).toBeNull();
      kinds[(outcome as { applied: boolean }).applied ? "applied" : "ignored"]++;
    }
    expect(kinds.applied).toBeGreaterThan(10);
    expect(kinds.ignored).toBeGreaterThan(10);
    // Every event a report made is about our email's one reader, and no one else was suppressed.
    for (const e of await reportEvents(ours.id)) expect((JSON.parse(e.data_json) as { recipients: string[] }).recipients).toEqual([ours.reader]);
    const suppressed = await env.DB.prepare("SELECT email FROM suppressions WHERE account_id = ?").bind(acct.accountId).all<{ email: string }>();
    for (const s of suppressed.results) expect(s.email).toBe(ours.reader);
    expect(await accountState(theirs.account.accountId)).toEqual(before);
    // The email's own events still read.
    expect((await api(acct.token, "GET", `/emails/${ours.id}/events`)).status).toBe(200);
  });

  it("a report at a return path with a bad signature, or for an email that does not exist, changes nothing", async () => {
    const r = random(SEED + 3);
    const before = await accountState(theirs.account.accountId);
    const forged = [
      theirs.returnPath.replace(/-([0-9a-f]{12})@/, (_m, tag: string) => `-${tag.slice(0, 11)}${tag.endsWith("0") ? "1" : "0"}@`),
      theirs.returnPath.replace(/^([0-9a-f]{32})/, ours.id.replace(/-/g, "")),
      theirs.returnPath.replace(/-[0-9a-f]{10}-/, "-"),
    ];
    for (const to of forged) {
      const msg = incoming(to, bytesOf(hostileReport(r, { ...theirs, returnPath: to }, ours)));
      expect(await handleEmail(msg.message, env), to).toMatchObject({ kind: "rejected" });
    }
    // A return path tern made, for an email id no account has: read, then dropped.
    const ghost = await returnPathAddress(env.MASTER_KEY, crypto.randomUUID(), ours.reader, "send", acct.domain);
    const msg = incoming(ghost, bytesOf(hostileReport(r, { ...ours, returnPath: ghost }, theirs)));
    expect(await handleEmail(msg.message, env)).toMatchObject({ kind: "report", applied: false });
    expect(msg.rejected()).toBeNull();
    expect(await accountState(theirs.account.accountId)).toEqual(before);
  });

  it("a report at and over the size read is read from its start, and a huge one is not bounced", { timeout: 20_000 }, async () => {
    const bounce = `From: MAILER-DAEMON@mx.example.org\r\nTo: ${ours.returnPath}\r\nContent-Type: multipart/report; report-type=delivery-status; boundary="rb"\r\n\r\n--rb\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mx.example.org\r\n\r\nFinal-Recipient: rfc822; ${ours.reader}\r\nAction: delayed\r\nStatus: 4.4.1\r\n\r\n--rb\r\nContent-Type: message/rfc822\r\n\r\n`;
    for (const size of [MAX_REPORT_BYTES, MAX_REPORT_BYTES + 1, 8 * MAX_REPORT_BYTES]) {
      const raw = new Uint8Array(size).fill(0x78);
      raw.set(bytesOf(bounce));
      const msg = incoming(ours.returnPath, raw);
      expect(await handleEmail(msg.message, env), String(size)).toMatchObject({ kind: "report", applied: true });
      expect(msg.rejected()).toBeNull();
    }
  });

  it("the report reader answers every hostile report quickly, without throwing", { timeout: 20_000 }, async () => {
    const r = random(SEED + 4);
    const started = Date.now();
    for (let i = 0; i < 300; i++) {
      const raw = chance(r, 0.5) ? hostileReport(r, ours, theirs) : hostileMessage(r, ours.returnPath);
      const t = Date.now();
      const parsed = parseReport(bytesOf(raw), { returnPath: ours.returnPath });
      expect(Date.now() - t, `report ${i} took too long`).toBeLessThan(1000);
      if (parsed.ok) expect(parsed.report.outcomes.length, `report ${i}`).toBeGreaterThan(0);
    }
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it.each([
    // Each took seconds to minutes of CPU (time quadratic in its length) before its pattern was mended.
    ["a Final-Recipient of a megabyte without @", () => dsnWith(`Final-Recipient: rfc822; ${"a".repeat(1_000_000)}`)],
    ["a Final-Recipient of <a@a@a@... unclosed", () => dsnWith(`Final-Recipient: rfc822; <${"a@".repeat(500_000)}`)],
    ["a qmail bounce whose address is <a@a@a@... unclosed", () => `From: MAILER-DAEMON@x\r\n\r\nThis is the qmail-send program\r\n\r\n<${"a@".repeat(500_000)}`],
    ["an Exim bounce of 20,000 diagnostic lines", () => `From: MAILER-DAEMON@x\r\n\r\nThis message was created automatically by mail delivery software\r\n\r\nThe following address(es) failed:\r\n\r\n  ${ours.reader}\r\n${"      SMTP error from remote mail server after RCPT TO\r\n".repeat(20_000)}`],
  ])("the report reader reads %s in well under a second", (_label, raw) => {
    const started = Date.now();
    parseReport(bytesOf(raw()), { returnPath: ours.returnPath });
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
