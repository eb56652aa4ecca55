// The node project's run gets one temporary directory for the state of the processes its
// tests start (test/support/processes.ts), removed when the run ends, so that test runs do not
// leave tern's state (D1, R2, mailboxes) behind in /tmp. It also holds a local D1 with every
// migration applied, which each fresh tern starts from: `wrangler d1 migrations apply` on an
// empty database takes about 7 s, and a dozen files start a fresh tern.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { d1Target, runWrangler } from "../ops/d1.ts";

export default function setup(): () => void {
  const root = mkdtempSync(join(tmpdir(), "tern-tests-"));
  process.env.TERN_TEST_TMP = root;
  const template = join(root, "migrated-wrangler-state");
  runWrangler(["d1", "migrations", "apply", "DB", ...d1Target(false, template)]);
  process.env.TERN_TEST_MIGRATED_STATE = template;
  return () => rmSync(root, { recursive: true, force: true });
}
