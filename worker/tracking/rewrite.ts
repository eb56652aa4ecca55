// Open and click tracking for one email's HTML: http(s) links in <a href> go through a signed
// click URL, and a 1x1 pixel is added for opens. Only the href values change; every other
// byte of the document stays as it was. The original links are returned in token order, to
// be stored with the email: a click redirects only to the link stored at its index.
import { attribute, decodeAttributeValue, escapeAttributeValue, scanTags } from "./html.ts";
import { CLICK_PATH_PREFIX, MAX_LINK_INDEX, OPEN_PATH_PREFIX, signClickToken, signOpenToken } from "./tokens.ts";

/** More distinct links than this stay untracked: the list is stored per email. */
export const MAX_TRACKED_LINKS = 1000;
/** Longer links stay untracked (they would also make the stored list large). */
export const MAX_TRACKED_LINK_LENGTH = 4096;

export interface RewriteOptions {
  emailId: string;
  /** Origin (and optional path) of the tracking host, like "https://links.example.com". */
  baseUrl: string;
  /** HMAC-SHA256 key that signs the tokens (see tokens.ts). */
  key: CryptoKey;
  /** A domain's own tracking host the links go to: the tokens are then authentic only there. */
  host?: string;
  openTracking: boolean;
  clickTracking: boolean;
  /** Links that must stay as they are, besides the unsubscribe links recognised here (e.g. tern's own List-Unsubscribe URL). */
  untracked?: readonly string[];
}

export interface RewriteResult {
  html: string;
  /** The original links, index = the link index in its click tokens. Empty without click tracking. */
  links: string[];
}

/** Unsubscribe and opt-out links go straight to their target: a redirect in front of them
 * looks like phishing to filters, and a scanner's click must not count as a click. */
const UNSUBSCRIBE = /unsubscribe|opt[-_]?out/i;

export function openPixelUrl(baseUrl: string, token: string): string {
  return `${baseUrl.replace(/\/+$/, "")}${OPEN_PATH_PREFIX}${token}`;
}

export function clickUrl(baseUrl: string, token: string): string {
  return `${baseUrl.replace(/\/+$/, "")}${CLICK_PATH_PREFIX}${token}`;
}

/** The link a browser would follow for this href value, if tern should track it; otherwise null. */
export function trackableLink(decodedHref: string, untracked: readonly string[] = []): string | null {
  // The URL parser drops leading and trailing C0 controls and spaces, and every tab and newline.
  const link = decodedHref.replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, "").replace(/[\t\n\r]/g, "");
  if (!/^https?:\/\//i.test(link) || link.length > MAX_TRACKED_LINK_LENGTH) return null;
  let parsed: URL;
  try {
    parsed = new URL(link);
  } catch {
    return null;
  }
  if (parsed.hostname === "") return null;
  if (UNSUBSCRIBE.test(link) || untracked.includes(link)) return null;
  return link;
}

export async function rewriteHtml(html: string, options: RewriteOptions): Promise<RewriteResult> {
  if (!options.openTracking && !options.clickTracking) return { html, links: [] };
  const tags = scanTags(html);
  const edits: { start: number; end: number; text: Promise<string> }[] = [];
  const links: string[] = [];
  const indexOf = new Map<string, number>();

  if (options.clickTracking) {
    for (const tag of tags) {
      if (tag.end || tag.name !== "a") continue;
      const href = attribute(tag, "href");
      if (href === undefined || href.valueStart === -1) continue;
      const decoded = decodeAttributeValue(href.raw);
      const link = decoded === null ? null : trackableLink(decoded, options.untracked);
      if (link === null) continue;
      let index = indexOf.get(link);
      if (index === undefined) {
        if (links.length >= MAX_TRACKED_LINKS || links.length > MAX_LINK_INDEX) continue;
        index = links.length;
        links.push(link);
        indexOf.set(link, index);
      }
      const token = signClickToken(options.key, options.emailId, index, link, options.host);
      edits.push({
        start: href.valueStart,
        end: href.valueEnd,
        text: token.then((t) => `"${escapeAttributeValue(clickUrl(options.baseUrl, t))}"`),
      });
    }
  }

  if (options.openTracking) {
    // Before the last </body> (or </html>), so the pixel is inside the document; else at the end.
    const closing = (name: string) => tags.filter((t) => t.end && t.name === name).at(-1)?.start;
    const at = closing("body") ?? closing("html") ?? html.length;
    const token = signOpenToken(options.key, options.emailId, options.host);
    edits.push({
      start: at,
      end: at,
      text: token.then(
        (t) =>
          `<img src="${escapeAttributeValue(openPixelUrl(options.baseUrl, t))}" width="1" height="1" alt="" ` +
          `style="display:block;width:1px;height:1px;border:0;margin:0;padding:0;overflow:hidden" />`,
      ),
    });
  }

  const texts = await Promise.all(edits.map((e) => e.text));
  const order = edits.map((e, i) => ({ ...e, text: texts[i]! })).sort((a, b) => a.start - b.start);
  let out = "";
  let from = 0;
  for (const edit of order) {
    out += html.slice(from, edit.start) + edit.text;
    from = edit.end;
  }
  return { html: out + html.slice(from), links: options.clickTracking ? links : [] };
}
