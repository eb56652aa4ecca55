// CSV that tern hands out (an import's failed rows): RFC 4180 quoting, and no cell a
// spreadsheet would run as a formula. Every CSV tern exports goes through csvFile.

/** Characters that make Excel, Sheets or LibreOffice read a cell as a formula (OWASP's list). */
const FORMULA_START = /^[=+\-@\t\r]/;

/** A separator some spreadsheet splits on (a semicolon in most European locales' Excel, a tab,
 * a line break that a reader not honouring the quotes takes as a new row) followed by what
 * would start a formula in the cell it splits off. */
const FORMULA_AFTER_SEPARATOR = /([,;\t\r\n])(?=[=+\-@\t\r])/g;

/** One cell: a would-be formula gets a leading apostrophe (shown as text, not run), and so does
 * each piece a spreadsheet splitting on another separator would read as one (`x;=cmd` is two
 * cells where the list separator is `;`, whatever the quoting); a cell with a separator, quote
 * or line break is quoted, its quotes doubled. */
export function csvCell(value: string | number | null | undefined): string {
  let text = value == null ? "" : String(value);
  if (typeof value === "string") {
    text = text.replace(FORMULA_AFTER_SEPARATOR, "$1'");
    if (FORMULA_START.test(text)) text = `'${text}`;
  }
  return /[",;\t\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** A header row and the rows, CRLF-separated as RFC 4180 has it. */
export function csvFile(header: string[], rows: (string | number | null | undefined)[][]): string {
  return [header, ...rows].map((r) => r.map(csvCell).join(",")).join("\r\n") + "\r\n";
}
