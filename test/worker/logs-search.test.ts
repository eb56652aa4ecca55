// The Logs page's search (worker/logs/search.ts) without HTTP: each filter, the key names, the
// account's rows only, its pages, and the bound on what one page reads whatever the filter.
// Its statement's plan is checked in test/worker/query-plans.test.ts; the pages themselves in
// test/worker/dashboard.test.ts.
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { revokeApiKey } from "../../worker/api-keys/service.ts";
import { ApiError } from "../../worker/errors.ts";
import { emailIdsOf, logSearchQuery, readLogFilters, SEARCH_WINDOW, searchLogs, windowEndQuery, type LogFilters } from "../../worker/logs/search.ts";
import { findLog, getLog } from "../../worker/logs/service.ts";

const A = "0193a8a0-1c2d-7000-8000-0000000a0001";
const B = "0193a8a0-1c2d-7000-8000-0000000a0002";
const KEY_LIVE = "0193a8a0-1c2d-7000-8000-0000000a0011";
const KEY_REVOKED = "0193a8a0-1c2d-7000-8000-0000000a0012";
const KEY_OF_B = "0193a8a0-1c2d-7000-8000-0000000a0013";
const id = (n: number) => `0193a8a1-0000-7000-8000-${String(n).padStart(12, "0")}`;

/** [n, account, key, method, endpoint, status]: ids in n order, so n is also the age order. */
const ROWS: [number, string, string | null, string, string, number][] = [
  [1, A, KEY_LIVE, "POST", "/emails", 200],
  [2, B, KEY_OF_B, "POST", "/emails", 500],
  [3, A, KEY_LIVE, "GET", `/emails/${id(1)}`, 404],
  [4, A, KEY_REVOKED, "POST", "/emails/batch", 200],
  [5, A, KEY_LIVE, "POST", "/domains", 422],
  [6, A, KEY_REVOKED, "GET", "/domains", 503],
  [7, A, KEY_OF_B, "DELETE", "/webhooks/x", 200], // names another account's key: its name stays hidden
  [8, B, KEY_OF_B, "GET", "/domains", 500],
  [9, A, null, "PATCH", "/contacts/a_b", 200],
];

const insertLog = (n: number, account: string, key: string | null, method: string, endpoint: string, status: number) =>
  env.DB.prepare("INSERT INTO api_logs (id, account_id, key_id, method, endpoint, status, user_agent, request_json, response_json, created_at) VALUES (?, ?, ?, ?, ?, ?, 'resend-node:6.0.0', NULL, NULL, ?)")
    .bind(id(n), account, key, method, endpoint, status, n * 1000);

beforeAll(async () => {
  const key = (k: string, account: string, name: string) =>
    env.DB.prepare("INSERT INTO api_keys (id, account_id, name, permission, token_hash, token_prefix, created_at) VALUES (?, ?, ?, 'full_access', ?, 'tern_x', 0)").bind(k, account, name, `hash-${k}`);
  await env.DB.batch([
    env.DB.prepare("INSERT INTO accounts (id, name, created_at) VALUES (?, 'A', 0), (?, 'B', 0)").bind(A, B),
    key(KEY_LIVE, A, "Production"), key(KEY_REVOKED, A, "Old laptop"), key(KEY_OF_B, B, "B's secret name"),
    ...ROWS.map((r) => insertLog(...r)),
  ]);
  await revokeApiKey(env.DB, A, KEY_REVOKED);
});

const ids = async (f: LogFilters, limit = 50) => (await searchLogs(env.DB, A, f, { limit })).data.map((l) => l.id);
const of = (...ns: number[]) => ns.map(id);

describe("the Logs page's search", () => {
  it("lists the account's requests newest first with their key's name; a revoked key's and another account's key have none", async () => {
    const page = await searchLogs(env.DB, A, {}, { limit: 50 });
    expect(page.data.map((l) => l.id)).toEqual(of(9, 7, 6, 5, 4, 3, 1));
    expect(page).toMatchObject({ next: null, stoppedAt: null });
    expect(page.data.find((l) => l.id === id(1))).toMatchObject({ object: "log", method: "POST", endpoint: "/emails", response_status: 200, user_agent: "resend-node:6.0.0", key_id: KEY_LIVE, key_name: "Production", created_at: new Date(1000).toISOString() });
    expect(page.data.find((l) => l.id === id(6))).toMatchObject({ key_id: KEY_REVOKED, key_name: null });
    expect(page.data.find((l) => l.id === id(7))).toMatchObject({ key_id: KEY_OF_B, key_name: null });
    expect(page.data.find((l) => l.id === id(9))).toMatchObject({ key_id: null, key_name: null });
    expect(JSON.stringify(page)).not.toContain("B's secret name");
  });

  it("filters by status class, method, endpoint prefix and key, alone and together", async () => {
    expect(await ids({ status: "success" })).toEqual(of(9, 7, 4, 1));
    expect(await ids({ status: "client_error" })).toEqual(of(5, 3));
    expect(await ids({ status: "server_error" })).toEqual(of(6)); // B's 5xx never
    expect(await ids({ method: "POST" })).toEqual(of(5, 4, 1));
    expect(await ids({ endpoint: "/emails" })).toEqual(of(4, 3, 1));
    expect(await ids({ endpoint: "/emails/batch" })).toEqual(of(4));
    expect(await ids({ keyId: KEY_REVOKED })).toEqual(of(6, 4));
    expect(await ids({ keyId: KEY_OF_B })).toEqual(of(7));
    expect(await ids({ method: "POST", endpoint: "/emails", status: "success", keyId: KEY_LIVE })).toEqual(of(1));
    expect(await ids({ method: "GET", status: "server_error", endpoint: "/emails" })).toEqual([]);
    // What a person types matches itself only: % and _ are not wildcards.
    expect(await ids({ endpoint: "/%" })).toEqual([]);
    expect(await ids({ endpoint: "/contacts/a_" })).toEqual(of(9));
    // A prefix longer than D1's 50-byte limit on LIKE patterns is only a longer prefix.
    expect(await ids({ endpoint: `/emails/${"x".repeat(60)}` })).toEqual([]);
    expect(await ids({ endpoint: "/EMAILS/batch" })).toEqual(of(4));
    expect(await ids({ endpoint: "/contacts/ab" })).toEqual([]);
  });

  it("pages by the cursor it answers, filtered or not", async () => {
    const walk = async (f: LogFilters) => {
      const seen: string[] = [];
      let after: string | undefined;
      for (let i = 0; i < 10; i++) {
        const page = await searchLogs(env.DB, A, f, { limit: 2, after });
        seen.push(...page.data.map((l) => l.id));
        if (!page.next) return seen;
        expect(page.stoppedAt).toBeNull(); // far under the window: every page is full or the last
        after = page.next;
      }
      throw new Error("did not end");
    };
    expect(await walk({})).toEqual(of(9, 7, 6, 5, 4, 3, 1));
    expect(await walk({ status: "success" })).toEqual(of(9, 7, 4, 1));
    // A cursor that is not an id is ignored, never put in the SQL.
    expect((await searchLogs(env.DB, A, {}, { limit: 1, after: "' OR 1=1 --" })).data.map((l) => l.id)).toEqual(of(9));
  });

  it("reads at most a window of the account's rows for a rare filter, says where it stopped and goes on from there", async () => {
    const big = "0193a8a0-1c2d-7000-8000-0000000a0003";
    const total = 2 * SEARCH_WINDOW + 2_000;
    // The 5xx rows: the newest row, one just past the first window, one near the oldest.
    const rare = [total, total - SEARCH_WINDOW - 10, 5];
    const bigId = (i: number) => `0193a8a2-0000-7000-8000-${String(i).padStart(12, "0")}`;
    await env.DB.prepare(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2)
      INSERT INTO api_logs (id, account_id, key_id, method, endpoint, status, user_agent, request_json, response_json, created_at)
      SELECT printf('0193a8a2-0000-7000-8000-%012d', i), ?1, NULL, 'POST', '/emails', CASE WHEN i IN (${rare.join(",")}) THEN 500 ELSE 200 END,
        'curl/8', printf('{"html":"%s"}', hex(zeroblob(2000))), '{"id":"x"}', i * 1000 FROM n`).bind(big, total).run();
    const f: LogFilters = { status: "server_error" };

    const first = await searchLogs(env.DB, big, f, { limit: 50 });
    expect(first.data.map((l) => l.id)).toEqual([bigId(total)]);
    const firstEnd = total - SEARCH_WINDOW + 1; // the window's oldest row
    expect(first).toMatchObject({ next: bigId(firstEnd), stoppedAt: new Date(firstEnd * 1000).toISOString() });
    const second = await searchLogs(env.DB, big, f, { limit: 50, after: first.next! });
    expect(second.data.map((l) => l.id)).toEqual([bigId(rare[1]!)]);
    expect(second.next).toBe(bigId(firstEnd - SEARCH_WINDOW));
    // The last window holds the rest of the history: the end, not a stop.
    const third = await searchLogs(env.DB, big, f, { limit: 50, after: second.next! });
    expect(third).toMatchObject({ next: null, stoppedAt: null });
    expect(third.data.map((l) => l.id)).toEqual([bigId(5)]);
    // A common filter fills its page long before the window ends.
    const common = await searchLogs(env.DB, big, { status: "success" }, { limit: 50 });
    expect(common.data).toHaveLength(50);
    expect(common.stoppedAt).toBeNull();

    // What each statement reads, as D1 counts it: the window, never the account's history.
    const read = async (q: { sql: string; params: unknown[] }) => (await env.DB.prepare(q.sql).bind(...q.params).all()).meta.rows_read;
    expect(await read(logSearchQuery(env.DB, big, f, { limit: 50 }).toSQL())).toBeLessThanOrEqual(SEARCH_WINDOW + 10);
    expect(await read(windowEndQuery(env.DB, big, undefined).toSQL())).toBeLessThanOrEqual(SEARCH_WINDOW + 10);
    expect(await read(logSearchQuery(env.DB, big, { status: "success" }, { limit: 50 }).toSQL())).toBeLessThanOrEqual(200);
    expect(await read(logSearchQuery(env.DB, big, {}, { limit: 50 }).toSQL())).toBeLessThanOrEqual(200);
  });
});

describe("the Logs page's filters from a query string", () => {
  it("reads what a person picks or types, and says what it could not use", () => {
    expect(readLogFilters({ status: "server_error", method: "post", endpoint: " emails/batch?x=1 ", key: KEY_LIVE.toUpperCase() })).toEqual({
      filters: { status: "server_error", method: "POST", endpoint: "/emails/batch", keyId: KEY_LIVE }, error: null,
    });
    expect(readLogFilters({ endpoint: "https://api.example.com/emails/abc?secret=1" }).filters).toEqual({ endpoint: "/emails/abc" });
    expect(readLogFilters({ status: "", method: "", endpoint: "/", key: "" })).toEqual({ filters: {}, error: null });
    const bad = readLogFilters({ status: "5xx", method: "TRACE", endpoint: `/${"x".repeat(300)}`, key: "nope" });
    expect(bad.filters).toEqual({});
    expect(bad.error).toMatch(/Status is all, success, client_error or server_error\. Method is one of GET, POST, PATCH, PUT, DELETE\. The endpoint is too long.*That is not an API key id\./);
  });
});

describe("a log's emails and its tenancy", () => {
  it("links a send's, a batch's and an /emails/{id} path's emails; nothing from a failed send", () => {
    const e1 = "0193a8a0-1c2d-7000-8000-0000000e0001";
    const e2 = "0193a8a0-1c2d-7000-8000-0000000e0002";
    expect(emailIdsOf({ method: "POST", endpoint: "/emails", status: 200, responseJson: JSON.stringify({ id: e1 }) })).toEqual([e1]);
    expect(emailIdsOf({ method: "POST", endpoint: "/emails/batch", status: 200, responseJson: JSON.stringify({ data: [{ id: e1 }, { id: e2 }] }) })).toEqual([e1, e2]);
    expect(emailIdsOf({ method: "GET", endpoint: `/emails/${e2}`, status: 200, responseJson: "{}" })).toEqual([e2]);
    expect(emailIdsOf({ method: "POST", endpoint: `/emails/${e1}/cancel`, status: 200, responseJson: JSON.stringify({ id: e1 }) })).toEqual([e1]);
    expect(emailIdsOf({ method: "POST", endpoint: "/emails", status: 422, responseJson: JSON.stringify({ name: "validation_error" }) })).toEqual([]);
    expect(emailIdsOf({ method: "POST", endpoint: "/emails", status: 200, responseJson: JSON.stringify({ id: "<script>" }) })).toEqual([]);
    expect(emailIdsOf({ method: "POST", endpoint: "/domains", status: 200, responseJson: JSON.stringify({ id: e1 }) })).toEqual([]);
  });

  it("finds a log with its key's name in its own account only", async () => {
    expect(await findLog(env.DB, A, id(1))).toMatchObject({ row: { id: id(1), endpoint: "/emails" }, keyName: "Production" });
    expect((await findLog(env.DB, A, id(7))).keyName).toBeNull();
    for (const read of [() => findLog(env.DB, B, id(1)), () => getLog(env.DB, B, id(1)), () => findLog(env.DB, A, id(2))]) {
      const err = await read().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).message).toBe("Log not found.");
    }
  });
});
