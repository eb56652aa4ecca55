// Bad input always gets a clear 4xx in the contract's shape, and nothing is stored or sent.
import { env, exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { addKey, api, countRows, createAccount, type TestAccount } from "./fixtures.ts";

let acct: TestAccount;
beforeAll(async () => {
  acct = await createAccount();
});

const valid = () => ({ from: `Acme <hi@${acct.domain}>`, to: "delivered@simulator.tern.test", subject: "Hello", html: "<p>Hi</p>" });

async function expectRefused(res: Response, status: number, name: string, mention?: string | RegExp) {
  const body = (await res.json()) as { statusCode: number; name: string; message: string };
  expect(res.status, JSON.stringify(body)).toBe(status);
  expect(res.headers.get("content-type")).toMatch(/application\/json/);
  expect(body.statusCode).toBe(status);
  expect(body.name).toBe(name);
  expect(body.message).not.toMatch(/at .*\.ts:\d+|TypeError|ZodError/);
  if (mention) expect(body.message).toMatch(mention);
  expect(await countRows("emails", acct.accountId)).toBe(0);
  return body;
}

describe("POST /emails refuses bad input and stores nothing", () => {
  const cases: [string, () => { body: unknown; raw?: string }, number, string, (string | RegExp)?][] = [
    ["malformed JSON", () => ({ body: undefined, raw: '{"from": ' }), 400, "validation_error", /JSON/],
    ["a JSON array instead of an object", () => ({ body: [valid()] }), 400, "validation_error", /object/],
    ["an empty body", () => ({ body: undefined, raw: "" }), 400, "validation_error"],
    ["missing to and subject", () => ({ body: { from: valid().from, html: "x" } }), 422, "missing_required_field", /`to`.*`subject`/],
    ["missing from", () => ({ body: { ...valid(), from: undefined } }), 422, "missing_required_field", /`from`/],
    ["from that is not an address", () => ({ body: { ...valid(), from: "not an address" } }), 422, "validation_error", /`from`/],
    ["to as a number", () => ({ body: { ...valid(), to: 42 } }), 422, "validation_error", /`to`/],
    ["subject as an object", () => ({ body: { ...valid(), subject: { a: 1 } } }), 422, "validation_error", /`subject`/],
    ["an empty subject", () => ({ body: { ...valid(), subject: "" } }), 422, "validation_error", /`subject`/],
    ["CR/LF in the subject", () => ({ body: { ...valid(), subject: "Hi\r\nBcc: victim@example.com" } }), 422, "validation_error", /`subject`/],
    ["a subject of 999 characters", () => ({ body: { ...valid(), subject: "x".repeat(999) } }), 422, "validation_error", /`subject`/],
    ["CR/LF in a display name", () => ({ body: { ...valid(), from: `"Evil\r\nBcc: x@y.z" <hi@${acct.domain}>` } }), 422, "validation_error", /`from`/],
    ["CR/LF in an address", () => ({ body: { ...valid(), to: "a@example.com\r\nBcc: x@y.z" } }), 422, "validation_error", /`to`/],
    ["LF in a cc address", () => ({ body: { ...valid(), cc: ["ok@example.com", "b@example.com\nX-Evil: 1"] } }), 422, "validation_error", /`cc\[1\]`/],
    ["CR/LF in a header value", () => ({ body: { ...valid(), headers: { "X-Ref": "a\r\nBcc: x@y.z" } } }), 422, "validation_error", /`headers\.X-Ref`/],
    ["a header name with a colon", () => ({ body: { ...valid(), headers: { "X-A:B": "1" } } }), 422, "validation_error", /headers/],
    ["a header name with a space", () => ({ body: { ...valid(), headers: { "X A": "1" } } }), 422, "validation_error", /headers/],
    ["overriding From by header", () => ({ body: { ...valid(), headers: { from: "x@evil.test" } } }), 422, "validation_error", /tern sets this header/],
    // Issue 20, item 9: trace and verdict headers (smtp-bridge/trace-headers.ts) are refused, named.
    ...["Received", "Authentication-Results", "ARC-Seal", "arc-message-signature", "ARC-Authentication-Results", "Resent-From",
      "Received-SPF", "Delivered-To", "X-Spam-Status", "X-Spam-Flag", "X-Received", "Return-Path", "DKIM-Signature"].map(
      (name): (typeof cases)[number] => [`a ${name} header`, () => ({ body: { ...valid(), headers: { "X-Fine": "1", [name]: "forged" } } }), 422, "validation_error", new RegExp(`\`headers\\.${name}\`.*cannot be set`)],
    ),
    ["overriding Bcc by header", () => ({ body: { ...valid(), headers: { Bcc: "x@evil.test" } } }), 422, "validation_error", /tern sets this header/],
    ["51 recipients", () => ({ body: { ...valid(), to: Array.from({ length: 51 }, (_, i) => `r${i}@example.com`) } }), 422, "validation_error", /at most 50/],
    ["an empty to array", () => ({ body: { ...valid(), to: [] } }), 422, "validation_error", /`to`/],
    ["neither html nor text", () => ({ body: { ...valid(), html: undefined } }), 422, "missing_required_field", /`html` or `text`/],
    ["text opted out without html", () => ({ body: { ...valid(), html: undefined, text: "" } }), 422, "missing_required_field", /`html` or `text`/],
    ["html as a number", () => ({ body: { ...valid(), html: 5 } }), 422, "validation_error", /`html`/],
    ["a tag with a space", () => ({ body: { ...valid(), tags: [{ name: "a b", value: "x" }] } }), 422, "validation_error", /`tags\[0\]\.name`/],
    ["76 tags", () => ({ body: { ...valid(), tags: Array.from({ length: 76 }, (_, i) => ({ name: `t${i}`, value: "v" })) } }), 422, "validation_error", /`tags`/],
    ["a tag value of 257 characters", () => ({ body: { ...valid(), tags: [{ name: "n", value: "v".repeat(257) }] } }), 422, "validation_error", /`tags\[0\]\.value`/],
    ["undecodable attachment", () => ({ body: { ...valid(), attachments: [{ filename: "a.txt", content: "!!!not base64!!!" }] } }), 422, "invalid_attachment", /attachments\[0\]/],
    ["attachment bytes out of range", () => ({ body: { ...valid(), attachments: [{ filename: "a.bin", content: [1, 2, 300] }] } }), 422, "invalid_attachment", /attachments\[0\]/],
    ["attachment without content or path", () => ({ body: { ...valid(), attachments: [{ filename: "a.txt" }] } }), 422, "invalid_attachment", /attachments\[0\]/],
    ["attachment path on loopback", () => ({ body: { ...valid(), attachments: [{ path: "https://127.0.0.1/x.pdf" }] } }), 422, "invalid_attachment"],
    ["attachment path on a private network", () => ({ body: { ...valid(), attachments: [{ path: "https://10.0.0.8/x.pdf" }] } }), 422, "invalid_attachment"],
    ["attachment path on link-local metadata", () => ({ body: { ...valid(), attachments: [{ path: "https://169.254.169.254/latest/meta-data" }] } }), 422, "invalid_attachment"],
    ["attachment path to localhost", () => ({ body: { ...valid(), attachments: [{ path: "https://localhost/x.pdf" }] } }), 422, "invalid_attachment"],
    ["attachment path over http", () => ({ body: { ...valid(), attachments: [{ path: "http://example.com/x.pdf" }] } }), 422, "invalid_attachment"],
    ["a content_id of 128 characters", () => ({ body: { ...valid(), attachments: [{ filename: "a.png", content: "AAAA", content_id: "c".repeat(128) }] } }), 422, "validation_error"],
    ["scheduled_at in the past", () => ({ body: { ...valid(), scheduled_at: "2001-01-01T00:00:00Z" } }), 422, "validation_error", /`scheduled_at`/],
    ["scheduled_at beyond 30 days", () => ({ body: { ...valid(), scheduled_at: "in 45 days" } }), 422, "validation_error", /`scheduled_at`/],
    ["scheduled_at that is not a date", () => ({ body: { ...valid(), scheduled_at: "whenever you like" } }), 422, "validation_error", /`scheduled_at`/],
  ];
  for (const [name, make, status, errorName, mention] of cases) {
    it(`refuses ${name} with ${status} ${errorName}`, async () => {
      const { body, raw } = make();
      const res = raw !== undefined
        ? await api(acct.token, "POST", "/emails", raw)
        : await api(acct.token, "POST", "/emails", body);
      await expectRefused(res, status, errorName, mention);
    });
  }

  it("refuses a body over 40 MB with 413", async () => {
    const big = "x".repeat(40 * 1024 * 1024 + 10);
    const res = await api(acct.token, "POST", "/emails", { ...valid(), html: big });
    await expectRefused(res, 413, "validation_error", /40 MB/);
  });

  it("reads a body of unknown length piece by piece: a send works, and over 40 MB is refused with 413", async () => {
    const own = await createAccount(); // this test sends one email
    const streamed = (parts: Uint8Array[]) =>
      exports.default.fetch(new Request("http://tern.test/emails", {
        method: "POST",
        headers: { authorization: `Bearer ${own.token}`, "content-type": "application/json" },
        body: new ReadableStream({ pull(c) { const next = parts.shift(); if (next) c.enqueue(next); else c.close(); } }),
      }));
    const json = new TextEncoder().encode(JSON.stringify({ ...valid(), from: `hi@${own.domain}` }));
    const ok = await streamed([json.subarray(0, 10), json.subarray(10)]);
    expect(ok.status, await ok.clone().text()).toBe(200);
    const before = await countRows("emails", own.accountId);
    const mb = new Uint8Array(1024 * 1024).fill(0x20);
    const res = await streamed(Array.from({ length: 41 }, () => mb));
    expect(res.status).toBe(413);
    expect(((await res.json()) as { message: string }).message).toMatch(/40 MB/);
    expect(await countRows("emails", own.accountId)).toBe(before);
  });

  it("refuses a from domain the account has not verified with 403", async () => {
    const res = await api(acct.token, "POST", "/emails", { ...valid(), from: "hi@not-mine.test" });
    await expectRefused(res, 403, "validation_error", /not-mine\.test.*not verified/);
  });

  it("refuses a domain that is added but still pending with 403", async () => {
    const pending = await createAccount({ domainStatus: "pending" });
    const res = await api(pending.token, "POST", "/emails", { ...valid(), from: `hi@${pending.domain}` });
    expect(res.status).toBe(403);
    expect(await countRows("emails", pending.accountId)).toBe(0);
  });

  it.each(["not_started", "partially_verified", "partially_failed", "failed"])("refuses a %s domain with 403 and records nothing", async (status) => {
    const acctWith = await createAccount({ domainStatus: status });
    const res = await api(acctWith.token, "POST", "/emails", { ...valid(), from: `hi@${acctWith.domain}` });
    expect(res.status).toBe(403);
    expect(await countRows("emails", acctWith.accountId)).toBe(0);
  });

  it("refuses another account's verified domain with 403", async () => {
    const other = await createAccount();
    const res = await api(acct.token, "POST", "/emails", { ...valid(), from: `hi@${other.domain}` });
    await expectRefused(res, 403, "validation_error");
  });

  it("refuses a domain-restricted key outside its domain", async () => {
    const owner = await createAccount();
    await env.DB.prepare("INSERT INTO domains (id, account_id, name, region, status, created_at) VALUES (?, ?, ?, 'us-east-1', 'verified', ?)")
      .bind(crypto.randomUUID(), owner.accountId, `second-${owner.domain}`, Date.now()).run();
    const restricted = await addKey(owner.accountId, "sending_access", owner.domainId);
    const outside = await api(restricted, "POST", "/emails", { ...valid(), from: `hi@second-${owner.domain}` });
    expect(outside.status).toBe(403);
    expect(((await outside.json()) as { name: string }).name).toBe("validation_error");
    const inside = await api(restricted, "POST", "/emails", { ...valid(), from: `hi@${owner.domain}` });
    expect(inside.status).toBe(200);
    expect(await countRows("emails", owner.accountId)).toBe(1);
  });
});

describe("POST /emails/batch refuses bad input", () => {
  it("strict: one bad item refuses the whole batch and names its index", async () => {
    const res = await api(acct.token, "POST", "/emails/batch", [valid(), { ...valid(), to: "nope" }]);
    const body = await expectRefused(res, 422, "validation_error", /\[1\]/);
    expect(body.message).toMatch(/`\[1\]\.to`/);
  });
  it("refuses attachments and scheduled_at in a batch", async () => {
    await expectRefused(await api(acct.token, "POST", "/emails/batch", [{ ...valid(), attachments: [{ filename: "a.txt", content: "aGk=" }] }]), 422, "validation_error", /attachments/);
    await expectRefused(await api(acct.token, "POST", "/emails/batch", [{ ...valid(), scheduled_at: "in 1 hour" }]), 422, "validation_error", /scheduled_at/);
  });
  it("refuses an empty batch and one of 101", async () => {
    await expectRefused(await api(acct.token, "POST", "/emails/batch", []), 422, "validation_error", /between 1 and 100/);
    await expectRefused(await api(acct.token, "POST", "/emails/batch", Array.from({ length: 101 }, valid)), 422, "validation_error", /between 1 and 100/);
  });
  it("refuses a body that is not an array", async () => {
    await expectRefused(await api(acct.token, "POST", "/emails/batch", valid()), 400, "validation_error", /array/);
  });
  it("refuses an unknown x-batch-validation mode", async () => {
    await expectRefused(await api(acct.token, "POST", "/emails/batch", [valid()], { "x-batch-validation": "lenient" }), 422, "validation_error", /x-batch-validation/);
  });
});
