// Internationalized domain names: tern stores and publishes A-labels (xn--...), which is what
// DNS and the API carry; people read the Unicode form. WHATWG's domainToUnicode (workerd's
// node:url) does the UTS #46 decoding, so no punycode code of our own.
import { domainToUnicode } from "node:url";

/** The Unicode form of a stored name, or the name itself when it has no A-label. */
export function unicodeName(name: string): string {
  if (!/(^|\.)xn--/i.test(name)) return name;
  return domainToUnicode(name) || name;
}
