// An account's data rights: a copy of everything it holds (export) and its erasure (delete),
// one definition shared by the dashboard (D1 and R2 bindings) and `npm run admin` (SQL and
// object deletes through wrangler). Both walk ACCOUNT_DATA, the tree of every table that holds
// an account's rows; test/worker/account-data.test.ts fails when a table of the schema is in
// neither that tree nor the lists of tables that are not an account's data, so a new table
// cannot be forgotten.
//
// Deletion is bounded and re-runnable: each statement touches at most one page of rows; a
// parent's page is deleted only after its children and the R2 objects its rows name, so a
// crash leaves every remaining object still named by a remaining row, and running the
// deletion again finishes the job. The account row goes last.

/** A bound value of a statement. */
export type Param = string | number | null;
export type Row = Record<string, unknown>;

/** The seam to the database: D1 in the Worker, `wrangler d1 execute` in ops/admin.ts. */
export interface SqlRunner {
  all(sql: string, params?: Param[]): Promise<Row[]>;
}

/** The seam to R2: deleting missing keys is not an error. */
export interface BlobStore {
  delete(keys: string[]): Promise<void>;
  /** Keys under a prefix, when the store can list (the binding can; wrangler cannot). */
  list?(prefix: string): Promise<string[]>;
}

/** A table holding an account's rows: found by `account_id`, or through its parent's ids. */
export interface TableNode {
  table: string;
  /** The column naming the account (roots) or the parent row's id (children). */
  scope: string;
  /** Columns that identify a row (the primary key). */
  key: string[];
  /** Columns naming R2 objects: a key, or (`*_json`) an attachments list with `key`s. */
  blobs?: string[];
  children?: TableNode[];
}

const id = ["id"];
const root = (table: string, key = id, more: Partial<TableNode> = {}): TableNode => ({ table, scope: "account_id", key, ...more });
const child = (table: string, scope: string, key = id, more: Partial<TableNode> = {}): TableNode => ({ table, scope, key, ...more });

/** Every table of an account's data, in deletion order (children before parents, API keys
 * first so nothing new arrives, the audit log just before the account). Tables without an
 * index on account_id are reached through a parent whose id they are indexed by. */
export const ACCOUNT_DATA: TableNode[] = [
  root("api_keys"),
  root("webhooks", id, {
    children: [child("webhook_deliveries", "webhook_id", id, { children: [child("webhook_attempts", "delivery_id")] })],
  }),
  root("webhook_events"),
  root("emails", id, {
    blobs: ["content_key", "attachments_json"],
    // email_recipients also goes by trigger when its email does (migrations/*_email_recipients_triggers.sql).
    children: [child("email_events", "email_id"), child("email_links", "email_id", ["email_id"]), child("email_recipients", "email_id", ["email_id", "address"])],
  }),
  root("broadcasts", id, { children: [child("broadcast_recipients", "broadcast_id", ["broadcast_id", "contact_id"])] }),
  root("inbound_emails", id, { blobs: ["raw_key", "content_key", "attachments_json"] }),
  root("contact_imports", id, { blobs: ["file_key"] }),
  root("segments", id, { children: [child("contact_segments", "segment_id", ["segment_id", "contact_id"])] }),
  root("topics", id, { children: [child("contact_topics", "topic_id", ["topic_id", "contact_id"])] }),
  root("contacts"),
  root("contact_properties"),
  root("templates"),
  // The editor's images: their objects go with the account's media/ prefix below.
  root("media_images"),
  root("suppressions"),
  // Claims are rare (one per contested domain name): found by a scan, not worth an index.
  root("domain_claims"),
  root("dkim_keys"),
  root("domains"),
  root("idempotency_keys", ["account_id", "scope", "key"]),
  root("usage", ["account_id", "period"]),
  root("metric_rollups", ["account_id", "span", "bucket", "domain_id", "broadcast_id"]),
  root("api_logs"),
  root("invitations"),
  root("memberships", ["account_id", "user_id"]),
  root("audit_log"),
];

/** Tables of people (users) rather than accounts: a user's rows go with the account when they
 * belong to no other account (deleteUsersOnlyIn). auth_accounts.account_id is better-auth's
 * provider account id, not a tern account. */
export const USER_TABLES = ["auth_users", "auth_sessions", "auth_accounts", "auth_two_factors", "auth_passkeys", "auth_verifications", "auth_attempts"] as const;

/** Tables of the deployment itself, holding no account's or person's data (one-off jobs' places, the
 * tracking hosts Cloudflare serves, which twins of a domain in two accounts share). */
export const SYSTEM_TABLES = ["maintenance_jobs", "tracking_hostnames"] as const;

/** Columns never exported: credentials, their hashes, sealed keys and secrets. */
export const SECRET_COLUMNS: Record<string, string[]> = {
  api_keys: ["token_hash"],
  dkim_keys: ["private_key_sealed"],
  webhooks: ["secret_sealed", "previous_secret_sealed"],
  invitations: ["token_hash"],
  // The DNS proof value of a claim in progress: whoever holds it could complete the claim.
  domain_claims: ["token"],
};

/** Rows per statement: D1 binds at most 100 parameters, and a bounded page keeps each
 * statement well inside D1's time limit on an account of any size. */
export const PAGE = 90;
const DELETE_BATCH = 500;

function walk(nodes: TableNode[], out: TableNode[] = []): TableNode[] {
  for (const n of nodes) {
    out.push(n);
    walk(n.children ?? [], out);
  }
  return out;
}

/** Every table the account's data occupies (the account row's table included). */
export function accountTables(): string[] {
  return ["accounts", ...walk(ACCOUNT_DATA).map((n) => n.table)];
}

const marks = (n: number) => Array.from({ length: n }, () => "?").join(", ");
const cols = (c: string[]) => (c.length === 1 ? c[0]! : `(${c.join(", ")})`);

/** The R2 keys a row names. */
export function blobKeys(row: Row, columns: string[] = []): string[] {
  const keys: string[] = [];
  for (const c of columns) {
    const v = row[c];
    if (typeof v !== "string" || !v) continue;
    if (!c.endsWith("_json")) {
      keys.push(v);
      continue;
    }
    try {
      const list = JSON.parse(v) as { key?: unknown }[];
      if (Array.isArray(list)) for (const a of list) if (typeof a?.key === "string" && a.key) keys.push(a.key);
    } catch {}
  }
  return keys;
}

export interface DeleteReport {
  accountId: string;
  /** Rows deleted, by table. */
  rows: Record<string, number>;
  /** R2 objects deleted. */
  blobs: number;
  /** Users deleted because they belonged to this account only. */
  users: number;
}

/** The statements deletion and export run on a node's rows among `scopes` bound values (the
 * account id, or a page of parent ids); test/worker/account-data.test.ts checks their plans. */
export function nodeSql(node: TableNode, scopes: number) {
  const where = `${node.scope} IN (${marks(scopes)})`;
  const order = [node.scope, ...node.key.filter((k) => k !== node.scope)];
  const exportPage = (after: boolean) =>
    `SELECT * FROM ${node.table} WHERE ${where}${after ? ` AND (${order.join(", ")}) > (${marks(order.length)})` : ""} ORDER BY ${order.join(", ")} LIMIT ${PAGE}`;
  return {
    /** A page of parents (with the objects they name), whose dependents go first. */
    parents: `SELECT id${(node.blobs ?? []).map((c) => `, ${c}`).join("")} FROM ${node.table} WHERE ${where} LIMIT ${PAGE}`,
    /** A bounded batch of leaf rows. */
    deleteBatch: `DELETE FROM ${node.table} WHERE ${cols(node.key)} IN (SELECT ${node.key.join(", ")} FROM ${node.table} WHERE ${where} LIMIT ${DELETE_BATCH}) RETURNING 1 AS x`,
    exportFirst: exportPage(false),
    exportNext: exportPage(true),
    order,
  };
}

/** Deletes a node's rows in `scopeValues` (one account id, or a page of parent ids), children
 * and R2 objects first. */
async function deleteNode(db: SqlRunner, blobs: BlobStore, node: TableNode, scopeValues: string[], report: DeleteReport): Promise<void> {
  const q = nodeSql(node, scopeValues.length);
  const bump = (n: number) => (report.rows[node.table] = (report.rows[node.table] ?? 0) + n);
  if (node.children?.length || node.blobs?.length) {
    // Parents with children or objects have an `id`: a page of them, their dependents, then them.
    for (;;) {
      const rows = await db.all(q.parents, scopeValues);
      if (rows.length === 0) return;
      const ids = rows.map((r) => String(r.id));
      for (const c of node.children ?? []) await deleteNode(db, blobs, c, ids, report);
      const keys = rows.flatMap((r) => blobKeys(r, node.blobs));
      for (let i = 0; i < keys.length; i += 1000) await blobs.delete(keys.slice(i, i + 1000));
      report.blobs += keys.length;
      const gone = await db.all(`DELETE FROM ${node.table} WHERE id IN (${marks(ids.length)}) RETURNING 1 AS x`, ids);
      bump(gone.length);
      if (rows.length < PAGE) return;
    }
  }
  for (;;) {
    const gone = await db.all(q.deleteBatch, scopeValues);
    bump(gone.length);
    if (gone.length < DELETE_BATCH) return;
  }
}

/** Deletes the users who belong to this account and to no other, with everything that is
 * theirs (sessions, sign-in methods, second factors, passkeys, pending verifications, sign-in throttle
 * and invitation counts and their own audit entries outside any account). Runs before the memberships go, so
 * a re-run after a crash still finds them. */
async function deleteUsersOnlyIn(db: SqlRunner, accountId: string, report: DeleteReport): Promise<void> {
  const users = await db.all(
    `SELECT u.id, u.email FROM memberships m JOIN auth_users u ON u.id = m.user_id
     WHERE m.account_id = ? AND NOT EXISTS (SELECT 1 FROM memberships o WHERE o.user_id = m.user_id AND o.account_id <> m.account_id)`,
    [accountId],
  );
  for (const u of users) {
    const userId = String(u.id);
    const email = String(u.email);
    const gone = await db.all(
      `DELETE FROM auth_sessions WHERE user_id = ?1 RETURNING 1 AS x`, [userId]);
    await db.all(`DELETE FROM auth_accounts WHERE user_id = ?1`, [userId]);
    await db.all(`DELETE FROM auth_two_factors WHERE user_id = ?1`, [userId]);
    await db.all(`DELETE FROM auth_passkeys WHERE user_id = ?1`, [userId]);
    // better-auth keeps a reset's user id as the value; verification links carry the address.
    await db.all(`DELETE FROM auth_verifications WHERE value = ?1 OR identifier = ?2`, [userId, email]);
    await db.all(`DELETE FROM auth_attempts WHERE key >= ?1 AND key < ?2`, [`email:${email}@`, `email:${email}A`]);
    await db.all(`DELETE FROM auth_attempts WHERE key >= ?1 AND key < ?2`, [`invite-by:${userId}@`, `invite-by:${userId}A`]);
    await db.all(`DELETE FROM audit_log WHERE user_id = ?1 AND account_id IS NULL`, [userId]);
    await db.all(`DELETE FROM auth_users WHERE id = ?1`, [userId]);
    report.rows.auth_sessions = (report.rows.auth_sessions ?? 0) + gone.length;
    report.users++;
  }
}

/** Deletes the account and everything it holds; safe to run again after a crash, and a no-op
 * for an account that is gone. */
export async function deleteAccountData(db: SqlRunner, blobs: BlobStore, accountId: string): Promise<DeleteReport> {
  const report: DeleteReport = { accountId, rows: {}, blobs: 0, users: 0 };
  // A request that began before the deletion (an API key is cached for a few seconds in other
  // isolates) may add a row behind the sweep; the account row's foreign keys then refuse its
  // delete, and another pass takes the newcomer.
  for (let pass = 1; ; pass++) {
    for (const node of ACCOUNT_DATA) {
      if (node.table === "memberships") await deleteUsersOnlyIn(db, accountId, report);
      await deleteNode(db, blobs, node, [accountId], report);
    }
    // Objects no row names any more (a receive that failed half-way) and the editor's images
    // (named only inside email html) live under the account's prefixes.
    if (blobs.list) {
      for (const prefix of [`inbound/${accountId}/`, `media/${accountId}/`]) {
        const orphans = await blobs.list(prefix);
        for (let i = 0; i < orphans.length; i += 1000) await blobs.delete(orphans.slice(i, i + 1000));
        report.blobs += orphans.length;
      }
    }
    // The account's invitation counters (worker/dashboard/routes.tsx): the addresses it invited.
    await db.all(`DELETE FROM auth_attempts WHERE (key >= ?1 AND key < ?2) OR (key >= ?3 AND key < ?4)`,
      [`invite-account:${accountId}@`, `invite-account:${accountId}A`, `invite-to:${accountId}:`, `invite-to:${accountId};`]);
    try {
      const gone = await db.all(`DELETE FROM accounts WHERE id = ? RETURNING 1 AS x`, [accountId]);
      report.rows.accounts = gone.length;
      return report;
    } catch (err) {
      if (pass >= 3 || !/FOREIGN KEY/i.test(String(err))) throw err;
    }
  }
}

// ---- export ----------------------------------------------------------------------------------

/** A row as exported: secret columns left out, `*_json` columns parsed under their plain name. */
export function exportRow(table: string, row: Row): Row {
  const secret = SECRET_COLUMNS[table] ?? [];
  const out: Row = {};
  for (const [k, v] of Object.entries(row)) {
    if (secret.includes(k)) continue;
    if (k.endsWith("_json") && typeof v === "string") {
      try {
        out[k.slice(0, -5)] = JSON.parse(v);
        continue;
      } catch {}
    }
    out[k] = v;
  }
  return out;
}

/** Pages of a node's rows within scopeValues, in key order (keyset paging). */
async function* rowPages(db: SqlRunner, node: TableNode, scopeValues: string[]): AsyncGenerator<Row[]> {
  const q = nodeSql(node, scopeValues.length);
  const order = q.order;
  let after: Param[] | null = null;
  for (;;) {
    const rows = await db.all(after ? q.exportNext : q.exportFirst, after ? [...scopeValues, ...after] : scopeValues);
    if (rows.length === 0) return;
    yield rows;
    if (rows.length < PAGE) return;
    const last = rows[rows.length - 1]!;
    after = order.map((c) => last[c] as Param);
  }
}

/** Every row of a node (through its ancestors' pages), a page at a time. */
async function* nodeRows(db: SqlRunner, path: TableNode[], accountId: string): AsyncGenerator<Row[]> {
  const node = path[path.length - 1]!;
  if (path.length === 1) {
    yield* rowPages(db, node, [accountId]);
    return;
  }
  for await (const parents of nodeRows(db, path.slice(0, -1), accountId)) {
    yield* rowPages(db, node, parents.map((p) => String(p.id)));
  }
}

function paths(nodes: TableNode[], prefix: TableNode[] = [], out: TableNode[][] = []): TableNode[][] {
  for (const n of nodes) {
    out.push([...prefix, n]);
    paths(n.children ?? [], [...prefix, n], out);
  }
  return out;
}

/** The account's data as one JSON document, produced piece by piece in bounded memory:
 * {format, exported_at, account, members, tables: {<table>: [rows]}}. Times are Unix
 * milliseconds as stored; R2 content (large bodies, attachments, raw received mail) is named
 * by its key, not included. */
export async function* exportAccountData(db: SqlRunner, accountId: string, now = Date.now()): AsyncGenerator<string> {
  const [account] = await db.all(`SELECT * FROM accounts WHERE id = ?`, [accountId]);
  yield `{"format":"tern-account-export/1","exported_at":${JSON.stringify(new Date(now).toISOString())},"account":${JSON.stringify(account ?? null)}`;
  const members = await db.all(
    `SELECT u.id, u.name, u.email, u.email_verified, u.two_factor_enabled, u.created_at, m.role, m.created_at AS member_since
     FROM memberships m JOIN auth_users u ON u.id = m.user_id WHERE m.account_id = ? ORDER BY u.id`,
    [accountId],
  );
  yield `,"members":${JSON.stringify(members)},"tables":{`;
  let firstTable = true;
  for (const path of paths(ACCOUNT_DATA)) {
    const node = path[path.length - 1]!;
    yield `${firstTable ? "" : ","}${JSON.stringify(node.table)}:[`;
    firstTable = false;
    let first = true;
    for await (const rows of nodeRows(db, path, accountId)) {
      let chunk = "";
      for (const r of rows) {
        chunk += (first ? "" : ",") + JSON.stringify(exportRow(node.table, r));
        first = false;
      }
      yield chunk;
    }
    yield "]";
  }
  yield "}}\n";
}

/** exportAccountData as a byte stream (the dashboard's download). */
export function exportStream(db: SqlRunner, accountId: string): ReadableStream<Uint8Array> {
  const it = exportAccountData(db, accountId);
  const enc = new TextEncoder();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = await it.next();
      if (next.done) controller.close();
      else controller.enqueue(enc.encode(next.value));
    },
  });
}
