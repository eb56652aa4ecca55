// Just enough of the HTML tokenizer (WHATWG HTML, section 13.2.5) to find tags and their
// attributes in an email's HTML, with their exact positions, so a rewrite can change one
// attribute value and leave every other byte as it was. Comments, doctypes, CDATA and the
// content of raw-text elements (style, script, ...) are skipped the way a browser skips them.
// HTMLRewriter would do this in the Workers runtime, but it streams and exists only there;
// the rewrite must also run in tests and tools.

export interface Attribute {
  /** Lower-cased, as the HTML parser sees it. */
  name: string;
  /** The value as written (character references not decoded); "" when there is none. */
  raw: string;
  /** Where the value sits in the document, quotes included; both -1 when there is no value. */
  valueStart: number;
  valueEnd: number;
}

export interface Tag {
  /** Lower-cased tag name. */
  name: string;
  end: boolean;
  /** From "<" to just after ">". */
  start: number;
  stop: number;
  attributes: Attribute[];
}

const WHITESPACE = new Set(["\t", "\n", "\f", "\r", " "]);
/** Elements whose content is text to the tokenizer: a "<a" inside them is not a tag. */
const RAW_TEXT = new Set(["script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes", "plaintext"]);

/** Every start and end tag of the document, in order. An unterminated tag at the end is dropped. */
export function scanTags(html: string): Tag[] {
  const tags: Tag[] = [];
  let i = 0;
  const n = html.length;
  while (i < n) {
    const lt = html.indexOf("<", i);
    if (lt === -1) break;
    const next = html[lt + 1] ?? "";
    if (html.startsWith("<!--", lt)) {
      i = commentEnd(html, lt + 4);
    } else if (next === "!" || next === "?") {
      // Doctype, CDATA (only in foreign content, but treated as a bogus comment in HTML) or a processing instruction.
      const cdata = html.startsWith("<![CDATA[", lt) ? html.indexOf("]]>", lt + 9) : -1;
      const gt = cdata !== -1 ? cdata + 2 : html.indexOf(">", lt + 2);
      i = gt === -1 ? n : gt + 1;
    } else if (next === "/" && isAsciiAlpha(html[lt + 2] ?? "")) {
      const tag = readTag(html, lt, lt + 2, true);
      if (tag === null) break;
      tags.push(tag);
      i = tag.stop;
    } else if (isAsciiAlpha(next)) {
      const tag = readTag(html, lt, lt + 1, false);
      if (tag === null) break;
      tags.push(tag);
      i = tag.stop;
      if (RAW_TEXT.has(tag.name)) {
        if (tag.name === "plaintext") break; // everything after it is text
        i = rawTextEnd(html, i, tag.name);
      }
    } else {
      i = lt + 1; // a "<" that starts nothing is text
    }
  }
  return tags;
}

/** Just after the "-->" of a comment whose text starts at `from`; "<!-->" and "<!--->" close at once. */
function commentEnd(html: string, from: number): number {
  if (html[from] === ">") return from + 1;
  if (html.startsWith("->", from)) return from + 2;
  const end = html.indexOf("-->", from);
  const bang = html.indexOf("--!>", from);
  const first = [end, bang].filter((p) => p !== -1);
  if (first.length === 0) return html.length;
  const at = Math.min(...first);
  return at + (at === end ? 3 : 4);
}

/** Where the content of a raw-text element ends: at its end tag, "</name" followed by whitespace, "/" or ">". */
function rawTextEnd(html: string, from: number, name: string): number {
  let at = from;
  for (;;) {
    const found = html.indexOf("</", at);
    if (found === -1) return html.length;
    const candidate = html.slice(found + 2, found + 2 + name.length);
    const after = html[found + 2 + name.length] ?? "";
    if (candidate.toLowerCase() === name && (after === "" || after === ">" || after === "/" || WHITESPACE.has(after))) return found;
    at = found + 2;
  }
}

function isAsciiAlpha(c: string): boolean {
  return (c >= "a" && c <= "z") || (c >= "A" && c <= "Z");
}

/** The tag starting at `lt` whose name starts at `nameAt`, or null when the document ends inside it. */
function readTag(html: string, lt: number, nameAt: number, end: boolean): Tag | null {
  const n = html.length;
  let i = nameAt;
  while (i < n && !WHITESPACE.has(html[i]!) && html[i] !== "/" && html[i] !== ">") i++;
  const name = html.slice(nameAt, i).toLowerCase();
  const attributes: Attribute[] = [];
  for (;;) {
    while (i < n && (WHITESPACE.has(html[i]!) || html[i] === "/")) i++;
    if (i >= n) return null;
    if (html[i] === ">") return { name, end, start: lt, stop: i + 1, attributes };
    // An attribute name runs to whitespace, "/", ">" or "="; a leading "=" belongs to the name.
    const nameStart = i;
    i++;
    while (i < n && !WHITESPACE.has(html[i]!) && html[i] !== "/" && html[i] !== ">" && html[i] !== "=") i++;
    const attrName = html.slice(nameStart, i).toLowerCase();
    let j = i;
    while (j < n && WHITESPACE.has(html[j]!)) j++;
    if (html[j] !== "=") {
      attributes.push({ name: attrName, raw: "", valueStart: -1, valueEnd: -1 });
      continue;
    }
    j++;
    while (j < n && WHITESPACE.has(html[j]!)) j++;
    if (j >= n) return null;
    const quote = html[j];
    if (quote === '"' || quote === "'") {
      const close = html.indexOf(quote, j + 1);
      if (close === -1) return null;
      attributes.push({ name: attrName, raw: html.slice(j + 1, close), valueStart: j, valueEnd: close + 1 });
      i = close + 1;
    } else if (quote === ">") {
      attributes.push({ name: attrName, raw: "", valueStart: -1, valueEnd: -1 });
      i = j;
    } else {
      let k = j;
      while (k < n && !WHITESPACE.has(html[k]!) && html[k] !== ">") k++;
      attributes.push({ name: attrName, raw: html.slice(j, k), valueStart: j, valueEnd: k });
      i = k;
    }
  }
}

/** The first attribute of that name: later duplicates are ignored by browsers too. */
export function attribute(tag: Tag, name: string): Attribute | undefined {
  return tag.attributes.find((a) => a.name === name);
}

// --- character references in attribute values ---------------------------------------------------

/** ISO-8859-1 names, U+00A0 to U+00FF in order: HTML lets these (and AMP, LT, GT, QUOT, COPY, REG) go without ";". */
const LATIN1_NAMES =
  "nbsp iexcl cent pound curren yen brvbar sect uml copy ordf laquo not shy reg macr deg plusmn sup2 sup3 acute micro para middot cedil sup1 ordm raquo frac14 frac12 frac34 iquest Agrave Aacute Acirc Atilde Auml Aring AElig Ccedil Egrave Eacute Ecirc Euml Igrave Iacute Icirc Iuml ETH Ntilde Ograve Oacute Ocirc Otilde Ouml times Oslash Ugrave Uacute Ucirc Uuml Yacute THORN szlig agrave aacute acirc atilde auml aring aelig ccedil egrave eacute ecirc euml igrave iacute icirc iuml eth ntilde ograve oacute ocirc otilde ouml divide oslash ugrave uacute ucirc uuml yacute thorn yuml".split(" ");

const LEGACY = new Map<string, string>([
  ["amp", "&"], ["AMP", "&"], ["lt", "<"], ["LT", "<"], ["gt", ">"], ["GT", ">"], ["quot", '"'], ["QUOT", '"'],
  ["COPY", "\u00a9"], ["REG", "\u00ae"],
  ...LATIN1_NAMES.map((name, i): [string, string] => [name, String.fromCharCode(0xa0 + i)]),
]);

/** Names that need ";": ASCII punctuation (all a URL could hold) and apos. Others are not known here. */
const WITH_SEMICOLON = new Map<string, string>([
  ...LEGACY,
  ["apos", "'"], ["sol", "/"], ["bsol", "\\"], ["quest", "?"], ["equals", "="], ["num", "#"], ["percnt", "%"],
  ["colon", ":"], ["semi", ";"], ["period", "."], ["comma", ","], ["excl", "!"], ["lowbar", "_"], ["dollar", "$"],
  ["plus", "+"], ["commat", "@"], ["lpar", "("], ["rpar", ")"], ["lsqb", "["], ["rsqb", "]"], ["lbrack", "["],
  ["rbrack", "]"], ["lcub", "{"], ["rcub", "}"], ["lbrace", "{"], ["rbrace", "}"], ["ast", "*"], ["midast", "*"],
  ["verbar", "|"], ["vert", "|"], ["VerticalLine", "|"], ["grave", "`"], ["Hat", "^"], ["Tab", "\t"], ["NewLine", "\n"],
]);

/** Numeric references to C1 controls mean windows-1252 characters (HTML's table). */
const C1 = new Map<number, number>([
  [0x80, 0x20ac], [0x82, 0x201a], [0x83, 0x0192], [0x84, 0x201e], [0x85, 0x2026], [0x86, 0x2020], [0x87, 0x2021],
  [0x88, 0x02c6], [0x89, 0x2030], [0x8a, 0x0160], [0x8b, 0x2039], [0x8c, 0x0152], [0x8e, 0x017d], [0x91, 0x2018],
  [0x92, 0x2019], [0x93, 0x201c], [0x94, 0x201d], [0x95, 0x2022], [0x96, 0x2013], [0x97, 0x2014], [0x98, 0x02dc],
  [0x99, 0x2122], [0x9a, 0x0161], [0x9b, 0x203a], [0x9c, 0x0153], [0x9e, 0x017e], [0x9f, 0x0178],
]);

const NUMERIC = /&#(?:[xX]([0-9a-fA-F]+)|([0-9]+));?/y;
const NAMED = /&([A-Za-z][A-Za-z0-9]*)(;?)/y;

/**
 * An attribute value with its character references decoded as a browser decodes them in an
 * attribute. Null when it holds a named reference this table does not know: the caller must
 * then leave the value alone rather than guess what the browser would read.
 */
export function decodeAttributeValue(raw: string): string | null {
  if (!raw.includes("&")) return raw;
  let out = "";
  let i = 0;
  while (i < raw.length) {
    const amp = raw.indexOf("&", i);
    if (amp === -1) {
      out += raw.slice(i);
      break;
    }
    out += raw.slice(i, amp);
    NUMERIC.lastIndex = amp;
    const numeric = NUMERIC.exec(raw);
    if (numeric) {
      out += numericCharacter(numeric[1] !== undefined ? parseInt(numeric[1], 16) : parseInt(numeric[2]!, 10));
      i = amp + numeric[0].length;
      continue;
    }
    NAMED.lastIndex = amp;
    const named = NAMED.exec(raw);
    if (!named) {
      out += "&";
      i = amp + 1;
      continue;
    }
    const name = named[1]!;
    if (named[2] === ";") {
      // A name this table does not know may still be one of HTML's 2,000 others: give up rather than guess.
      const known = WITH_SEMICOLON.get(name);
      if (known === undefined) return null;
      out += known;
      i = amp + named[0].length;
      continue;
    }
    // Without ";", the longest legacy name that prefixes the text counts, unless an
    // alphanumeric or "=" follows it (HTML keeps "&copy=1" in an attribute as it is).
    let legacy = "";
    for (const candidate of LEGACY.keys()) {
      if (name.startsWith(candidate) && candidate.length > legacy.length) legacy = candidate;
    }
    const after = raw[amp + 1 + legacy.length] ?? "";
    if (legacy === "" || /[A-Za-z0-9=]/.test(after)) {
      out += "&";
      i = amp + 1;
    } else {
      out += LEGACY.get(legacy)!;
      i = amp + 1 + legacy.length;
    }
  }
  return out;
}

function numericCharacter(code: number): string {
  if (Number.isNaN(code) || code === 0 || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return "\ufffd";
  return String.fromCodePoint(C1.get(code) ?? code);
}

/** Text safe inside a double-quoted attribute value. */
export function escapeAttributeValue(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/"/g, "&quot;");
}
