// A sender retries what the email() handler failed: Email Routing answers a thrown handler with a
// temporary failure, and the sender's MTA delivers the same message again through Cloudflare's MX,
// under a new block of fields with new times. Each account that owns the receiving domain keeps
// one copy of a delivery however often it comes: the account whose receive failed gets its copy
// on the retry, the others keep theirs (one row, one email.received), and a different message is
// a new copy. The failures come from the bindings themselves (R2 refusing an upload, D1 refusing
// or losing the answer to a batch), not from a stand-in for the code under test.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { handleEmail, type EmailOutcome } from "../../worker/inbound/email-handler.ts";
import { deliveryKey, senderPart } from "../../worker/inbound/delivery-key.ts";
import worker from "../../worker/index.ts";
import { api, createAccount, insertDomain, type TestAccount } from "./fixtures.ts";
import { incoming } from "./incoming.ts";

const encoder = new TextEncoder();

/** A message as its sender's MTA queued it: its own trace, a signature, an attachment. */
function sent(messageId: string | null = `<${crypto.randomUUID()}@sender.example>`, body = "Hello there"): string {
  return [
    "Received: from app.sender.example (app.sender.example [192.0.2.7]) by mta.sender.example; Tue, 10 Nov 2026 09:00:00 +0000",
    "DKIM-Signature: v=1; a=rsa-sha256; d=sender.example; s=s1; h=from:to:subject;",
    " bh=AAAA; b=BBBB",
    "From: Alice <alice@sender.example>",
    "To: Support <support@DOMAIN>",
    "Subject: Order 1234",
    "Date: Tue, 10 Nov 2026 09:00:00 +0000",
    ...(messageId ? [`Message-ID: ${messageId}`] : []),
    "MIME-Version: 1.0",
    'Content-Type: multipart/mixed; boundary="b1"',
    "",
    "--b1",
    "Content-Type: text/plain; charset=utf-8",
    "",
    body,
    "--b1",
    'Content-Type: application/pdf; name="invoice.pdf"',
    'Content-Disposition: attachment; filename="invoice.pdf"',
    "Content-Transfer-Encoding: base64",
    "",
    btoa("%PDF-1.4 invoice"),
    "--b1--",
    "",
  ].join("\r\n");
}

/** The message as Cloudflare's MX hands it to the Worker on one attempt: the fields it writes
 * on top, with that attempt's time in them. */
function attempt(message: string, domain: string, n: number): string {
  const at = `Tue, 10 Nov 2026 09:${String(n).padStart(2, "0")}:00 +0000`;
  return [
    `Received: from mta.sender.example (mta.sender.example [192.0.2.1]) by mx.cloudflare.net (Postfix) with ESMTPS id ${n}A${n}; ${at}`,
    `ARC-Seal: i=1; a=rsa-sha256; s=2024; d=cloudflare.net; cv=none; t=${1794301200 + n * 60};`,
    `\tb=${btoa(`seal ${n}`)}`,
    `ARC-Message-Signature: i=1; a=rsa-sha256; d=cloudflare.net; s=2024; t=${1794301200 + n * 60}; b=${btoa(`sig ${n}`)}`,
    "ARC-Authentication-Results: i=1; mx.cloudflare.net; dkim=pass header.d=sender.example; spf=pass smtp.mailfrom=bounce@sender.example",
    `Received-SPF: pass (mx.cloudflare.net: 192.0.2.1 is allowed) receiver=mx.cloudflare.net; client-ip=192.0.2.1; attempt=${n}`,
    "Authentication-Results: mx.cloudflare.net; dkim=pass header.d=sender.example; spf=pass smtp.mailfrom=bounce@sender.example",
    `X-CF-SpamH-Score: ${n % 3}`,
    message.replace("DOMAIN", domain),
  ].join("\r\n");
}

async function receivingDomain(...owners: TestAccount[]): Promise<string> {
  const domain = `rt-${crypto.randomUUID().slice(0, 8)}.example.test`;
  for (const owner of owners) {
    const { domainId } = await insertDomain(owner.accountId, domain);
    await env.DB.prepare("UPDATE domains SET receiving = 1 WHERE id = ?").bind(domainId).run();
  }
  return domain;
}

function deliver(domain: string, raw: string, bindings: Env = env): Promise<EmailOutcome> {
  return handleEmail(incoming("bounce@sender.example", `support@${domain}`, raw).message, bindings);
}

async function rows(accountId: string): Promise<{ id: string; raw_key: string; dedupe_key: string | null }[]> {
  return (await env.DB.prepare("SELECT id, raw_key, dedupe_key FROM inbound_emails WHERE account_id = ? ORDER BY id").bind(accountId).all<{ id: string; raw_key: string; dedupe_key: string | null }>()).results;
}

/** The email.received events waiting for (or done with) their fan-out, by the email they announce. */
async function receivedEvents(accountId: string): Promise<string[]> {
  const events = await env.DB.prepare("SELECT payload_json FROM webhook_events WHERE account_id = ? AND type = 'email.received' ORDER BY id").bind(accountId).all<{ payload_json: string }>();
  return events.results.map((e) => (JSON.parse(e.payload_json) as { data: { email_id: string } }).data.email_id);
}

async function objects(accountId: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await env.BLOBS.list({ prefix: `inbound/${accountId}/`, cursor });
    keys.push(...page.objects.map((o) => o.key));
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return keys.sort();
}

/** The objects the account's rows name, and nothing else, are in R2. */
async function expectOnlyNamedObjects(accountId: string): Promise<void> {
  const named = (await env.DB.prepare("SELECT raw_key, content_key, attachments_json FROM inbound_emails WHERE account_id = ?").bind(accountId).all<{ raw_key: string; content_key: string; attachments_json: string }>()).results
    .flatMap((r) => [r.raw_key, r.content_key, ...(JSON.parse(r.attachments_json) as { key: string }[]).map((a) => a.key)]);
  expect(await objects(accountId)).toEqual(named.sort());
}

const accountOfKey = (key: string) => key.split("/")[1];

/** The bindings with R2 or D1 failing once while `accountId`'s copy is stored: R2 refusing its
 * first upload, or D1 refusing the batch that records it. Uploads say whose copy is under way. */
function failingOnceFor(accountId: string, where: "r2" | "d1"): Env {
  let failed = false;
  let storing: string | undefined;
  const blobs = new Proxy(env.BLOBS, {
    get(target, prop) {
      if (prop !== "put") return (Reflect.get(target, prop) as (...a: unknown[]) => unknown).bind(target);
      return (key: string, ...rest: unknown[]) => {
        storing = accountOfKey(key);
        if (where === "r2" && storing === accountId && !failed) {
          failed = true;
          return Promise.reject(new Error("R2 is unavailable"));
        }
        return (target.put as (...a: unknown[]) => Promise<unknown>)(key, ...rest);
      };
    },
  });
  const db = new Proxy(env.DB, {
    get(target, prop) {
      if (prop === "batch" && where === "d1") {
        return (statements: D1PreparedStatement[]) => {
          if (storing === accountId && !failed) {
            failed = true;
            return Promise.reject(new Error("D1 is unavailable"));
          }
          return target.batch(statements);
        };
      }
      return (Reflect.get(target, prop) as (...a: unknown[]) => unknown).bind(target);
    },
  });
  return { ...env, BLOBS: blobs, DB: db };
}

describe("a delivery received again", () => {
  it.each(["r2", "d1"] as const)("when one account's receive fails (%s), the retry gives it its copy and the other keeps its one", async (where) => {
    const [a, b] = [await createAccount({ listening: true }), await createAccount({ listening: true })];
    const domain = await receivingDomain(a, b);
    const message = sent();
    await expect(deliver(domain, attempt(message, domain, 1), failingOnceFor(b.accountId, where))).rejects.toThrow(/unavailable/);
    // The account that did not fail has its copy, whichever went first (a failure does not stop
    // the others); the one that failed has nothing, not even objects.
    const [first] = await rows(a.accountId);
    expect(first).toBeDefined();
    expect(await rows(b.accountId)).toEqual([]);
    expect(await objects(b.accountId)).toEqual([]);

    // The sender tries again: the same message under the MX's fields of another attempt.
    const retry = await deliver(domain, attempt(message, domain, 2));
    expect(retry.kind).toBe("inbound");
    const ids = (retry as { ids: string[] }).ids;
    const [copyOfA] = await rows(a.accountId);
    const [copyOfB] = await rows(b.accountId);
    expect(await rows(a.accountId)).toHaveLength(1);
    expect(await rows(b.accountId)).toHaveLength(1);
    expect(copyOfA!.id).toBe(first!.id);
    expect(ids.sort()).toEqual([copyOfA!.id, copyOfB!.id].sort());
    expect(await receivedEvents(a.accountId)).toEqual([copyOfA!.id]);
    expect(await receivedEvents(b.accountId)).toEqual([copyOfB!.id]);
    await expectOnlyNamedObjects(a.accountId);
    await expectOnlyNamedObjects(b.accountId);

    // A third attempt (the answer to the second was lost) changes nothing either.
    const again = await deliver(domain, attempt(message, domain, 3));
    expect((again as { ids: string[] }).ids.sort()).toEqual(ids.sort());
    expect(await rows(a.accountId)).toHaveLength(1);
    expect(await rows(b.accountId)).toHaveLength(1);
    expect(await receivedEvents(b.accountId)).toEqual([copyOfB!.id]);
  });

  it("the same bytes delivered again store nothing new and answer the copy's id", async () => {
    const solo = await createAccount({ listening: true });
    const domain = await receivingDomain(solo);
    const raw = attempt(sent(), domain, 1);
    const first = (await deliver(domain, raw)) as { ids: string[] };
    const again = (await deliver(domain, raw)) as { ids: string[] };
    expect(again.ids).toEqual(first.ids);
    expect(await rows(solo.accountId)).toHaveLength(1);
    expect(await receivedEvents(solo.accountId)).toEqual(first.ids);
    await expectOnlyNamedObjects(solo.accountId);
  });

  it("a different message, or the same one to another address, is a new copy", async () => {
    const solo = await createAccount({ listening: true });
    const domain = await receivingDomain(solo);
    const messageId = `<${crypto.randomUUID()}@sender.example>`;
    await deliver(domain, attempt(sent(messageId), domain, 1));
    // One byte of the body changed (a sender reusing a Message-ID): a new message.
    await deliver(domain, attempt(sent(messageId, "Hello therE"), domain, 2));
    // Another Message-ID, the same text.
    await deliver(domain, attempt(sent(), domain, 3));
    // The same message to another recipient of the domain: its own delivery.
    const other = await handleEmail(incoming("bounce@sender.example", `sales@${domain}`, attempt(sent(messageId), domain, 4)).message, env);
    expect(other.kind).toBe("inbound");
    expect(await rows(solo.accountId)).toHaveLength(4);
    expect(await receivedEvents(solo.accountId)).toHaveLength(4);
  });

  it("a message without a Message-ID does not name itself: each delivery of it is kept", async () => {
    // Two of them with the same text may be two messages (a monitor's fixed probe); keeping a
    // retried one twice is the lesser harm than dropping the second.
    const solo = await createAccount({ listening: true });
    const domain = await receivingDomain(solo);
    const probe = sent(null);
    expect(probe).not.toMatch(/Message-ID/i);
    await deliver(domain, attempt(probe, domain, 1));
    await deliver(domain, attempt(probe, domain, 2));
    expect(await rows(solo.accountId)).toHaveLength(2);
    // Its very bytes again are the same delivery.
    await deliver(domain, attempt(probe, domain, 2));
    expect(await rows(solo.accountId)).toHaveLength(2);
  });

  it("deliveries of one message at once store one copy per account, and the later ones leave no objects", async () => {
    const [a, b] = [await createAccount({ listening: true }), await createAccount({ listening: true })];
    const domain = await receivingDomain(a, b);
    const message = sent();
    // Every attempt waits at its first upload until all have started uploading: each has passed
    // the check for a stored copy, and only the unique key can stop the later inserts.
    const attempts = 3;
    let uploading = 0;
    let release!: () => void;
    const allUploading = new Promise<void>((resolve) => (release = resolve));
    const blobs = new Proxy(env.BLOBS, {
      get(target, prop) {
        if (prop !== "put") return (Reflect.get(target, prop) as (...a: unknown[]) => unknown).bind(target);
        return async (key: string, ...rest: unknown[]) => {
          if (key.endsWith("/raw.eml") && accountOfKey(key) === a.accountId && ++uploading === attempts) release();
          if (accountOfKey(key) === a.accountId) await allUploading;
          return (target.put as (...a: unknown[]) => Promise<unknown>)(key, ...rest);
        };
      },
    });
    const outcomes = await Promise.all(Array.from({ length: attempts }, (_, n) => deliver(domain, attempt(message, domain, n), { ...env, BLOBS: blobs })));
    expect(uploading).toBe(attempts);
    const [copyOfA] = await rows(a.accountId);
    const [copyOfB] = await rows(b.accountId);
    for (const outcome of outcomes) expect((outcome as { ids: string[] }).ids.sort()).toEqual([copyOfA!.id, copyOfB!.id].sort());
    expect(await rows(a.accountId)).toHaveLength(1);
    expect(await rows(b.accountId)).toHaveLength(1);
    expect(await receivedEvents(a.accountId)).toEqual([copyOfA!.id]);
    expect(await receivedEvents(b.accountId)).toEqual([copyOfB!.id]);
    await expectOnlyNamedObjects(a.accountId);
    await expectOnlyNamedObjects(b.accountId);
  });

  it("when D1 records the copy but its answer is lost, the objects stay and the retry answers with that copy", async () => {
    const solo = await createAccount({ listening: true });
    const domain = await receivingDomain(solo);
    let lost = false;
    const losing = new Proxy(env.DB, {
      get(target, prop) {
        if (prop !== "batch") return (Reflect.get(target, prop) as (...a: unknown[]) => unknown).bind(target);
        return async (statements: D1PreparedStatement[]) => {
          const results = await target.batch(statements);
          if (lost) return results;
          lost = true;
          throw new Error("D1: network connection lost");
        };
      },
    });
    const message = sent();
    await expect(deliver(domain, attempt(message, domain, 1), { ...env, DB: losing })).rejects.toThrow(/connection lost/);
    const [copy] = await rows(solo.accountId);
    await expectOnlyNamedObjects(solo.accountId);
    const retry = (await deliver(domain, attempt(message, domain, 2))) as { ids: string[] };
    expect(retry.ids).toEqual([copy!.id]);
    expect(await rows(solo.accountId)).toHaveLength(1);
    expect(await receivedEvents(solo.accountId)).toEqual([copy!.id]);
    // The copy reads back whole: its raw message is the first attempt's bytes.
    const got = (await (await api(solo.token, "GET", `/emails/receiving/${copy!.id}`)).json()) as { raw: { download_url: string } };
    const raw = await worker.fetch(new Request(got.raw.download_url), env, {} as ExecutionContext);
    expect(await raw.text()).toBe(attempt(message, domain, 1));
  });

  it("rows received before deliveries had a key keep theirs empty, as many as there are", async () => {
    const solo = await createAccount({ listening: true });
    for (let i = 0; i < 2; i++) {
      await env.DB.prepare("INSERT INTO inbound_emails (id, account_id, from_address, to_json, subject, raw_key, size, content_key, created_at) VALUES (?, ?, 'a@b.example', '[]', 'old', 'k', 1, 'c', ?)")
        .bind(crypto.randomUUID(), solo.accountId, Date.now()).run();
    }
    expect((await rows(solo.accountId)).map((r) => r.dedupe_key)).toEqual([null, null]);
  });
});

describe("the delivery key", () => {
  const envelope = { from: "bounce@sender.example", to: "support@in.example" };
  const key = (raw: string, e = envelope) => deliveryKey(e, encoder.encode(raw));
  const text = (pieces: Uint8Array[]) => pieces.map((p) => new TextDecoder().decode(p)).join("");

  it("is the same for every attempt of a delivery, whatever the MX wrote on top", async () => {
    const message = sent();
    expect(await key(attempt(message, "in.example", 1))).toBe(await key(attempt(message, "in.example", 2)));
    expect(await key(attempt(message, "in.example", 1))).toMatch(/^[0-9a-f]{64}$/);
  });

  it("covers the envelope and every byte the sender wrote", async () => {
    const base = attempt(sent("<k@sender.example>"), "in.example", 1);
    const keys = new Set([
      await key(base),
      await key(base, { ...envelope, to: "sales@in.example" }),
      await key(base, { ...envelope, from: "other@sender.example" }),
      await key(base.replace("Hello there", "Hello there ")),
      await key(base.replace("Subject: Order 1234", "Subject: Order 1235")),
      await key(base.replace(" bh=AAAA", " bh=AAAB")),
    ]);
    expect(keys.size).toBe(6);
  });

  it("leaves out the hops' fields with their continuation lines, wherever they stand, and keeps the rest byte for byte", () => {
    const raw = "Received: by mx\r\n\tcontinued\r\nFrom: a@b.example\r\nX-CF-Score: 1\r\nmessage-id : <m@b>\r\nARC-Seal: i=1;\r\n b=x\r\nSubject: s\r\n  folded\r\nno colon line\r\n\r\nReceived: in the body\r\n";
    const { pieces, messageId } = senderPart(encoder.encode(raw));
    expect(messageId).toBe(true);
    expect(text(pieces)).toBe("From: a@b.example\r\nmessage-id : <m@b>\r\nSubject: s\r\n  folded\r\nno colon line\r\n\r\nReceived: in the body\r\n");
    // Line feeds alone, a message of nothing but hops' fields, and no message at all.
    expect(text(senderPart(encoder.encode("Received: x\nFrom: a\n\nbody")).pieces)).toBe("From: a\n\nbody");
    expect(text(senderPart(encoder.encode("Received: x\r\nARC-Seal: y")).pieces)).toBe("");
    expect(senderPart(new Uint8Array(0))).toEqual({ pieces: [], messageId: false });
  });
});
