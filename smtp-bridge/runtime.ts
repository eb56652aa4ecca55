// The process settings the bridge runs with, wherever it is started (Docker, systemd, by hand,
// the tests, the bench): main.ts re-executes Node with them before anything else is loaded
// (process.execve: the same process id, nothing runs twice). Measured under 100 sessions of
// 1 MB messages (docs/benchmarks.md, "SMTP bridge"):
// - glibc's allocator keeps freed memory in per-thread arenas and, for the many short-lived
//   buffers of a message (TLS records, decoded parts, request pieces), grows its heap and does
//   not give it back; one arena, large blocks mapped on their own and an earlier trim keep the
//   resident size near what is in use.
// - V8's young generation grows to 3 x 16 MB semi-spaces by default; the bridge's objects are
//   short-lived and small, so 4 MB semi-spaces cost little CPU and keep 10-30 MB off under
//   load (8 MB kept less: 204-212 MB against 167-185 MB at 4). The price: the buffers of one
//   long message (40 MB) get promoted to the old generation and wait for a full collection,
//   so its peak is about 1.1-1.2x its size instead of 0.85x (the bound is 2x).
// An environment variable set by the operator wins over these; TERN_BRIDGE_TUNING=off runs
// Node as started.
export const NODE_FLAGS: readonly string[] = ["--max-semi-space-size=4"];
export const MALLOC_ENV: Readonly<Record<string, string>> = {
  // One arena: the bridge allocates on its main thread (libuv's threads only do file I/O).
  MALLOC_ARENA_MAX: "1",
  MALLOC_MMAP_THRESHOLD_: "65536",
  MALLOC_TRIM_THRESHOLD_: "131072",
};
const MARK = "TERN_BRIDGE_TUNED";

/** Replaces this process with one that runs under NODE_FLAGS and MALLOC_ENV, unless it already
 * does, tuning is off, or this Node has no process.execve (before 22.15): then it returns. */
export function relaunchTuned(): void {
  const env = process.env;
  if (env[MARK] === "1" || (env.TERN_BRIDGE_TUNING ?? "").toLowerCase() === "off") return;
  const execve = (process as { execve?: (file: string, args: string[], env: Record<string, string | undefined>) => never }).execve;
  if (typeof execve !== "function" || !process.argv[1]) return;
  const flags = NODE_FLAGS.filter((f) => !process.execArgv.some((a) => a.split("=")[0] === f.split("=")[0]));
  execve(process.execPath, [process.execPath, ...process.execArgv, ...flags, ...process.argv.slice(1)], { ...MALLOC_ENV, ...env, [MARK]: "1" });
}
