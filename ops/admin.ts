// Operator commands for a tern deployment's D1 database, through wrangler:
//   npm run admin -- create-account "<name>" [--plan free] [--remote]
//   npm run admin -- set-plan <account-id> <plan> [--remote]
//   npm run admin -- set-rate-limit <account-id> <requests-per-second> [--remote]
// Without --remote they act on the local state that `npm start` uses (--persist-to DIR to pick
// another). create-account prints a full-access API key once; only its hash is stored.
import { spawnSync } from "node:child_process";
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { join, resolve } from "node:path";
import { PLANS, isPlan } from "../worker/plans.ts";

const root = resolve(import.meta.dirname, "..");
const WRANGLER = join(root, "node_modules", "wrangler", "bin", "wrangler.js");

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

const sql = (s: string) => `'${s.replace(/'/g, "''")}'`;

function d1(statements: string[], target: string[], json = false): unknown {
  const r = spawnSync(process.execPath, [WRANGLER, "d1", "execute", "DB", ...target, ...(json ? ["--json"] : []), "--command", statements.join(" ")], {
    cwd: root, encoding: "utf8", env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
  });
  if (r.status !== 0) fail(`wrangler d1 execute failed:\n${r.stdout}${r.stderr}`);
  return json ? JSON.parse(r.stdout) : undefined;
}

/** Rows an `UPDATE ... RETURNING id` touched (local D1 does not report `changes`). */
function changes(result: unknown): number {
  return ((result as { results?: unknown[] }[]) ?? []).reduce((n, r) => n + (r.results?.length ?? 0), 0);
}

function token(): string {
  const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  let out = "";
  while (out.length < 40) for (const b of randomBytes(64)) if (b < 248 && out.length < 40) out += alphabet[b % 62];
  return `tern_${out}`;
}

export function main(argv: string[]): void {
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
  const target = remote ? ["--remote"] : ["--local", "--persist-to", persistTo];
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
      const key = token();
      const now = Date.now();
      d1([
        `INSERT INTO accounts (id, name, plan, rate_limit, created_at) VALUES (${sql(accountId)}, ${sql(name)}, ${sql(p)}, 10, ${now});`,
        `INSERT INTO api_keys (id, account_id, name, permission, domain_id, token_hash, token_prefix, created_at) VALUES (${sql(keyId)}, ${sql(accountId)}, 'Admin key', 'full_access', NULL, ${sql(createHash("sha256").update(key).digest("hex"))}, ${sql(key.slice(0, 11))}, ${now});`,
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

if (import.meta.main) main(process.argv.slice(2));
