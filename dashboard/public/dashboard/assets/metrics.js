// @ts-check
// The Metrics page's charts: uPlot (loaded before this, on this page only) draws each
// [data-chart] element from the rows the server rendered into its data attributes. The page
// is complete without it: the cards and the table of periods hold the same numbers.
/* global uPlot */

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
  const fmt = (v) => (v == null ? "-" : percent ? `${+v.toFixed(3)}%` : v.toLocaleString("en-US"));
  const opts = {
    width: Math.max(280, el.clientWidth),
    height: 240,
    tzDate: (/** @type {number} */ ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
    scales: { x: { time: true }, y: { range: (/** @type {any} */ _u, /** @type {number} */ _min, /** @type {number} */ max) => [0, Math.max(percent ? 1 : 4, max * 1.1)] } },
    axes: [
      { ...axis, values: hourly ? undefined : "{YYYY}-{MM}-{DD}" },
      { ...axis, values: (/** @type {any} */ _u, /** @type {number[]} */ ticks) => ticks.map((t) => (percent ? `${+t.toFixed(2)}%` : Number.isInteger(t) ? t.toLocaleString("en-US") : "")) , size: 56 },
    ],
    series: [
      { label: "Period (UTC)", value: hourly ? "{YYYY}-{MM}-{DD} {HH}:{mm}" : "{YYYY}-{MM}-{DD}" },
      ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2, points: { size: x.length > 60 ? 0 : 5 }, value: (/** @type {any} */ _u, /** @type {number} */ v) => fmt(v) })),
    ],
  };
  el.replaceChildren();
  // @ts-ignore uPlot is a global from uplot.min.js
  const plot = new uPlot(opts, [x, ...series.map((s) => s.values)], el);
  new ResizeObserver(() => plot.setSize({ width: Math.max(280, el.clientWidth), height: 240 })).observe(el);
}

for (const el of /** @type {NodeListOf<HTMLElement>} */ (document.querySelectorAll("[data-chart]"))) draw(el);
