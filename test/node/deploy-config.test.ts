// `wrangler deploy --dry-run` for every environment the README describes: the default one in
// wrangler.toml, and the EU one whose block the README gives. An environment inherits no
// bindings, so the EU block must restate every binding and queue consumer the default has: a
// binding it forgot would deploy cleanly and fail at run time, which is what this test catches.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SEND_QUEUE_BINDINGS, queueRegion, queueRole, sendQueueBinding } from "../../worker/queues.ts";
import { REGION_TABLE } from "../../worker/region-table.ts";

const root = resolve(import.meta.dirname, "..", "..");
const dir = mkdtempSync(join(process.env.TERN_TEST_TMP ?? tmpdir(), "tern-deploy-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The README's TOML block that declares `[env.<name>]`. */
function readmeEnvironment(name: string): string {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const block = [...readme.matchAll(/```toml\n([\s\S]*?)```/g)].map((m) => m[1]!).find((b) => b.includes(`[env.${name}]`));
  if (!block) throw new Error(`README.md has no \`\`\`toml block with [env.${name}]`);
  return block;
}

/** wrangler.toml with the README's environments appended, its relative paths made absolute
 * (the copy lives in a temporary directory). */
function configWith(...blocks: string[]): string {
  const base = readFileSync(join(root, "wrangler.toml"), "utf8").replace(
    /^(main|directory|migrations_dir)\s*=\s*"([^"]+)"/gm,
    (_, key: string, path: string) => `${key} = ${JSON.stringify(resolve(root, path))}`,
  );
  const path = join(dir, `wrangler-${blocks.length}.toml`);
  writeFileSync(path, [base, ...blocks].join("\n"));
  return path;
}

/** The bindings a dry run reports (variables aside), as "NAME Resource" lines. */
function dryRun(config: string, env?: string): string[] {
  const args = ["wrangler", "deploy", "--dry-run", "--outdir", join(dir, `out-${env ?? "default"}`), "-c", config, ...(env ? ["--env", env] : [])];
  const r = spawnSync("npx", args, { cwd: root, encoding: "utf8", env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "true" }, timeout: 120_000 });
  const out = `${r.stdout}\n${r.stderr}`;
  expect(r.status, `wrangler deploy --dry-run${env ? ` --env ${env}` : ""} failed:\n${out}`).toBe(0);
  expect(out).toContain("--dry-run: exiting now.");
  return out
    .split("\n")
    // A binding with a resource prints it in parentheses; one without (Images) prints none.
    .map((l) => /^env\.(\w+)(?: \(.*?\))?\s{2,}(.+?)\s*$/.exec(l))
    .filter((m): m is RegExpExecArray => m !== null && m[2] !== "Environment Variable")
    .map((m) => `${m[1]} ${m[2]}`)
    .sort();
}

/** The `[[<prefix>queues.<kind>]]` tables of a TOML text, each as its `key = "value"` pairs. */
function queueTables(toml: string, kind: "producers" | "consumers", env?: string): Record<string, string>[] {
  const header = `[[${env ? `env.${env}.` : ""}queues.${kind}]]`;
  return toml.split(/^(?=\[)/m).filter((t) => t.startsWith(header)).map((t) =>
    Object.fromEntries([...t.matchAll(/^(\w+)\s*=\s*(?:"([^"]*)"|([^\s#]+))/gm)].map((m) => [m[1]!, m[2] ?? m[3]!])),
  );
}

/** Which role each producer binding's queue plays (worker/queues.ts decides by the name): a send
 * queue per region of the table (SEND_QUEUE_US_EAST_1 -> ...-us-east-1-send), and one each for
 * webhooks and broadcasts. */
const ROLE_OF_BINDING: Record<string, string> = {
  ...Object.fromEntries(SEND_QUEUE_BINDINGS.map((b) => [b, "send"])),
  WEBHOOK_QUEUE: "webhooks",
  BROADCAST_QUEUE: "broadcasts",
};

function checkQueues(toml: string, env?: string): void {
  const producers = queueTables(toml, "producers", env);
  const consumed = queueTables(toml, "consumers", env).map((c) => c.queue!);
  expect(producers.map((p) => p.binding).sort()).toEqual(Object.keys(ROLE_OF_BINDING).sort());
  for (const p of producers) {
    // The consumer that reads a binding's queue is the one for the binding's role.
    expect(queueRole(p.queue!), `${p.binding} -> ${p.queue}`).toBe(ROLE_OF_BINDING[p.binding!]);
    expect(consumed, `${env ?? "default"} environment: nothing consumes ${p.queue}`).toContain(p.queue);
  }
  // Each region's mail has its own queue, named for the region its binding is for.
  for (const r of REGION_TABLE) {
    const queue = producers.find((p) => p.binding === sendQueueBinding(r.name))!.queue!;
    expect(queueRegion(queue), `${sendQueueBinding(r.name)} -> ${queue}`).toBe(r.name);
  }
}

/** Each consumer's batch settings by what its queue is for ("send us-east-1", "webhooks"). */
function consumerSettings(toml: string, env?: string): Record<string, Record<string, string>> {
  const tables = queueTables(toml, "consumers", env);
  return Object.fromEntries(tables.map(({ queue, ...settings }) => [`${queueRole(queue!)} ${queueRegion(queue!) ?? ""}`.trim(), settings]));
}

describe("wrangler deploy --dry-run, for every environment the README describes", () => {
  it("the default environment (wrangler.toml) builds, with its bindings", () => {
    const bindings = dryRun(configWith());
    expect(bindings).toEqual(expect.arrayContaining(["DB D1 Database", "BLOBS R2 Bucket", ...SEND_QUEUE_BINDINGS.map((b) => `${b} Queue`), "RATE_LIMITER Durable Object", "SENDER Durable Object", "IMAGES Images", "EMAIL Send Email"]));
    checkQueues(readFileSync(join(root, "wrangler.toml"), "utf8"));
  }, 150_000);

  it("the README's EU environment builds, restates every binding of the default, and consumes each of its queues with the right consumer", () => {
    const eu = readmeEnvironment("eu");
    const config = configWith(eu);
    const base = dryRun(config);
    expect(dryRun(config, "eu")).toEqual(base);
    checkQueues(eu, "eu");
    // Consumed as the default consumes each kind of queue (a batch timeout of 1 s on the
    // broadcast queue would stall a paced broadcast between its runs).
    const settings = consumerSettings(readFileSync(join(root, "wrangler.toml"), "utf8"));
    expect(settings["broadcasts"]).toMatchObject({ max_batch_timeout: "0" });
    expect(consumerSettings(eu, "eu")).toEqual(settings);
  }, 150_000);
});
