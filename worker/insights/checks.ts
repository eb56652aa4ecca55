// Deliverability insights: checks of one email as it was sent (its stored message and its
// domain's state), each passed, warning or failed with a detail that says how to fix it and
// the source that weighs it (SpamAssassin rules, Gmail's and Yahoo's sender requirements, RFC
// 8058, Gmail's clipping). Pure: no I/O, so every rule is tested without HTTP. The html is
// read once, with the tag scanner the click-tracking rewrite uses (worker/tracking/html.ts).
import { getDomain } from "tldts";
import { parseMailbox } from "../mime/address.ts";
import { attribute, decodeAttributeValue, scanTags, type Tag } from "../tracking/html.ts";
import type { DmarcInfo } from "../domains/verification.ts";

export type InsightStatus = "passed" | "warning" | "failed";

export interface Insight {
  id: string;
  status: InsightStatus;
  title: string;
  detail: string;
}

export interface InsightEmail {
  /** The From header as given ("Name <a@b.c>"). */
  from: string;
  replyTo: string[];
  subject: string;
  html: string | null;
  text: string | null;
  headers: Record<string, string>;
  attachments: { filename?: string | null; content_type?: string | null }[];
  /** Sent as part of a broadcast: bulk mail by definition. */
  broadcast: boolean;
}

export interface InsightDomain {
  name: string;
  status: string;
  dmarc: DmarcInfo | null;
  openTracking: boolean;
  clickTracking: boolean;
}

export interface InsightContext {
  /** The host tracking links and pixels point at (the domain's own tracking host, or tern's
   * PUBLIC_URL), if any. */
  trackingHost: string | null;
}

/** Gmail clips a message's html past 102 KB ("[Message clipped] View entire message"). */
export const GMAIL_CLIP_BYTES = 102 * 1024;

const SHORTENERS = new Set([
  "bit.ly", "bitly.com", "tinyurl.com", "t.co", "goo.gl", "ow.ly", "is.gd", "buff.ly", "rebrand.ly", "cutt.ly", "shorturl.at",
  "tiny.cc", "bl.ink", "rb.gy", "t.ly", "v.gd", "s.id", "short.io", "lnkd.in", "adf.ly", "shorte.st", "bit.do", "soo.gd", "clck.ru",
]);
const NO_REPLY = /^(no[-_.]?reply|do[-_.]?not[-_.]?reply|donotreply|noreply|no[-_.]?response)([-_.+].*)?$/i;
const RISKY_EXTENSIONS = /\.(ade|adp|apk|appx|bat|cab|chm|cmd|com|cpl|dll|dmg|exe|hta|ins|iso|jar|js|jse|lib|lnk|mde|msc|msi|msp|mst|nsh|pif|ps1|scr|sct|shb|sys|vb|vbe|vbs|vxd|wsc|wsf|wsh)$/i;
const VOID = new Set(["area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"]);
const NOT_RENDERED = new Set(["head", "style", "script", "title", "template", "noscript"]);
const URL_TEXT = /^(?:https?:\/\/)?((?:[a-z0-9-]+\.)+[a-z]{2,})(?::\d+)?(?:[/?#]\S*)?$/i;

/** What one pass over the html finds. */
export interface HtmlFacts {
  links: { href: string; host: string | null; text: string }[];
  images: number;
  imagesWithoutAlt: number;
  /** Characters of visible text (letters, digits and punctuation, not spaces). */
  visibleChars: number;
  hiddenChars: number;
  forms: number;
  scripts: number;
  /** Visible words, lower case, for comparing with the text part. */
  words: Set<string>;
}

function hostOf(href: string): string | null {
  const m = /^https?:\/\/([^/?#:@\s]+@)?(\[[^\]]+\]|[^/?#:\s]+)/i.exec(href.trim());
  return m ? m[2]!.toLowerCase().replace(/\.$/, "") : null;
}

/** Inline styles that hide their content: display:none, visibility:hidden, a zero or 1px font,
 * zero size with overflow hidden, or text the colour of its own background. */
function hides(tag: Tag): boolean {
  if (attribute(tag, "hidden")) return true;
  const raw = attribute(tag, "style")?.raw;
  // Most styles hide nothing: look closer only at one naming a property that can.
  if (!raw || !/none|hidden|font-size|height|color|background/i.test(raw)) return false;
  const style = (decodeAttributeValue(raw) ?? "").toLowerCase().replace(/\s+/g, "");
  if (/(^|;)display:none/.test(style) || /(^|;)visibility:hidden/.test(style)) return true;
  if (/(^|;)font-size:(0|1px|0px|0pt|0em|0rem)(;|$|!)/.test(style)) return true;
  if (/(^|;)(max-)?height:0(px)?(;|$)/.test(style) && /overflow:hidden/.test(style)) return true;
  const color = /(?:^|;)color:([^;!]+)/.exec(style)?.[1];
  const background = /(?:^|;)background(?:-color)?:([^;!]+)/.exec(style)?.[1] ?? attribute(tag, "bgcolor")?.raw.toLowerCase();
  return color !== undefined && background !== undefined && sameColor(color, background);
}

function sameColor(a: string, b: string): boolean {
  const norm = (c: string) => {
    const s = c.trim().toLowerCase();
    if (s === "white") return "#ffffff";
    if (s === "black") return "#000000";
    const short = /^#([0-9a-f])([0-9a-f])([0-9a-f])$/.exec(s);
    return short ? `#${short[1]}${short[1]}${short[2]}${short[2]}${short[3]}${short[3]}` : s;
  };
  return norm(a) === norm(b);
}

/** Characters that show (not spaces) in html[from, to), counted in place: no copy. */
function countChars(s: string, from = 0, to = s.length): number {
  let n = 0;
  for (let i = from; i < to; i++) {
    const c = s.charCodeAt(i);
    if (c > 32 && c !== 160) n++;
  }
  return n;
}

/** One pass over the tags: links with their text, images, forms, scripts, visible and hidden
 * text. Text between tags is attributed to the innermost open elements (a simple stack: email
 * html is rarely well formed, so an end tag closes back to its own start tag if open). */
export function scanHtml(html: string, opts: { words?: boolean } = {}): HtmlFacts {
  const tags = scanTags(html);
  const facts: HtmlFacts = { links: [], images: 0, imagesWithoutAlt: 0, visibleChars: 0, hiddenChars: 0, forms: 0, scripts: 0, words: new Set() };
  const stack: { name: string; hidden: boolean; notRendered: boolean }[] = [];
  let hiddenDepth = 0;
  let skipDepth = 0;
  let link: { href: string; host: string | null; text: string } | null = null;
  const visible: string[] = [];
  let at = 0;
  const text = (from: number, to: number) => {
    if (to <= from) return;
    if (skipDepth > 0) return;
    const n = countChars(html, from, to);
    if (n === 0) return;
    if (hiddenDepth > 0) {
      facts.hiddenChars += n;
      return;
    }
    facts.visibleChars += n;
    if (link) link.text += html.slice(from, to);
    if (opts.words) visible.push(html.slice(from, to));
  };
  for (const tag of tags) {
    text(at, tag.start);
    at = tag.stop;
    if (tag.end) {
      if (tag.name === "a" && link) {
        facts.links.push(link);
        link = null;
      }
      const open = stack.findLastIndex((s) => s.name === tag.name);
      if (open !== -1) {
        for (const s of stack.splice(open)) {
          if (s.hidden) hiddenDepth--;
          if (s.notRendered) skipDepth--;
        }
      }
      continue;
    }
    switch (tag.name) {
      case "a": {
        if (link) facts.links.push(link);
        const href = decodeAttributeValue(attribute(tag, "href")?.raw ?? "") ?? "";
        link = href ? { href: href.trim(), host: hostOf(href), text: "" } : null;
        if (/^\s*javascript:/i.test(href)) facts.scripts++;
        break;
      }
      case "img":
        facts.images++;
        if (!attribute(tag, "alt")) facts.imagesWithoutAlt++;
        break;
      case "form":
        facts.forms++;
        break;
      case "script":
        facts.scripts++;
        break;
    }
    if (tag.attributes.some((a) => a.name.startsWith("on") && a.name.length > 2)) facts.scripts++;
    if (VOID.has(tag.name) || tag.name === "script" || tag.name === "style" || tag.name === "title") {
      // The scanner already skipped the content of raw-text elements.
      continue;
    }
    const hidden = hides(tag);
    const notRendered = NOT_RENDERED.has(tag.name);
    stack.push({ name: tag.name, hidden, notRendered });
    if (hidden) hiddenDepth++;
    if (notRendered) skipDepth++;
  }
  text(at, html.length);
  if (link) facts.links.push(link);
  if (opts.words) facts.words = wordsOf(visible.join(" "));
  return facts;
}

/** Words of three letters or more, lower case: what text_html_mismatch compares. */
function wordsOf(text: string): Set<string> {
  return new Set(text.toLowerCase().match(/[\p{L}\p{N}]{3,}/gu) ?? []);
}

function registrable(host: string): string {
  return getDomain(host) ?? host;
}

const pass = (id: string, title: string, detail: string): Insight => ({ id, status: "passed", title, detail });
const warn = (id: string, title: string, detail: string): Insight => ({ id, status: "warning", title, detail });
const failed = (id: string, title: string, detail: string): Insight => ({ id, status: "failed", title, detail });

function header(headers: Record<string, string>, name: string): string | undefined {
  const key = Object.keys(headers).find((k) => k.toLowerCase() === name);
  return key === undefined ? undefined : headers[key];
}

function listed(items: string[], max = 3): string {
  const shown = items.slice(0, max).map((i) => `\`${i}\``).join(", ");
  return items.length > max ? `${shown} and ${items.length - max} more` : shown;
}

/** Every check of one email, in a stable order: Resend's eight first, then the others. */
export function deliverabilityInsights(email: InsightEmail, domain: InsightDomain | null, ctx: InsightContext): Insight[] {
  const fromEmail = parseMailbox(email.from)?.email ?? email.from;
  const fromHost = fromEmail.slice(fromEmail.lastIndexOf("@") + 1).toLowerCase();
  const fromLocal = fromEmail.slice(0, fromEmail.lastIndexOf("@"));
  const fromOrg = registrable(fromHost);
  const html = email.html ?? "";
  const facts = html ? scanHtml(html, { words: !!email.text }) : null;
  const webLinks = facts?.links.filter((l) => l.host !== null) ?? [];
  const out: Insight[] = [];

  // --- Resend's checks ---
  const foreign = [...new Set(webLinks.map((l) => l.host!).filter((h) => registrable(h) !== fromOrg))];
  out.push(foreign.length === 0
    ? pass("link_domain_mismatch", "Links match the sender's domain", `Every link points at ${fromOrg}${webLinks.length === 0 ? " (there are no links)" : ""}.`)
    : warn("link_domain_mismatch", "Links point at other domains", `Links go to ${listed(foreign)}, not ${fromOrg}. Filters compare link domains with the From domain; link to your own domain (or a subdomain of it) where you can.`));

  const dmarc = domain?.dmarc;
  out.push(dmarc?.found
    ? pass("dmarc_missing", "DMARC is published", `_dmarc${dmarc.inherited ? ` of ${fromOrg}` : `.${fromHost}`} has a policy (p=${dmarc.policy ?? "none"}).`)
    : failed("dmarc_missing", "No DMARC record", `Publish a TXT record at _dmarc.${fromOrg}, e.g. "v=DMARC1; p=none; rua=mailto:dmarc@${fromOrg}". Gmail and Yahoo require DMARC of bulk senders (February 2024 sender requirements).`));

  out.push(!html || email.text
    ? pass("missing_text_part", "Has a plain-text part", html ? "The html has a text alternative." : "The email is plain text.")
    : warn("missing_text_part", "No plain-text part", "The email has html only (it was sent with `text: \"\"`). Add a text version: some clients and filters prefer multipart/alternative (SpamAssassin MIME_HTML_ONLY)."));

  out.push(NO_REPLY.test(fromLocal)
    ? warn("no_reply_sender", "Sent from a no-reply address", `${fromEmail} tells readers not to answer. Replies are a signal of engagement that mailbox providers weigh; use an address someone reads.`)
    : pass("no_reply_sender", "The sender can be answered", `${fromEmail} is not a no-reply address.`));

  const htmlBytes = new TextEncoder().encode(html).length;
  out.push(htmlBytes > GMAIL_CLIP_BYTES
    ? warn("large_body", "Gmail will clip this email", `The html is ${Math.round(htmlBytes / 1024)} KB; Gmail clips past 102 KB and hides the rest (with any open pixel at the end). Trim inline styles and markup.`)
    : pass("large_body", "Under Gmail's clipping size", `The html is ${Math.round(htmlBytes / 1024)} KB, under Gmail's 102 KB.`));

  const shortened = [...new Set(webLinks.map((l) => l.host!).filter((h) => SHORTENERS.has(h)))];
  out.push(shortened.length > 0
    ? failed("url_shortener", "Links use a URL shortener", `${listed(shortened)} hide where a link goes, and spammers use them for that: filters and blocklists (Spamhaus DBL, SpamAssassin URIBL rules) penalise them. Link to the destination itself.`)
    : pass("url_shortener", "No URL shorteners", "No link goes through a public shortener."));

  out.push(fromHost === fromOrg
    ? warn("root_domain_sender", "Sent from the root domain", `${fromHost} is your organization's root domain. Send from a subdomain (e.g. mail.${fromOrg}) so this stream's reputation stays apart from your people's mail.`)
    : pass("root_domain_sender", "Sent from a subdomain", `${fromHost} keeps this mail's reputation apart from ${fromOrg}.`));

  const tracking = !!domain && (domain.openTracking || domain.clickTracking) && ctx.trackingHost !== null;
  const sharedTracking = tracking && registrable(ctx.trackingHost!) !== fromOrg;
  out.push(sharedTracking
    ? warn("shared_tracking_domain", "Tracking links use another domain", `Tracked links and the open pixel point at ${ctx.trackingHost}, not ${fromOrg}, so they inherit that domain's reputation and mismatch the sender. Give the domain a tracking subdomain (its Tracking record) so they point at ${fromOrg}, or turn tracking off.`)
    : pass("shared_tracking_domain", tracking ? "Tracking uses the sender's domain" : "No tracking domain", tracking ? `Tracking points at ${ctx.trackingHost}.` : "Open and click tracking are off for this domain."));

  // --- More checks, each with its source ---
  if (facts) {
    out.push(facts.imagesWithoutAlt > 0
      ? warn("image_alt_text", "Images without alt text", `${facts.imagesWithoutAlt} of ${facts.images} ${facts.images === 1 ? "image has" : "images have"} no alt attribute. Many clients block images by default, and screen readers need alt text (WCAG 2.1, 1.1.1); use alt="" for decorative ones.`)
      : pass("image_alt_text", "Images have alt text", facts.images === 0 ? "There are no images." : "Every image has an alt attribute."));

    const ratio = facts.images === 0 ? Infinity : facts.visibleChars / facts.images;
    out.push(facts.images > 0 && facts.visibleChars < 100
      ? failed("image_to_text_ratio", "Mostly image, little text", `${facts.images} ${facts.images === 1 ? "image" : "images"} and ${facts.visibleChars} characters of text. Image-only mail is a classic spam shape (SpamAssassin HTML_IMAGE_ONLY_*); put the message in text.`)
      : facts.images > 0 && ratio < 100
        ? warn("image_to_text_ratio", "High image-to-text ratio", `${facts.visibleChars} characters of text for ${facts.images} ${facts.images === 1 ? "image" : "images"}. SpamAssassin's HTML_IMAGE_RATIO rules score little text per image; aim for at least a sentence or two per image.`)
        : pass("image_to_text_ratio", "Balanced text and images", facts.images === 0 ? "There are no images." : `${facts.visibleChars} characters of text for ${facts.images} ${facts.images === 1 ? "image" : "images"}.`));

    const deceptive = facts.links.filter((l) => {
      const shown = URL_TEXT.exec(l.text.trim().replace(/&amp;/g, "&"));
      return shown && l.host !== null && registrable(shown[1]!.toLowerCase()) !== registrable(l.host);
    });
    out.push(deceptive.length > 0
      ? failed("link_text_mismatch", "Link text shows a different URL", `${listed(deceptive.map((l) => l.text.trim()))} link to ${listed([...new Set(deceptive.map((l) => l.host!))])}. Showing one address and linking another is what phishing does; filters flag it (SpamAssassin HTTPS_HTTP_MISMATCH and phishing rules). Show the real destination, or plain words.`)
      : pass("link_text_mismatch", "Link texts are honest", "No link shows one web address and goes to another."));

    const numeric = [...new Set(webLinks.map((l) => l.host!).filter((h) => /^\d{1,3}(\.\d{1,3}){3}$/.test(h) || h.startsWith("[")))];
    out.push(numeric.length > 0
      ? failed("ip_address_links", "Links to IP addresses", `${listed(numeric)}: links to raw IP addresses score as spam (SpamAssassin NUMERIC_HTTP_ADDR). Link to a domain name.`)
      : pass("ip_address_links", "No links to IP addresses", "Every link uses a domain name."));

    const insecure = [...new Set(webLinks.filter((l) => /^http:/i.test(l.href)).map((l) => l.host!))];
    out.push(insecure.length > 0
      ? warn("insecure_links", "Links use plain http", `Links to ${listed(insecure)} use http://. Browsers mark them "Not secure" and Google's sender guidelines ask for TLS throughout; use https://.`)
      : pass("insecure_links", "Links use https", webLinks.length === 0 ? "There are no links." : "Every web link uses https://."));

    out.push(facts.forms > 0
      ? failed("html_forms", "The html has a form", `${facts.forms} <form> element${facts.forms > 1 ? "s" : ""}: Gmail and Outlook disable forms in mail, and forms asking for data are a phishing signal. Link to a page instead.`)
      : pass("html_forms", "No forms", "The html has no <form>."));

    out.push(facts.scripts > 0
      ? failed("html_scripts", "The html has scripts", `Scripts, javascript: links or on* event handlers (${facts.scripts}) never run in mail clients, which strip them, and filters treat them as hostile. Remove them.`)
      : pass("html_scripts", "No scripts", "No <script>, javascript: link or event handler."));

    out.push(facts.hiddenChars > 200 || (facts.hiddenChars > 0 && facts.hiddenChars >= facts.visibleChars)
      ? warn("invisible_text", "Hidden text", `${facts.hiddenChars} characters are hidden (display:none, a zero font size or text the colour of its background). Hidden text is a filter-evasion trick (SpamAssassin HTML_FONT_LOW_CONTRAST, HTML_FONT_SIZE_TINY); a short preheader is fine.`)
      : pass("invisible_text", "No hidden text", facts.hiddenChars > 0 ? `Only a short hidden preheader (${facts.hiddenChars} characters).` : "All text is visible."));

    if (email.text) {
      const textWords = wordsOf(email.text);
      let shared = 0;
      for (const w of facts.words) if (textWords.has(w)) shared++;
      const union = facts.words.size + textWords.size - shared;
      const similarity = union === 0 ? 1 : shared / union;
      out.push(similarity < 0.5
        ? warn("text_html_mismatch", "Text and html say different things", `Only ${Math.round(similarity * 100)}% of their words are shared. SpamAssassin's MPART_ALT_DIFF scores alternatives that differ; make the text part say what the html says.`)
        : pass("text_html_mismatch", "Text and html agree", `${Math.round(similarity * 100)}% of their words are shared.`));
    }
  }

  const letters = email.subject.replace(/[^\p{L}]/gu, "");
  out.push(letters.length >= 10 && letters === letters.toUpperCase() && letters !== letters.toLowerCase()
    ? warn("subject_all_caps", "The subject is in capitals", "A subject in capitals reads as shouting and scores as spam (SpamAssassin SUBJ_ALL_CAPS). Use sentence case.")
    : pass("subject_all_caps", "The subject is not all capitals", "Sentence or title case."));

  const bangs = (email.subject.match(/[!¡]/g) ?? []).length;
  out.push(bangs >= 3 || /[!?]{2,}/.test(email.subject)
    ? warn("subject_punctuation", "Exclamation-heavy subject", `The subject has ${bangs} exclamation marks or runs of !/?. SpamAssassin scores them (PLING_QUERY and similar rules); one at most.`)
    : pass("subject_punctuation", "Calm subject punctuation", "No runs of exclamation or question marks."));

  const listUnsubscribe = header(email.headers, "list-unsubscribe");
  out.push(listUnsubscribe
    ? pass("list_unsubscribe", "Has List-Unsubscribe", "Mailbox providers can show their own unsubscribe button.")
    : email.broadcast
      ? failed("list_unsubscribe", "Bulk mail without List-Unsubscribe", "Gmail and Yahoo require a List-Unsubscribe header on bulk mail (February 2024 sender requirements). Add `List-Unsubscribe: <{{{RESEND_UNSUBSCRIBE_URL}}}>` and tern fills it per recipient.")
      : pass("list_unsubscribe", "Transactional mail", "No List-Unsubscribe header, which transactional mail does not need; marketing and bulk mail must have one (Gmail and Yahoo sender requirements)."));

  const oneClick = /list-unsubscribe=one-click/i.test(header(email.headers, "list-unsubscribe-post") ?? "") || (listUnsubscribe?.includes("{{{RESEND_UNSUBSCRIBE_URL}}}") ?? false);
  out.push(!listUnsubscribe || oneClick
    ? pass("one_click_unsubscribe", "One-click unsubscribe", listUnsubscribe ? "List-Unsubscribe-Post: List-Unsubscribe=One-Click is sent (RFC 8058)." : "Not applicable without List-Unsubscribe.")
    : warn("one_click_unsubscribe", "Unsubscribe is not one-click", "List-Unsubscribe has no List-Unsubscribe-Post: List-Unsubscribe=One-Click. Gmail and Yahoo require one-click unsubscribe (RFC 8058) for bulk mail; use tern's {{{RESEND_UNSUBSCRIBE_URL}}} placeholder, which adds it."));

  const replyDomains = email.replyTo.map((r) => (parseMailbox(r)?.email ?? r).split("@").pop()!.toLowerCase()).filter((d) => registrable(d) !== fromOrg);
  out.push(replyDomains.length > 0
    ? warn("reply_to_mismatch", "Reply-To is another domain", `Replies go to ${listed([...new Set(replyDomains)])}, not ${fromOrg}. A Reply-To elsewhere (especially a free mailbox) is a phishing signal (SpamAssassin FREEMAIL_FORGED_REPLYTO); reply to your own domain.`)
    : pass("reply_to_mismatch", "Reply-To matches the sender", email.replyTo.length ? "Replies go to the sender's domain." : "Replies go to the sender."));

  out.push(!dmarc?.found
    ? warn("dmarc_policy", "No DMARC policy to enforce", `There is no DMARC record at _dmarc.${fromOrg} yet, so no policy to enforce: publish one first (the check "No DMARC record" says how).`)
    : dmarc.policy === "none"
      ? warn("dmarc_policy", "DMARC only monitors (p=none)", `p=none satisfies Gmail's and Yahoo's bulk-sender rule, but does not stop anyone spoofing ${fromOrg}. Once reports show your mail aligns, move to p=quarantine, then p=reject.`)
      : pass("dmarc_policy", `DMARC enforces (p=${dmarc.policy})`, "Mail that fails DMARC is quarantined or rejected."));

  out.push(domain?.status === "verified"
    ? pass("domain_authentication", "SPF and DKIM are verified", `${domain.name} has verified DKIM and SPF records, which Gmail and Yahoo require of every sender.`)
    : failed("domain_authentication", "The domain is not fully verified", `${domain?.name ?? fromHost} is ${domain?.status ?? "unknown"}: publish its DKIM and SPF records and verify it. Gmail and Yahoo require SPF and DKIM of every sender (February 2024).`));

  const risky = email.attachments.map((a) => a.filename ?? "").filter((f) => RISKY_EXTENSIONS.test(f));
  out.push(risky.length > 0
    ? failed("risky_attachments", "Executable attachments", `${listed(risky)}: Gmail blocks executable and script attachments outright. Link to a download instead.`)
    : pass("risky_attachments", "No executable attachments", email.attachments.length ? `${email.attachments.length} attachment(s), none executable.` : "No attachments."));

  return out;
}
