// Data rights (issue 15): an account's export holds every kind of its data and none of its
// secrets; its deletion leaves no row and no R2 object of it, and touches no other account.
// The accounts are filled generically from the schema itself: one row in every table of
// ACCOUNT_DATA, every required column given a value unique to (table, column, account), so a
// secret's real value can be looked for in the export's bytes.
import { env } from "cloudflare:workers";
import { is } from "drizzle-orm";
import { SQLiteTable, getTableConfig } from "drizzle-orm/sqlite-core";
import { describe, expect, it } from "vitest";
import { ACCOUNT_DATA, SECRET_COLUMNS, SYSTEM_TABLES, USER_TABLES, accountTables, deleteAccountData, exportStream, nodeSql, type TableNode } from "../../worker/accounts/data.ts";
import { d1Runner, r2Store } from "../../worker/accounts/bindings.ts";
import * as schema from "../../worker/db/schema.ts";
import { uuidv7 } from "../../worker/ids.ts";

const tables = Object.values(schema as Record<string, unknown>).filter((v): v is SQLiteTable => is(v, SQLiteTable)).map((t) => getTableConfig(t));
const config = (name: string) => tables.find((t) => t.name === name)!;

/** Which table a column names a row of, by tern's naming. */
const REFERS: Record<string, string> = {
  domain_id: "domains", contact_id: "contacts", user_id: "auth_users", email_id: "emails", webhook_id: "webhooks",
  delivery_id: "webhook_deliveries", segment_id: "segments", topic_id: "topics", broadcast_id: "broadcasts",
};
const idOf = (table: string, acct: string) => `${table}-${acct}`;
const value = (table: string, column: string, acct: string) => `${table}.${column}:${acct}`;

/** The R2 objects each kind of row names, for account `acct`. */
function blobs(table: string, acct: string): Record<string, string> {
  const id = idOf(table, acct);
  switch (table) {
    case "emails": return { content_key: `emails/${id}/body.json`, attachments_json: JSON.stringify([{ key: `emails/${id}/attachments/0`, filename: "a.txt" }]) };
    case "inbound_emails": return { raw_key: `inbound/${acct}/${id}/raw.eml`, content_key: `inbound/${acct}/${id}/content.json`, attachments_json: JSON.stringify([{ key: `inbound/${acct}/${id}/attachments/1` }]) };
    case "contact_imports": return { file_key: `imports/${id}.csv` };
    default: return {};
  }
}

async function insert(table: string, acct: string, scope: { column: string; parent: string } | null, extra: Record<string, unknown> = {}): Promise<void> {
  const cfg = config(table);
  const row: Record<string, unknown> = {};
  for (const c of cfg.columns) {
    const pk = c.primary || cfg.primaryKeys.some((k) => k.columns.some((x) => x.name === c.name));
    if (c.name === "account_id" && table !== "auth_accounts") row[c.name] = acct;
    else if (scope && c.name === scope.column) row[c.name] = idOf(scope.parent, acct);
    else if (c.name === "id") row[c.name] = table === "accounts" ? acct : idOf(table, acct);
    else if (REFERS[c.name] && (c.notNull || pk)) row[c.name] = idOf(REFERS[c.name]!, acct);
    else if (c.name.endsWith("_json")) row[c.name] = c.name === "to_json" || c.name === "events_json" || c.name === "pending_json" ? '["p@example.test"]' : "{}";
    else if (c.notNull && (!c.hasDefault || pk)) row[c.name] = c.getSQLType() === "integer" ? 1 : value(table, c.name, acct);
    else if (c.getSQLType() === "text" && !c.hasDefault) row[c.name] = value(table, c.name, acct);
  }
  // A broadcast records recipients only while it sends (migration 0012's trigger).
  if (table === "broadcasts") row.status = "sending";
  Object.assign(row, blobs(table, acct), extra);
  const names = Object.keys(row);
  await env.DB.prepare(`INSERT INTO ${table} (${names.join(", ")}) VALUES (${names.map(() => "?").join(", ")})`).bind(...names.map((n) => row[n] as string | number)).run()
    .catch((e: Error) => { throw new Error(`insert into ${table}: ${e.message}`); });
}

/** One row in every table of the account, its users (one of them also `shared` with `other`
 * when given), and the R2 objects its rows name plus one no row names. */
async function fill(acct: string, opts: { sharedUser?: string } = {}): Promise<string[]> {
  await insert("accounts", acct, null, { name: `Acme ${acct}` });
  await insert("auth_users", acct, null, { email: `owner-${acct}@example.test` });
  for (const t of ["auth_sessions", "auth_accounts", "auth_two_factors", "auth_passkeys"]) await insert(t, acct, { column: "user_id", parent: "auth_users" });
  await insert("auth_verifications", acct, null, { value: idOf("auth_users", acct) });
  for (const key of [`email:owner-${acct}@example.test@1764000000000`, `invite-by:${idOf("auth_users", acct)}@1764000000000`, `invite-account:${acct}@1764000000000`, `invite-to:${acct}:pal@example.test@1764000000000`]) {
    await env.DB.prepare("INSERT INTO auth_attempts (key, count, expires_at) VALUES (?, 1, 1)").bind(key).run();
  }
  await env.DB.prepare("INSERT INTO audit_log (id, account_id, user_id, action, created_at) VALUES (?, NULL, ?, 'user.sign_in_failed', 1)").bind(`nullacct-${acct}`, idOf("auth_users", acct)).run();
  const insertTree = async (nodes: TableNode[], parent: string | null) => {
    for (const n of nodes) {
      await insert(n.table, acct, parent ? { column: n.scope, parent } : null);
      await insertTree(n.children ?? [], n.table);
    }
  };
  // Parents first: the reverse of the deletion order, each root before its children.
  await insertTree([...ACCOUNT_DATA].reverse(), null);
  if (opts.sharedUser) {
    await env.DB.prepare("INSERT INTO memberships (account_id, user_id, role, created_at) VALUES (?, ?, 'admin', 1)").bind(acct, opts.sharedUser).run();
  }
  const keys = ["emails", "inbound_emails", "contact_imports"].flatMap((t) => {
    const b = blobs(t, acct);
    return Object.entries(b).flatMap(([c, v]) => (c.endsWith("_json") ? (JSON.parse(v) as { key: string }[]).map((a) => a.key) : [v]));
  });
  keys.push(`inbound/${acct}/orphan-of-a-failed-receive/raw.eml`);
  for (const k of keys) await env.BLOBS.put(k, `object ${k}`);
  return keys;
}

/** Rows of the account in every table: by account_id, or by the ids the fill gave them. */
async function counts(acct: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of tables) {
    const hasAccount = t.columns.some((c) => c.name === "account_id") && t.name !== "auth_accounts";
    if ((SYSTEM_TABLES as readonly string[]).includes(t.name)) continue;
    if (t.name === "accounts") out[t.name] = await n(`SELECT COUNT(*) AS n FROM accounts WHERE id = ?`, acct);
    else if (hasAccount) out[t.name] = await n(`SELECT COUNT(*) AS n FROM ${t.name} WHERE account_id = ?`, acct);
    else if (t.name === "email_links") out[t.name] = await n(`SELECT COUNT(*) AS n FROM email_links WHERE email_id = ?`, idOf("emails", acct));
    else if (t.name === "webhook_attempts") out[t.name] = await n(`SELECT COUNT(*) AS n FROM webhook_attempts WHERE delivery_id = ?`, idOf("webhook_deliveries", acct));
    else if (t.name === "auth_users") out[t.name] = await n(`SELECT COUNT(*) AS n FROM auth_users WHERE id = ?`, idOf("auth_users", acct));
    else if (t.name === "auth_verifications") out[t.name] = await n(`SELECT COUNT(*) AS n FROM auth_verifications WHERE value = ?`, idOf("auth_users", acct));
    else if (t.name === "auth_attempts") {
      let total = 0;
      for (const prefix of [`email:owner-${acct}@`, `invite-by:${idOf("auth_users", acct)}@`, `invite-account:${acct}@`, `invite-to:${acct}:`]) {
        total += await n(`SELECT COUNT(*) AS n FROM auth_attempts WHERE instr(key, ?) = 1`, prefix);
      }
      out[t.name] = total;
    }
    else out[t.name] = await n(`SELECT COUNT(*) AS n FROM ${t.name} WHERE user_id = ?`, idOf("auth_users", acct));
  }
  return out;
}

async function n(sql: string, v: string): Promise<number> {
  return (await env.DB.prepare(sql).bind(v).first<{ n: number }>())!.n;
}

describe("the account-data tree", () => {
  it("covers every table of the schema: each table with an account_id is deleted and exported with its account", () => {
    const covered = new Set(accountTables());
    const people = new Set<string>(USER_TABLES);
    const system = new Set<string>(SYSTEM_TABLES);
    for (const t of tables) {
      const hasAccount = t.columns.some((c) => c.name === "account_id");
      // auth_accounts.account_id is better-auth's provider account id, not a tern account.
      if (hasAccount && t.name !== "auth_accounts") expect(covered.has(t.name), `${t.name} has an account_id but ACCOUNT_DATA misses it`).toBe(true);
      // Every table is classified: account data, or a person's (gone with users of no other account).
      expect(covered.has(t.name) || people.has(t.name) || (system.has(t.name) && !hasAccount && !t.columns.some((c) => c.name === "user_id")), `${t.name} is neither in ACCOUNT_DATA nor in USER_TABLES nor in SYSTEM_TABLES`).toBe(true);
      // A table pointing at an account table's rows is itself reached through it.
      for (const fk of t.foreignKeys) {
        const target = getTableConfig(fk.reference().foreignTable).name;
        if (covered.has(target) && target !== "accounts") expect(covered.has(t.name) || people.has(t.name), `${t.name} refers to ${target}`).toBe(true);
      }
    }
    for (const [table, columns] of Object.entries(SECRET_COLUMNS)) {
      for (const c of columns) expect(config(table).columns.some((x) => x.name === c), `${table}.${c}`).toBe(true);
    }
  });
});

describe("the account-data statements' plans", () => {
  const nodes = (list: TableNode[]): TableNode[] => list.flatMap((n) => [n, ...nodes(n.children ?? [])]);
  it.each(nodes(ACCOUNT_DATA).map((n) => [n.table, n] as const))("%s is reached through an index, never a scan", async (table, node) => {
    // Roots are scoped by one account id; children by a page of parent ids.
    const scopes = node.scope === "account_id" ? 1 : 90;
    const q = nodeSql(node, scopes);
    const bind = (extra: number) => Array.from({ length: scopes + extra }, (_, i) => `v${i}`);
    for (const [sql, params] of [[q.parents, bind(0)], [q.deleteBatch, bind(0)], [q.exportFirst, bind(0)], [q.exportNext, bind(q.order.length)]] as const) {
      if (sql === q.parents && !(node.children?.length || node.blobs?.length)) continue;
      const rows = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`).bind(...params).all<{ detail: string }>();
      const detail = rows.results.map((r) => r.detail).join("\n");
      // domain_claims: a claim per contested name, rare enough to scan (see ACCOUNT_DATA).
      if (table !== "domain_claims") expect(detail, `${sql}\n${detail}`).not.toMatch(new RegExp(`SCAN ${table}\\b`));
    }
  });
});

describe("deleting an account", () => {
  it("leaves no row in any table and no R2 object of it, and touches neither another account nor a user it shares", async () => {
    const a = `a${uuidv7()}`;
    const b = `b${uuidv7()}`;
    const bKeys = await fill(b);
    const aKeys = await fill(a, { sharedUser: idOf("auth_users", b) });

    const before = await counts(a);
    for (const [t, c] of Object.entries(before)) expect(c, `the fill put a row of ${a} in ${t}`).toBeGreaterThan(0);
    const bBefore = await counts(b);
    for (const k of aKeys) expect(await env.BLOBS.head(k), k).not.toBeNull();

    const report = await deleteAccountData(d1Runner(env.DB), r2Store(env.BLOBS), a);
    expect(report.users).toBe(1);
    expect(report.rows.accounts).toBe(1);

    const after = await counts(a);
    for (const [t, c] of Object.entries(after)) expect(c, `rows of the deleted account left in ${t}`).toBe(0);
    for (const k of aKeys) expect(await env.BLOBS.head(k), k).toBeNull();
    const listed = await env.BLOBS.list({ limit: 1000 });
    expect(listed.objects.map((o) => o.key).filter((k) => k.includes(a))).toEqual([]);

    // The other account is whole, its owner too, who keeps a sign-in though they were a member of the deleted one.
    const bAfter = await counts(b);
    expect(bAfter).toEqual(bBefore);
    for (const k of bKeys) expect(await env.BLOBS.head(k), k).not.toBeNull();
    expect(await n("SELECT COUNT(*) AS n FROM memberships WHERE user_id = ?", idOf("auth_users", b))).toBe(1);
    expect(await n("SELECT COUNT(*) AS n FROM auth_sessions WHERE user_id = ?", idOf("auth_users", b))).toBe(1);

    // Again, as after a crash: nothing to do, nothing fails.
    const again = await deleteAccountData(d1Runner(env.DB), r2Store(env.BLOBS), a);
    expect(Object.values(again.rows).reduce((x, y) => x + y, 0)).toBe(0);
  });

  it("finishes the job when run again after stopping half-way", async () => {
    const a = `c${uuidv7()}`;
    const keys = await fill(a);
    // A runner that fails after some statements: the deletion stops mid-way, like a crashed Worker.
    const d1 = d1Runner(env.DB);
    let left = 12;
    const flaky = { all: async (sql: string, params?: (string | number | null)[]) => { if (--left < 0) throw new Error("crash"); return d1.all(sql, params); } };
    await expect(deleteAccountData(flaky, r2Store(env.BLOBS), a)).rejects.toThrow("crash");
    expect((await counts(a)).accounts).toBe(1);
    await deleteAccountData(d1, r2Store(env.BLOBS), a);
    for (const [t, c] of Object.entries(await counts(a))) expect(c, t).toBe(0);
    for (const k of keys) expect(await env.BLOBS.head(k), k).toBeNull();
  });

  it("takes a row a late request adds behind the sweep, before the account row goes", async () => {
    const a = `h${uuidv7()}`;
    await insert("accounts", a, null);
    const d1 = d1Runner(env.DB);
    let late = true;
    const racing = {
      all: async (sql: string, params?: (string | number | null)[]) => {
        if (late && sql.startsWith("DELETE FROM accounts")) {
          late = false;
          await env.DB.prepare("INSERT INTO suppressions (id, account_id, email, reason, created_at) VALUES (?, ?, 'late@example.test', 'manual', 1)").bind(`late-${a}`, a).run();
        }
        return d1.all(sql, params);
      },
    };
    const report = await deleteAccountData(racing, r2Store(env.BLOBS), a);
    expect(report.rows.accounts).toBe(1);
    expect(await n("SELECT COUNT(*) AS n FROM suppressions WHERE account_id = ?", a)).toBe(0);
  });
});

describe("exporting an account", () => {
  it("holds each kind of the account's data and none of its secrets, nor another account's rows", async () => {
    const a = `e${uuidv7()}`;
    const b = `f${uuidv7()}`;
    await fill(b);
    await fill(a);
    const bytes = await new Response(exportStream(d1Runner(env.DB), a)).text();
    const doc = JSON.parse(bytes) as { account: { id: string; name: string }; members: { email: string }[]; tables: Record<string, unknown[]> };
    expect(doc.account).toMatchObject({ id: a, name: `Acme ${a}` });
    expect(doc.members.map((m) => m.email)).toEqual([`owner-${a}@example.test`]);
    for (const t of accountTables().filter((t) => t !== "accounts")) expect(doc.tables[t]?.length, t).toBeGreaterThan(0);
    // JSON columns come parsed under their plain name.
    expect((doc.tables.emails![0] as { to: unknown }).to).toEqual(["p@example.test"]);

    // The real secret values the fill stored: none appears anywhere in the bytes.
    const secrets = [
      ...Object.entries(SECRET_COLUMNS).flatMap(([t, cols]) => cols.map((c) => value(t, c, a))),
      value("auth_accounts", "password", a), value("auth_sessions", "token", a),
      value("auth_two_factors", "secret", a), value("auth_two_factors", "backup_codes", a),
    ];
    const stored = await env.DB.prepare("SELECT token_hash FROM api_keys WHERE account_id = ?").bind(a).first<{ token_hash: string }>();
    expect(stored!.token_hash).toBe(value("api_keys", "token_hash", a));
    for (const s of secrets) expect(bytes.includes(s), s).toBe(false);
    expect(bytes.includes(b)).toBe(false);
  });

  it("pages through more rows than a page holds", async () => {
    const a = `g${uuidv7()}`;
    await insert("accounts", a, null);
    const stmts = Array.from({ length: 250 }, (_, i) =>
      env.DB.prepare("INSERT INTO suppressions (id, account_id, email, reason, created_at) VALUES (?, ?, ?, 'manual', 1)").bind(`s${String(i).padStart(4, "0")}-${a}`, a, `x${i}@example.test`));
    await env.DB.batch(stmts);
    const doc = JSON.parse(await new Response(exportStream(d1Runner(env.DB), a)).text()) as { tables: Record<string, { id: string }[]> };
    expect(doc.tables.suppressions!.length).toBe(250);
    expect(new Set(doc.tables.suppressions!.map((s) => s.id)).size).toBe(250);
    await deleteAccountData(d1Runner(env.DB), r2Store(env.BLOBS), a);
    expect(await n("SELECT COUNT(*) AS n FROM suppressions WHERE account_id = ?", a)).toBe(0);
  });
});
