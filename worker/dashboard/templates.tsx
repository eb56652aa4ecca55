// Templates in the dashboard: the list, a new template, the same block editor as broadcasts for
// its draft, a preview and a test to oneself with each variable's fallback, the review before
// publishing (worker/templates/review.ts), and publish (what POST /emails with
// `template` then sends). A template written through the API keeps its html until the person
// chooses to edit its body in the editor (as for broadcasts). Saves go through worker/templates/templates.ts with the REST API's
// own request schema.
import type { Hono } from "hono";
import { createTemplate, deleteTemplate, duplicateTemplate, findTemplate, listTemplates, publishTemplate, updateTemplate, viewOf, type TemplateContent } from "../templates/templates.ts";
import { emptyBody } from "../broadcasts/broadcasts.ts";
import { render, ownValue, type VariableValue } from "../templates/render.ts";
import { EMPTY_DOCUMENT } from "../broadcasts/document.ts";
import { validate } from "../http.ts";
import { contentOf, CreateTemplateRequest, UpdateTemplateRequest } from "../routes/templates.ts";
import { Badge, Empty, Time } from "./layout.tsx";
import { body, DashError, page, requireManager, type DashCtx, type DashEnv } from "./routes.tsx";
import { apiBodyOf, EditorWorkspace, guardApiBody, principalOf, renderDocument, ReviewPanel, sendTest } from "./broadcasts.tsx";
import { reviewTemplate } from "../templates/review.ts";
import { audit } from "./viewer.ts";

/** The draft filled with each declared variable's fallback (the placeholder's own otherwise);
 * `missing`: variables with neither, shown empty. The preview and the test show this. */
function draftWithFallbacks(draft: TemplateContent): { subject: string; html: string; text: string | null; missing: string[] } {
  const fallbacks: Record<string, VariableValue> = Object.fromEntries(draft.variables.filter((x) => x.fallback_value !== undefined).map((x) => [x.key, x.fallback_value as VariableValue]));
  const lookup = (k: string) => ownValue(fallbacks, k);
  const html = render(draft.html, lookup, "html");
  const subject = render(draft.subject ?? "", lookup, "text").output.replace(/\s+/g, " ").trim();
  return { subject, html: html.output, text: draft.text === null ? null : render(draft.text, lookup, "text").output, missing: html.missing };
}

async function templatesPage(c: DashCtx) {
  const v = c.get("viewer");
  const list = await listTemplates(c.env.DB, v.account.id, { limit: 100, after: c.req.query("after") || undefined });
  return page(c, "Templates", (
    <>
      <form method="post" class="panel row" data-api="/dashboard/api/templates" aria-label="New template">
        <label>Name<input name="name" placeholder="Order shipped" maxlength={256} required /></label>
        <label>Alias (optional)<input name="alias" placeholder="order-shipped" maxlength={100} pattern="[A-Za-z0-9_-]+" /></label>
        <button type="submit">Create and edit</button>
      </form>
      {list.data.length === 0 ? (
        <Empty title="No templates yet.">
          <p>A template is an email your code sends with its own values: create one above, design it in the editor, publish it, then send with <code>{`POST /emails {"template": {"id": "<alias>", "variables": {...}}}`}</code>.</p>
        </Empty>
      ) : (
        <table>
          <thead><tr><th scope="col">Template</th><th scope="col">Alias</th><th scope="col">Status</th><th scope="col">Updated</th></tr></thead>
          <tbody>{list.data.map((t) => (
            <tr>
              <td><a href={`/dashboard/templates/${t.id}`}>{t.name}</a></td>
              <td class="mono">{t.alias ?? <span class="muted">none</span>}</td>
              <td><Badge value={t.publishedJson === null ? "draft" : t.publishedJson === t.draftJson ? "published" : "unpublished_changes"} /></td>
              <td><Time at={t.updatedAt} /></td>
            </tr>
          ))}</tbody>
        </table>
      )}
    </>
  ));
}

async function templatePage(c: DashCtx) {
  const v = c.get("viewer");
  const row = await findTemplate(c.env.DB, v.account.id, c.req.param("id")!);
  if (!row) {
    c.status(404);
    return page(c, "Template not found", <Empty title="There is no such template in this account."><p><a href="/dashboard/templates">All templates</a></p></Empty>);
  }
  const { draft, published } = viewOf(row);
  const state = published === null ? "draft" : row.publishedJson === row.draftJson ? "published" : "unpublished_changes";
  const variables = draft.variables.map((x) => ({ key: x.key, label: x.key, fallback: x.fallback_value == null ? "" : String(x.fallback_value) }));
  const settings = (
    <div class="settings-grid">
      <label>Name<input name="name" value={row.name} required maxlength={256} /></label>
      <label>Alias<input name="alias" value={row.alias ?? ""} placeholder="order-shipped" maxlength={100} data-keep-empty /><span class="hint">Sends may name the template by it.</span></label>
      <label>From<input name="from" value={draft.from ?? ""} placeholder="Shop <shop@your-domain>" data-keep-empty /><span class="hint">Optional; a send's own from wins.</span></label>
      <label class="wide">Subject<input name="subject" value={draft.subject ?? ""} maxlength={998} data-keep-empty data-variable-field /></label>
      <label>Reply-To<input name="reply_to" value={(draft.reply_to ?? []).join(", ")} placeholder="optional" data-keep-empty /></label>
    </div>
  );
  const actions = (
    <>
      <button type="button" data-action="save" class="secondary">Save draft</button>
      <button type="button" data-action="preview" class="secondary">Preview</button>
      <button type="button" data-action="test" class="secondary">Send a test to {v.user.email}</button>
      <button type="button" data-action="review">Review and publish…</button>
    </>
  );
  return page(c, row.name, (
    <>
      <p><a href="/dashboard/templates">← All templates</a> · <Badge value={state} /> {row.alias ? <>· <code>{row.alias}</code></> : null}</p>
      <EditorWorkspace kind="template" id={row.id} document={row.documentJson ? JSON.parse(row.documentJson) : EMPTY_DOCUMENT} variables={variables} apiBody={apiBodyOf(row, draft.html, draft.text)} settings={settings} actions={actions} />
      <ReviewPanel title="Review before publishing">
        <form class="row" id="publish-form" aria-label="Publish">
          <button type="submit" id="publish-button" data-review-submit>Publish</button>
          <span class="muted">Sends that name this template use the published version.</span>
        </form>
      </ReviewPanel>
      <div class="row danger-zone">
        <form method="post" class="inline" data-api={`/dashboard/api/templates/${row.id}/duplicate`}><button type="submit" class="secondary">Duplicate</button></form>
        {v.canManage ? (
          <form method="post" class="inline" data-api={`/dashboard/api/templates/${row.id}/delete`} data-then="/dashboard/templates" data-confirm="Delete this template? Sends that name it will fail."><button type="submit" class="danger">Delete template</button></form>
        ) : null}
      </div>
    </>
  ));
}

export function registerTemplatePages(app: Hono<DashEnv>): void {
  app.get("/templates", (c) => templatesPage(c));
  app.get("/templates/:id", (c) => templatePage(c));

  app.post("/api/templates", async (c) => {
    const v = c.get("viewer");
    const b = await body(c);
    const rendered = renderDocument(EMPTY_DOCUMENT, "");
    const req = validate(CreateTemplateRequest, { name: b.name, alias: b.alias === "" ? undefined : b.alias, html: rendered.html, text: rendered.text });
    const row = await createTemplate(c.env.DB, v.account.id, {
      name: req.name, alias: req.alias ?? null, document: rendered.document,
      content: { from: null, subject: null, reply_to: null, html: rendered.html, text: rendered.text, variables: [] },
    });
    await audit(c.env, v, { action: "template.created", target: row.id });
    return c.json({ id: row.id, url: `/dashboard/templates/${row.id}`, redirect: true });
  });

  app.post("/api/templates/:id", async (c) => {
    const v = c.get("viewer");
    const b = await body(c);
    const blank = (x: unknown) => (x === "" ? null : x);
    const replyTo = typeof b.reply_to === "string" ? (b.reply_to.trim() ? b.reply_to.split(",").map((s) => s.trim()).filter(Boolean) : null) : b.reply_to;
    const before = await findTemplate(c.env.DB, v.account.id, c.req.param("id"));
    if (!before) throw new DashError(404, "This template is gone.");
    const draft = viewOf(before).draft;
    guardApiBody("template", apiBodyOf(before, draft.html, draft.text), b);
    const rendered = b.document === undefined ? null : renderDocument(b.document, typeof b.subject === "string" ? b.subject : "");
    const req = validate(UpdateTemplateRequest, {
      name: b.name, alias: blank(b.alias), from: blank(b.from), subject: blank(b.subject), reply_to: replyTo,
      ...(rendered ? { html: rendered.html, text: rendered.text } : {}),
    });
    const row = await updateTemplate(c.env.DB, v.account.id, before.id, { name: req.name, alias: req.alias, content: contentOf(req), ...(rendered ? { document: rendered.document } : {}) });
    if (!row) throw new DashError(404, "This template is gone.");
    return c.json({ ok: true });
  });

  // The draft with each variable's declared fallback (or the placeholder's own).
  app.post("/api/templates/:id/preview", async (c) => {
    const v = c.get("viewer");
    const row = await findTemplate(c.env.DB, v.account.id, c.req.param("id"));
    if (!row) throw new DashError(404, "This template is gone.");
    const out = draftWithFallbacks(viewOf(row).draft);
    const note = out.missing.length ? `Variables without a value or fallback show empty here: ${out.missing.join(", ")}. A send must give them.` : "Variables show their fallbacks.";
    return c.json({ html: out.html, text: out.text, who: note });
  });

  // A test of the draft, filled as the preview is, to the signed-in person's own address; an
  // empty body is refused by the rule a broadcast's send and test use (emptyBody).
  app.post("/api/templates/:id/test", async (c) => {
    const v = c.get("viewer");
    const row = await findTemplate(c.env.DB, v.account.id, c.req.param("id"));
    if (!row) throw new DashError(404, "This template is gone.");
    const { draft } = viewOf(row);
    const empty = emptyBody(draft, "template", "sending");
    if (empty) throw new DashError(422, empty);
    if (!draft.from) throw new DashError(422, "Fill in From first: a test is sent from the template's own sender (sends may give their own).");
    const out = draftWithFallbacks(draft);
    await sendTest(c.env, v, { from: draft.from, subject: out.subject || "(no subject)", html: out.html, text: out.text, category: "template_test" });
    await audit(c.env, v, { action: "template.test_sent", target: row.id, detail: { to: v.user.email } });
    return c.json({ ok: true, to: v.user.email });
  });

  // What publishing would refuse, what sends would need, and the deliverability checks.
  app.post("/api/templates/:id/review", async (c) => {
    const v = c.get("viewer");
    const row = await findTemplate(c.env.DB, v.account.id, c.req.param("id"));
    if (!row) throw new DashError(404, "This template is gone.");
    return c.json(await reviewTemplate(c.env, principalOf(v), row));
  });

  // publishTemplate refuses what the review blocks on (publishProblems), with the API's 422.
  app.post("/api/templates/:id/publish", async (c) => {
    const v = c.get("viewer");
    const row = await publishTemplate(c.env.DB, v.account.id, c.req.param("id"));
    if (!row) throw new DashError(404, "This template is gone.");
    await audit(c.env, v, { action: "template.published", target: row.id });
    return c.json({ ok: true });
  });
  app.post("/api/templates/:id/duplicate", async (c) => {
    const v = c.get("viewer");
    const copy = await duplicateTemplate(c.env.DB, v.account.id, c.req.param("id"));
    if (!copy) throw new DashError(404, "This template is gone.");
    return c.json({ id: copy.id, url: `/dashboard/templates/${copy.id}`, redirect: true });
  });
  // Deleting breaks every API send that names the template: owners and admins only.
  app.post("/api/templates/:id/delete", async (c) => {
    const v = c.get("viewer");
    requireManager(v);
    if (!(await deleteTemplate(c.env.DB, v.account.id, c.req.param("id")))) throw new DashError(404, "This template is gone.");
    await audit(c.env, v, { action: "template.deleted", target: c.req.param("id") });
    return c.json({ ok: true });
  });
}
