// One source of truth for each fact: the D1 migrations are what drizzle-kit generates from the
// schema, and the Worker's Env types are what wrangler generates from wrangler.toml.
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const root = resolve(import.meta.dirname, "..", "..");

describe("generated files are in sync with their sources", () => {
  it("migrations/ holds everything drizzle-kit generates from worker/db/schema.ts", () => {
    const dir = mkdtempSync(join(process.env.TERN_TEST_TMP ?? tmpdir(), "tern-schema-"));
    cpSync(join(root, "migrations"), join(dir, "migrations"), { recursive: true });
    const config = join(dir, "drizzle.config.ts");
    writeFileSync(config, `export default { dialect: "sqlite", schema: ${JSON.stringify(join(root, "worker/db/schema.ts"))}, out: "migrations" };\n`);
    const before = readdirSync(join(dir, "migrations")).sort();
    const out = execFileSync(process.execPath, [join(root, "node_modules/drizzle-kit/bin.cjs"), "generate", "--config", config], { cwd: dir, encoding: "utf8" });
    expect(readdirSync(join(dir, "migrations")).sort(), `schema changed without a migration:\n${out}`).toEqual(before);
    expect(out).toMatch(/No schema changes/);
  }, 60_000);

  it("worker-configuration.d.ts is what `wrangler types` generates from wrangler.toml", () => {
    const r = spawnSync(process.execPath, [join(root, "node_modules/wrangler/bin/wrangler.js"), "types", "--strict-vars=false", "--check"], {
      cwd: root, encoding: "utf8", env: { ...process.env, WRANGLER_SEND_METRICS: "false" },
    });
    expect(r.status, `${r.stdout}${r.stderr}\nRun \`npm run types\`.`).toBe(0);
  }, 60_000);
});
