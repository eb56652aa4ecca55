// What people write into one row: D1 stores at most 2,000,000 bytes in a row
// (developers.cloudflare.com/d1/platform/limits), and a write over it fails whole, which would
// be a 500. A broadcast's body and editor document, and a template's draft, published version
// and document, are each one row's, so they are bounded in UTF-8 bytes before the write, with
// room left for the row's other columns.
import { ApiError } from "../errors.ts";

export const ROW_CONTENT_BYTES = 1_800_000;

/** The UTF-8 length of a string, without encoding it (a body may be millions of characters). */
export function utf8Bytes(s: string | null | undefined): number {
  if (!s) return 0;
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c < 0xdc00 && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4; // a surrogate pair: one code point of four bytes
      i++;
    } else n += 3; // a lone surrogate is written as U+FFFD, three bytes
  }
  return n;
}

const mb = (n: number) => `${(n / 1_000_000).toFixed(n < 100_000 ? 2 : 1)} MB`;

/** 422 when `bytes` passes ROW_CONTENT_BYTES: `what` says what takes them, `fix` how to fit. */
export function assertFitsRow(bytes: number, what: string, fix: string): void {
  if (bytes <= ROW_CONTENT_BYTES) return;
  throw new ApiError("validation_error", `${what} would take ${mb(bytes)}; tern keeps at most ${mb(ROW_CONTENT_BYTES)} of them (a database row holds 2 MB). ${fix}`);
}
