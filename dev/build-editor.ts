// Bundles the dashboard's block editor (dashboard/editor/: TipTap and our email nodes) into
// dashboard/public/dashboard/assets/editor/, minified, for the editor's pages only. Runs on
// `npm install` (the `prepare` script); the output is git-ignored. `npm start` (dev/start.ts)
// builds it again when one of the bundle's own source files changed since, so an edit to the
// editor is served without a reinstall.
import { build } from "esbuild";
import { mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
/** Where the bundle goes, and where the list of its source files outside node_modules (which
 * only `npm install` changes, and it rebuilds) is kept, as esbuild's metafile named them: out
 * of outdir, which is served. Other places only in tests. */
export interface EditorPaths {
  outdir: string;
  inputsFile: string;
}
const DEFAULT_PATHS: EditorPaths = {
  outdir: join(root, "dashboard/public/dashboard/assets/editor"),
  inputsFile: join(root, "node_modules/.cache/tern/editor-inputs.json"),
};

/** Builds the bundle into a scratch folder and moves each file into place whole, so a tern
 * already running (or a second start) never serves half a file. */
export async function buildEditor({ outdir, inputsFile }: EditorPaths = DEFAULT_PATHS): Promise<string> {
  const scratch = `${outdir}.${process.pid}.tmp`;
  rmSync(scratch, { recursive: true, force: true });
  try {
    const result = await build({
      absWorkingDir: root,
      entryPoints: [join(root, "dashboard/editor/editor.ts"), join(root, "dashboard/editor/editor.css")],
      outdir: scratch,
      bundle: true,
      minify: true,
      format: "esm",
      target: "es2022",
      legalComments: "linked",
      logLevel: "warning",
      metafile: true,
    });
    mkdirSync(outdir, { recursive: true });
    for (const file of Object.keys(result.metafile.outputs)) {
      const name = file.slice(file.lastIndexOf("/") + 1);
      renameSync(join(scratch, name), join(outdir, name));
    }
    const own = Object.keys(result.metafile.inputs).filter((p) => !p.includes("node_modules/"));
    mkdirSync(dirname(inputsFile), { recursive: true });
    writeFileSync(inputsFile, JSON.stringify(own));
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  const js = join(outdir, "editor.js");
  const gz = gzipSync(readFileSync(js)).length;
  return `dashboard: editor bundled to ${relative(root, outdir)}/ (${Math.round(statSync(js).size / 1024)} KB, ${Math.round(gz / 1024)} KB gzipped)`;
}

/** Why the bundle needs building again (missing, or a source newer than it), or null. */
export function editorStale({ outdir, inputsFile }: EditorPaths = DEFAULT_PATHS): string | null {
  let built: number;
  let inputs: string[];
  try {
    built = statSync(join(outdir, "editor.js")).mtimeMs;
    inputs = JSON.parse(readFileSync(inputsFile, "utf8")) as string[];
  } catch {
    return "the editor bundle has not been built";
  }
  for (const input of inputs) {
    let changed: number;
    try {
      changed = statSync(join(root, input)).mtimeMs;
    } catch {
      return `${input} is gone`;
    }
    if (changed > built) return `${input} changed`;
  }
  return null;
}

if (import.meta.main) console.log(await buildEditor());
