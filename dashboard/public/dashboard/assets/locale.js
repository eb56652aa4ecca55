// @ts-check
// A locale tag Intl accepts, from whatever the browser reports. Headless Chrome on Linux with
// LANG=C.UTF-8 reports "en-US@posix", which Intl refuses with "Invalid language tag"; a POSIX
// name such as "de_DE.UTF-8" is read as "de-DE"; anything else unusable becomes "en-US".

/** @param {unknown} tag @returns {string} */
export function safeLocale(tag) {
  if (typeof tag !== "string" || tag === "") return "en-US";
  for (const candidate of [tag, tag.replace(/[.@].*$/, "").replace(/_/g, "-")]) {
    try {
      const [canonical] = Intl.getCanonicalLocales(candidate);
      // Canonical but unknown to this Intl (e.g. "c" from LANG=C) formats as the default locale.
      if (canonical && Intl.NumberFormat.supportedLocalesOf(canonical).length) return canonical;
    } catch {
      // not a well-formed tag: try the next form
    }
  }
  return "en-US";
}
