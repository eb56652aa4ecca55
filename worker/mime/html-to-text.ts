// The plain-text part derived from html when a send has no text (contract 4.1). The
// html-to-text package is pure JavaScript (htmlparser2): it runs unchanged in workerd.

import { compile } from "html-to-text";

const blockLine = { leadingLineBreaks: 1, trailingLineBreaks: 1 };

const convert = compile({
  // No hard wrapping: without format=flowed, breaks at 78 columns render as ragged lines on
  // screens narrower than that (phones); quoted-printable already keeps wire lines within
  // 76, and a long URL cannot be wrapped anyway.
  wordwrap: false,
  selectors: [
    // "text [url]", and just "url" when the text is the url (or the address of a mailto:).
    { selector: "a", options: { hideLinkHrefIfSameAsText: true } },
    { selector: "img", format: "skip" },
    ...["h1", "h2", "h3", "h4", "h5", "h6"].map((selector) => ({ selector, options: { uppercase: false } })),
    // Email html lays out with tables: each cell is a block of its own, not glued to the next.
    { selector: "table", format: "block" },
    { selector: "tr", format: "block", options: blockLine },
    { selector: "td", format: "block", options: blockLine },
    { selector: "th", format: "block", options: blockLine },
    // Nothing a reader of the html would not see either.
    { selector: "head", format: "skip" },
    { selector: "title", format: "skip" },
    { selector: "style", format: "skip" },
    { selector: "script", format: "skip" },
    { selector: "[data-skip-in-text=true]", format: "skip" },
    { selector: '[style*="display:none"i]', format: "skip" },
    { selector: '[style*="display: none"i]', format: "skip" },
  ],
});

/** The plain-text rendering of an html body: paragraphs and cells as blocks, links as
 * `text [url]`, images and hidden elements left out, no line wrapping. */
export function htmlToText(html: string): string {
  return convert(html);
}
