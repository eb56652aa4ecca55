// End to end against real processes started the way `npm start` starts them: the official
// `resend` Node client talks to `wrangler dev`, mail arrives at the dev relay, and an
// independent parser (mailparser) reads what a recipient would get.
import { authenticate } from "mailauth";
import { simpleParser } from "mailparser";
import { Resend } from "resend";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
