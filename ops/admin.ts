// Operator commands for a tern deployment's D1 database, through wrangler:
//   npm run admin -- create-account "<name>" [--plan free] [--remote]
//   npm run admin -- set-plan <account-id> <plan> [--remote]
//   npm run admin -- set-rate-limit <account-id> <requests-per-second> [--remote]
//   npm run admin -- create-user <account-id> <email> [--name N] [--role owner|admin|member] [--password P] [--remote]
// Without --remote they act on the local state that `npm start` uses (--persist-to DIR to pick
// another). create-account prints a full-access API key once; only its hash is stored.
// create-user makes a dashboard sign-in (address already verified) for an account and prints
// its password once (a generated one unless --password is given); only a scrypt hash is stored.
import { randomUUID } from "node:crypto";
import { hashPassword } from "better-auth/crypto";
import { passwordProblem } from "../worker/dashboard/passwords.ts";
import { join, resolve } from "node:path";
import { PLANS, isPlan } from "../worker/plans.ts";
import { apiKeyInsert, d1Execute, d1Target, generateToken, sqlString as sql } from "./d1.ts";

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
  const password = flag("--password");
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
    default:
      fail(`usage: npm run admin -- <create-account|set-plan|set-rate-limit|create-user> ... [--remote | --persist-to DIR]\nplans: ${plans}`);
  }
}

if (import.meta.main) await main(process.argv.slice(2));
