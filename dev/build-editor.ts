// Bundles the dashboard's block editor (dashboard/editor/: TipTap and our email nodes) into
// dashboard/public/dashboard/assets/editor/, minified, for the editor's pages only. Runs on
// `npm install` (the `prepare` script); the output is git-ignored.
import { build } from "esbuild";
import { statSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const outdir = join(root, "dashboard/public/dashboard/assets/editor");
await build({
  entryPoints: [join(root, "dashboard/editor/editor.ts"), join(root, "dashboard/editor/editor.css")],
  outdir,
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2022",
  legalComments: "linked",
  logLevel: "warning",
});
const js = join(outdir, "editor.js");
const gz = gzipSync(readFileSync(js)).length;
console.log(`dashboard: editor bundled to dashboard/public/dashboard/assets/editor/ (${Math.round(statSync(js).size / 1024)} KB, ${Math.round(gz / 1024)} KB gzipped)`);
