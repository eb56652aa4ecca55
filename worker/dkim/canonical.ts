// DKIM "relaxed" canonicalization (RFC 6376 section 3.4.2 and 3.4.4), on bytes, because the
// body of a 40 MB message should not be turned into a string and back.

const CR = 13;
const LF = 10;
const SP = 32;
const TAB = 9;

/** The relaxed body: runs of WSP become one SP, WSP at line ends goes, empty lines at the end
 * go, and a non-empty body ends with CRLF. A bare LF is taken as a line end as well. */
export function relaxedBody(body: Uint8Array): Uint8Array {
  const out = new Uint8Array(body.length + 2);
  let o = 0;
  let emptyLines = 0; // CRLFs owed for empty lines, written only if content follows
  let lineHasContent = false;
  let space = false; // a WSP run seen since the last content byte
  const n = body.length;
  for (let i = 0; i < n; i++) {
    const b = body[i]!;
    if (b === CR && body[i + 1] === LF) continue; // the LF ends the line
    if (b === LF) {
      if (lineHasContent) {
        out[o++] = CR;
        out[o++] = LF;
      } else {
        emptyLines++;
      }
      lineHasContent = false;
      space = false;
      continue;
    }
    if (b === SP || b === TAB) {
      space = true;
      continue;
    }
    if (!lineHasContent) {
      for (; emptyLines > 0; emptyLines--) {
        out[o++] = CR;
        out[o++] = LF;
      }
      lineHasContent = true;
    }
    if (space) {
      out[o++] = SP;
      space = false;
    }
    out[o++] = b;
  }
  if (lineHasContent) {
    out[o++] = CR;
    out[o++] = LF;
  }
  return out.subarray(0, o);
}

/** One header field in relaxed form, "name:value" without the CRLF: the name lower case, the
 * field unfolded, WSP runs made one SP, WSP around the colon and at the end removed. */
export function relaxedHeader(field: string): string {
  const colon = field.indexOf(":");
  const name = field.slice(0, colon).replace(/[ \t]+$/, "").toLowerCase();
  const value = field
    .slice(colon + 1)
    .replace(/\r?\n(?=[ \t])/g, "")
    .replace(/[ \t]+/g, " ")
    .replace(/^ /, "")
    .replace(/ $/, "");
  return `${name}:${value}`;
}

/** A message split into its header fields (each with its folding, without the final CRLF)
 * and its body (the bytes after the blank line). */
export interface SplitMessage {
  fields: string[];
  body: Uint8Array;
}

export function splitMessage(raw: Uint8Array): SplitMessage {
  let end = -1;
  let bodyStart = raw.length;
  for (let i = 0; i + 1 < raw.length; i++) {
    if (raw[i] !== LF) continue;
    if (raw[i + 1] === LF) {
      end = i + 1;
      bodyStart = i + 2;
      break;
    }
    if (raw[i + 1] === CR && raw[i + 2] === LF) {
      end = i + 1;
      bodyStart = i + 3;
      break;
    }
  }
  const headerBytes = end < 0 ? raw : raw.subarray(0, end);
  const text = new TextDecoder().decode(headerBytes);
  const fields: string[] = [];
  for (const line of text.split(/\r?\n/)) {
    if (line === "") continue;
    if ((line[0] === " " || line[0] === "\t") && fields.length > 0) fields[fields.length - 1] += "\r\n" + line;
    else fields.push(line);
  }
  return { fields, body: raw.subarray(Math.min(bodyStart, raw.length)) };
}
