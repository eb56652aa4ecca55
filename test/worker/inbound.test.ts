// The Worker's email() handler: delivery reports that come back to an email's return path
// become its events (and suppress hard bounces and complaints); mail for receiving-enabled
// domains is stored, parsed, announced and readable through the API with signed links; the
// rest is refused cleanly. Reports are the real-world-shaped samples of test/fixtures/reports.
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { readConfig } from "../../worker/config.ts";
import { handleEmail } from "../../worker/inbound/email-handler.ts";
import { parseReport } from "../../worker/reports/parse.ts";
import { returnPathAddress } from "../../worker/sending/return-path.ts";
import { macKey } from "../../worker/crypto/master-key.ts";
import { toHex } from "../../worker/bytes.ts";
import worker from "../../worker/index.ts";
import { api, createAccount, insertDomain, type TestAccount } from "./fixtures.ts";
import { incoming } from "./incoming.ts";

const files = import.meta.glob("../fixtures/reports/*.eml", { query: "?raw", import: "default", eager: true }) as Record<string, string>;
const fixture = (name: string) => files[`../fixtures/reports/${name}.eml`]!;


let acct: TestAccount;

beforeAll(async () => {
  acct = await createAccount({ listening: true });
});

/** The addresses a report names: the email it is about must have been sent to them. */
function reportRecipients(name: string): string[] {
  const parsed = parseReport(fixture(name), { returnPath: "x@send.example.test" });
  return parsed.ok ? [...new Set(parsed.report.outcomes.flatMap((o) => o.recipients))] : [];
}

/** An email, the return path of its message to its first recipient, and of the others'. */
async function sentEmail(to: string[] = ["delivered@simulator.tern.test"]): Promise<{ id: string; returnPath: string; returnPathOf: (recipient: string) => Promise<string> }> {
  const recipients = to.length ? to : ["someone@example.net"];
  const res = await api(acct.token, "POST", "/emails", { from: `news@${acct.domain}`, to: recipients, subject: "Report me", text: "x" });
  const { id } = (await res.json()) as { id: string };
  const returnPathOf = (recipient: string) => returnPathAddress(env.MASTER_KEY, id, recipient, "send", acct.domain);
  return { id, returnPath: await returnPathOf(recipients[0]!), returnPathOf };
}

/** The per-email return path tern made before return paths named a recipient. */
async function perEmailReturnPath(id: string): Promise<string> {
  const key = await macKey(env.MASTER_KEY, "return-path");
  const tag = toHex(new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(id)))).slice(0, 12);
  return `${id.replace(/-/g, "")}-${tag}@send.${acct.domain}`;
}

async function events(id: string): Promise<{ type: string; data: Record<string, unknown> }[]> {
  const res = await api(acct.token, "GET", `/emails/${id}/events`);
  return ((await res.json()) as { data: { type: string; data: Record<string, unknown> }[] }).data;
}

async function webhookEvents(emailId: string): Promise<{ type: string; data: Record<string, unknown> }[]> {
  const rows = await env.DB.prepare("SELECT payload_json FROM webhook_events WHERE account_id = ? ORDER BY id").bind(acct.accountId).all<{ payload_json: string }>();
  return rows.results.map((r) => JSON.parse(r.payload_json)).filter((p) => p.data?.email_id === emailId);
}

async function suppressed(email: string, accountId = acct.accountId): Promise<{ reason: string; email_id: string } | null> {
  return env.DB.prepare("SELECT reason, email_id FROM suppressions WHERE account_id = ? AND email = ?").bind(accountId, email).first();
}

describe("reports at the return path", () => {
  it("a hard bounce (Postfix DSN) becomes email.bounced with its details, suppresses the address, once", async () => {
    const { id, returnPath } = await sentEmail(reportRecipients("postfix-bounce-user-unknown"));
    const msg = incoming("", returnPath, fixture("postfix-bounce-user-unknown"));
    expect(await handleEmail(msg.message, env)).toMatchObject({ kind: "report", applied: true, detail: "bounced" });
    expect(msg.rejected()).toBeNull();
    const bounced = (await events(id)).find((e) => e.type === "bounced" && e.data.source === "report")!;
    expect(bounced.data).toMatchObject({
      recipients: ["nobody@example.org"],
      bounce: { type: "Permanent", subType: "NoEmail", diagnosticCode: [expect.stringContaining("550 5.1.1")] },
    });
    const hooks = await webhookEvents(id);
    expect(hooks.at(-1)).toMatchObject({ type: "email.bounced", data: { email_id: id, bounce: { type: "Permanent", subType: "NoEmail" } } });
    expect(await suppressed("nobody@example.org")).toMatchObject({ reason: "bounce", email_id: id });
    const email = (await (await api(acct.token, "GET", `/emails/${id}`)).json()) as { last_event: string };
    expect(email.last_event).toBe("bounced");

    // The same report again (MTAs retry, people forward): nothing new.
    const before = (await events(id)).length;
    expect(await handleEmail(incoming("", returnPath, fixture("postfix-bounce-user-unknown")).message, env)).toMatchObject({ applied: true, detail: "" });
    expect((await events(id)).length).toBe(before);
  });

  it("the same report handled twice at once records one event and one webhook event", async () => {
    // Both handlers read the email's events before either writes: only the unique dedupe key
    // stands between them and a second email.bounced.
    const { id, returnPath } = await sentEmail(reportRecipients("postfix-bounce-user-unknown"));
    const results = await Promise.all(Array.from({ length: 4 }, () => handleEmail(incoming("", returnPath, fixture("postfix-bounce-user-unknown")).message, env)));
    expect(results.map((r) => (r.kind === "report" ? r.detail : r.kind)).sort()).toEqual(["", "", "", "bounced"]);
    expect((await events(id)).filter((e) => e.type === "bounced" && e.data.source === "report")).toHaveLength(1);
    expect((await webhookEvents(id)).filter((w) => w.type === "email.bounced")).toHaveLength(1);
    // Two different reports at once are two facts, both kept.
    const other = await sentEmail([...reportRecipients("postfix-bounce-user-unknown"), ...reportRecipients("postfix-delayed")]);
    await Promise.all(["postfix-bounce-user-unknown", "postfix-delayed"].map(async (name) => handleEmail(incoming("", await other.returnPathOf(reportRecipients(name)[0]!), fixture(name)).message, env)));
    const reported = (await webhookEvents(other.id)).map((w) => w.type).filter((t) => t === "email.bounced" || t === "email.delivery_delayed");
    expect(reported.sort()).toEqual(["email.bounced", "email.delivery_delayed"]);
  });

  it("the unique dedupe key alone stops a second record: no event, no webhook event", async () => {
    // The key of this report's event, from an email that recorded it.
    const first = await sentEmail(reportRecipients("postfix-bounce-user-unknown"));
    await handleEmail(incoming("", first.returnPath, fixture("postfix-bounce-user-unknown")).message, env);
    const { dedupe_key: key } = (await env.DB.prepare("SELECT dedupe_key FROM email_events WHERE email_id = ? AND dedupe_key IS NOT NULL").bind(first.id).first<{ dedupe_key: string }>())!;
    // Another email holds that key on an event whose data the in-memory check does not
    // recognise (as when a concurrent handler wrote it after this one read): only the index
    // can stop the insert.
    const { id, returnPath } = await sentEmail(reportRecipients("postfix-bounce-user-unknown"));
    await env.DB.prepare("INSERT INTO email_events (id, email_id, account_id, type, data_json, created_at, dedupe_key) VALUES (?, ?, ?, 'bounced', '{}', ?, ?)")
      .bind(crypto.randomUUID(), id, acct.accountId, Date.now(), key).run();
    expect(await handleEmail(incoming("", returnPath, fixture("postfix-bounce-user-unknown")).message, env)).toMatchObject({ kind: "report", applied: true, detail: "" });
    expect((await events(id)).filter((e) => e.data.source === "report")).toEqual([]);
    expect((await webhookEvents(id)).filter((w) => w.type === "email.bounced")).toEqual([]);
  });

  it.each([
    ["postfix-delayed", "delivery_delayed", "email.delivery_delayed", null],
    ["postfix-delivered", "delivered", "email.delivered", null],
    ["arf-yahoo", "complained", "email.complained", "pat.smith@yahoo.com"],
    ["arf-microsoft-jmrp", "complained", "email.complained", null],
    ["microsoft-policy-5.7.1", "bounced", "email.bounced", null],
    ["gmail-bounce-no-such-user", "bounced", "email.bounced", "*"],
    ["exim-plain-bounce", "bounced", "email.bounced", "*"],
  ])("%s becomes %s", async (name, type, webhook, suppressedAddress) => {
    const { id, returnPath } = await sentEmail(reportRecipients(name));
    const result = await handleEmail(incoming("", returnPath, fixture(name)).message, env);
    expect(result).toMatchObject({ kind: "report", applied: true });
    const event = (await events(id)).find((e) => e.type === type && e.data.source === "report");
    expect(event, JSON.stringify(await events(id))).toBeDefined();
    expect((await webhookEvents(id)).some((w) => w.type === webhook)).toBe(true);
    const recipients = event!.data.recipients as string[];
    if (suppressedAddress === "*") {
      for (const r of recipients) expect(await suppressed(r.toLowerCase())).not.toBeNull();
    } else if (suppressedAddress) {
      expect(await suppressed(suppressedAddress)).toMatchObject({ reason: "complaint" });
    } else if (type === "bounced") {
      // 5.7.1 is the sender's problem (policy): Transient, and the address stays usable.
      expect((event!.data.bounce as { type: string }).type).toBe("Transient");
      for (const r of recipients) expect(await suppressed(r.toLowerCase())).toBeNull();
    }
  });

  it("a report naming addresses the email was not sent to changes nothing (a reader cannot suppress others)", async () => {
    const victim = "ceo@bigcustomer.example";
    const { id, returnPath } = await sentEmail(["reader@example.org"]);
    const forged = fixture("postfix-bounce-user-unknown").replaceAll("nobody@example.org", victim);
    expect(await handleEmail(incoming("", returnPath, forged).message, env)).toMatchObject({ kind: "report", applied: true, detail: "" });
    expect((await events(id)).filter((e) => e.data.source === "report")).toEqual([]);
    expect(await suppressed(victim)).toBeNull();
    // A complaint that names someone else is about the email's only reader, not the one named.
    const complaint = fixture("arf-yahoo").replaceAll("pat.smith@yahoo.com", victim);
    await handleEmail(incoming("", returnPath, complaint).message, env);
    expect(await suppressed(victim)).toBeNull();
    expect(await suppressed("reader@example.org")).toMatchObject({ reason: "complaint" });
  });

  it("a complaint that does not say who complained is about the recipient its return path names", async () => {
    const { id, returnPathOf } = await sentEmail(["one@example.org", "two@example.org"]);
    const complaint = fixture("arf-yahoo").replace(/^Original-Rcpt-To:.*\r?\n/im, "").replaceAll("pat.smith@yahoo.com", "hidden@example.invalid");
    await handleEmail(incoming("", await returnPathOf("two@example.org"), complaint).message, env);
    const complained = (await events(id)).find((e) => e.type === "complained");
    expect(complained?.data.recipients).toEqual(["two@example.org"]);
    expect(await suppressed("one@example.org")).toBeNull();
    expect(await suppressed("two@example.org")).toMatchObject({ reason: "complaint" });
  });

  it("a recipient cannot suppress a co-recipient: a report at one's return path speaks only for them", async () => {
    const reader = `reader-${crypto.randomUUID().slice(0, 8)}@example.org`;
    const victim = `victim-${crypto.randomUUID().slice(0, 8)}@example.org`;
    const { id, returnPathOf } = await sentEmail([reader, victim]);
    const readers = await returnPathOf(reader);
    const victims = await returnPathOf(victim);
    // Each recipient's message left with its own return path.
    expect(readers).not.toBe(victims);
    // The reader mails a hard bounce and a complaint, both naming the co-recipient, to the
    // return path the reader's copy came from.
    const bounce = fixture("postfix-bounce-user-unknown").replaceAll("nobody@example.org", victim);
    expect(await handleEmail(incoming("", readers, bounce).message, env)).toMatchObject({ kind: "report", applied: true, detail: "" });
    const complaint = fixture("arf-yahoo").replaceAll("pat.smith@yahoo.com", victim);
    await handleEmail(incoming("", readers, complaint).message, env);
    expect(await suppressed(victim)).toBeNull();
    expect((await events(id)).filter((e) => e.data.source === "report" && (e.data.recipients as string[]).includes(victim))).toEqual([]);
    // The complaint is still about the copy it came back with: the reader's.
    expect(await suppressed(reader)).toMatchObject({ reason: "complaint" });

    // The genuine bounce, at the victim's own return path, is taken.
    expect(await handleEmail(incoming("", victims, bounce).message, env)).toMatchObject({ kind: "report", applied: true, detail: "bounced" });
    expect(await suppressed(victim)).toMatchObject({ reason: "bounce", email_id: id });
    expect((await events(id)).find((e) => e.type === "bounced")?.data.recipients).toEqual([victim]);
  });

  it("a per-email return path from before speaks for an email with one recipient, and for nobody when it had several", async () => {
    const single = `single-${crypto.randomUUID().slice(0, 8)}@example.org`;
    const one = await sentEmail([single]);
    const bounceFor = (r: string) => fixture("postfix-bounce-user-unknown").replaceAll("nobody@example.org", r);
    expect(await handleEmail(incoming("", await perEmailReturnPath(one.id), bounceFor(single)).message, env)).toMatchObject({ applied: true, detail: "bounced" });
    expect(await suppressed(single)).toMatchObject({ reason: "bounce" });

    const [a, b] = [`a-${crypto.randomUUID().slice(0, 8)}@example.org`, `b-${crypto.randomUUID().slice(0, 8)}@example.org`];
    const two = await sentEmail([a, b]);
    expect(await handleEmail(incoming("", await perEmailReturnPath(two.id), bounceFor(b)).message, env)).toMatchObject({ kind: "report", applied: false });
    expect(await suppressed(b)).toBeNull();
  });

  it("a report for a forged or altered return path, or chatter at a real one, changes nothing and bounces nothing", async () => {
    const { id, returnPath } = await sentEmail();
    const forged = returnPath.replace(/-([0-9a-f]{12})@/, (_m, tag: string) => `-${tag.slice(0, 11)}${tag.endsWith("0") ? "1" : "0"}@`);
    const a = incoming("", forged, fixture("postfix-bounce-user-unknown"));
    const outcome = await handleEmail(a.message, env);
    // Not a return path tern made: not a report, and no receiving domain either.
    expect(outcome.kind).toBe("rejected");
    // Nor is one whose recipient mark was changed (to point at another recipient) under a valid tag.
    const remarked = returnPath.replace(/-([0-9a-f]{10})-/, (_m, mark: string) => `-${mark.slice(0, 9)}${mark.endsWith("0") ? "1" : "0"}-`);
    expect(remarked).not.toBe(returnPath);
    expect((await handleEmail(incoming("", remarked, fixture("postfix-bounce-user-unknown")).message, env)).kind).toBe("rejected");
    const b = incoming("someone@example.org", returnPath, fixture("malformed-auto-reply"));
    expect(await handleEmail(b.message, env)).toMatchObject({ kind: "report", applied: false });
    expect(b.rejected()).toBeNull();
    expect((await events(id)).filter((e) => e.data.source === "report")).toEqual([]);
  });
});

describe("inbound mail", () => {
  let domain: string;
  beforeAll(async () => {
    domain = `in-${crypto.randomUUID().slice(0, 8)}.example.test`;
    const { domainId } = await insertDomain(acct.accountId, domain);
    await env.DB.prepare("UPDATE domains SET receiving = 1 WHERE id = ?").bind(domainId).run();
  });

  const message = (to: string, extraHeaders = "") =>
    [
      // A sender's field first, spelled to look like the MX's own: it must not count.
      "Authentication-Results: mx.cloudflare.net.forged.example; dkim=fail; spf=fail; dmarc=fail",
      "Authentication-Results: mx.cloudflare.net; dkim=pass header.d=sender.example; spf=pass smtp.mailfrom=sender.example; dmarc=pass header.from=sender.example",
      extraHeaders,
      "From: Alice <alice@sender.example>",
      `To: Support <${to}>`,
      "Cc: bob@sender.example",
      "Subject: =?UTF-8?B?SGVsbG8g8J+RiyDDvG1sYXV0?=",
      "Message-ID: <in-1@sender.example>",
      "MIME-Version: 1.0",
      'Content-Type: multipart/mixed; boundary="b1"',
      "",
      "--b1",
      'Content-Type: multipart/alternative; boundary="b2"',
      "",
      "--b2",
      "Content-Type: text/plain; charset=utf-8",
      "",
      "Hello there",
      "--b2",
      "Content-Type: text/html; charset=utf-8",
      "",
      "<p>Hello <b>there</b></p>",
      "--b2--",
      "--b1",
      'Content-Type: application/pdf; name="report.pdf"',
      'Content-Disposition: attachment; filename="report.pdf"',
      "Content-Transfer-Encoding: base64",
      "",
      btoa("%PDF-1.4 inbound attachment \u00ff\u0000"),
      "--b1--",
      "",
    ].filter((l, i) => i !== 2 || l !== "").join("\r\n");

  it("is stored, parsed, announced with metadata only, and readable with signed links", async () => {
    const raw = message(`support@${domain}`);
    const msg = incoming("alice@sender.example", `support@${domain}`, raw);
    const outcome = await handleEmail(msg.message, env);
    expect(outcome.kind).toBe("inbound");
    const id = (outcome as { ids: string[] }).ids[0]!;

    const list = (await (await api(acct.token, "GET", "/emails/receiving")).json()) as { data: { id: string; subject: string; attachment_count: number }[] };
    expect(list.data[0]).toMatchObject({ id, subject: "Hello 👋 ümlaut", attachment_count: 1 });

    const got = (await (await api(acct.token, "GET", `/emails/receiving/${id}`)).json()) as Record<string, any>;
    expect(got).toMatchObject({
      object: "received_email", id, from: "Alice <alice@sender.example>", to: [`Support <support@${domain}>`], cc: ["bob@sender.example"],
      subject: "Hello 👋 ümlaut", message_id: "in-1@sender.example", text: "Hello there\n", html: "<p>Hello <b>there</b></p>\n",
      // Only the receiving MX's own verdicts count, not a field the sender wrote.
      authentication: { spf: "pass", dkim: "pass", dmarc: "pass", authserv_id: "mx.cloudflare.net" },
    });
    expect(typeof got.headers.Subject).toBe("string");

    // The links work without an API key, give the exact bytes, and stop working when altered.
    const rawRes = await worker.fetch(new Request(got.raw.download_url), env, {} as ExecutionContext);
    expect(rawRes.status).toBe(200);
    expect(await rawRes.text()).toBe(raw);
    const att = got.attachments[0];
    expect(att).toMatchObject({ filename: "report.pdf", content_type: "application/pdf", size: 30 });
    const attRes = await worker.fetch(new Request(att.download_url), env, {} as ExecutionContext);
    expect(new Uint8Array(await attRes.arrayBuffer())).toEqual(Uint8Array.from("%PDF-1.4 inbound attachment \u00ff\u0000", (c) => c.charCodeAt(0)));
    expect(attRes.headers.get("content-disposition")).toMatch(/^attachment/);
    for (const bad of [
      got.raw.download_url.replace(/signature=(.)/, (_m: string, c: string) => `signature=${c === "A" ? "B" : "A"}`), // one character changed
      got.raw.download_url.replace(/expires=\d+/, `expires=${Date.now() + 9e9}`),
      att.download_url.replace(att.id, crypto.randomUUID()), // another attachment, same signature
      `${got.raw.download_url.split("?")[0]}`,
    ]) {
      const r = await worker.fetch(new Request(bad), env, {} as ExecutionContext);
      expect(r.status, bad).toBe(404);
    }

    // The webhook payload carries metadata only.
    const rows = await env.DB.prepare("SELECT payload_json FROM webhook_events WHERE account_id = ? AND type = 'email.received'").bind(acct.accountId).all<{ payload_json: string }>();
    const payload = rows.results.map((r) => JSON.parse(r.payload_json)).find((p) => p.data.email_id === id);
    expect(payload.data).toMatchObject({ email_id: id, from: "Alice <alice@sender.example>", subject: "Hello 👋 ümlaut", message_id: "<in-1@sender.example>", attachments: [{ filename: "report.pdf", size: 30 }] });
    expect(JSON.stringify(payload)).not.toContain("Hello there");

    // Another account sees none of it.
    const other = await createAccount();
    expect((await api(other.token, "GET", `/emails/receiving/${id}`)).status).toBe(404);
    expect(((await (await api(other.token, "GET", "/emails/receiving")).json()) as { data: unknown[] }).data).toEqual([]);
  });

  it("expired links stop working", async () => {
    const { signedQuery, verifyLink } = await import("../../worker/inbound/links.ts");
    const keyId = (await env.DB.prepare("SELECT id FROM api_keys WHERE account_id = ?").bind(acct.accountId).first<{ id: string }>())!.id;
    const s = await signedQuery(env.MASTER_KEY, "raw:x", keyId, Date.now() - 2 * 3600_000);
    const p = Object.fromEntries(new URLSearchParams(s.query));
    expect(await verifyLink(env.DB, env.MASTER_KEY, "raw:x", p, Date.now())).toBe(false);
    expect(await verifyLink(env.DB, env.MASTER_KEY, "raw:x", p, Number(p.expires) - 1)).toBe(true);
  });

  // Issue 20: download links stayed valid for an hour after the key that made them was revoked.
  it("download links stop working when the API key that made them is revoked, and cannot be moved to another key", async () => {
    const raw = message(`support@${domain}`);
    const outcome = await handleEmail(incoming("alice@sender.example", `support@${domain}`, raw).message, env);
    const id = (outcome as { ids: string[] }).ids[0]!;
    const created = (await (await api(acct.token, "POST", "/api-keys", { name: "reader", permission: "full_access" })).json()) as { id: string; token: string };
    const got = (await (await api(created.token, "GET", `/emails/receiving/${id}`)).json()) as { raw: { download_url: string }; attachments: { download_url: string }[] };
    const urls = [got.raw.download_url, got.attachments[0]!.download_url];
    expect(new URL(urls[0]!).searchParams.get("key")).toBe(created.id);
    for (const url of urls) expect((await worker.fetch(new Request(url), env, {} as ExecutionContext)).status).toBe(200);
    // The signature covers the key: naming another (live) key of the account breaks it.
    const ownKey = (await env.DB.prepare("SELECT id FROM api_keys WHERE account_id = ? AND id != ?").bind(acct.accountId, created.id).first<{ id: string }>())!.id;
    const moved = urls[0]!.replace(`key=${created.id}`, `key=${ownKey}`);
    expect((await worker.fetch(new Request(moved), env, {} as ExecutionContext)).status).toBe(404);
    expect((await api(acct.token, "DELETE", `/api-keys/${created.id}`)).status).toBe(200);
    for (const url of urls) {
      const res = await worker.fetch(new Request(url), env, {} as ExecutionContext);
      expect(res.status).toBe(404);
      expect(((await res.json()) as { name: string }).name).toBe("not_found");
    }
  });

  it.each([
    ["a domain tern does not receive for", () => "x@nowhere.example", () => message("x@nowhere.example"), undefined, /^550 5\.1\.1/],
    ["a message over 25 MiB", () => `support@${domain}`, () => message(`support@${domain}`), 26 * 1024 * 1024, /^552 5\.3\.4/],
    ["a message with no headers", () => `support@${domain}`, () => "\u0000\u0001 garbage without any header", undefined, /^550 5\.6\.0/],
  ])("refuses %s cleanly and stores nothing", async (_what, to, raw, size, reason) => {
    const before = await env.DB.prepare("SELECT count(*) AS n FROM inbound_emails").first<{ n: number }>();
    const msg = incoming("a@b.example", to(), raw(), size);
    const outcome = await handleEmail(msg.message, env);
    expect(outcome.kind).toBe("rejected");
    expect(msg.rejected()).toMatch(reason);
    const after = await env.DB.prepare("SELECT count(*) AS n FROM inbound_emails").first<{ n: number }>();
    expect(after!.n).toBe(before!.n);
  });

  it("a domain with receiving off refuses mail", async () => {
    const off = `off-${crypto.randomUUID().slice(0, 8)}.example.test`;
    await insertDomain(acct.accountId, off);
    const msg = incoming("a@b.example", `x@${off}`, message(`x@${off}`));
    expect((await handleEmail(msg.message, env)).kind).toBe("rejected");
  });

  it("the Worker's email entry handles a message", async () => {
    const msg = incoming("alice@sender.example", `support@${domain}`, message(`support@${domain}`));
    await worker.email(msg.message, env);
    expect(msg.rejected()).toBeNull();
    expect(readConfig(env).inboundAuthservId).toBe("mx.cloudflare.net");
  });
});
