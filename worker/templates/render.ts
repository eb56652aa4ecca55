// Personalisation: {{{KEY}}} and {{{KEY|fallback}}} placeholders, as Resend writes them in
// templates and broadcasts, filled from a lookup. Values are HTML-escaped in html and left raw
// in text and subjects. {{{RESEND_UNSUBSCRIBE_URL}}} is left in place: the consumer gives each
// recipient its own signed link when the message is built (contacts/list-unsubscribe.ts).
// Pure: no I/O, tested without HTTP (test/worker/personalize.test.ts).
import { UNSUBSCRIBE_PLACEHOLDER } from "../contacts/list-unsubscribe.ts";
import { PLACEHOLDER } from "./variables.ts";

export type VariableValue = string | number | boolean | null | readonly unknown[] | { readonly [k: string]: unknown };
/** A key's value, or undefined when the caller has none for it. */
export type Lookup = (key: string) => VariableValue | undefined;
export type RenderMode = "html" | "text";

const UNSUBSCRIBE_KEY = "RESEND_UNSUBSCRIBE_URL";

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[ch]!);
}

/** Total: every value becomes a string (never undefined), whatever a lookup hands back. */
export function asText(v: unknown): string {
  if (v === null || v === undefined) return "";
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint") return String(v);
  if (typeof v === "object") {
    try {
      return JSON.stringify(v) ?? "";
    } catch {
      return "";
    }
  }
  // A function or symbol is never a variable's value.
  return "";
}

/** `key`'s own value in `values`: never one every object inherits (constructor, toString,
 * __proto__ ...), which a `key in values` or `values[key]` lookup would hand back. */
export function ownValue<T>(values: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(values, key) ? values[key] : undefined;
}

export interface Rendered {
  output: string;
  /** Keys that had neither a value nor a fallback (each once, in order of first use). */
  missing: string[];
}

/** Fills every placeholder of `source`. A value that is null, undefined or "" falls back to the
 * placeholder's own fallback (`{{{FIRST_NAME|there}}}`); with none the key is missing and
 * renders as nothing. */
export function render(source: string, lookup: Lookup, mode: RenderMode): Rendered {
  const missing: string[] = [];
  const output = source.replace(PLACEHOLDER, (whole, key: string, fallback: string | undefined, offset: number) => {
    if (key === UNSUBSCRIBE_KEY) return UNSUBSCRIBE_PLACEHOLDER;
    const value = lookup(key);
    const given = value !== undefined && value !== null && value !== "";
    let text: string;
    if (given) text = asText(value);
    else if (fallback !== undefined) text = fallback.trim();
    else {
      if (!missing.includes(key)) missing.push(key);
      text = "";
    }
    // A fallback is written by the template's author in the source's own syntax: escaping it
    // again would double-escape an &amp; they wrote.
    const out = mode === "html" && given ? (inUnquotedValue(source, offset) ? escapeUnquoted(text) : escapeHtml(text)) : text;
    // A value that becomes a whole link or image address (a contact's property, a fallback)
    // is never a script: the editor refuses such links, and a value must not bring one back.
    // Judged by the value itself, which is what a browser reads back from the escaped form.
    return mode === "html" && startsUrlAttribute(source, offset) && unsafeUrl(text) ? "#" : out;
  });
  return { output, missing };
}

/** Whether the placeholder at `offset` may sit in an attribute value written without quotes
 * (`href={{{url}}}`, `src=https://x/{{{id}}}`): an `=` before it with nothing between but the
 * value's own characters. Text such as `a=b{{{KEY}}}` also counts; escaping it more is harmless. */
function inUnquotedValue(source: string, offset: number): boolean {
  let i = offset - 1;
  while (i >= 0 && /\s/.test(source[i]!)) i--;
  while (i >= 0 && !/[\s"'<>`=]/.test(source[i]!)) i--;
  return source[i] === "=";
}

/** A value for an unquoted attribute: also whitespace, `=` and backquotes as character
 * references, so a contact's value cannot end the attribute and add another (an onmouseover,
 * a style). A browser reads the references back as the same characters. */
function escapeUnquoted(s: string): string {
  return escapeHtml(s).replace(/[\s=`]/g, (ch) => `&#${ch.codePointAt(0)};`);
}

/** Whether the text before `offset` opens an href or src attribute's value. */
function startsUrlAttribute(source: string, offset: number): boolean {
  return /\b(?:href|src)\s*=\s*["']?\s*$/i.test(source.slice(Math.max(0, offset - 16), offset));
}

/** A javascript:, vbscript: or data: address, as a browser reads it (it skips control
 * characters and whitespace, also inside the scheme). */
export function unsafeUrl(url: string): boolean {
  return /^(?:javascript|vbscript|data):/i.test(url.replace(/[\u0000-\u0020]+/g, ""));
}

/** The keys a source uses, each once (for checking a template's declared variables). */
export function placeholderKeys(source: string): string[] {
  const keys: string[] = [];
  for (const m of source.matchAll(PLACEHOLDER)) if (m[1] !== UNSUBSCRIBE_KEY && !keys.includes(m[1]!)) keys.push(m[1]!);
  return keys;
}

export interface ContactForPersonalisation {
  email: string;
  firstName: string | null;
  lastName: string | null;
  /** The contact's own property values. */
  properties: Record<string, string | number>;
}

/** What a broadcast knows about its recipient: FIRST_NAME, LAST_NAME, EMAIL (also as
 * contact.first_name ...), then contact properties by key, with each property's fallback. */
export function contactLookup(contact: ContactForPersonalisation, propertyFallbacks: ReadonlyMap<string, string | number | null>): Lookup {
  return (key) => {
    switch (key) {
      case "FIRST_NAME":
      case "contact.first_name":
        return contact.firstName;
      case "LAST_NAME":
      case "contact.last_name":
        return contact.lastName;
      case "EMAIL":
      case "contact.email":
        return contact.email;
    }
    const k = key.startsWith("contact.") ? key.slice("contact.".length) : key;
    const own = ownValue(contact.properties, k);
    if (own !== undefined) return own;
    const fallback = propertyFallbacks.get(k);
    return fallback === undefined ? undefined : fallback;
  };
}
