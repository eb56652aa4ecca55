// Personalisation variables as people read them: the placeholder grammar ({{{KEY|fallback}}}),
// the contact's fields with their labels, and how a variable reads ("First name (or “friend”)").
// One source for the Worker (render.ts, the dashboard's pages) and the editor's bundle
// (dashboard/editor/editor.ts), so a chip in the editor and a subject on a page read alike.
// Pure and import-free: esbuild bundles it into the browser as it is.

/** {{{KEY}}} or {{{KEY|fallback}}}, as Resend writes them: group 1 the key, group 2 the fallback. */
export const PLACEHOLDER = /\{\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(?:\|([^}]*))?\}\}\}/g;

export interface VariableChoice { key: string; label: string; fallback: string }

/** The fields every contact has, in the variable menu's order, with the fallback it suggests. */
export const CONTACT_FIELDS: readonly VariableChoice[] = [
  { key: "FIRST_NAME", label: "First name", fallback: "there" },
  { key: "LAST_NAME", label: "Last name", fallback: "" },
  { key: "EMAIL", label: "Email address", fallback: "" },
];

export function propertyLabel(key: string): string {
  return `Property: ${key}`;
}

/** A variable in Resend's syntax: {{{KEY}}} or {{{KEY|fallback}}}. */
export function placeholderText(key: string, fallback: string): string {
  return fallback ? `{{{${key}|${fallback}}}}` : `{{{${key}}}}`;
}

/** How one variable reads: its label (the key itself when it has none), and its fallback. */
export function variableLabel(label: string, fallback: string): string {
  return fallback ? `${label} (or “${fallback}”)` : label;
}

export type Part = { text: string } | { key: string; fallback: string };

/** `source` as its runs of text and its variables, in order. */
export function placeholderParts(source: string): Part[] {
  const out: Part[] = [];
  let at = 0;
  for (const m of source.matchAll(PLACEHOLDER)) {
    if (m.index > at) out.push({ text: source.slice(at, m.index) });
    out.push({ key: m[1]!, fallback: (m[2] ?? "").trim() });
    at = m.index + m[0].length;
  }
  if (at < source.length) out.push({ text: source.slice(at) });
  return out;
}

/** `source` with each variable as it reads (for a page title or a list, where no chip fits). */
export function readableText(source: string, labels: ReadonlyMap<string, string>): string {
  return placeholderParts(source).map((p) => ("text" in p ? p.text : variableLabel(labels.get(p.key) ?? p.key, p.fallback))).join("");
}
