// One-click unsubscribe (RFC 8058) and the contacts API. Mail that asks (a List-Unsubscribe
// header holding {{{RESEND_UNSUBSCRIBE_URL}}}) goes out per recipient with its own signed URL
// and List-Unsubscribe-Post, DKIM-signed; the one-click POST marks that contact unsubscribed
// (contact.created or contact.updated); a forged token changes nothing; contacts are per
// account with contact.* events.
import { env, exports } from "cloudflare:workers";
import PostalMime from "postal-mime";
import { beforeAll, describe, expect, it } from "vitest";
import { readConfig } from "../../worker/config.ts";
import { signUnsubscribeToken } from "../../worker/contacts/unsubscribe-token.ts";
import { linkTokenKey } from "../../worker/tracking/outgoing.ts";
import { api, createAccount, type TestAccount } from "./fixtures.ts";
import { address, bytesOf, capturedFor, rawText, type Captured } from "./peers.ts";
import { waitFor } from "./wait.ts";
import { authenticateCaptured, publish, publishRecords, type DomainRecord } from "./zone.ts";

let acct: TestAccount;
let domain: string;

beforeAll(async () => {
  acct = await createAccount({ listening: true });
  await publish("_spf.tern.test", "TXT", ["v=spf1 ip4:127.0.0.1 -all"]);
  domain = `un${crypto.randomUUID().slice(0, 8)}.dkim.test`;
  const created = (await (await api(acct.token, "POST", "/domains", { name: domain })).json()) as { id: string; records: DomainRecord[] };
  await publishRecords(domain, created.records);
  expect(((await (await api(acct.token, "POST", `/domains/${created.id}/verify`)).json()) as { status: string }).status).toBe("verified");
});

const ASK = { "List-Unsubscribe": "<{{{RESEND_UNSUBSCRIBE_URL}}}>, <mailto:unsubscribe@acme.example>" };

async function sendAndCapture(to: string[], extra: Record<string, unknown> = {}, a = acct, from = `News <news@${domain}>`): Promise<{ id: string; msgs: Captured[] }> {
  const res = await api(a.token, "POST", "/emails", { from, to, subject: "Newsletter", html: '<p>News. <a href="{{{RESEND_UNSUBSCRIBE_URL}}}">Unsubscribe</a></p>', headers: ASK, ...extra });
  expect(res.status, await res.clone().text()).toBe(200);
  const { id } = (await res.json()) as { id: string };
  const msgs: Captured[] = [];
  for (const r of to) msgs.push((await waitFor(`mail for ${r}`, async () => ((await capturedFor(r)).length ? capturedFor(r) : undefined), 15_000))[0]!);
  return { id, msgs };
}

const header = (raw: string, name: string) => raw.replace(/\r\n[ \t]+/g, " ").match(new RegExp(`^${name}: (.*)\r$`, "mi"))?.[1];
const tokenOf = (raw: string) => header(raw, "List-Unsubscribe")!.match(/<https:\/\/t\.tern\.test\/u\/([A-Za-z0-9_-]+)>/)![1]!;

function oneClick(token: string) {
  return exports.default.fetch(new Request(`https://t.tern.test/u/${token}`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: "List-Unsubscribe=One-Click",
  }));
}
interface Contact { id: string; email: string; unsubscribed: boolean; first_name: string | null; last_name: string | null }
async function contactsOf(a: TestAccount): Promise<Contact[]> {
  return ((await (await api(a.token, "GET", "/contacts?limit=100")).json()) as { data: Contact[] }).data;
}
async function contactEvents(a: TestAccount) {
  const rows = await env.DB.prepare("SELECT type, payload_json FROM webhook_events WHERE account_id = ? AND type LIKE 'contact.%' ORDER BY id").bind(a.accountId).all<{ type: string; payload_json: string }>();
  return rows.results.map((r) => ({ type: r.type, data: (JSON.parse(r.payload_json) as { data: Contact }).data }));
}

describe("List-Unsubscribe on mail that asks for it", () => {
  let sent: { id: string; msgs: Captured[] };
  let to: string, cc: string;
  beforeAll(async () => {
    to = address("reader"); cc = address("other-reader");
    sent = await sendAndCapture([to, cc]);
  });

  it("each recipient gets its own one-click URL, List-Unsubscribe-Post, and a DKIM signature over both", async () => {
    const [a, b] = sent.msgs.map(rawText);
    for (const [raw, msg, rcpt] of [[a!, sent.msgs[0]!, to], [b!, sent.msgs[1]!, cc]] as const) {
      expect(msg.recipients).toEqual([rcpt]);
      expect(header(raw, "List-Unsubscribe")).toMatch(/^<https:\/\/t\.tern\.test\/u\/[A-Za-z0-9_-]+>, <mailto:unsubscribe@acme\.example>$/);
      expect(header(raw, "List-Unsubscribe-Post")).toBe("List-Unsubscribe=One-Click");
      expect(header(raw, "DKIM-Signature")).toMatch(/h=[^;]*list-unsubscribe:list-unsubscribe-post/);
      const verdict = await authenticateCaptured(msg);
      expect(verdict.dkim[0]).toMatchObject({ result: "pass", domain });
      // The html placeholder became the same URL.
      const html = (await PostalMime.parse(bytesOf(msg.rawBase64))).html!;
      expect(html).toContain(`href="https://t.tern.test/u/${tokenOf(raw)}"`);
    }
    expect(tokenOf(a!)).not.toBe(tokenOf(b!));
  });

  it("a link only in the headers: one body for every recipient (hashed once), each signature still passes", async () => {
    const [x, y] = [address("hdr-only"), address("hdr-only")];
    const { msgs } = await sendAndCapture([x, y], { html: "<p>No link in the body.</p>", attachments: [{ filename: "a.txt", content: btoa("attached\r\n") }] });
    const raws = msgs.map(rawText);
    for (const msg of msgs) expect((await authenticateCaptured(msg)).dkim[0]).toMatchObject({ result: "pass", domain });
    expect(tokenOf(raws[0]!)).not.toBe(tokenOf(raws[1]!));
    const bodyOf = (raw: string) => raw.slice(raw.indexOf("\r\n\r\n"));
    expect(bodyOf(raws[0]!)).toBe(bodyOf(raws[1]!));
  });

  it("mail that does not ask has no List-Unsubscribe-Post and keeps its own headers", async () => {
    const r = address("plain");
    const { msgs } = await sendAndCapture([r], { html: "<p>x</p>", headers: { "List-Unsubscribe": "<https://acme.example/u/1>" } });
    const raw = rawText(msgs[0]!);
    expect(header(raw, "List-Unsubscribe")).toBe("<https://acme.example/u/1>");
    expect(header(raw, "List-Unsubscribe-Post")).toBeUndefined();
  });

  it("the one-click POST creates the contact unsubscribed (contact.created); again changes nothing", async () => {
    const token = tokenOf(rawText(sent.msgs[0]!));
    const res = await oneClick(token);
    expect(res.status).toBe(200);
    const contact = (await contactsOf(acct)).find((c) => c.email === to);
    expect(contact).toMatchObject({ unsubscribed: true });
    expect((await oneClick(token)).status).toBe(200);
    const evs = (await contactEvents(acct)).filter((e) => e.data.email === to);
    expect(evs.map((e) => e.type)).toEqual(["contact.created"]);
    expect(evs[0]!.data).toMatchObject({ id: contact!.id, unsubscribed: true });
  });

  it("for an existing contact it emits contact.updated; the GET page changes nothing", async () => {
    const created = await api(acct.token, "POST", "/contacts", { email: cc, first_name: "Ada" });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    const token = tokenOf(rawText(sent.msgs[1]!));
    const page = await exports.default.fetch(new Request(`https://t.tern.test/u/${token}`));
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("<form method=\"post\">");
    expect((await (await api(acct.token, "GET", `/contacts/${id}`)).json()) as Contact).toMatchObject({ unsubscribed: false });
    expect((await oneClick(token)).status).toBe(200);
    expect((await (await api(acct.token, "GET", `/contacts/${id}`)).json()) as Contact).toMatchObject({ unsubscribed: true, first_name: "Ada" });
    const evs = (await contactEvents(acct)).filter((e) => e.data.id === id);
    expect(evs.map((e) => [e.type, e.data.unsubscribed])).toEqual([["contact.created", false], ["contact.updated", true]]);
  });

  it("forged, altered and other-key tokens get a 404 and change nothing", async () => {
    const a = await createAccount();
    const victim = address("victim");
    await api(a.token, "POST", "/contacts", { email: victim });
    const before = await contactEvents(a);
    const real = await signUnsubscribeToken(await linkTokenKey(readConfig(env)), { accountId: a.accountId, emailId: crypto.randomUUID(), recipient: victim });
    const wrong = await crypto.subtle.importKey("raw", new TextEncoder().encode("y".repeat(40)), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    const forged = await signUnsubscribeToken(wrong, { accountId: a.accountId, emailId: crypto.randomUUID(), recipient: victim });
    const flip = (t: string, i: number) => t.slice(0, i) + (t[i] === "A" ? "B" : "A") + t.slice(i + 1);
    for (const t of [forged, flip(real, 5), flip(real, 30), flip(real, 60), flip(real, real.length - 3), real + "A", "x"]) {
      const res = await oneClick(t);
      expect(res.status, t).toBe(404);
      expect(((await res.json()) as { name: string }).name).toBe("not_found");
      expect((await exports.default.fetch(new Request(`https://t.tern.test/u/${t}`))).status).toBe(404);
    }
    expect((await contactsOf(a)).find((c) => c.email === victim)).toMatchObject({ unsubscribed: false });
    expect(await contactEvents(a)).toEqual(before);
    // The untouched token works: the forgeries failed for their alterations alone.
    expect((await oneClick(real)).status).toBe(200);
    expect((await contactsOf(a)).find((c) => c.email === victim)).toMatchObject({ unsubscribed: true });
  });
});

describe("/contacts", () => {
  it("create (201), read, update, list and delete, with contact.* events", async () => {
    const a = await createAccount({ listening: true });
    const email = address("Person");
    const res = await api(a.token, "POST", "/contacts", { email, first_name: "Grace", last_name: "Hopper" });
    expect(res.status).toBe(201);
    const { object, id } = (await res.json()) as { object: string; id: string };
    expect(object).toBe("contact");
    expect(await (await api(a.token, "GET", `/contacts/${id}`)).json()).toMatchObject({
      object: "contact", id, email: email.toLowerCase(), first_name: "Grace", last_name: "Hopper", unsubscribed: false,
    });
    const patched = await api(a.token, "PATCH", `/contacts/${id}`, { unsubscribed: true, last_name: null });
    expect(patched.status).toBe(200);
    expect(await patched.json()).toEqual({ object: "contact", id });
    expect(await (await api(a.token, "GET", `/contacts/${id}`)).json()).toMatchObject({ unsubscribed: true, last_name: null, first_name: "Grace" });
    expect((await contactsOf(a)).map((c) => c.id)).toEqual([id]);
    const deleted = await api(a.token, "DELETE", `/contacts/${id}`);
    expect(await deleted.json()).toEqual({ object: "contact", id, contact: id, deleted: true });
    expect((await api(a.token, "GET", `/contacts/${id}`)).status).toBe(404);
    expect((await contactEvents(a)).map((e) => [e.type, e.data.unsubscribed])).toEqual([
      ["contact.created", false], ["contact.updated", true], ["contact.deleted", true],
    ]);
  });

  it("reads, updates and deletes by email address as by id, as Resend's API does", async () => {
    const a = await createAccount({ listening: true }), b = await createAccount();
    const email = address("ByMail");
    const { id } = (await (await api(a.token, "POST", "/contacts", { email, first_name: "Ada" })).json()) as { id: string };
    // The address as given, in another case, or percent-encoded: the same contact.
    for (const ref of [email, email.toUpperCase(), encodeURIComponent(email)]) {
      expect(await (await api(a.token, "GET", `/contacts/${ref}`)).json(), ref).toMatchObject({ object: "contact", id, email: email.toLowerCase(), first_name: "Ada" });
    }
    expect(await (await api(a.token, "PATCH", `/contacts/${email}`, { unsubscribed: true })).json()).toEqual({ object: "contact", id });
    expect(await (await api(a.token, "GET", `/contacts/${id}`)).json()).toMatchObject({ unsubscribed: true });
    // Another account has no contact at that address: 404, and nothing changes.
    expect((await api(b.token, "GET", `/contacts/${email}`)).status).toBe(404);
    expect((await api(b.token, "PATCH", `/contacts/${email}`, { unsubscribed: false })).status).toBe(404);
    expect((await api(b.token, "DELETE", `/contacts/${email}`)).status).toBe(404);
    expect((await api(a.token, "GET", `/contacts/nobody-${crypto.randomUUID()}@example.com`)).status).toBe(404);
    expect(await (await api(a.token, "DELETE", `/contacts/${email}`)).json()).toEqual({ object: "contact", id, contact: id, deleted: true });
    expect((await api(a.token, "GET", `/contacts/${id}`)).status).toBe(404);
    expect((await contactEvents(a)).map((e) => e.type)).toEqual(["contact.created", "contact.updated", "contact.deleted"]);
  });

  it("validates input and refuses a second contact for the same address", async () => {
    const a = await createAccount();
    for (const body of [{}, { email: "nope" }, { email: "A <a@example.com>" }, { email: address("x"), unsubscribed: "yes" }, { email: address("x"), first_name: 3 }]) {
      expect((await api(a.token, "POST", "/contacts", body)).status, JSON.stringify(body)).toBe(422);
    }
    const email = address("dup");
    expect((await api(a.token, "POST", "/contacts", { email })).status).toBe(201);
    const dup = await api(a.token, "POST", "/contacts", { email: email.toUpperCase() });
    expect(dup.status).toBe(422);
    expect(((await dup.json()) as { name: string }).name).toBe("validation_error");
  });

  it("another account's contacts cannot be read, changed or deleted", async () => {
    const a = await createAccount(), b = await createAccount();
    const { id } = (await (await api(a.token, "POST", "/contacts", { email: address("mine") })).json()) as { id: string };
    expect((await api(b.token, "GET", `/contacts/${id}`)).status).toBe(404);
    expect((await api(b.token, "PATCH", `/contacts/${id}`, { unsubscribed: true })).status).toBe(404);
    expect((await api(b.token, "DELETE", `/contacts/${id}`)).status).toBe(404);
    expect(await contactsOf(b)).toEqual([]);
    expect(await (await api(a.token, "GET", `/contacts/${id}`)).json()).toMatchObject({ unsubscribed: false });
  });
});
