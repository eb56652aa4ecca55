// The Metrics page: the account's totals as cards, charts over time and the 7-day account
// health, read through the same services as GET /emails/metrics and GET /account/health (the
// filter form's fields are that endpoint's query parameters). A plain GET form, so the page
// works without script; uPlot (loaded on this page only) draws the charts from the rows.
import type { Hono } from "hono";
import { readConfig } from "../config.ts";
import { listDomains } from "../domains/service.ts";
import { ApiError } from "../errors.ts";
import { accountHealth, type AccountHealth, type RateHealth } from "../metrics/health.ts";
import { GRANULARITIES, parseMetricsQuery, type Metric } from "../metrics/query.ts";
import { isTimeZone } from "../metrics/periods.ts";
import { emailMetrics, type MetricsAnswer } from "../metrics/service.ts";
import { Badge, Empty } from "./layout.tsx";
import { page, type DashCtx, type DashEnv } from "./routes.tsx";

const COUNTS = ["received", "sent", "delivered", "bounced", "complained", "opened", "clicked", "unique_opened", "unique_clicked"] as const;
const RATES = ["delivery_rate", "bounce_rate", "complaint_rate", "open_rate", "click_rate"] as const;
const METRICS: Metric[] = [...COUNTS, ...RATES];

/** The cards: a count, what it means, and the rate that goes with it. */
const CARDS: { metric: Metric; label: string; rate?: Metric; rateLabel?: string }[] = [
  { metric: "received", label: "Accepted" },
  { metric: "sent", label: "Sent" },
  { metric: "delivered", label: "Delivered", rate: "delivery_rate", rateLabel: "of accepted" },
  { metric: "bounced", label: "Bounced", rate: "bounce_rate", rateLabel: "of accepted" },
  { metric: "complained", label: "Complained", rate: "complaint_rate", rateLabel: "of sent" },
  { metric: "opened", label: "Opened", rate: "open_rate", rateLabel: "unique, of sent" },
  { metric: "clicked", label: "Clicked", rate: "click_rate", rateLabel: "unique, of sent" },
];

/** Chart series: stable colours readable on the light and the dark theme. */
const COUNT_SERIES: { metric: Metric; label: string; color: string }[] = [
  { metric: "sent", label: "Sent", color: "#6b7280" },
  { metric: "delivered", label: "Delivered", color: "#16a34a" },
  { metric: "bounced", label: "Bounced", color: "#dc2626" },
  { metric: "complained", label: "Complained", color: "#d97706" },
  { metric: "opened", label: "Opened", color: "#2563eb" },
  { metric: "clicked", label: "Clicked", color: "#9333ea" },
];
const RATE_SERIES: { metric: Metric; label: string; color: string }[] = [
  { metric: "delivery_rate", label: "Delivery rate", color: "#16a34a" },
  { metric: "bounce_rate", label: "Bounce rate", color: "#dc2626" },
  { metric: "complaint_rate", label: "Complaint rate", color: "#d97706" },
  { metric: "open_rate", label: "Open rate", color: "#2563eb" },
  { metric: "click_rate", label: "Click rate", color: "#9333ea" },
];

const DAY = 86_400_000;
/** Suggestions for the timezone field; any IANA name works. */
const TIMEZONES = ["UTC", "America/Los_Angeles", "America/Denver", "America/Chicago", "America/New_York", "America/Sao_Paulo", "Europe/London", "Europe/Paris", "Europe/Berlin", "Africa/Lagos", "Asia/Dubai", "Asia/Kolkata", "Asia/Kathmandu", "Asia/Singapore", "Asia/Shanghai", "Asia/Tokyo", "Australia/Sydney", "Pacific/Auckland"];
/** The calendar date of an instant in a timezone (UTC when the name is not one). */
function isoDay(ms: number, tz: string): string {
  const zone = isTimeZone(tz) ? tz : "UTC";
  return new Intl.DateTimeFormat("en-CA", { timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit" }).format(ms);
}
const count = (n: number | undefined) => (n ?? 0).toLocaleString("en-US");

export function percent(fraction: number | undefined, digits = 2): string {
  return `${((fraction ?? 0) * 100).toFixed(digits).replace(/\.?0+$/, "")}%`;
}

interface Filters {
  start_date: string;
  end_date: string;
  granularity: string;
  domain_id: string;
  timezone: string;
}

/** The form's values, defaulting to the last 7 whole days in UTC, daily. */
function filtersOf(query: (name: string) => string | undefined, now: number): Filters {
  const q = (name: string) => query(name)?.trim() || "";
  const timezone = q("timezone") || "UTC";
  return {
    timezone,
    start_date: q("start_date") || isoDay(now - 6 * DAY, timezone),
    end_date: q("end_date") || isoDay(now, timezone),
    granularity: q("granularity") || "daily",
    domain_id: q("domain_id"),
  };
}

function metricsParams(f: Filters): URLSearchParams {
  const p = new URLSearchParams({ start_date: f.start_date, end_date: f.end_date, granularity: f.granularity, dimensions: "period", timezone: f.timezone, metrics: METRICS.join(",") });
  if (f.domain_id) p.set("domain_id", f.domain_id);
  return p;
}

/** A period's start on the timezone's wall clock: a date, an hour or a month. */
function periodLabel(iso: string, granularity: string, tz: string): string {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat("en-CA", { timeZone: tz, year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", hourCycle: "h23" })
      .formatToParts(Date.parse(iso)).map((p) => [p.type, p.value]),
  );
  const date = `${parts.year}-${parts.month}-${parts.day}`;
  return granularity === "hourly" ? `${date} ${parts.hour}:${parts.minute}` : granularity === "monthly" ? date.slice(0, 7) : date;
}

function Chart(props: { id: string; title: string; unit: "count" | "percent"; answer: MetricsAnswer; timezone: string; series: typeof COUNT_SERIES }) {
  const rows = props.answer.data ?? [];
  const x = rows.map((r) => Date.parse(r.period!) / 1000);
  const series = props.series.map((s) => ({
    label: s.label,
    color: s.color,
    values: rows.map((r) => (props.unit === "percent" ? Math.round((r[s.metric] ?? 0) * 1e6) / 1e4 : (r[s.metric] ?? 0))),
  }));
  return (
    <figure class="chart-figure">
      <figcaption id={`${props.id}-title`}>{props.title}</figcaption>
      <div
        class="chart"
        id={props.id}
        role="img"
        aria-labelledby={`${props.id}-title`}
        aria-describedby="periods"
        data-chart={props.unit}
        data-granularity={props.answer.granularity}
        data-timezone={props.timezone}
        data-x={JSON.stringify(x)}
        data-series={JSON.stringify(series)}
      >
        <noscript><p class="muted">The chart needs JavaScript; the table of periods below has the same numbers.</p></noscript>
      </div>
    </figure>
  );
}

function RateLine(props: { name: string; r: RateHealth; digits: number; enough: boolean }) {
  const r = props.r;
  const fill = Math.min(100, (r.value / r.limit) * 100);
  return (
    <div class="health-rate">
      <div class="health-head">
        <strong>{props.name}</strong>
        <span class="health-value">{percent(r.value, props.digits)}</span>
        {props.enough ? <Badge value={r.status} /> : null}
      </div>
      <div class={`health-bar ${props.enough ? r.status : "unjudged"}`} aria-hidden="true">
        <span style={`width:${fill.toFixed(1)}%`}></span>
        <i style={`left:${((r.warning / r.limit) * 100).toFixed(1)}%`} title="warning"></i>
      </div>
      <div class="muted">Warning at {percent(r.warning, props.digits)}, limit {percent(r.limit, props.digits)}</div>
    </div>
  );
}

/** Which rates are over or near their limits, in a sentence each (both rates in one when they
 * stand alike: "The bounce and complaint rates are over their limits."). */
export function healthSummary(h: Pick<AccountHealth, "bounce_rate" | "complaint_rate">): string {
  const rates: [string, RateHealth][] = [["bounce", h.bounce_rate], ["complaint", h.complaint_rate]];
  const say = (status: RateHealth["status"], where: string) => {
    const names = rates.filter(([, r]) => r.status === status).map(([name]) => name);
    if (names.length === 0) return "";
    return names.length === 1 ? `The ${names[0]} rate is ${where} its limit.` : `The ${names.join(" and ")} rates are ${where} their limits.`;
  };
  return [say("over_limit", "over"), say("warning", "close to")].filter(Boolean).join(" ");
}

function Health(props: { h: AccountHealth }) {
  const h = props.h;
  return (
    <section class="panel" aria-labelledby="health">
      <h2 id="health">Account health <span class="muted">(last {h.window_days} days)</span> {h.enough_volume ? <Badge value={h.status} /> : null}</h2>
      <p class="muted">
        Mailbox providers and Amazon SES watch these two rates of the mail you sent over the last {h.window_days} days ({count(h.received)} recipients accepted, {count(h.sent)} sent):
        hard bounces of those accepted and spam complaints of those sent.
      </p>
      <div class="health">
        <RateLine name="Bounce rate" r={h.bounce_rate} digits={2} enough={h.enough_volume} />
        <RateLine name="Complaint rate" r={h.complaint_rate} digits={3} enough={h.enough_volume} />
      </div>
      {!h.enough_volume ? (
        <p class="muted">Fewer than 100 recipients in this window: the rates are shown, but judged only from 100 recipients on.</p>
      ) : null}
      {h.status !== "healthy" ? (
        <p role="status">
          {healthSummary(h)} Remove addresses that bounce or complain (they are on <a href="/dashboard/suppressions">Suppressions</a>), send only to people who asked for your mail, and make unsubscribing easy.
        </p>
      ) : null}
      {h.sending_paused ? (
        <p class="error" role="alert">Sending is paused: new emails are refused until the {h.window_days}-day rates are under the limits again. Mail already accepted is still delivered.</p>
      ) : (
        <p>Sending is on. {h.pause_enabled ? "It pauses if a rate goes over its limit: this deployment pauses accounts whose bounces or complaints are too high." : "This deployment does not pause sending over a limit: keep the rates under them yourself, as mailbox providers will not wait."}</p>
      )}
    </section>
  );
}

async function metricsPage(c: DashCtx) {
  const v = c.get("viewer");
  const now = Date.now();
  const f = filtersOf((name) => c.req.query(name), now);
  let error: string | null = null;
  let answer: MetricsAnswer;
  try {
    answer = await emailMetrics(c.env.DB, v.account.id, parseMetricsQuery(metricsParams(f), now));
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    // The contract's message names the parameter; the page still shows the default range.
    error = err.message;
    Object.assign(f, filtersOf(() => undefined, now));
    answer = await emailMetrics(c.env.DB, v.account.id, parseMetricsQuery(metricsParams(f), now));
  }
  const [health, domains] = await Promise.all([
    accountHealth(c.env.DB, v.account.id, now, readConfig(c.env).healthPause),
    listDomains(c.env.DB, v.account.id, { limit: 100 }),
  ]);
  const t = answer.totals;
  const rows = answer.data ?? [];
  const active = rows.filter((r) => COUNTS.some((m) => (r[m] ?? 0) > 0));
  const nothing = COUNTS.every((m) => (t[m] ?? 0) === 0);
  const filtered = Boolean(c.req.query("start_date") || c.req.query("end_date") || c.req.query("domain_id"));
  return page(c, "Metrics", (
    <>
      <form class="panel row" method="get" action="/dashboard/metrics" aria-label="Metrics range">
        <label>From<input type="date" name="start_date" value={f.start_date} required /></label>
        <label>To<input type="date" name="end_date" value={f.end_date} required /></label>
        <label>Granularity
          <select name="granularity">
            {GRANULARITIES.map((g) => <option value={g} selected={f.granularity === g}>{g}</option>)}
          </select>
        </label>
        <label>Domain
          <select name="domain_id">
            <option value="">all domains</option>
            {domains.data.map((d) => <option value={d.id} selected={f.domain_id === d.id}>{d.name}</option>)}
          </select>
        </label>
        <label>Timezone<input name="timezone" value={f.timezone} size={16} list="timezones" placeholder="UTC or Europe/Paris" /></label>
        <datalist id="timezones">{TIMEZONES.map((z) => <option value={z} />)}</datalist>
        <button type="submit">Show</button>
      </form>
      {error ? <p class="error" role="alert">{error}</p> : null}
      <section aria-labelledby="totals">
        <h2 id="totals" class="sr-only">Totals</h2>
        <div class="cards">
          {CARDS.map((card) => (
            <div class="card" data-metric={card.metric}>
              <div class="card-label">{card.label}</div>
              <div class="card-value">{count(t[card.metric])}</div>
              {card.rate ? <div class="card-rate" data-metric={card.rate}>{percent(t[card.rate], card.rate === "complaint_rate" ? 3 : 2)} <span class="muted">{card.rateLabel}</span></div> : <div class="card-rate muted">{card.metric === "received" ? "recipients tern took" : "taken by receiving servers"}</div>}
            </div>
          ))}
        </div>
      </section>
      {nothing ? (
        filtered ? (
          <Empty title="No email in this range.">
            <p>Widen the dates, choose all domains, or <a href="/dashboard/metrics">go back to the last 7 days</a>.</p>
          </Empty>
        ) : (
          <Empty title="No email sent in the last 7 days.">
            <p>Send an email with your <a href="/dashboard/api-keys">API key</a> from a <a href="/dashboard/domains">verified domain</a> (POST /emails): its deliveries, bounces, opens and clicks show up here within seconds.</p>
          </Empty>
        )
      ) : (
        <section class="panel" aria-labelledby="over-time">
          <h2 id="over-time">Over time</h2>
          <link rel="stylesheet" href="/dashboard/assets/vendor/uplot.min.css" />
          <Chart id="chart-counts" title="Emails" unit="count" answer={answer} timezone={f.timezone} series={COUNT_SERIES} />
          <Chart id="chart-rates" title="Rates (%)" unit="percent" answer={answer} timezone={f.timezone} series={RATE_SERIES} />
          <script type="module" src="/dashboard/assets/metrics.js"></script>
          <script src="/dashboard/assets/vendor/uplot.min.js" defer></script>
          <details>
            <summary>Periods with email ({active.length} of {rows.length})</summary>
            <table id="periods">
              <thead><tr><th scope="col">Period ({f.timezone})</th>{COUNT_SERIES.map((s) => <th scope="col" class="num">{s.label}</th>)}<th scope="col" class="num">Bounce rate</th></tr></thead>
              <tbody>
                {active.slice(0, 500).map((r) => (
                  <tr><td>{periodLabel(r.period!, answer.granularity, f.timezone)}</td>{COUNT_SERIES.map((s) => <td class="num">{count(r[s.metric])}</td>)}<td class="num">{percent(r.bounce_rate)}</td></tr>
                ))}
              </tbody>
            </table>
          </details>
        </section>
      )}
      <Health h={health} />
    </>
  ));
}

export function registerMetricsPages(app: Hono<DashEnv>): void {
  app.get("/metrics", metricsPage);
}
