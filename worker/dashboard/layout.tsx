// The dashboard's page frame: navigation, the CSRF token for app.js, and small shared parts
// (empty states, badges, times). A new page is a component rendered inside <Layout>, plus an
// entry in NAV; a page that needs more script (a chart, an editor) adds its own <script>.
import { raw } from "hono/html";
import type { Child } from "hono/jsx";
import type { Viewer } from "./viewer.ts";

export interface NavItem {
  href: string;
  label: string;
  /** Only owners and admins see it. */
  managers?: boolean;
}

export const NAV: NavItem[] = [
  { href: "/dashboard/emails", label: "Emails" },
  { href: "/dashboard/metrics", label: "Metrics" },
  { href: "/dashboard/broadcasts", label: "Broadcasts" },
  { href: "/dashboard/templates", label: "Templates" },
  { href: "/dashboard/images", label: "Images" },
  { href: "/dashboard/contacts", label: "Contacts" },
  { href: "/dashboard/domains", label: "Domains" },
  { href: "/dashboard/api-keys", label: "API keys" },
  { href: "/dashboard/webhooks", label: "Webhooks" },
  { href: "/dashboard/logs", label: "Logs" },
  { href: "/dashboard/suppressions", label: "Suppressions" },
  { href: "/dashboard/received", label: "Received mail" },
  { href: "/dashboard/settings", label: "Settings" },
  { href: "/dashboard/audit-log", label: "Audit log" },
];

function Head(props: { title: string; csrf?: string | undefined }) {
  return (
    <head>
      <meta charset="utf-8" />
      <meta name="viewport" content="width=device-width, initial-scale=1" />
      <meta name="color-scheme" content="light dark" />
      {props.csrf ? <meta name="csrf-token" content={props.csrf} /> : null}
      <title>{`${props.title} · tern`}</title>
      <link rel="stylesheet" href="/dashboard/assets/app.css" />
      <script type="module" src="/dashboard/assets/app.js"></script>
    </head>
  );
}

export function Layout(props: { viewer: Viewer; title: string; path: string; children?: Child }) {
  const v = props.viewer;
  return (
    <>
    {raw("<!doctype html>")}
    <html lang="en">
      <Head title={props.title} csrf={v.csrf} />
      <body>
        <a class="skip" href="#main">Skip to content</a>
        <div class="shell">
          <nav class="side" aria-label="Dashboard">
            <div class="brand">tern</div>
            <div class="nav-links">
              {NAV.filter((n) => !n.managers || v.canManage).map((n) => (
                <a href={n.href} aria-current={props.path.startsWith(n.href) ? "page" : undefined}>{n.label}</a>
              ))}
            </div>
            <div class="foot">
              <div>{v.account.name} · {v.role}</div>
              <div>{v.user.email}</div>
              {v.memberships.length > 1 ? (
                <form method="post" class="inline" data-api="/dashboard/api/switch-account" data-then="/dashboard/emails">
                  <label>
                    Account
                    <select name="accountId">
                      {v.memberships.map((m) => <option value={m.accountId} selected={m.accountId === v.account.id}>{m.name}</option>)}
                    </select>
                  </label>
                  <button type="submit" class="secondary">Switch</button>
                </form>
              ) : null}
              <form method="post" data-api="/dashboard/api/sign-out" data-then="/dashboard/sign-in">
                <button type="submit" class="secondary">Sign out</button>
              </form>
            </div>
          </nav>
          <main id="main">
            <h1>{props.title}</h1>
            {props.children}
          </main>
        </div>
      </body>
    </html>
    </>
  );
}

/** Pages without a signed-in user: sign in, sign up, reset. */
export function AuthLayout(props: { title: string; csrf?: string | undefined; children?: Child }) {
  return (
    <>
    {raw("<!doctype html>")}
    <html lang="en">
      <Head title={props.title} csrf={props.csrf} />
      <body>
        <main class="auth" id="main">
          <h1>{props.title}</h1>
          <div class="panel">{props.children}</div>
        </main>
      </body>
    </html>
    </>
  );
}

export function Empty(props: { title: string; children?: Child }) {
  return (
    <div class="empty">
      <strong>{props.title}</strong>
      {props.children}
    </div>
  );
}

export function Badge(props: { value: string }) {
  return <span class={`badge ${props.value}`}>{props.value.replace(/_/g, " ")}</span>;
}

export function Time(props: { at: number | string | Date | null | undefined }) {
  if (props.at == null) return <span class="muted">never</span>;
  const d = new Date(props.at);
  const iso = d.toISOString();
  // The clock stays on one line; a wide table may break the date before it (table.wide).
  return <time datetime={iso}>{iso.slice(0, 10)} <span class="clock">{iso.slice(11, 19)} UTC</span></time>;
}

export function Copy(props: { value: string; label?: string }) {
  return (
    <button type="button" class="secondary" data-copy={props.value} aria-label={props.label ?? "Copy"}>
      Copy
    </button>
  );
}

/** A page's query string from its filters, leaving out the empty ones ("" when none is set). */
export function qs(params: Record<string, string | undefined>): string {
  const out = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) out.set(k, v);
  const s = out.toString();
  return s ? `?${s}` : "";
}
