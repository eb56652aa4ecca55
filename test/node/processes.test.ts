// test/support/processes.ts, which every end-to-end test and benchmark starts tern with: a start
// that fails takes down the wrangler dev (and its workerd) it had spawned, even when npm start
// itself died and so could not stop it: wrangler dev runs in its own process group and would
// otherwise keep running, holding its port and state, after the test or bench has gone.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { startTern } from "../support/processes.ts";

/** Processes of the group that still run (an exited one waits a moment, a zombie, to be reaped). */
const running = (pgid: number) =>
  execFileSync("ps", ["-eo", "pgid=,stat=,pid=,args="], { encoding: "utf8" })
    .split("\n")
    .map((r) => r.trim().split(/\s+/))
    .filter(([group, stat]) => Number(group) === pgid && !stat!.startsWith("Z"))
    .map((r) => r.slice(2).join(" "));

it("a start whose npm start dies before tern is ready leaves no wrangler dev running", async () => {
  const stateDir = mkdtempSync(join(process.env.TERN_TEST_TMP ?? tmpdir(), "tern-e2e-"));
  const starting = startTern({ stateDir });
  starting.catch(() => {});
  // dev/start.ts names wrangler dev's process (its group's leader) the moment it spawns it.
  let pid = 0;
  const deadline = Date.now() + 60_000;
  while (!pid && Date.now() < deadline) {
    try {
      pid = Number(readFileSync(join(stateDir, "tern", "wrangler.pid"), "utf8"));
    } catch {
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  expect(pid, "wrangler dev was never spawned").toBeGreaterThan(0);
  try {
    // Its parent is npm start (dev/start.ts), a child of this process: it dies mid-start.
    const parent = Number(execFileSync("ps", ["-o", "ppid=", "-p", String(pid)], { encoding: "utf8" }).trim());
    expect(Number(execFileSync("ps", ["-o", "ppid=", "-p", String(parent)], { encoding: "utf8" }).trim())).toBe(process.pid);
    process.kill(parent, "SIGKILL");
    await expect(starting).rejects.toThrow(/before it was ready/);
    expect(running(pid)).toEqual([]);
  } finally {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {}
  }
}, 120_000);
