// The tail of a child process's stdout and stderr, for error messages and checks: processes
// that log a line per request or per message (wrangler, the bridge) would otherwise grow the
// kept text without bound over a benchmark.
import type { ChildProcess } from "node:child_process";

export interface OutputTail {
  /** What is kept: at least the last `keep` characters, at most twice that. */
  text(): string;
  /** Adds a line of the caller's own (an error it caught, say). */
  note(line: string): void;
}

export function keepTail(child: ChildProcess, keep: number): OutputTail {
  let out = "";
  const add = (d: Buffer | string) => {
    out += d;
    if (out.length > 2 * keep) out = out.slice(-keep);
  };
  child.stdout?.on("data", add);
  child.stderr?.on("data", add);
  return { text: () => out, note: (line) => add(`\n${line}\n`) };
}
