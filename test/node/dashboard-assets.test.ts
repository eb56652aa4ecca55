// The dashboard's budget: the JavaScript a page loads before it is usable stays under 200 KB
// gzipped. Every page's <head> comes from worker/dashboard/layout.tsx; the scripts it names are
// files under dashboard/public, served as static assets.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";

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
    expect(scripts).toEqual(["/dashboard/assets/vendor/uplot.min.js", "/dashboard/assets/metrics.js"]);
    // uplot.min.js is copied from node_modules by `npm install` (dev/build-dashboard-assets.ts).
    const total = ["/dashboard/assets/app.js", ...scripts].reduce((n, src) => n + gzipSync(readFileSync(join(root, "dashboard/public", src))).length, 0);
    expect(total).toBeLessThan(200 * 1024);
    expect(total).toBeLessThan(32 * 1024); // uPlot is about 22 KB gzipped
  });
});
