// The floor of part 1 of `npm run bench`: a minimal Worker (bench/floor/) under `wrangler dev`,
// started the way dev/start.ts starts tern (migrations applied with `wrangler d1 migrations
// apply --local`, local state in a temporary directory, X_LOCAL_OBSERVABILITY=false and
// WRANGLER_SEND_METRICS=false, wrangler dev in its own process group), measured beside tern in
// the same rounds. Its `POST /write` runs exactly the D1 batch tern's accept path runs for a plain
// send, and nothing else; before it starts, checkFloorStatements() runs tern's own accept code
// against a recording D1 (bench/floor/capture.ts) and refuses to go on if the floor's statements
// differ. stopFloor() is idempotent and is called on every exit path of bench/run.ts.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { isDeepStrictEqual } from "node:util";
import { WRANGLER, d1Execute, d1Target, runWrangler, sqlString, wranglerEnv } from "../ops/d1.ts";
import { keepTail } from "../test/support/output-tail.ts";
import { sampleCpu, type CpuSample } from "./cpu.ts";
import { freePort } from "../test/support/processes.ts";
import { EMAIL_BY_ID_SQL, FLOOR_ACCOUNT, FLOOR_DOMAIN, FLOOR_DOMAIN_NAME, FLOOR_PLAN, sendBatch, type Statement } from "./floor/statements.ts";

const root = resolve(import.meta.dirname, "..");
const CONFIG = join(root, "bench", "floor", "wrangler.toml");
const START_TIMEOUT_MS = 60_000;

export interface FloorProcess {
  url: string;
  port: number;
  /** wrangler dev's pid: the root of the floor's process tree (bench/cpu.ts samples it). */
  pid: number;
  stateDir: string;
  output(): string;
  /** wrangler dev's process (its output, for bench/consumer.ts's queue lines). */
  child: ChildProcess;
}

interface D1Call {
  method: string;
  statements: Statement[];
}

let running: { floor: FloorProcess; child: ChildProcess } | null = null;
let stopping: Promise<void> | null = null;
/** Set when stopFloor is called while no floor runs (the bench stopping, maybe in the middle of
 * startFloor): no floor starts after it. */
let closed = false;
/** The state directory of a floor being started, removed by stopFloor if it comes first. */
let starting: string | null = null;

/** Checks that the floor sends what tern sends: runs tern's recordEmails and findEmail query
 * (through bench/floor/capture.ts) against a recording D1 and compares the calls, SQL text and
 * parameters with bench/floor/statements.ts. Returns tern's statements; throws on a difference. */
export async function checkFloorStatements(): Promise<{ send: Statement[]; read: Statement }> {
  // Imported by path: it is Worker code (type-checked with tsconfig.json), run here by Node.
  const capture = (await import(pathToFileURL(join(root, "bench", "floor", "capture.ts")).href)) as {
    captureTern(now?: number): Promise<{ emailId: string; send: D1Call[]; read: D1Call[] }>;
  };
  const now = Date.now();
  const tern = await capture.captureTern(now);
  const show = (x: unknown) => JSON.stringify(x, null, 1);
  if (tern.send.length !== 1 || tern.send[0]!.method !== "batch") {
    throw new Error(`tern's accept path no longer makes exactly one D1 batch for a plain send; the floor is out of date:\n${show(tern.send)}`);
  }
  const send = tern.send[0]!.statements;
  // The event's id is made inside recordEmails (a UUIDv7 like the floor's): take tern's.
  const expected = sendBatch(tern.emailId, String(send[2]?.params[0]), now);
  if (!isDeepStrictEqual(send, expected)) {
    throw new Error(`the floor's batch (bench/floor/statements.ts) differs from tern's accept path:\ntern:\n${show(send)}\nfloor:\n${show(expected)}`);
  }
  const read = tern.read[0]?.statements[0];
  if (tern.read.length !== 1 || tern.read[0]!.method !== "raw" || read?.sql !== EMAIL_BY_ID_SQL || read.params[1] !== FLOOR_ACCOUNT || read.params.length !== 2) {
    throw new Error(`the floor's read (bench/floor/statements.ts) differs from tern's GET /emails/<id>:\n${show(tern.read)}`);
  }
  return { send, read };
}

/** Runs wrangler against the floor's configuration and local state. */
function floorWrangler(args: string[], persistTo: string): void {
  runWrangler([...args, ...d1Target(false, persistTo), "--config", CONFIG]);
}

/** vars: passed with `--var` (RELAY_PORT for the delivery floor, bench/floor/delivery.ts). */
export async function startFloor(log: (line: string) => void, vars: Record<string, string> = {}): Promise<FloorProcess> {
  if (running) return running.floor;
  if (closed) throw new Error("the bench is stopping");
  const stateDir = mkdtempSync(join(tmpdir(), "tern-floor-"));
  starting = stateDir;
  const persistTo = join(stateDir, "wrangler");
  let port: number;
  let child: ChildProcess;
  try {
    floorWrangler(["d1", "migrations", "apply", "DB"], persistTo);
    // The account the emails belong to (emails.account_id references accounts) and its domain.
    const now = Date.now();
    d1Execute([...d1Target(false, persistTo), "--config", CONFIG], [
      `INSERT INTO accounts (id, name, plan, rate_limit, created_at) VALUES (${sqlString(FLOOR_ACCOUNT)}, 'Floor account', ${sqlString(FLOOR_PLAN)}, 1000000, ${now});`,
      `INSERT INTO domains (id, account_id, name, region, status, created_at) VALUES (${sqlString(FLOOR_DOMAIN)}, ${sqlString(FLOOR_ACCOUNT)}, ${sqlString(FLOOR_DOMAIN_NAME)}, 'us-east-1', 'verified', ${now});`,
    ]);
    port = await freePort();
    if (closed) throw new Error("the bench is stopping");
    child = spawn(
      process.execPath,
      [WRANGLER, "dev", "--config", CONFIG, "--ip", "127.0.0.1", "--port", String(port), "--persist-to", persistTo, "--show-interactive-dev-session=false",
        ...Object.entries(vars).flatMap(([k, v]) => ["--var", `${k}:${v}`])],
      { cwd: root, env: wranglerEnv(), stdio: ["ignore", "pipe", "pipe"], detached: true },
    );
  } catch (err) {
    rmSync(stateDir, { recursive: true, force: true });
    throw err;
  } finally {
    starting = null;
  }
  const tail = keepTail(child, 64 * 1024); // wrangler logs a line per request
  child.on("error", (err) => tail.note(`the floor's wrangler dev could not run: ${err.message}`));
  const floor: FloorProcess = { url: `http://127.0.0.1:${port}`, port, pid: child.pid!, stateDir, output: tail.text, child };
  running = { floor, child };
  stopping = null;
  log(`floor: wrangler dev starting on ${floor.url} (pid ${floor.pid})`);

  const deadline = Date.now() + START_TIMEOUT_MS;
  try {
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the floor's wrangler dev exited (${child.exitCode ?? child.signalCode}):\n${tail.text()}`);
      const ok = await fetch(`${floor.url}/health`, { signal: AbortSignal.timeout(2_000) }).then((r) => r.ok, () => false);
      if (ok) break;
      if (Date.now() > deadline) throw new Error(`the floor's wrangler dev did not answer within ${START_TIMEOUT_MS / 1000} s:\n${tail.text()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    // Each route once, as the bench will call it.
    const write = await fetch(`${floor.url}/write`, { method: "POST", signal: AbortSignal.timeout(10_000) });
    const written = (await write.json().catch(() => ({}))) as { id?: string; used?: number };
    if (write.status !== 200 || typeof written.id !== "string" || written.used !== 1) throw new Error(`the floor's POST /write answered ${write.status} ${JSON.stringify(written)}:\n${tail.text().slice(-4000)}`);
    const read = await fetch(`${floor.url}/read`, { signal: AbortSignal.timeout(10_000) });
    const found = (await read.json().catch(() => ({}))) as { found?: boolean };
    if (read.status !== 200 || found.found !== false) throw new Error(`the floor's GET /read answered ${read.status} ${JSON.stringify(found)}`);
  } catch (err) {
    await stopFloor();
    throw err;
  }
  return floor;
}

/** Stops the floor's wrangler dev (its whole process group) and removes its state; safe to call
 * when it is not running, and more than once. */
export function stopFloor(log?: (line: string) => void): Promise<void> {
  const r = running;
  if (!r) {
    closed = true;
    if (starting) rmSync(starting, { recursive: true, force: true });
    return stopping ?? Promise.resolve();
  }
  return (stopping ??= (async () => {
    const { child, floor } = r;
    const group = (signal: NodeJS.Signals) => {
      try {
        process.kill(-floor.pid, signal);
      } catch {}
    };
    const exited = new Promise<void>((res) => (child.exitCode !== null || child.signalCode !== null ? res() : child.once("exit", () => res())));
    group("SIGTERM");
    const hard = setTimeout(() => group("SIGKILL"), 5_000);
    await exited;
    clearTimeout(hard);
    // The group's other processes (workerd) may outlive wrangler for a moment.
    for (let i = 0; i < 100; i++) {
      try {
        process.kill(-floor.pid, 0);
      } catch {
        break;
      }
      if (i === 60) group("SIGKILL");
      await new Promise((res) => setTimeout(res, 50));
    }
    rmSync(floor.stateDir, { recursive: true, force: true });
    running = null;
    log?.(`floor stopped (exit ${child.exitCode ?? child.signalCode})`);
  })());
}

/** CPU so far of the delivery floor's phase: the floor's own processes, and the relay it sends
 * to, which runs in tern's tree (dev/start.ts) and is sampled from there. */
export function floorDeliveryCpu(floor: FloorProcess, tern: { pid: number | undefined; port: number }): CpuSample {
  const own = sampleCpu(floor.pid, floor.port);
  const relay = sampleCpu(tern.pid, tern.port);
  return own && relay ? { ...own, "start+relay": relay["start+relay"] } : null;
}
