// CSV that tern hands out (an import's failed rows): RFC 4180 quoting, and no cell a
// spreadsheet would run as a formula. Every CSV tern exports goes through csvFile.

/** Characters that make Excel, Sheets or LibreOffice read a cell as a formula (OWASP's list). */
const FORMULA_START = /^[=+\-@\t\r]/;

/** One cell: a would-be formula gets a leading apostrophe (shown as text, not run); a cell with
 * a comma, quote or line break is quoted, its quotes doubled. */
export function csvCell(value: string | number | null | undefined): string {
  let text = value == null ? "" : String(value);
  if (typeof value === "string" && FORMULA_START.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** A header row and the rows, CRLF-separated as RFC 4180 has it. */
export function csvFile(header: string[], rows: (string | number | null | undefined)[][]): string {
  return [header, ...rows].map((r) => r.map(csvCell).join(",")).join("\r\n") + "\r\n";
}
