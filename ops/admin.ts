// Operator commands for a tern deployment's D1 database, through wrangler:
//   npm run admin -- create-account "<name>" [--plan free] [--remote]
//   npm run admin -- set-plan <account-id> <plan> [--remote]
//   npm run admin -- set-rate-limit <account-id> <requests-per-second> [--remote]
// Without --remote they act on the local state that `npm start` uses (--persist-to DIR to pick
// another). create-account prints a full-access API key once; only its hash is stored.
import { randomUUID } from "node:crypto";
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
    default:
      fail(`usage: npm run admin -- <create-account|set-plan|set-rate-limit> ... [--remote | --persist-to DIR]\nplans: ${plans}`);
  }
}

if (import.meta.main) await main(process.argv.slice(2));
