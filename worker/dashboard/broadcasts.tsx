// Broadcasts in the dashboard: the list with each one's status and counts (from the metrics
// rollups, as GET /emails/metrics answers them), a new draft, the block editor for a draft, its
// preview, a test send to oneself, the pre-send review, and send now or at a time. Every change
// goes through the services the REST API uses (worker/broadcasts/), validated by the same
// request schemas; the editor's document is rendered to html and text here, on the server, so
// the stored html always matches the stored document. The editor page is the only one that
// loads the editor's bundle (assets/editor/).
import type { Hono } from "hono";
import { raw } from "hono/html";
import type { Child } from "hono/jsx";
import { and, asc, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Principal } from "../auth.ts";
import { cancelBroadcast, createBroadcast, emptyBody, deleteBroadcast, duplicateBroadcast, findBroadcast, listBroadcasts, sendBroadcast, undeletable, updateBroadcast } from "../broadcasts/broadcasts.ts";
import { personalSubject, preheaderOf, renderBroadcastBody } from "../broadcasts/content.ts";
import { documentToHtml, documentToText, DocumentError, EMPTY_DOCUMENT, parseDocument, type DocNode } from "../broadcasts/document.ts";
import { reviewBroadcast } from "../broadcasts/review.ts";
import { fallbackOf, propertiesByKey } from "../contacts/properties.ts";
import { listSegments } from "../contacts/segments.ts";
import { listDomains } from "../domains/service.ts";
import { listTopics } from "../contacts/topics.ts";
import { contacts, contactSegments, type BroadcastRow } from "../db/schema.ts";
import { validate } from "../http.ts";
import { MAX_IMAGE_BYTES } from "../media/images.ts";
import { BUCKET_MS } from "../metrics/rollup.ts";
import { emailMetrics } from "../metrics/service.ts";
import { CreateBroadcastRequest, fieldsOf, SendBroadcastRequest, UpdateBroadcastRequest } from "../routes/broadcasts.ts";
import { performSend } from "../sending/send.ts";
import { contactLookup, type Lookup } from "../templates/render.ts";
import { CONTACT_FIELDS, placeholderParts, placeholderText, propertyLabel, readableText, variableLabel } from "../templates/variables.ts";
import { UNSUBSCRIBE_PLACEHOLDER } from "../contacts/list-unsubscribe.ts";
import { Badge, Empty, Time } from "./layout.tsx";
import { body, DashError, page, type DashCtx, type DashEnv } from "./routes.tsx";
import { audit, type Viewer } from "./viewer.ts";

/** The viewer acting as the account, as an API key with full access would. */
export function principalOf(v: Viewer): Principal {
  return { accountId: v.account.id, keyId: `dashboard:${v.user.id}`, permission: "full_access", domainId: null, plan: v.account.plan, rateLimit: v.account.rateLimit };
}

/** The document a save sends, checked, with the html and text it renders to. */
export function renderDocument(source: unknown, title: string): { document: string; html: string; text: string } {
  let doc: DocNode;
  try {
    doc = parseDocument(source);
  } catch (err) {
    if (err instanceof DocumentError) throw new DashError(422, err.message);
    throw err;
  }
  return { document: JSON.stringify(doc), html: documentToHtml(doc, { title }), text: documentToText(doc) };
}

/** JSON for a <script type="application/json">: nothing in it can close the element. */
export function jsonScript(id: string, data: unknown) {
  return raw(`<script type="application/json" id="${id}">${JSON.stringify(data).replace(/</g, "\\u003c")}</script>`);
}

/** The editor's bundle and styles, on the editor pages only. */
export function EditorAssets() {
  return (
    <>
      <link rel="stylesheet" href="/dashboard/assets/editor/editor.css" />
      <script type="module" src="/dashboard/assets/editor/editor.js"></script>
    </>
  );
}

const STATS = [
  ["delivered", "Delivered"],
  ["unique_opened", "Opened"],
  ["unique_clicked", "Clicked"],
  ["bounced", "Bounced"],
  ["unsubscribed", "Unsubscribed"],
] as const;
type Stat = (typeof STATS)[number][0];

/** Counts per broadcast from the rollups: the same sums GET /emails/metrics answers. */
async function broadcastStats(env: Env, accountId: string, rows: BroadcastRow[], now = Date.now()): Promise<Map<string, Record<Stat, number>>> {
  const out = new Map<string, Record<Stat, number>>();
  const sent = rows.filter((r) => r.recipientCount > 0);
  if (sent.length === 0) return out;
  const start = Math.floor(Math.min(...sent.map((r) => r.createdAt)) / BUCKET_MS) * BUCKET_MS;
  const answer = await emailMetrics(env.DB, accountId, {
    start, end: Math.ceil((now + 1) / BUCKET_MS) * BUCKET_MS, timezone: "UTC", granularity: "daily",
    metrics: STATS.map((s) => s[0]), dimensions: ["broadcast"], domainIds: [], emailIds: [], broadcastIds: sent.map((r) => r.id),
  });
  for (const row of answer.data ?? []) {
    if (row.broadcast_id) out.set(row.broadcast_id, Object.fromEntries(STATS.map(([k]) => [k, row[k] ?? 0])) as Record<Stat, number>);
  }
  return out;
}

function StatCells(props: { stats: Record<Stat, number> | undefined; recipients: number }) {
  return <>{STATS.map(([k]) => <td class="num" data-stat={k}>{props.recipients === 0 ? <span class="muted">–</span> : (props.stats?.[k] ?? 0).toLocaleString("en-US")}</td>)}</>;
}

async function broadcastsPage(c: DashCtx) {
  const v = c.get("viewer");
  const [list, segs, doms, variables] = await Promise.all([
    listBroadcasts(c.env.DB, v.account.id, { limit: 100, after: c.req.query("after") || undefined }),
    listSegments(c.env.DB, v.account.id, { limit: 100 }),
    listDomains(c.env.DB, v.account.id, { limit: 100 }),
    contactVariables(c.env, v.account.id),
  ]);
  const labels = new Map(variables.map((x) => [x.key, x.label]));
  // The example sender is at a domain the account can send from, when it has one.
  const sendable = doms.data.find((d) => d.status === "verified")?.name ?? "your-domain";
  const stats = await broadcastStats(c.env, v.account.id, list.data);
  return page(c, "Broadcasts", (
    <>
      <section class="panel" aria-labelledby="new-broadcast">
        <h2 id="new-broadcast">New broadcast</h2>
        {segs.data.length === 0 ? (
          <p>A broadcast goes to a segment of your contacts. <a href="/dashboard/contacts">Add contacts and a segment</a> first (or with the API: <code>POST /segments</code>, <code>POST /contacts</code>).</p>
        ) : (
          <>
          {sendable === "your-domain" ? <p class="muted">Broadcasts are sent from a verified domain: <a href="/dashboard/domains">add and verify yours</a> before sending (you can write the broadcast now).</p> : null}
          <form method="post" class="row" data-api="/dashboard/api/broadcasts">
            <label>Name<input name="name" placeholder="November newsletter" maxlength={256} required /></label>
            <label>From<input name="from" placeholder={`News <news@${sendable}>`} required size={28} /></label>
            <label>Subject<input name="subject" placeholder="What's new in November" maxlength={998} required size={28} /></label>
            <label>Send to segment
              <select name="segment_id" required>{segs.data.map((s) => <option value={s.id}>{s.name}</option>)}</select>
            </label>
            <button type="submit">Create and edit</button>
          </form>
          </>
        )}
      </section>
      {list.data.length === 0 ? (
        <Empty title="No broadcasts yet.">
          <p>Create one above: write it in the editor (headings, text, buttons, images, personal fields), preview it, send yourself a test, then send it to a segment now or at a time you choose.</p>
        </Empty>
      ) : (
        <table class="wide">
          <thead><tr><th scope="col">Broadcast</th><th scope="col">Status</th><th scope="col" class="num">Recipients</th>{STATS.map(([, label]) => <th scope="col" class="num">{label}</th>)}<th scope="col">Created</th></tr></thead>
          <tbody>{list.data.map((b) => (
            <tr>
              <td><a href={`/dashboard/broadcasts/${b.id}`}>{b.name || readableText(b.subject ?? "", labels) || "(untitled)"}</a>{b.subject && b.name ? <div class="muted"><Readable source={b.subject} labels={labels} /></div> : null}</td>
              <td><Badge value={b.status} />{b.status === "scheduled" && b.scheduledAt ? <div class="muted"><Time at={b.scheduledAt} /></div> : null}{b.statusReason ? <div class="muted">{b.statusReason}</div> : null}{b.status === "sent" && b.recipientCount === 0 ? <div class="warn-text">Reached nobody</div> : null}</td>
              <td class="num">{b.recipientCount.toLocaleString("en-US")}</td>
              <StatCells stats={stats.get(b.id)} recipients={b.recipientCount} />
              <td><Time at={b.createdAt} /></td>
            </tr>
          ))}</tbody>
        </table>
      )}
    </>
  ));
}

/** The variables the menu offers: the contact's fields, the account's contact properties. */
async function contactVariables(env: Env, accountId: string) {
  const props = await propertiesByKey(env.DB, accountId);
  return [
    ...CONTACT_FIELDS,
    ...[...props.values()].map((p) => ({ key: p.key, label: propertyLabel(p.key), fallback: String(fallbackOf(p) ?? "") })),
  ];
}

/** A subject or preview text as written, each variable a chip reading as in the editor. */
function Readable(props: { source: string; labels: ReadonlyMap<string, string> }) {
  return (
    <>{placeholderParts(props.source).map((p) => ("text" in p ? p.text : (
      <span class="variable-chip" title={placeholderText(p.key, p.fallback)}>{variableLabel(props.labels.get(p.key) ?? p.key, p.fallback)}</span>
    )))}</>
  );
}

/** An inbox's line for the message: the subject, then the preview text in grey. The editor's
 * preview fills the same markup (by id) from /preview; a sent broadcast's page fills it here. */
function InboxLine(props: { subject?: string; preheader?: string | null; ids?: boolean }) {
  return (
    <p class="inbox-line" id={props.ids ? "preview-inbox" : undefined}>
      <span class="inbox-subject" id={props.ids ? "preview-subject" : undefined}>{props.subject}</span>
      <span class="inbox-preheader" id={props.ids ? "preview-preheader" : undefined} hidden={!props.ids && !props.preheader}>{props.preheader}</span>
    </p>
  );
}

/** The first contact of the segment, for the preview (so the preview shows real data); the
 * signed-in person when the segment is empty. */
async function sampleLookup(env: Env, v: Viewer, row: BroadcastRow): Promise<{ lookup: Lookup; who: string }> {
  const fallbacks = new Map([...(await propertiesByKey(env.DB, v.account.id))].map(([k, p]) => [k, fallbackOf(p)]));
  const c = row.segmentId
    ? await drizzle(env.DB).select({ c: contacts }).from(contactSegments).innerJoin(contacts, eq(contacts.id, contactSegments.contactId))
      .where(and(eq(contactSegments.segmentId, row.segmentId), eq(contactSegments.accountId, v.account.id))).orderBy(asc(contactSegments.contactId)).limit(1).get()
    : undefined;
  if (c) {
    return { lookup: contactLookup({ email: c.c.email, firstName: c.c.firstName, lastName: c.c.lastName, properties: JSON.parse(c.c.propertiesJson) }, fallbacks), who: c.c.email };
  }
  const [first, ...rest] = (v.user.name || "").split(" ");
  return { lookup: contactLookup({ email: v.user.email, firstName: first || null, lastName: rest.join(" ") || null, properties: {} }, fallbacks), who: v.user.email };
}

/** The editor's toolbar, dialogs, preview and (for broadcasts) review: server-rendered markup
 * with labels, which editor.js wires to the editor. */
/** The body of a broadcast or template written outside the editor (html or text through the
 * API, no editor document stored), which the editor must never replace unasked. */
export interface ApiBody { html: string | null; text: string | null }

/** Whether a row's body was written outside the editor: a body, and no document it came from. */
export function apiBodyOf(row: { documentJson: string | null }, html: string | null, text: string | null): ApiBody | null {
  return !row.documentJson && ((html ?? "") !== "" || (text ?? "") !== "") ? { html, text } : null;
}

/** A save that would put an editor document in place of a body written through the API, unless
 * the person chose that (replace_body): the page may be older than the API's write. */
export function guardApiBody(kind: "broadcast" | "template", apiBody: ApiBody | null, b: Record<string, unknown>): void {
  if (b.document === undefined || !apiBody || b.replace_body === true) return;
  throw new DashError(409, `This ${kind}'s body was written through the API, and this save would replace it with the editor's. Nothing was saved: reload the page to see the body as it is now, then choose "Edit the body in the editor" if you mean to replace it.`);
}

/** An API-written body as it renders (sandboxed: no scripts, no requests it could make on its
 * own), and the one way to the editor: an explicit choice, confirmed in a dialog. */
function ApiBodyPanel(props: { kind: "broadcast" | "template"; body: ApiBody }) {
  return (
    <>
      <section class="panel api-body" id="api-body" aria-labelledby="api-body-title">
        <h2 id="api-body-title">Body written through the API</h2>
        <p>This {props.kind}'s {props.body.html ? "HTML" : "text"} was written through the API, not in the editor. Changes to the fields above save without touching it. This is how it renders:</p>
        {props.body.html
          ? <iframe class="preview api-body-frame" id="api-body-frame" title={`The ${props.kind}'s HTML, as written through the API`} sandbox="" referrerpolicy="no-referrer" srcdoc={props.body.html}></iframe>
          : <pre class="api-body-text">{props.body.text}</pre>}
        <div class="row"><button type="button" class="secondary" data-body-edit>Edit the body in the editor…</button></div>
      </section>
      <dialog id="dlg-body" aria-labelledby="dlg-body-title">
        <form method="dialog">
          <h2 id="dlg-body-title">Edit the body in the editor?</h2>
          <p>The editor keeps its own design. Its first save <strong>replaces the {props.body.html ? "HTML" : "text"} written through the API</strong>; to keep the original, Duplicate this {props.kind} first.</p>
          <p>Start from this {props.body.html ? "HTML" : "text"} to keep its words, headings, links, lists and images; its layout, colours and styles are not kept. Or start from a blank design.</p>
          <p class="error" data-dialog-error hidden></p>
          <div class="row">
            <button value="import">Start from this {props.body.html ? "HTML" : "text"}</button>
            <button value="blank" class="secondary">Start blank</button>
            <button value="cancel" class="secondary" formnovalidate>Keep the {props.body.html ? "HTML" : "text"}</button>
          </div>
        </form>
      </dialog>
    </>
  );
}

export function EditorWorkspace(props: { kind: "broadcast" | "template"; id: string; document: unknown; variables: { key: string; label: string; fallback: string }[]; apiBody: ApiBody | null; actions: Child; settings: Child }) {
  const t = (cmd: string, label: string, text: string, keys?: string) => (
    <button type="button" class="tool" data-cmd={cmd} aria-label={label} title={keys ? `${label} (${keys})` : label} aria-pressed="false">{text}</button>
  );
  return (
    <div class="editor-page" data-kind={props.kind} data-id={props.id}>
      {jsonScript("editor-data", { kind: props.kind, id: props.id, document: props.document, variables: props.variables, apiBody: props.apiBody })}
      <form class="panel editor-settings" id="editor-settings" aria-label="Settings">{props.settings}</form>
      {props.apiBody ? <ApiBodyPanel kind={props.kind} body={props.apiBody} /> : null}
      <div class="editor-frame" hidden={!!props.apiBody}>
        <div class="toolbar" role="toolbar" aria-label="Formatting" aria-controls="editor-content">
          <div class="toolbar-row">
            <div class="group">
              <label class="sr-only" for="block-type">Text style</label>
              <select id="block-type" data-cmd="block">
                <option value="paragraph">Paragraph</option>
                <option value="h1">Heading 1</option>
                <option value="h2">Heading 2</option>
                <option value="h3">Heading 3</option>
              </select>
            </div>
            <div class="group">
              {t("bold", "Bold", "B", "Ctrl+B")}{t("italic", "Italic", "I", "Ctrl+I")}{t("underline", "Underline", "U", "Ctrl+U")}{t("strike", "Strikethrough", "S")}
              {t("link", "Link", "Link", "Ctrl+K")}
            </div>
            <div class="group">
              {t("bulletList", "Bulleted list", "• List")}{t("orderedList", "Numbered list", "1. List")}
              {t("alignLeft", "Align left", "Left")}{t("alignCenter", "Align center", "Center")}
            </div>
            <div class="group end">{t("undo", "Undo", "Undo", "Ctrl+Z")}{t("redo", "Redo", "Redo", "Ctrl+Shift+Z")}</div>
          </div>
          <div class="toolbar-row">
            <span class="muted toolbar-label" aria-hidden="true">Insert</span>
            <div class="group">
              {t("button", "Insert button", "Button")}{t("image", "Insert image", "Image")}{t("divider", "Insert divider", "Divider")}{t("columns", "Insert two columns", "Two columns")}
              {t("variable", "Insert variable", "{ } Variable")}
            </div>
          </div>
        </div>
        <div id="editor-content" class="editor-content" aria-label="Email content"></div>
        <p class="muted editor-hint">Select a button or image and press Enter to edit it. Type <kbd>{"{{"}</kbd> or use Variable to personalise.</p>
      </div>
      <div class="editor-actions row">
        {props.actions}
        <span class="save-state muted" role="status" aria-live="polite" id="save-state"></span>
      </div>
      <p class="error" role="alert" id="editor-error" hidden></p>

      <section class="panel" id="preview-panel" aria-labelledby="preview-title" hidden>
        <div class="row spread">
          <h2 id="preview-title">Preview</h2>
          <div class="segmented" role="group" aria-label="Preview width">
            <button type="button" class="secondary" data-width="desktop" aria-pressed="true">Desktop</button>
            <button type="button" class="secondary" data-width="mobile" aria-pressed="false">Mobile</button>
          </div>
        </div>
        {props.kind === "broadcast" ? <InboxLine ids /> : null}
        <p class="muted" id="preview-who"></p>
        <div class="preview-stage"><iframe id="preview-frame" class="email-preview" title="Preview of the email" sandbox="" referrerpolicy="no-referrer"></iframe></div>
        <details><summary>Plain-text version</summary><pre id="preview-text"></pre></details>
      </section>

      <dialog id="dlg-link" aria-labelledby="dlg-link-title">
        <form method="dialog">
          <h2 id="dlg-link-title">Link</h2>
          <label>Web address<input name="href" type="text" inputmode="url" placeholder="https://example.com/page" /></label>
          <p class="error" data-dialog-error hidden></p>
          <div class="row"><button value="ok">Apply</button><button value="remove" class="secondary" data-remove>Remove link</button><button value="cancel" class="secondary" formnovalidate>Cancel</button></div>
        </form>
      </dialog>
      <dialog id="dlg-button" aria-labelledby="dlg-button-title">
        <form method="dialog">
          <h2 id="dlg-button-title">Button</h2>
          <label>Button text<input name="label" placeholder="Read more" maxlength={200} /></label>
          <label>Link<input name="href" type="text" inputmode="url" placeholder="https://example.com/offer" /></label>
          <label>Colour<input name="color" type="color" value="#2563eb" /></label>
          <p class="error" data-dialog-error hidden></p>
          <div class="row"><button value="ok">Apply</button><button value="cancel" class="secondary" formnovalidate>Cancel</button></div>
        </form>
      </dialog>
      <dialog id="dlg-image" aria-labelledby="dlg-image-title">
        <form method="dialog">
          <h2 id="dlg-image-title">Image</h2>
          <label>Upload an image (PNG, JPEG, GIF or WebP, at most {MAX_IMAGE_BYTES / 1048576} MB)<input name="file" type="file" accept="image/png,image/jpeg,image/gif,image/webp" /></label>
          {/* Filled by editor.js from GET /dashboard/api/media each time the dialog opens. */}
          <fieldset class="image-picker" data-image-picker>
            <legend>Or pick one uploaded before</legend>
            <div class="picker-grid" data-picker-list></div>
            <p class="muted small" data-picker-state role="status"></p>
            <button type="button" class="secondary" data-picker-more hidden>Show older images</button>
          </fieldset>
          <label>Or its web address<input name="src" type="text" inputmode="url" placeholder="https://example.com/photo.jpg" /></label>
          <label>Description for people who cannot see it (alt text)<input name="alt" maxlength={300} /></label>
          <label>Link (optional)<input name="href" type="text" inputmode="url" placeholder="https://example.com" /></label>
          <p class="muted" data-upload-state role="status"></p>
          <p class="error" data-dialog-error hidden></p>
          <div class="row"><button value="ok">Apply</button><button value="cancel" class="secondary" formnovalidate>Cancel</button></div>
        </form>
      </dialog>
      <dialog id="dlg-variable" aria-labelledby="dlg-variable-title">
        <form method="dialog">
          <h2 id="dlg-variable-title">Insert a variable</h2>
          <label>Variable
            <select name="key">
              {props.variables.map((x) => <option value={x.key} data-fallback={x.fallback}>{x.label}</option>)}
              {props.kind === "broadcast" ? <option value="RESEND_UNSUBSCRIBE_URL">Unsubscribe link</option> : null}
              <option value="">Another key…</option>
            </select>
          </label>
          <label data-other hidden>Key<input name="other" placeholder="ORDER_ID" pattern="[A-Za-z_][A-Za-z0-9_]*" /></label>
          <label data-fallback-field>Fallback, shown when it is empty<input name="fallback" maxlength={200} /></label>
          <p class="error" data-dialog-error hidden></p>
          <div class="row"><button value="ok">Insert</button><button value="cancel" class="secondary" formnovalidate>Cancel</button></div>
        </form>
      </dialog>
      <EditorAssets />
    </div>
  );
}

/** The review before sending a broadcast or publishing a template, filled by editor.js from
 * /review in reading order: what blocks it, what to look at, the verdict, then deliverability;
 * `children` is the form that sends or publishes (its [data-review-submit] button is disabled
 * while anything blocks). */
export function ReviewPanel(props: { title: string; children: Child }) {
  return (
    <section class="panel" id="review-panel" aria-labelledby="review-title" hidden>
      <h2 id="review-title">{props.title}</h2>
      <div id="review-blocking"></div>
      <div id="review-warnings"></div>
      <p id="review-verdict" role="status"></p>
      <div id="review-insights"></div>
      {props.children}
    </section>
  );
}

/** A labelled input; with `variables`, editor.js turns it into a one-line field showing
 * placeholders as chips (the input keeps the string form and is what the form sends). */
function Field(props: { label: string; name: string; value?: string | null; placeholder?: string; required?: boolean; size?: number; maxlength?: number; hint?: string; variables?: boolean; wide?: boolean }) {
  return (
    <label class={props.wide ? "wide" : undefined}>{props.label}
      <input name={props.name} value={props.value ?? ""} placeholder={props.placeholder} required={props.required} size={props.size} maxlength={props.maxlength} data-keep-empty data-variable-field={props.variables ? "" : undefined} />
      {props.hint ? <span class="hint">{props.hint}</span> : null}
    </label>
  );
}

async function broadcastPage(c: DashCtx) {
  const v = c.get("viewer");
  const row = await findBroadcast(c.env.DB, v.account.id, c.req.param("id")!);
  if (!row) {
    c.status(404);
    return page(c, "Broadcast not found", <Empty title="There is no such broadcast in this account."><p><a href="/dashboard/broadcasts">All broadcasts</a></p></Empty>);
  }
  const variables = await contactVariables(c.env, v.account.id);
  const labels = new Map(variables.map((x) => [x.key, x.label]));
  const title = row.name || readableText(row.subject ?? "", labels) || "Broadcast";
  if (row.status !== "draft") return sentBroadcastPage(c, row, title, labels);
  const [segs, tops] = await Promise.all([
    listSegments(c.env.DB, v.account.id, { limit: 100 }),
    listTopics(c.env.DB, v.account.id, { limit: 100 }),
  ]);
  const replyTo = (JSON.parse(row.replyToJson) as string[]).join(", ");
  const settings = (
    <>
      <div class="settings-grid">
        <Field label="Name" name="name" value={row.name} maxlength={256} hint="Only you see it." />
        <Field label="From" name="from" value={row.fromAddress} required placeholder="News <news@your-domain>" />
        <Field label="Reply-To" name="reply_to" value={replyTo} placeholder="optional" />
        <Field label="Subject" name="subject" value={row.subject} required maxlength={998} variables wide />
        <Field label="Preview text" name="preview_text" value={row.previewText} maxlength={500} hint="Shown after the subject in the inbox." variables wide />
        <label>Segment
          <select name="segment_id">{segs.data.map((s) => <option value={s.id} selected={s.id === row.segmentId}>{s.name}</option>)}</select>
        </label>
        <label>Topic
          <select aria-describedby="topic-hint" name="topic_id" data-keep-empty>
            <option value="">None</option>
            {tops.data.map((t) => <option value={t.id} selected={t.id === row.topicId}>{t.name}</option>)}
          </select>
          <span class="hint" id="topic-hint">With a topic, contacts who left it are skipped.</span>
        </label>
      </div>
    </>
  );
  const actions = (
    <>
      <button type="button" data-action="save" class="secondary">Save draft</button>
      <button type="button" data-action="preview" class="secondary">Preview</button>
      <button type="button" data-action="test" class="secondary">Send a test to {v.user.email}</button>
      <button type="button" data-action="review">Review and send…</button>
    </>
  );
  return page(c, title, (
    <>
      <p><a href="/dashboard/broadcasts">← All broadcasts</a> · <Badge value={row.status} /></p>
      <EditorWorkspace kind="broadcast" id={row.id} document={row.documentJson ? JSON.parse(row.documentJson) : EMPTY_DOCUMENT} variables={variables} apiBody={apiBodyOf(row, row.html, row.text)} settings={settings} actions={actions} />
      <ReviewPanel title="Review before sending">
        <form class="row send-form" id="send-form" aria-label="Send">
          <label>When
            <select name="when">
              <option value="now">Now</option>
              <option value="later">At a time…</option>
            </select>
          </label>
          <label data-when-later hidden>Time (e.g. "tomorrow at 9am" or 2026-12-01T09:00:00Z)<input name="scheduled_at" size={30} /></label>
          <button type="submit" id="send-button" data-review-submit>Send now</button>
        </form>
      </ReviewPanel>
      <div class="row danger-zone">
        <form method="post" class="inline" data-api={`/dashboard/api/broadcasts/${row.id}/duplicate`}><button type="submit" class="secondary">Duplicate</button></form>
        <form method="post" class="inline" data-api={`/dashboard/api/broadcasts/${row.id}/delete`} data-then="/dashboard/broadcasts" data-confirm="Delete this draft?"><button type="submit" class="danger">Delete draft</button></form>
      </div>
    </>
  ));
}

async function sentBroadcastPage(c: DashCtx, row: BroadcastRow, title: string, labels: ReadonlyMap<string, string>) {
  const v = c.get("viewer");
  const stats = (await broadcastStats(c.env, v.account.id, [row])).get(row.id);
  const { lookup, who } = await sampleLookup(c.env, v, row);
  const preview = renderBroadcastBody(row, lookup);
  const canCancel = ["scheduled", "queued", "sending"].includes(row.status);
  const canDelete = undeletable(row) === null;
  return page(c, title, (
    <>
      <p><a href="/dashboard/broadcasts">← All broadcasts</a></p>
      <section class="panel" aria-labelledby="summary">
        <h2 id="summary">Summary</h2>
        {row.status === "sent" && row.recipientCount === 0 ? (
          <p class="notice" role="note"><strong>This broadcast reached nobody.</strong> When it was sent, its segment had no contact who could receive it (none, or all unsubscribed, suppressed{row.topicId ? " or opted out of its topic" : ""}). Add contacts to the segment, then duplicate it as a new draft and send that.</p>
        ) : null}
        <dl class="fields">
          <dt>Status</dt><dd><Badge value={row.status} />{row.statusReason ? <span class="muted"> {row.statusReason}</span> : null}</dd>
          <dt>Subject</dt><dd><Readable source={row.subject ?? ""} labels={labels} /></dd>
          <dt>Preview text</dt><dd>{row.previewText ? <Readable source={row.previewText} labels={labels} /> : <span class="muted">None (inboxes show the email's first words)</span>}</dd>
          <dt>From</dt><dd>{row.fromAddress}</dd>
          {row.scheduledAt ? (<><dt>Scheduled for</dt><dd><Time at={row.scheduledAt} /></dd></>) : null}
          {row.sentAt ? (<><dt>Sent</dt><dd><Time at={row.sentAt} /></dd></>) : null}
          <dt>Recipients</dt><dd>{row.recipientCount.toLocaleString("en-US")}</dd>
          {STATS.map(([k, label]) => (<><dt>{label}</dt><dd data-stat={k}>{(stats?.[k] ?? 0).toLocaleString("en-US")}</dd></>))}
        </dl>
        {row.status === "sending" || (row.status === "sent" && row.sentAt !== null && Date.now() - row.sentAt < 3600_000)
          ? <p class="muted small">These counts grow as recipients' servers answer and people open and click: reload the page to see the latest.</p>
          : null}
        <div class="row" style="margin-top:12px">
          {canCancel ? (
            <form method="post" class="inline" data-api={`/dashboard/api/broadcasts/${row.id}/cancel`} data-confirm="Stop this broadcast? Contacts it has not reached get nothing."><button type="submit" class="danger">Cancel the broadcast</button></form>
          ) : null}
          <form method="post" class="inline" data-api={`/dashboard/api/broadcasts/${row.id}/duplicate`}><button type="submit" class="secondary">Duplicate as a new draft</button></form>
          {canDelete ? (
            <form method="post" class="inline" data-api={`/dashboard/api/broadcasts/${row.id}/delete`} data-then="/dashboard/broadcasts" data-confirm={`Delete this ${row.status} broadcast? It sent no email, so nothing else changes.`}><button type="submit" class="danger">Delete</button></form>
          ) : null}
        </div>
      </section>
      <section class="panel" aria-labelledby="sent-preview">
        <h2 id="sent-preview">What recipients get</h2>
        <InboxLine subject={personalSubject(row.subject, lookup)} preheader={preheaderOf(row, lookup)} />
        <p class="muted">Personalised for {who}; each recipient gets their own name and details.</p>
        {preview.html ? <iframe class="preview" title="The broadcast's HTML" sandbox="" srcdoc={preview.html.replaceAll(UNSUBSCRIBE_PLACEHOLDER, "#unsubscribe")} referrerpolicy="no-referrer"></iframe> : <pre>{preview.text}</pre>}
      </section>
    </>
  ));
}

/** A test of a broadcast or template to the signed-in person's own address only, through the
 * same send path as POST /emails; a refusal (an unverified sender, the quota) is a 422 in the
 * send's own words. */
export async function sendTest(env: Env, v: Viewer, m: { from: string; subject: string; html: string | null; text: string | null; headers?: Record<string, string>; category: string }): Promise<void> {
  const answer = await performSend(env, principalOf(v), {
    kind: "single",
    batchMode: "strict",
    body: {
      from: m.from, to: [v.user.email], subject: `[Test] ${m.subject}`,
      ...(m.html ? { html: m.html } : {}), ...(m.text ? { text: m.text } : {}),
      ...(m.headers ? { headers: m.headers } : {}),
      tags: [{ name: "category", value: m.category }],
    },
  });
  if (answer.status !== 200) {
    let message = `The test could not be sent (${answer.status}).`;
    try {
      message = (JSON.parse(answer.body) as { message?: string }).message ?? message;
    } catch {}
    throw new DashError(422, message);
  }
}

export function registerBroadcastPages(app: Hono<DashEnv>): void {
  app.get("/broadcasts", (c) => broadcastsPage(c));
  app.get("/broadcasts/:id", (c) => broadcastPage(c));

  app.post("/api/broadcasts", async (c) => {
    const v = c.get("viewer");
    const b = await body(c);
    const req = validate(CreateBroadcastRequest, { name: b.name, from: b.from, subject: b.subject, segment_id: b.segment_id });
    const f = fieldsOf(req);
    const rendered = renderDocument(EMPTY_DOCUMENT, req.subject);
    const row = await createBroadcast(c.env.DB, principalOf(v), { ...f, segmentId: f.segmentId!, from: req.from, subject: req.subject, html: rendered.html, text: rendered.text, document: rendered.document });
    await audit(c.env, v, { action: "broadcast.created", target: row.id });
    return c.json({ id: row.id, url: `/dashboard/broadcasts/${row.id}`, redirect: true });
  });

  // A save: the settings and the document, rendered here, through updateBroadcast. Without a
  // document (a body written through the API, kept as it is) only the settings change.
  app.post("/api/broadcasts/:id", async (c) => {
    const v = c.get("viewer");
    const b = await body(c);
    const replyTo = typeof b.reply_to === "string" ? b.reply_to.split(",").map((s) => s.trim()).filter(Boolean) : b.reply_to;
    const req = validate(UpdateBroadcastRequest, {
      name: b.name === "" ? null : b.name, from: b.from, subject: b.subject, preview_text: b.preview_text === "" ? null : b.preview_text,
      segment_id: b.segment_id, topic_id: b.topic_id === "" ? null : b.topic_id, reply_to: replyTo,
    });
    const id = c.req.param("id");
    const before = await findBroadcast(c.env.DB, v.account.id, id);
    if (!before) throw new DashError(404, "This broadcast is gone.");
    guardApiBody("broadcast", apiBodyOf(before, before.html, before.text), b);
    const rendered = b.document === undefined ? null : renderDocument(b.document, req.subject ?? "");
    const row = await updateBroadcast(c.env.DB, v.account.id, id, { ...fieldsOf(req), ...(rendered ?? {}) });
    if (!row) throw new DashError(404, "This broadcast is gone.");
    return c.json({ ok: true, updated_at: row.updatedAt });
  });

  app.post("/api/broadcasts/:id/preview", async (c) => {
    const v = c.get("viewer");
    const row = await findBroadcast(c.env.DB, v.account.id, c.req.param("id"));
    if (!row) throw new DashError(404, "This broadcast is gone.");
    const { lookup, who } = await sampleLookup(c.env, v, row);
    const out = renderBroadcastBody(row, lookup);
    // Links in the preview go nowhere (sandboxed); the unsubscribe link shows where it would be.
    return c.json({ html: out.html?.replaceAll(UNSUBSCRIBE_PLACEHOLDER, "#unsubscribe") ?? null, text: out.text, who, subject: personalSubject(row.subject, lookup), preview_text: preheaderOf(row, lookup) });
  });

  // A test: the message as the first contact of the segment would get it, to the signed-in
  // person's own address only, through the same send path as POST /emails.
  app.post("/api/broadcasts/:id/test", async (c) => {
    const v = c.get("viewer");
    const row = await findBroadcast(c.env.DB, v.account.id, c.req.param("id"));
    if (!row) throw new DashError(404, "This broadcast is gone.");
    if (!row.fromAddress || !row.subject) throw new DashError(422, "Fill in From and Subject first.");
    // The send's own rule (emptyBody), so a test is refused as the send would be, in its words.
    const empty = emptyBody(row);
    if (empty) throw new DashError(422, empty);
    const { lookup } = await sampleLookup(c.env, v, row);
    const out = renderBroadcastBody(row, lookup);
    await sendTest(c.env, v, {
      from: row.fromAddress, subject: personalSubject(row.subject, lookup), html: out.html, text: out.text,
      // The same one-click unsubscribe a recipient gets, for the tester's own address.
      headers: { "List-Unsubscribe": `<${UNSUBSCRIBE_PLACEHOLDER}>` },
      category: "broadcast_test",
    });
    await audit(c.env, v, { action: "broadcast.test_sent", target: row.id, detail: { to: v.user.email } });
    return c.json({ ok: true, to: v.user.email });
  });

  app.post("/api/broadcasts/:id/review", async (c) => {
    const v = c.get("viewer");
    const row = await findBroadcast(c.env.DB, v.account.id, c.req.param("id"));
    if (!row) throw new DashError(404, "This broadcast is gone.");
    const { lookup } = await sampleLookup(c.env, v, row);
    return c.json(await reviewBroadcast(c.env, principalOf(v), row, lookup));
  });

  app.post("/api/broadcasts/:id/send", async (c) => {
    const v = c.get("viewer");
    // The API's own rule: a time that is not text is refused, never read as "now".
    const b = validate(SendBroadcastRequest, await body(c));
    const row = await findBroadcast(c.env.DB, v.account.id, c.req.param("id"));
    if (!row) throw new DashError(404, "This broadcast is gone.");
    // sendBroadcast makes the review's blocking checks itself (sendProblems); the review panel
    // has already shown all of them at once.
    const at = b.scheduled_at?.trim() || undefined;
    const sent = await sendBroadcast(c.env, principalOf(v), row.id, at);
    await audit(c.env, v, { action: sent!.status === "scheduled" ? "broadcast.scheduled" : "broadcast.sent", target: row.id });
    return c.json({ ok: true, status: sent!.status });
  });

  app.post("/api/broadcasts/:id/cancel", async (c) => {
    const v = c.get("viewer");
    if (!(await cancelBroadcast(c.env.DB, v.account.id, c.req.param("id")))) throw new DashError(404, "This broadcast is gone.");
    await audit(c.env, v, { action: "broadcast.canceled", target: c.req.param("id") });
    return c.json({ ok: true });
  });
  app.post("/api/broadcasts/:id/duplicate", async (c) => {
    const v = c.get("viewer");
    const copy = await duplicateBroadcast(c.env.DB, principalOf(v), c.req.param("id"));
    if (!copy) throw new DashError(404, "This broadcast is gone.");
    return c.json({ id: copy.id, url: `/dashboard/broadcasts/${copy.id}`, redirect: true });
  });
  app.post("/api/broadcasts/:id/delete", async (c) => {
    const v = c.get("viewer");
    if (!(await deleteBroadcast(c.env.DB, v.account.id, c.req.param("id")))) throw new DashError(404, "This broadcast is gone.");
    await audit(c.env, v, { action: "broadcast.deleted", target: c.req.param("id") });
    return c.json({ ok: true });
  });
}

