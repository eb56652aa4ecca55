// A real headless Chromium for the dashboard's browser tests: @sparticuz/chromium ships the
// binary inside an npm package, playwright-core drives it. Screenshots go to
// test-results/dashboard/ (git-ignored) for a person to look at after a run.
import chromium from "@sparticuz/chromium";
import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { chromium as playwright, type Browser, type Page } from "playwright-core";

const root = resolve(import.meta.dirname, "..", "..");
export const SCREENSHOTS = join(root, "test-results", "dashboard");

/** @sparticuz/chromium's defaults are for a serverless function: one process, web security
 * off. A browser test needs a browser as people have it: contexts that do not share cookies
 * (single-process mixes them and dies when one closes) and same-origin rules on. */
const UNWANTED = [/^--single-process$/, /^--disable-web-security$/, /^--allow-running-insecure-content$/, /^--disable-site-isolation-trials$/, /IsolateOrigins/];

export async function launchBrowser(): Promise<Browser> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const args = chromium.args.filter((a) => !UNWANTED.some((re) => re.test(a)));
  return playwright.launch({ executablePath: await chromium.executablePath(), args, headless: true });
}

/** A full-page screenshot. Chromium paints a frame (an email's preview) only while it is in the
 * viewport, so a full-page capture showed frames below the fold empty: the viewport is made as
 * tall as the page for the capture, then put back. */
export async function shot(page: Page, name: string): Promise<void> {
  const size = page.viewportSize();
  const height = await page.evaluate("document.documentElement.scrollHeight").then(Number, () => 0);
  const taller = size !== null && height > size.height;
  if (taller) await page.setViewportSize({ width: size.width, height: Math.min(height, 12_000) });
  try {
    await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
  } finally {
    if (taller) await page.setViewportSize(size);
  }
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/** axe-core's serious and critical findings on the page as it is now (WCAG 2 A and AA). */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  // Evaluated through the DevTools protocol, so the page's CSP (script-src 'self') stays on.
  await page.evaluate(axeSource);
  const result = (await page.evaluate(`axe.run(document, { runOnly: ["wcag2a", "wcag2aa"] })`)) as { violations: AxeViolation[] };
  return result.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
}
