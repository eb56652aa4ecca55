// Every message tern delivers passes DKIM, SPF and DMARC at the receiver, as judged by an
// independent implementation (mailauth) against the records the test zone serves: the domain
// is added and verified through the API, mail goes through the real queue consumer to a
// loopback SMTP peer, and the peer's capture is authenticated as a receiving MTA would.
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { RelaxedBodyStream, relaxedBody } from "../../worker/dkim/canonical.ts";
import { bodyHash, signComposed, signMessage, type SigningKey } from "../../worker/dkim/sign.ts";
import { buildMessage, composeMessage, type MimeMessageInput } from "../../worker/mime/build.ts";
import { api, createAccount, type TestAccount } from "./fixtures.ts";
import { address, capturedFor, rawText, type Captured } from "./peers.ts";
import { waitFor } from "./wait.ts";
import { authenticateCaptured, publish, publishRecords, type DomainRecord } from "./zone.ts";

let acct: TestAccount;

interface Verified {
  id: string;
  name: string;
  records: DomainRecord[];
}

/** A domain added and verified the way a user does it: publish what the API lists, verify. */
async function verifiedDomain(dkim_algorithm = "rsa"): Promise<Verified> {
  const name = `k${crypto.randomUUID().slice(0, 8)}.dkim.test`;
  const created = (await (await api(acct.token, "POST", "/domains", { name, dkim_algorithm })).json()) as Verified;
  await publishRecords(name, created.records);
  await publish(`_dmarc.${name}`, "TXT", ["v=DMARC1; p=reject; adkim=r; aspf=r"]);
  const v = (await (await api(acct.token, "POST", `/domains/${created.id}/verify`)).json()) as { status: string };
  expect(v.status).toBe("verified");
  return created;
}

let rsa: Verified;

beforeAll(async () => {
  acct = await createAccount();
  // tern's SPF include: the relay tern hands mail to (here the loopback peer) is allowed.
  await publish("_spf.tern.test", "TXT", ["v=spf1 ip4:127.0.0.1 -all"]);
  rsa = await verifiedDomain();
});

async function sendAndCapture(body: Record<string, unknown>): Promise<Captured> {
  const to = address("dkim");
  const res = await api(acct.token, "POST", "/emails", { to, subject: "DKIM", ...body });
  expect(res.status, await res.clone().text()).toBe(200);
  const [msg] = await waitFor("the message at the peer", async () => ((await capturedFor(to)).length ? capturedFor(to) : undefined), 15_000);
  return msg!;
}

const bigBinary = () => {
  const b = new Uint8Array(300_000);
  for (let i = 0; i < b.length; i++) b[i] = (i * 7919) % 256;
  let s = "";
  for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode(...b.subarray(i, i + 0x8000));
  return btoa(s);
};

const cases: [string, Record<string, unknown>][] = [
  ["plain text", { text: "Hello,\nthis is plain text.\n" }],
  ["html only", { html: "<p>Hello <b>world</b></p>" }],
  ["html and text", { html: "<h1>Hi</h1><p>there</p>", text: "Hi there" }],
  ["a non-ASCII subject and body", { subject: "Grüße aus Köln — 日本語のテスト 🎉", html: "<p>Ünïcödé ✓ 你好</p>", text: "Ünïcödé ✓ 你好" }],
  ["attachments and an inline image", {
    html: '<p>See <img src="cid:logo"></p>',
    attachments: [
      { filename: "report.bin", content: bigBinary() },
      { filename: "logo.png", content: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==", content_id: "logo" },
      { filename: "notes ü.txt", content: btoa("line one\r\n.line with a dot\r\n") },
    ],
  }],
  ["lines starting with a dot", { text: ".\n..\n.hidden line\n. space\nlast\n." }],
  ["very long lines", { text: "x".repeat(5000) + "\n" + "word ".repeat(2000), html: `<p>${"y".repeat(8000)}</p>` }],
  ["trailing whitespace and blank lines", { text: "trailing spaces   \ntabs\t\t\n  \n\n\nend   \n\n\n\n" }],
  ["cc, reply_to and list headers", {
    cc: address("dkim-cc"),
    reply_to: "Replies <replies@example.com>",
    text: "x",
    headers: { "List-Unsubscribe": "<https://example.com/u/1>, <mailto:u@example.com>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click", "X-Entity-Ref-ID": "abc" },
  }],
];

describe("DKIM, SPF and DMARC at the receiver (mailauth)", () => {
  it.each(cases)("pass for %s", async (_what, body) => {
    const msg = await sendAndCapture({ from: `Sender <news@${rsa.name}>`, ...body });
    const verdict = await authenticateCaptured(msg);
    expect(verdict.dkim).toHaveLength(1);
    expect(verdict.dkim[0]).toMatchObject({ result: "pass", domain: rsa.name, algo: "rsa-sha256" });
    expect(verdict.dkim[0]!.selector).toBe(rsa.records.find((r) => r.record === "DKIM")!.name.split(".")[0]);
    expect(verdict.spf).toMatchObject({ result: "pass", domain: `send.${rsa.name}` });
    expect(verdict.dmarc).toMatchObject({ result: "pass", policy: "reject" });
  });

  it("signs the header list of the issue, From over-signed, relaxed/relaxed", async () => {
    const msg = await sendAndCapture({ from: `news@${rsa.name}`, cc: address("c"), reply_to: "r@example.com", text: "x", headers: { "List-Unsubscribe": "<https://example.com/u>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click" } });
    const raw = rawText(msg);
    expect(raw.startsWith("DKIM-Signature: ")).toBe(true);
    const field = raw.slice(0, raw.search(/\r\n(?![ \t])/)).replace(/\r\n[ \t]+/g, " ");
    expect(field).toContain("c=relaxed/relaxed");
    expect(field).toContain(`d=${rsa.name};`);
    const h = field.match(/h=([^;]+);/)![1]!.split(":");
    // From is listed once more than it occurs: nobody can add a second From after signing.
    expect(h).toEqual(["from", "from", "to", "cc", "subject", "date", "message-id", "mime-version", "content-type", "reply-to", "list-unsubscribe", "list-unsubscribe-post"]);
  });

  it("DMARC passes on DKIM alone when SPF does not (mail relayed from elsewhere)", async () => {
    const msg = await sendAndCapture({ from: `news@${rsa.name}`, text: "forwarded" });
    const res = await fetch(`http://127.0.0.1:${env.TEST_PEERS.dns}/authenticate`, {
      method: "POST",
      body: JSON.stringify({ rawBase64: msg.rawBase64, ip: "192.0.2.77", helo: "forwarder.example", mailFrom: msg.envelopeFrom }),
    });
    const verdict = (await res.json()) as { dkim: { result: string }[]; spf: { result: string }; dmarc: { result: string } };
    expect(verdict.spf.result).toBe("softfail"); // the return path's record ends in ~all
    expect(verdict.dkim[0]!.result).toBe("pass");
    expect(verdict.dmarc.result).toBe("pass");
  });

  it.each([
    ["the body", (raw: string) => raw.replace("original body", "altered body")],
    ["the subject", (raw: string) => raw.replace("\r\nSubject: DKIM\r\n", "\r\nSubject: DKlM\r\n")],
    ["the From header", (raw: string, d: string) => raw.replace(`\r\nFrom: news@${d}\r\n`, "\r\nFrom: news@evil.example\r\n")],
    ["an added From header", (raw: string) => raw.replace("\r\nSubject:", "\r\nFrom: ceo@evil.example\r\nSubject:")],
  ])("a message altered after signing fails (%s)", async (_what, alter) => {
    const msg = await sendAndCapture({ from: `news@${rsa.name}`, text: "original body" });
    const raw = rawText(msg);
    const tampered = alter(raw, rsa.name);
    expect(tampered).not.toBe(raw);
    const verdict = await authenticateCaptured(msg, btoa(String.fromCharCode(...new TextEncoder().encode(tampered))));
    expect(verdict.dkim.length).toBeGreaterThan(0);
    for (const r of verdict.dkim) expect(r.result).not.toBe("pass");
  });

  it.each(["ed25519", "rsa+ed25519"])("passes with %s keys", async (algorithm) => {
    const d = await verifiedDomain(algorithm);
    const msg = await sendAndCapture({ from: `news@${d.name}`, subject: "Ed25519 ✓", html: "<p>signed</p>" });
    const verdict = await authenticateCaptured(msg);
    const algos = verdict.dkim.map((r) => r.algo).sort();
    expect(algos).toEqual(algorithm === "ed25519" ? ["ed25519-sha256"] : ["ed25519-sha256", "rsa-sha256"]);
    for (const r of verdict.dkim) expect(r).toMatchObject({ result: "pass", domain: d.name });
    expect(verdict.dmarc!.result).toBe("pass");
  });

  it("after a rotation, mail is signed with the new selector and still passes", async () => {
    const d = await verifiedDomain();
    const rotated = (await (await api(acct.token, "POST", `/domains/${d.id}/dkim/rotate`)).json()) as Verified;
    const next = rotated.records.filter((r) => r.record === "DKIM")[1]!;
    // Before the new record is verified, the old key signs.
    let verdict = await authenticateCaptured(await sendAndCapture({ from: `news@${d.name}`, text: "before" }));
    expect(verdict.dkim[0]).toMatchObject({ result: "pass", selector: d.records[0]!.name.split(".")[0] });
    await publishRecords(d.name, [next]);
    await api(acct.token, "POST", `/domains/${d.id}/verify`);
    await new Promise((r) => setTimeout(r, 10_100)); // the consumer's per-domain key cache (10 s)
    verdict = await authenticateCaptured(await sendAndCapture({ from: `news@${d.name}`, text: "after" }));
    expect(verdict.dkim[0]).toMatchObject({ result: "pass", selector: next.name.split(".")[0] });
  }, 40_000);

  it("a domain with tls: enforced never goes over the plain relay: delayed, with the reason", async () => {
    const d = await verifiedDomain();
    expect((await api(acct.token, "PATCH", `/domains/${d.id}`, { tls: "enforced" })).status).toBe(200);
    const to = address("enforced");
    const res = await api(acct.token, "POST", "/emails", { from: `news@${d.name}`, to, subject: "secret", text: "x" });
    const { id } = (await res.json()) as { id: string };
    const delayed = await waitFor("delivery_delayed", async () => {
      const events = ((await (await api(acct.token, "GET", `/emails/${id}/events`)).json()) as { data: { type: string; data: { message?: string } }[] }).data;
      return events.find((e) => e.type === "delivery_delayed");
    }, 15_000);
    expect(delayed.data.message).toMatch(/enforces TLS/);
    expect(await capturedFor(to)).toEqual([]);
  });

  it("canonicalization matches RFC 6376's relaxed body examples", () => {
    const canonicalBodyForTest = (s: string) => new TextDecoder().decode(relaxedBody(new TextEncoder().encode(s)));
    expect(canonicalBodyForTest(" C \r\nD \t E\r\n\r\n\r\n")).toBe(" C\r\nD E\r\n");
    expect(canonicalBodyForTest("")).toBe("");
    expect(canonicalBodyForTest("\r\n\r\n")).toBe("");
    expect(canonicalBodyForTest("no newline")).toBe("no newline\r\n");
    expect(canonicalBodyForTest("a  \r\n\r\nb")).toBe("a\r\n\r\nb\r\n");
    expect(canonicalBodyForTest("bare\nline feeds\n\n")).toBe("bare\r\nline feeds\r\n");
    expect(canonicalBodyForTest("lone\rCR \r\n")).toBe("lone\rCR\r\n");
  });

  it("canonicalization agrees with the RFC's rules applied line by line, on random bodies", () => {
    // The rules of RFC 6376 3.4.4 written the plain way, on strings, as the reference.
    const reference = (s: string) => {
      const lines = s.split(/\r\n|\n/);
      if (/(\r\n|\n)$/.test(s)) lines.pop();
      const relaxed = lines.map((l) => l.replace(/[ \t]+/g, " ").replace(/ $/, ""));
      while (relaxed.length && relaxed[relaxed.length - 1] === "") relaxed.pop();
      return relaxed.length ? relaxed.join("\r\n") + "\r\n" : "";
    };
    const alphabet = " \t\r\nAB.é";
    for (let t = 0; t < 5000; t++) {
      let s = "";
      for (let i = Math.floor(Math.random() * 40); i > 0; i--) s += alphabet[Math.floor(Math.random() * alphabet.length)];
      const bytes = Uint8Array.from(s, (c) => c.charCodeAt(0) & 0xff);
      const latin1 = String.fromCharCode(...bytes);
      expect(String.fromCharCode(...relaxedBody(bytes)), JSON.stringify(latin1)).toBe(reference(latin1));
    }
  });

  it("the relaxed body of a body given in pieces is the whole body's, wherever it is cut", async () => {
    const alphabet = [" ", "\t", "\r", "\n", "\r\n", "A", ".", "\r\n\r\n", "  \r\n"];
    for (let t = 0; t < 2000; t++) {
      let s = "";
      for (let i = Math.floor(Math.random() * 30); i > 0; i--) s += alphabet[Math.floor(Math.random() * alphabet.length)];
      const bytes = new TextEncoder().encode(s);
      const cuts = [0, ...Array.from({ length: Math.floor(Math.random() * 5) }, () => Math.floor(Math.random() * (bytes.length + 1))).sort((a, b) => a - b), bytes.length];
      const stream = new RelaxedBodyStream();
      const out: Uint8Array[] = [];
      for (let i = 0; i + 1 < cuts.length; i++) out.push(...stream.push(bytes.slice(cuts[i], cuts[i + 1])));
      out.push(...stream.end());
      const joined = out.map((c) => String.fromCharCode(...c)).join("");
      expect(joined, JSON.stringify({ s, cuts })).toBe(String.fromCharCode(...relaxedBody(bytes)));
    }
    const whole = new TextEncoder().encode("a  \r\n\r\n \r\nb\r\n\r\n\r\n");
    const expected = btoa(String.fromCharCode(...new Uint8Array(await crypto.subtle.digest("SHA-256", relaxedBody(whole)))));
    expect(await bodyHash([whole.subarray(0, 5), whole.subarray(5, 6), whole.subarray(6)])).toBe(expected);
  });

  it("a composed message signed in pieces is byte for byte the built message signed whole", async () => {
    const pair = (await crypto.subtle.generateKey({ name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" }, true, ["sign", "verify"])) as CryptoKeyPair;
    const key: SigningKey = { domain: "example.com", selector: "s1", algorithm: "rsa", privateKey: pair.privateKey };
    // Attachments several pieces long (not a multiple of a piece), text with trailing blank lines.
    const big = new Uint8Array(300_001).map((_, i) => (i * 31) % 256);
    const input: MimeMessageInput = {
      from: { name: "A", email: "a@example.com" }, to: [{ email: "b@example.com" }], cc: [], replyTo: [],
      subject: "pieces", text: "text   \n\n\n", html: "<p>html</p>", headers: {},
      attachments: [{ filename: "a.bin", contentType: "application/octet-stream", content: big }, { filename: "e.bin", contentType: "application/octet-stream", content: new Uint8Array(0) }],
      messageId: "m@example.com", date: new Date(0), boundarySeed: "seed",
    };
    const signed = await signComposed(composeMessage(input), [key], { timestamp: 1 });
    // Each piece copied as it comes: a piece's buffer is used again for the next.
    const joined = new Uint8Array(signed.length);
    let o = 0;
    let largest = 0;
    for await (const c of signed.chunks()) {
      joined.set(c, o);
      o += c.length;
      largest = Math.max(largest, c.length);
    }
    expect(largest).toBeLessThanOrEqual(96 * 1024);
    expect(o).toBe(signed.length);
    expect(joined).toEqual(await signMessage(buildMessage(input), [key], { timestamp: 1 }));
  });
});
