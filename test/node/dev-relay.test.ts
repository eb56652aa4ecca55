// The dev relay (dev/relay.ts) against a real SMTP client (nodemailer) and real HTTP: no mocks.
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import nodemailer from "nodemailer";
import MailComposer from "nodemailer/lib/mail-composer";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevRelay, type DevRelay, type MessageDetail, type MessageSummary } from "../../dev/relay.ts";

let mailDir: string;
let relay: DevRelay;
const base = () => `http://127.0.0.1:${relay.httpPort}`;

function transport() {
  return nodemailer.createTransport({ host: "127.0.0.1", port: relay.smtpPort, secure: false, ignoreTLS: true });
}

async function listMessages(query = ""): Promise<MessageSummary[]> {
  const res = await fetch(`${base()}/api/messages${query}`);
  expect(res.status).toBe(200);
  const body = (await res.json()) as { object: string; data: MessageSummary[] };
  expect(body.object).toBe("list");
  return body.data;
}

async function getMessage(id: string): Promise<MessageDetail> {
  const res = await fetch(`${base()}/api/messages/${id}`);
  expect(res.status).toBe(200);
  return (await res.json()) as MessageDetail;
}

function queuedId(response: string): string {
  const match = /^250 .*queued as (\S+)$/.exec(response);
  expect(match, response).not.toBeNull();
  return match![1]!;
}

function unescapeAttr(value: string): string {
  return value
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&");
}

const attachmentBytes = randomBytes(150_000);
const emailHtml = `<h1 style="color:#333">Welcome, Zoë</h1><p>Tap <a href="https://example.com/x?a=1&b=2">here</a>.</p><script>alert("pwned")</script><img src="https://tracker.example/p.gif">`;
const emailText = "Welcome, Zoë\n\nTap here: https://example.com/x?a=1&b=2\n";
const subject = "Ünïcödé subject ✉ — déjà vu";

// Built once with nodemailer's composer, then sent as raw bytes: the relay must store exactly
// what went on the wire. nodemailer's SMTP client turns bare LF into CRLF while sending (the
// composer leaves bare LFs in text bodies), so `composed` is normalized the same way first.
let composed: Buffer;
let mainId: string;

beforeAll(async () => {
  mailDir = await mkdtemp(join(tmpdir(), "tern-relay-"));
  relay = await startDevRelay({ smtpPort: 0, httpPort: 0, mailDir, hostname: "relay.test" });
  composed = await new MailComposer({
    from: "Acme <hello@acme.test>",
    to: "Zoë <zoe@example.com>",
    bcc: "audit@acme.test",
    subject,
    text: emailText,
    html: emailHtml,
    attachments: [{ filename: "report ü.bin", content: attachmentBytes, contentType: "application/octet-stream" }],
  })
    .compile()
    .build()
    .then((built) => Buffer.from(built.toString("latin1").replace(/\r?\n/g, "\r\n"), "latin1"));
});

afterAll(async () => {
  await relay?.close();
  if (mailDir) await rm(mailDir, { recursive: true, force: true });
});

describe("dev relay", () => {
  it("stores exactly the bytes it received, with the envelope beside them", async () => {
    expect(composed.includes("audit@acme.test")).toBe(false); // the composer drops Bcc
    const info = await transport().sendMail({
      envelope: { from: "bounces@acme.test", to: ["zoe@example.com", "audit@acme.test"] },
      raw: composed,
    });
    expect(info.accepted).toEqual(["zoe@example.com", "audit@acme.test"]);
    mainId = queuedId(info.response);
    expect(mainId).toMatch(/^\d{8}T\d{9}Z-\d{3}-[0-9a-f]{6}$/);

    const eml = await readFile(join(mailDir, `${mainId}.eml`));
    expect(eml.equals(composed)).toBe(true);
    const meta = JSON.parse(await readFile(join(mailDir, `${mainId}.json`), "utf8"));
    expect(meta.envelope).toEqual({ from: "bounces@acme.test", to: ["zoe@example.com", "audit@acme.test"] });
    expect(Math.abs(Date.parse(meta.receivedAt) - Date.now())).toBeLessThan(10_000);
    expect((await readdir(mailDir)).filter((n) => n.endsWith(".tmp"))).toEqual([]);
  });

  it("keeps dot-stuffed lines and odd bytes intact", async () => {
    const raw = Buffer.from(
      "From: a@example.com\r\nTo: b@example.com\r\nSubject: dots\r\n\r\n.one leading dot\r\n..two leading dots\r\n.\r\n \r\nend\r\n",
    );
    const info = await transport().sendMail({ envelope: { from: "a@example.com", to: ["b@example.com"] }, raw });
    const id = queuedId(info.response);
    expect((await readFile(join(mailDir, `${id}.eml`))).equals(raw)).toBe(true);
    const res = await fetch(`${base()}/api/messages/${id}/raw`);
    expect(Buffer.from(await res.arrayBuffer()).equals(raw)).toBe(true);
  });

  it("serves the parsed message over the JSON API, bcc only in the envelope", async () => {
    const list = await listMessages();
    const item = list.find((m) => m.id === mainId)!;
    expect(item).toMatchObject({
      from: "Acme <hello@acme.test>",
      to: ["zoe@example.com"],
      envelope: { from: "bounces@acme.test", to: ["zoe@example.com", "audit@acme.test"] },
      subject,
      size: composed.length,
      attachmentCount: 1,
    });
    expect(item.date).not.toBeNull();

    const m = await getMessage(mainId);
    expect(m.subject).toBe(subject);
    expect(m.headers.subject).toBe(subject);
    expect(m.headers["mime-version"]).toBe("1.0");
    expect(m.headers.bcc).toBeUndefined();
    expect(JSON.stringify(m.headers)).not.toContain("audit@acme.test");
    expect(m.envelope.to).toContain("audit@acme.test");
    expect(m.html).toBe(emailHtml);
    expect(m.text?.trim()).toBe(emailText.trim());
    expect(m.attachments).toHaveLength(1);
    expect(m.attachments[0]).toMatchObject({
      index: 0,
      filename: "report ü.bin",
      contentType: "application/octet-stream",
      size: attachmentBytes.length,
      sha256: createHash("sha256").update(attachmentBytes).digest("hex"),
    });
  });

  it("records a bcc sent through nodemailer's normal path in the envelope only", async () => {
    const info = await transport().sendMail({
      from: "app@acme.test",
      to: "visible@example.com",
      bcc: "Hidden Person <hidden@example.com>",
      subject: "bcc check",
      text: "hi",
    });
    expect(info.envelope.to).toEqual(["visible@example.com", "hidden@example.com"]);
    const id = queuedId(info.response);
    const m = await getMessage(id);
    expect(m.envelope).toEqual(info.envelope);
    expect(m.to).toEqual(["visible@example.com"]);
    expect(m.headers.bcc).toBeUndefined();
    const raw = await (await fetch(`${base()}/api/messages/${id}/raw`)).text();
    expect(raw).not.toContain("hidden@example.com");

    // ?to= filters on envelope recipients, so the bcc recipient finds it.
    const hidden = await listMessages("?to=HIDDEN@example.com");
    expect(hidden.map((x) => x.id)).toEqual([id]);
    expect(await listMessages("?to=nobody@example.com")).toEqual([]);

    const page = await (await fetch(`${base()}/messages/${id}`)).text();
    expect(page).toMatch(/hidden@example\.com <span class="badge warn"[^>]*>envelope only \(bcc\)/);
  });

  it("lists messages newest first on the mailbox page, escaping what it shows", async () => {
    const info = await transport().sendMail({
      from: '"<b>Mallory</b>" <mallory@example.com>',
      to: "victim@example.com",
      subject: "<script>alert(1)</script>",
      text: "x",
    });
    const id = queuedId(info.response);
    const res = await fetch(`${base()}/`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).not.toMatch(/script-src[^;]*'unsafe-inline'/);
    const html = await res.text();
    expect(html).toContain("&lt;script&gt;alert(1)&lt;/script&gt;");
    expect(html).not.toContain("<script>alert(1)");
    expect(html).not.toContain("<b>Mallory</b>");
    expect(html).toContain(subject);
    // every script on the page carries the CSP nonce
    const nonce = /'nonce-([^']+)'/.exec(csp)![1];
    for (const tag of html.match(/<script[^>]*>/g) ?? []) expect(tag).toBe(`<script nonce="${nonce}">`);
    // newest first, and the message with an attachment has a badge
    expect(html.indexOf(`/messages/${id}"`)).toBeGreaterThan(-1);
    expect(html.indexOf(`/messages/${id}"`)).toBeLessThan(html.indexOf(`/messages/${mainId}"`));
    const mainRow = html.slice(html.indexOf(`/messages/${mainId}"`));
    expect(mainRow.slice(0, mainRow.indexOf("</tr>"))).toContain('title="Attachments"');
  });

  it("renders the HTML part only inside a sandboxed iframe under a strict CSP", async () => {
    const res = await fetch(`${base()}/messages/${mainId}`);
    expect(res.status).toBe(200);
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("img-src data:");
    expect(csp).not.toMatch(/script-src[^;]*('unsafe-inline'|\*|https?:)/);
    expect(csp).toContain("frame-ancestors 'none'");
    const page = await res.text();
    const iframes = page.match(/<iframe[^>]*>/g) ?? [];
    expect(iframes).toHaveLength(1);
    expect(iframes[0]).toContain('sandbox=""');
    const srcdoc = /srcdoc="([^"]*)"/.exec(iframes[0]!)![1]!;
    expect(unescapeAttr(srcdoc)).toBe(emailHtml);
    expect(page).not.toContain('<script>alert("pwned")');
    expect(page).not.toContain('<img src="https://tracker.example');
    // the text part, the attachment link, the headers and the envelope are on the page too
    expect(page).toContain("Tap here: https://example.com/x?a=1&amp;b=2");
    expect(page).toContain(`href="/messages/${mainId}/attachments/0"`);
    expect(page).toContain("report ü.bin");
    expect(page).toContain("&lt;bounces@acme.test&gt;");
    expect(page).toMatch(/audit@acme\.test <span class="badge warn"/);
  });

  it("downloads attachments byte-exact", async () => {
    for (const prefix of ["", "/api"]) {
      const res = await fetch(`${base()}${prefix}/messages/${mainId}/attachments/0`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-disposition")).toMatch(/^attachment; .*filename\*=UTF-8''report%20%C3%BC\.bin/);
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      expect(Buffer.from(await res.arrayBuffer()).equals(attachmentBytes)).toBe(true);
    }
  });

  it("serves the raw source as text/plain", async () => {
    for (const path of [`/messages/${mainId}/raw`, `/api/messages/${mainId}/raw`]) {
      const res = await fetch(`${base()}${path}`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
      expect(Buffer.from(await res.arrayBuffer()).equals(composed)).toBe(true);
    }
    const dl = await fetch(`${base()}/messages/${mainId}/raw?download=1`);
    expect(dl.headers.get("content-disposition")).toContain(`${mainId}.eml`);
  });

  it("answers 404 for unknown ids, attachments and paths", async () => {
    const paths = [
      "/api/messages/20990101T000000000Z-000-000000",
      "/messages/20990101T000000000Z-000-000000",
      "/messages/nope/raw",
      "/api/messages/nope/raw",
      `/messages/${mainId}/attachments/7`,
      `/messages/${mainId}/attachments/x`,
      "/api/messages/..%2F..%2Fetc%2Fpasswd",
      "/nothing-here",
    ];
    for (const path of paths) {
      const res = await fetch(`${base()}${path}`);
      expect(res.status, path).toBe(404);
      await res.arrayBuffer();
    }
    const api = await fetch(`${base()}/api/messages/unknown`);
    expect(api.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await api.json()).toMatchObject({ statusCode: 404 });
    const del = await fetch(`${base()}/api/messages/unknown`, { method: "DELETE" });
    expect(del.status).toBe(404);
    const wrongMethod = await fetch(`${base()}/`, { method: "POST" });
    expect(wrongMethod.status).toBe(405);
  });

  it("refuses Host headers that are not loopback (DNS rebinding)", async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const socket = connect(relay.httpPort, "127.0.0.1", () => {
        socket.write("GET /api/messages HTTP/1.1\r\nHost: evil.example:8025\r\nConnection: close\r\n\r\n");
      });
      let data = "";
      socket.on("data", (d) => (data += d.toString()));
      socket.on("end", () => resolve(Number(data.split(" ")[1])));
      socket.on("error", reject);
    });
    expect(status).toBe(403);
  });

  it("waits for a message with ?wait=", async () => {
    const waiting = listMessages("?to=late@example.com&wait=10000");
    await new Promise((r) => setTimeout(r, 200));
    await transport().sendMail({ from: "a@acme.test", to: "late@example.com", subject: "late", text: "x" });
    const list = await waiting;
    expect(list.map((m) => m.subject)).toEqual(["late"]);
  });

  it("lands 20 concurrent sends", async () => {
    const before = (await listMessages()).length;
    const infos = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        transport().sendMail({ from: "burst@acme.test", to: `burst${i}@example.com`, subject: `burst ${i}`, text: `n=${i}` }),
      ),
    );
    const ids = infos.map((info) => queuedId(info.response));
    expect(new Set(ids).size).toBe(20);
    const list = await listMessages();
    expect(list.length).toBe(before + 20);
    const subjects = list.filter((m) => m.subject.startsWith("burst ")).map((m) => m.subject);
    expect(subjects.sort()).toEqual(Array.from({ length: 20 }, (_, i) => `burst ${i}`).sort());
    // ids sort by arrival: the list is ordered newest first
    const listed = list.map((m) => m.id);
    expect(listed).toEqual([...listed].sort().reverse());
    for (const id of ids) {
      const m = list.find((x) => x.id === id)!;
      expect(m.envelope.to).toEqual([`burst${m.subject.slice(6)}@example.com`]);
    }
  });

  it("refuses a message over 50 MB with 552 and stores nothing", async () => {
    const before = (await readdir(mailDir)).length;
    const line = `${"x".repeat(998)}\r\n`;
    const raw = Buffer.concat([Buffer.from("Subject: too big\r\n\r\n"), Buffer.from(line.repeat(Math.ceil((50 * 1024 * 1024) / line.length) + 10))]);
    const err = await transport()
      .sendMail({ envelope: { from: "a@acme.test", to: ["big@example.com"] }, raw })
      .then(() => null, (e: { responseCode?: number }) => e);
    expect(err?.responseCode).toBe(552);
    expect((await readdir(mailDir)).length).toBe(before);
    expect(await listMessages("?to=big@example.com")).toEqual([]);
  });

  it("keeps the mailbox across restarts", async () => {
    const before = await listMessages();
    expect(before.length).toBeGreaterThan(20);
    await relay.close();
    relay = await startDevRelay({ smtpPort: 0, httpPort: 0, mailDir });
    const after = await listMessages();
    expect(after).toEqual(before);
    expect((await getMessage(mainId)).html).toBe(emailHtml);
    const page = await (await fetch(`${base()}/`)).text();
    expect(page).toContain(`/messages/${mainId}"`);
  });

  it("lets a session in flight finish when closing, and tells idle ones 421", async () => {
    const idle = await smtpSession(relay.smtpPort);
    await idle.command("EHLO idle.test", 250);
    const busy = await smtpSession(relay.smtpPort);
    await busy.command("EHLO busy.test", 250);
    await busy.command("MAIL FROM:<slow@acme.test>", 250);
    await busy.command("RCPT TO:<slow@example.com>", 250);
    await busy.command("DATA", 354);
    busy.socket.write("From: slow@acme.test\r\nTo: slow@example.com\r\nSubject: in flight\r\n\r\nfirst half\r\n");

    const started = Date.now();
    const closing = relay.close();
    expect(await idle.nextReply()).toMatch(/^421 /);
    await new Promise((r) => setTimeout(r, 150));
    busy.socket.write("second half\r\n.\r\n");
    const reply = await busy.nextReply();
    expect(reply).toMatch(/^250 .*queued as /);
    busy.socket.end();
    await closing;
    expect(Date.now() - started).toBeLessThan(5_000);
    const id = /queued as (\S+)/.exec(reply)![1]!;
    const eml = await readFile(join(mailDir, `${id}.eml`), "utf8");
    expect(eml).toBe("From: slow@acme.test\r\nTo: slow@example.com\r\nSubject: in flight\r\n\r\nfirst half\r\nsecond half\r\n");
    relay = await startDevRelay({ smtpPort: 0, httpPort: 0, mailDir });
  });

  it("empties the mailbox with DELETE /api/messages", async () => {
    expect((await listMessages()).length).toBeGreaterThan(0);
    const res = await fetch(`${base()}/api/messages`, { method: "DELETE" });
    expect(res.status).toBe(200);
    expect(await listMessages()).toEqual([]);
    expect((await readdir(mailDir)).filter((n) => n.endsWith(".eml") || n.endsWith(".json"))).toEqual([]);
    expect((await fetch(`${base()}/api/messages/${mainId}`)).status).toBe(404);
    const page = await (await fetch(`${base()}/`)).text();
    expect(page).toContain("No messages yet");
  });
});

/** A bare SMTP client, for the shutdown test (it has to stop in the middle of DATA). */
async function smtpSession(port: number): Promise<{ socket: Socket; nextReply(): Promise<string>; command(line: string, code: number): Promise<string> }> {
  const socket = connect(port, "127.0.0.1");
  let buffer = "";
  const replies: string[] = [];
  const waiting: Array<(reply: string) => void> = [];
  socket.on("data", (chunk) => {
    buffer += chunk.toString("utf8");
    for (let nl = buffer.indexOf("\r\n"); nl !== -1; nl = buffer.indexOf("\r\n")) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 2);
      if (/^\d{3}-/.test(line)) continue; // multi-line reply: wait for its last line
      const next = waiting.shift();
      if (next) next(line);
      else replies.push(line);
    }
  });
  socket.on("error", () => {});
  const nextReply = () =>
    new Promise<string>((resolve, reject) => {
      const ready = replies.shift();
      if (ready !== undefined) return resolve(ready);
      const timer = setTimeout(() => reject(new Error("no SMTP reply within 5 s")), 5_000);
      waiting.push((line) => {
        clearTimeout(timer);
        resolve(line);
      });
    });
  const command = async (line: string, code: number) => {
    socket.write(`${line}\r\n`);
    const reply = await nextReply();
    expect(reply.startsWith(String(code)), `${line} -> ${reply}`).toBe(true);
    return reply;
  };
  expect(await nextReply()).toMatch(/^220 /);
  return { socket, nextReply, command };
}
