// The Logs pages: what each request an API key made sent and what tern answered, for a developer
// debugging an integration. Every member of the account sees them, as they see the emails the
// requests sent: the bodies were redacted when they were written (worker/logs/record.ts), so
// no key, secret or password is in them. The search and its bounds are worker/logs/search.ts's.
import type { Hono } from "hono";
import { listApiKeys } from "../api-keys/service.ts";
import { readConfig } from "../config.ts";
import { MAX_LOGGED_BODY } from "../logs/record.ts";
import { emailIdsOf, LOG_METHODS, readLogFilters, SEARCH_WINDOW, searchLogs, STATUS_CLASSES, type LogFilters } from "../logs/search.ts";
import { findLog } from "../logs/service.ts";
import { dashboardOrigin } from "./auth.ts";
import { Copy, Empty, Time, qs } from "./layout.tsx";
import { page, type DashCtx, type DashEnv } from "./routes.tsx";

const PAGE_SIZE = 50;

const filterParams = (f: LogFilters) => ({ status: f.status, method: f.method, endpoint: f.endpoint, key: f.keyId });

/** The status coloured by its class. */
function Status(props: { code: number }) {
  const cls = props.code >= 500 ? "s5xx" : props.code >= 400 ? "s4xx" : "s2xx";
  return <span class={`badge ${cls}`}>{props.code}</span>;
}

/** The product a user agent names first ("resend-node:6.0.0", "curl/8.5.0"), the whole string
 * on hover. */
function Agent(props: { ua: string | null }) {
  if (!props.ua) return <span class="muted">none</span>;
  const first = props.ua.split(/\s+/)[0]!;
  const short = first.length > 32 ? `${first.slice(0, 31)}…` : first;
  return <span class="mono" title={props.ua}>{short}</span>;
}

function KeyName(props: { id: string | null; name: string | null }) {
  if (props.name) return <>{props.name}</>;
  return <span class="muted">{props.id ? "deleted key" : "no key"}</span>;
}

function retention(c: DashCtx): string {
  const days = readConfig(c.env).retentionDays;
  return days === null ? "tern keeps API requests until the operator deletes them (RETENTION_DAYS=0)." : `tern keeps API requests for ${days} days, then deletes them.`;
}

async function logsPage(c: DashCtx) {
  const v = c.get("viewer");
  const { filters: f, error } = readLogFilters(c.req.query());
  const after = c.req.query("after") || undefined;
  const [result, keys] = await Promise.all([
    searchLogs(c.env.DB, v.account.id, f, { limit: PAGE_SIZE, after }),
    listApiKeys(c.env.DB, v.account.id, { limit: 100 }),
  ]);
  const filtered = Object.values(f).some(Boolean);
  const origin = dashboardOrigin(c.env, c.req.url);
  return page(c, "Logs", (
    <>
      <p class="muted">Every request your API keys make: what was sent and what tern answered. {retention(c)} Secrets and attachment contents are never kept.</p>
      <form class="panel row" method="get" action="/dashboard/logs" role="search" aria-label="Filter logs">
        <label>Status
          <select name="status">
            <option value="">all</option>
            {Object.entries(STATUS_CLASSES).map(([k, s]) => <option value={k} selected={f.status === k}>{s.label}</option>)}
          </select>
        </label>
        <label>Method
          <select name="method">
            <option value="">any</option>
            {LOG_METHODS.map((m) => <option value={m} selected={f.method === m}>{m}</option>)}
          </select>
        </label>
        <label>Endpoint<input name="endpoint" value={f.endpoint ?? ""} placeholder="/emails" size={18} /></label>
        <label>API key
          <select name="key">
            <option value="">any</option>
            {keys.data.map((k) => <option value={k.id} selected={f.keyId === k.id}>{k.name}</option>)}
            {/* A deleted key's requests stay until retention removes them: its filter (from a
                request's page) shows as what it is, not as "any". */}
            {f.keyId && !keys.data.some((k) => k.id === f.keyId) ? <option value={f.keyId} selected>{`deleted key ${f.keyId.slice(0, 8)}…`}</option> : null}
          </select>
        </label>
        <button type="submit">Filter</button>
        {filtered ? <a class="button secondary" href="/dashboard/logs">Clear</a> : null}
      </form>
      {error ? <p class="error" role="alert">{error}</p> : null}
      {result.data.length === 0 && !result.stoppedAt ? (
        filtered || after ? (
          <Empty title="No request matches these filters."><p>Widen them or <a href="/dashboard/logs">show every request</a>.</p></Empty>
        ) : (
          <Empty title="No API requests yet.">
            <p>Logs appear here once an <a href="/dashboard/api-keys">API key</a> makes requests. Try one:</p>
            <pre>{`curl ${origin}/domains -H 'Authorization: Bearer tern_...'`}</pre>
          </Empty>
        )
      ) : (
        <>
          {result.data.length ? (
            <table class="logs">
              <caption class="muted list-caption">Newest first</caption>
              <thead><tr><th scope="col">Time</th><th scope="col">Status</th><th scope="col">Request</th><th scope="col">API key</th><th scope="col" class="ua">User agent</th></tr></thead>
              <tbody>
                {result.data.map((l) => (
                  <tr>
                    <td class="nowrap"><Time at={l.created_at} /></td>
                    <td><Status code={l.response_status} /></td>
                    <td><a class="mono" href={`/dashboard/logs/${l.id}`}><strong>{l.method}</strong> {l.endpoint}</a></td>
                    <td><KeyName id={l.key_id} name={l.key_name} /></td>
                    <td class="ua"><Agent ua={l.user_agent} /></td>
                  </tr>
                ))}
              </tbody>
            </table>
          ) : null}
          {result.stoppedAt ? (
            <p class="notice" role="status">
              {result.data.length ? "No more matches" : "No match"} among the {SEARCH_WINDOW.toLocaleString("en-US")} requests searched, back to <Time at={result.stoppedAt} />.
            </p>
          ) : null}
          {after || result.next ? (
            <nav class="pager" aria-label="Pages">
              {after ? <a class="button secondary" href={`/dashboard/logs${qs(filterParams(f))}`}>Newest</a> : null}
              {result.next ? <a class="button secondary" href={`/dashboard/logs${qs({ ...filterParams(f), after: result.next })}`}>{result.stoppedAt ? "Search older requests" : "Older"}</a> : null}
            </nav>
          ) : null}
        </>
      )}
    </>
  ));
}

/** The stored JSON pretty-printed, or what stands in for it. */
function Body(props: { title: string; id: string; json: string | null }) {
  const heading = <h2 id={props.id}>{props.title}</h2>;
  if (props.json === null) return <section class="panel" aria-labelledby={props.id}>{heading}<p class="muted">No JSON body.</p></section>;
  const value = JSON.parse(props.json) as unknown;
  const truncated = value !== null && typeof value === "object" && (value as { truncated?: unknown }).truncated === true && Object.keys(value).length === 2;
  if (truncated) {
    const size = Math.round(Number((value as { size: number }).size) / 1024);
    return <section class="panel" aria-labelledby={props.id}>{heading}<p class="muted">{`The body was ${size} KB; logs keep bodies up to ${MAX_LOGGED_BODY / 1024} KB.`}</p></section>;
  }
  const pretty = JSON.stringify(value, null, 2);
  return (
    <section class="panel" aria-labelledby={props.id}>
      <div class="row spread">{heading}<Copy value={pretty} label={`Copy the ${props.title.toLowerCase()}`} /></div>
      <pre class="json">{pretty}</pre>
    </section>
  );
}

async function logPage(c: DashCtx) {
  const v = c.get("viewer");
  const { row, keyName } = await findLog(c.env.DB, v.account.id, c.req.param("id")!);
  const emails = emailIdsOf(row);
  return page(c, `${row.method} ${row.endpoint}`, (
    <>
      <p><a href="/dashboard/logs">← All logs</a></p>
      <section class="panel" aria-label="Summary">
        <dl class="fields">
          <dt>Status</dt><dd><Status code={row.status} /></dd>
          <dt>Time</dt><dd><Time at={row.createdAt} /></dd>
          <dt>API key</dt><dd><KeyName id={row.keyId} name={keyName} />{row.keyId ? <> · <a href={`/dashboard/logs?key=${encodeURIComponent(row.keyId)}`}>its requests</a></> : null}</dd>
          <dt>User agent</dt><dd class="mono">{row.userAgent ?? <span class="muted">none</span>}</dd>
          <dt>Log id</dt><dd class="mono">{row.id} <Copy value={row.id} label="Copy the log id" /></dd>
          {emails.length ? (
            <><dt>{emails.length === 1 ? "Email" : "Emails"}</dt><dd>{emails.map((id) => <div><a class="mono" href={`/dashboard/emails/${id}`}>{id}</a></div>)}</dd></>
          ) : null}
        </dl>
      </section>
      <Body title="Request body" id="request" json={row.requestJson} />
      <Body title="Response body" id="response" json={row.responseJson} />
      <p class="muted">Keys, secrets, passwords, signed link credentials and attachment contents were removed before the request was logged.</p>
    </>
  ));
}

export function registerLogPages(app: Hono<DashEnv>): void {
  app.get("/logs", logsPage);
  app.get("/logs/:id{[0-9a-fA-F-]{36}}", logPage);
}
