// End to end against real processes started the way `npm start` starts them: the official
// `resend` Node client talks to `wrangler dev`, mail arrives at the dev relay, and an
// independent parser (mailparser) reads what a recipient would get.
import { authenticate } from "mailauth";
import { simpleParser } from "mailparser";
import { Resend } from "resend";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startTern, type TernProcess } from "../support/processes.ts";

let tern: TernProcess;
let resend: Resend;

beforeAll(async () => {
  tern = await startTern();
  resend = new Resend(tern.apiKey, { baseUrl: tern.url });
}, 120_000);

afterAll(async () => {
  const code = await tern?.stop();
  expect(code).toBe(0);
});

interface RelayMessage { id: string; envelope: { from: string; to: string[] } }

async function relayMessageFor(rcpt: string): Promise<{ meta: RelayMessage; raw: Buffer }> {
  const list = (await (await fetch(`${tern.relayHttp}/api/messages?to=${encodeURIComponent(rcpt)}&wait=30000`)).json()) as { data: RelayMessage[] };
  expect(list.data.length).toBeGreaterThan(0);
  const meta = list.data[0]!;
  const raw = Buffer.from(await (await fetch(`${tern.relayHttp}/api/messages/${meta.id}/raw`)).arrayBuffer());
  return { meta, raw };
}

const pdf = Buffer.from("%PDF-1.4\n" + "binary \u0000\u0001\u00ff payload ".repeat(200), "latin1");
const png = Buffer.from(Array.from({ length: 256 }, (_, i) => i));

describe("the resend client against tern", () => {
  it("sends an email with every field and it arrives intact, without Bcc", async () => {
    const { data, error } = await resend.emails.send({
      from: `Tern Test <hello@${tern.domain}>`,
      to: ["alice@example.com"],
      cc: "carol@example.com",
      bcc: ["secret@example.com"],
      replyTo: "support@example.com",
      subject: "Grüße from tern ✓",
      html: '<p>Hello <b>Alice</b> — ünïcødé</p><img src="cid:logo">',
      text: "Hello Alice — ünïcødé",
      tags: [{ name: "category", value: "e2e" }],
      headers: { "X-Campaign": "e2e-42" },
      attachments: [
        { filename: "report.pdf", content: pdf },
        { filename: "logo.png", content: png, contentId: "logo" },
      ],
    });
    expect(error).toBeNull();
    expect(data!.id).toMatch(/^[0-9a-f-]{36}$/);

    const { meta, raw } = await relayMessageFor("alice@example.com");
    // One message per recipient, Bcc included, each from its own return path; none shows the Bcc.
    const copies = [{ meta, raw }, await relayMessageFor("carol@example.com"), await relayMessageFor("secret@example.com")];
    expect(copies.map((c) => c.meta.envelope.to)).toEqual([["alice@example.com"], ["carol@example.com"], ["secret@example.com"]]);
    expect(new Set(copies.map((c) => c.meta.envelope.from)).size).toBe(3);
    for (const c of copies) {
      expect(c.raw.toString("latin1")).not.toMatch(/^bcc:/im);
      expect(c.raw.toString("latin1")).not.toContain("secret@example.com");
    }

    const mail = await simpleParser(raw);
    expect(mail.subject).toBe("Grüße from tern ✓");
    expect(mail.from!.value).toEqual([{ address: `hello@${tern.domain}`, name: "Tern Test" }]);
    expect((mail.to as { value: { address: string }[] }).value.map((a) => a.address)).toEqual(["alice@example.com"]);
    expect((mail.cc as { value: { address: string }[] }).value.map((a) => a.address)).toEqual(["carol@example.com"]);
    expect(mail.replyTo!.value[0]!.address).toBe("support@example.com");
    expect(mail.bcc).toBeUndefined();
    expect(mail.headers.get("x-campaign")).toBe("e2e-42");
    expect(mail.messageId).toMatch(new RegExp(`^<${data!.id}@${tern.domain}>$`));
    expect(mail.date).toBeInstanceOf(Date);
    expect(mail.text!.trim()).toBe("Hello Alice — ünïcødé");
    expect(mail.html).toContain("<b>Alice</b> — ünïcødé");
    const report = mail.attachments.find((a) => a.filename === "report.pdf")!;
    expect(report.contentType).toBe("application/pdf");
    expect(Buffer.compare(report.content, pdf)).toBe(0);
    const logo = mail.attachments.find((a) => a.filename === "logo.png")!;
    expect(logo.contentId).toBe("<logo>");
    expect(Buffer.compare(logo.content, png)).toBe(0);

    // Signed with the dev domain's DKIM key: mailauth verifies it against the record the
    // domains API lists (through the resend client), from the envelope's return path.
    const domains = await resend.domains.list();
    const devDomain = domains.data!.data.find((d) => d.name === tern.domain)!;
    const detail = await resend.domains.get(devDomain.id);
    expect(detail.data!.status).toBe("verified");
    const dkimRecord = detail.data!.records.find((r) => r.record === "DKIM")!;
    const verdict = await authenticate(raw, {
      ip: "127.0.0.1", helo: "tern.localhost", sender: meta.envelope.from, mta: "relay.test",
      resolver: async (name: string, type: string) => {
        if (type === "TXT" && name === `${dkimRecord.name}.${tern.domain}`) return [[dkimRecord.value]];
        throw Object.assign(new Error(`ENOTFOUND ${name}`), { code: "ENOTFOUND" });
      },
    });
    expect(verdict.dkim.results.map((r) => r.status.result)).toEqual(["pass"]);
    expect(meta.envelope.from).toMatch(new RegExp(`@send\\.${tern.domain.replace(/\./g, "\\.")}$`));

    const shown = await waitForLastEvent(data!.id, "delivered");
    expect(shown).toMatchObject({ subject: "Grüße from tern ✓", bcc: ["secret@example.com"], tags: [{ name: "category", value: "e2e" }] });
  });

  it("sends a batch", async () => {
    const { data, error } = await resend.batch.send([
      { from: `hello@${tern.domain}`, to: "batch1@example.com", subject: "one", text: "1" },
      { from: `hello@${tern.domain}`, to: "batch2@example.com", subject: "two", html: "<p>2</p>" },
    ]);
    expect(error).toBeNull();
    expect(data!.data).toHaveLength(2);
    const two = await simpleParser((await relayMessageFor("batch2@example.com")).raw);
    expect(two.subject).toBe("two");
    expect(two.text!.trim()).toBe("2"); // derived from html
  });

  it("returns the contract's errors through the client", async () => {
    const unverified = await resend.emails.send({ from: "a@not-verified.test", to: "x@example.com", subject: "s", text: "t" });
    expect(unverified.error).toMatchObject({ name: "validation_error", statusCode: 403 });
    const missing = await resend.emails.send({ from: `a@${tern.domain}`, to: "x@example.com", text: "t" } as never);
    expect(missing.error).toMatchObject({ name: "missing_required_field", statusCode: 422 });
    const badKey = await new Resend("tern_" + "0".repeat(40), { baseUrl: tern.url }).emails.get(crypto.randomUUID());
    expect(badKey.error).toMatchObject({ name: "invalid_api_key", statusCode: 403 });
    const notFound = await resend.emails.get(crypto.randomUUID());
    expect(notFound.error).toMatchObject({ name: "not_found", statusCode: 404 });
  });

  it("a gzip-compressed body through wrangler dev's HTTP server is read once, as the JSON it holds", async () => {
    // The Worker decompresses (worker/http.ts): this shows the server in front of it does not
    // do so first, which would make the Worker's own decompression fail.
    const email = `gzip-${crypto.randomUUID()}@example.com`;
    const body = new Uint8Array(await new Response(new Blob([JSON.stringify({ email, first_name: "Gz" })]).stream().pipeThrough(new CompressionStream("gzip"))).arrayBuffer());
    const res = await fetch(`${tern.url}/contacts`, { method: "POST", body, headers: { authorization: `Bearer ${tern.apiKey}`, "content-type": "application/json", "content-encoding": "gzip" } });
    expect(res.status, await res.clone().text()).toBe(201);
    const got = await resend.contacts.get({ email });
    expect(got.data?.first_name).toBe("Gz");
  });

  it("reads metrics with emails.metrics(): Resend's query and answer shape", async () => {
    const { data: sent } = await resend.emails.send({ from: `hello@${tern.domain}`, to: "metrics@example.com", subject: "counted", text: "t" });
    await waitForLastEvent(sent!.id, "delivered");
    const { data, error } = await resend.emails.metrics({
      metrics: ["received", "delivered", "delivery_rate"],
      dimensions: ["period", "domain"],
      granularity: "daily",
      timezone: "Asia/Kathmandu",
    });
    expect(error).toBeNull();
    expect(data).toMatchObject({ object: "metrics", metrics: ["received", "delivered", "delivery_rate"], dimensions: ["period", "domain"], granularity: "daily" });
    expect(data!.totals.received).toBeGreaterThanOrEqual(1);
    expect(data!.totals.delivery_rate).toBeGreaterThan(0);
    const today = data!.data!.at(-1)!;
    expect(today).toMatchObject({ domain_name: tern.domain });
    expect(today.period).toMatch(/T\d{2}:(15|30|45|00):00\.000Z$/);
    const one = await resend.emails.metrics({ emailId: [sent!.id], metrics: ["received", "sent"] });
    expect(one.data!.totals).toEqual({ received: 1, sent: 1 });
    const bad = await resend.emails.metrics({ timezone: "Mars/Olympus_Mons" });
    expect(bad.error).toMatchObject({ name: "validation_error", message: expect.stringContaining("`timezone`") });
  });

  it("manages a contact by id and by email", async () => {
    // The dev account may make 10 requests a second: keep under it, and wait out a 429 from
    // the tests before (the client does not retry).
    const paced = async <T extends { error: { statusCode: number | null } | null }>(call: () => Promise<T>): Promise<T> => {
      for (;;) {
        await new Promise((r) => setTimeout(r, 150));
        const answer = await call();
        if (answer.error?.statusCode !== 429) return answer;
        await new Promise((r) => setTimeout(r, 1000));
      }
    };
    const email = `contact-${crypto.randomUUID().slice(0, 8)}@example.com`;
    const created = await paced(() => resend.contacts.create({ email, firstName: "Ada", lastName: "Lovelace" }));
    expect(created.error).toBeNull();
    const id = created.data!.id;
    expect((await paced(() => resend.contacts.get({ id }))).data).toMatchObject({ object: "contact", id, email, first_name: "Ada" });
    expect((await paced(() => resend.contacts.get({ email }))).data).toMatchObject({ id, email, last_name: "Lovelace" });
    expect((await paced(() => resend.contacts.update({ email, unsubscribed: true }))).error).toBeNull();
    expect((await paced(() => resend.contacts.get(id))).data).toMatchObject({ unsubscribed: true });
    expect((await paced(() => resend.contacts.list())).data!.data.map((c) => c.id)).toContain(id);
    expect((await paced(() => resend.contacts.remove({ email }))).data).toMatchObject({ id, deleted: true });
    expect((await paced(() => resend.contacts.get({ email }))).error).toMatchObject({ name: "not_found", statusCode: 404 });
    await new Promise((r) => setTimeout(r, 1000)); // the next test starts with the second's requests unspent
  });
});

describe("the resend client's newer calls (issue 19)", () => {
  // The dev account allows 10 requests a second: each test starts with a fresh second.
  beforeEach(() => new Promise((r) => setTimeout(r, 1_100)));

  it("attachments of a sent email, a share link, and the request log", async () => {
    const { data } = await resend.emails.send({
      from: `hello@${tern.domain}`, to: "files@example.com", subject: "files", text: "t",
      attachments: [{ filename: "report.pdf", content: pdf }],
    });
    const emailId = data!.id;
    const list = await resend.emails.attachments.list({ emailId });
    expect(list.error).toBeNull();
    expect(list.data!.data).toHaveLength(1);
    const att = list.data!.data[0]!;
    expect(att).toMatchObject({ filename: "report.pdf", content_type: "application/pdf", size: pdf.length });
    const one = await resend.emails.attachments.get({ emailId, id: att.id });
    expect(one.data).toMatchObject({ object: "attachment", id: att.id });
    const bytes = Buffer.from(await (await fetch(one.data!.download_url)).arrayBuffer());
    expect(bytes.equals(pdf)).toBe(true);

    const shared = await resend.emails.share(emailId, { expiresIn: "2 hours" });
    expect(shared.error).toBeNull();
    const page = await fetch(shared.data!.url);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("files");
    const missing = await resend.emails.share(crypto.randomUUID());
    expect(missing.error).toMatchObject({ name: "not_found", statusCode: 404 });

    const logs = await resend.logs.list({ limit: 100 });
    expect(logs.error).toBeNull();
    const sent = logs.data!.data.find((l) => l.endpoint === "/emails" && l.method === "POST");
    expect(sent).toBeDefined();
    const log = await resend.logs.get(sent!.id);
    expect(log.data).toMatchObject({ response_status: 200 });
    expect(JSON.stringify(log.data)).not.toContain(pdf.toString("base64").slice(0, 40));
  });

  it("renames a key", async () => {
    const key = await resend.apiKeys.create({ name: "to rename" });
    const renamed = await resend.apiKeys.update(key.data!.id, { name: "renamed" });
    expect(renamed.error).toBeNull();
    expect(renamed.data).toEqual({ object: "api_key", id: key.data!.id });
  });

  it("manages suppressions by id, by address and in batches", async () => {
    const added = await resend.suppressions.add({ email: "Gone@Example.com" });
    expect(added.error).toBeNull();
    const byEmail = await resend.suppressions.get("gone@example.com");
    expect(byEmail.data).toMatchObject({ id: added.data!.id, email: "gone@example.com", origin: "manual" });
    const manual = await resend.suppressions.list({ origin: "manual" });
    expect(manual.data!.data.map((s) => s.email)).toContain("gone@example.com");
    expect((await resend.suppressions.remove(added.data!.id)).data).toMatchObject({ id: added.data!.id, deleted: true });
    expect((await resend.suppressions.get(added.data!.id)).error).toMatchObject({ name: "not_found" });

    const batch = await resend.suppressions.batch.add({ emails: ["b1@example.com", "b2@example.com"] });
    expect(batch.data!.data).toHaveLength(2);
    const removed = await resend.suppressions.batch.remove({ emails: ["b1@example.com", "b2@example.com"] });
    expect(removed.data!.data.map((d) => d.deleted)).toEqual([true, true]);
  });

  it("domain claims answer in Resend's error shape when there is nothing to claim", async () => {
    const claim = await resend.domains.claims.create({ name: `nobody-${Date.now()}.example.com` });
    expect(claim.data).toBeNull();
    expect(claim.error).toMatchObject({ name: "validation_error", statusCode: 422 });
    const get = await resend.domains.claims.get(crypto.randomUUID());
    expect(get.error).toMatchObject({ name: "not_found" });
  });
});

describe("the API reference under wrangler dev", () => {
  it("serves Scalar's script as a static asset beside /docs, from tern itself", async () => {
    const page = await (await fetch(`${tern.url}/docs`)).text();
    const src = /<script src="(\/docs\/scalar\.js\?v=[^"]+)"/.exec(page)?.[1];
    expect(src).toBeDefined();
    const res = await fetch(`${tern.url}${src}`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/javascript/);
    const js = await res.text();
    expect(js.length).toBeGreaterThan(1_000_000);
    expect(js).toContain("createApiReference");
  });
});

describe("npm start's lifecycle", () => {
  it("Ctrl-C stops every process it started, and state survives a restart", async () => {
    const { data } = await resend.emails.send({ from: `hello@${tern.domain}`, to: "persist@example.com", subject: "kept", text: "t" });
    await waitForLastEvent(data!.id, "delivered");
    const { url, relayHttp, stateDir } = tern;
    expect(await tern.stop("SIGINT")).toBe(0);
    for (const target of [`${url}/health`, `${relayHttp}/api/messages`]) {
      await expect(fetch(target), `${target} still answers`).rejects.toThrow();
    }
    tern = await startTern({ stateDir });
    resend = new Resend(tern.apiKey, { baseUrl: tern.url });
    const again = await resend.emails.get(data!.id);
    expect(again.data).toMatchObject({ id: data!.id, subject: "kept", last_event: "delivered" });
    const kept = await relayMessageFor("persist@example.com");
    expect(kept.raw.toString()).toContain("Subject: kept");
  });
});

async function waitForLastEvent(id: string, last: string) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const { data } = await resend.emails.get(id);
    if (data && (data as { last_event: string }).last_event === last) return data;
    if (Date.now() > deadline) throw new Error(`email ${id} never reached ${last}: ${JSON.stringify(data)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
