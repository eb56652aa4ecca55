// The dashboard's budget: the JavaScript a page loads before it is usable stays under 200 KB
// gzipped. Every page's <head> comes from worker/dashboard/layout.tsx; the scripts it names are
// files under dashboard/public, served as static assets.
import { mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { buildEditor, editorStale } from "../../dev/build-editor.ts";

const root = resolve(import.meta.dirname, "..", "..");

describe("the dashboard's static assets", () => {
  it("load at most 200 KB of gzipped JavaScript before a page is usable", () => {
    const layout = readFileSync(join(root, "worker/dashboard/layout.tsx"), "utf8");
    const scripts = [...layout.matchAll(/<script[^>]*src="([^"]+)"/g)].map((m) => m[1]!);
    expect(scripts).toEqual(["/dashboard/assets/app.js"]);
    const total = scripts.reduce((n, src) => n + gzipSync(readFileSync(join(root, "dashboard/public", src))).length, 0);
    expect(total).toBeLessThan(200 * 1024);
    expect(total).toBeLessThan(4 * 1024); // today: one small script
  });
});

describe("the Metrics page's chart scripts", () => {
  it("load uPlot and the page's script on that page only, within the same budget", () => {
    const metrics = readFileSync(join(root, "worker/dashboard/metrics.tsx"), "utf8");
    const scripts = [...metrics.matchAll(/<script[^>]*src="([^"]+)"/g)].map((m) => m[1]!);
    // metrics.js first: it makes navigator.language a tag Intl accepts before uPlot reads it.
    expect(scripts).toEqual(["/dashboard/assets/metrics.js", "/dashboard/assets/vendor/uplot.min.js"]);
    // uplot.min.js is copied from node_modules by `npm install` (dev/build-dashboard-assets.ts).
    const total = ["/dashboard/assets/app.js", "/dashboard/assets/locale.js", ...scripts].reduce((n, src) => n + gzipSync(readFileSync(join(root, "dashboard/public", src))).length, 0);
    expect(total).toBeLessThan(200 * 1024);
    expect(total).toBeLessThan(32 * 1024); // uPlot is about 22 KB gzipped
  });
});

describe("the passkey scripts", () => {
  it("load on the sign-in and Settings pages only, SimpleWebAuthn's bundle before the page's script, within the budget", () => {
    const pages = ["worker/dashboard/auth-pages.tsx", "worker/dashboard/routes.tsx"].map((f) => readFileSync(join(root, f), "utf8"));
    for (const page of pages) {
      const scripts = [...page.matchAll(/<script[^>]*src="([^"]+)"/g)].map((m) => m[1]!);
      expect(scripts).toEqual(["/dashboard/assets/vendor/simplewebauthn-browser.min.js", "/dashboard/assets/passkeys.js"]);
    }
    const total = ["/dashboard/assets/app.js", "/dashboard/assets/vendor/simplewebauthn-browser.min.js", "/dashboard/assets/passkeys.js"]
      .reduce((n, src) => n + gzipSync(readFileSync(join(root, "dashboard/public", src))).length, 0);
    expect(total).toBeLessThan(12 * 1024); // about 8.3 KB today
  });
});

describe("the locale the charts format with", () => {
  it("is a tag Intl accepts, whatever the browser reports", async () => {
    const { safeLocale } = (await import(join(root, "dashboard/public/dashboard/assets/locale.js"))) as { safeLocale: (tag: unknown) => string };
    // Headless Chrome on Linux under LANG=C.UTF-8 reports "en-US@posix", which Intl refuses.
    expect(() => new Intl.NumberFormat("en-US@posix")).toThrow(RangeError);
    expect(safeLocale("en-US@posix")).toBe("en-US");
    // POSIX names read as the language they name; good tags are kept as they are.
    expect(safeLocale("de_DE.UTF-8@euro")).toBe("de-DE");
    expect(safeLocale("fr-CA")).toBe("fr-CA");
    expect(safeLocale("ja-JP-u-ca-japanese")).toBe("ja-JP-u-ca-japanese");
    // Nothing usable: en-US, never a throw.
    for (const bad of ["C", "", "xx-invalid-@@", "zz-ZZ", undefined, null, 42]) expect(safeLocale(bad), String(bad)).toBe("en-US");
    for (const tag of ["en-US@posix", "de_DE.UTF-8", "C", "!!"]) expect(() => new Intl.NumberFormat(safeLocale(tag))).not.toThrow();
  });
});

describe("the editor bundle", () => {
  it("is built again by npm start once one of its own sources is newer than it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tern-editor-"));
    try {
      const paths = { outdir: join(dir, "editor"), inputsFile: join(dir, "inputs.json") };
      expect(editorStale(paths)).toBe("the editor bundle has not been built");
      expect(await buildEditor(paths)).toMatch(/editor bundled to .*KB gzipped/);
      expect(readdirSync(paths.outdir).sort()).toEqual(expect.arrayContaining(["editor.css", "editor.js"]));
      expect(readdirSync(dir).sort()).toEqual(["editor", "inputs.json"]); // no scratch folder left
      // The sources it was built from, the editor's and the worker module it shares, not node_modules.
      const inputs = JSON.parse(readFileSync(paths.inputsFile, "utf8")) as string[];
      expect(inputs).toEqual(expect.arrayContaining(["dashboard/editor/editor.ts", "worker/templates/variables.ts"]));
      expect(inputs.some((p) => p.includes("node_modules"))).toBe(false);
      expect(editorStale(paths)).toBeNull();
      // A source edited after the build (here: the bundle made older than every source).
      utimesSync(join(paths.outdir, "editor.js"), new Date(0), new Date(0));
      expect(editorStale(paths)).toMatch(/ changed$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
