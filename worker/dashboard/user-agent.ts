// A browser's User-Agent as a person names it: "Chrome 131 on Linux", "Safari 17 on iOS".
// Parsing is bowser's (maintained, MIT, no dependencies, about 36 KB in the Worker only): the
// UA formats of the browsers and systems in use change too often to keep a parser of our own.
import Bowser from "bowser";

/** A short summary of a User-Agent for a list; the full string belongs in a title. */
export function userAgentSummary(ua: string | null | undefined): string {
  const text = (ua ?? "").trim();
  if (!text) return "Unknown browser";
  const { browser, os, platform } = Bowser.parse(text);
  if (!browser.name) {
    // Not a browser (curl, a script, a mail proxy): its own first word, cut to stay short.
    const first = text.split(/[\s;(]/)[0] ?? text;
    return first.length > 40 ? `${first.slice(0, 39)}…` : first;
  }
  const major = browser.version?.split(".")[0];
  const name = `${browser.name}${major ? ` ${major}` : ""}${/Headless/i.test(text) ? " (headless)" : ""}`;
  if (platform.type === "bot" || !os.name) return name;
  return `${name} on ${os.name}${platform.type === "tablet" ? " (tablet)" : ""}`;
}
