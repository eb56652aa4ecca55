// The pages over tern's resources (emails, domains, API keys, webhooks) and their JSON
// endpoints: thin callers of the same services and request schemas as the REST API, so
// every rule (validation, ownership, what a key may do) is written once.
import type { Hono } from "hono";
import { createApiKey, listApiKeyDetails, revokeApiKey } from "../api-keys/service.ts";
import { takeRequest } from "../rate-limit.ts";
import { principalOf } from "./broadcasts.tsx";
import { readConfig } from "../config.ts";
import { checkDomain, createDomain, deleteDomain, domainDetails, domainView, findDomain, lastCheckOf, listDomains, patchDomain, rotateDkim, rotationAlgorithm, type DomainDetails, type DomainView } from "../domains/service.ts";
import { autoConfigureDomain, type AutoConfiguredRecord } from "../domains/auto-configure.ts";
import { unicodeName } from "../domains/names.ts";
import { cancelEmail, findEmail, getEmail, listEmailEvents } from "../emails/service.ts";
import { renderMessage } from "../delivery/consumer.ts";
import { validate } from "../http.ts";
import { CreateApiKeyRequest } from "../routes/api-keys.ts";
import { AutoConfigureRequest, CreateDomainRequest, RotateDkimRequest, UpdateDomainRequest } from "../routes/domains.ts";
import { REGIONS } from "../regions.ts";
import { CreateWebhookRequest, UpdateWebhookRequest } from "../routes/webhooks.ts";
import { CONTACT_EVENT_TYPES, DOMAIN_EVENT_TYPES, EMAIL_EVENT_TYPES } from "../webhooks/payloads.ts";
import { createWebhook, deleteWebhook, findWebhook, listWebhookAttempts, listWebhookDeliveries, listWebhooks, replayWebhookDelivery, rotateWebhookSecret, updateWebhook, webhookView } from "../webhooks/service.ts";
import { EMAIL_STATUSES, searchEmails, type EmailFilters } from "./email-search.ts";
import { describeEmailEvent } from "./email-events.ts";
import { CUT_NOTE, MAX_SEARCH_CHARS, searchTerm } from "../db/search.ts";
import { getReceived, listReceived, openReceivedAttachment } from "../inbound/service.ts";
import { attachmentDownload } from "../routes/attachments.ts";
import { emailInsights } from "../insights/service.ts";
import type { Insight } from "../insights/checks.ts";
import { addSuppression, listSuppressions, removeSuppressionById, updateSuppressionNote } from "../suppressions/service.ts";
import { CreateSuppressionRequest } from "../routes/suppressions.ts";
import { Badge, Copy, Empty, Time, qs } from "./layout.tsx";
import { body, DashError, page, requireManager, type DashCtx, type DashEnv } from "./routes.tsx";
import { audit } from "./viewer.ts";
import { formatBytes } from "../media/sizes.ts";

const PAGE_SIZE = 25;

// ---- Emails -----------------------------------------------------------------------------

async function emailsPage(c: DashCtx) {
  const v = c.get("viewer");
  const search = searchTerm(c.req.query("q"));
  const f: EmailFilters = {
    q: search.q,
    status: c.req.query("status") || undefined,
    domain: c.req.query("domain")?.trim().toLowerCase() || undefined,
    tag: c.req.query("tag")?.trim() || undefined,
    from: c.req.query("from") || undefined,
    to: c.req.query("to") || undefined,
  };
  const after = c.req.query("after") || undefined;
  const result = await searchEmails(c.env.DB, v.account.id, f, { limit: PAGE_SIZE, after });
  const filtered = Object.values(f).some(Boolean);
  const last = result.data[result.data.length - 1];
  return page(c, "Emails", (
    <>
      <form class="panel row filters" method="get" action="/dashboard/emails" role="search" aria-label="Search emails">
        <label class="grow">Search<input name="q" value={f.q ?? ""} placeholder="recipient, subject or email id" size={28} maxlength={MAX_SEARCH_CHARS} /></label>
        <label>Status
          <select name="status">
            <option value="">any</option>
            {EMAIL_STATUSES.map((s) => <option value={s} selected={f.status === s}>{s.replace(/_/g, " ")}</option>)}
          </select>
        </label>
        <label>From domain<input name="domain" value={f.domain ?? ""} placeholder="example.com" size={14} /></label>
        <label>Tag<input name="tag" value={f.tag ?? ""} placeholder="name or name:value" size={20} /></label>
        <div class="range">
          <label>Sent from<input type="date" name="from" value={f.from ?? ""} /></label>
          <label>Sent until<input type="date" name="to" value={f.to ?? ""} /></label>
          <button type="submit">Filter</button>
          {filtered ? <a class="button secondary" href="/dashboard/emails">Clear</a> : null}
        </div>
      </form>
      {result.error ? <p class="error" role="alert">{result.error}</p> : null}
      {search.cut ? <p class="error" role="alert">{CUT_NOTE}</p> : null}
      {result.data.length === 0 ? (
        filtered ? (
          <Empty title="No email matches these filters."><p>Widen the dates or <a href="/dashboard/emails">clear the filters</a>.</p></Empty>
        ) : (
          <Empty title="No emails yet.">
            <p>Add and verify the domain you send from (<a href="/dashboard/domains">Domains</a>), create an <a href="/dashboard/api-keys">API key</a>, then send, for example:</p>
            <pre id="first-send">{`curl -X POST ${new URL(c.req.url).origin}/emails -H 'Authorization: Bearer tern_...' \\\n  -H 'Content-Type: application/json' \\\n  -d '{"from":"you@your-domain","to":"someone@example.com","subject":"Hi","html":"<p>Hello</p>"}'`}</pre>
            <p><button type="button" class="secondary" data-copy-from="first-send">Copy the command</button></p>
          </Empty>
        )
      ) : (
        <>
          <table class="stack-narrow">
            <caption class="muted list-caption">Newest first</caption>
            <thead><tr><th scope="col">To</th><th scope="col">Subject</th><th scope="col">Status</th><th scope="col">Date</th></tr></thead>
            <tbody>
              {result.data.map((e) => (
                <tr>
                  <td>{e.to.join(", ")}</td>
                  <td><a href={`/dashboard/emails/${e.id}`}>{e.subject || "(no subject)"}</a></td>
                  <td><Badge value={e.last_event} /></td>
                  <td><EmailDate email={e} /></td>
                </tr>
              ))}
            </tbody>
          </table>
          {after || result.has_more ? (
            <nav class="pager" aria-label="Pages">
              {after ? <a class="button secondary" href={`/dashboard/emails${qs({ ...f })}`}>Newest</a> : null}
              {result.has_more && last ? <a class="button secondary" href={`/dashboard/emails${qs({ ...f, after: last.id })}`}>Older</a> : null}
            </nav>
          ) : null}
        </>
      )}
    </>
  ));
}

/** What the list's date is: the time tern accepted the email, or its schedule; a canceled
 * email was never sent, so its date says so. */
function EmailDate(props: { email: { created_at: string; scheduled_at?: string | null; last_event: string } }) {
  const e = props.email;
  if (e.last_event === "scheduled" && e.scheduled_at) return <span>Scheduled for <Time at={e.scheduled_at} /></span>;
  if (e.last_event === "canceled") return <span>Canceled <span class="muted small">(created <Time at={e.created_at} />)</span></span>;
  return <Time at={e.created_at} />;
}

/** The checks write names and values in `backticks`: shown as code. */
function withCode(text: string) {
  return text.split(/`([^`]+)`/).map((part, i) => (i % 2 ? <code>{part}</code> : part));
}

const INSIGHT_ORDER = { failed: 0, warning: 1, passed: 2 } as const;

/** The email's deliverability checks (GET /emails/{id}/insights): problems first, each with
 * how to fix it; the passed ones folded away. */
function InsightsSection(props: { insights: Insight[] }) {
  const sorted = [...props.insights].sort((a, b) => INSIGHT_ORDER[a.status] - INSIGHT_ORDER[b.status]);
  const problems = sorted.filter((i) => i.status !== "passed");
  const passed = sorted.filter((i) => i.status === "passed");
  const failed = problems.filter((i) => i.status === "failed").length;
  const item = (i: Insight) => (
    <li data-insight={i.id}><Badge value={i.status} /> <strong>{i.title}</strong><p class="muted">{withCode(i.detail)}</p></li>
  );
  return (
    <section class="panel" aria-labelledby="insights">
      <h2 id="insights">Insights</h2>
      <p>
        {problems.length === 0
          ? `All ${passed.length} deliverability checks passed.`
          : `${failed} failed, ${problems.length - failed} ${problems.length - failed === 1 ? "warning" : "warnings"}, ${passed.length} passed. Fix these before the next send to keep this mail out of spam folders:`}
      </p>
      {problems.length ? <ul class="insights">{problems.map(item)}</ul> : null}
      {passed.length ? (
        <details>
          <summary>{passed.length} passed checks</summary>
          <ul class="insights">{passed.map(item)}</ul>
        </details>
      ) : null}
    </section>
  );
}

/** The email's events oldest first, each as a sentence; the event's data as recorded (what a
 * webhook carries) folded under it. */
function EmailTimeline(props: { events: { id: string; type: string; created_at: string; data: Record<string, unknown> }[] }) {
  return (
    <ol class="timeline">
      {props.events.map((e) => (
        <li data-event={e.type}>
          <div class="when"><Badge value={e.type} /><Time at={e.created_at} /></div>
          <div class="what">
            <p>{describeEmailEvent(e.type, e.data)}</p>
            {Object.keys(e.data).length ? (
              <details><summary class="small muted">Event data</summary><pre class="small">{JSON.stringify(e.data, null, 2)}</pre></details>
            ) : null}
          </div>
        </li>
      ))}
    </ol>
  );
}

function headerBlock(raw: string): string {
  const end = raw.search(/\r?\n\r?\n/);
  return (end < 0 ? raw : raw.slice(0, end)).replace(/\r\n/g, "\n");
}

async function emailPage(c: DashCtx) {
  const v = c.get("viewer");
  const id = c.req.param("id")!;
  const email = await getEmail(c.env, v.account.id, id);
  const [events, row, insights] = await Promise.all([
    listEmailEvents(c.env.DB, v.account.id, id),
    findEmail(c.env.DB, v.account.id, id),
    emailInsights(c.env, readConfig(c.env), v.account.id, id),
  ]);
  let raw: string | null = null;
  try {
    raw = new TextDecoder().decode(await renderMessage(c.env, row));
  } catch {
    raw = null; // content expired or removed by retention
  }
  return page(c, email.subject || "(no subject)", (
    <>
      <p><a href="/dashboard/emails">← All emails</a></p>
      <nav class="tabs" aria-label="Sections of this email">
        <a href="#fields">Details</a><a href="#insights">Insights</a><a href="#timeline">Timeline</a><a href="#preview">Preview</a><a href="#raw">Headers and raw</a>
      </nav>
      <section class="panel" aria-labelledby="fields">
        <h2 id="fields">Details</h2>
        <dl class="fields">
          <dt>Status</dt><dd><Badge value={email.last_event} /></dd>
          <dt>Email id</dt><dd class="mono">{email.id} <Copy value={email.id} label="Copy the email id" /></dd>
          <dt>From</dt><dd>{email.from}</dd>
          <dt>To</dt><dd>{email.to.join(", ")}</dd>
          {email.cc ? (<><dt>Cc</dt><dd>{email.cc.join(", ")}</dd></>) : null}
          {email.bcc ? (<><dt>Bcc</dt><dd>{email.bcc.join(", ")}</dd></>) : null}
          {email.reply_to ? (<><dt>Reply-To</dt><dd>{email.reply_to.join(", ")}</dd></>) : null}
          <dt>Created</dt><dd><Time at={email.created_at} /></dd>
          {email.scheduled_at ? (<><dt>Scheduled for</dt><dd><Time at={email.scheduled_at} /></dd></>) : null}
          <dt>Tags</dt><dd>{email.tags.length ? email.tags.map((t) => <code>{`${t.name}:${t.value}`}</code>) : <span class="muted">none</span>}</dd>
        </dl>
        {row.state === "scheduled" ? (
          <form method="post" data-api={`/dashboard/api/emails/${email.id}/cancel`} data-confirm="Cancel this scheduled email?" style="margin-top:12px">
            <button type="submit" class="danger">Cancel the scheduled send</button>
          </form>
        ) : null}
      </section>
      <InsightsSection insights={insights ?? []} />
      <section class="panel" aria-labelledby="timeline">
        <h2 id="timeline">Timeline</h2>
        <EmailTimeline events={events.data} />
      </section>
      <section class="panel" aria-labelledby="preview">
        <h2 id="preview">Preview</h2>
        {email.html ? (
          // No scripts, no same-origin access, no forms, no top navigation: the email's HTML is
          // someone else's content shown inside the dashboard's origin.
          <iframe class="preview" title="The email's HTML" sandbox="" srcdoc={email.html} referrerpolicy="no-referrer"></iframe>
        ) : <p class="muted">This email has no HTML part.</p>}
        <h2>Text</h2>
        {email.text ? <pre>{email.text}</pre> : <p class="muted">This email has no text part.</p>}
      </section>
      <section class="panel" aria-labelledby="raw">
        <h2 id="raw">Headers and raw message</h2>
        {raw ? (
          <>
            <p class="muted">As tern builds it, before DKIM signing and link tracking.</p>
            <details><summary>Headers</summary><pre>{headerBlock(raw)}</pre></details>
            <details><summary>Raw message</summary><pre>{raw}</pre></details>
          </>
        ) : <p class="muted">The content of this email is no longer kept.</p>}
      </section>
    </>
  ));
}

// ---- Domains ----------------------------------------------------------------------------

async function domainsPage(c: DashCtx) {
  const v = c.get("viewer");
  const list = await listDomains(c.env.DB, v.account.id, { limit: 100, after: c.req.query("after") || undefined });
  return page(c, "Domains", (
    <>
      {v.canManage ? (
        <form method="post" class="panel row" data-api="/dashboard/api/domains" data-then="/dashboard/domains/{id}" aria-label="Add a domain">
          <label>Domain<input name="name" placeholder="mail.example.com" required /></label>
          <label>Region
            <select name="region">{REGIONS.map((r) => <option value={r}>{r}</option>)}</select>
          </label>
          <button type="submit">Add domain</button>
        </form>
      ) : null}
      {list.data.length === 0 ? (
        <Empty title="No domains yet."><p>Add the domain you send from; tern shows the DNS records to publish, then verifies them.</p></Empty>
      ) : (
        <table>
          <thead><tr><th scope="col">Domain</th><th scope="col">Status</th><th scope="col">Region</th><th scope="col">Added</th></tr></thead>
          <tbody>{list.data.map((d) => (
            <tr><td><a href={`/dashboard/domains/${d.id}`}><DomainName name={d.name} /></a></td><td><Badge value={d.status} /></td><td>{d.region}</td><td><Time at={d.created_at} /></td></tr>
          ))}</tbody>
        </table>
      )}
    </>
  ));
}

/** An internationalized name in Unicode, its A-label (what DNS and the API carry) beside it. */
function DomainName(props: { name: string }) {
  const unicode = unicodeName(props.name);
  return unicode === props.name ? <>{props.name}</> : <>{unicode} <span class="muted mono small">({props.name})</span></>;
}

/** What the last check found for one record, in words. */
function LastFinding(props: { last: DomainDetails["records"][number]["last"]; checked: boolean }) {
  const last = props.last;
  if (!props.checked || !last) return <span class="muted">not checked yet</span>;
  if (last.result === "match") return <span class="ok">found</span>;
  if (last.result === "missing") return <span>not found</span>;
  if (last.result === "error") return <span class="error">unknown: DNS could not be reached</span>;
  return (
    <span class="error">wrong value{last.found?.length ? <>: found <code>{last.found.join(" | ")}</code></> : null}</span>
  );
}

/** Where the domain's open and click links point, said in words. */
function trackingHostNote(view: DomainView, certificate: DomainDetails["certificate"]) {
  if (!view.tracking_subdomain) return null;
  const host = `${view.tracking_subdomain}.${view.name}`;
  const status = view.records.find((r) => r.record === "Tracking")?.status;
  if (status === undefined) return <> · <span class="mono">{host}</span> is not used: this deployment serves no domains' tracking hosts (its operator sets TRACKING_CNAME_TARGET to offer them), so links use its own host</>;
  return status === "verified"
    ? <> · links use <span class="mono">{host}</span></>
    : <> · links use <span class="mono">{host}</span> once its Tracking record below is verified{certificate ? " and its certificate issued" : ""}; until then the deployment's own host</>;
}

/** The tracking host's certificate (where tern has Cloudflare issue it), in words: what it
 * waits for, or what to fix. */
function CertificateNote(props: { certificate: DomainDetails["certificate"]; target: string }) {
  const c = props.certificate;
  if (!c) return null;
  if (c.state === "active") return <div class="small note"><span class="ok">certificate active</span>: links use this host</div>;
  if (c.state === "pending") {
    return <div class="muted small note">certificate pending issuance: {c.detail}. It is issued once this CNAME points at <span class="mono">{props.target}</span>; links use the deployment's host until then</div>;
  }
  return (
    <div class="error small note">
      certificate failed: {c.detail}. Check that this CNAME points at <span class="mono">{props.target}</span> and is not proxied, and that no CAA record at the domain forbids the certificate authority; then verify again.
    </div>
  );
}

async function domainPage(c: DashCtx) {
  const v = c.get("viewer");
  const details = domainDetails(await findDomain(c.env.DB, v.account.id, c.req.param("id")!), readConfig(c.env));
  const { view } = details;
  const unicode = unicodeName(view.name);
  const checked = details.lastCheckedAt !== null;
  const dmarc = details.dmarc;
  const dmarcName = dmarc.fqdn === `_dmarc.${view.name}` ? "_dmarc" : dmarc.fqdn;
  return page(c, unicode, (
    <>
      <p><a href="/dashboard/domains">← All domains</a></p>
      <section class="panel">
        <dl class="fields">
          <dt>Status</dt><dd><Badge value={view.status} /></dd>
          {unicode !== view.name ? <><dt>In DNS</dt><dd class="mono">{view.name} <span class="muted">(the A-label: DNS records and the API use it)</span></dd></> : null}
          <dt>Last checked</dt><dd>{checked ? <Time at={details.lastCheckedAt} /> : <span class="muted">never: publish the records below, then verify</span>}</dd>
          {details.nextCheckAt !== null ? <><dt>Next check</dt><dd><Time at={details.nextCheckAt} /></dd></> : null}
          <dt>Region</dt><dd>{view.region}</dd>
          <dt>Tracking</dt><dd>opens {view.open_tracking ? "on" : "off"}, clicks {view.click_tracking ? "on" : "off"}{trackingHostNote(view, details.certificate)}</dd>
          <dt>TLS</dt><dd>{view.tls}</dd>
        </dl>
        {details.checkError ? (
          <p class="error" role="alert">
            The last check could not reach DNS: {details.checkError}. Nothing changed on its account; tern will retry{details.nextCheckAt !== null ? <> at <Time at={details.nextCheckAt} /></> : null}, or verify again now.
          </p>
        ) : null}
        {v.canManage ? (
          <form method="post" class="row" data-api={`/dashboard/api/domains/${view.id}/settings`} style="margin-top:12px" aria-label="Domain settings">
            <label class="check"><input type="checkbox" name="open_tracking" checked={view.open_tracking} />Track opens</label>
            <label class="check"><input type="checkbox" name="click_tracking" checked={view.click_tracking} />Track clicks</label>
            <label class="check"><input type="checkbox" name="receiving" checked={view.receiving} />Receive mail</label>
            <label>Tracking host (optional)
              <span class="row" style="gap:4px;align-items:center"><input name="tracking_subdomain" value={view.tracking_subdomain ?? ""} placeholder="links" maxlength={63} style="width:9em"/><span class="mono">.{view.name}</span></span>
            </label>
            <label>TLS to recipients
              <select name="tls"><option value="opportunistic" selected={view.tls === "opportunistic"}>opportunistic</option><option value="enforced" selected={view.tls === "enforced"}>enforced</option></select>
            </label>
            <button type="submit" class="secondary">Save settings</button>
          </form>
        ) : null}
        {v.canManage ? (
          <div class="row" style="margin-top:12px">
            <form method="post" data-api={`/dashboard/api/domains/${view.id}/verify`}><button type="submit">Verify DNS records now</button></form>
            <form method="post" data-api={`/dashboard/api/domains/${view.id}/rotate-dkim`} data-confirm="Make a new DKIM key? The current one signs until the new record is published and verified.">
              <button type="submit" class="secondary">Rotate the DKIM key</button>
            </form>
            <form method="post" data-api={`/dashboard/api/domains/${view.id}/delete`} data-then="/dashboard/domains" data-confirm={`Delete ${unicode}? Mail from it stops being signed.`}>
              <button type="submit" class="danger">Delete domain</button>
            </form>
          </div>
        ) : null}
      </section>
      <h2>DNS records to publish</h2>
      <p class="muted">Add these at your DNS provider{unicode !== view.name ? <> (names in their A-label form, <span class="mono">{view.name}</span>)</> : null}, then verify. Checks also run on a schedule. DKIM and SPF are required; DMARC is recommended (Gmail and Yahoo expect it of bulk senders).{view.tracking_subdomain ? <> The Tracking CNAME is optional: it puts open and click links on your own host; publish it as it is (at Cloudflare, DNS only, not proxied), so resolvers see where it points.</> : null}</p>
      <table>
        <thead><tr><th scope="col">Purpose</th><th scope="col">Type</th><th scope="col">Name</th><th scope="col">Value</th><th scope="col">Status</th><th scope="col">Last check</th></tr></thead>
        <tbody>
          {details.records.map((r) => (
            <tr>
              <td>{r.record}{PURPOSE_NOTES[`${r.record} ${r.type}`] ? <div class="muted small">{PURPOSE_NOTES[`${r.record} ${r.type}`]}</div> : null}</td>
              <td>{r.type}{r.priority !== undefined ? ` (priority ${r.priority})` : ""}</td>
              <td class="mono">{r.name} <Copy value={r.name} label={`Copy the ${r.record} record's name`} /></td>
              <td class="mono"><code>{r.value}</code> <Copy value={r.value} label={`Copy the ${r.record} record's value`} /></td>
              <td><Badge value={r.status} /></td>
              <td><LastFinding last={r.last} checked={checked} />{r.id === "tracking_cname" ? <CertificateNote certificate={details.certificate} target={r.value} /> : null}</td>
            </tr>
          ))}
          <tr>
            <td>DMARC <span class="muted small">(recommended)</span></td>
            <td>TXT</td>
            <td class="mono">{dmarcName} <Copy value={dmarcName} label="Copy the DMARC record's name" />{dmarcName !== "_dmarc" ? <div class="muted small note">the full name: at {unicodeName(dmarc.fqdn.slice("_dmarc.".length))}, it covers the subdomains too</div> : null}</td>
            <td class="mono"><code>{dmarc.value}</code> <Copy value={dmarc.value} label="Copy the DMARC record's value" /></td>
            <td>{dmarc.found?.found ? <Badge value="verified" /> : <span class="muted">optional</span>}</td>
            <td>{!checked ? <span class="muted">not checked yet</span>
              : dmarc.found === null ? <span class="muted">unknown</span>
              : dmarc.found.found ? <span class="ok">found{dmarc.found.inherited ? " (the parent domain's)" : ""}: p={dmarc.found.policy ?? "none"}</span>
              : <span>not found</span>}</td>
          </tr>
        </tbody>
      </table>
      {v.canManage ? <CloudflareSetup domainId={view.id} done={details.records.every((r) => r.status === "verified") && dmarc.found?.found === true} /> : null}
    </>
  ));
}

/** What a record is for, where its name alone does not say (the API names both of the return
 * path's records SPF, as Resend does). */
const PURPOSE_NOTES: Record<string, string> = {
  "SPF MX": "bounces come back here",
  "SPF TXT": "who may send",
  "DKIM TXT": "signs each message",
  "Receiving MX": "mail to the domain",
  "Tracking CNAME": "open and click links",
};

/** The one-step setup at Cloudflare (worker/domains/auto-configure.ts, as the API's
 * POST /domains/{id}/auto-configure): the token goes to that one request, and the answer's
 * sentences are listed in place of the form. */
function CloudflareSetup(props: { domainId: string; done: boolean }) {
  const form = (
    <>
      <form method="post" data-api={`/dashboard/api/domains/${props.domainId}/auto-configure`} data-show="cloudflare-setup-result" data-hide aria-label="Set up at Cloudflare">
        <input type="hidden" name="provider" value="cloudflare" />
        <label>Cloudflare API token<input type="password" name="api_token" autocomplete="off" spellcheck={false} required minlength={20} maxlength={512} /></label>
        <p class="muted small">If this domain's DNS is at Cloudflare, tern adds the records above for you. Make a token in the Cloudflare dashboard under My Profile &gt; API Tokens &gt; Create Token, with the "Edit zone DNS" template (permission Zone &gt; DNS &gt; Edit, for this domain's zone). tern uses it for this one request and does not keep it; it never changes or deletes a record that is already there.</p>
        <button type="submit">Set up at Cloudflare</button>
      </form>
      <div id="cloudflare-setup-result" hidden role="status">
        <p data-field="notice"></p>
        <ul data-field="lines"></ul>
        <p><a href={`/dashboard/domains/${props.domainId}`}>Reload the page</a> to see each record's status.</p>
      </div>
    </>
  );
  // With every record already found there is nothing for it to add: kept within reach, folded.
  if (props.done) {
    return (
      <details class="panel" style="margin-top:16px">
        <summary id="cloudflare-setup">Set up at Cloudflare <span class="muted small">(every record above is already published)</span></summary>
        {form}
      </details>
    );
  }
  return (
    <section class="panel" aria-labelledby="cloudflare-setup" style="margin-top:16px">
      <h2 id="cloudflare-setup">Set up at Cloudflare</h2>
      {form}
    </section>
  );
}

/** One record's outcome at Cloudflare, as a sentence. */
export function autoConfigureLine(r: AutoConfiguredRecord): string {
  const what = `${r.record} ${r.type} at ${r.fqdn}`;
  if (r.result === "created") return `Created: ${what}.`;
  if (r.result === "already_present") return `Already there: ${what}.`;
  if (r.result === "conflict") return `Conflict, change by hand: ${what}. ${r.detail ?? ""}`.trim();
  if (r.result === "failed") return `Failed: ${what}. ${r.detail ?? ""}`.trim();
  return `Not added: ${what}. ${r.detail ?? ""}`.trim();
}

/** What the setup did, in one sentence above the list. */
export function autoConfigureNotice(zone: string, records: AutoConfiguredRecord[], status: string, zoneStatus: string | null = "active"): string {
  const count = (k: AutoConfiguredRecord["result"]) => records.filter((r) => r.result === k).length;
  const parts = [`${count("created")} created`, `${count("already_present")} already there`];
  if (count("conflict")) parts.push(`${count("conflict")} to settle by hand`);
  if (count("failed")) parts.push(`${count("failed")} failed`);
  const after = status === "verified" ? "The domain is verified and can send." : `The domain is ${status.replace(/_/g, " ")} for now; tern keeps checking for 72 hours.`;
  // A zone whose nameservers are not Cloudflare's yet holds the records but serves none.
  const inactive = zoneStatus && zoneStatus !== "active" ? ` The zone is ${zoneStatus} at Cloudflare: its records are answered only once the domain's nameservers are Cloudflare's.` : "";
  return `In the Cloudflare zone ${zone}: ${parts.join(", ")}. ${after}${inactive}`;
}

// ---- API keys ---------------------------------------------------------------------------

async function apiKeysPage(c: DashCtx) {
  const v = c.get("viewer");
  const [keys, domains] = await Promise.all([listApiKeyDetails(c.env.DB, v.account.id, { limit: 100 }), listDomains(c.env.DB, v.account.id, { limit: 100 })]);
  const domainName = new Map(domains.data.map((d) => [d.id, unicodeName(d.name)]));
  return page(c, "API keys", (
    <>
      {v.canManage ? (
        <>
          <form method="post" class="panel row" data-api="/dashboard/api/api-keys" data-show="new-key" data-stale="key-list" aria-label="Create an API key">
            <label>Name<input name="name" maxlength={50} required placeholder="Production" /></label>
            <label>Permission
              <select name="permission"><option value="full_access">full access</option><option value="sending_access">sending only</option></select>
            </label>
            <label>Domain (sending-only keys)
              <select name="domain_id"><option value="">any domain</option>{domains.data.map((d) => <option value={d.id}>{unicodeName(d.name)}</option>)}</select>
            </label>
            <button type="submit">Create key</button>
          </form>
          <div id="new-key" class="secret" hidden role="status">
            <p><strong>Copy this key now.</strong> tern keeps only its hash; it will not be shown again.</p>
            <div class="row copy-row">
              <label>New API key<input id="new-key-token" data-field="token" readonly class="mono" size={52} /></label>
              <button type="button" class="secondary" data-copy-from="new-key-token" aria-label="Copy the key">Copy</button>
            </div>
            <p><a href="/dashboard/api-keys">Done: back to the list</a></p>
          </div>
        </>
      ) : <p class="notice">Only owners and admins create and revoke API keys.</p>}
      <div id="key-list">{keys.data.length === 0 ? (
        <Empty title="No API keys."><p>Create a key to send with the API, an SDK or SMTP.</p></Empty>
      ) : (
        <table>
          <thead><tr><th scope="col">Name</th><th scope="col">Permission</th><th scope="col">Key</th><th scope="col">Created</th><th scope="col">Last used</th>{v.canManage ? <th scope="col"><span class="muted">Actions</span></th> : null}</tr></thead>
          <tbody>{keys.data.map((k) => (
            <tr>
              <td>{k.name}</td>
              <td>{k.permission === "full_access" ? "full access" : `sending only, ${k.domain_id ? domainName.get(k.domain_id) ?? "a deleted domain" : "any domain"}`}</td>
              <td class="mono">{k.token_prefix}…</td>
              <td><Time at={k.created_at} /></td><td><Time at={k.last_used_at} /></td>
              {v.canManage ? (
                <td>
                  <form method="post" class="inline" data-api={`/dashboard/api/api-keys/${k.id}/revoke`} data-confirm={`Revoke ${k.name}? Apps using it stop working at once.`}>
                    <button type="submit" class="danger" aria-label={`Revoke ${k.name}`}>Revoke</button>
                  </form>
                </td>
              ) : null}
            </tr>
          ))}</tbody>
        </table>
      )}</div>
    </>
  ));
}

// ---- Webhooks ---------------------------------------------------------------------------

/** "1 event", "2 events". */
export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

const EVENT_GROUPS = [
  { name: "Email", types: EMAIL_EVENT_TYPES },
  { name: "Contact", types: CONTACT_EVENT_TYPES },
  { name: "Domain", types: DOMAIN_EVENT_TYPES },
] as const;

/** The event types as checkboxes, a fieldset per group, each with a "select all" (app.js keeps
 * it in step); the select-all box has no name, so only the types are sent, as a list. */
function EventPicker(props: { chosen: readonly string[] }) {
  return (
    <div class="event-groups">
      {EVENT_GROUPS.map((g) => (
        <fieldset class="choices">
          <legend>{g.name} events</legend>
          <label class="check select-all"><input type="checkbox" data-select-all checked={g.types.every((t) => props.chosen.includes(t))} />All {g.name.toLowerCase()} events</label>
          {g.types.map((t) => (
            <label class="check"><input type="checkbox" name="events" value={t} data-list checked={props.chosen.includes(t)} />{t}</label>
          ))}
        </fieldset>
      ))}
    </div>
  );
}

async function webhooksPage(c: DashCtx) {
  const v = c.get("viewer");
  const hooks = await listWebhooks(c.env.DB, v.account.id, { limit: 100 });
  return page(c, "Webhooks", (
    <>
      {v.canManage ? (
        <>
          <form method="post" class="panel" data-api="/dashboard/api/webhooks" data-show="new-webhook" data-stale="webhook-list" aria-label="Add a webhook endpoint">
            <div class="row">
              <label style="flex:1">Endpoint URL<input name="endpoint" type="url" required placeholder="https://example.com/webhooks/tern" /></label>
            </div>
            <EventPicker chosen={EMAIL_EVENT_TYPES} />
            {/* After the events, as on the endpoint's own page: choose them, then add. */}
            <div style="margin-top:12px"><button type="submit">Add endpoint</button></div>
          </form>
          <div id="new-webhook" class="secret" hidden role="status">
            <p><strong>Copy the signing secret now.</strong> It verifies tern's signatures and is not shown again.</p>
            <div class="row copy-row">
              <label>Signing secret<input id="new-webhook-secret" data-field="signing_secret" readonly class="mono" size={52} /></label>
              <button type="button" class="secondary" data-copy-from="new-webhook-secret" aria-label="Copy the secret">Copy</button>
            </div>
            <p><a href="/dashboard/webhooks">Done: back to the list</a></p>
          </div>
        </>
      ) : null}
      <div id="webhook-list">{hooks.data.length === 0 ? (
        <Empty title="No webhook endpoints."><p>Add an endpoint to hear about deliveries, bounces, opens and clicks as they happen.</p></Empty>
      ) : (
        <table>
          <thead><tr><th scope="col">Endpoint</th><th scope="col">Events</th><th scope="col">Status</th><th scope="col"><span class="muted">Actions</span></th></tr></thead>
          <tbody>{hooks.data.map((h) => (
            <tr>
              <td class="mono"><a href={`/dashboard/webhooks/${h.id}`}>{h.endpoint}</a></td>
              <td>{plural(h.events.length, "event")}</td>
              <td><Badge value={h.status} /></td>
              <td>{v.canManage ? (
                <div class="row">
                  <form method="post" class="inline" data-api={`/dashboard/api/webhooks/${h.id}/status`}>
                    <input type="hidden" name="status" value={h.status === "enabled" ? "disabled" : "enabled"} />
                    <button type="submit" class="secondary">{h.status === "enabled" ? "Disable" : "Enable"}</button>
                  </form>
                  <form method="post" class="inline" data-api={`/dashboard/api/webhooks/${h.id}/delete`} data-confirm={`Delete the endpoint ${h.endpoint}?`}>
                    <button type="submit" class="danger">Delete</button>
                  </form>
                </div>
              ) : null}</td>
            </tr>
          ))}</tbody>
        </table>
      )}</div>
    </>
  ));
}

async function webhookPage(c: DashCtx) {
  const v = c.get("viewer");
  const hook = webhookView(await findWebhook(c.env.DB, v.account.id, c.req.param("id")!));
  const deliveries = await listWebhookDeliveries(c.env.DB, v.account.id, hook.id, { limit: 50, after: c.req.query("after") || undefined });
  return page(c, "Webhook endpoint", (
    <>
      <p><a href="/dashboard/webhooks">← All webhooks</a></p>
      <section class="panel">
        <dl class="fields">
          <dt>Endpoint</dt><dd class="mono">{hook.endpoint}</dd>
          <dt>Status</dt><dd><Badge value={hook.status} />{hook.disabled_reason ? <span class="muted"> {hook.disabled_reason}</span> : null}</dd>
          <dt>Events</dt><dd>{hook.events.join(", ")}</dd>
        </dl>
      </section>
      {v.canManage ? (
        <>
          <details class="panel" id="edit-webhook">
            <summary>Edit the endpoint</summary>
            <form method="post" class="stack" data-api={`/dashboard/api/webhooks/${hook.id}`} aria-label="Edit the webhook endpoint">
              <label>Endpoint URL<input name="endpoint" type="url" required value={hook.endpoint} /></label>
              <EventPicker chosen={hook.events} />
              <label class="check"><input type="checkbox" name="enabled" checked={hook.status === "enabled"} />Enabled: send events to this endpoint</label>
              <div><button type="submit">Save changes</button></div>
            </form>
          </details>
          <form method="post" data-api={`/dashboard/api/webhooks/${hook.id}/rotate`} data-show="rotated" data-confirm="Make a new signing secret? The current one keeps working for a while, so you can switch over.">
            <button type="submit" class="secondary">Rotate the signing secret</button>
          </form>
          <div id="rotated" class="secret" hidden role="status">
            <p><strong>Copy the new signing secret now.</strong> The previous one also signs until <span data-field="previous_secret_expires_at"></span>.</p>
            <div class="row copy-row">
              <label>New signing secret<input id="rotated-secret" data-field="signing_secret" readonly class="mono" size={52} /></label>
              <button type="button" class="secondary" data-copy-from="rotated-secret" aria-label="Copy the new secret">Copy</button>
            </div>
          </div>
        </>
      ) : null}
      <h2>Deliveries</h2>
      {deliveries.data.length === 0 ? (
        <Empty title="Nothing delivered yet."><p>Events appear here as tern sends them to this endpoint.</p></Empty>
      ) : (
        <table>
          <thead><tr><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Last attempt</th><th scope="col"><span class="muted">Actions</span></th></tr></thead>
          <tbody>{deliveries.data.map((d) => (
            <tr>
              <td>{d.type}<div class="muted mono">{d.event_id}</div></td>
              <td><Badge value={String(d.status)} /></td>
              <td><a href={`/dashboard/webhooks/${hook.id}/deliveries/${d.id}`}>{plural(d.attempts, "attempt")}</a></td>
              <td><Time at={d.last_attempt_at} /></td>
              <td>{v.canManage ? (
                <form method="post" class="inline" data-api={`/dashboard/api/webhooks/${hook.id}/deliveries/${d.id}/replay`}>
                  <button type="submit" class="secondary" aria-label={`Send ${d.type} again`}>Replay</button>
                </form>
              ) : null}</td>
            </tr>
          ))}</tbody>
        </table>
      )}
    </>
  ));
}

async function deliveryPage(c: DashCtx) {
  const v = c.get("viewer");
  const hookId = c.req.param("id")!;
  const attempts = await listWebhookAttempts(c.env.DB, v.account.id, hookId, c.req.param("delivery")!, { limit: 100 });
  return page(c, "Delivery attempts", (
    <>
      <p><a href={`/dashboard/webhooks/${hookId}`}>← The endpoint</a></p>
      {attempts.data.length === 0 ? <Empty title="Not attempted yet."><p>The first attempt is on its way.</p></Empty> : (
        <table>
          <thead><tr><th scope="col">#</th><th scope="col">Started</th><th scope="col">Answer</th><th scope="col">Took</th><th scope="col">Response or error</th></tr></thead>
          <tbody>{attempts.data.map((a) => (
            <tr>
              <td>{a.attempt}</td><td><Time at={a.started_at} /></td>
              <td><Badge value={a.ok ? "delivered" : "failed"} /> {a.status_code ?? ""}</td>
              <td>{a.duration_ms} ms</td>
              <td class="mono">{a.error ?? a.response_excerpt ?? ""}</td>
            </tr>
          ))}</tbody>
        </table>
      )}
    </>
  ));
}

// ---- Suppressions and received mail -------------------------------------------------------

async function suppressionsPage(c: DashCtx) {
  const v = c.get("viewer");
  const after = c.req.query("after") || undefined;
  const { q, cut } = searchTerm(c.req.query("q"));
  const list = await listSuppressions(c.env.DB, v.account.id, { limit: 50, ...(after ? { after } : {}) }, undefined, q);
  const last = list.data[list.data.length - 1];
  return page(c, "Suppressions", (
    <>
      <p class="muted">tern does not send to these addresses: hard bounces and complaints add themselves; you can add and remove by hand.</p>
      {v.canManage ? (
        <form method="post" class="panel row" data-api="/dashboard/api/suppressions" aria-label="Suppress an address">
          <label>Address<input type="email" name="email" required /></label>
          <label>Note<input name="detail" maxlength={1000} placeholder="why (optional)" /></label>
          <button type="submit">Suppress</button>
        </form>
      ) : <p class="muted">Only owners and admins add or remove suppressions.</p>}
      <form class="row" method="get" action="/dashboard/suppressions" role="search" aria-label="Search suppressions" style="margin-bottom:12px">
        <label>Search<input type="search" name="q" value={q ?? ""} placeholder="address or part of one" size={28} maxlength={MAX_SEARCH_CHARS} /></label>
        <button type="submit" class="secondary">Search</button>
        {q ? <a class="button secondary" href="/dashboard/suppressions">Clear</a> : null}
      </form>
      {cut ? <p class="error" role="alert">{CUT_NOTE}</p> : null}
      {list.data.length === 0 ? (
        q ? <Empty title={`No suppressed address holds "${q}".`}><p>Check the spelling or <a href="/dashboard/suppressions">show every address</a>.</p></Empty>
          : <Empty title="No suppressed addresses."><p>Addresses that bounce hard or complain appear here{v.canManage ? "; suppress one by hand above to stop mail to it" : ""}.</p></Empty>
      ) : (
        <table>
          <thead><tr><th scope="col">Address</th><th scope="col">Reason</th><th scope="col">Note</th><th scope="col">Since</th><th scope="col"><span class="muted">Actions</span></th></tr></thead>
          <tbody>{list.data.map((x) => (
            <tr>
              <td>{x.email}</td>
              <td>{x.reason}{x.email_id ? <> · <a href={`/dashboard/emails/${x.email_id}`}>the email</a></> : null}</td>
              <td>{v.canManage ? (
                <form method="post" class="row nowrap" data-api={`/dashboard/api/suppressions/${x.id}/note`}>
                  <input name="detail" value={x.detail ?? ""} maxlength={1000} data-keep-empty aria-label={`Note on ${x.email}`} placeholder="no note" size={24} />
                  <button type="submit" class="secondary" aria-label={`Save the note on ${x.email}`}>Save</button>
                </form>
              ) : x.detail ? <span class="muted">{x.detail}</span> : null}</td>
              <td><Time at={x.created_at} /></td>
              <td>{v.canManage ? (
                <form method="post" class="inline" data-api={`/dashboard/api/suppressions/${x.id}/remove`} data-confirm={`Send to ${x.email} again?`}>
                  <button type="submit" class="danger" aria-label={`Remove ${x.email}`}>Remove</button>
                </form>
              ) : null}</td>
            </tr>
          ))}</tbody>
        </table>
      )}
      {after || (list.has_more && last) ? (
        <nav class="pager" aria-label="Pages">
          {after ? <a class="button secondary" href={`/dashboard/suppressions${qs({ q })}`}>Newest</a> : null}
          {list.has_more && last ? <a class="button secondary" href={`/dashboard/suppressions${qs({ q, after: last.id })}`}>Older</a> : null}
        </nav>
      ) : null}
    </>
  ));
}

async function receivedPage(c: DashCtx) {
  const v = c.get("viewer");
  const after = c.req.query("after") || undefined;
  const list = await listReceived(c.env.DB, v.account.id, { limit: 50, after });
  const last = list.data[list.data.length - 1];
  return page(c, "Received mail", list.data.length === 0 ? (
    <Empty title="No mail received yet."><p>Turn on receiving for a domain (its MX record appears with its records); mail sent to it lands here.</p></Empty>
  ) : (
    <>
      <table>
        <thead><tr><th scope="col">From</th><th scope="col">To</th><th scope="col">Subject</th><th scope="col">Received</th></tr></thead>
        <tbody>{list.data.map((m) => (
          <tr><td>{m.from}</td><td>{m.to.join(", ")}</td><td><a href={`/dashboard/received/${m.id}`}>{m.subject || "(no subject)"}</a></td><td><Time at={m.created_at} /></td></tr>
        ))}</tbody>
      </table>
      {list.has_more && last ? <nav class="pager" aria-label="Pages"><a class="button secondary" href={`/dashboard/received?after=${last.id}`}>Older</a></nav> : null}
    </>
  ));
}

async function receivedOne(c: DashCtx) {
  const v = c.get("viewer");
  // The API's download links are signed for an API key; the dashboard links to its own
  // endpoint instead, which the session and the account authorise.
  const m = await getReceived(c.env, readConfig(c.env), v.account.id, "dashboard", c.req.param("id")!, new URL(c.req.url).origin);
  return page(c, m.subject || "(no subject)", (
    <>
      <p><a href="/dashboard/received">← All received mail</a></p>
      <section class="panel">
        <dl class="fields">
          <dt>From</dt><dd>{m.from}</dd><dt>To</dt><dd>{m.to.join(", ")}</dd>
          <dt>Received</dt><dd><Time at={m.created_at} /></dd>
          <dt>Authentication</dt><dd>SPF {String(m.authentication.spf ?? "none")}, DKIM {String(m.authentication.dkim ?? "none")}, DMARC {String(m.authentication.dmarc ?? "none")}</dd>
          {m.attachments.length ? (<><dt>Attachments</dt><dd>{m.attachments.map((a) => (
            <div><a href={`/dashboard/api/received/${m.id}/attachments/${a.id}`} download={a.filename ?? "attachment"}>{a.filename ?? "attachment"}</a> <span class="muted">{a.content_type}, {formatBytes(a.size)}</span></div>
          ))}</dd></>) : null}
        </dl>
      </section>
      <section class="panel">
        <h2>Preview</h2>
        {m.html ? <iframe class="preview" title="The message's HTML" sandbox="" srcdoc={m.html} referrerpolicy="no-referrer"></iframe> : <p class="muted">This message has no HTML part.</p>}
        <h2>Text</h2>
        {m.text ? <pre>{m.text}</pre> : <p class="muted">This message has no text part.</p>}
      </section>
    </>
  ));
}

/** What a "Verify now" found, in a sentence for the page that loads next. */
export function verifyNotice(status: string, last: ReturnType<typeof lastCheckOf>): string {
  const results = Object.values(last?.records ?? {});
  const found = results.filter((r) => r.result === "match").length;
  if (last?.error) return "Checked just now, but DNS could not be reached: nothing changed. The reason and the next try are on this page.";
  if (status === "verified") return "Every record was found: the domain is verified and can send.";
  const wrong = results.filter((r) => r.result === "mismatch").length;
  return `Checked just now: ${found} of ${results.length} records found${wrong ? `, ${wrong} with a wrong value` : ""}. DNS changes can take a while to show; tern keeps checking for 72 hours.`;
}

export function registerResourcePages(app: Hono<DashEnv>): void {
  app.get("/suppressions", suppressionsPage);
  app.get("/received", receivedPage);
  app.get("/received/:id{[0-9a-fA-F-]{36}}", receivedOne);
  app.post("/api/suppressions", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    const b = validate(CreateSuppressionRequest, await body(c));
    const r = await addSuppression(c.env.DB, v.account.id, b.email, b.detail ?? null);
    await audit(c.env, v, { action: "suppression.added", target: r.suppression.email });
    return c.json(r.suppression, r.created ? 201 : 200);
  });
  app.post("/api/suppressions/:id/note", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    const raw = (await body<{ detail?: unknown }>(c)).detail;
    if (raw !== undefined && typeof raw !== "string") throw new DashError(422, "The note must be text.");
    const detail = typeof raw === "string" && raw.trim() ? raw.trim() : null;
    if (detail && detail.length > 1000) throw new DashError(422, "The note is too long (at most 1000 characters).");
    const r = await updateSuppressionNote(c.env.DB, v.account.id, c.req.param("id"), detail);
    await audit(c.env, v, { action: "suppression.note_changed", target: r.email });
    return c.json(r);
  });
  // A received email's attachment, streamed from R2 to a signed-in member of its account. It is
  // the sender's content: always a download (octet-stream, attachment), never rendered here.
  app.get("/api/received/:id/attachments/:attachment", async (c) => {
    const v = c.get("viewer");
    const { attachment, body: obj } = await openReceivedAttachment(c.env, v.account.id, c.req.param("id"), c.req.param("attachment"));
    return attachmentDownload(obj.body, attachment.filename);
  });
  app.post("/api/suppressions/:id/remove", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    const r = await removeSuppressionById(c.env.DB, v.account.id, c.req.param("id"));
    await audit(c.env, v, { action: "suppression.removed", target: r.id });
    return c.json(r);
  });
  app.get("/emails", emailsPage);
  app.get("/emails/:id{[0-9a-fA-F-]{36}}", emailPage);
  app.get("/domains", domainsPage);
  app.get("/domains/:id{[0-9a-fA-F-]{36}}", domainPage);
  app.get("/api-keys", apiKeysPage);
  app.get("/webhooks", webhooksPage);
  app.get("/webhooks/:id{[0-9a-fA-F-]{36}}", webhookPage);
  app.get("/webhooks/:id{[0-9a-fA-F-]{36}}/deliveries/:delivery{[0-9a-fA-F-]{36}}", deliveryPage);

  app.post("/api/emails/:id/cancel", async (c) => {
    const v = c.get("viewer");
    const r = await cancelEmail(c.env.DB, v.account.id, c.req.param("id"), Date.now());
    await audit(c.env, v, { action: "email.canceled", target: r.id });
    return c.json(r);
  });

  app.post("/api/domains", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    const b = validate(CreateDomainRequest, await body(c));
    const view = await createDomain(c.env, readConfig(c.env), v.account.id, {
      name: b.name, region: b.region, customReturnPath: b.custom_return_path, openTracking: b.open_tracking,
      clickTracking: b.click_tracking, tls: b.tls, receiving: b.receiving, dkimAlgorithm: b.dkim_algorithm,
    }, Date.now());
    await audit(c.env, v, { action: "domain.created", target: view.name, detail: { id: view.id, region: view.region } });
    return c.json({ id: view.id }, 201);
  });
  app.post("/api/domains/:id/verify", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    // A check costs DNS lookups (and maybe a Cloudflare call): it spends the account's request
    // rate as the API's POST /domains/{id}/verify does.
    await takeRequest(c.env, principalOf(v));
    const config = readConfig(c.env);
    const checked = await checkDomain(c.env, config, await findDomain(c.env.DB, v.account.id, c.req.param("id")), Date.now(), { restart: true });
    await audit(c.env, v, { action: "domain.verification_requested", target: checked.row.name });
    const status = domainView(checked, config).status;
    return c.json({ status, notice: verifyNotice(status, lastCheckOf(checked.row)) });
  });
  app.post("/api/domains/:id/auto-configure", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    await takeRequest(c.env, principalOf(v));
    const b = validate(AutoConfigureRequest, await body(c));
    const config = readConfig(c.env);
    const current = await findDomain(c.env.DB, v.account.id, c.req.param("id"));
    const done = await autoConfigureDomain(c.env, config, current, b.api_token, Date.now());
    const count = (k: AutoConfiguredRecord["result"]) => done.records.filter((r) => r.result === k).length;
    await audit(c.env, v, { action: "domain.auto_configured", target: current.row.name, detail: { zone: done.zone.name, created: count("created"), conflicts: count("conflict"), failed: count("failed") } });
    const status = domainView(done.domain, config).status;
    return c.json({ status, notice: autoConfigureNotice(done.zone.name, done.records, status, done.zone.status), lines: done.records.map(autoConfigureLine) });
  });
  app.post("/api/domains/:id/settings", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    // A changed tracking label may call Cloudflare: the account's rate, as the API's PATCH.
    await takeRequest(c.env, principalOf(v));
    const raw = await body(c);
    // An emptied field takes the tracking host away.
    const label = raw && typeof raw === "object" ? (raw as Record<string, unknown>).tracking_subdomain : undefined;
    if (typeof label === "string" && label.trim() === "") (raw as Record<string, unknown>).tracking_subdomain = null;
    const b = validate(UpdateDomainRequest, raw);
    const view = await patchDomain(c.env, readConfig(c.env), v.account.id, c.req.param("id"), { openTracking: b.open_tracking, clickTracking: b.click_tracking, tls: b.tls, receiving: b.receiving, trackingSubdomain: b.tracking_subdomain }, Date.now());
    await audit(c.env, v, { action: "domain.updated", target: view.name, detail: b });
    return c.json({ ok: true });
  });
  app.post("/api/domains/:id/rotate-dkim", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    // A new key pair is costly work: the account's rate, as the API's rotate.
    await takeRequest(c.env, principalOf(v));
    const b = validate(RotateDkimRequest, await body(c));
    const config = readConfig(c.env);
    const current = await findDomain(c.env.DB, v.account.id, c.req.param("id"));
    const algorithm = rotationAlgorithm(current, b.algorithm);
    const rotated = await rotateDkim(c.env, config, current, algorithm, Date.now());
    await audit(c.env, v, { action: "domain.dkim_rotated", target: rotated.row.name, detail: { algorithm } });
    return c.json({ ok: true });
  });
  app.post("/api/domains/:id/delete", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    await takeRequest(c.env, principalOf(v));
    const current = await findDomain(c.env.DB, v.account.id, c.req.param("id"));
    await deleteDomain(c.env, readConfig(c.env), current, Date.now());
    await audit(c.env, v, { action: "domain.deleted", target: current.row.name });
    return c.json({ ok: true });
  });

  app.post("/api/api-keys", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    const b = validate(CreateApiKeyRequest, await body(c));
    const created = await createApiKey(c.env.DB, v.account.id, { name: b.name, permission: b.permission, domainId: b.domain_id });
    await audit(c.env, v, { action: "api_key.created", target: b.name, detail: { id: created.id, permission: b.permission } });
    return c.json(created, 201);
  });
  app.post("/api/api-keys/:id/revoke", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    const r = await revokeApiKey(c.env.DB, v.account.id, c.req.param("id"));
    await audit(c.env, v, { action: "api_key.revoked", target: r.id });
    return c.json(r);
  });

  app.post("/api/webhooks", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    const b = validate(CreateWebhookRequest, await body(c));
    const created = await createWebhook(c.env.DB, readConfig(c.env), v.account.id, b);
    await audit(c.env, v, { action: "webhook.created", target: b.endpoint, detail: { id: created.id } });
    return c.json(created, 201);
  });
  // The endpoint's edit form: the API's PATCH /webhooks/{id} schema and service (so the same
  // URL and private-address rules); the checkbox "enabled" is the API's status.
  app.post("/api/webhooks/:id{[0-9a-fA-F-]{36}}", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    const b = await body<{ endpoint?: unknown; events?: unknown; enabled?: unknown }>(c);
    // The checkbox sends true or false: anything else would have turned the endpoint off.
    if (b.enabled !== undefined && typeof b.enabled !== "boolean") throw new DashError(422, "`enabled` must be true or false.");
    const status = b.enabled === undefined ? undefined : b.enabled === true ? "enabled" : "disabled";
    const patch = validate(UpdateWebhookRequest, { endpoint: b.endpoint, events: b.events, status });
    const before = webhookView(await findWebhook(c.env.DB, v.account.id, c.req.param("id")));
    const after = await updateWebhook(c.env.DB, readConfig(c.env), v.account.id, before.id, patch);
    const changed: Record<string, unknown> = {};
    if (after.endpoint !== before.endpoint) changed.endpoint = after.endpoint;
    if (after.events.join() !== before.events.join()) changed.events = after.events;
    if (after.status !== before.status) changed.status = after.status;
    await audit(c.env, v, { action: "webhook.updated", target: after.id, detail: changed });
    return c.json(after);
  });
  app.post("/api/webhooks/:id/status", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    // The API's own rule for a status (anything but the two used to turn the endpoint on).
    const { status } = validate(UpdateWebhookRequest.required({ status: true }), { status: (await body<{ status?: unknown }>(c)).status });
    const r = await updateWebhook(c.env.DB, readConfig(c.env), v.account.id, c.req.param("id"), { status });
    await audit(c.env, v, { action: `webhook.${status}`, target: c.req.param("id") });
    return c.json(r);
  });
  app.post("/api/webhooks/:id/rotate", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    const r = await rotateWebhookSecret(c.env.DB, readConfig(c.env), v.account.id, c.req.param("id"));
    await audit(c.env, v, { action: "webhook.secret_rotated", target: c.req.param("id") });
    return c.json(r);
  });
  app.post("/api/webhooks/:id/deliveries/:delivery/replay", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    const r = await replayWebhookDelivery(c.env, readConfig(c.env), v.account.id, c.req.param("id"), c.req.param("delivery"));
    await audit(c.env, v, { action: "webhook.delivery_replayed", target: c.req.param("delivery"), detail: { webhook: c.req.param("id") } });
    return c.json(r);
  });
  app.post("/api/webhooks/:id/delete", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    const r = await deleteWebhook(c.env.DB, v.account.id, c.req.param("id"));
    await audit(c.env, v, { action: "webhook.deleted", target: c.req.param("id") });
    return c.json(r);
  });
}
