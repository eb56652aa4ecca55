// The node project's run gets one temporary directory for the state of the processes its
// tests start (test/support/processes.ts), removed when the run ends, so that test runs do not
// leave tern's state (D1, R2, mailboxes) behind in /tmp.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export default function setup(): () => void {
  const root = mkdtempSync(join(tmpdir(), "tern-tests-"));
  process.env.TERN_TEST_TMP = root;
  return () => rmSync(root, { recursive: true, force: true });
}
