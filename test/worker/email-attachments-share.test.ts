// Resend's attachment and share endpoints: GET /emails/{id}/attachments[/{attachment_id}],
// GET /emails/receiving/{id}/attachments[/{attachment_id}] (metadata with signed, expiring
// download links, the bytes through the link), and POST /emails/{id}/share (a signed link to
// a read-only page of a sent or received email).
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { handleEmail } from "../../worker/inbound/email-handler.ts";
import { api, createAccount, insertDomain, type TestAccount } from "./fixtures.ts";

let acct: TestAccount;
let other: TestAccount;
beforeAll(async () => {
  [acct, other] = await Promise.all([createAccount(), createAccount()]);
});

const pdf = "%PDF-1.4 sent attachment \u00e9";
const b64 = (s: string) => btoa(String.fromCharCode(...new TextEncoder().encode(s)));

interface AttachmentView { object: string; id: string; filename: string | null; content_type: string; content_id: string | null; content_disposition: string | null; size: number; download_url: string; expires_at: string }

async function sendWithAttachments(): Promise<string> {
  const res = await api(acct.token, "POST", "/emails", {
    from: `a@${acct.domain}`, to: ["delivered@simulator.tern.test"], subject: "With files", html: '<p>hi <img src="cid:logo"></p>',
    attachments: [
      { filename: "report.pdf", content: b64(pdf) },
      { filename: "logo.png", content: b64("PNGDATA"), content_type: "image/png", content_id: "logo" },
    ],
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { id: string }).id;
}

/** The download link's path and query, fetched the way a browser would (no key). */
const download = (url: string) => api(null, "GET", new URL(url).pathname + new URL(url).search);

describe("attachments of a sent email", () => {
  it("lists them with metadata and signed links; each link downloads its bytes without a key", async () => {
    const id = await sendWithAttachments();
    const res = await api(acct.token, "GET", `/emails/${id}/attachments`);
    expect(res.status).toBe(200);
    const list = (await res.json()) as { object: string; has_more: boolean; data: AttachmentView[] };
    expect(list).toMatchObject({ object: "list", has_more: false });
    expect(list.data.map((a) => [a.filename, a.content_type, a.content_disposition, a.content_id, a.size])).toEqual([
      ["report.pdf", "application/pdf", "attachment", null, new TextEncoder().encode(pdf).byteLength],
      ["logo.png", "image/png", "inline", "logo", 7],
    ]);
    for (const a of list.data) {
      expect(a.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(Date.parse(a.expires_at) - Date.now()).toBeGreaterThan(50 * 60_000);
    }
    const got = await download(list.data[0]!.download_url);
    expect(got.status).toBe(200);
    expect(got.headers.get("content-type")).toBe("application/octet-stream");
    expect(got.headers.get("content-disposition")).toContain("report.pdf");
    expect(new TextDecoder().decode(await got.arrayBuffer())).toBe(pdf);

    // One attachment, by id: the same metadata, a fresh link.
    const one = await api(acct.token, "GET", `/emails/${id}/attachments/${list.data[1]!.id}`);
    expect(one.status).toBe(200);
    expect(await one.json()).toMatchObject({ object: "attachment", id: list.data[1]!.id, filename: "logo.png", size: 7 });

    // Pagination over the email's attachments.
    const page = (await (await api(acct.token, "GET", `/emails/${id}/attachments?limit=1`)).json()) as { has_more: boolean; data: AttachmentView[] };
    expect(page.has_more).toBe(true);
    const next = (await (await api(acct.token, "GET", `/emails/${id}/attachments?limit=1&after=${page.data[0]!.id}`)).json()) as { has_more: boolean; data: AttachmentView[] };
    expect(next.data.map((a) => a.filename)).toEqual(["logo.png"]);
    expect(next.has_more).toBe(false);
  });

  it("a tampered, expired or borrowed link is 404; a missing key without a link is 401", async () => {
    const id = await sendWithAttachments();
    const list = (await (await api(acct.token, "GET", `/emails/${id}/attachments`)).json()) as { data: AttachmentView[] };
    const [a, b] = list.data as [AttachmentView, AttachmentView];
    const bad = [
      a.download_url.replace(/signature=(.)/, (_m, c: string) => `signature=${c === "A" ? "B" : "A"}`),
      a.download_url.replace(/expires=\d+/, `expires=${Date.now() + 9e9}`),
      a.download_url.replace(a.id, b.id),
    ];
    for (const url of bad) expect((await download(url)).status).toBe(404);
    expect((await api(null, "GET", `/emails/${id}/attachments/${a.id}`)).status).toBe(401);
  });

  it("another account's email, an unknown attachment and an email without attachments", async () => {
    const id = await sendWithAttachments();
    const list = (await (await api(acct.token, "GET", `/emails/${id}/attachments`)).json()) as { data: AttachmentView[] };
    expect((await api(other.token, "GET", `/emails/${id}/attachments`)).status).toBe(404);
    expect((await api(other.token, "GET", `/emails/${id}/attachments/${list.data[0]!.id}`)).status).toBe(404);
    expect((await api(acct.token, "GET", `/emails/${id}/attachments/${crypto.randomUUID()}`)).status).toBe(404);
    const plain = await api(acct.token, "POST", "/emails", { from: `a@${acct.domain}`, to: ["delivered@simulator.tern.test"], subject: "none", text: "x" });
    const plainId = ((await plain.json()) as { id: string }).id;
    expect(await (await api(acct.token, "GET", `/emails/${plainId}/attachments`)).json()).toEqual({ object: "list", has_more: false, data: [] });
    expect((await api(acct.token, "GET", `/emails/${id}/attachments?limit=0`)).status).toBe(422);
  });
});

function inboundMessage(to: string): ReadableStream<Uint8Array> {
  const raw = [
    "From: Alice <alice@sender.example>", `To: ${to}`, "Subject: Files for you", "Message-ID: <files-1@sender.example>", "MIME-Version: 1.0",
    'Content-Type: multipart/mixed; boundary="b1"', "", "--b1", "Content-Type: text/html; charset=utf-8", "",
    '<p>See <b>attached</b><script>alert(1)</script><img src="https://tracker.example/p.gif"></p>', "--b1",
    'Content-Type: text/csv; name="data.csv"', 'Content-Disposition: attachment; filename="data.csv"', "", "a,b\r\n1,2", "--b1--", "",
  ].join("\r\n");
  const bytes = new TextEncoder().encode(raw);
  return new ReadableStream({ start(c) { c.enqueue(bytes); c.close(); } });
}

async function receive(account: TestAccount): Promise<string> {
  const domain = `in-${crypto.randomUUID().slice(0, 8)}.example.test`;
  const { domainId } = await insertDomain(account.accountId, domain);
  await env.DB.prepare("UPDATE domains SET receiving = 1 WHERE id = ?").bind(domainId).run();
  const to = `inbox@${domain}`;
  const message = { from: "alice@sender.example", to, headers: new Headers(), raw: inboundMessage(to), rawSize: 1000, setReject() {}, forward: () => Promise.reject(new Error("unused")), reply: () => Promise.reject(new Error("unused")) } as unknown as ForwardableEmailMessage;
  const outcome = await handleEmail(message, env);
  expect(outcome.kind).toBe("inbound");
  return (outcome as { ids: string[] }).ids[0]!;
}

describe("attachments of a received email", () => {
  it("lists them, reads one with a key, and downloads it through its link", async () => {
    const id = await receive(acct);
    const res = await api(acct.token, "GET", `/emails/receiving/${id}/attachments`);
    expect(res.status).toBe(200);
    const list = (await res.json()) as { data: AttachmentView[] };
    expect(list.data).toHaveLength(1);
    const a = list.data[0]!;
    expect(a).toMatchObject({ object: "attachment", filename: "data.csv", content_type: "text/csv", size: 8 });
    const one = await api(acct.token, "GET", `/emails/receiving/${id}/attachments/${a.id}`);
    expect(one.status).toBe(200);
    expect(one.headers.get("content-type")).toMatch(/application\/json/);
    expect(await one.json()).toMatchObject({ id: a.id, filename: "data.csv" });
    const bytes = await download(a.download_url);
    expect(bytes.status).toBe(200);
    expect(await bytes.text()).toBe("a,b\n1,2\n");
    // Another account sees nothing; without a key and a link, 401.
    expect((await api(other.token, "GET", `/emails/receiving/${id}/attachments`)).status).toBe(404);
    expect((await api(other.token, "GET", `/emails/receiving/${id}/attachments/${a.id}`)).status).toBe(404);
    expect((await api(null, "GET", `/emails/receiving/${id}/attachments/${a.id}`)).status).toBe(401);
    expect((await api(acct.token, "GET", `/emails/receiving/${crypto.randomUUID()}/attachments`)).status).toBe(404);
  });
});

describe("POST /emails/{id}/share", () => {
  interface Shared { object: string; id: string; url: string; expires_at: string }
  const open = (url: string) => api(null, "GET", new URL(url).pathname + new URL(url).search);

  it("links a sent email to a read-only page that runs none of its code", async () => {
    const id = await sendWithAttachments();
    const res = await api(acct.token, "POST", `/emails/${id}/share`);
    expect(res.status).toBe(200);
    const shared = (await res.json()) as Shared;
    expect(shared).toMatchObject({ object: "email", id });
    expect(Date.parse(shared.expires_at) - Date.now()).toBeGreaterThan(47 * 3_600_000);
    const page = await open(shared.url);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-security-policy")).toContain("default-src 'none'");
    const html = await page.text();
    expect(html).toContain("With files");
    expect(html).toContain(`a@${acct.domain}`);
    expect(html).toMatch(/<iframe[^>]*sandbox=""/);
    expect(html).not.toMatch(/<script/i);
  });

  it("links a received email too, with a chosen lifetime; its script stays inert text in the frame", async () => {
    const id = await receive(acct);
    const res = await api(acct.token, "POST", `/emails/${id}/share`, { expires_in: "10m" });
    expect(res.status).toBe(200);
    const shared = (await res.json()) as Shared;
    const ttl = Date.parse(shared.expires_at) - Date.now();
    expect(ttl).toBeGreaterThan(9 * 60_000);
    expect(ttl).toBeLessThanOrEqual(10 * 60_000);
    const html = await (await open(shared.url)).text();
    expect(html).toContain("Files for you");
    expect(html).not.toMatch(/<script/i); // the body is escaped inside srcdoc
    expect(html).toContain("&#60;script&#62;");
  });

  it("refuses a bad lifetime, another account's email, and serves nothing for a forged link", async () => {
    const id = await sendWithAttachments();
    for (const expires_in of ["49h", "3 fortnights", "", 5]) {
      const res = await api(acct.token, "POST", `/emails/${id}/share`, { expires_in });
      expect(res.status).toBe(422);
    }
    expect((await api(acct.token, "POST", `/emails/${id}/share`, { expires_in: "1 day", id })).status).toBe(200); // the path's id in the body
    expect((await api(acct.token, "POST", `/emails/${id}/share`, { id: crypto.randomUUID() })).status).toBe(422);
    expect((await api(other.token, "POST", `/emails/${id}/share`)).status).toBe(404);
    const shared = (await (await api(acct.token, "POST", `/emails/${id}/share`)).json()) as Shared;
    const forged = shared.url.replace(/signature=(.)/, (_m, c: string) => `signature=${c === "A" ? "B" : "A"}`);
    const page = await open(forged);
    expect(page.status).toBe(404);
    expect(await page.text()).toContain("invalid or has expired");
    const stretched = shared.url.replace(/expires=\d+/, `expires=${Date.now() + 9e9}`);
    expect((await open(stretched)).status).toBe(404);
  });
});
