// A broadcast email's content, built when it is sent: the broadcast's one stored body,
// personalised for the recipient's contact, with its preview text and, unless the author placed
// {{{RESEND_UNSUBSCRIBE_URL}}} themselves, a visible link to the preference page. The consumer
// fills that placeholder with the recipient's signed link, as it does in List-Unsubscribe.
import { eq, inArray } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { fallbackOf, propertiesByKey } from "../contacts/properties.ts";
import { UNSUBSCRIBE_PLACEHOLDER } from "../contacts/list-unsubscribe.ts";
import { broadcastRecipients, broadcasts, contacts, type BroadcastRow, type EmailRow } from "../db/schema.ts";
import { htmlToText } from "../mime/html-to-text.ts";
import type { EmailContent } from "../sending/content.ts";
import { ContentMissingError } from "../sending/content.ts";
import { contactLookup, escapeHtml, render, type Lookup, type RenderMode } from "../templates/render.ts";

type RecipientContact = Pick<typeof contacts.$inferSelect, "email" | "firstName" | "lastName" | "propertiesJson">;

/** The read of broadcast emails' contacts by email id (exported for the query-plan test). */
export function recipientContactsQuery(db: D1Database, emailIds: string[]) {
  return drizzle(db)
    .select({ emailId: broadcastRecipients.emailId, email: contacts.email, firstName: contacts.firstName, lastName: contacts.lastName, propertiesJson: contacts.propertiesJson })
    .from(broadcastRecipients).innerJoin(contacts, eq(contacts.id, broadcastRecipients.contactId))
    .where(inArray(broadcastRecipients.emailId, emailIds));
}

/** The contacts of broadcast emails by email id (absent: the contact was deleted since). */
async function recipientContacts(db: D1Database, emailIds: string[]): Promise<Map<string, RecipientContact>> {
  const out = new Map<string, RecipientContact>();
  // D1 binds at most 100 parameters to a statement.
  for (let i = 0; i < emailIds.length; i += 90) {
    for (const { emailId, ...c } of await recipientContactsQuery(db, emailIds.slice(i, i + 90)).all()) out.set(emailId, c);
  }
  return out;
}

/** Contacts read ahead for claimed emails, so a consumer batch of a broadcast's emails reads
 * them in one query instead of one each (a D1 call per email on the way to the relay). */
const primed = new WeakMap<EmailRow, RecipientContact | undefined>();

/** Reads the contacts of the broadcast emails among `emails` at once, for broadcastContent. */
export async function primeBroadcastContacts(db: D1Database, emails: readonly EmailRow[]): Promise<void> {
  const wanted = emails.filter((e) => e.broadcastId !== null && !primed.has(e));
  if (wanted.length === 0) return;
  const found = await recipientContacts(db, wanted.map((e) => e.id));
  for (const e of wanted) primed.set(e, found.get(e.id));
}

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

/** Whether a body places the unsubscribe link itself (in any of the variable's spellings). */
function placesUnsubscribe(source: string, mode: RenderMode): boolean {
  return render(source, () => undefined, mode).output.includes(UNSUBSCRIBE_PLACEHOLDER);
}

/** What a broadcast's body needs to know once, not per recipient: whether its html and its own
 * text get the footer with the unsubscribe link (decided from the body as written, so no
 * contact's value decides it), and, without a text of its own, the text its html reads as (the
 * html, footer included, as text with its variables left in place: html-to-text took 0.47 ms of
 * a 5 KB send's CPU in the Worker's profile). */
export interface PreparedBody {
  footer: boolean;
  textFooter: boolean;
  /** Null when each recipient's rendered html must be converted (textOnceUnsafe). */
  textTemplate: string | null;
}

/** Bodies whose text a template cannot give exactly: html-to-text keeps the spaces of <pre> and
 * of non-breaking spaces, and hides a link's href when its text is the same, which a variable
 * in a link decides per recipient. Each recipient's html is converted for these. */
function textOnceUnsafe(html: string): boolean {
  return /<pre\b|&nbsp;|&#160;|&#xa0;|\u00a0/i.test(html) || /<a\b[^>]*\{\{\{|<a\b[^>]*>(?:(?!<\/a>)[\s\S])*?\{\{\{/i.test(html);
}

export function prepareBody(b: Pick<BroadcastRow, "html" | "text">): PreparedBody {
  const footer = !!b.html && !placesUnsubscribe(b.html, "html");
  // The text as written, or as the html (with its footer) reads: the text gets its own footer
  // only when the link is nowhere in it (a link html-to-text leaves out, in a hidden element).
  const source = b.text ? b.text : b.html ? htmlToText(footer ? place(b.html, FOOTER_HTML, "end") : b.html) : null;
  const textFooter = source !== null && !placesUnsubscribe(source, "text");
  return { footer, textFooter, textTemplate: !b.text && b.html && !textOnceUnsafe(b.html) ? source : null };
}

/** A recipient's text from the text their html reads as, laid out as html-to-text lays out their
 * rendered html: a value's whitespace as one space, and an empty value leaving no doubled space
 * or space at a line's edge (a line keeps its own indent: list items). Exact for any body
 * textOnceUnsafe lets through, whose lines html-to-text leaves with single spaces. */
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

/** A contact's subject: one line, at most 998 characters (RFC 5322), never half a character. */
export function personalSubject(subject: string | null, lookup: Lookup): string {
  return render(subject ?? "", lookup, "text").output.replace(/[\r\n\0]+/g, " ").slice(0, 998).toWellFormed();
}

/** The preview text as the contact's inbox shows it (null without html to carry it). */
export function preheaderOf(b: Pick<BroadcastRow, "html" | "previewText">, lookup: Lookup): string | null {
  if (!b.html || !b.previewText) return null;
  return render(b.previewText, lookup, "text").output.replace(/\s+/g, " ").trim() || null;
}

/** What a contact's broadcast email says, from the stored body (`prepared`: prepareBody's, when
 * the caller keeps it for many recipients). */
export function renderBroadcastBody(b: Pick<BroadcastRow, "html" | "text" | "previewText">, lookup: Lookup, prepared = prepareBody(b)): { html: string | null; text: string | null } {
  let html = b.html ? render(b.html, lookup, "html").output : null;
  if (html !== null) {
    // Personalised as the subject is (its values raw), then escaped once for the HTML around it.
    const preheader = preheaderOf(b, lookup);
    if (preheader) html = place(html, `<div style="display:none;max-height:0;overflow:hidden">${escapeHtml(preheader)}</div>`, "start");
    if (prepared.footer) html = place(html, FOOTER_HTML, "end");
  }
  let text = b.text ? render(b.text, lookup, "text").output
    : html === null ? null
    : prepared.textTemplate !== null ? renderTextOfHtml(prepared.textTemplate, lookup) : htmlToText(html);
  if (text !== null && prepared.textFooter) text += FOOTER_TEXT;
  return { html, text };
}

export async function broadcastContent(db: D1Database, email: EmailRow, now = Date.now()): Promise<EmailContent> {
  const { broadcast, prepared, fallbacks } = await broadcastOf(db, email.broadcastId!, now);
  const c = primed.has(email) ? primed.get(email) : (await recipientContacts(db, [email.id])).get(email.id);
  // A contact deleted since the fan-out still gets what was sent to it, with fallbacks.
  const to = (JSON.parse(email.toJson) as string[])[0] ?? "";
  const lookup = contactLookup(
    { email: c?.email ?? to, firstName: c?.firstName ?? null, lastName: c?.lastName ?? null, properties: c ? JSON.parse(c.propertiesJson) : {} },
    fallbacks,
  );
  return { ...renderBroadcastBody(broadcast, lookup, prepared), attachments: [] };
}
