// Reading a form (multipart/form-data) as its body arrives: each part's content is a list of the
// body's own pieces, never joined, so a 50 MB upload is held once, not as the body and then as a
// File copied out of it (Response.formData() holds both until it returns).
// The parser is @remix-run/multipart-parser (the maintained successor of
// @mjackson/multipart-parser); tern reads the body and feeds it, to hold it to the limit, join
// tiny pieces, and stop at the closing boundary (the parser's own stream reader would not).
import { MultipartParser, type MultipartPart } from "@remix-run/multipart-parser";
import { concatBytes } from "./bytes.ts";
import { readBodyChunks, readBodyLimited } from "./http.ts";

/** The body is not a form: no multipart/form-data type or boundary, or not that format. */
export class MalformedForm extends Error {}

export interface FormPart {
  name: string;
  /** A file part's name (FormData makes a File of a part with a non-empty filename); undefined
   * for a text field. */
  filename: string | undefined;
  /** Its content as it arrived, in pieces: views of the body's own chunks. */
  content: Uint8Array[];
}

/** The parser keeps a view of each piece it is given: pieces smaller than this are joined first,
 * so a body that trickles in a few bytes a read is not held as millions of tiny arrays. Not
 * more: workerd hands a body over in pieces of at most 4 KB (locally), and joining those into
 * 64 KB blocks left their copies as garbage; the isolate sampled during a 50 MB form peaked at
 * +130 MB in two runs of three, against +70-78 MB in three with 4 KB (docs/benchmarks.md). */
const BLOCK_BYTES = 4 * 1024;

/** The form's parts in order, each as soon as its end has arrived; at most `limit` bytes of body
 * (readBodyChunks' 413 past it, the rest never read). A form sent url-encoded (which
 * Response.formData() also reads) has small fields only, and is read whole. */
export async function* formParts(req: Request, limit: number): AsyncGenerator<FormPart, void, undefined> {
  const type = req.headers.get("content-type") ?? "";
  const media = type.split(";")[0]!.trim().toLowerCase();
  if (media === "application/x-www-form-urlencoded") {
    const text = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true }).decode(await readBodyLimited(req, limit));
    for (const [name, value] of new URLSearchParams(text)) yield { name, filename: undefined, content: [new TextEncoder().encode(value)] };
    return;
  }
  const body = readBodyChunks(req, limit);
  // The body's size is answered first, as when the whole body was read before it was parsed: a
  // body that is no form is read on to its end or the limit (not kept) before it is refused.
  const malformed = async (why: unknown) => {
    for await (const _ of body);
    return new MalformedForm(why instanceof Error ? why.message : String(why));
  };
  if (media !== "multipart/form-data") throw await malformed("not multipart/form-data");
  const boundary = /;\s*boundary\s*=\s*(?:"([^"]+)"|([^\s;"]+))/i.exec(type);
  if (!boundary) throw await malformed("no boundary");
  // No part holds more than the whole body: tern's own limit is the one that answers.
  const parser = new MultipartParser(boundary[1] ?? boundary[2]!, { maxFileSize: limit, maxTotalSize: limit });
  for await (const block of blocks(body)) {
    let parts: FormPart[];
    try {
      parts = [...parser.write(block)].map(formPart);
    } catch (err) {
      throw await malformed(err);
    }
    yield* parts;
    // The parser refuses anything written after the closing boundary (0.16.3), though a client
    // may send a CRLF there, in a later piece of the body: the rest is not read.
    if (ended(parser)) return;
  }
  if (!ended(parser)) throw new MalformedForm("no closing boundary");
}

function ended(parser: MultipartParser): boolean {
  try {
    parser.finish();
    return true;
  } catch {
    return false;
  }
}

/** A part as Response.formData() reads it; it refuses a part without a name. Part headers are
 * decoded as strict UTF-8: a byte that is not (a Latin-1 file name) throws too. */
function formPart(part: MultipartPart): FormPart {
  const name = part.name;
  if (name === undefined) throw new Error("a part without a name");
  return { name, filename: part.filename || undefined, content: part.content };
}

/** The body's pieces, those under BLOCK_BYTES joined until they reach it; a larger piece goes on
 * as it came (what was gathered before it goes first), so no large piece is ever copied. */
async function* blocks(pieces: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array, void, undefined> {
  let gathered: Uint8Array[] = [];
  let size = 0;
  for await (const piece of pieces) {
    if (piece.byteLength >= BLOCK_BYTES) {
      if (size > 0) yield concatBytes(gathered, size);
      gathered = [];
      size = 0;
      yield piece;
      continue;
    }
    gathered.push(piece);
    size += piece.byteLength;
    if (size >= BLOCK_BYTES) {
      yield concatBytes(gathered, size);
      gathered = [];
      size = 0;
    }
  }
  if (size > 0) yield concatBytes(gathered, size);
}

/** A text field's value, decoded as Response.formData() decodes one: UTF-8, invalid bytes
 * replaced by U+FFFD, a BOM kept. */
export function fieldText(content: readonly Uint8Array[]): string {
  const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
  let text = "";
  for (const [i, piece] of content.entries()) text += decoder.decode(piece, { stream: i < content.length - 1 });
  return text;
}

/** A text field's value as UTF-8 bytes, in pieces: each piece decoded as fieldText decodes it
 * and encoded again, replacing its raw bytes in the list, so a large field is held about once. */
export function fieldBytes(content: Uint8Array[]): Uint8Array[] {
  const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
  const encoder = new TextEncoder();
  for (let i = 0; i < content.length; i++) content[i] = encoder.encode(decoder.decode(content[i], { stream: i < content.length - 1 }));
  return content;
}
