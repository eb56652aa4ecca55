// Writing to a tern D1 database from Node through wrangler, locally (the state `npm start`
// uses) or --remote. Shared by `npm start` and the operator commands; API keys are made by the
// Worker's own auth code, so there is one definition of a key and of how it is stored.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { generateToken, hashToken, isTokenShape, tokenPrefix } from "../worker/api-key-token.ts";

const root = resolve(import.meta.dirname, "..");
export const WRANGLER = join(root, "node_modules", "wrangler", "bin", "wrangler.js");

export function wranglerEnv(): NodeJS.ProcessEnv {
  // WRANGLER_LOG at "log" whatever this process uses: wrangler prints `--json` results through
  // its logger, so an inherited "error" (ops/admin.ts quiets its own local proxy that way)
  // made `d1 execute --json` print nothing at all.
  return { ...process.env, WRANGLER_SEND_METRICS: "false", X_LOCAL_OBSERVABILITY: "false", CI: "true", WRANGLER_LOG: "log" };
}

/** Runs wrangler with the project's Node; throws with its output when it fails. */
export function runWrangler(args: string[]): string {
  const r = spawnSync(process.execPath, [WRANGLER, ...args], { cwd: root, env: wranglerEnv(), encoding: "utf8" });
  if (r.status !== 0) throw new Error(`wrangler ${args.slice(0, 3).join(" ")} failed:\n${r.stdout ?? ""}${r.stderr ?? ""}`);
  return r.stdout;
}

/** `--remote`, or the local state in `persistTo`. */
export function d1Target(remote: boolean, persistTo: string): string[] {
  return remote ? ["--remote"] : ["--local", "--persist-to", persistTo];
}

/** Runs SQL statements against the DB binding; with json, returns wrangler's result list. */
export function d1Execute(target: string[], statements: string[], json = false): unknown {
  const out = runWrangler(["d1", "execute", "DB", ...target, ...(json ? ["--json"] : []), "--command", statements.join(" ")]);
  return json ? JSON.parse(out) : undefined;
}

export const sqlString = (s: string) => `'${s.replace(/'/g, "''")}'`;

export { generateToken, isTokenShape };

/** The INSERT of a full-access key, storing only the token's hash and its visible prefix. */
export async function apiKeyInsert(k: { id: string; accountId: string; name: string; token: string }, now = Date.now()): Promise<string> {
  return `INSERT OR IGNORE INTO api_keys (id, account_id, name, permission, domain_id, token_hash, token_prefix, created_at) VALUES (${sqlString(k.id)}, ${sqlString(k.accountId)}, ${sqlString(k.name)}, 'full_access', NULL, ${sqlString(await hashToken(k.token))}, ${sqlString(tokenPrefix(k.token))}, ${now});`;
}

/** A SQL value written into a statement: wrangler's --command takes no bound parameters. */
export function sqlLiteral(v: string | number | null): string {
  if (v === null) return "NULL";
  if (typeof v === "number") {
    if (!Number.isFinite(v)) throw new Error(`not a SQL number: ${v}`);
    return String(v);
  }
  return sqlString(v);
}

/** `sql` with its `?` and `?N` placeholders replaced by the literals of `params`. The
 * statements given here are tern's own, with no `?` inside their string literals. */
export function inlineParams(sql: string, params: (string | number | null)[]): string {
  let next = 0;
  return sql.replace(/\?(\d+)?/g, (_, n: string | undefined) => {
    const i = n ? Number(n) - 1 : next++;
    if (i >= params.length) throw new Error(`statement needs parameter ${i + 1}: ${sql.slice(0, 80)}`);
    return sqlLiteral(params[i]!);
  });
}

/** The R2 bucket bound as BLOBS in wrangler.toml. */
export function blobsBucket(): string {
  const toml = readFileSync(join(root, "wrangler.toml"), "utf8");
  const m = toml.match(/\[\[r2_buckets\]\][^[]*?binding\s*=\s*"BLOBS"[^[]*?bucket_name\s*=\s*"([^"]+)"/) ?? toml.match(/\[\[r2_buckets\]\][^[]*?bucket_name\s*=\s*"([^"]+)"[^[]*?binding\s*=\s*"BLOBS"/);
  if (!m) throw new Error("wrangler.toml binds no R2 bucket as BLOBS");
  return m[1]!;
}
