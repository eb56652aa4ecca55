// Builds the JavaScript the bridge runs as a service: every module of smtp-bridge/ with its
// types stripped (node:module's stripTypeScriptTypes, the same transform Node applies when it
// runs .ts itself, so positions and stack traces match the sources) and its relative imports
// pointed at the .js files, into smtp-bridge/dist/. Running the sources directly works too,
// but loads Node's TypeScript stripper (a WebAssembly compiler) into the service: about 25 MB
// of memory for nothing. Run at install time: `node smtp-bridge/build.ts` (also `npm install`'s
// prepare step, the Dockerfile, and the test and bench helpers before they start the bridge).
import { randomUUID } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { stripTypeScriptTypes } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

export const SOURCE_DIR = import.meta.dirname;
export const DIST_DIR = join(SOURCE_DIR, "dist");

/** One module's JavaScript: types stripped, `./x.ts` specifiers (static and dynamic imports) made `./x.js`. */
export function compileModule(source: string): string {
  const js = stripTypeScriptTypes(source, { mode: "strip" });
  return js.replace(/((?:\bfrom|\bimport)\s*\(?\s*["'])(\.{1,2}\/[^"'\n]+)\.ts(["'])/g, "$1$2.js$3");
}

/** Writes dist/ (each file replaced whole, so a running bridge never reads half a file); returns the entry point. */
export function buildBridge(outDir: string = DIST_DIR): string {
  mkdirSync(outDir, { recursive: true });
  const modules = readdirSync(SOURCE_DIR).filter((n) => n.endsWith(".ts") && !n.endsWith(".d.ts") && n !== "build.ts");
  // A module that no longer exists leaves no stale copy behind.
  for (const name of readdirSync(outDir)) if (name.endsWith(".js") && !modules.includes(name.replace(/\.js$/, ".ts"))) rmSync(join(outDir, name));
  for (const name of modules) {
    const target = join(outDir, name.replace(/\.ts$/, ".js"));
    const js = compileModule(readFileSync(join(SOURCE_DIR, name), "utf8"));
    const current = (() => {
      try {
        return readFileSync(target, "utf8");
      } catch {
        return null;
      }
    })();
    if (current === js) continue;
    const temporary = `${target}.${process.pid}.${randomUUID()}.tmp`; // builds may run side by side
    writeFileSync(temporary, js);
    renameSync(temporary, target);
  }
  return join(outDir, "main.js");
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  console.log(`tern-smtp-bridge: built ${buildBridge()}`);
}
