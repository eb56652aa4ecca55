// @ts-check
// The Metrics page's charts: uPlot (loaded after this module, on this page only) draws each
// [data-chart] element from the rows the server rendered into its data attributes. The page
// is complete without it: the cards and the table of periods hold the same numbers.
/* global uPlot */
import { safeLocale } from "./locale.js";

// uPlot builds an Intl.NumberFormat from navigator.language as it loads, and a tag Intl refuses
// ("en-US@posix") throws there and leaves both charts blank: it reads a usable tag instead.
// This module runs before uplot.min.js (both deferred, in document order).
const locale = safeLocale(navigator.language);
if (locale !== navigator.language) Object.defineProperty(navigator, "language", { value: locale, configurable: true });

/** @param {string} name */
function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || "#888";
}

/** @param {HTMLElement} el */
function draw(el) {
  const x = /** @type {number[]} */ (JSON.parse(el.dataset.x ?? "[]"));
  const series = /** @type {{label: string, color: string, values: number[]}[]} */ (JSON.parse(el.dataset.series ?? "[]"));
  const percent = el.dataset.chart === "percent";
  const hourly = el.dataset.granularity === "hourly";
  const axis = { stroke: cssVar("--muted"), grid: { stroke: cssVar("--border"), width: 1 }, ticks: { stroke: cssVar("--border"), width: 1 } };
  /** @param {number} v */
  const fmt = (v) => (v == null ? "-" : percent ? `${+v.toFixed(2)}%` : v.toLocaleString("en-US"));
  const granularity = el.dataset.granularity;
  const timeZone = el.dataset.timezone || "UTC";
  // Periods start at midnight (or the hour) in the chosen timezone: label them there.
  const label = new Intl.DateTimeFormat("en-US", granularity === "monthly" ? { timeZone, month: "short", year: "numeric" } : { timeZone, month: "short", day: "numeric" });
  /** A period's label: "Nov 18", or "Nov 2026" for months. @param {number} t */
  const day = (t) => label.format(t * 1000);
  // Days, weeks and months are ticked at the periods themselves (every k-th one, about 90 px
  // apart), never at uPlot's half-day steps; hours keep uPlot's own time ticks.
  const clock = new Intl.DateTimeFormat("en-GB", { timeZone, hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
  const xAxis = hourly ? {
    ...axis,
    // 24-hour times; midnight shows the date instead.
    values: (/** @type {any} */ _u, /** @type {number[]} */ ticks) => ticks.map((t) => { const hm = clock.format(t * 1000); return hm === "00:00" ? day(t) : hm; }),
  } : {
    ...axis,
    splits: (/** @type {any} */ u) => {
      const k = Math.max(1, Math.ceil(x.length / Math.max(1, Math.floor(u.bbox.width / devicePixelRatio / 90))));
      return x.filter((_, i) => i % k === 0);
    },
    values: (/** @type {any} */ _u, /** @type {number[]} */ ticks) => ticks.map(day),
  };
  // The legend shows the latest period whenever the pointer is not on a period.
  const latest = (/** @type {any} */ u) => { if (u.cursor.idx == null && x.length) u.setLegend({ idx: x.length - 1 }, false); };
  const opts = {
    hooks: { ready: [latest], setSize: [latest], setCursor: [latest] },
    width: Math.max(280, el.clientWidth),
    padding: [12, 36, 0, 4],
    height: 240,
    tzDate: (/** @type {number} */ ts) => uPlot.tzDate(new Date(ts * 1000), timeZone),
    scales: { x: { time: true }, y: { range: (/** @type {any} */ _u, /** @type {number} */ _min, /** @type {number} */ max) => [0, Math.max(percent ? 1 : 4, max * 1.1)] } },
    axes: [
      xAxis,
      { ...axis, values: (/** @type {any} */ _u, /** @type {number[]} */ ticks) => ticks.map((t) => (percent ? `${+t.toFixed(2)}%` : Number.isInteger(t) ? t.toLocaleString("en-US") : "")) , size: 56 },
    ],
    series: [
      { label: `Period (${timeZone})`, value: hourly ? "{YYYY}-{MM}-{DD} {HH}:{mm}" : granularity === "monthly" ? "{YYYY}-{MM}" : "{YYYY}-{MM}-{DD}" },
      ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2, points: { size: x.length > 60 ? 0 : 5 }, value: (/** @type {any} */ _u, /** @type {number} */ v) => fmt(v) })),
    ],
  };
  el.replaceChildren();
  // @ts-ignore uPlot is a global from uplot.min.js
  const plot = new uPlot(opts, [x, ...series.map((s) => s.values)], el);
  new ResizeObserver(() => plot.setSize({ width: Math.max(280, el.clientWidth), height: 240 })).observe(el);
}

// Deferred scripts have all run by DOMContentLoaded: uPlot is loaded then.
document.addEventListener("DOMContentLoaded", () => {
  for (const el of /** @type {NodeListOf<HTMLElement>} */ (document.querySelectorAll("[data-chart]"))) draw(el);
});
