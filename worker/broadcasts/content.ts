// A broadcast email's content, built when it is sent: the broadcast's one stored body,
// personalised for the recipient's contact, with its preview text and, unless the author placed
// {{{RESEND_UNSUBSCRIBE_URL}}} themselves, a visible link to the preference page. The consumer
// fills that placeholder with the recipient's signed link, as it does in List-Unsubscribe.
import { eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { fallbackOf, propertiesByKey } from "../contacts/properties.ts";
import { UNSUBSCRIBE_PLACEHOLDER } from "../contacts/list-unsubscribe.ts";
import { broadcastRecipients, broadcasts, contacts, type BroadcastRow, type EmailRow } from "../db/schema.ts";
import { htmlToText } from "../mime/html-to-text.ts";
import type { EmailContent } from "../sending/content.ts";
import { ContentMissingError } from "../sending/content.ts";
import { contactLookup, escapeHtml, render, type Lookup } from "../templates/render.ts";

interface Cached {
  broadcast: BroadcastRow;
  prepared: PreparedBody;
  fallbacks: Map<string, string | number | null>;
  expires: number;
}
// A broadcast's body cannot change once it left draft, so a consumer batch of its emails reads
// it once, not once per email.
const cache = new Map<string, Cached>();
const CACHE_MS = 30_000;

async function broadcastOf(db: D1Database, id: string, now: number): Promise<Cached> {
  const hit = cache.get(id);
  if (hit && hit.expires > now) return hit;
  const broadcast = await drizzle(db).select().from(broadcasts).where(eq(broadcasts.id, id)).get();
  if (!broadcast) throw new ContentMissingError(`broadcast ${id} is gone`);
  const fallbacks = new Map([...(await propertiesByKey(db, broadcast.accountId))].map(([k, p]) => [k, fallbackOf(p)]));
  if (cache.size > 100) cache.clear();
  const entry = { broadcast, prepared: prepareBody(broadcast), fallbacks, expires: now + CACHE_MS };
  cache.set(id, entry);
  return entry;
}

const FOOTER_HTML = `<p style="font-size:12px;color:#6b7280;margin-top:32px">You received this because you are on our list. <a href="${UNSUBSCRIBE_PLACEHOLDER}">Unsubscribe or choose what you receive</a>.</p>`;
const FOOTER_TEXT = `\n\n--\nUnsubscribe or choose what you receive: ${UNSUBSCRIBE_PLACEHOLDER}`;

/** Inserts `fragment` after <body ...> (or first) or before </body> (or last). */
function place(html: string, fragment: string, where: "start" | "end"): string {
  if (where === "start") {
    const m = /<body[^>]*>/i.exec(html);
    return m ? html.slice(0, m.index + m[0].length) + fragment + html.slice(m.index + m[0].length) : fragment + html;
  }
  const i = html.search(/<\/body>/i);
  return i >= 0 ? html.slice(0, i) + fragment + html.slice(i) : html + fragment;
}

/** Whether an html body places the unsubscribe link itself (in any of the variable's spellings). */
function placesUnsubscribe(html: string): boolean {
  return render(html, () => undefined, "html").output.includes(UNSUBSCRIBE_PLACEHOLDER);
}

/** What a broadcast's body needs to know once, not per recipient: whether its html gets the
 * footer with the unsubscribe link, and the text it reads as without a text of its own (its
 * html, footer included, as text with its variables left in place: html-to-text took 0.47 ms
 * of a 5 KB send's CPU in the Worker's profile). Rendering that text in text mode for a
 * recipient gives what converting their rendered html gave (values raw). */
export interface PreparedBody {
  footer: boolean;
  textTemplate: string | null;
}

export function prepareBody(b: Pick<BroadcastRow, "html" | "text">): PreparedBody {
  const footer = b.html !== null && b.html !== "" && !placesUnsubscribe(b.html);
  return { footer, textTemplate: b.text || !b.html ? null : htmlToText(footer ? place(b.html, FOOTER_HTML, "end") : b.html) };
}

/** A recipient's text from the text their html reads as: laid out as html-to-text lays out
 * their rendered html, where values' whitespace is one space, and an empty value leaves no
 * doubled space or space at a line's edge (a line keeps its own indent: list items). */
function renderTextOfHtml(template: string, lookup: Lookup): string {
  const inline: Lookup = (key) => {
    const v = lookup(key);
    return typeof v === "string" ? v.replace(/\s+/g, " ") : v;
  };
  return template.split("\n").map((line) => {
    if (!line.includes("{{{")) return line;
    const indent = /^[ \t]*/.exec(line)![0];
    return indent + render(line.slice(indent.length), inline, "text").output.replace(/\s+/g, " ").trim();
  }).join("\n");
}

/** What a contact's broadcast email says, from the stored body (`prepared`: prepareBody's, when
 * the caller keeps it for many recipients). */
export function renderBroadcastBody(b: Pick<BroadcastRow, "html" | "text" | "previewText">, lookup: Parameters<typeof render>[1], prepared = prepareBody(b)): { html: string | null; text: string | null } {
  let html = b.html ? render(b.html, lookup, "html").output : null;
  if (html !== null) {
    // Personalised as the subject is (its values raw), then escaped once for the HTML around it.
    if (b.previewText) html = place(html, `<div style="display:none;max-height:0;overflow:hidden">${escapeHtml(render(b.previewText, lookup, "text").output)}</div>`, "start");
    if (prepared.footer) html = place(html, FOOTER_HTML, "end");
  }
  let text = b.text ? render(b.text, lookup, "text").output : prepared.textTemplate !== null ? renderTextOfHtml(prepared.textTemplate, lookup) : null;
  if (text !== null && !text.includes(UNSUBSCRIBE_PLACEHOLDER)) text += FOOTER_TEXT;
  return { html, text };
}

export async function broadcastContent(db: D1Database, email: EmailRow, now = Date.now()): Promise<EmailContent> {
  const { broadcast, prepared, fallbacks } = await broadcastOf(db, email.broadcastId!, now);
  const row = await drizzle(db).select({ c: contacts }).from(broadcastRecipients)
    .leftJoin(contacts, eq(contacts.id, broadcastRecipients.contactId))
    .where(eq(broadcastRecipients.emailId, email.id)).get();
  // A contact deleted since the fan-out still gets what was sent to it, with fallbacks.
  const to = (JSON.parse(email.toJson) as string[])[0] ?? "";
  const c = row?.c;
  const lookup = contactLookup(
    { email: c?.email ?? to, firstName: c?.firstName ?? null, lastName: c?.lastName ?? null, properties: c ? JSON.parse(c.propertiesJson) : {} },
    fallbacks,
  );
  return { ...renderBroadcastBody(broadcast, lookup, prepared), attachments: [] };
}
