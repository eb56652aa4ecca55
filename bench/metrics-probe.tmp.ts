import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { d1Target, runWrangler, WRANGLER, wranglerEnv } from "../ops/d1.ts";
import { freePort } from "../test/support/processes.ts";
const root = resolve(import.meta.dirname, "..");
const CONFIG = join(root, "bench", "metrics", "wrangler.toml");
const state = mkdtempSync(join(tmpdir(), "tern-probe-"));
const persistTo = join(state, "wrangler");
runWrangler(["d1", "migrations", "apply", "DB", ...d1Target(false, persistTo), "--config", CONFIG]);
const port = await freePort();
const child = spawn(process.execPath, [WRANGLER, "dev", "-c", CONFIG, "--ip", "127.0.0.1", "--port", String(port), "--persist-to", persistTo, "--show-interactive-dev-session=false"], { cwd: root, env: wranglerEnv(), stdio: "ignore", detached: true });
const url = `http://127.0.0.1:${port}`;
for (;;) { if (await fetch(`${url}/health`).then((r) => r.ok, () => false)) break; await new Promise((r) => setTimeout(r, 200)); }
await fetch(`${url}/setup`, { method: "POST" });
const now = Date.now(); const iso = (t: number) => new Date(t).toISOString();
const cases: Record<string, string> = {
  pk: "/pk",
  h1: `/metrics?start_date=${iso(now - 3600000)}&dimensions=period&granularity=hourly`,
  d30tot: `/metrics?start_date=${iso(now - 30 * 86400000)}`,
  d30utc: `/metrics?start_date=${iso(now - 30 * 86400000)}&dimensions=period`,
  d30ny: `/metrics?start_date=${iso(now - 30 * 86400000)}&dimensions=period&timezone=America/New_York`,
  d30nyM: `/metrics?start_date=${iso(now - 30 * 86400000)}&dimensions=period&timezone=America/New_York&metrics=sent`,
};
for (const [k, u] of Object.entries(cases)) {
  const xs: number[] = [];
  for (let i = 0; i < 40; i++) { const t = performance.now(); await (await fetch(url + u)).text(); xs.push(performance.now() - t); }
  xs.sort((a, b) => a - b);
  console.log(k, xs[20]!.toFixed(1));
}
process.kill(-child.pid!, "SIGTERM");
rmSync(state, { recursive: true, force: true });
