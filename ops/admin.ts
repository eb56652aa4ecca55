// Operator commands for a tern deployment's D1 database, through wrangler:
//   npm run admin -- create-account "<name>" [--plan free] [--remote]
//   npm run admin -- set-plan <account-id> <plan> [--remote]
//   npm run admin -- set-rate-limit <account-id> <requests-per-second> [--remote]
//   npm run admin -- create-user <account-id> <email> [--name N] [--role owner|admin|member] [--password P | --password -] [--remote]
// Without --remote they act on the local state that `npm start` uses (--persist-to DIR to pick
// another). create-account prints a full-access API key once; only its hash is stored.
// create-user makes a dashboard sign-in (address already verified) for an account and prints
// its password once (a generated one unless --password is given); only a scrypt hash is stored.
//   npm run admin -- export-account <account-id> [--out FILE] [--remote]
//   npm run admin -- delete-account <account-id> [--remote]
// export-account writes the account's data (secrets left out) as one JSON file; delete-account
// deletes the account with every row it holds, the R2 objects its rows name and its users who
// belong to no other account. Both run the Worker's own worker/accounts/data.ts: locally over
// real D1 and R2 bindings of the local state (wrangler's getPlatformProxy); with --remote
// statement by statement through `wrangler d1 execute` and `wrangler r2 object delete` (about
// a second each; and wrangler cannot list a bucket, so objects no row names are left: see
// wranglerBlobs). Deletion can be run again if it stops half-way.
import { randomUUID } from "node:crypto";
import { hashPassword } from "better-auth/crypto";
import { passwordProblem } from "../worker/dashboard/passwords.ts";
import { join, resolve } from "node:path";
import { PLANS, isPlan } from "../worker/plans.ts";
import { createWriteStream, readFileSync } from "node:fs";
import { once } from "node:events";
import { apiKeyInsert, blobsBucket, d1Execute, d1Target, generateToken, inlineParams, runWrangler, sqlString as sql } from "./d1.ts";
import { deleteAccountData, exportAccountData, type BlobStore, type SqlRunner } from "../worker/accounts/data.ts";

const root = resolve(import.meta.dirname, "..");

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

function d1(statements: string[], target: string[], json = false): unknown {
  try {
    return d1Execute(target, statements, json);
  } catch (err) {
    fail((err as Error).message);
  }
}

/** Rows an `UPDATE ... RETURNING id` touched (local D1 does not report `changes`). */
function changes(result: unknown): number {
  return ((result as { results?: unknown[] }[]) ?? []).reduce((n, r) => n + (r.results?.length ?? 0), 0);
}


export type Role = "owner" | "admin" | "member";

/** worker/accounts/data.ts's database seam over `wrangler d1 execute` (no bound parameters
 * there: values are written into the statement as SQL literals). */
export function wranglerRunner(target: string[]): SqlRunner {
  return {
    all: async (statement, params = []) => {
      const out = d1Execute(target, [inlineParams(statement, params) + ";"], true) as { results?: Record<string, unknown>[] }[];
      return out[0]?.results ?? [];
    },
  };
}

/** Its R2 seam over `wrangler r2 object delete`, one object a call. Wrangler cannot list a
 * bucket's objects, so objects no row names (under inbound/<account>/, from a receive that
 * failed half-way) are not found remotely; the dashboard's deletion and the local one (real
 * bindings) list and delete those too. */
export function wranglerBlobs(target: string[]): BlobStore {
  const bucket = blobsBucket();
  return {
    delete: async (keys) => {
      for (const key of keys) runWrangler(["r2", "object", "delete", `${bucket}/${key}`, ...target]);
    },
  };
}

/** A readable random password: 4 groups of 5 base32 letters (100 bits). */
export function generatePassword(): string {
  const alphabet = "abcdefghijkmnpqrstuvwxyz23456789";
  const bytes = crypto.getRandomValues(new Uint8Array(20));
  const chars = [...bytes].map((b) => alphabet[b % 32]).join("");
  return chars.match(/.{5}/g)!.join("-");
}

/** The statements that create a dashboard user with a password (hashed as better-auth does
 * in the Worker) and make them a member of an account. Nothing happens for an address that
 * already has a user, except the membership. */
export async function userInserts(u: { id: string; accountId: string; email: string; name: string; role: Role; password: string }, now = Date.now()): Promise<string[]> {
  const hash = await hashPassword(u.password);
  const email = u.email.toLowerCase();
  return [
    `INSERT OR IGNORE INTO auth_users (id, name, email, email_verified, two_factor_enabled, created_at, updated_at) VALUES (${sql(u.id)}, ${sql(u.name)}, ${sql(email)}, 1, 0, ${now}, ${now});`,
    `INSERT INTO auth_accounts (id, account_id, provider_id, user_id, password, created_at, updated_at) SELECT ${sql(randomUUID())}, id, 'credential', id, ${sql(hash)}, ${now}, ${now} FROM auth_users WHERE email = ${sql(email)} AND NOT EXISTS (SELECT 1 FROM auth_accounts a WHERE a.user_id = auth_users.id AND a.provider_id = 'credential');`,
    `INSERT OR IGNORE INTO memberships (account_id, user_id, role, created_at) SELECT ${sql(u.accountId)}, id, ${sql(u.role)}, ${now} FROM auth_users WHERE email = ${sql(email)};`,
  ];
}

/** The local state's D1 and R2 through real bindings (the shapes the Worker's seams use). */
async function localSeams(persistTo: string): Promise<{ db: SqlRunner; blobs: BlobStore; dispose: () => Promise<void> }> {
  // Wrangler's notices ("Using secrets defined in .dev.vars") would mix into the JSON printed.
  process.env.WRANGLER_LOG ??= "error";
  const { getPlatformProxy } = await import("wrangler");
  type Bucket = { delete(keys: string[]): Promise<void>; list(o: { prefix: string; cursor?: string; limit: number }): Promise<{ objects: { key: string }[]; truncated: boolean; cursor?: string }> };
  type Database = { prepare(sql: string): { bind(...p: unknown[]): { all(): Promise<{ results: Record<string, unknown>[] }> } } };
  const proxy = await getPlatformProxy<{ DB: Database; BLOBS: Bucket }>({ configPath: join(root, "wrangler.toml"), persist: { path: join(persistTo, "v3") } });
  const { DB, BLOBS } = proxy.env;
  return {
    db: { all: async (statement, params = []) => (await DB.prepare(statement).bind(...params).all()).results },
    blobs: {
      delete: async (keys) => {
        if (keys.length) await BLOBS.delete(keys);
      },
      list: async (prefix) => {
        const keys: string[] = [];
        let cursor: string | undefined;
        for (;;) {
          const page = await BLOBS.list({ prefix, cursor, limit: 1000 });
          keys.push(...page.objects.map((o) => o.key));
          if (!page.truncated) return keys;
          cursor = page.cursor;
        }
      },
    },
    dispose: () => proxy.dispose(),
  };
}

export async function main(argv: string[]): Promise<void> {
  const args = [...argv];
  const flag = (name: string) => {
    const i = args.indexOf(name);
    if (i < 0) return undefined;
    const [, value] = args.splice(i, 2);
    return value ?? fail(`${name} needs a value`);
  };
  const remote = args.includes("--remote") ? (args.splice(args.indexOf("--remote"), 1), true) : false;
  const persistTo = flag("--persist-to") ?? join(root, ".wrangler", "state");
  const plan = flag("--plan");
  const name = flag("--name");
  const role = flag("--role");
  // "--password -" reads it from standard input, so it stays out of shell history and `ps`.
  const passwordFlag = flag("--password");
  const password = passwordFlag === "-" ? readFileSync(0, "utf8").replace(/\r?\n$/, "") : passwordFlag;
  const out = flag("--out");
  const target = d1Target(remote, persistTo);
  const [command, ...rest] = args;
  const plans = Object.keys(PLANS).join(", ");

  switch (command) {
    case "create-account": {
      const [name] = rest;
      if (!name) fail('usage: create-account "<name>" [--plan P]');
      const p = plan ?? "free";
      if (!isPlan(p)) fail(`unknown plan ${p}; plans: ${plans}`);
      const accountId = randomUUID();
      const keyId = randomUUID();
      const key = generateToken();
      const now = Date.now();
      d1([
        `INSERT INTO accounts (id, name, plan, rate_limit, created_at) VALUES (${sql(accountId)}, ${sql(name)}, ${sql(p)}, 10, ${now});`,
        await apiKeyInsert({ id: keyId, accountId, name: "Admin key", token: key }, now),
      ], target);
      console.log(JSON.stringify({ account_id: accountId, plan: p, api_key: key }, null, 2));
      return;
    }
    case "set-plan": {
      const [accountId, p] = rest;
      if (!accountId || !p) fail("usage: set-plan <account-id> <plan>");
      if (!isPlan(p)) fail(`unknown plan ${p}; plans: ${plans}`);
      const r = d1([`UPDATE accounts SET plan = ${sql(p)} WHERE id = ${sql(accountId)} RETURNING id;`], target, true);
      if (changes(r) !== 1) fail(`no account ${accountId}`);
      console.log(`account ${accountId} is on plan ${p} (monthly ${PLANS[p].monthly}); API keys pick it up within seconds.`);
      return;
    }
    case "set-rate-limit": {
      const [accountId, n] = rest;
      const rate = Number(n);
      if (!accountId || !Number.isInteger(rate) || rate < 0 || rate > 100_000) fail("usage: set-rate-limit <account-id> <0..100000> (0: not limited)");
      const r = d1([`UPDATE accounts SET rate_limit = ${rate} WHERE id = ${sql(accountId)} RETURNING id;`], target, true);
      if (changes(r) !== 1) fail(`no account ${accountId}`);
      console.log(rate === 0 ? `account ${accountId} is not rate limited.` : `account ${accountId} may make ${rate} requests per second.`);
      return;
    }
    case "create-user": {
      const [accountId, email] = rest;
      if (!accountId || !email || !/^[^\s@]+@[^\s@]+$/.test(email)) fail("usage: create-user <account-id> <email> [--name N] [--role owner|admin|member] [--password P]");
      const r = role ?? "owner";
      if (!["owner", "admin", "member"].includes(r)) fail("--role must be owner, admin or member");
      const pw = password ?? generatePassword();
      const problem = passwordProblem(pw, email);
      if (problem) fail(`--password refused: ${problem}`);
      const found = d1([`SELECT id FROM accounts WHERE id = ${sql(accountId)};`], target, true);
      if (changes(found) !== 1) fail(`no account ${accountId}`);
      const existing = d1([`SELECT id FROM auth_users WHERE email = ${sql(email.toLowerCase())};`], target, true);
      if (changes(existing) > 0) fail(`a user with the address ${email} exists already; invite them from the dashboard's Settings instead`);
      const userId = randomUUID();
      d1(await userInserts({ id: userId, accountId, email, name: name ?? email.split("@")[0]!, role: r as Role, password: pw }), target);
      console.log(JSON.stringify({ user_id: userId, account_id: accountId, email: email.toLowerCase(), role: r, password: pw }, null, 2));
      return;
    }
    case "export-account": {
      const [accountId] = rest;
      if (!accountId) fail("usage: export-account <account-id> [--out FILE]");
      const seams = remote ? { db: wranglerRunner(target), dispose: async () => {} } : await localSeams(persistTo);
      try {
        const found = await seams.db.all("SELECT name FROM accounts WHERE id = ?", [accountId]);
        if (found.length !== 1) fail(`no account ${accountId}`);
        const file = out ?? `tern-export-${accountId}-${new Date().toISOString().slice(0, 10)}.json`;
        const stream = createWriteStream(file);
        for await (const part of exportAccountData(seams.db, accountId)) {
          if (!stream.write(part)) await once(stream, "drain");
        }
        stream.end();
        await once(stream, "finish");
        console.log(`account ${accountId} (${String(found[0]!.name)}) exported to ${file}`);
      } finally {
        await seams.dispose();
      }
      return;
    }
    case "delete-account": {
      const [accountId] = rest;
      if (!accountId) fail("usage: delete-account <account-id>");
      const seams = remote ? { db: wranglerRunner(target), blobs: wranglerBlobs(target), dispose: async () => {} } : await localSeams(persistTo);
      try {
        const found = await seams.db.all("SELECT name FROM accounts WHERE id = ?", [accountId]);
        if (found.length !== 1) console.error(`no account ${accountId}: deleting whatever rows of it remain (a deletion that stopped half-way)`);
        const report = await deleteAccountData(seams.db, seams.blobs, accountId);
        console.log(JSON.stringify({ deleted: accountId, rows: report.rows, blobs: report.blobs, users: report.users }, null, 2));
      } finally {
        await seams.dispose();
      }
      return;
    }
    default:
      fail(`usage: npm run admin -- <create-account|set-plan|set-rate-limit|create-user|export-account|delete-account> ... [--remote | --persist-to DIR]\nplans: ${plans}`);
  }
}

if (import.meta.main) await main(process.argv.slice(2));
