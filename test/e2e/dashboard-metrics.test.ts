// The Metrics page and an email's Insights in a real headless Chromium against `npm start`:
// mail sent through the API to the simulator shows up as the same totals the REST API
// answers, drawn by uPlot; an email's page lists its deliverability checks. Screenshots:
// test-results/dashboard/.
import type { Browser, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { axeViolations, launchBrowser, shot } from "../support/browser.ts";
import { startTern, type TernProcess } from "../support/processes.ts";

let tern: TernProcess;
let browser: Browser;

beforeAll(async () => {
  // A paid plan: the health check below sends 100 more emails than the free daily cap allows.
  [tern, browser] = await Promise.all([startTern({ env: { TERN_DEV_PLAN: "pro_50k" } }), launchBrowser()]);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await tern?.stop();
});

afterEach((ctx) => {
  if (ctx.task.result?.state === "fail") console.log(tern.output().slice(-6000));
});

const POLL = { timeout: 30_000, interval: 500 };

const api = (path: string, init: RequestInit = {}) =>
  fetch(`${tern.url}${path}`, { ...init, headers: { authorization: `Bearer ${tern.apiKey}`, "content-type": "application/json", ...(init.headers ?? {}) } });

async function send(to: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await api("/emails", { method: "POST", body: JSON.stringify({ from: `Tern <hello@${tern.domain}>`, to, subject: `Metrics proof for ${to}`, html: "<p>Hello from the metrics test</p>", ...extra }) });
  expect(res.status).toBe(200);
  return ((await res.json()) as { id: string }).id;
}

type Totals = Record<string, number>;

async function signIn(page: Page): Promise<void> {
  const dev = JSON.parse(await import("node:fs").then((fs) => fs.readFileSync(`${tern.stateDir}/tern/dev-user.json`, "utf8"))) as { email: string; password: string };
  await page.goto(`${tern.url}/dashboard/sign-in`);
  await page.getByLabel("Email").fill(dev.email);
  await page.getByLabel("Password").fill(dev.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL("**/dashboard/emails");
}

/** The number a card shows, as a number. */
async function card(page: Page, metric: string): Promise<number> {
  return Number((await page.locator(`.card[data-metric=${metric}] .card-value`).innerText()).replace(/,/g, ""));
}

async function cardRate(page: Page, metric: string): Promise<number> {
  const text = await page.locator(`.card-rate[data-metric=${metric}]`).innerText();
  return Number(text.match(/([\d.]+)%/)![1]) / 100;
}

describe("the Metrics page and email insights", () => {
  it("shows the API's totals as cards, draws the charts, the account health and an email's insights", async () => {
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    // A locale as some browsers report it: headless Chrome on Linux under LANG=C.UTF-8 says
    // "en-US@posix", which Intl (and so uPlot, as it loads) refuses. The charts still draw.
    await page.addInitScript(`Object.defineProperty(navigator, "language", { value: "en-US@posix", configurable: true })`);
    const scriptErrors: string[] = [];
    page.on("pageerror", (err) => scriptErrors.push(err.message));
    // An email's preview loads the images its HTML names (example.org here), which this
    // machine cannot resolve: that is the mail's content, not the page's script failing.
    page.on("console", (m) => { if (m.type() === "error" && !m.text().includes("net::ERR_NAME_NOT_RESOLVED")) scriptErrors.push(m.text()); });
    await signIn(page);

    // Before any mail: the empty state says what to do.
    await page.goto(`${tern.url}/dashboard/metrics`);
    expect(await page.locator("main").innerText()).toContain("No email sent in the last 7 days.");
    await shot(page, "30-metrics-empty");

    const sim = "simulator.tern.test";
    const ids = await Promise.all([
      send(`delivered+1@${sim}`), send(`delivered+2@${sim}`), send(`delivered+3@${sim}`),
      send(`bounced@${sim}`), send(`complained@${sim}`),
      // A message with problems the insights name: a shortener link, link text showing another URL.
      send(`delivered+4@${sim}`, { subject: "FREE OFFER!!! ACT NOW", html: '<p>Hi</p><a href="https://bit.ly/x">https://example.org/offer</a><img src="https://example.org/a.png">' }),
    ]);

    const today = new Date().toISOString().slice(0, 10);
    const weekAgo = new Date(Date.now() - 6 * 86_400_000).toISOString().slice(0, 10);
    const query = `start_date=${weekAgo}&end_date=${today}&granularity=daily`;
    let totals: Totals = {};
    await expect.poll(async () => {
      totals = ((await (await api(`/emails/metrics?${query}`)).json()) as { totals: Totals }).totals;
      return [totals.received, totals.delivered, totals.bounced, totals.complained];
    }, POLL).toEqual([6, 5, 1, 1]);

    await page.goto(`${tern.url}/dashboard/metrics`);
    for (const m of ["received", "sent", "delivered", "bounced", "complained", "opened", "clicked"]) expect(await card(page, m), m).toBe(totals[m]);
    for (const r of ["delivery_rate", "bounce_rate", "complaint_rate"]) expect(await cardRate(page, r)).toBeCloseTo(totals[r]!, 4);
    // uPlot drew both charts: canvases with painted pixels.
    await page.waitForLoadState("load");
    // (A string: the test's TypeScript has no DOM types.)
    await expect.poll(async () => [await page.locator(".chart canvas").count(), scriptErrors], POLL).toEqual([2, []]);
    const painted = (await page.evaluate(`[...document.querySelectorAll(".chart canvas")].map((c) => {
      const px = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < px.length; i += 4) if (px[i] > 0) n++;
      return n;
    })`)) as number[];
    expect(painted.length).toBe(2);
    for (const n of painted) expect(n).toBeGreaterThan(500);
    const health = await page.locator("section[aria-labelledby=health]").innerText();
    expect(health).toMatch(/Bounce rate[\s\S]*limit 4%/);
    expect(health).toMatch(/Complaint rate[\s\S]*limit 0\.08%/);
    expect(health).toContain("Sending is on.");
    expect(scriptErrors).toEqual([]);
    await shot(page, "31-metrics");
    expect(await axeViolations(page)).toEqual([]);
    // The charts take the dark theme's colours when drawn under it.
    await page.emulateMedia({ colorScheme: "dark" });
    await page.reload();
    await expect.poll(() => page.locator(".chart canvas").count(), POLL).toBe(2);
    await shot(page, "34-metrics-dark");
    expect(await axeViolations(page)).toEqual([]);
    await page.emulateMedia({ colorScheme: "light" });

    // The filter form is a plain GET: hourly periods, the same totals.
    await page.getByLabel("Granularity").selectOption("hourly");
    await page.getByRole("button", { name: "Show" }).click();
    await page.waitForURL("**/dashboard/metrics?*granularity=hourly*");
    expect(await card(page, "delivered")).toBe(totals.delivered);
    await page.getByText(/^Periods with email/).click();
    expect(await page.locator("#periods tbody tr").count()).toBeGreaterThanOrEqual(1);
    await shot(page, "32-metrics-hourly");
    // Periods in another timezone (+05:30): the same mail, days counted on Kolkata's clock.
    // (The form keeps the dates as typed, read on the new clock; without dates, the last 7 days there.)
    await page.goto(`${tern.url}/dashboard/metrics?timezone=Asia/Kolkata`);
    const kolkataToday = new Intl.DateTimeFormat("en-CA", { timeZone: "Asia/Kolkata" }).format(new Date());
    expect(await page.getByLabel("To", { exact: true }).inputValue()).toBe(kolkataToday);
    expect(await page.getByLabel("Timezone").inputValue()).toBe("Asia/Kolkata");
    expect(await card(page, "delivered")).toBe(totals.delivered);
    await page.getByText(/^Periods with email/).click();
    expect(await page.locator("#periods thead").innerText()).toContain("Asia/Kolkata");
    // A range before any mail, and bad input: each says what to do.
    await page.goto(`${tern.url}/dashboard/metrics?timezone=Mars/Olympus`);
    expect(await page.getByRole("alert").innerText()).toContain("timezone");
    await page.goto(`${tern.url}/dashboard/metrics?start_date=2020-01-01&end_date=2020-01-07`);
    expect(await page.locator("main").innerText()).toContain("No email in this range.");
    await page.goto(`${tern.url}/dashboard/metrics?start_date=2026-13-01`);
    expect(await page.getByRole("alert").innerText()).toContain("start_date");

    // An email's Insights: the same checks as GET /emails/{id}/insights.
    const id = ids[5]!;
    const insights = ((await (await api(`/emails/${id}/insights`)).json()) as { data: { id: string; status: string; title: string }[] }).data;
    const problems = insights.filter((i) => i.status !== "passed");
    expect(problems.map((i) => i.id)).toContain("url_shortener");
    await page.goto(`${tern.url}/dashboard/emails/${id}`);
    await page.getByRole("link", { name: "Insights" }).click();
    const section = page.locator("section[aria-labelledby=insights]");
    for (const p of problems) {
      const li = section.locator(`li[data-insight=${p.id}]`);
      expect(await li.innerText()).toContain(p.title);
      expect(await li.locator(".badge").innerText()).toBe(p.status);
    }
    expect(await section.locator("li[data-insight]").count()).toBe(insights.length);
    // The preview shows the email (its image, from a host this machine cannot reach, is not
    // waited for).
    await page.frameLocator("iframe.preview").getByText("Hi", { exact: true }).waitFor();
    await shot(page, "33-email-insights");
    expect(await axeViolations(page)).toEqual([]);

    // Past the bounce limit with enough volume (100 recipients): the health block says so and
    // what to do; this tern does not pause (HEALTH_PAUSE is off), and says that too.
    const batch = Array.from({ length: 100 }, (_, i) => ({ from: `Tern <hello@${tern.domain}>`, to: `bounced+${i}@${sim}`, subject: "bounce", text: "bounce" }));
    expect((await api("/emails/batch", { method: "POST", body: JSON.stringify(batch) })).status).toBe(200);
    await expect.poll(async () => ((await (await api("/account/health")).json()) as { status: string }).status, POLL).toBe("over_limit");
    await page.goto(`${tern.url}/dashboard/metrics`);
    const over = page.locator("section[aria-labelledby=health]");
    expect(await over.locator("h2 .badge").innerText()).toBe("over limit");
    expect(await over.innerText()).toContain("The bounce and complaint rates are over their limits.");
    expect(await over.innerText()).toContain("does not pause sending");
    await shot(page, "35-metrics-over-limit");

    // On a phone (390 px): the charts and the bounced email's page fit the screen's width, and
    // the timeline says what happened in words, the recorded data folded under it.
    await page.setViewportSize({ width: 390, height: 844 });
    const overflow = () => page.evaluate("document.scrollingElement.scrollWidth - innerWidth");
    await page.reload();
    await expect.poll(() => page.locator(".chart canvas").count(), POLL).toBe(2);
    expect(await overflow()).toBeLessThanOrEqual(0);
    await shot(page, "36-metrics-phone");
    await page.goto(`${tern.url}/dashboard/emails/${ids[3]}`);
    const bounce = page.locator("ol.timeline li[data-event=bounced]");
    expect(await bounce.locator("p").innerText()).toMatch(new RegExp(`^Bounced for bounced@${sim}: 550 5\\.1\\.1 .*\\(Permanent`));
    // (textContent: the data is folded away, so not rendered text.)
    expect(await bounce.locator("details pre").textContent()).toContain('"diagnosticCode"');
    expect(await overflow()).toBeLessThanOrEqual(0);
    await shot(page, "37-email-bounced-phone");
    expect(scriptErrors).toEqual([]);
  }, 90_000);
});
