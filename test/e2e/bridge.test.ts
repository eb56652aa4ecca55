// The SMTP bridge end to end: tern started the way `npm start` starts it (wrangler dev, the
// dev relay, the bridge with the local certificate), independent SMTP clients (nodemailer,
// Python's smtplib, a line-by-line dialog), and mail read back from the relay by mailparser.
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { authenticate } from "mailauth";
import { simpleParser, type ParsedMail } from "mailparser";
import nodemailer from "nodemailer";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTern, type TernProcess } from "../support/processes.ts";
import { SmtpDialog } from "../support/smtp-dialog.ts";

let tern: TernProcess;
let ca: Buffer;

beforeAll(async () => {
  tern = await startTern({
    env: {
      TERN_DEV_PLAN: "pro_50k",
      TERN_DEV_RATE_LIMIT: "1000",
      TERN_BRIDGE_MAX_CONNECTIONS_PER_IP: "200",
      // Every test connects from 127.0.0.1: the wrong-key tests must not lock the others out.
      TERN_BRIDGE_AUTH_MAX_FAILURES: "50",
    },
  });
  ca = readFileSync(tern.bridge.caCertPath);
}, 120_000);

afterAll(async () => {
  expect(await tern?.stop()).toBe(0);
  // A clean stop leaves no pid file naming wrangler's (now gone) process group for a later
  // clean-up to signal.
  if (tern) expect(existsSync(join(tern.stateDir, "tern", "wrangler.pid"))).toBe(false);
});

type Mode = "starttls" | "tls";
function transport(mode: Mode, pass = tern.apiKey, user = "tern") {
  // By address: a host name would have nodemailer ask DNS first (slow where there is none).
  return nodemailer.createTransport({
    host: "127.0.0.1",
    port: mode === "tls" ? tern.bridge.tlsPort : tern.bridge.startTlsPort,
    secure: mode === "tls",
    requireTLS: true,
    auth: { user, pass },
    tls: { ca, servername: "localhost" },
  });
}

async function api(path: string, init: RequestInit = {}): Promise<{ status: number; json: any }> {
  const res = await fetch(`${tern.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${tern.apiKey}`, "content-type": "application/json", ...(init.headers ?? {}) },
  });
  return { status: res.status, json: await res.json() };
}

interface RelayMessage { id: string; envelope: { from: string; to: string[] } }

async function relayList(rcpt: string, waitMs = 0): Promise<RelayMessage[]> {
  const res = await fetch(`${tern.relayHttp}/api/messages?to=${encodeURIComponent(rcpt)}${waitMs ? `&wait=${waitMs}` : ""}`);
  return ((await res.json()) as { data: RelayMessage[] }).data;
}

async function arrived(rcpt: string): Promise<{ meta: RelayMessage; raw: Buffer; mail: ParsedMail }> {
  const list = await relayList(rcpt, 30_000);
  expect(list.length, `nothing arrived for ${rcpt}`).toBeGreaterThan(0);
  const meta = list[0]!;
  const raw = Buffer.from(await (await fetch(`${tern.relayHttp}/api/messages/${meta.id}/raw`)).arrayBuffer());
  return { meta, raw, mail: await simpleParser(raw) };
}

const idFrom = (response: string) => response.match(/queued as ([0-9a-f-]{36})/)?.[1];

const pdf = Buffer.from("%PDF-1.4\n" + "binary \u0000\u0001\u00ff payload ".repeat(300), "latin1");
const png = Buffer.from(Array.from({ length: 777 }, (_, i) => (i * 7) % 256));

describe("sending through the bridge", () => {
  it("nodemailer over STARTTLS: the message arrives with the same parts, attachments and headers as the same send over REST", async () => {
    const common = {
      subject: "Grüße from the bridge ✓",
      html: '<p>Hello <b>Alice</b> — ünïcødé</p><img src="cid:logo">',
      text: "Hello Alice — ünïcødé",
    };
    const rest = await api("/emails", {
      method: "POST",
      body: JSON.stringify({
        ...common,
        from: `Tern Test <hello@${tern.domain}>`,
        to: ["rest-alice@example.com"],
        cc: ["rest-carol@example.com"],
        bcc: ["rest-secret@example.com"],
        reply_to: ["support@example.com"],
        headers: { "X-Campaign": "bridge-42" },
        tags: [{ name: "category", value: "e2e" }, { name: "path", value: "same" }],
        attachments: [
          { filename: "report.pdf", content: pdf.toString("base64") },
          { filename: "logo.png", content: png.toString("base64"), content_id: "logo" },
        ],
      }),
    });
    expect(rest.status).toBe(200);

    const info = await transport("starttls").sendMail({
      ...common,
      from: `Tern Test <hello@${tern.domain}>`,
      to: ["smtp-alice@example.com"],
      cc: ["smtp-carol@example.com"],
      bcc: ["smtp-secret@example.com"],
      replyTo: "support@example.com",
      headers: { "X-Campaign": "bridge-42", "X-Tern-Tags": "category=e2e, path=same" },
      attachments: [
        { filename: "report.pdf", content: pdf },
        { filename: "logo.png", content: png, cid: "logo" },
      ],
    });
    expect(info.response).toMatch(/^250 2\.0\.0 OK: queued as [0-9a-f-]{36}$/);
    const smtpId = idFrom(info.response)!;

    const viaRest = await arrived("rest-alice@example.com");
    const viaSmtp = await arrived("smtp-alice@example.com");
    // Each recipient, the Bcc one too, gets its own message and envelope; no header shows the Bcc.
    const secret = await arrived("smtp-secret@example.com");
    expect(viaSmtp.meta.envelope.to).toEqual(["smtp-alice@example.com"]);
    expect(secret.meta.envelope.to).toEqual(["smtp-secret@example.com"]);
    expect(secret.meta.envelope.from).not.toBe(viaSmtp.meta.envelope.from);
    expect(viaSmtp.raw.toString("latin1")).not.toContain("smtp-secret@example.com");
    expect(secret.raw.toString("latin1")).not.toContain("smtp-secret@example.com");

    const a = viaRest.mail;
    const b = viaSmtp.mail;
    expect(b.subject).toBe(a.subject);
    expect(b.from!.value).toEqual(a.from!.value);
    expect(b.replyTo!.value).toEqual(a.replyTo!.value);
    const addresses = (m: ParsedMail, f: "to" | "cc") => (m[f] as { value: { address: string }[] }).value.map((x) => x.address.replace(/^(rest|smtp)-/, ""));
    expect(addresses(b, "to")).toEqual(addresses(a, "to"));
    expect(addresses(b, "cc")).toEqual(addresses(a, "cc"));
    expect(b.bcc).toBeUndefined();
    expect(b.text).toBe(a.text);
    expect(b.html).toBe(a.html);
    expect(b.headers.get("x-campaign")).toBe("bridge-42");
    expect(b.headers.has("x-tern-tags")).toBe(false);
    // The same header fields (DKIM-Signature included once the domain signs), in the same MIME shape.
    expect([...b.headers.keys()].sort()).toEqual([...a.headers.keys()].sort());
    expect(b.headers.get("content-type")).toMatchObject({ value: (a.headers.get("content-type") as { value: string }).value });
    const parts = (m: ParsedMail) =>
      m.attachments.map((x) => ({ filename: x.filename, contentType: x.contentType, contentId: x.contentId, disposition: x.contentDisposition, related: x.related, sha: x.checksum, size: x.size }));
    expect(parts(b)).toEqual(parts(a));
    expect(Buffer.compare(b.attachments.find((x) => x.filename === "report.pdf")!.content, pdf)).toBe(0);
    expect(Buffer.compare(b.attachments.find((x) => x.filename === "logo.png")!.content, png)).toBe(0);
    expect(b.messageId).toBe(`<${smtpId}@${tern.domain}>`);

    // DKIM-signed like the REST send: mailauth verifies the signature against the record the
    // domains API lists for the dev domain.
    const domains = await api("/domains");
    const dev = (domains.json.data as { id: string; name: string }[]).find((d) => d.name === tern.domain)!;
    const records = (await api(`/domains/${dev.id}`)).json.records as { record: string; name: string; value: string }[];
    const dkim = records.find((r) => r.record === "DKIM")!;
    const verdict = await authenticate(viaSmtp.raw, {
      ip: "127.0.0.1", helo: "tern.localhost", sender: viaSmtp.meta.envelope.from, mta: "relay.test",
      resolver: async (name: string, type: string) => {
        if (type === "TXT" && name === `${dkim.name}.${tern.domain}`) return [[dkim.value]];
        throw Object.assign(new Error(`ENOTFOUND ${name}`), { code: "ENOTFOUND" });
      },
    });
    expect(verdict.dkim.results.map((r: { status: { result: string } }) => r.status.result)).toEqual(["pass"]);

    const shown = await api(`/emails/${smtpId}`);
    expect(shown.json).toMatchObject({
      bcc: ["smtp-secret@example.com"],
      tags: [{ name: "category", value: "e2e" }, { name: "path", value: "same" }],
    });
  });

  it("nodemailer over implicit TLS: accepted with the email's id, and delivered", async () => {
    const info = await transport("tls").sendMail({ from: `hello@${tern.domain}`, to: "implicit@example.com", subject: "implicit TLS", text: "over TLS from the first byte" });
    const id = idFrom(info.response);
    expect(id).toBeDefined();
    const { mail } = await arrived("implicit@example.com");
    expect(mail.messageId).toBe(`<${id}@${tern.domain}>`);
    expect(mail.text!.trim()).toBe("over TLS from the first byte");
  });

  it("attachments arrive byte for byte, from the bridge's memory and from its spool", async () => {
    // 100 KB stays in memory (under the spool's threshold, 256 KB a message); 1.3 MB goes to the
    // spool, and to the API in several pieces of base64 text (256 KB each).
    for (const size of [100_000, 1_300_000]) {
      const big = randomBytes(size);
      const other = randomBytes(20_001);
      const to = `large-${size}@example.com`;
      const info = await transport("starttls").sendMail({
        from: `hello@${tern.domain}`, to, subject: "large attachments", text: "two attachments",
        attachments: [{ filename: "big.bin", content: big }, { filename: "other.bin", content: other }],
      });
      expect(info.response).toMatch(/^250 /);
      // The bridge's log line for the message says where its attachments waited.
      const id = idFrom(info.response)!;
      let line: string | undefined;
      for (let i = 0; i < 50 && !line; i++, await new Promise((r) => setTimeout(r, 100))) line = tern.output().split("\n").find((l) => l.includes(`"email_id":"${id}"`));
      expect(line?.match(/"spooled":(\d+)/)?.[1], `${size} bytes: attachments spooled`).toBe(size > 256 * 1024 ? "2" : "0");
      const { mail } = await arrived(to);
      expect(mail.attachments.map((a) => a.filename)).toEqual(["big.bin", "other.bin"]);
      expect(Buffer.compare(mail.attachments[0]!.content, big), `big.bin (${size} bytes) as sent`).toBe(0);
      expect(Buffer.compare(mail.attachments[1]!.content, other), "other.bin as sent").toBe(0);
    }
  });

  it("Python's smtplib sends over STARTTLS and over implicit TLS", async () => {
    const script = `
import smtplib, ssl, sys
from email.message import EmailMessage
port_starttls, port_tls, key, ca = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
ctx = ssl.create_default_context(cafile=ca)
def message(to, subject):
    m = EmailMessage()
    m["From"] = "Python <py@tern.test>"
    m["To"] = to
    m["Subject"] = subject
    m["X-Tern-Tags"] = "client=python"
    m.set_content("Sent by smtplib.")
    m.add_attachment(bytes(range(256)) * 4, maintype="application", subtype="octet-stream", filename="bytes.bin")
    return m
with smtplib.SMTP("localhost", port_starttls, timeout=30) as s:
    s.ehlo()
    s.starttls(context=ctx)
    s.login("tern", key)
    print("starttls", s.send_message(message("py-starttls@example.com", "smtplib STARTTLS")))
with smtplib.SMTP_SSL("localhost", port_tls, context=ctx, timeout=30) as s:
    s.login("tern", key)
    print("tls", s.send_message(message("py-tls@example.com", "smtplib TLS")))
`;
    const r = spawnSync("python3", ["-c", script, String(tern.bridge.startTlsPort), String(tern.bridge.tlsPort), tern.apiKey, tern.bridge.caCertPath], { encoding: "utf8", timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain("starttls {}");
    expect(r.stdout).toContain("tls {}");
    for (const [rcpt, subject] of [["py-starttls@example.com", "smtplib STARTTLS"], ["py-tls@example.com", "smtplib TLS"]]) {
      const { mail } = await arrived(rcpt!);
      expect(mail.subject).toBe(subject);
      expect(mail.text!.trim()).toBe("Sent by smtplib.");
      const bin = mail.attachments.find((x) => x.filename === "bytes.bin")!;
      expect(Buffer.compare(bin.content, Buffer.from(Array.from({ length: 1024 }, (_, i) => i % 256)))).toBe(0);
    }
  });

  // Encoded words can decode to any character: a client (or a message it forwards) may put NUL,
  // ESC, CR and LF into a subject or a filename that no header line could carry.
  it.each([
    [
      "a subject holding NUL, ESC, CR LF, tab and C1",
      "Invoice\x00 ready\x1b[2J\r\nBcc: victim@example.org\ttoday\u0085 — ünï 😀", "Invoice ready[2J  Bcc: victim@example.org today — ünï 😀",
      "report.pdf", "report.pdf",
    ],
    [
      "a filename holding NUL, ESC, CR LF, tab and C1",
      "Q3", "Q3",
      "Q3 report\x00\x1b[31m\r\nred\ttab\u009b — ünï 😀.pdf", "Q3 report[31m  red tab — ünï 😀.pdf",
    ],
    ["both holding ESC and C1 only", "Build \x1b[32mpassed\x1b[0m\u0085 ✓", "Build [32mpassed[0m ✓", "build\u0085\u009b.log", "build.log"],
  ])("%s: encoded words arrive as one line of text", async (_what, subject, sentSubject, filename, sentFilename) => {
    const to = `controls-${randomBytes(4).toString("hex")}@example.com`;
    const word = (s: string) => `=?utf-8?b?${Buffer.from(s, "utf8").toString("base64")}?=`;
    const raw = [
      `From: Tern Test <hello@${tern.domain}>`, `To: ${to}`, `Subject: ${word(subject)}`, "MIME-Version: 1.0",
      'Content-Type: multipart/mixed; boundary="b"', "", "--b", "Content-Type: text/plain; charset=utf-8", "", "See attached.", "--b",
      `Content-Type: application/pdf; name="${word(filename)}"`, `Content-Disposition: attachment; filename="${word(filename)}"`,
      "Content-Transfer-Encoding: base64", "", pdf.subarray(0, 600).toString("base64"), "--b--", "",
    ].join("\r\n");
    const info = await transport("starttls").sendMail({ envelope: { from: `hello@${tern.domain}`, to: [to] }, raw });
    expect(info.response).toMatch(/^250 /);
    const { mail } = await arrived(to);
    expect(mail.subject).toBe(sentSubject);
    expect(mail.attachments.map((a) => a.filename)).toEqual([sentFilename]);
    expect(Buffer.compare(mail.attachments[0]!.content, pdf.subarray(0, 600))).toBe(0);
    const stored = await api(`/emails/${idFrom(info.response)}`);
    expect(stored.json.subject).toBe(sentSubject);
  });

  it("a sending_access key can send", async () => {
    const created = await api("/api-keys", { method: "POST", body: JSON.stringify({ name: "smtp only", permission: "sending_access" }) });
    expect(created.status).toBe(201);
    const info = await transport("starttls", created.json.token).sendMail({ from: `hello@${tern.domain}`, to: "sending-key@example.com", subject: "sending_access", text: "t" });
    expect(info.response).toMatch(/^250 /);
    await arrived("sending-key@example.com");
  });

  it("a From whose domain is not verified gets a permanent error with the API's message", async () => {
    const err = await transport("starttls").sendMail({ from: "someone@not-verified.test", to: "x@example.com", subject: "s", text: "t" }).catch((e) => e);
    expect(err.responseCode).toBe(550);
    expect(err.response).toMatch(/^550 5\.7\.1 .*not-verified\.test/);
    const direct = await api("/emails", { method: "POST", body: JSON.stringify({ from: "someone@not-verified.test", to: "x@example.com", subject: "s", text: "t" }) });
    expect(err.response).toContain(direct.json.message);
  });

  it("a message the API finds invalid gets a permanent error naming the field", async () => {
    const err = await transport("starttls").sendMail({ from: `hello@${tern.domain}`, to: "x@example.com", subject: "tags", text: "t", headers: { "X-Tern-Tags": "bad tag=value" } }).catch((e) => e);
    expect(err.responseCode).toBe(554);
    expect(err.response).toMatch(/^554 5\.6\.0 .*tags/);
  });

  it("the same idempotency header twice delivers once (Tern- and Resend-Idempotency-Key)", async () => {
    for (const [header, rcpt] of [["Tern-Idempotency-Key", "idem-tern@example.com"], ["Resend-Idempotency-Key", "idem-resend@example.com"]] as const) {
      const send = () => transport("starttls").sendMail({ from: `hello@${tern.domain}`, to: rcpt, subject: "once", text: "exactly once", date: new Date("2026-11-01T00:00:00Z"), messageId: "<fixed@client.test>", headers: { [header]: `key-${rcpt}` } });
      const first = await send();
      const second = await send();
      expect(idFrom(second.response)).toBe(idFrom(first.response));
      await arrived(rcpt);
    }
    await new Promise((r) => setTimeout(r, 3000)); // a second delivery would have come by now
    expect(await relayList("idem-tern@example.com")).toHaveLength(1);
    expect(await relayList("idem-resend@example.com")).toHaveLength(1);
  });
});

describe("the bridge's rules", () => {
  it("offers no AUTH before STARTTLS and refuses AUTH and MAIL there", async () => {
    const { dialog, greeting } = await SmtpDialog.open(tern.bridge.startTlsPort);
    expect(greeting.code).toBe(220);
    expect(greeting.text).toMatch(/^localhost /);
    const ehlo = await dialog.command("EHLO client.test");
    expect(ehlo.lines).toContain("250-STARTTLS");
    expect(ehlo.text).not.toMatch(/AUTH/);
    const auth = await dialog.command(`AUTH PLAIN ${Buffer.from(`\0tern\0${tern.apiKey}`).toString("base64")}`);
    expect(auth.code).toBeGreaterThanOrEqual(500);
    const mail = await dialog.command(`MAIL FROM:<hello@${tern.domain}>`);
    expect(mail.code).toBe(530);
    expect(mail.text).toMatch(/STARTTLS/);
    // After STARTTLS the same session may log in.
    expect((await dialog.startTls(ca)).code).toBe(220);
    const secured = await dialog.command("EHLO client.test");
    expect(secured.text).toMatch(/AUTH PLAIN LOGIN/);
    expect(secured.text).toMatch(/SIZE 41943040/);
    expect((await dialog.command(`AUTH PLAIN ${Buffer.from(`\0tern\0${tern.apiKey}`).toString("base64")}`)).code).toBe(235);
    dialog.close();
    // nodemailer told not to use TLS cannot log in either.
    const plain = nodemailer.createTransport({ host: "127.0.0.1", port: tern.bridge.startTlsPort, secure: false, ignoreTLS: true, auth: { user: "tern", pass: tern.apiKey } });
    await expect(plain.sendMail({ from: `hello@${tern.domain}`, to: "never@example.com", subject: "s", text: "t" })).rejects.toThrow();
  });

  it("a wrong key, or a user other than tern, gets 535 after a delay", async () => {
    for (const [user, pass] of [["tern", "tern_" + "x".repeat(40)], ["someone", tern.apiKey]]) {
      const t0 = Date.now();
      const err = await transport("tls", pass, user).verify().catch((e) => e);
      expect(err.responseCode).toBe(535);
      expect(err.response).toMatch(/^535 5\.7\.8 /);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    }
  });

  it("a revoked key stops working within seconds", async () => {
    const created = await api("/api-keys", { method: "POST", body: JSON.stringify({ name: "to revoke", permission: "full_access" }) });
    expect(await transport("tls", created.json.token).verify()).toBe(true);
    expect((await api(`/api-keys/${created.json.id}`, { method: "DELETE" })).status).toBe(200);
    const t0 = Date.now();
    for (;;) {
      const err = await transport("tls", created.json.token).verify().then(() => null, (e) => e);
      if (err) {
        expect(err.responseCode).toBe(535);
        break;
      }
      expect(Date.now() - t0, "the revoked key still logs in").toBeLessThan(12_000);
      await new Promise((r) => setTimeout(r, 500));
    }
  });

  it("a message over the size limit is refused at MAIL (SIZE=) and at the end of DATA", async () => {
    const { dialog } = await SmtpDialog.open(tern.bridge.tlsPort, { tls: true, ca });
    expect((await dialog.login(tern.apiKey)).code).toBe(235);
    const declared = await dialog.command(`MAIL FROM:<hello@${tern.domain}> SIZE=${40 * 1024 * 1024 + 1}`);
    expect(declared.code).toBe(552);
    expect((await dialog.command(`MAIL FROM:<hello@${tern.domain}>`)).code).toBe(250);
    expect((await dialog.command("RCPT TO:<too-big@example.com>")).code).toBe(250);
    expect((await dialog.command("DATA")).code).toBe(354);
    await dialog.write(`From: hello@${tern.domain}\r\nTo: too-big@example.com\r\nSubject: too big\r\nContent-Type: text/plain\r\n\r\n`);
    const line = "x".repeat(998) + "\r\n";
    const block = line.repeat(1024); // 1 MB
    for (let i = 0; i < 41; i++) await dialog.write(block);
    const refused = await dialog.command(".");
    expect(refused.code).toBe(552);
    expect(refused.text).toMatch(/^5\.3\.4 /);
    // The session goes on.
    expect((await dialog.command("RSET")).code).toBe(250);
    dialog.close();
    expect(await relayList("too-big@example.com")).toHaveLength(0);
  });

  it("100 concurrent sessions all succeed", async () => {
    const rcpts = Array.from({ length: 100 }, (_, i) => `concurrent-${i}@example.com`);
    const infos = await Promise.all(
      rcpts.map((to, i) => transport(i % 2 ? "tls" : "starttls").sendMail({ from: `hello@${tern.domain}`, to, subject: `concurrent ${i}`, text: `message ${i}` })),
    );
    expect(infos.every((x) => /^250 /.test(x.response))).toBe(true);
    expect(new Set(infos.map((x) => idFrom(x.response))).size).toBe(100);
    const deadline = Date.now() + 60_000;
    for (;;) {
      const counts = await Promise.all(rcpts.map(async (r) => (await relayList(r)).length));
      if (counts.every((c) => c === 1)) break;
      expect(counts.every((c) => c <= 1)).toBe(true);
      expect(Date.now(), `not all arrived: ${counts.filter((c) => c === 0).length} missing`).toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 500));
    }
  });

  it("reports its health", async () => {
    const res = await fetch(tern.bridge.healthUrl);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { status: string; ports: { port: number; tls: string }[]; certificate: { subject: string } };
    expect(body.status).toBe("ok");
    expect(body.ports).toEqual(expect.arrayContaining([{ port: tern.bridge.tlsPort, tls: "implicit" }, { port: tern.bridge.startTlsPort, tls: "starttls" }]));
    expect(body.certificate.subject).toBe("CN=localhost");
  });
});
