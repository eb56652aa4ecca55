// How a send asks for one-click unsubscribe (RFC 8058): its `List-Unsubscribe` header holds
// the placeholder {{{RESEND_UNSUBSCRIBE_URL}}}, e.g. `"headers": {"List-Unsubscribe":
// "<{{{RESEND_UNSUBSCRIBE_URL}}}>"}` (with any mailto: of its own beside it). tern then renders
// the message per recipient: the placeholder becomes that recipient's signed unsubscribe URL,
// in the header and wherever it also appears in the html or text, and
// `List-Unsubscribe-Post: List-Unsubscribe=One-Click` is added. A header is a field the send
// schema already accepts, so a request stays valid for Resend's API too.
import { signUnsubscribeToken, UNSUBSCRIBE_PATH_PREFIX, type UnsubscribeClaim } from "./unsubscribe-token.ts";

export const UNSUBSCRIBE_PLACEHOLDER = "{{{RESEND_UNSUBSCRIBE_URL}}}";
const PLACEHOLDER_IN_HEADER = /<?\{\{\{RESEND_UNSUBSCRIBE_URL\}\}\}>?/g;

export interface MessageParts {
  html: string | null;
  text: string | null;
  headers: Record<string, string>;
}

function headerName(headers: Record<string, string>, name: string): string | undefined {
  return Object.keys(headers).find((k) => k.toLowerCase() === name);
}

/** Whether the send asked for tern's one-click unsubscribe. */
export function asksForUnsubscribe(headers: Record<string, string>): boolean {
  const name = headerName(headers, "list-unsubscribe");
  return name !== undefined && headers[name]!.includes(UNSUBSCRIBE_PLACEHOLDER);
}

export async function unsubscribeUrl(key: CryptoKey, baseUrl: string, claim: UnsubscribeClaim): Promise<string> {
  return `${baseUrl.replace(/\/+$/, "")}${UNSUBSCRIBE_PATH_PREFIX}${await signUnsubscribeToken(key, claim)}`;
}

/** The parts with the placeholder replaced by `url` (null: no URL to give, the placeholder's header is dropped). */
export function withUnsubscribeUrl(parts: MessageParts, url: string | null): MessageParts {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(parts.headers)) {
    const lower = name.toLowerCase();
    if (lower === "list-unsubscribe-post") continue; // tern writes it below
    if (lower === "list-unsubscribe" && value.includes(UNSUBSCRIBE_PLACEHOLDER)) {
      if (url === null) continue;
      headers[name] = value.replace(PLACEHOLDER_IN_HEADER, `<${url}>`);
      headers["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click";
      continue;
    }
    headers[name] = value;
  }
  const fill = (s: string | null) => (s === null ? null : s.split(UNSUBSCRIBE_PLACEHOLDER).join(url ?? ""));
  return { html: fill(parts.html), text: fill(parts.text), headers };
}
