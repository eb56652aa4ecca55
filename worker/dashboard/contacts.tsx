// The Contacts pages (contacts, segments, topics, contact properties, CSV imports) and their
// JSON endpoints. Thin callers of worker/contacts/ with the REST API's request schemas, so
// validation, events (contact.created/updated/deleted) and tenancy are written once; this file
// only turns form fields (strings) into the API's request shapes.
//
// Who may act: every member of the account, members included. Contacts are the account's
// audience, like the emails members already send; the issue keeps only keys, members and
// billing-like settings for owners and admins. Every change is in the audit log.
import type { Hono } from "hono";
import { z } from "@hono/zod-openapi";
import {
  addContactToSegment,
  contactProperties,
  createContact,
  deleteContact,
  findContact,
  listContacts,
  listContactSegments,
  listContactTopics,
  removeContactFromSegment,
  updateContact,
  updateContactTopics,
} from "../contacts/contacts.ts";
import { createImport, csvHeader, decodeCsv, findImport, importFailures, listImports, MAX_RECORDED_FAILURES, optionsOf } from "../contacts/imports.ts";
import { csvFile } from "../csv.ts";
import { createProperty, deleteProperty, fallbackOf, findProperty, listProperties, propertiesByKey, updateProperty } from "../contacts/properties.ts";
import { createSegment, deleteSegment, listSegments, segmentCounts } from "../contacts/segments.ts";
import { createTopic, deleteTopic, listTopics, updateTopic } from "../contacts/topics.ts";
import type { ContactPropertyRow, SegmentRow, TopicRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { readBodyLimited, validate } from "../http.ts";
import { readImportForm } from "../routes/contact-imports.ts";
import { CreateContactPropertyRequest, UpdateContactPropertyRequest } from "../routes/contact-properties.ts";
import { CreateContactRequest, createFrom, patchFrom, TopicChoice, UpdateContactRequest } from "../routes/contacts.ts";
import { CreateSegmentRequest } from "../routes/segments.ts";
import { CreateTopicRequest, UpdateTopicRequest } from "../routes/topics.ts";
import { Badge, Copy, Empty, Time, qs } from "./layout.tsx";
import { body, DashError, page, type DashCtx, type DashEnv } from "./routes.tsx";
import { audit } from "./viewer.ts";
import { readConfig } from "../config.ts";
import { CUT_NOTE, MAX_SEARCH_CHARS, searchTerm } from "../db/search.ts";

const PAGE_SIZE = 25;
/** A path id: anything else (such as "imports") is another route. */
const ID = "{[0-9a-fA-F-]{36}}";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const TABS = [
  ["/dashboard/contacts", "Contacts"],
  ["/dashboard/contacts/segments", "Segments"],
  ["/dashboard/contacts/topics", "Topics"],
  ["/dashboard/contacts/properties", "Properties"],
  ["/dashboard/contacts/imports", "Import CSV"],
] as const;

function Tabs(props: { current: string }) {
  return (
    <nav class="subnav" aria-label="Contacts sections">
      {TABS.map(([href, label]) => <a href={href} aria-current={props.current === href ? "page" : undefined}>{label}</a>)}
    </nav>
  );
}

const fullName = (c: { firstName: string | null; lastName: string | null }) => [c.firstName, c.lastName].filter(Boolean).join(" ");

/** Every page of a list service, for the short lists a form offers (segments, topics, properties). */
async function all<T extends { id: string }>(list: (page: { limit: number; after?: string }) => Promise<{ data: T[]; has_more: boolean }>, cap = 500): Promise<T[]> {
  const out: T[] = [];
  let after: string | undefined;
  for (;;) {
    const r = await list({ limit: 100, ...(after ? { after } : {}) });
    out.push(...r.data);
    if (!r.has_more || out.length >= cap || r.data.length === 0) return out;
    after = r.data[r.data.length - 1]!.id;
  }
}

const accountSegments = (c: DashCtx) => all<SegmentRow>((p) => listSegments(c.env.DB, c.get("viewer").account.id, p));
const accountTopics = (c: DashCtx) => all<TopicRow>((p) => listTopics(c.env.DB, c.get("viewer").account.id, p));
const accountProperties = (c: DashCtx) => all<ContactPropertyRow>((p) => listProperties(c.env.DB, c.get("viewer").account.id, p));

const SUBSCRIPTION_WORDS = { opt_in: "everyone, unless they opt out", opt_out: "only those who opt in" } as const;

// ---- pages -------------------------------------------------------------------------------

async function contactsPage(c: DashCtx) {
  const v = c.get("viewer");
  const { q, cut } = searchTerm(c.req.query("q"));
  const segment = c.req.query("segment") || undefined;
  const afterRaw = c.req.query("after");
  const after = afterRaw && UUID.test(afterRaw) ? afterRaw.toLowerCase() : undefined;
  const segments = await accountSegments(c);
  const known = segment === undefined || (UUID.test(segment) && segments.some((s) => s.id === segment.toLowerCase()));
  const list = known ? await listContacts(c.env.DB, v.account.id, { limit: PAGE_SIZE, ...(after ? { after } : {}) }, segment?.toLowerCase(), q) : undefined;
  const rows = list?.data ?? [];
  const last = rows[rows.length - 1];
  const filtered = !!(q || segment);
  return page(c, "Contacts", (
    <>
      <Tabs current="/dashboard/contacts" />
      <form method="post" class="panel row" data-api="/dashboard/api/contacts" aria-label="Add a contact">
        <label>Email<input type="email" name="email" required placeholder="ada@example.com" size={26} /></label>
        <label>First name<input name="first_name" maxlength={256} size={14} /></label>
        <label>Last name<input name="last_name" maxlength={256} size={14} /></label>
        {segments.length ? (
          <fieldset class="choices">
            <legend>Segments</legend>
            {segments.slice(0, 20).map((s) => <label class="check"><input type="checkbox" name="segments" value={s.id} data-list />{s.name}</label>)}
          </fieldset>
        ) : null}
        <button type="submit">Add contact</button>
      </form>
      {/* Nothing to search until there are contacts (a search or a segment may show none, though). */}
      {rows.length === 0 && !filtered && known ? null : <form class="row" method="get" action="/dashboard/contacts" role="search" aria-label="Search contacts" style="margin-bottom:12px">
        <label>Search<input type="search" name="q" value={q ?? ""} placeholder="email or name" size={28} maxlength={MAX_SEARCH_CHARS} /></label>
        <label>Segment
          <select name="segment">
            <option value="">every contact</option>
            {segments.map((s) => <option value={s.id} selected={s.id === segment}>{s.name}</option>)}
          </select>
        </label>
        <button type="submit" class="secondary">Search</button>
        {filtered ? <a class="button secondary" href="/dashboard/contacts">Clear</a> : null}
      </form>}
      {cut ? <p class="error" role="alert">{CUT_NOTE}</p> : null}
      {!known ? (
        <Empty title="That segment does not exist (any more)."><p>It may have been deleted. <a href="/dashboard/contacts">Show every contact</a> or pick another segment.</p></Empty>
      ) : rows.length === 0 ? (
        filtered ? (
          <Empty title="No contact matches."><p>Search for part of an address or a name, or <a href="/dashboard/contacts">clear the search</a>.</p></Empty>
        ) : (
          <Empty title="No contacts yet.">
            <p>Add one with the form above, <a href="/dashboard/contacts/imports">import a CSV file</a>, or create them with the API (<code>POST /contacts</code>).</p>
          </Empty>
        )
      ) : (
        <>
          <table>
            <caption class="muted list-caption">Newest first</caption>
            <thead><tr><th scope="col">Email</th><th scope="col">Name</th><th scope="col">Subscription</th><th scope="col">Added</th></tr></thead>
            <tbody>{rows.map((r) => (
              <tr>
                <td><a href={`/dashboard/contacts/${r.id}`}>{r.email}</a></td>
                <td>{fullName(r) || <span class="muted">no name</span>}</td>
                <td><Badge value={r.unsubscribed ? "unsubscribed" : "subscribed"} /></td>
                <td><Time at={r.createdAt} /></td>
              </tr>
            ))}</tbody>
          </table>
          {after || list?.has_more ? (
            <nav class="pager" aria-label="Pages">
              {after ? <a class="button secondary" href={`/dashboard/contacts${qs({ q, segment })}`}>Newest</a> : null}
              {list?.has_more && last ? <a class="button secondary" href={`/dashboard/contacts${qs({ q, segment, after: last.id })}`}>Older</a> : null}
            </nav>
          ) : null}
        </>
      )}
    </>
  ));
}

async function contactPage(c: DashCtx) {
  const v = c.get("viewer");
  const contact = await findContact(c.env.DB, v.account.id, c.req.param("id")!);
  if (!contact) throw new DashError(404, "This contact does not exist (any more). It may have been removed.");
  const [segments, member, topics, properties] = await Promise.all([
    accountSegments(c),
    all((p) => listContactSegments(c.env.DB, v.account.id, contact.id, p).then((r) => r!)),
    all((p) => listContactTopics(c.env.DB, v.account.id, contact.id, p).then((r) => r!)),
    accountProperties(c),
  ]);
  const inSegment = new Set(member.map((m) => m.id));
  const values = contactProperties(contact);
  return page(c, contact.email, (
    <>
      <p><a href="/dashboard/contacts">← All contacts</a></p>
      <section class="panel" aria-labelledby="details">
        <h2 id="details">Details</h2>
        <dl class="fields">
          <dt>Contact id</dt><dd class="mono">{contact.id} <Copy value={contact.id} label="Copy the contact id" /></dd>
          <dt>Added</dt><dd><Time at={contact.createdAt} /></dd>
          <dt>Last changed</dt><dd><Time at={contact.updatedAt} /></dd>
          <dt>Mail</dt><dd><a href={`/dashboard/emails?q=${encodeURIComponent(contact.email)}`}>Emails sent to this address</a></dd>
        </dl>
        <h2 id="edit">Name, subscription and properties</h2>
        <form method="post" data-api={`/dashboard/api/contacts/${contact.id}`} aria-labelledby="edit" class="stack">
          <div class="row">
            <label>First name<input name="first_name" value={contact.firstName ?? ""} maxlength={256} data-keep-empty /></label>
            <label>Last name<input name="last_name" value={contact.lastName ?? ""} maxlength={256} data-keep-empty /></label>
            <label class="check"><input type="checkbox" name="unsubscribed" checked={contact.unsubscribed} />Unsubscribed from every broadcast</label>
          </div>
          {properties.length ? (
            <fieldset class="choices">
              <legend>Properties (empty uses the fallback)</legend>
              {properties.map((p) => (
                <label><span>{p.key} <span class="muted">({p.type === "number" ? "number" : "text"}{fallbackOf(p) !== null ? `, fallback ${fallbackOf(p)}` : ", no fallback"})</span></span>
                  <input name={`properties.${p.key}`} value={values[p.key] === undefined ? "" : String(values[p.key])} inputmode={p.type === "number" ? "decimal" : undefined} data-keep-empty />
                </label>
              ))}
            </fieldset>
          ) : <p class="muted">No contact properties yet. <a href="/dashboard/contacts/properties">Define one</a> (plan, company, ...) to keep it on contacts and use it in broadcasts.</p>}
          <div><button type="submit" class="secondary">Save changes</button></div>
        </form>
      </section>
      <section class="panel" aria-labelledby="segments">
        <h2 id="segments">Segments</h2>
        {segments.length === 0 ? (
          <p class="muted">No segments yet. <a href="/dashboard/contacts/segments">Create one</a> to group contacts for broadcasts.</p>
        ) : (
          <form method="post" data-api={`/dashboard/api/contacts/${contact.id}/segments`} aria-label="The contact's segments" class="stack">
            <fieldset class="choices">
              <legend>In these segments</legend>
              {segments.map((s) => <label class="check"><input type="checkbox" name="segments" value={s.id} data-list checked={inSegment.has(s.id)} />{s.name}</label>)}
            </fieldset>
            <div><button type="submit" class="secondary">Save segments</button></div>
          </form>
        )}
      </section>
      <section class="panel" aria-labelledby="topics">
        <h2 id="topics">Topics</h2>
        {topics.length === 0 ? (
          <p class="muted">No topics yet. <a href="/dashboard/contacts/topics">Create one</a> so contacts can choose which broadcasts they get.</p>
        ) : (
          <form method="post" data-api={`/dashboard/api/contacts/${contact.id}/topics`} aria-label="The contact's topics" class="stack">
            <div class="row">
              {topics.map((t) => (
                <label>{t.name}
                  <select name={`topics.${t.id}`}>
                    <option value="opt_in" selected={t.subscription === "opt_in"}>subscribed</option>
                    <option value="opt_out" selected={t.subscription === "opt_out"}>opted out</option>
                  </select>
                </label>
              ))}
            </div>
            <div><button type="submit" class="secondary">Save topics</button></div>
          </form>
        )}
      </section>
      <form method="post" data-api={`/dashboard/api/contacts/${contact.id}/delete`} data-then="/dashboard/contacts" data-confirm={`Remove ${contact.email}? Its segments and topic choices go with it.`}>
        <button type="submit" class="danger">Remove contact</button>
      </form>
    </>
  ));
}

async function segmentsPage(c: DashCtx) {
  const segments = await accountSegments(c);
  const counts = await segmentCounts(c.env.DB, segments.map((s) => s.id));
  return page(c, "Segments", (
    <>
      <Tabs current="/dashboard/contacts/segments" />
      <form method="post" class="panel row" data-api="/dashboard/api/segments" aria-label="Create a segment">
        <label>Name<input name="name" required maxlength={256} placeholder="Newsletter readers" size={28} /></label>
        <button type="submit">Create segment</button>
      </form>
      {segments.length === 0 ? (
        <Empty title="No segments yet."><p>A segment is a group of contacts a broadcast goes to. Create one above, then add contacts to it from a contact's page or with a CSV import.</p></Empty>
      ) : (
        <table>
          <thead><tr><th scope="col">Name</th><th scope="col">Contacts</th><th scope="col">Segment id</th><th scope="col">Created</th><th scope="col"><span class="muted">Actions</span></th></tr></thead>
          <tbody>{segments.map((s) => (
            <tr>
              <td>{s.name}</td>
              <td><a href={`/dashboard/contacts${qs({ segment: s.id })}`}>{counts.get(s.id) ?? 0}</a></td>
              <td class="mono">{s.id} <Copy value={s.id} label={`Copy the id of ${s.name}`} /></td>
              <td><Time at={s.createdAt} /></td>
              <td>
                <form method="post" class="inline" data-api={`/dashboard/api/segments/${s.id}/delete`} data-confirm={`Delete the segment ${s.name}? Its ${counts.get(s.id) ?? 0} contacts stay; they leave the segment.`}>
                  <button type="submit" class="danger" aria-label={`Delete the segment ${s.name}`}>Delete</button>
                </form>
              </td>
            </tr>
          ))}</tbody>
        </table>
      )}
    </>
  ));
}

async function topicsPage(c: DashCtx) {
  const topics = await accountTopics(c);
  return page(c, "Topics", (
    <>
      <Tabs current="/dashboard/contacts/topics" />
      <form method="post" class="panel row" data-api="/dashboard/api/topics" aria-label="Create a topic">
        <label>Name<input name="name" required maxlength={50} placeholder="Product news" size={18} /></label>
        <label>Description<input name="description" maxlength={200} placeholder="optional" size={24} /></label>
        <label>Who gets it
          <select name="default_subscription">
            <option value="opt_in">{SUBSCRIPTION_WORDS.opt_in}</option>
            <option value="opt_out">{SUBSCRIPTION_WORDS.opt_out}</option>
          </select>
        </label>
        <label>On the preference page
          <select name="visibility"><option value="public">shown (public)</option><option value="private">hidden (private)</option></select>
        </label>
        <button type="submit">Create topic</button>
      </form>
      {topics.length === 0 ? (
        <Empty title="No topics yet."><p>A topic is what a broadcast is about (product news, offers); contacts can opt out of one without leaving everything. Create one above. Who gets it cannot change later.</p></Empty>
      ) : (
        <table>
          <thead><tr><th scope="col">Name</th><th scope="col">Description</th><th scope="col">Preference page</th><th scope="col">Who gets it</th><th scope="col"><span class="muted">Actions</span></th></tr></thead>
          <tbody>{topics.map((t) => {
            // One form per row, its fields in the row's cells (the form attribute ties them).
            const form = `topic-${t.id}`;
            return (
              <tr>
                <td>
                  <input form={form} name="name" value={t.name} maxlength={50} required size={16} aria-label={`Name of the topic ${t.name}`} />
                  <div class="muted mono small">{t.id} <Copy value={t.id} label={`Copy the id of ${t.name}`} /></div>
                </td>
                <td><input form={form} name="description" value={t.description ?? ""} maxlength={200} data-keep-empty size={22} placeholder="none" aria-label={`Description of ${t.name}`} /></td>
                <td>
                  <select form={form} name="visibility" aria-label={`Is ${t.name} shown on the preference page?`}>
                    <option value="public" selected={t.visibility === "public"}>shown</option><option value="private" selected={t.visibility === "private"}>hidden</option>
                  </select>
                </td>
                <td>{SUBSCRIPTION_WORDS[t.defaultSubscription]}</td>
                <td class="actions">
                  <form id={form} method="post" class="inline" data-api={`/dashboard/api/topics/${t.id}`}>
                    <button type="submit" class="secondary" aria-label={`Save the topic ${t.name}`}>Save</button>
                  </form>{" "}
                  <form method="post" class="inline" data-api={`/dashboard/api/topics/${t.id}/delete`} data-confirm={`Delete the topic ${t.name}? Contacts' choices for it go with it.`}>
                    <button type="submit" class="danger" aria-label={`Delete the topic ${t.name}`}>Delete</button>
                  </form>
                </td>
              </tr>
            );
          })}</tbody>
        </table>
      )}
    </>
  ));
}

async function propertiesPage(c: DashCtx) {
  const properties = await accountProperties(c);
  return page(c, "Contact properties", (
    <>
      <Tabs current="/dashboard/contacts/properties" />
      <form method="post" class="panel row" data-api="/dashboard/api/contact-properties" aria-label="Create a contact property">
        <label>Key<input name="key" required pattern="[A-Za-z0-9_]{1,50}" title="1 to 50 letters, digits or underscores" placeholder="company_name" size={18} /></label>
        <label>Type<select name="type"><option value="string">text</option><option value="number">number</option></select></label>
        <label>Fallback<input name="fallback_value" maxlength={2000} placeholder="used when a contact has none" size={24} /></label>
        <button type="submit">Create property</button>
      </form>
      {properties.length === 0 ? (
        <Empty title="No contact properties yet."><p>A property is a value each contact may carry (company, plan, city), used as <code>{"{{{company_name}}}"}</code> in broadcasts. Create one above; its key and type are fixed, its fallback can change.</p></Empty>
      ) : (
        <table>
          <thead><tr><th scope="col">Key</th><th scope="col">Type</th><th scope="col">Fallback</th><th scope="col">Created</th><th scope="col"><span class="muted">Actions</span></th></tr></thead>
          <tbody>{properties.map((p) => (
            <tr>
              <td class="mono">{p.key}</td>
              <td>{p.type === "string" ? "text" : "number"}</td>
              <td>
                <form method="post" class="row nowrap" data-api={`/dashboard/api/contact-properties/${p.id}`}>
                  <input name="fallback_value" value={fallbackOf(p) === null ? "" : String(fallbackOf(p))} data-keep-empty aria-label={`Fallback of ${p.key}`} placeholder="none" size={18} />
                  <button type="submit" class="secondary" aria-label={`Save the fallback of ${p.key}`}>Save</button>
                </form>
              </td>
              <td><Time at={p.createdAt} /></td>
              <td>
                <form method="post" class="inline" data-api={`/dashboard/api/contact-properties/${p.id}/delete`} data-confirm={`Delete the property ${p.key}? Its value is removed from every contact.`}>
                  <button type="submit" class="danger" aria-label={`Delete the property ${p.key}`}>Delete</button>
                </form>
              </td>
            </tr>
          ))}</tbody>
        </table>
      )}
    </>
  ));
}

async function importsPage(c: DashCtx) {
  const v = c.get("viewer");
  const [segments, topics, properties, imports] = await Promise.all([
    accountSegments(c), accountTopics(c), accountProperties(c), listImports(c.env.DB, v.account.id, { limit: 20 }),
  ]);
  const running = imports.data.some((i) => i.status === "queued" || i.status === "in_progress");
  const column = (name: string, label: string, required = false) => (
    <label>{label}<select name={name} data-column={name} required={required} disabled><option value="">choose a file first</option></select></label>
  );
  return page(c, "Import contacts", (
    <>
      <Tabs current="/dashboard/contacts/imports" />
      {imports.data.length === 0 ? null : (
        <section aria-labelledby="recent">
          <h2 id="recent">Recent imports</h2>
          {running ? <p class="notice" role="status">An import is running. <a href={`/dashboard/contacts/imports`}>Refresh</a> to see its progress.</p> : null}
          <table>
            <thead><tr><th scope="col">Started</th><th scope="col">Status</th><th scope="col">Rows</th><th scope="col">Created</th><th scope="col">Updated</th><th scope="col">Skipped</th><th scope="col">Failed</th><th scope="col">Finished</th></tr></thead>
            <tbody>{imports.data.map((i) => (
              <tr data-import-id={i.id}>
                <td><a href={`/dashboard/contacts/imports/${i.id}`}><Time at={i.createdAt} /></a></td>
                <td><Badge value={i.status} />{i.error ? <div class="error">{i.error}</div> : null}</td>
                <td>{i.total}</td><td>{i.created}</td><td>{i.updated}</td><td>{i.skipped}</td>
                <td>{i.failed ? <a href={`/dashboard/contacts/imports/${i.id}#failures`} aria-label={`${i.failed} failed: see which rows and why`}>{i.failed}</a> : 0}</td>
                <td>{i.completedAt ? <Time at={i.completedAt} /> : <span class="muted">not yet</span>}</td>
              </tr>
            ))}</tbody>
          </table>
          <p class="muted">Failed rows have no valid address, or a value that does not fit (a number property that is not a number, a line break in a name): open an import to see which rows and why. Skipped rows are addresses already kept, with "skip".</p>
        </section>
      )}
      {imports.data.length ? <h2>New import</h2> : null}
      <form class="panel stack" data-import="/dashboard/api/contacts/imports" data-inspect="/dashboard/api/contacts/imports/inspect" aria-label="Import contacts from a CSV file" method="post">
        <p style="margin:0">A CSV file (UTF-8 text; from a spreadsheet, export it as "CSV UTF-8") with a header row and a row per contact, at most 50 MB. Pick it, then say which column holds what.</p>
        <label>CSV file<input type="file" name="file" accept=".csv,text/csv" required /></label>
        <fieldset class="choices">
          <legend>Columns</legend>
          {column("email", "Email (required)", true)}
          {column("first_name", "First name")}
          {column("last_name", "Last name")}
          {column("unsubscribed", "Unsubscribed (true/false)")}
          {properties.map((p) => (
            <label>Property {p.key}<select data-property={p.key} data-type={p.type} disabled><option value="">choose a file first</option></select></label>
          ))}
        </fieldset>
        {properties.length === 0 ? <p class="muted">To import other columns too, <a href="/dashboard/contacts/properties">define contact properties</a> first.</p> : null}
        <label>An address that is already a contact
          <select name="on_conflict"><option value="skip">is left as it is (skip)</option><option value="upsert">is updated from the file (upsert)</option></select>
        </label>
        {segments.length ? (
          <fieldset class="choices">
            <legend>Add every imported contact to</legend>
            {segments.map((s) => <label class="check"><input type="checkbox" name="segments" value={s.id} />{s.name}</label>)}
          </fieldset>
        ) : null}
        {topics.length ? (
          <fieldset class="choices">
            <legend>Topic choices for every imported contact</legend>
            {topics.map((t) => (
              <label>{t.name}
                <select data-topic={t.id}><option value="">leave as it is</option><option value="opt_in">subscribed</option><option value="opt_out">opted out</option></select>
              </label>
            ))}
          </fieldset>
        ) : null}
        <div><button type="submit">Import</button></div>
      </form>
      <script type="module" src="/dashboard/assets/contacts-import.js"></script>
    </>
  ));
}

/** One import: its counts and the failed rows kept with their reasons, downloadable as CSV. */
async function importPage(c: DashCtx) {
  const v = c.get("viewer");
  const imp = await findImport(c.env.DB, v.account.id, c.req.param("id")!);
  if (!imp) throw new DashError(404, "No such import in this account.");
  const failures = importFailures(imp);
  const more = imp.failed - failures.length;
  const running = imp.status === "queued" || imp.status === "in_progress";
  const retention = readConfig(c.env).retentionDays;
  return page(c, "Contact import", (
    <>
      <Tabs current="/dashboard/contacts/imports" />
      <p><a href="/dashboard/contacts/imports">← All imports</a></p>
      {running ? <p class="notice" role="status">This import is running. <a href={`/dashboard/contacts/imports/${imp.id}`}>Refresh</a> to see its progress.</p> : null}
      <section class="panel">
        <dl class="fields">
          <dt>Status</dt><dd><Badge value={imp.status} />{imp.error ? <span class="error"> {imp.error}</span> : null}</dd>
          <dt>Started</dt><dd><Time at={imp.createdAt} /></dd>
          <dt>Finished</dt><dd>{imp.completedAt ? <Time at={imp.completedAt} /> : <span class="muted">not yet</span>}</dd>
          <dt>Rows</dt><dd>{imp.total} read: {imp.created} created, {imp.updated} updated, {imp.skipped} skipped, {imp.failed} failed</dd>
        </dl>
      </section>
      <h2 id="failures">Failed rows</h2>
      {imp.failed === 0 ? (
        <Empty title={running ? "No row has failed so far." : "No row failed."}><p>Every row had a valid address and values that fit.</p></Empty>
      ) : failures.length === 0 && !running ? (
        <Empty title={imp.failed === 1 ? "1 row failed; that row is no longer kept." : `${imp.failed} rows failed; those rows are no longer kept.`}>
          <p>tern keeps an import's failed rows (the addresses in them among the rest) as long as it keeps sent mail{retention === null ? "" : `, ${retention} days`}. Import the file again to see which rows fail: rows already imported are skipped or updated, as you choose.</p>
        </Empty>
      ) : (
        <>
          <p>Fix these rows in the file (row numbers are as a spreadsheet shows them, the header being row 1), then import it again: rows already imported are skipped or updated, as you choose.</p>
          <p><a class="button secondary" href={`/dashboard/contacts/imports/${imp.id}/failures.csv`} download>Download the failed rows (CSV)</a></p>
          <table>
            <thead><tr><th scope="col">Row</th><th scope="col">Value</th><th scope="col">Why it failed</th></tr></thead>
            <tbody>{failures.map((f) => (
              <tr><td>{f.row}</td><td class="mono">{f.value === "" ? <span class="muted">(empty)</span> : f.value}</td><td>{f.reason}</td></tr>
            ))}</tbody>
          </table>
          {more > 0 ? <p class="muted">And {more} more failed {more === 1 ? "row" : "rows"}: only the first {MAX_RECORDED_FAILURES} are kept. Fix these and import again to see the rest.</p> : null}
        </>
      )}
    </>
  ));
}

// ---- form fields to the API's request shapes -----------------------------------------------

/** A text field as a property of `type`: empty removes the value (null); a number must read as one. */
function typedValue(key: string, type: "string" | "number", raw: unknown): string | number | null {
  if (raw === undefined || raw === null) return null;
  if (typeof raw !== "string") return raw as never;
  const text = raw.trim();
  if (text === "") return null;
  if (type === "string") return raw;
  const n = Number(text);
  if (!Number.isFinite(n)) throw new DashError(422, `${key} is a number property: write a number like 42 or 3.5, or leave it empty.`);
  return n;
}

const nameField = (v: unknown) => (typeof v === "string" ? (v.trim() === "" ? null : v.trim()) : v);

/** `prefix.x` fields of a form as {x: value}. */
function prefixed(b: Record<string, unknown>, prefix: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(b)) if (k.startsWith(prefix)) out[k.slice(prefix.length)] = v;
  return out;
}

const SegmentIds = z.array(z.string().uuid("must be a segment id."), { error: "`segments` must be a list of segment ids." }).max(500);

export function registerContactPages(app: Hono<DashEnv>): void {
  app.get("/contacts", contactsPage);
  app.get("/contacts/segments", segmentsPage);
  app.get("/contacts/topics", topicsPage);
  app.get("/contacts/properties", propertiesPage);
  app.get("/contacts/imports", importsPage);
  app.get(`/contacts/imports/:id${ID}`, importPage);
  app.get(`/contacts/imports/:id${ID}/failures.csv`, async (c) => {
    const v = c.get("viewer");
    const imp = await findImport(c.env.DB, v.account.id, c.req.param("id"));
    if (!imp) throw new DashError(404, "No such import in this account.");
    const csv = csvFile(["row", "value", "reason"], importFailures(imp).map((f) => [f.row, f.value, f.reason]));
    return c.body(csv, 200, { "content-type": "text/csv; charset=utf-8", "content-disposition": `attachment; filename="import-${imp.id}-failed-rows.csv"` });
  });
  app.get(`/contacts/:id${ID}`, contactPage);

  const missing = () => new DashError(404, "This contact does not exist (any more). Reload the list.");

  app.post("/api/contacts", async (c) => {
    const v = c.get("viewer");
    const b = await body(c);
    const req = validate(CreateContactRequest, { ...b, first_name: nameField(b.first_name), last_name: nameField(b.last_name) });
    const row = await createContact(c.env, v.account.id, createFrom(req));
    await audit(c.env, v, { action: "contact.created", target: row.email, detail: { id: row.id } });
    return c.json({ id: row.id }, 201);
  });

  app.post(`/api/contacts/:id${ID}`, async (c) => {
    const v = c.get("viewer");
    const b = await body(c);
    const defined = await propertiesByKey(c.env.DB, v.account.id);
    const properties: Record<string, unknown> = {};
    for (const [key, raw] of Object.entries(prefixed(b, "properties."))) {
      const def = defined.get(key);
      // An unknown key goes through as given, for the service to refuse with its own message.
      properties[key] = def ? typedValue(key, def.type, raw) : raw;
    }
    const req = validate(UpdateContactRequest, {
      ...(b.first_name !== undefined ? { first_name: nameField(b.first_name) } : {}),
      ...(b.last_name !== undefined ? { last_name: nameField(b.last_name) } : {}),
      ...(b.unsubscribed !== undefined ? { unsubscribed: b.unsubscribed } : {}),
      ...(Object.keys(properties).length ? { properties } : {}),
    });
    const row = await updateContact(c.env, v.account.id, c.req.param("id"), patchFrom(req));
    if (!row) throw missing();
    await audit(c.env, v, { action: "contact.updated", target: row.email, detail: { id: row.id } });
    return c.json({ id: row.id });
  });

  // The contact's segments as the form lists them: joins and leaves through the same calls as
  // POST and DELETE /contacts/{id}/segments/{segment_id}, each reporting contact.updated.
  app.post(`/api/contacts/:id${ID}/segments`, async (c) => {
    const v = c.get("viewer");
    const wanted = new Set(validate(z.object({ segments: SegmentIds.default([]) }), await body(c)).segments.map((s) => s.toLowerCase()));
    const contact = await findContact(c.env.DB, v.account.id, c.req.param("id"));
    if (!contact) throw missing();
    const current = new Set((await all((p) => listContactSegments(c.env.DB, v.account.id, contact.id, p).then((r) => r!))).map((s) => s.id));
    const add = [...wanted].filter((s) => !current.has(s));
    const remove = [...current].filter((s) => !wanted.has(s));
    for (const segmentId of add) {
      const r = await addContactToSegment(c.env, v.account.id, contact.id, segmentId);
      if (!r.ok) throw new DashError(422, r.missing === "segment" ? "One of the segments does not exist (any more). Reload the page." : "This contact does not exist (any more).");
    }
    for (const segmentId of remove) await removeContactFromSegment(c.env, v.account.id, contact.id, segmentId);
    if (add.length || remove.length) await audit(c.env, v, { action: "contact.segments_changed", target: contact.email, detail: { added: add, removed: remove } });
    return c.json({ id: contact.id, added: add.length, removed: remove.length });
  });

  app.post(`/api/contacts/:id${ID}/topics`, async (c) => {
    const v = c.get("viewer");
    const choices = validate(z.array(TopicChoice).max(500), Object.entries(prefixed(await body(c), "topics.")).map(([id, subscription]) => ({ id, subscription })), "topics");
    const r = await updateContactTopics(c.env, v.account.id, c.req.param("id"), choices);
    if (!r) throw missing();
    await audit(c.env, v, { action: "contact.topics_changed", target: r.contact.email, detail: { topics: choices } });
    return c.json({ id: r.contact.id });
  });

  app.post(`/api/contacts/:id${ID}/delete`, async (c) => {
    const v = c.get("viewer");
    const row = await deleteContact(c.env, v.account.id, c.req.param("id"));
    if (!row) throw missing();
    await audit(c.env, v, { action: "contact.deleted", target: row.email, detail: { id: row.id } });
    return c.json({ id: row.id, deleted: true });
  });

  // The import form's column preview: the file's head (the browser sends its first 64 KB), read
  // by the same rules as the upload, so a binary or non-UTF-8 file is refused before columns are offered.
  app.post("/api/contacts/imports/inspect", async (c) => {
    // 64 KB of file and the form's own parts: anything larger is refused before it is read whole.
    const raw = await readBodyLimited(c.req.raw, 80 * 1024).catch((err: unknown) => {
      throw err instanceof ApiError && err.status === 413 ? new ApiError("validation_error", "Send at most the file's first 64 KB.", 413) : err;
    });
    let form: FormData;
    try {
      form = await new Response(raw, { headers: { "content-type": c.req.header("content-type") ?? "" } }).formData();
    } catch {
      throw new DashError(400, "Send the file's beginning as multipart/form-data.");
    }
    const file = form.get("file");
    if (file === null || typeof file === "string") throw new DashError(422, "Choose a CSV file first.");
    if (file.size > 64 * 1024) throw new DashError(422, "Send at most the file's first 64 KB.");
    const text = decodeCsv(new Uint8Array(await file.arrayBuffer()), form.get("partial") === "1");
    return c.json({ columns: csvHeader(text).filter((h) => h !== "") });
  });
  app.post("/api/contacts/imports", async (c) => {
    const v = c.get("viewer");
    const form = await readImportForm(c.req.raw);
    const row = await createImport(c.env, v.account.id, form.file, form.options);
    const options = optionsOf(row);
    await audit(c.env, v, { action: "contacts.import_started", target: row.id, detail: { on_conflict: options.on_conflict, segments: options.segments.length, topics: options.topics.length } });
    return c.json({ id: row.id }, 201);
  });

  app.post("/api/segments", async (c) => {
    const v = c.get("viewer");
    const req = validate(CreateSegmentRequest, await body(c));
    const row = await createSegment(c.env.DB, v.account.id, req.name);
    await audit(c.env, v, { action: "segment.created", target: row.name, detail: { id: row.id } });
    return c.json({ id: row.id }, 201);
  });
  app.post("/api/segments/:id/delete", async (c) => {
    const v = c.get("viewer");
    const row = await deleteSegment(c.env, v.account.id, c.req.param("id"));
    if (!row) throw new DashError(404, "This segment does not exist (any more). Reload the page.");
    await audit(c.env, v, { action: "segment.deleted", target: row.name, detail: { id: row.id } });
    return c.json({ id: row.id, deleted: true });
  });

  app.post("/api/topics", async (c) => {
    const v = c.get("viewer");
    const b = await body(c);
    const req = validate(CreateTopicRequest, { ...b, description: nameField(b.description) ?? undefined });
    const row = await createTopic(c.env.DB, v.account.id, { name: req.name, description: req.description, defaultSubscription: req.default_subscription, visibility: req.visibility });
    await audit(c.env, v, { action: "topic.created", target: row.name, detail: { id: row.id } });
    return c.json({ id: row.id }, 201);
  });
  app.post("/api/topics/:id", async (c) => {
    const v = c.get("viewer");
    const b = await body(c);
    const req = validate(UpdateTopicRequest, { ...b, ...(b.description !== undefined ? { description: nameField(b.description) } : {}) });
    const row = await updateTopic(c.env.DB, v.account.id, c.req.param("id"), { name: req.name, description: req.description, visibility: req.visibility, defaultSubscription: b.default_subscription });
    if (!row) throw new DashError(404, "This topic does not exist (any more). Reload the page.");
    await audit(c.env, v, { action: "topic.updated", target: row.name, detail: { id: row.id } });
    return c.json({ id: row.id });
  });
  app.post("/api/topics/:id/delete", async (c) => {
    const v = c.get("viewer");
    const row = await deleteTopic(c.env, v.account.id, c.req.param("id"));
    if (!row) throw new DashError(404, "This topic does not exist (any more). Reload the page.");
    await audit(c.env, v, { action: "topic.deleted", target: row.name, detail: { id: row.id } });
    return c.json({ id: row.id, deleted: true });
  });

  app.post("/api/contact-properties", async (c) => {
    const v = c.get("viewer");
    const b = await body(c);
    const type = b.type === "number" ? "number" : "string";
    const fallback = b.fallback_value === undefined ? undefined : typedValue(typeof b.key === "string" ? b.key : "The property", type, b.fallback_value);
    const req = validate(CreateContactPropertyRequest, { ...b, ...(fallback !== undefined ? { fallback_value: fallback } : {}) });
    const row = await createProperty(c.env.DB, v.account.id, { key: req.key, type: req.type, fallback: req.fallback_value });
    await audit(c.env, v, { action: "contact_property.created", target: row.key, detail: { id: row.id, type: row.type } });
    return c.json({ id: row.id }, 201);
  });
  app.post("/api/contact-properties/:id", async (c) => {
    const v = c.get("viewer");
    const current = await findProperty(c.env.DB, v.account.id, c.req.param("id"));
    if (!current) throw new DashError(404, "This property does not exist (any more). Reload the page.");
    const b = await body(c);
    const req = validate(UpdateContactPropertyRequest, { fallback_value: typedValue(current.key, current.type, b.fallback_value) });
    const row = (await updateProperty(c.env.DB, v.account.id, current.id, req.fallback_value))!;
    await audit(c.env, v, { action: "contact_property.updated", target: row.key, detail: { id: row.id } });
    return c.json({ id: row.id });
  });
  app.post("/api/contact-properties/:id/delete", async (c) => {
    const v = c.get("viewer");
    const row = await deleteProperty(c.env, v.account.id, c.req.param("id"));
    if (!row) throw new DashError(404, "This property does not exist (any more). Reload the page.");
    await audit(c.env, v, { action: "contact_property.deleted", target: row.key, detail: { id: row.id } });
    return c.json({ id: row.id, deleted: true });
  });
}
