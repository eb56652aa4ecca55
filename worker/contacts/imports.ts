// CSV contact imports (Resend's /contacts/imports): the file is kept in R2 and processed by the
// broadcast queue's consumer in chunks; each chunk is one D1 batch that writes its contacts,
// their segments and topic choices, their contact.created / contact.updated events, the counts
// and the cursor. An existing address is updated (on_conflict: upsert) or left alone (skip).
import { and, eq, inArray, lt, or, isNull } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import { drizzle } from "drizzle-orm/d1";
import Papa from "papaparse";
import { contactImports, contactSegments, contactTopics, contacts, type ContactImportRow, type ContactRow } from "../db/schema.ts";
import { ApiError, describeFailure } from "../errors.ts";
import { announceHeard, contactOutboxEvent, outboxInsert, type OutboxEvent } from "../events/outbox.ts";
import { utf8Bytes } from "../db/row-size.ts";
import { uuidv7 } from "../ids.ts";
import { parseMailbox } from "../mime/address.ts";
import { putFixed } from "../r2-put.ts";
import { finishPage, pageQuery, type Page } from "../pagination.ts";
import { contactFacts, contactKey, contactProperties, type TopicChoice } from "./contacts.ts";
import { createProperty, hasControlCharacters, mergeProperties, propertiesByKey, refuseControlCharacters, type PropertyValue } from "./properties.ts";
import { findSegment } from "./segments.ts";
import { findTopic } from "./topics.ts";

export const MAX_IMPORT_BYTES = 50 * 1024 * 1024;
/** Failed rows kept with their reason; past this only the count grows ("and N more"). */
export const MAX_RECORDED_FAILURES = 100;
/** A failed row's value is kept up to this many characters. */
const FAILURE_VALUE_CHARS = 200;
/** A header cell longer than this is no column name (column_map's names have the same limit). */
const MAX_COLUMN_NAME = 256;
const CHUNK = 50;
const CHUNKS_PER_RUN = 40;
const LEASE_MS = 30_000;
/** How much of the file a run reads at a time: a run's rows (2,000 of them, about 200 KB in
 * a typical file) usually fit; a window that holds no whole row is doubled. */
const WINDOW_BYTES = 1024 * 1024;
/** A record longer than this is refused: no contact's fields come near it. */
const MAX_RECORD_WINDOW = 2 * WINDOW_BYTES;

export interface ColumnMap {
  email: string;
  first_name?: string;
  last_name?: string;
  unsubscribed?: string;
  properties?: Record<string, { column: string; type?: "string" | "number" | "boolean" }>;
}

export interface ImportOptions {
  column_map: ColumnMap;
  on_conflict: "upsert" | "skip";
  segments: string[];
  topics: TopicChoice[];
}

/** A row that could not be imported: its row number as a spreadsheet shows it (the header is
 * row 1), the value at fault and why. */
export interface RowFailure {
  row: number;
  value: string;
  reason: string;
}

export interface ImportMessage {
  importId: string;
}

/** The options with their defaults: without a column map, the columns named email,
 * first_name, last_name and unsubscribed (any case) of the file's header; an existing address is
 * skipped. */
export function importOptions(header: string[], given: Partial<ImportOptions>): ImportOptions {
  return {
    column_map: given.column_map ?? defaultColumns(header),
    on_conflict: given.on_conflict ?? "skip",
    segments: given.segments ?? [],
    topics: given.topics ?? [],
  };
}

/** The options an import was made with. */
export const optionsOf = (row: ContactImportRow) => JSON.parse(row.optionsJson) as ImportOptions;

function defaultColumns(header: string[]): ColumnMap {
  const find = (name: string) => header.find((h) => h.toLowerCase() === name);
  const map: ColumnMap = { email: find("email") ?? "email" };
  for (const k of ["first_name", "last_name", "unsubscribed"] as const) {
    const column = find(k);
    if (column !== undefined) map[k] = column;
  }
  return map;
}

const NOT_TEXT = "Export the sheet as \"CSV UTF-8 (comma delimited)\" (Excel: File > Save As; Numbers and Google Sheets: File > Export / Download > CSV) and upload that file.";

/** The uploaded bytes as text, or a 422 saying what to do: a CSV file is UTF-8 text (a BOM is
 * fine). `partial` is a file's head (the dashboard's column preview): a character cut at the end
 * is not an error. */
export function decodeCsv(bytes: Uint8Array, partial = false): string {
  return decodePiece(new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }), bytes, true, partial);
}

/** One piece of a file through a strict decoder (`more`: the file goes on after it). */
function decodePiece(decoder: TextDecoder, bytes: Uint8Array, first: boolean, more: boolean): string {
  if (first && ((bytes[0] === 0xff && bytes[1] === 0xfe) || (bytes[0] === 0xfe && bytes[1] === 0xff))) {
    throw new ApiError("validation_error", `The file is UTF-16 text ("Unicode text"), not a UTF-8 CSV file. ${NOT_TEXT}`);
  }
  if (first && bytes[0] === 0x50 && bytes[1] === 0x4b && bytes[2] === 0x03 && bytes[3] === 0x04) {
    throw new ApiError("validation_error", `The file is a spreadsheet workbook (.xlsx, .numbers, .ods) or a zip archive, not a CSV file. ${NOT_TEXT}`);
  }
  if (bytes.includes(0)) throw new ApiError("validation_error", `The file holds binary data (NUL bytes), so it is not a CSV text file. ${NOT_TEXT}`);
  try {
    return decoder.decode(bytes, { stream: more });
  } catch {
    throw new ApiError("validation_error", `The file is not UTF-8 text (it may be saved in an older encoding such as Windows-1252 or Latin-1). ${NOT_TEXT}`);
  }
}

/** Where an import's file is read from, a window at a time: the upload itself while it is
 * checked, R2 once stored. Never the whole file at once: at 50 MB, the upload's bytes, its text
 * and a copy for R2 would pass a Worker's 128 MB. */
export interface CsvSource {
  size: number;
  /** Up to `length` bytes from `offset`; null when the file is gone. */
  read(offset: number, length: number): Promise<Uint8Array | null>;
}

/** A file in memory (sent as a form's text field): windows are views of it, not copies. */
export function bytesSource(bytes: Uint8Array): CsvSource {
  return { size: bytes.byteLength, read: async (offset, length) => bytes.subarray(offset, offset + length) };
}

/** A file received in pieces (a streamed upload's, as the body brought them): a window inside one
 * piece is a view of it; one across pieces is copied, a window's worth, never the whole file. */
export function chunksSource(chunks: readonly Uint8Array[]): CsvSource {
  const pieces = chunks.filter((c) => c.byteLength > 0);
  // Where each piece starts in the file, for a binary search.
  const starts: number[] = [];
  let size = 0;
  for (const piece of pieces) {
    starts.push(size);
    size += piece.byteLength;
  }
  return {
    size,
    read: async (offset, length) => {
      const end = Math.min(offset + length, size);
      if (offset >= end) return new Uint8Array(0);
      let lo = 0;
      let hi = pieces.length - 1;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (starts[mid]! <= offset) lo = mid;
        else hi = mid - 1;
      }
      const first = pieces[lo]!;
      const from = offset - starts[lo]!;
      if (end - starts[lo]! <= first.byteLength) return first.subarray(from, end - starts[lo]!);
      const out = new Uint8Array(end - offset);
      for (let i = lo, at = 0; at < out.byteLength; i++) {
        const piece = pieces[i]!.subarray(i === lo ? from : 0, (i === lo ? from : 0) + out.byteLength - at);
        out.set(piece, at);
        at += piece.byteLength;
      }
      return out;
    },
  };
}

export function blobSource(blob: Blob): CsvSource {
  return { size: blob.size, read: async (offset, length) => new Uint8Array(await blob.slice(offset, offset + length).arrayBuffer()) };
}

export function r2Source(bucket: R2Bucket, key: string, size: number): CsvSource {
  return {
    size,
    read: async (offset, length) => {
      const object = await bucket.get(key, { range: { offset, length } });
      return object ? new Uint8Array(await object.arrayBuffer()) : null;
    },
  };
}

/** Checks the whole file is UTF-8 text, a window at a time; its head (the first window's text)
 * for the header. A pass of its own: a strict decoder must see each byte once and in order,
 * and readRows' windows overlap where a record is cut (about 0.12 s of 2 s at 50 MB). */
async function checkText(source: CsvSource): Promise<string> {
  const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });
  let head = "";
  for (let offset = 0; offset < source.size; offset += WINDOW_BYTES) {
    const text = decodePiece(decoder, (await source.read(offset, WINDOW_BYTES))!, offset === 0, offset + WINDOW_BYTES < source.size);
    if (offset === 0) head = text;
  }
  return wholeRecords(head, source.size > WINDOW_BYTES);
}

/** A file's head cut back to its last line break when the file goes on: the record the window
 * cuts would skew Papa's guess of the delimiter (a cut row has fewer cells) and cut the header. */
function wholeRecords(head: string, more: boolean): string {
  if (!more) return head;
  const cut = Math.max(head.lastIndexOf("\n"), head.lastIndexOf("\r"));
  if (cut < 0) throw new ApiError("validation_error", "The file's first line is longer than 1 MB, so it is not a header row. Check that the file is a CSV export of the sheet.");
  return head.slice(0, cut + 1);
}

/** The file's header row (its column names, trimmed), or a 422 saying what to do when the text is
 * no CSV: empty, NUL bytes, or a first line that is not a row of column names. */
export function csvHeader(csv: string): string[] {
  if (csv.trim() === "") throw new ApiError("validation_error", "The file is empty; it needs a header row (with an email column) and a row per contact.");
  if (csv.includes("\u0000")) throw new ApiError("validation_error", `The file holds binary data (NUL characters), so it is not a CSV text file. ${NOT_TEXT}`);
  // Ten lines: blank lines before the header are skipped (they are counted after preview).
  const header = (Papa.parse<string[]>(csv, { preview: 10, skipEmptyLines: "greedy" }).data[0] ?? []).map((h) => h.trim());
  const bad = header.find((h) => h.length > MAX_COLUMN_NAME || CONTROL_IN_FILE.test(h));
  if (header.every((h) => h === "") || bad !== undefined) {
    throw new ApiError("validation_error", "The file's first line is not a header row: it must name the columns, separated by commas (or semicolons or tabs), such as email,first_name,last_name. Check that the file is a CSV export of the sheet.");
  }
  if (header.length === 1 && parseMailbox(header[0]!) !== null) {
    throw new ApiError("validation_error", `The file's first line is an address (${header[0]}), not column names. Add a header row such as "email,first_name" as the first line.`);
  }
  return header;
}

/** How an import's file is read from one run to the next: its delimiter and line break, as
 * guessed from its first rows when it is created, its header row and that row's record index
 * (blank lines may come before it). */
export interface CsvLayout {
  delimiter: string;
  linebreak: string;
  header: string[];
  headerRecord: number;
  /** The file's size in bytes: a position there has nothing after it. */
  bytes: number;
}

const isBlank = (record: string[]) => record.join("").trim() === "";

/** The mapped columns whose cells must hold no control character, with the field each fills. */
function mappedTextFields(map: ColumnMap): [string, string][] {
  const fields: [string, string][] = [[map.email, "email"]];
  if (map.first_name !== undefined) fields.push([map.first_name, "first_name"]);
  if (map.last_name !== undefined) fields.push([map.last_name, "last_name"]);
  for (const [key, p] of Object.entries(map.properties ?? {})) fields.push([p.column, `properties.${key}`]);
  return fields;
}

/** A file's layout and its data rows counted (blank lines hold no row), in one windowed pass
 * that keeps no row: the count is the import's total from the start. Given a column map, a
 * mapped cell with a control character is refused (422 naming the row and field), as the API
 * refuses it on a contact. `head` is the file's first window as text (the layout is guessed
 * from it). */
export async function scanCsv(source: CsvSource, head: string, map?: ColumnMap): Promise<{ layout: CsvLayout; rows: number }> {
  const { delimiter, linebreak } = Papa.parse<string[]>(head, { preview: 10, skipEmptyLines: "greedy" }).meta;
  // The header is the first record that is not blank; blank lines before it are records too.
  let header: string[] = [];
  let headerRecord = 0;
  Papa.parse<string[]>(head, {
    delimiter, newline: linebreak, skipEmptyLines: false,
    step: (r, parser) => {
      if (isBlank(r.data)) return void headerRecord++;
      header = r.data.map((h) => h.trim());
      parser.abort();
    },
  });
  const layout: CsvLayout = { delimiter, linebreak, header, headerRecord, bytes: source.size };
  const fields = map ? mappedTextFields(map) : [];
  let rows = 0;
  let position: ParsePosition = { offset: 0, record: 0 };
  for (;;) {
    // No row limit: each read is a whole window, whatever the rows' length.
    const read = await readRows(source, layout, position, Number.MAX_SAFE_INTEGER);
    if (!read) throw new Error("the import's file went missing while it was read");
    for (const [i, row] of read.rows.entries()) {
      for (const [column, field] of fields) {
        const cell = row[column];
        // A quoted line break is CSV, not a control character in the file: its row fails later.
        if (cell !== undefined && CONTROL_IN_FILE.test(cell)) refuseControlCharacters(`row ${read.numbers[i]} ${field} (column "${column}")`, cell);
      }
    }
    rows += read.rows.length;
    position = read.rows.length > 0 ? read.after.at(-1)! : read.end;
    if (read.done) return { layout, rows };
  }
}

/** A record's cells keyed by the header's names (of duplicate columns the first keeps the name). */
function rowOf(header: string[], record: string[]): Record<string, string> {
  const row: Record<string, string> = {};
  header.forEach((name, j) => {
    if (!(name in row) && j < record.length) row[name] = record[j]!;
  });
  return row;
}

/** Where a run stands in the file: the byte at which the next record starts, and how many
 * records (header and blank lines included) come before it. */
export interface ParsePosition {
  offset: number;
  record: number;
}

export interface WindowRows {
  rows: Record<string, string>[];
  /** Each row's number as a spreadsheet shows it (the header is row 1). */
  numbers: number[];
  /** The position just after each row. */
  after: ParsePosition[];
  /** The position after the last whole record read (a blank line's, perhaps). */
  end: ParsePosition;
  /** Nothing is left after the last row: the file is done. */
  done: boolean;
}

/** Up to `want` data rows of the file from `from`, reading a window of it (an R2 range read),
 * so a run costs its own rows, not the whole file. A record the window cuts is left for the
 * next read; a window that holds no whole record grows until it does. Null: no file. */
export async function readRows(source: CsvSource, layout: CsvLayout, from: ParsePosition, want: number, window = WINDOW_BYTES): Promise<WindowRows | null> {
  // Nothing left to read (R2 refuses a range that starts at the end).
  if (from.offset >= source.size) return { rows: [], numbers: [], after: [], end: from, done: true };
  for (let length = window; ; length *= 2) {
    // No contact needs a record this long: it is a quote opened and never closed, which would
    // make the rest of the file one record, read (and held as text) at once.
    if (length > MAX_RECORD_WINDOW) throw new ApiError("validation_error", `Row ${from.record + 1} runs on for more than ${MAX_RECORD_WINDOW / 1024 / 1024} MB: a cell that starts with a quote (") is not closed. Quote the whole cell and double the quotes inside it ("5"" TV"), or remove the quote.`);
    const piece = await source.read(from.offset, length);
    if (!piece) return null;
    const eof = from.offset + length >= source.size;
    // A window starts at a record's first byte; a character it cuts at its end belongs to the
    // record dropped below. A U+FEFF inside the file is a character like any other.
    const text = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true }).decode(piece);
    // Papa drops a U+FEFF that starts its input and counts its cursor from after it. At the
    // file's start that is the whole parse's reading too; mid-file the text is read after a line
    // break (one blank record, not counted), as the whole parse reads it, so a U+FEFF that
    // starts a record stays in its cell.
    const prefix = from.offset > 0 ? layout.linebreak : "";
    const shift = prefix === "" && text.charCodeAt(0) === 0xfeff ? 1 : -prefix.length;
    let lead = prefix !== "";
    const records: { fields: string[]; end: number }[] = [];
    let dataRows = 0;
    Papa.parse<string[]>(prefix + text, {
      delimiter: layout.delimiter, newline: layout.linebreak, skipEmptyLines: false,
      step: (r, parser) => {
        if (lead) {
          lead = false;
          return;
        }
        records.push({ fields: r.data, end: r.meta.cursor + shift });
        if (from.record + records.length - 1 > layout.headerRecord && !isBlank(r.data)) dataRows++;
        // One data row past what is wanted: it tells that more follows, and is never used.
        if (dataRows > want) parser.abort();
      },
    });
    const complete = eof && dataRows <= want;
    const whole = complete ? records : records.slice(0, -1);
    if (whole.length === 0 && !eof) continue;
    const out: WindowRows = { rows: [], numbers: [], after: [], end: from, done: complete };
    let bytes = from.offset;
    let chars = 0;
    for (const [i, rec] of whole.entries()) {
      bytes += utf8Bytes(text.slice(chars, rec.end));
      chars = rec.end;
      const index = from.record + i;
      out.end = { offset: bytes, record: index + 1 };
      if (index <= layout.headerRecord || isBlank(rec.fields)) continue;
      out.rows.push(rowOf(layout.header, rec.fields));
      out.numbers.push(index + 1);
      out.after.push({ offset: bytes, record: index + 1 });
    }
    return out;
  }
}

/** An import's file as the upload brought it: a streamed form's pieces (readImportForm), or
 * whole (a Blob, or bytes). */
export type Upload = Blob | Uint8Array | readonly Uint8Array[];

/** Checks the file and the options against its header and the account, stores the file and
 * queues the import; nothing is written unless all of it holds. The file is read a window at a
 * time (CsvSource), never copied whole. */
export async function createImport(env: Pick<Env, "DB" | "BLOBS" | "BROADCAST_QUEUE">, accountId: string, file: Upload, given: Partial<ImportOptions>, now = Date.now()): Promise<ContactImportRow> {
  const source = file instanceof Uint8Array ? bytesSource(file) : file instanceof Blob ? blobSource(file) : chunksSource(file);
  if (source.size > MAX_IMPORT_BYTES) throw new ApiError("validation_error", "The file must be at most 50 MB.", 413);
  const head = await checkText(source);
  const columns = csvHeader(head);
  const options = importOptions(columns, given);
  const need = (column: string | undefined, field: string) => {
    if (column !== undefined && !columns.includes(column)) throw new ApiError("validation_error", `\`column_map.${field}\` names the column "${column}", which the file's header row does not have.`);
  };
  need(options.column_map.email, "email");
  need(options.column_map.first_name, "first_name");
  need(options.column_map.last_name, "last_name");
  need(options.column_map.unsubscribed, "unsubscribed");
  for (const [key, p] of Object.entries(options.column_map.properties ?? {})) need(p.column, `properties.${key}.column`);
  const { layout, rows } = await scanCsv(source, head, options.column_map);
  for (const id of options.segments) if (!(await findSegment(env.DB, accountId, id))) throw new ApiError("validation_error", `\`segments\` names segment ${id}, which this account does not have.`);
  for (const t of options.topics) if (!(await findTopic(env.DB, accountId, t.id))) throw new ApiError("validation_error", `\`topics\` names topic ${t.id}, which this account does not have.`);
  // Mapped properties that do not exist yet are created with the map's type (a boolean is kept
  // as a string), once every one is known not to clash with a property's type.
  const defined = await propertiesByKey(env.DB, accountId);
  const missing: { key: string; type: "string" | "number" }[] = [];
  for (const [key, p] of Object.entries(options.column_map.properties ?? {})) {
    const type = p.type === "number" ? "number" : "string";
    const def = defined.get(key);
    if (!def) missing.push({ key, type });
    else if (def.type !== type) throw new ApiError("validation_error", `\`column_map.properties.${key}\` is typed ${p.type ?? "string"}, but the contact property is a ${def.type}.`);
  }
  for (const m of missing) await createProperty(env.DB, accountId, m, now).catch((err) => { if (!(err instanceof ApiError)) throw err; });
  const id = uuidv7(now);
  const row: ContactImportRow = {
    id, accountId, status: "queued", fileKey: `imports/${id}.csv`, optionsJson: JSON.stringify(options), cursor: 0,
    parseOffset: 0, parseRecord: 0, layoutJson: JSON.stringify(layout),
    total: rows, created: 0, updated: 0, skipped: 0, failed: 0, error: null, failuresJson: null, leaseUntil: null, createdAt: now, completedAt: null,
  };
  // As it came: pieces go up one at a time, never joined.
  if (file instanceof Uint8Array || file instanceof Blob) await env.BLOBS.put(row.fileKey, file);
  else await putFixed(env.BLOBS, row.fileKey, file, source.size);
  await drizzle(env.DB).insert(contactImports).values(row);
  await env.BROADCAST_QUEUE.send({ importId: id } satisfies ImportMessage).catch((e: unknown) => console.error("import hint not sent; the cron will start it", describeFailure(e)));
  return row;
}

export async function findImport(db: D1Database, accountId: string, id: string): Promise<ContactImportRow | undefined> {
  return drizzle(db).select().from(contactImports).where(and(eq(contactImports.accountId, accountId), eq(contactImports.id, id))).get();
}

/** The failed rows kept for an import (at most MAX_RECORDED_FAILURES; `failed` counts them all). */
export function importFailures(row: ContactImportRow): RowFailure[] {
  return row.failuresJson ? (JSON.parse(row.failuresJson) as RowFailure[]) : [];
}

export async function listImports(db: D1Database, accountId: string, page: Page, status?: string) {
  const q = pageQuery(contactImports.id, page, and(eq(contactImports.accountId, accountId), status ? eq(contactImports.status, status) : undefined));
  return finishPage(await drizzle(db).select().from(contactImports).where(q.where).orderBy(q.orderBy).limit(q.limit), page);
}

/** Control characters other than the CSV's own tab, CR and LF. */
const CONTROL_IN_FILE = /[\u0000-\u0008\u000B\u000C\u000E-\u001F]/;

const TRUE = new Set(["true", "1", "yes", "y", "unsubscribed"]);

type Failed = { ok: false; value: string; reason: string };

/** One CSV row as a contact's fields, or the value at fault and why it cannot be one. */
export function rowToContact(row: Record<string, string>, map: ColumnMap): { ok: true; email: string; firstName?: string; lastName?: string; unsubscribed?: boolean; properties: Record<string, PropertyValue> } | Failed {
  const email = (row[map.email] ?? "").trim();
  const fail = (value: string, reason: string): Failed => ({ ok: false, value: value.slice(0, FAILURE_VALUE_CHARS), reason });
  if (email === "") return fail("", `No email address (column "${map.email}" is empty).`);
  if (email.length > 254) return fail(email, "The email address is longer than 254 characters.");
  if (/[<>]/.test(email) || parseMailbox(email) === null) return fail(email, "Not a valid email address (like name@example.com).");
  const cell = (c: string | undefined) => (c === undefined ? undefined : (row[c] ?? "").trim());
  // A name or value with a control character (a CR or LF in a quoted cell) fails its row.
  const texts: [string | undefined, string][] = [[map.first_name, "first_name"], [map.last_name, "last_name"], ...Object.entries(map.properties ?? {}).map(([k, p]): [string, string] => [p.column, k])];
  for (const [column, field] of texts) {
    const t = cell(column);
    if (t !== undefined && hasControlCharacters(t)) return fail(t, `${field} (column "${column}") has a line break or control character.`);
  }
  const properties: Record<string, PropertyValue> = {};
  for (const [key, p] of Object.entries(map.properties ?? {})) {
    const v = cell(p.column);
    if (v === undefined || v === "") continue;
    if (p.type === "number") {
      const n = Number(v);
      if (!Number.isFinite(n)) return fail(v, `${key} (column "${p.column}") is a number property, and this is not a number.`);
      properties[key] = n;
    } else properties[key] = v.slice(0, 2000);
  }
  const unsub = cell(map.unsubscribed);
  return {
    ok: true,
    email: contactKey(email),
    firstName: cell(map.first_name)?.slice(0, 256) || undefined,
    lastName: cell(map.last_name)?.slice(0, 256) || undefined,
    unsubscribed: unsub === undefined || unsub === "" ? undefined : TRUE.has(unsub.toLowerCase()),
    properties,
  };
}

/** Processes up to CHUNKS_PER_RUN chunks of an import, read on from where the last chunk
 * ended; true when there is more to do. */
export async function runImport(env: Pick<Env, "DB" | "BLOBS" | "WEBHOOK_QUEUE">, importId: string, now: () => number = Date.now): Promise<boolean> {
  const db = drizzle(env.DB);
  const first = await db.select().from(contactImports).where(eq(contactImports.id, importId)).get();
  if (!first || (first.status !== "queued" && first.status !== "in_progress")) return false;
  // Guarded by the cursor this run read: a run that another finished (and whose file it
  // deleted) must not turn the completed import into a failed one.
  let cursor = first.cursor;
  const active = () => and(eq(contactImports.id, importId), inArray(contactImports.status, ["queued", "in_progress"]), eq(contactImports.cursor, cursor));
  const fail = async (error: string) => {
    await db.update(contactImports).set({ status: "failed", error, completedAt: now() }).where(active());
    return false;
  };
  const missing = () => fail("The uploaded file is missing.");
  try {
    return await runFrom(first);
  } catch (err) {
    // What the file holds and the upload's check let through (an import made before it read
    // its file this way): the import fails with the reason, as a refused upload would.
    if (err instanceof ApiError) return fail(err.message);
    throw err;
  }

  async function runFrom(imp: ContactImportRow): Promise<boolean> {
    let layout: CsvLayout;
    let position: ParsePosition = { offset: imp.parseOffset, record: imp.parseRecord };
    if (imp.layoutJson) layout = JSON.parse(imp.layoutJson) as CsvLayout;
    else {
      // Made before imports kept their place in the file: read its layout and find where its
      // cursor stands, once.
      const file = await env.BLOBS.head(imp.fileKey);
      if (!file) return missing();
      const source = r2Source(env.BLOBS, imp.fileKey, file.size);
      const first = await source.read(0, WINDOW_BYTES);
      if (!first) return missing();
      const read = await scanCsv(source, wholeRecords(new TextDecoder("utf-8", { fatal: false, ignoreBOM: false }).decode(first, { stream: true }), file.size > WINDOW_BYTES));
      layout = read.layout;
      const found = await positionAfter(source, layout, imp.cursor);
      if (!found) return missing();
      position = found;
      await db.update(contactImports).set({ layoutJson: JSON.stringify(layout), total: read.rows, parseOffset: position.offset, parseRecord: position.record })
        .where(and(eq(contactImports.id, importId), eq(contactImports.cursor, imp.cursor)));
    }
    const options = optionsOf(imp);
    const source = r2Source(env.BLOBS, imp.fileKey, layout.bytes);
    const started = await db.update(contactImports).set({ status: "in_progress", leaseUntil: now() + LEASE_MS }).where(active()).returning({ id: contactImports.id });
    if (started.length === 0) return false; // another run moved it on, or ended it
    let chunks = 0;
    while (chunks < CHUNKS_PER_RUN) {
      const read = await readRows(source, layout, position, (CHUNKS_PER_RUN - chunks) * CHUNK);
      if (!read) return missing();
      if (read.rows.length === 0) {
        if (read.done) return finish(env, imp, now);
        position = read.end; // only blank lines in this window
        continue;
      }
      for (let i = 0; i < read.rows.length; i += CHUNK, chunks++) {
        imp = (await db.select().from(contactImports).where(eq(contactImports.id, importId)).get())!;
        // Another run moved the import on (two hints, or the cron's hand-back racing a slow run):
        // the rows read here are no longer the next ones, so this run stops and leaves it to that one.
        if (imp.cursor !== cursor || imp.status !== "in_progress") return false;
        const last = Math.min(i + CHUNK, read.rows.length) - 1;
        await importChunk(env, imp, options, read.rows.slice(i, last + 1), read.numbers.slice(i, last + 1), now(), read.after[last]!);
        position = read.after[last]!;
        cursor += last + 1 - i;
      }
      if (read.done) return finish(env, imp, now);
    }
    return true;
  }
}

/** The position after the first `rows` data rows (an import made before positions were kept). */
async function positionAfter(source: CsvSource, layout: CsvLayout, rows: number): Promise<ParsePosition | null> {
  let position: ParsePosition = { offset: 0, record: 0 };
  while (rows > 0) {
    const read = await readRows(source, layout, position, Math.min(rows, 10_000));
    if (!read) return null;
    position = read.rows.length > 0 ? read.after.at(-1)! : read.end;
    rows -= read.rows.length;
    if (read.done) break;
  }
  return position;
}

/** Marks the import completed and lets its file go. */
async function finish(env: Pick<Env, "DB" | "BLOBS">, imp: ContactImportRow, now: () => number): Promise<false> {
  await drizzle(env.DB).update(contactImports).set({ status: "completed", completedAt: now(), leaseUntil: null })
    .where(and(eq(contactImports.id, imp.id), inArray(contactImports.status, ["queued", "in_progress"])));
  await env.BLOBS.delete(imp.fileKey).catch(() => {});
  return false;
}

async function importChunk(env: Pick<Env, "DB" | "WEBHOOK_QUEUE">, imp: ContactImportRow, options: ImportOptions, rows: Record<string, string>[], numbers: number[], now: number, after: ParsePosition): Promise<void> {
  const db = drizzle(env.DB);
  const mapped = rows.map((r) => rowToContact(r, options.column_map));
  // The last row for an address wins, as it would applied in order.
  const byEmail = new Map<string, Extract<(typeof mapped)[number], { ok: true }>>();
  for (const m of mapped) if (m.ok) byEmail.set(m.email, m);
  const failed = mapped.filter((m) => !m.ok).length;
  // Kept in the same write as the counts and the cursor, so a chunk run twice records nothing twice.
  const failures = importFailures(imp);
  const kept = failures.length;
  mapped.forEach((m, i) => {
    if (!m.ok && failures.length < MAX_RECORDED_FAILURES) failures.push({ row: numbers[i]!, value: m.value, reason: m.reason });
  });
  let skipped = mapped.length - failed - byEmail.size;
  const existing = byEmail.size === 0 ? [] : await db.select().from(contacts).where(and(eq(contacts.accountId, imp.accountId), inArray(contacts.email, [...byEmail.keys()])));
  const found = new Map(existing.map((c) => [c.email, c]));
  const changes: BatchItem<"sqlite">[] = [];
  const events: OutboxEvent[] = [];
  let created = 0, updated = 0;
  const join = (contactId: string) => {
    for (const segmentId of options.segments) changes.push(db.insert(contactSegments).values({ segmentId, contactId, accountId: imp.accountId, createdAt: now }).onConflictDoNothing());
    for (const t of options.topics) {
      changes.push(db.insert(contactTopics).values({ contactId, topicId: t.id, accountId: imp.accountId, subscription: t.subscription, updatedAt: now })
        .onConflictDoUpdate({ target: [contactTopics.contactId, contactTopics.topicId], set: { subscription: t.subscription, updatedAt: now } }));
    }
  };
  for (const [email, m] of byEmail) {
    const before = found.get(email);
    if (!before) {
      const row: ContactRow = {
        id: uuidv7(now), accountId: imp.accountId, email, firstName: m.firstName ?? null, lastName: m.lastName ?? null,
        unsubscribed: m.unsubscribed ?? false, propertiesJson: JSON.stringify(m.properties), createdAt: now, updatedAt: now,
      };
      changes.push(db.insert(contacts).values(row).onConflictDoNothing());
      join(row.id);
      events.push(contactOutboxEvent(imp.accountId, "contact.created", contactFacts(row), now));
      created++;
    } else if (options.on_conflict === "upsert") {
      const after: ContactRow = {
        ...before,
        firstName: m.firstName ?? before.firstName,
        lastName: m.lastName ?? before.lastName,
        unsubscribed: m.unsubscribed ?? before.unsubscribed,
        propertiesJson: JSON.stringify(mergeProperties(contactProperties(before), m.properties)),
        updatedAt: now,
      };
      changes.push(db.update(contacts).set({ firstName: after.firstName, lastName: after.lastName, unsubscribed: after.unsubscribed, propertiesJson: after.propertiesJson, updatedAt: now }).where(eq(contacts.id, before.id)));
      join(before.id);
      events.push(contactOutboxEvent(imp.accountId, "contact.updated", contactFacts(after), now));
      updated++;
    } else skipped++;
  }
  const cursor = imp.cursor + rows.length;
  changes.push(...events.map((e) => outboxInsert(db, e)));
  changes.push(db.update(contactImports).set({
    cursor, parseOffset: after.offset, parseRecord: after.record,
    created: imp.created + created, updated: imp.updated + updated, skipped: imp.skipped + skipped, failed: imp.failed + failed, leaseUntil: now + LEASE_MS,
    ...(failures.length > kept ? { failuresJson: JSON.stringify(failures) } : {}),
  }).where(and(eq(contactImports.id, imp.id), eq(contactImports.cursor, imp.cursor))));
  await db.batch(changes as unknown as [BatchItem<"sqlite">]);
  await announceHeard(env, events);
}

/** The cron's share: an import whose run died (its lease ran out) is handed to a new one. */
export async function stalledImports(db: D1Database, now = Date.now()): Promise<string[]> {
  const rows = await drizzle(db).update(contactImports).set({ leaseUntil: now + LEASE_MS })
    .where(and(inArray(contactImports.status, ["queued", "in_progress"]), or(isNull(contactImports.leaseUntil), lt(contactImports.leaseUntil, now))))
    .returning({ id: contactImports.id });
  return rows.map((r) => r.id);
}
