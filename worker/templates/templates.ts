// Templates (Resend's /templates): a draft that is edited and a published version that sends
// use. Found by id or alias. A send with `template: {id, variables}` takes the published
// version's fields and fills its variables: a variable with neither a value nor a fallback is a
// 422 that names it, and nothing is sent.
import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { templates, type TemplateRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { isUuid, uuidv7 } from "../ids.ts";
import { finishPage, pageQuery, type Page } from "../pagination.ts";
import { d1ErrorText } from "../sending/quota.ts";
import { render, type VariableValue } from "./render.ts";
import { emptyBody } from "../broadcasts/broadcasts.ts";
import { assertFitsRow, utf8Bytes } from "../db/row-size.ts";

export type VariableType = "string" | "number" | "boolean" | "object" | "list";
export interface TemplateVariable {
  key: string;
  type: VariableType;
  fallback_value?: VariableValue;
}

/** The editable fields, as stored for the draft and for the published version. */
export interface TemplateContent {
  from: string | null;
  subject: string | null;
  reply_to: string[] | null;
  html: string;
  text: string | null;
  variables: TemplateVariable[];
}

export interface TemplateView {
  row: TemplateRow;
  draft: TemplateContent;
  published: TemplateContent | null;
}

export function viewOf(row: TemplateRow): TemplateView {
  return { row, draft: JSON.parse(row.draftJson) as TemplateContent, published: row.publishedJson ? (JSON.parse(row.publishedJson) as TemplateContent) : null };
}

export function typeMatches(type: VariableType, v: unknown): boolean {
  switch (type) {
    case "string": return typeof v === "string";
    case "number": return typeof v === "number" && Number.isFinite(v);
    case "boolean": return typeof v === "boolean";
    case "list": return Array.isArray(v);
    case "object": return v !== null && typeof v === "object" && !Array.isArray(v);
  }
}

function checkVariables(vars: TemplateVariable[]): void {
  const seen = new Set<string>();
  for (const [i, v] of vars.entries()) {
    if (seen.has(v.key)) throw new ApiError("validation_error", `\`variables[${i}].key\` repeats ${v.key}; each key may be declared once.`);
    seen.add(v.key);
    if (v.fallback_value !== undefined && v.fallback_value !== null && !typeMatches(v.type, v.fallback_value)) {
      throw new ApiError("validation_error", `\`variables[${i}].fallback_value\` must be of type ${v.type}.`);
    }
  }
}

const aliasTaken = (alias: string) => new ApiError("validation_error", `A template with the alias ${alias} already exists.`);

/** A template's row keeps its draft, its published version (a copy of an earlier draft, or of
 * this one once published) and its editor document: a draft fits when it and its copy fit
 * with the document, so that it can always be published. */
function checkDraftSize(draftJson: string, documentJson: string | null): void {
  assertFitsRow(2 * utf8Bytes(draftJson) + utf8Bytes(documentJson), "The template's draft (kept twice once published: the draft and the published version) and its editor document",
    "Make the html smaller (link images rather than embedding them), or leave out text: tern derives it from the html.");
}

export async function createTemplate(db: D1Database, accountId: string, input: { name: string; alias?: string | null; content: TemplateContent; document?: string | null }, now = Date.now()): Promise<TemplateRow> {
  checkVariables(input.content.variables);
  const row: TemplateRow = {
    id: uuidv7(now),
    accountId,
    name: input.name,
    alias: input.alias ?? null,
    draftJson: JSON.stringify(input.content),
    publishedJson: null,
    publishedAt: null,
    currentVersionId: uuidv7(now),
    documentJson: input.document ?? null,
    createdAt: now,
    updatedAt: now,
  };
  checkDraftSize(row.draftJson, row.documentJson);
  try {
    await drizzle(db).insert(templates).values(row);
  } catch (err) {
    if (row.alias && /UNIQUE constraint failed/i.test(d1ErrorText(err))) throw aliasTaken(row.alias);
    throw err;
  }
  return row;
}

/** By id, or by alias (an alias is never a UUID). */
export async function findTemplate(db: D1Database, accountId: string, idOrAlias: string): Promise<TemplateRow | undefined> {
  const key = isUuid(idOrAlias) ? eq(templates.id, idOrAlias.toLowerCase()) : eq(templates.alias, idOrAlias);
  return drizzle(db).select().from(templates).where(and(eq(templates.accountId, accountId), key)).get();
}

export async function listTemplates(db: D1Database, accountId: string, page: Page) {
  const q = pageQuery(templates.id, page, eq(templates.accountId, accountId));
  return finishPage(await drizzle(db).select().from(templates).where(q.where).orderBy(q.orderBy).limit(q.limit), page);
}

/** Changes the draft (a new current version); the published version stays until the next publish.
 * `document` is the dashboard editor's source of html and text; a change of either without one
 * drops it (it would no longer match). */
export async function updateTemplate(db: D1Database, accountId: string, idOrAlias: string, patch: { name?: string; alias?: string | null; content: Partial<TemplateContent>; document?: string | null }, now = Date.now()): Promise<TemplateRow | undefined> {
  const row = await findTemplate(db, accountId, idOrAlias);
  if (!row) return undefined;
  const draft: TemplateContent = { ...viewOf(row).draft };
  for (const [k, v] of Object.entries(patch.content)) if (v !== undefined) (draft as unknown as Record<string, unknown>)[k] = v;
  checkVariables(draft.variables);
  const after: TemplateRow = {
    ...row,
    name: patch.name ?? row.name,
    alias: patch.alias !== undefined ? patch.alias : row.alias,
    draftJson: JSON.stringify(draft),
    currentVersionId: uuidv7(now),
    documentJson: patch.document !== undefined ? patch.document : patch.content.html !== undefined || patch.content.text !== undefined ? null : row.documentJson,
    updatedAt: now,
  };
  checkDraftSize(after.draftJson, after.documentJson);
  try {
    await drizzle(db).update(templates).set({ name: after.name, alias: after.alias, draftJson: after.draftJson, currentVersionId: after.currentVersionId, documentJson: after.documentJson, updatedAt: now }).where(eq(templates.id, row.id));
  } catch (err) {
    if (after.alias && /UNIQUE constraint failed/i.test(d1ErrorText(err))) throw aliasTaken(after.alias);
    throw err;
  }
  return after;
}

/** What publishing refuses: a body that shows nothing, which no send could make up for (the
 * same rule and words as a broadcast's send, worker/broadcasts/broadcasts.ts). The dashboard's
 * review (review.ts) lists these beside the warnings a send can make up for. */
export function publishProblems(draft: Pick<TemplateContent, "html" | "text">): ApiError[] {
  const empty = emptyBody(draft, "template", "publishing");
  return empty ? [new ApiError("validation_error", empty)] : [];
}

/** The draft becomes the version sends use; refused (a 422, nothing changes) while
 * publishProblems finds any. */
export async function publishTemplate(db: D1Database, accountId: string, idOrAlias: string, now = Date.now()): Promise<TemplateRow | undefined> {
  const row = await findTemplate(db, accountId, idOrAlias);
  if (!row) return undefined;
  const [problem] = publishProblems(viewOf(row).draft);
  if (problem) throw problem;
  checkDraftSize(row.draftJson, row.documentJson); // a draft saved before drafts were bounded
  await drizzle(db).update(templates).set({ publishedJson: row.draftJson, publishedAt: now, updatedAt: now }).where(eq(templates.id, row.id));
  return { ...row, publishedJson: row.draftJson, publishedAt: now, updatedAt: now };
}

/** A new draft template with the source's draft, named "<name> (Copy)", without its alias. */
export async function duplicateTemplate(db: D1Database, accountId: string, idOrAlias: string, now = Date.now()): Promise<TemplateRow | undefined> {
  const row = await findTemplate(db, accountId, idOrAlias);
  if (!row) return undefined;
  return createTemplate(db, accountId, { name: `${row.name} (Copy)`.slice(0, 256), alias: null, content: viewOf(row).draft, document: row.documentJson }, now);
}

export async function deleteTemplate(db: D1Database, accountId: string, idOrAlias: string): Promise<TemplateRow | undefined> {
  const row = await findTemplate(db, accountId, idOrAlias);
  if (!row) return undefined;
  await drizzle(db).delete(templates).where(eq(templates.id, row.id));
  return row;
}

/** A send's fields from a published template with its variables filled. */
export interface TemplateSend {
  from: string | null;
  subject: string | null;
  reply_to: string[] | null;
  html: string;
  text: string | null;
}

/** Applies `variables` to the template's published version. `where` prefixes messages in a batch. */
export async function renderTemplateForSend(db: D1Database, accountId: string, ref: { id: string; variables?: Record<string, VariableValue> }, where = ""): Promise<TemplateSend> {
  const row = await findTemplate(db, accountId, ref.id);
  const at = where ? `${where} ` : "";
  if (!row) throw new ApiError("validation_error", `${at}\`template.id\` names no template of this account: ${ref.id}.`);
  const published = viewOf(row).published;
  if (!published) throw new ApiError("validation_error", `${at}Template ${ref.id} is a draft; publish it (POST /templates/${row.id}/publish) before sending with it.`);
  const given = ref.variables ?? {};
  const declared = new Map(published.variables.map((v) => [v.key, v]));
  for (const [key, value] of Object.entries(given)) {
    const d = declared.get(key);
    if (d && !typeMatches(d.type, value)) throw new ApiError("validation_error", `${at}\`template.variables.${key}\` must be of type ${d.type}.`);
  }
  // Own keys only: `{{{toString}}}` must not find Object.prototype's function.
  const lookup = (key: string): VariableValue | undefined => (Object.hasOwn(given, key) ? given[key] : declared.get(key)?.fallback_value);
  const html = render(published.html, lookup, "html");
  const text = published.text === null ? null : render(published.text, lookup, "text");
  const subject = published.subject === null ? null : render(published.subject, lookup, "text");
  const missing = [...new Set([...(subject?.missing ?? []), ...html.missing, ...(text?.missing ?? [])])];
  if (missing.length > 0) {
    throw new ApiError("validation_error", `${at}Missing template variable${missing.length > 1 ? "s" : ""} ${missing.map((k) => `\`${k}\``).join(", ")}: give ${missing.length > 1 ? "them" : "it"} in \`template.variables\` or declare a fallback_value.`);
  }
  return { from: published.from, subject: subject?.output ?? null, reply_to: published.reply_to, html: html.output, text: text?.output ?? null };
}
