// The JavaScript the bridge runs as a service (smtp-bridge/build.ts) and the process settings it
// runs under (smtp-bridge/runtime.ts): the build is the sources with their types stripped and
// their imports pointed at the built files, and a bridge started as systemd or Docker starts it
// runs that build, in one process, with the settings in force.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { buildBridge, compileModule, DIST_DIR, SOURCE_DIR } from "../../smtp-bridge/build.ts";
import { MALLOC_ENV, NODE_FLAGS } from "../../smtp-bridge/runtime.ts";
import { startBridgeProcess } from "../support/bridge.ts";
import { freePort } from "../support/processes.ts";

describe("the bridge's build", () => {
  it("strips types and points relative imports, static and dynamic, at the .js files; packages and node: stay", () => {
    const js = compileModule(
      [
        'import type { A } from "./a.ts";',
        'import { b, type C } from "./b.ts";',
        'import { x } from "../x/y.ts";',
        'import { SMTPServer } from "smtp-server";',
        'import { join } from "node:path";',
        'const { d } = await import("./d.ts");',
        "export const n: number = 1 as number;",
        "const s: string = './not-an-import.ts';",
      ].join("\n"),
    );
    expect(js).not.toContain("./a.ts");
    expect(js).toContain('from "./b.js"');
    expect(js).toContain('from "../x/y.js"');
    expect(js).toContain('from "smtp-server"');
    expect(js).toContain('from "node:path"');
    expect(js).toContain('await import("./d.js")');
    expect(js).toContain("'./not-an-import.ts'");
    expect(js).not.toMatch(/: number|as number|type C/);
    // Positions are kept (types become blanks), so stack traces point at the sources' lines.
    expect(js.split("\n").length).toBe(8);
  });

  it("builds every module of smtp-bridge/, and no built file imports a .ts file", () => {
    const entry = buildBridge();
    expect(entry).toBe(join(DIST_DIR, "main.js"));
    const sources = readdirSync(SOURCE_DIR).filter((n) => n.endsWith(".ts") && n !== "build.ts").map((n) => n.replace(/\.ts$/, ".js")).sort();
    expect(readdirSync(DIST_DIR).filter((n) => n.endsWith(".js")).sort()).toEqual(sources);
    for (const name of sources) expect(readFileSync(join(DIST_DIR, name), "utf8"), name).not.toMatch(/(from|import)\s*\(?\s*["']\.{1,2}\/[^"']+\.ts["']/);
  });

  it.runIf(process.platform === "linux")("runs the build in one process (the same pid) with runtime.ts's flags and allocator settings", async () => {
    const b = await startBridgeProcess({ apiUrl: `http://127.0.0.1:${await freePort()}`, env: { TERN_BRIDGE_LOG_LEVEL: "warn" } });
    try {
      const pid = b.child.pid!;
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      expect(cmdline).toEqual(expect.arrayContaining([...NODE_FLAGS, join(DIST_DIR, "main.js")]));
      const environ = new Map(readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]));
      for (const [k, v] of Object.entries(MALLOC_ENV)) expect(environ.get(k), k).toBe(v);
      const health = (await (await fetch(b.healthUrl)).json()) as { memory: { heapTotal: number } };
      expect(health.memory.heapTotal).toBeGreaterThan(0);
    } finally {
      await b.stop("SIGTERM");
    }
  });
});
