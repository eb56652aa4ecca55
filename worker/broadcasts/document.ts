// The dashboard editor's document (TipTap's JSON: headings, formatted text and links, buttons,
// images, dividers, two-column sections, variables) and the email it renders to: html built
// from tables with inline styles (what Outlook, Gmail and Apple Mail all lay out alike) and a
// plain-text part saying the same. Pure and total: unknown nodes and marks are dropped, every
// attribute is checked, so whatever a browser sends, the html is ours. The Worker renders on
// every save, so the stored html always matches the stored document, and previews, tests and
// sends all show what the server made.
import { placeholderText } from "../templates/variables.ts";

export interface DocMark {
  type: string;
  attrs?: Record<string, unknown>;
}
export interface DocNode {
  type: string;
  attrs?: Record<string, unknown>;
  content?: DocNode[];
  text?: string;
  marks?: DocMark[];
}

export class DocumentError extends Error {}

/** Limits of a stored document: far above any real email, low enough to bound the work. */
export const MAX_DOCUMENT_BYTES = 1_000_000;
const MAX_DEPTH = 24;
const MAX_NODES = 20_000;

/** Reads and checks a document: a JSON object of type doc, within the limits. */
export function parseDocument(source: unknown): DocNode {
  let value = source;
  if (typeof source === "string") {
    if (source.length > MAX_DOCUMENT_BYTES) throw new DocumentError(`The document is too large (at most ${MAX_DOCUMENT_BYTES / 1_000_000} MB).`);
    try {
      value = JSON.parse(source);
    } catch {
      throw new DocumentError("The document is not valid JSON.");
    }
  }
  if (!value || typeof value !== "object" || (value as DocNode).type !== "doc") throw new DocumentError("The document must be an editor document (type doc).");
  let nodes = 0;
  const check = (n: unknown, depth: number): void => {
    if (++nodes > MAX_NODES) throw new DocumentError(`The document has too many parts (at most ${MAX_NODES}).`);
    if (depth > MAX_DEPTH) throw new DocumentError(`The document nests too deeply (at most ${MAX_DEPTH} levels).`);
    if (!n || typeof n !== "object" || typeof (n as DocNode).type !== "string") throw new DocumentError("Every part of the document needs a type.");
    const { attrs, text, marks } = n as DocNode;
    if (attrs !== undefined && !isRecord(attrs)) throw new DocumentError("A part's attrs must be an object.");
    if (text !== undefined && typeof text !== "string") throw new DocumentError("A part's text must be a string.");
    if (marks !== undefined) {
      if (!Array.isArray(marks)) throw new DocumentError("A part's marks must be a list.");
      for (const m of marks as unknown[]) {
        if (!isRecord(m) || typeof m.type !== "string" || (m.attrs !== undefined && !isRecord(m.attrs))) throw new DocumentError("Every mark needs a type, and its attrs must be an object.");
      }
    }
    const c = (n as DocNode).content;
    if (c !== undefined) {
      if (!Array.isArray(c)) throw new DocumentError("A part's content must be a list.");
      for (const child of c) check(child, depth + 1);
    }
  };
  check(value, 0);
  return value as DocNode;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[ch]!);
}

const PLACEHOLDER = /^\{\{\{\s*[A-Za-z_][A-Za-z0-9_.]*\s*(\|[^}]*)?\}\}\}$/;
const VARIABLE_KEY = /^[A-Za-z_][A-Za-z0-9_.]{0,99}$/;

/** A link target a reader may follow: web, mail and phone links, or one placeholder (the
 * unsubscribe URL, a contact property holding a URL; whatever it holds, render.ts never fills
 * a link with a script). Anything else (javascript:, data:) is no link. */
export function safeHref(v: unknown): string | null {
  if (typeof v !== "string") return null;
  const s = v.trim();
  if (s.length === 0 || s.length > 2000) return null;
  if (PLACEHOLDER.test(s)) return s;
  if (/^(https?:\/\/[^\s<>"]+|mailto:[^\s<>"]+|tel:[+\d\s().-]+)$/i.test(s)) return s;
  return null;
}

/** An image source: http(s) only (uploads are served by tern over its public URL). */
export function safeSrc(v: unknown): string | null {
  if (typeof v !== "string") return null;
  const s = v.trim();
  return s.length <= 2000 && /^https?:\/\/[^\s<>"]+$/i.test(s) ? s : null;
}

function str(v: unknown, max = 500): string {
  return typeof v === "string" ? v.slice(0, max) : "";
}

function color(v: unknown, fallback: string): string {
  return typeof v === "string" && /^#[0-9a-f]{6}$/i.test(v) ? v : fallback;
}

/** A variable's placeholder in Resend's syntax; null for a key it cannot be. */
export function placeholderOf(key: unknown, fallback: unknown): string | null {
  if (typeof key !== "string" || !VARIABLE_KEY.test(key)) return null;
  const fb = typeof fallback === "string" ? fallback.replace(/[{}|]/g, "").trim().slice(0, 200) : "";
  return placeholderText(key, fb);
}

const FONT = "-apple-system,BlinkMacSystemFont,'Segoe UI',Roboto,Helvetica,Arial,sans-serif";
const TEXT_COLOR = "#111827";
const BRAND = "#2563eb";
const HEADING_SIZE: Record<number, number> = { 1: 28, 2: 22, 3: 18 };

function level(n: DocNode): 1 | 2 | 3 {
  const l = Number(n.attrs?.level);
  return l === 1 || l === 2 ? l : 3;
}

function align(n: DocNode): "left" | "center" | "right" {
  const a = n.attrs?.textAlign ?? n.attrs?.align;
  return a === "center" || a === "right" ? a : "left";
}

// ---- html -----------------------------------------------------------------------------------

function inlineHtml(nodes: DocNode[] | undefined): string {
  let out = "";
  for (const n of nodes ?? []) {
    if (n.type === "text") {
      let s = escapeHtml(str(n.text, 100_000));
      let href: string | null = null;
      for (const m of n.marks ?? []) {
        if (m.type === "bold") s = `<strong>${s}</strong>`;
        else if (m.type === "italic") s = `<em>${s}</em>`;
        else if (m.type === "underline") s = `<u>${s}</u>`;
        else if (m.type === "strike") s = `<s>${s}</s>`;
        else if (m.type === "code") s = `<code style="font-family:Menlo,Consolas,monospace;font-size:90%">${s}</code>`;
        else if (m.type === "link") href = safeHref(m.attrs?.href);
      }
      out += href ? `<a href="${escapeHtml(href)}" style="color:${BRAND};text-decoration:underline">${s}</a>` : s;
    } else if (n.type === "hardBreak") out += "<br>";
    else if (n.type === "variable") out += escapeHtml(placeholderOf(n.attrs?.key, n.attrs?.fallback) ?? "");
  }
  return out;
}

function blockHtml(n: DocNode): string {
  const ta = align(n);
  switch (n.type) {
    case "paragraph": {
      const inner = inlineHtml(n.content);
      return `<p style="margin:0 0 16px;text-align:${ta}">${inner || "&nbsp;"}</p>`;
    }
    case "heading": {
      const l = level(n);
      return `<h${l} style="margin:0 0 16px;font-size:${HEADING_SIZE[l]}px;line-height:1.3;font-weight:700;text-align:${ta}">${inlineHtml(n.content)}</h${l}>`;
    }
    case "bulletList":
    case "orderedList": {
      const tag = n.type === "bulletList" ? "ul" : "ol";
      const items = (n.content ?? []).filter((c) => c.type === "listItem").map((li) => `<li style="margin:0 0 8px">${(li.content ?? []).map((c) => (c.type === "paragraph" ? inlineHtml(c.content) : blockHtml(c))).join("<br>")}</li>`);
      return `<${tag} style="margin:0 0 16px;padding-left:24px">${items.join("")}</${tag}>`;
    }
    case "blockquote":
      return `<blockquote style="margin:0 0 16px;padding:4px 16px;border-left:4px solid #d1d5db;color:#374151">${blocksHtml(n.content)}</blockquote>`;
    case "horizontalRule":
      return `<hr style="border:0;border-top:1px solid #e5e7eb;margin:24px 0">`;
    case "image": {
      const src = safeSrc(n.attrs?.src);
      if (!src) return "";
      // A width only when the author set one: a small image is not stretched to the column.
      const w = Number(n.attrs?.width);
      const width = Number.isFinite(w) && w > 0 ? ` width="${Math.min(Math.max(Math.round(w), 16), 536)}"` : "";
      const img = `<img src="${escapeHtml(src)}" alt="${escapeHtml(str(n.attrs?.alt, 300))}"${width} style="display:block;max-width:100%;height:auto;border:0;margin:${ta === "center" ? "0 auto" : ta === "right" ? "0 0 0 auto" : "0"}">`;
      const href = safeHref(n.attrs?.href);
      return `<div style="margin:0 0 16px">${href ? `<a href="${escapeHtml(href)}">${img}</a>` : img}</div>`;
    }
    case "button": {
      const href = safeHref(n.attrs?.href);
      const label = escapeHtml(str(n.attrs?.label, 200) || "Open");
      const bg = color(n.attrs?.color, BRAND);
      const a = align(n) === "left" && n.attrs?.align === undefined ? "center" : align(n);
      // A table cell with the colour as bgcolor: Outlook ignores padding and background on <a>.
      return `<table role="presentation" cellpadding="0" cellspacing="0" border="0" align="${a}" style="margin:8px ${a === "center" ? "auto" : "0"} 24px"><tr><td bgcolor="${bg}" style="border-radius:6px;background:${bg}">`
        + (href ? `<a href="${escapeHtml(href)}" style="display:inline-block;padding:12px 24px;font-weight:600;color:#ffffff;text-decoration:none;border-radius:6px">${label}</a>` : `<span style="display:inline-block;padding:12px 24px;font-weight:600;color:#ffffff">${label}</span>`)
        + `</td></tr></table>`;
    }
    case "columns": {
      const cols = (n.content ?? []).filter((c) => c.type === "column").slice(0, 3);
      if (cols.length === 0) return "";
      const w = Math.floor(100 / cols.length);
      // Side by side on a wide screen; the media query in <head> stacks them on a phone.
      return `<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0" style="margin:0 0 8px"><tr>${cols
        .map((c, i) => `<td class="tern-col" width="${w}%" valign="top" style="width:${w}%;vertical-align:top;padding:${i === 0 ? "0 12px 0 0" : i === cols.length - 1 ? "0 0 0 12px" : "0 6px"}">${blocksHtml(c.content)}</td>`)
        .join("")}</tr></table>`;
    }
    default:
      return "";
  }
}

function blocksHtml(nodes: DocNode[] | undefined): string {
  return (nodes ?? []).map(blockHtml).join("\n");
}

/** The editor keeps an empty paragraph at the end to type in; the email has no use for it. */
function withoutTrailingEmpty(nodes: DocNode[] | undefined): DocNode[] {
  const out = [...(nodes ?? [])];
  while (out.length > 0 && out[out.length - 1]!.type === "paragraph" && !(out[out.length - 1]!.content ?? []).length) out.pop();
  return out;
}

/** The email's html: a complete document, 600 pixels wide at most, stacking columns on phones. */
export function documentToHtml(doc: DocNode, opts: { title?: string } = {}): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><meta name="x-apple-disable-message-reformatting"><title>${escapeHtml(opts.title ?? "")}</title>
<style>body>p{max-width:600px;margin:0 auto 24px!important;padding:0 16px;text-align:center;font-family:${FONT}}
@media only screen and (max-width:620px){.tern-col{display:block!important;width:100%!important;padding:0!important}.tern-body{padding:20px!important}}</style></head>
<body style="margin:0;padding:0;background:#f4f4f5">
<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0" style="background:#f4f4f5"><tr><td align="center" style="padding:24px 8px">
<table role="presentation" width="600" cellpadding="0" cellspacing="0" border="0" style="width:100%;max-width:600px;background:#ffffff;border-radius:8px"><tr><td class="tern-body" style="padding:32px;font-family:${FONT};font-size:16px;line-height:1.6;color:${TEXT_COLOR}">
${blocksHtml(withoutTrailingEmpty(doc.content))}
</td></tr></table>
</td></tr></table>
</body></html>`;
}

// ---- text -----------------------------------------------------------------------------------

function inlineText(nodes: DocNode[] | undefined): string {
  let out = "";
  for (const n of nodes ?? []) {
    if (n.type === "text") {
      const t = str(n.text, 100_000);
      const link = n.marks?.find((m) => m.type === "link");
      const href = link ? safeHref(link.attrs?.href) : null;
      out += href && href !== t && `mailto:${t}` !== href ? `${t} (${href})` : t;
    } else if (n.type === "hardBreak") out += "\n";
    else if (n.type === "variable") out += placeholderOf(n.attrs?.key, n.attrs?.fallback) ?? "";
  }
  return out;
}

function blockText(n: DocNode): string {
  switch (n.type) {
    case "paragraph":
    case "heading":
      return inlineText(n.content);
    case "bulletList":
    case "orderedList":
      return (n.content ?? []).filter((c) => c.type === "listItem")
        .map((li, i) => `${n.type === "bulletList" ? "-" : `${i + 1}.`} ${(li.content ?? []).map(blockText).join("\n   ")}`).join("\n");
    case "blockquote":
      return blocksText(n.content).split("\n").map((l) => `> ${l}`).join("\n");
    case "horizontalRule":
      return "----";
    case "image": {
      const alt = str(n.attrs?.alt, 300).trim();
      return safeSrc(n.attrs?.src) && alt ? `[${alt}]` : "";
    }
    case "button": {
      const href = safeHref(n.attrs?.href);
      const label = str(n.attrs?.label, 200) || "Open";
      return href ? `${label}: ${href}` : label;
    }
    case "columns":
      return (n.content ?? []).filter((c) => c.type === "column").map((c) => blocksText(c.content)).filter(Boolean).join("\n\n");
    default:
      return "";
  }
}

function blocksText(nodes: DocNode[] | undefined): string {
  return (nodes ?? []).map(blockText).filter((s) => s.trim() !== "").join("\n\n");
}

/** The plain-text part: the same words, links written out after their text. */
export function documentToText(doc: DocNode): string {
  return blocksText(doc.content).trim() + "\n";
}

/** Whether the document links to {{{RESEND_UNSUBSCRIBE_URL}}} itself. */
export function hasUnsubscribeLink(doc: DocNode): boolean {
  const walk = (n: DocNode): boolean =>
    (n.type === "button" && n.attrs?.href === "{{{RESEND_UNSUBSCRIBE_URL}}}")
    || (n.marks ?? []).some((m) => m.type === "link" && m.attrs?.href === "{{{RESEND_UNSUBSCRIBE_URL}}}")
    || (n.content ?? []).some(walk);
  return walk(doc);
}

/** The labels of buttons that link nowhere (the editor's button starts without a link, and the
 * html shows it as a coloured label no one can click). */
export function buttonsWithoutLink(doc: DocNode): string[] {
  const out: string[] = [];
  const walk = (n: DocNode): void => {
    if (n.type === "button" && !safeHref(n.attrs?.href)) out.push(typeof n.attrs?.label === "string" && n.attrs.label.trim() ? n.attrs.label.trim() : "Button");
    for (const c of n.content ?? []) walk(c);
  };
  walk(doc);
  return out;
}

/** An empty document: one heading and one paragraph to type over. */
export const EMPTY_DOCUMENT: DocNode = {
  type: "doc",
  content: [
    { type: "heading", attrs: { level: 1 } },
    { type: "paragraph" },
  ],
};
