// Attachments (contract 4.1): content decoding, field rules, and `path` fetched for real
// from the loopback HTTPS file server.
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { contentTypeForFilename, decodeAttachmentContent, resolveAttachment } from "../../worker/sending/attachments.ts";
import { createOutboundFetcher, type OutboundPolicy } from "../../worker/net/outbound.ts";
import { ATTACHMENT_FETCH, performSend } from "../../worker/sending/send.ts";
import { MAX_MESSAGE_BYTES } from "../../worker/sending/accept.ts";
import { consumeSendBatch, renderMessage } from "../../worker/delivery/consumer.ts";
import { createSmtpTransport } from "../../worker/transports/smtp.ts";
import { createMessageBatch } from "cloudflare:test";
import PostalMime from "postal-mime";
import { sizedPattern } from "../support/sized-pattern.ts";
import { toBase64 } from "../../worker/bytes.ts";
import { capturedFor, bytesOf, address } from "./peers.ts";
import { emails } from "../../worker/db/schema.ts";
import { drizzle } from "drizzle-orm/d1";
import { eq } from "drizzle-orm";
import { countRows, createAccount, type TestAccount } from "./fixtures.ts";

const base = `https://localhost:${env.TEST_PEERS.https}`;
const policy: OutboundPolicy = { allowPrivate: true, allowHttp: false, maxBytes: 1024 * 1024, timeoutMs: 5_000, maxRedirects: 3 };
const fetcher = createOutboundFetcher(policy);
const PDF = "%PDF-1.4\n% tern test file\n%%EOF\n";
const bytes = (...values: number[]) => new Uint8Array(values);
const text = (value: string) => new TextEncoder().encode(value);

describe("decodeAttachmentContent", () => {
  it.each<[string, unknown, Uint8Array]>([
    ["standard base64", "aGVsbG8gd29ybGQ=", text("hello world")],
    ["base64 without padding", "aGVsbG8gd29ybGQ", text("hello world")],
    ["base64 with one padding character", "aGk=", text("hi")],
    ["padded base64 of one byte", "YQ==", text("a")],
    ["unpadded base64 of one byte", "YQ", text("a")],
    ["base64 with newlines and spaces", "aGVs\r\nbG8g\n d29y bGQ=\n", text("hello world")],
    ["standard alphabet with + and /", "+/+/", bytes(0xfb, 0xff, 0xbf)],
    ["url-safe alphabet with - and _", "-_-_", bytes(0xfb, 0xff, 0xbf)],
    ["the empty string", "", bytes()],
    ["an array of bytes", [0, 1, 127, 128, 255], bytes(0, 1, 127, 128, 255)],
    ["an empty array", [], bytes()],
    ["a serialised Node Buffer", { type: "Buffer", data: [104, 105] }, text("hi")],
  ])("decodes %s", (_, content, expected) => {
    expect(decodeAttachmentContent(content)).toEqual({ ok: true, value: expected });
  });

  it("decodes every byte value through base64", () => {
    const all = new Uint8Array(256).map((_, i) => i);
    let binary = "";
    for (const b of all) binary += String.fromCharCode(b);
    expect(decodeAttachmentContent(btoa(binary))).toEqual({ ok: true, value: all });
  });

  it.each<[string, unknown, string]>([
    ["a character outside base64", "aGVsbG8*", "`content` is not valid base64."],
    ["non-ASCII text", "aGVsbG8é", "`content` is not valid base64."],
    ["a length that cannot be base64", "aGVsb", "`content` is not valid base64."],
    ["padding in the middle", "YQ==YQ==", "`content` is not valid base64."],
    ["too much padding", "YQ===", "`content` is not valid base64."],
    ["padding with a wrong length", "aGk==", "`content` is not valid base64."],
    ["a data URL", "data:text/plain;base64,aGk=", "`content` is not valid base64."],
    ["mixed alphabets", "+/-_", "`content` mixes the standard and url-safe base64 alphabets; use one."],
    ["a byte over 255", [1, 256], "`content[1]` must be an integer from 0 to 255."],
    ["a negative byte", [-1], "`content[0]` must be an integer from 0 to 255."],
    ["a fractional byte", [1.5], "`content[0]` must be an integer from 0 to 255."],
    ["a byte given as a string", ["1"], "`content[0]` must be an integer from 0 to 255."],
    ["a null byte entry", [null], "`content[0]` must be an integer from 0 to 255."],
    ["a Buffer with a bad byte", { type: "Buffer", data: [1, 2, 300] }, "`content.data[2]` must be an integer from 0 to 255."],
  ])("refuses %s", (_, content, message) => {
    expect(decodeAttachmentContent(content)).toEqual({ ok: false, message });
  });

  it.each<[string, unknown]>([
    ["a number", 42],
    ["a boolean", true],
    ["an object that is not a Buffer", { data: [1] }],
    ["a Buffer without data", { type: "Buffer" }],
  ])("refuses %s with the accepted shapes", (_, content) => {
    expect(decodeAttachmentContent(content)).toEqual({
      ok: false,
      message: '`content` must be a base64 string, an array of bytes, or {"type":"Buffer","data":[...]}.',
    });
  });

  it("names the field it was given", () => {
    expect(decodeAttachmentContent("!!", "attachments[2].content")).toEqual({
      ok: false,
      message: "`attachments[2].content` is not valid base64.",
    });
  });
});

describe("contentTypeForFilename", () => {
  it.each([
    ["invoice.pdf", "application/pdf"],
    ["logo.PNG", "image/png"],
    ["photo.jpg", "image/jpeg"],
    ["photo.jpeg", "image/jpeg"],
    ["anim.gif", "image/gif"],
    ["pic.webp", "image/webp"],
    ["icon.svg", "image/svg+xml"],
    ["notes.txt", "text/plain"],
    ["data.csv", "text/csv"],
    ["page.html", "text/html"],
    ["invite.ics", "text/calendar"],
    ["bundle.zip", "application/zip"],
    ["data.json", "application/json"],
    ["feed.xml", "application/xml"],
    ["letter.doc", "application/msword"],
    ["letter.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"],
    ["sheet.xls", "application/vnd.ms-excel"],
    ["sheet.xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"],
    ["deck.ppt", "application/vnd.ms-powerpoint"],
    ["deck.pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"],
    ["song.mp3", "audio/mpeg"],
    ["clip.mp4", "video/mp4"],
    ["sound.wav", "audio/wav"],
    ["archive.tar.gz", "application/gzip"],
    ["README", "application/octet-stream"],
    ["file.unknownext", "application/octet-stream"],
    [undefined, "application/octet-stream"],
  ])("guesses %s as %s", (filename, expected) => {
    expect(contentTypeForFilename(filename)).toBe(expected);
  });
});

describe("resolveAttachment with content", () => {
  it("decodes content and guesses the content type from the filename", async () => {
    const result = await resolveAttachment({ filename: "hello.txt", content: "aGk=" }, 0, fetcher);
    expect(result).toEqual({ ok: true, value: { filename: "hello.txt", contentType: "text/plain", content: text("hi") } });
  });

  it("defaults to application/octet-stream without a filename", async () => {
    const result = await resolveAttachment({ content: [1, 2] }, 0, fetcher);
    expect(result).toEqual({ ok: true, value: { contentType: "application/octet-stream", content: bytes(1, 2) } });
  });

  it.each<[string, Record<string, unknown>, string, string | undefined]>([
    ["content_type", { content_type: "text/csv" }, "text/csv", undefined],
    ["the contentType alias", { contentType: "text/csv" }, "text/csv", undefined],
    ["both spellings when they agree", { content_type: "text/csv", contentType: "text/csv" }, "text/csv", undefined],
    ["a content type with parameters", { content_type: "text/plain; charset=utf-8" }, "text/plain; charset=utf-8", undefined],
    ["content_id", { content_id: "logo" }, "image/png", "logo"],
    ["the inline_content_id alias", { inline_content_id: "logo@tern" }, "image/png", "logo@tern"],
    ["both content id spellings when they agree", { content_id: "a", inline_content_id: "a" }, "image/png", "a"],
    ["a content id of 127 characters", { content_id: "x".repeat(127) }, "image/png", "x".repeat(127)],
  ])("accepts %s", async (_, extra, contentType, contentId) => {
    const result = await resolveAttachment({ filename: "logo.png", content: "aGk=", ...extra }, 0, fetcher);
    expect(result).toEqual({
      ok: true,
      value: { filename: "logo.png", contentType, content: text("hi"), ...(contentId ? { contentId } : {}) },
    });
  });

  it("treats null and empty optional fields as absent", async () => {
    const input = { filename: "", content: "aGk=", path: null, content_type: "", content_id: null } as unknown as Parameters<typeof resolveAttachment>[0];
    expect(await resolveAttachment(input, 0, fetcher)).toEqual({
      ok: true,
      value: { contentType: "application/octet-stream", content: text("hi") },
    });
  });

  it.each<[string, Record<string, unknown>, "invalid_attachment" | "validation_error", string]>([
    ["neither content nor path", { filename: "a.txt" }, "invalid_attachment", "`attachments[2]` needs either `content` or `path`."],
    ["content: null and no path", { content: null }, "invalid_attachment", "`attachments[2]` needs either `content` or `path`."],
    ["undecodable content", { content: "not base64!" }, "invalid_attachment", "`attachments[2].content` is not valid base64."],
    ["a bad byte", { content: [1, 999] }, "invalid_attachment", "`attachments[2].content[1]` must be an integer from 0 to 255."],
    ["both content and path", { content: "aGk=", path: `${base}/file.pdf` }, "validation_error", "`attachments[2]` has both `content` and `path`; send only one of them."],
    ["content types that differ", { content: "aGk=", content_type: "text/plain", contentType: "text/html" }, "validation_error", "`attachments[2].content_type` and `attachments[2].contentType` differ; send only one of them."],
    ["content ids that differ", { content: "aGk=", content_id: "a", inline_content_id: "b" }, "validation_error", "`attachments[2].content_id` and `attachments[2].inline_content_id` differ; send only one of them."],
    ["a content type without a subtype", { content: "aGk=", content_type: "pdf" }, "validation_error", "`attachments[2].content_type` must be a MIME type like application/pdf, on one line."],
    ["a content type with a line break", { content: "aGk=", content_type: "text/plain\r\nBcc: x@y.z" }, "validation_error", "`attachments[2].content_type` must be a MIME type like application/pdf, on one line."],
    ["a contentType with a line feed", { content: "aGk=", contentType: "text/plain;\n a=b" }, "validation_error", "`attachments[2].contentType` must be a MIME type like application/pdf, on one line."],
    ["a content type that is not a string", { content: "aGk=", content_type: 5 }, "validation_error", "`attachments[2].content_type` must be a string."],
    ["a content id of 128 characters", { content: "aGk=", content_id: "x".repeat(128) }, "validation_error", "`attachments[2].content_id` must be shorter than 128 characters."],
    ["a content id with angle brackets", { content: "aGk=", content_id: "<logo>" }, "validation_error", "`attachments[2].content_id` must not contain <, >, spaces, line breaks or control characters."],
    ["a content id with a space", { content: "aGk=", inline_content_id: "my logo" }, "validation_error", "`attachments[2].inline_content_id` must not contain <, >, spaces, line breaks or control characters."],
    ["a content id with CR LF", { content: "aGk=", content_id: "a\r\nb" }, "validation_error", "`attachments[2].content_id` must not contain <, >, spaces, line breaks or control characters."],
    ["a filename with a line feed", { content: "aGk=", filename: "a\n.txt" }, "validation_error", "`attachments[2].filename` must not contain line breaks or other control characters."],
    ["a filename with a carriage return", { content: "aGk=", filename: "a\r.txt" }, "validation_error", "`attachments[2].filename` must not contain line breaks or other control characters."],
    ["a filename with NUL", { content: "aGk=", filename: "a\u0000.txt" }, "validation_error", "`attachments[2].filename` must not contain line breaks or other control characters."],
    ["a filename of 256 characters", { content: "aGk=", filename: `${"a".repeat(252)}.txt` }, "validation_error", "`attachments[2].filename` must be at most 255 characters."],
    ["a filename that is not a string", { content: "aGk=", filename: ["a"] }, "validation_error", "`attachments[2].filename` must be a string."],
    ["a path that is not a string", { path: 42 }, "validation_error", "`attachments[2].path` must be a non-empty URL string."],
  ])("refuses %s", async (_, input, code, message) => {
    const result = await resolveAttachment(input as Parameters<typeof resolveAttachment>[0], 2, fetcher);
    expect(result).toEqual({ ok: false, code, message });
  });

  it("accepts a filename of 255 characters, counted in characters rather than bytes", async () => {
    const filename = `${"é".repeat(251)}.txt`;
    const result = await resolveAttachment({ content: "aGk=", filename }, 0, fetcher);
    expect(result.ok && result.value.filename).toBe(filename);
  });

  it("refuses an attachment that is not an object", async () => {
    const result = await resolveAttachment("aGk=" as unknown as Parameters<typeof resolveAttachment>[0], 1, fetcher);
    expect(result).toEqual({ ok: false, code: "validation_error", message: "`attachments[1]` must be an object." });
  });
});

describe("resolveAttachment with path", () => {
  it("fetches the file and takes the filename from the URL", async () => {
    const result = await resolveAttachment({ path: `${base}/file.pdf` }, 0, fetcher);
    expect(result).toEqual({ ok: true, value: { filename: "file.pdf", contentType: "application/pdf", content: text(PDF) } });
  });

  it("keeps a given filename and content type over what the URL suggests", async () => {
    const result = await resolveAttachment({ path: `${base}/file.pdf`, filename: "Invoice 7.pdf", content_type: "application/x-pdf" }, 0, fetcher);
    expect(result).toEqual({ ok: true, value: { filename: "Invoice 7.pdf", contentType: "application/x-pdf", content: text(PDF) } });
  });

  it("uses the server's content type when the filename has no known extension", async () => {
    const result = await resolveAttachment({ path: `${base}/download` }, 0, fetcher);
    expect(result).toEqual({ ok: true, value: { filename: "download", contentType: "image/png", content: text(PDF) } });
  });

  it("follows a redirect", async () => {
    const result = await resolveAttachment({ path: `${base}/redirect-ok` }, 0, fetcher);
    expect(result).toMatchObject({ ok: true, value: { filename: "redirect-ok", contentType: "application/pdf" } });
  });

  it.each<[string, string, OutboundPolicy, string]>([
    ["a 404", `${base}/404`, policy, "`attachments[3].path` could not be fetched. The server answered with status 404."],
    ["a file that is too large", `${base}/big`, policy, "`attachments[3].path` could not be fetched. The file is larger than the limit of 1048576 bytes."],
    ["a loopback URL when private hosts are not allowed", `${base}/file.pdf`, { ...policy, allowPrivate: false }, "`attachments[3].path` could not be fetched. The URL must use port 443 or 80."],
    ["a private address", "https://10.0.0.1/file.pdf", { ...policy, allowPrivate: false }, "`attachments[3].path` could not be fetched. The URL must point to a public host, not a local, private or reserved address."],
    ["plain http", "http://example.com/file.pdf", { ...policy, allowPrivate: false }, "`attachments[3].path` could not be fetched. The URL must use https."],
    ["a redirect to plain http", `${base}/redirect-private?to=http`, policy, "`attachments[3].path` could not be fetched. The redirect target must use https."],
  ])("refuses %s as invalid_attachment", async (_, path, used, message) => {
    const result = await resolveAttachment({ path }, 3, createOutboundFetcher(used));
    expect(result).toEqual({ ok: false, code: "invalid_attachment", message });
  });
});

// Issue 20, item 3: a 400-byte request with three 30 MB paths was accepted and built into a
// 129 MB message. The whole message, fetched parts included, is held to 40 MB once encoded.
describe("the whole message is at most 40 MB once encoded, fetched attachments included", () => {
  const MB = 1024 * 1024;
  const loose = createOutboundFetcher({ ...ATTACHMENT_FETCH, allowPrivate: true, allowHttp: false });
  let account: TestAccount;
  beforeAll(async () => {
    account = await createAccount();
  });
  const send = (body: Record<string, unknown>) =>
    performSend(env, { accountId: account.accountId, keyId: "k", permission: "full_access", domainId: null, plan: "free", rateLimit: 0 },
      { kind: "single", batchMode: "strict", body: { from: `files@${account.domain}`, to: "delivered@simulator.tern.test", subject: "files", text: "see attached", ...body } },
      { fetcher: loose });
  const sized = (tag: string, bytes: number, declared = true) => `${base}/sized?bytes=${bytes}&tag=${tag}-${crypto.randomUUID()}${declared ? "" : "&undeclared"}`;
  const served = async (url: string) => (await (await fetch(`${base}/served?tag=${new URL(url).searchParams.get("tag")}`)).json()) as { requests: number; bytes: number };
  const storedObjects = async () => (await env.BLOBS.list({ prefix: "emails/" })).objects.length;
  const refusal = (answer: { status: number; body: string }) => ({ status: answer.status, ...(JSON.parse(answer.body) as { name: string; message: string }) });

  it("refuses three 13 MB paths (declared lengths) at the third, before reading its body, and stores nothing", async () => {
    const before = [await countRows("emails", account.accountId), await storedObjects()];
    const paths = [sized("a", 13 * MB), sized("b", 13 * MB), sized("c", 13 * MB)];
    const answer = refusal(await send({ attachments: paths.map((path) => ({ path })) }));
    expect(answer).toMatchObject({ status: 422, name: "validation_error" });
    expect(answer.message).toMatch(/^`attachments\[2\]\.path`: the email would be larger than 40 MB once encoded with this file; \d+ bytes were left for it\./);
    expect((await served(paths[0]!)).requests).toBe(1);
    expect((await served(paths[2]!)).requests).toBe(1); // asked once, its Content-Length refused
    expect([await countRows("emails", account.accountId), await storedObjects()]).toEqual(before);
  });

  it("cuts off a path without a declared length once it passes the room left", async () => {
    const stored = await storedObjects();
    const paths = [sized("d", 13 * MB), sized("e", 30 * MB, false)];
    const answer = refusal(await send({ attachments: paths.map((path) => ({ path })) }));
    expect(answer).toMatchObject({ status: 422, name: "validation_error" });
    expect(answer.message).toMatch(/^`attachments\[1\]\.path`: the email would be larger than 40 MB/);
    // The reader stopped: the server did not get to write the whole 30 MB.
    expect((await served(paths[1]!)).bytes).toBeLessThan(30 * MB);
    expect(await countRows("emails", account.accountId)).toBe(0);
    // The first file and the parts of the second were in R2 before the refusal: all gone.
    expect(await storedObjects()).toBe(stored);
  });

  it("removes the files already written to R2 when a later rule refuses the email", async () => {
    const stored = await storedObjects();
    const broken = refusal(await send({ attachments: [{ path: sized("j", 6 * MB, false) }, { path: `${base}/404` }] }));
    expect(broken).toMatchObject({ status: 422, name: "invalid_attachment" });
    const twice = refusal(await send({
      html: "<img src=cid:logo>",
      attachments: [{ path: sized("k", MB) }, { content: "aGk=", content_id: "logo" }, { content: "aGk=", content_id: "logo" }],
    }));
    expect(twice).toMatchObject({ status: 422, name: "validation_error", message: "Each `content_id` must be unique within an email." });
    expect(await storedObjects()).toBe(stored);
    expect(await countRows("emails", account.accountId)).toBe(0);
  });

  it("writes base64 content to R2 in slices, whatever its alphabet, lines and padding", async () => {
    const pattern = (n: number, seed: number) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed + (i >> 9)) & 255);
    // Several 64 KB slices and a partial one; one of a single slice; one empty.
    const lined = pattern(MB + 2, 1);
    const urlSafe = pattern(200 * 1024 + 1, 7);
    const small = pattern(10, 3);
    const answer = await send({
      scheduled_at: "in 2 days",
      attachments: [
        { content: toBase64(lined).replace(/(.{76})/g, "$1\r\n"), filename: "lined.bin" },
        { content: toBase64(urlSafe).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, ""), filename: "url.bin" },
        { content: toBase64(small), filename: "small.bin" },
        { content: "", filename: "empty.bin" },
      ],
    });
    expect(answer.status, answer.body).toBe(200);
    const { id } = JSON.parse(answer.body) as { id: string };
    const row = await env.DB.prepare("SELECT attachments_json FROM emails WHERE id = ?").bind(id).first<{ attachments_json: string }>();
    const stored = JSON.parse(row!.attachments_json) as { size: number; key: string }[];
    expect(stored.map((a) => a.size)).toEqual([MB + 2, 200 * 1024 + 1, 10, 0]);
    for (const [i, want] of [lined, urlSafe, small, new Uint8Array()].entries()) {
      const obj = await env.BLOBS.get(stored[i]!.key);
      expect(new Uint8Array(await obj!.arrayBuffer())).toEqual(want);
    }
  });

  it("refuses invalid base64 after a large valid one, and removes what was written", async () => {
    const before = [await countRows("emails", account.accountId), await storedObjects()];
    const answer = refusal(await send({ attachments: [{ content: "QUJD".repeat(300_000), filename: "ok.bin" }, { content: "QUJD!", filename: "bad.bin" }] }));
    expect(answer).toMatchObject({ status: 422, name: "invalid_attachment", message: "`attachments[1].content` is not valid base64." });
    expect([await countRows("emails", account.accountId), await storedObjects()]).toEqual(before);
  });

  it("fetches nothing when the parts known without the network already fill the message", async () => {
    // 39.9 MB of text in 7-bit lines (40.5 MB with CRLF line ends), and a path.
    const line = "x".repeat(69) + "\n";
    const path = sized("f", 10);
    const answer = refusal(await send({ text: line.repeat(Math.floor((39.9 * MB) / line.length)), attachments: [{ path }] }));
    expect(answer).toMatchObject({ status: 422, name: "validation_error" });
    expect(answer.message).toMatch(/^The email would be larger than 40 MB once encoded \(attachments count in base64\): about 40\.\d MB\./);
    expect((await served(path)).requests).toBe(0);
    // content attachments count before any path is fetched, wherever they are in the list
    const path2 = sized("g", 10);
    const big = refusal(await send({ attachments: [{ path: path2 }, { content: "A".repeat(Math.floor((31 * MB) / 3) * 4), filename: "big.bin" }] }));
    expect(big).toMatchObject({ status: 422, name: "validation_error" });
    expect(big.message).toMatch(/^`attachments\[1\]`: the email would be larger than 40 MB once encoded \(attachments count in base64\): about 42\.\d MB\./);
    expect((await served(path2)).requests).toBe(0);
  });

  it("accepts a message just under the bound: two 13 MB paths and a text", async () => {
    const paths = [sized("h", 13 * MB), sized("i", 13 * MB, false)];
    const answer = await send({ attachments: paths.map((path, i) => ({ path, filename: `part${i}.bin` })), scheduled_at: "in 2 days" });
    expect(answer.status, answer.body).toBe(200);
    const { id } = JSON.parse(answer.body) as { id: string };
    const row = await env.DB.prepare("SELECT attachments_json FROM emails WHERE id = ?").bind(id).first<{ attachments_json: string }>();
    expect((JSON.parse(row!.attachments_json) as { size: number }[]).map((a) => a.size)).toEqual([13 * MB, 13 * MB]);
    // What is stored builds into a message under 40 MB.
    const email = (await drizzle(env.DB).select().from(emails).where(eq(emails.id, id)).get())!;
    const built = (await renderMessage(env, email)).byteLength;
    expect(built).toBeGreaterThan(35 * MB);
    expect(built).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
  });
});

// Fetched files are written to R2 as they arrive and read back as streams at delivery: what the
// recipient gets is the server's bytes, whatever the chunks in between.
describe("fetched attachments are delivered byte for byte", () => {
  const MB = 1024 * 1024;
  const loose = createOutboundFetcher({ ...ATTACHMENT_FETCH, allowPrivate: true, allowHttp: false });
  const patterned = (bytes: number, declared: boolean) => `${base}/sized?bytes=${bytes}&pattern&tag=p-${crypto.randomUUID()}${declared ? "" : "&undeclared"}`;
  const expected = (bytes: number) => Uint8Array.from({ length: bytes }, (_, i) => sizedPattern(i));

  it("a declared path, an undeclared one over an R2 part and inline content arrive as sent", async () => {
    const account = await createAccount();
    const to = address("files", "example.com");
    const answer = await performSend(env, { accountId: account.accountId, keyId: "k", permission: "full_access", domainId: null, plan: "free", rateLimit: 0 }, {
      kind: "single", batchMode: "strict", body: {
        from: `files@${account.domain}`, to, subject: "files", html: "<p>logo <img src=\"cid:logo\"></p>", scheduled_at: "in 20 days",
        attachments: [
          { path: patterned(3 * MB + 17, true), filename: "declared.bin" },
          // Over one 5 MiB part without a length: a multipart upload of two parts.
          { path: patterned(6 * MB + 5, false), filename: "undeclared.bin" },
          { content: btoa("tern logo"), filename: "logo.png", content_id: "logo" },
        ],
      },
    }, { fetcher: loose });
    expect(answer.status, answer.body).toBe(200);
    const { id } = JSON.parse(answer.body) as { id: string };
    const row = (await drizzle(env.DB).select().from(emails).where(eq(emails.id, id)).get())!;
    expect((JSON.parse(row.attachmentsJson) as { size: number; key: string }[]).map((a) => [a.size, a.key])).toEqual([
      [3 * MB + 17, `emails/${id}/attachments/0`], [6 * MB + 5, `emails/${id}/attachments/1`], [9, `emails/${id}/attachments/2`],
    ]);

    await env.DB.prepare("UPDATE emails SET state = 'queued', next_attempt_at = ? WHERE id = ?").bind(Date.now(), id).run();
    const batch = createMessageBatch("tern-send", [{ id: "m0", timestamp: new Date(), attempts: 1, body: { emailId: id } }]);
    await consumeSendBatch(batch as MessageBatch<{ emailId: string }>, env, {
      transportFor: () => createSmtpTransport({ host: "127.0.0.1", port: env.TEST_PEERS.plain!, security: "plain", heloName: "mx.tern.example", connectTimeoutMs: 2000, commandTimeoutMs: 5000, dataTimeoutMs: 30000 }),
    });
    const [message] = await capturedFor(to);
    expect(message, "the relay got the message").toBeDefined();
    const parsed = await PostalMime.parse(bytesOf(message!.rawBase64));
    const byName = new Map(parsed.attachments.map((a) => [a.filename, new Uint8Array(a.content as ArrayBuffer)]));
    expect(byName.get("declared.bin")!.length).toBe(3 * MB + 17);
    expect(byName.get("declared.bin")!).toEqual(expected(3 * MB + 17));
    expect(byName.get("undeclared.bin")!).toEqual(expected(6 * MB + 5));
    expect(new TextDecoder().decode(byName.get("logo.png"))).toBe("tern logo");
    expect(parsed.attachments.find((a) => a.filename === "logo.png")?.contentId).toBe("<logo>");
  });
});
