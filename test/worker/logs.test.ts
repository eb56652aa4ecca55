// GET /logs and /logs/{id}: every API request an account's keys make, with the request and
// answer bodies minus secrets and attachment contents; a send's log row is written in the
// send's own D1 batch (the round trip budget is test/worker/round-trips.test.ts's), the rest
// after the answer; the retention purge takes them with the rest of the history.
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { loggedJson, MAX_LOGGED_DEPTH, redact, TOO_DEEP } from "../../worker/logs/record.ts";
import { purgeExpired } from "../../worker/retention/purge.ts";
import { api, countRows, createAccount, purgeAll, type TestAccount } from "./fixtures.ts";
import { waitFor } from "./wait.ts";

let acct: TestAccount;
let other: TestAccount;
beforeAll(async () => {
  [acct, other] = await Promise.all([createAccount(), createAccount()]);
});

interface LogItem { object: string; id: string; created_at: string; endpoint: string; method: string; response_status: number; user_agent: string | null }
interface Log extends LogItem { request_body: any; response_body: any }

const list = async (t: TestAccount, q = "") => ((await (await api(t.token, "GET", `/logs${q}`)).json()) as { has_more: boolean; data: LogItem[] }).data;
const findLog = (t: TestAccount, pred: (l: LogItem) => boolean) => waitFor("a log", async () => (await list(t, "?limit=100")).find(pred));

describe("GET /logs", () => {
  it("records a send in its own batch, with the body minus attachment contents, and the answer", async () => {
    const content = btoa("secret file bytes ".repeat(50));
    const res = await api(acct.token, "POST", "/emails", {
      from: `a@${acct.domain}`, to: ["delivered@simulator.tern.test"], subject: "Logged", text: "hello",
      attachments: [{ filename: "f.txt", content }],
    }, { "user-agent": "resend-node:6.0.0" });
    const { id } = (await res.json()) as { id: string };
    // Written with the email: there when the answer is.
    const row = await env.DB.prepare("SELECT id FROM api_logs WHERE account_id = ? AND response_json LIKE ?").bind(acct.accountId, `%${id}%`).first<{ id: string }>();
    expect(row).not.toBeNull();
    const one = await api(acct.token, "GET", `/logs/${row!.id}`);
    expect(one.status).toBe(200);
    const log = (await one.json()) as Log;
    expect(log).toMatchObject({ object: "log", endpoint: "/emails", method: "POST", response_status: 200, user_agent: "resend-node:6.0.0", response_body: { id } });
    expect(log.request_body).toMatchObject({ subject: "Logged", attachments: [{ filename: "f.txt", content: `[omitted: ${content.length} characters]` }] });
    expect(JSON.stringify(log)).not.toContain(content.slice(0, 40));
  });

  it("records other requests, errors included, newest first, never with a key's token or a webhook's secret", async () => {
    const a = await createAccount();
    const created = (await (await api(a.token, "POST", "/api-keys", { name: "logged key" })).json()) as { token: string };
    const hook = (await (await api(a.token, "POST", "/webhooks", { endpoint: "https://hooks.example.com/x", events: ["email.sent"] })).json()) as { signing_secret: string };
    await api(a.token, "GET", `/emails/${crypto.randomUUID()}`);
    await api(a.token, "POST", "/domains", "{not json");
    const items = await waitFor("four logs", async () => {
      const got = await list(a);
      return got.length >= 4 ? got : undefined;
    });
    expect(items.map((l) => `${l.method} ${l.endpoint.replace(/[0-9a-f-]{36}/, "{id}")} ${l.response_status}`)).toEqual([
      "POST /domains 400", "GET /emails/{id} 404", "POST /webhooks 201", "POST /api-keys 201",
    ]);
    const all = await Promise.all(items.map(async (l) => (await api(a.token, "GET", `/logs/${l.id}`)).json() as Promise<Log>));
    const text = JSON.stringify(all);
    expect(text).not.toContain(created.token);
    expect(text).not.toContain(hook.signing_secret);
    expect(all[3]!.response_body).toMatchObject({ token: "[redacted]" });
    expect(all[2]!.response_body).toMatchObject({ signing_secret: "[redacted]" });
    expect(all[1]!.response_body).toMatchObject({ name: "not_found" });
    expect(all[0]!.request_body).toBeNull(); // not JSON, so nothing parsed to keep
    // Paginated like every list.
    const page = (await (await api(a.token, "GET", "/logs?limit=2")).json()) as { has_more: boolean; data: LogItem[] };
    expect(page.has_more).toBe(true);
    expect(page.data.map((l) => l.id)).toEqual(items.slice(0, 2).map((l) => l.id));
  });

  it("another account sees none of them; unknown ids are 404; a sending key cannot read logs", async () => {
    const log = await findLog(acct, (l) => l.endpoint === "/emails");
    expect((await api(other.token, "GET", `/logs/${log.id}`)).status).toBe(404);
    expect((await list(other)).some((l) => l.id === log.id)).toBe(false);
    expect((await api(acct.token, "GET", `/logs/${crypto.randomUUID()}`)).status).toBe(404);
    const key = (await (await api(acct.token, "POST", "/api-keys", { name: "s", permission: "sending_access" })).json()) as { token: string };
    expect((await api(key.token, "GET", "/logs")).status).toBe(401);
  });

  it("are purged after the retention window", async () => {
    const a = await createAccount();
    await api(a.token, "GET", "/domains");
    await waitFor("the log", async () => ((await countRows("api_logs", a.accountId)) > 0 ? true : undefined));
    await purgeExpired(env, 30, Date.now() + 10 * 86_400_000);
    expect(await countRows("api_logs", a.accountId)).toBeGreaterThan(0);
    const counts = await purgeAll(30, Date.now() + 31 * 86_400_000);
    expect(counts.apiLogs).toBeGreaterThan(0);
    expect(await countRows("api_logs", a.accountId)).toBe(0);
  });
});

describe("links in logs", () => {
  it("keep no link credentials: a share's url, attachments' download_url and a send's attachment path lose their query", async () => {
    const t = await createAccount();
    const sent = (await (await api(t.token, "POST", "/emails", {
      from: `a@${t.domain}`, to: ["delivered@simulator.tern.test"], subject: "Files", text: "hi",
      attachments: [{ filename: "f.txt", content: btoa("file bytes") }],
    })).json()) as { id: string };
    const shareRes = await api(t.token, "POST", `/emails/${sent.id}/share`);
    expect(shareRes.status).toBe(200);
    const share = (await shareRes.json()) as { url: string };
    const listRes = await api(t.token, "GET", `/emails/${sent.id}/attachments`);
    expect(listRes.status).toBe(200);
    const download = ((await listRes.json()) as { data: { download_url: string }[] }).data[0]!.download_url;
    expect(new URL(share.url).search).toMatch(/signature=/);
    expect(new URL(download).search).toMatch(/signature=/);
    // A send whose attachment is fetched from a presigned URL (refused: the address is private; the log is kept all the same).
    const presigned = "https://10.0.0.7/bucket/f.pdf?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE&X-Amz-Signature=0123456789abcdef";
    await api(t.token, "POST", "/emails", { from: `a@${t.domain}`, to: ["delivered@simulator.tern.test"], subject: "Path", text: "x", attachments: [{ filename: "f.pdf", path: presigned }] });
    const logs = await waitFor("the share, attachments and path logs", async () => {
      const items = await list(t, "?limit=100");
      const share = items.find((l) => l.endpoint.endsWith("/share"));
      const files = items.find((l) => l.endpoint.endsWith("/attachments"));
      const path = items.find((l) => l.method === "POST" && l.endpoint === "/emails" && l.id !== items.at(-1)!.id);
      return share && files && path ? [share, files, path] : undefined;
    });
    const full = await Promise.all(logs.map(async (l) => (await api(t.token, "GET", `/logs/${l.id}`)).json() as Promise<Log>));
    const text = JSON.stringify(full);
    for (const secret of [new URL(share.url).search, new URL(download).search, "X-Amz-Signature", "AKIDEXAMPLE"]) expect(text).not.toContain(secret);
    expect(full[0]!.response_body.url).toBe(share.url.split("?")[0]);
    expect(full[1]!.response_body.data[0].download_url).toBe(download.split("?")[0]);
    expect(full[2]!.request_body.attachments[0]).toEqual({ filename: "f.pdf", path: "https://10.0.0.7/bucket/f.pdf" });
  });
});

describe("redaction", () => {
  it("drops secrets anywhere and attachment contents, and summarises huge bodies", () => {
    expect(redact({ a: { token: "t", password: "p", nested: [{ secret: "s" }] }, attachments: [{ filename: "x", content: "AAAA" }, { path: "https://x" }] }))
      .toEqual({ a: { token: "[redacted]", password: "[redacted]", nested: [{ secret: "[redacted]" }] }, attachments: [{ filename: "x", content: "[omitted: 4 characters]" }, { path: "https://x" }] });
    expect(JSON.parse(loggedJson({ html: "x".repeat(100_000) })!)).toEqual({ truncated: true, size: expect.any(Number) });
    expect(loggedJson(undefined)).toBeNull();
    // A signed link anywhere in a text keeps its address, not its query.
    expect(redact({ html: '<a href="https://x.example/a?id=1&token=abc#f">x</a> https://s3.example/b?X-Amz-Signature=s y', note: "https://x.example/?page=2" }))
      .toEqual({ html: '<a href="https://x.example/a">x</a> https://s3.example/b y', note: "https://x.example/?page=2" });
  });

  it("keeps a log entry for a body nested 10,000 deep, cut at a marker", async () => {
    const a = await createAccount();
    const deep = `${"[".repeat(10_000)}1${"]".repeat(10_000)}`;
    const body = `{"from":"k@${a.domain}","to":"delivered@simulator.tern.test","subject":"deep","text":"t","tags":${deep}}`;
    expect((await api(a.token, "POST", "/emails", body)).status).toBe(422);
    const item = await findLog(a, (l) => l.endpoint === "/emails");
    const log = (await (await api(a.token, "GET", `/logs/${item.id}`)).json()) as Log;
    expect(log.request_body).toMatchObject({ subject: "deep" });
    let level: unknown = log.request_body.tags;
    for (let i = 1; i < MAX_LOGGED_DEPTH; i++) level = (level as unknown[])[0];
    expect(level).toBe(TOO_DEEP);
  });

  it("drops attachment contents before looking inside them, whatever their shape", () => {
    const nested = JSON.parse(`${"[".repeat(10_000)}1${"]".repeat(10_000)}`);
    const signed = `https://s3.example/b?X-Amz-Signature=${"s".repeat(1_000_000)}`;
    expect(redact({ attachments: [{ filename: "a", content: nested }, { filename: "b", content: signed }] })).toEqual({
      attachments: [{ filename: "a", content: "[omitted]" }, { filename: "b", content: `[omitted: ${signed.length} characters]` }],
    });
  });
});
