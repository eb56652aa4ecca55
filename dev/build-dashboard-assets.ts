// Copies uPlot's built browser files, and SimpleWebAuthn's browser bundle (the passkey
// prompts), into the dashboard's static assets, so the pages load them from tern itself
// (offline, self-hosted, no CDN). Runs on
// `npm install` (the `prepare` script); the output is git-ignored.
import { copyFileSync, mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(join(root, "package.json"));
const dist = join(dirname(require.resolve("uplot/package.json")), "dist");
const version = (JSON.parse(readFileSync(require.resolve("uplot/package.json"), "utf8")) as { version: string }).version;
const out = join(root, "dashboard/public/dashboard/assets/vendor");
mkdirSync(out, { recursive: true });
copyFileSync(join(dist, "uPlot.iife.min.js"), join(out, "uplot.min.js"));
copyFileSync(join(dist, "uPlot.min.css"), join(out, "uplot.min.css"));
// Its package exports no package.json: its entry is esm/index.js, two levels below the root.
const webauthn = join(dirname(require.resolve("@simplewebauthn/browser")), "..");
copyFileSync(join(webauthn, "dist/bundle/index.umd.min.js"), join(out, "simplewebauthn-browser.min.js"));
console.log(`dashboard: uPlot ${version} and SimpleWebAuthn's browser bundle copied to dashboard/public/dashboard/assets/vendor/`);
