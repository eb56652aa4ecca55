// Where the CPU goes during a load run: user+system time of each process of the tern tree
// and of the load generator itself, read from /proc. `wrangler dev` runs two workerd
// processes: a proxy on the public port (it forwards every request, for live reload) and the
// runtime of the Worker itself (with local D1, Queues and R2). Linux only; elsewhere every
// figure is null and the bench goes on.
import { readdirSync, readFileSync } from "node:fs";
import { execFileSync, spawnSync } from "node:child_process";
import { runLoad, type LoadOptions, type LoadResult } from "./load.ts";

export type Part = "worker runtime" | "dev proxy" | "wrangler" | "start+relay" | "generator" | "other";
export const PARTS: Part[] = ["worker runtime", "dev proxy", "wrangler", "start+relay", "generator", "other"];
export type CpuSample = Record<Part, number> | null; // CPU seconds so far

let ticks = 100;
try {
  ticks = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
} catch {}

function stat(pid: number): { ppid: number; comm: string; state: string; cpu: number } | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    // comm is in parentheses and may hold spaces: parse after the last ")".
    const close = s.lastIndexOf(")");
    const comm = s.slice(s.indexOf("(") + 1, close);
    const f = s.slice(close + 2).split(" ");
    // after comm: state(0) ppid(1) ... utime(11) stime(12)
    return { ppid: Number(f[1]), comm, state: f[0] ?? "", cpu: (Number(f[11]) + Number(f[12])) / ticks };
  } catch {
    return null;
  }
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ");
  } catch {
    return "";
  }
}

/** CPU seconds used so far by `ternPid` and its descendants (by part) and by this process;
 * `publicPort` is the API's port, which the dev proxy's workerd listens on. `ternPid` is
 * dev/start.ts for tern, or wrangler dev itself for the floor (bench/floor.ts), whose tree has
 * no "start+relay". */
export function sampleCpu(ternPid: number | undefined, publicPort: number): CpuSample {
  if (process.platform !== "linux" || ternPid === undefined) return null;
  const table = processTable();
  if (!table) return null;
  const { info, children } = table;
  const out: Record<Part, number> = { "worker runtime": 0, "dev proxy": 0, wrangler: 0, "start+relay": 0, generator: 0, other: 0 };
  out.generator = info.get(process.pid)?.cpu ?? 0;
  const queue = [ternPid];
  while (queue.length) {
    const pid = queue.shift()!;
    const s = info.get(pid);
    if (!s) continue;
    const cmd = cmdline(pid);
    const isWrangler = /node_modules\/wrangler\//.test(cmd) && s.comm.startsWith("node");
    // The root is dev/start.ts for tern; for the floor (bench/floor.ts) it is wrangler dev itself.
    const part: Part =
      pid === ternPid && !isWrangler
        ? "start+relay"
        : s.comm === "workerd"
          ? cmd.includes(`entry=127.0.0.1:${publicPort} `) ? "dev proxy" : "worker runtime"
          : isWrangler
            ? "wrangler"
            : "other";
    out[part] += s.cpu;
    queue.push(...(children.get(pid) ?? []));
  }
  return out;
}

interface ProcessTable {
  info: Map<number, { ppid: number; comm: string; state: string; cpu: number }>;
  children: Map<number, number[]>;
}

function processTable(): ProcessTable | null {
  let pids: number[];
  try {
    pids = readdirSync("/proc").filter((n) => /^\d+$/.test(n)).map(Number);
  } catch {
    return null;
  }
  const info = new Map<number, { ppid: number; comm: string; state: string; cpu: number }>();
  for (const pid of pids) {
    const s = stat(pid);
    if (s) info.set(pid, s);
  }
  const children = new Map<number, number[]>();
  for (const [pid, s] of info) children.set(s.ppid, [...(children.get(s.ppid) ?? []), pid]);
  return { info, children };
}

/** `pid` and all its descendants (Linux; [pid] elsewhere). */
export function processTree(pid: number): number[] {
  const table = processTable();
  if (!table) return [pid];
  const out: number[] = [];
  const queue = [pid];
  while (queue.length) {
    const p = queue.shift()!;
    if (!table.info.has(p)) continue;
    out.push(p);
    queue.push(...(table.children.get(p) ?? []));
  }
  return out;
}

/** Pins each process (all its threads; threads and children it starts later inherit this) to
 * the CPUs in `cpus` (taskset's list form, "0" or "0-1"). Throws when taskset fails. */
export function pinProcesses(pids: number[], cpus: string): void {
  for (const pid of pids) {
    const r = spawnSync("taskset", ["-a", "-p", "-c", cpus, String(pid)], { encoding: "utf8" });
    // A process may end between listing and pinning (a short-lived helper): only a live one
    // counts (a zombie's threads are gone: taskset fails on it).
    const state = stat(pid)?.state;
    if (r.status !== 0 && state !== undefined && state !== "Z" && state !== "X") throw new Error(`taskset -a -p -c ${cpus} ${pid}: ${(r.stderr || r.error?.message || "").trim()}`);
  }
}

/** CPU seconds (user + system) process `pid` has used so far; NaN once it is gone. */
export function processCpuSeconds(pid: number): number {
  return stat(pid)?.cpu ?? NaN;
}

export function cpuDelta(a: CpuSample, b: CpuSample): CpuSample {
  if (!a || !b) return null;
  const d = {} as Record<Part, number>;
  for (const p of PARTS) d[p] = Math.max(0, b[p] - a[p]);
  return d;
}

/** Runs a load with the CPU of tern's processes sampled at the edges of its measured window. */
export async function measuredLoad(ternPid: number | undefined, publicPort: number, options: LoadOptions): Promise<{ result: LoadResult; cpu: CpuSample }> {
  let before: CpuSample = null;
  let after: CpuSample = null;
  const onWindow = (edge: "start" | "end") => {
    if (edge === "start") before = sampleCpu(ternPid, publicPort);
    else after = sampleCpu(ternPid, publicPort);
  };
  const result = await runLoad({ ...options, onWindow });
  return { result, cpu: cpuDelta(before, after) };
}
