// CSV contact imports: a multipart upload with a column map, processed in the background in
// chunks; contacts are created or (upsert) updated or (skip) left alone, join the segments and
// topics given, and each change emits its contact.* event; the counts say what happened.
import { env, exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import Papa from "papaparse";
import { blobSource, createImport, decodeCsv, r2Source, readRows, runImport, scanCsv, type ParsePosition } from "../../worker/contacts/imports.ts";
import { call, createAccount, type TestAccount } from "./fixtures.ts";
import { waitFor } from "./wait.ts";

let a: TestAccount;
let other: TestAccount;
beforeAll(async () => {
  a = await createAccount();
  other = await createAccount();
});

async function upload(t: TestAccount, fields: Record<string, string>, csv?: string | Uint8Array) {
  const form = new FormData();
  if (csv !== undefined) form.append("file", new Blob([csv], { type: "text/csv" }), "contacts.csv");
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  const res = await exports.default.fetch(new Request("http://tern.test/contacts/imports", { method: "POST", headers: { authorization: `Bearer ${t.token}` }, body: form }));
  return { status: res.status, body: (await res.json()) as any };
}
async function finished(t: TestAccount, id: string) {
  return waitFor("the import to complete", async () => {
    const r = (await call(t, "GET", `/contacts/imports/${id}`)).body;
    return r.status === "completed" || r.status === "failed" ? r : undefined;
  }, 15_000);
}

describe("contact imports", () => {
  it("creates, upserts and counts; joins segments and topics; emits contact events", async () => {
    // Its own account with an endpoint (the outbox holds only what one hears), so the other
    // tests' large imports don't fill the shared webhook queue with deliveries.
    const a = await createAccount({ listening: true });
    const segment = (await call(a, "POST", "/segments", { name: "Imported" })).body.id;
    const topic = (await call(a, "POST", "/topics", { name: "Digest", default_subscription: "opt_out" })).body.id;
    const existing = (await call(a, "POST", "/contacts", { email: "old@example.com", first_name: "Old" })).body.id;
    const rows = ["Email,First Name,Plan,Seats", "new1@example.com,Ada,pro,3", "OLD@example.com,Renamed,free,", "not-an-address,X,,", "new2@example.com,\"Lovelace, Ada\",team,x", "new3@example.com,,,7", ""];
    const created = await upload(a, {
      column_map: JSON.stringify({ email: "Email", first_name: "First Name", properties: { plan: { column: "Plan" }, seats: { column: "Seats", type: "number" } } }),
      on_conflict: "upsert",
      segments: JSON.stringify([{ id: segment }]),
      topics: JSON.stringify([{ id: topic, subscription: "opt_in" }]),
    }, rows.join("\n"));
    expect(created).toMatchObject({ status: 201, body: { object: "contact_import", id: expect.any(String) } });
    const done = await finished(a, created.body.id);
    expect(done).toMatchObject({ object: "contact_import", status: "completed", completed_at: expect.any(String), counts: { total: 5, created: 2, updated: 1, skipped: 0, failed: 2 } });
    const inSegment = (await call(a, "GET", `/segments/${segment}/contacts`)).body.data;
    expect(inSegment.map((c: any) => c.email).sort()).toEqual(["new1@example.com", "new3@example.com", "old@example.com"]);
    expect(inSegment.find((c: any) => c.email === "new1@example.com")).toMatchObject({ first_name: "Ada", properties: { plan: { type: "string", value: "pro" }, seats: { type: "number", value: 3 } } });
    expect((await call(a, "GET", `/contacts/${existing}`)).body).toMatchObject({ first_name: "Renamed", properties: { plan: { type: "string", value: "free" } } });
    expect((await call(a, "GET", `/contacts/${existing}/topics`)).body.data).toEqual([expect.objectContaining({ id: topic, subscription: "opt_in" })]);
    const events = await env.DB.prepare("SELECT type, payload_json FROM webhook_events WHERE account_id = ? AND type LIKE 'contact.%' ORDER BY id").bind(a.accountId).all<{ type: string; payload_json: string }>();
    const byEmail = events.results.map((e) => [e.type, JSON.parse(e.payload_json).data.email]);
    expect(byEmail).toEqual(expect.arrayContaining([["contact.created", "new1@example.com"], ["contact.created", "new3@example.com"], ["contact.updated", "old@example.com"]]));
    expect((await call(a, "GET", "/contacts/imports?status=completed")).body.data.map((i: any) => i.id)).toContain(created.body.id);
  });

  it("skips existing contacts by default, with the default columns", async () => {
    await call(a, "POST", "/contacts", { email: "keep@example.com", first_name: "Keep" });
    const created = await upload(a, {}, "email,first_name\nkeep@example.com,Changed\nfresh@example.com,Fresh\n");
    const done = await finished(a, created.body.id);
    expect(done.counts).toEqual({ total: 2, created: 1, updated: 0, skipped: 1, failed: 0 });
    expect((await call(a, "GET", "/contacts/keep@example.com")).body.first_name).toBe("Keep");
    expect((await call(a, "GET", "/contacts/fresh@example.com")).body.first_name).toBe("Fresh");
  });

  it("refuses a `__proto__` key in the form's JSON fields instead of dropping it", async () => {
    const res = await upload(a, { column_map: '{"email":"email","properties":{"__proto__":{"column":"plan"}}}' }, "email,plan\nx@example.com,pro\n");
    expect(res).toMatchObject({ status: 422, body: { message: "`__proto__` cannot be used as a name (of a property, header, variable or any other key)." } });
  });

  it("refuses what it cannot import, and another account sees nothing", async () => {
    expect((await upload(a, {})).body).toMatchObject({ statusCode: 422, name: "missing_required_field" });
    expect((await upload(a, { column_map: JSON.stringify({ email: "Mail" }) }, "Email\na@example.com")).body.message).toMatch(/column_map.email.*Mail/);
    expect((await upload(a, { column_map: "{" }, "email\na@example.com")).body.message).toMatch(/column_map.*JSON/);
    expect((await upload(a, { on_conflict: "merge" }, "email\na@example.com")).body.message).toMatch(/on_conflict/);
    const theirs = (await call(other, "POST", "/segments", { name: "x" })).body.id;
    expect((await upload(a, { segments: JSON.stringify([theirs]) }, "email\na@example.com")).status).toBe(422);
    const mine = await upload(a, {}, "email\nmine@example.com\n");
    await finished(a, mine.body.id);
    expect((await call(other, "GET", `/contacts/imports/${mine.body.id}`)).status).toBe(404);
    expect((await call(other, "GET", "/contacts/imports")).body.data).toEqual([]);
    expect((await call(other, "GET", "/contacts/mine@example.com")).status).toBe(404);
  });

  it("stops a form sent without a length at the file's limit instead of reading it whole", async () => {
    let pulled = 0;
    const head = new TextEncoder().encode('--b\r\ncontent-disposition: form-data; name="file"; filename="big.csv"\r\ncontent-type: text/csv\r\n\r\nemail\n');
    const chunk = new TextEncoder().encode("someone@example.com\n".repeat(50_000));
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(head);
      },
      pull(controller) {
        // 200 MB on offer; a reader that stops at the limit pulls a little over 51.
        if (pulled >= 200 * 1024 * 1024) return controller.close();
        pulled += chunk.byteLength;
        controller.enqueue(chunk);
      },
    });
    const res = await exports.default.fetch(new Request("http://tern.test/contacts/imports", {
      method: "POST", headers: { authorization: `Bearer ${a.token}`, "content-type": "multipart/form-data; boundary=b" }, body,
    }));
    expect(res.status).toBe(413);
    expect(((await res.json()) as { message: string }).message).toBe("The file must be at most 50 MB.");
    expect(pulled).toBeLessThan(60 * 1024 * 1024);
  });

  it("refuses a file whose mapped cells hold control characters, naming the row and field; a line break in a name fails its row", async () => {
    const t = await createAccount();
    const soh = await upload(t, {}, "email,first_name,notes\nok@example.com,Ada,\n\nbad@example.com,Bo\u0001b,\n");
    expect(soh.status, JSON.stringify(soh.body)).toBe(422);
    // Row 4: the blank line counts, as a spreadsheet shows it.
    expect(soh.body).toMatchObject({ name: "validation_error", message: expect.stringMatching(/`row 4 first_name \(column "first_name"\)` contains a control character \(U\+0001\)/) });
    const esc = await upload(t, { column_map: JSON.stringify({ email: "email", properties: { note: { column: "notes" } } }) }, "email,notes\nx@example.com,\u001b[2J\n");
    expect(esc.body.message).toMatch(/`row 2 properties.note \(column "notes"\)`/);
    expect((await call(t, "GET", "/contacts/imports")).body.data).toEqual([]);
    // A control character in a column the map does not use is nobody's business.
    const unused = await upload(t, {}, "email,first_name,notes\nfine@example.com,Fine,a\u0007b\n");
    expect(unused.status).toBe(201);
    expect((await finished(t, unused.body.id)).counts).toMatchObject({ created: 1, failed: 0 });
    // A quoted line break is CSV, not a control character in the file: its row fails.
    const broken = await upload(t, {}, 'email,first_name\nline@example.com,"Ada\r\nLovelace"\nplain@example.com,Plain\n');
    expect((await finished(t, broken.body.id)).counts).toMatchObject({ total: 2, created: 1, failed: 1 });
    expect((await call(t, "GET", "/contacts/line@example.com")).status).toBe(404);
  });

  it("keeps each failed row's number, value and reason (the first 100, the count is all of them); the API's object stays Resend's", async () => {
    const t = await createAccount();
    const rows = [
      "Email,Name,Seats",
      "good@example.com,Good,1",
      ",Nobody,2",
      "",
      "not-an-address,X,3",
      "\"=HYPERLINK(\"\"http://evil.example\"\")\",Formula,4",
      "seats@example.com,S,many",
      "multi@example.com,\"Ada",
      "Lovelace\",5",
      "after@example.com,After,6",
    ];
    const map = { email: "Email", first_name: "Name", properties: { seats: { column: "Seats", type: "number" } } };
    const created = await upload(t, { column_map: JSON.stringify(map) }, rows.join("\r\n"));
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const done = await finished(t, created.body.id);
    expect(done.counts).toEqual({ total: 7, created: 2, updated: 0, skipped: 0, failed: 5 });
    // Resend's import object has no place for the reasons: they are the dashboard's (dashboard.test.ts).
    expect(Object.keys(done).sort()).toEqual(["completed_at", "counts", "created_at", "id", "object", "status"]);
    const { findImport, importFailures } = await import("../../worker/contacts/imports.ts");
    const row = (await findImport(env.DB, t.accountId, created.body.id))!;
    expect(importFailures(row)).toEqual([
      { row: 3, value: "", reason: 'No email address (column "Email" is empty).' },
      { row: 5, value: "not-an-address", reason: "Not a valid email address (like name@example.com)." },
      { row: 6, value: '=HYPERLINK("http://evil.example")', reason: "Not a valid email address (like name@example.com)." },
      { row: 7, value: "many", reason: 'seats (column "Seats") is a number property, and this is not a number.' },
      { row: 8, value: "Ada\r\nLovelace", reason: 'first_name (column "Name") has a line break or control character.' },
    ]);

    const many = await upload(t, {}, ["email", ...Array.from({ length: 130 }, (_, i) => `bad-${i}`)].join("\n"));
    const all = await finished(t, many.body.id);
    expect(all.counts).toMatchObject({ total: 130, failed: 130 });
    const kept = importFailures((await findImport(env.DB, t.accountId, many.body.id))!);
    expect(kept).toHaveLength(100);
    expect(kept[0]).toMatchObject({ row: 2, value: "bad-0" });
    expect(kept[99]).toMatchObject({ row: 101, value: "bad-99" });
  });

  it("refuses a file that is not UTF-8 CSV text with what to do, and keeps nothing", async () => {
    const t = await createAccount();
    const bytes = (...parts: (string | number[])[]) => new Uint8Array(parts.flatMap((p) => (typeof p === "string" ? [...new TextEncoder().encode(p)] : p)));
    const refused: [string, string | Uint8Array, RegExp][] = [
      ["a PNG image", bytes([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d]), /binary data \(NUL bytes\).*CSV UTF-8/],
      ["an xlsx workbook", bytes("PK", [3, 4, 20, 0, 6, 0], "[Content_Types].xml"), /spreadsheet workbook.*Save As/],
      ["UTF-16 text", bytes([0xff, 0xfe], [0x65, 0, 0x6d, 0, 0x61, 0, 0x69, 0, 0x6c, 0]), /UTF-16.*CSV UTF-8/],
      ["Windows-1252 text", bytes("email,first_name\nzoe@example.com,Zo", [0xe9], "\n"), /not UTF-8 text.*Windows-1252/],
      ["a NUL in text", "email\na@example.com\u0000\n", /binary data/],
      ["no header row", "ada@example.com\nbob@example.com\n", /first line is an address \(ada@example\.com\), not column names/],
      ["a first line that is no header", `${"x".repeat(300)}\na@example.com\n`, /not a header row/],
      ["an empty file", "\n\n", /empty/],
    ];
    for (const [what, file, message] of refused) {
      const res = await upload(t, {}, file);
      expect(res.status, what).toBe(422);
      expect(res.body, what).toMatchObject({ name: "validation_error", message: expect.stringMatching(message) });
    }
    expect((await call(t, "GET", "/contacts/imports")).body.data).toEqual([]);
    // A UTF-8 byte order mark is fine, and so is a semicolon-separated file.
    const bom = await upload(t, {}, bytes([0xef, 0xbb, 0xbf], "email;first_name\nzoe@example.com;Zo\u00e9\n"));
    expect(bom.status, JSON.stringify(bom.body)).toBe(201);
    expect((await finished(t, bom.body.id)).counts).toMatchObject({ created: 1, failed: 0 });
    expect((await call(t, "GET", "/contacts/zoe@example.com")).body.first_name).toBe("Zo\u00e9");
  });
});

/** The file parsed whole at once, the reading the windowed one must equal: its data rows keyed
 * by the trimmed header (the first of duplicate columns keeps the name), each with its row
 * number as a spreadsheet shows it (blank lines count but hold no row). */
function wholeParse(csv: string): { rows: Record<string, string>[]; numbers: number[] } {
  const { delimiter } = Papa.parse<string[]>(csv, { preview: 10, skipEmptyLines: "greedy" }).meta;
  const records = Papa.parse<string[]>(csv, { delimiter, skipEmptyLines: false }).data;
  const rows: Record<string, string>[] = [];
  const numbers: number[] = [];
  let header: string[] | undefined;
  for (const [i, record] of records.entries()) {
    if (record.join("").trim() === "") continue;
    if (!header) {
      header = record.map((h) => h.trim());
      continue;
    }
    const row: Record<string, string> = {};
    header.forEach((name, j) => {
      if (!(name in row) && j < record.length) row[name] = record[j]!;
    });
    rows.push(row);
    numbers.push(i + 1);
  }
  return { rows, numbers };
}

/** The layout and row count createImport finds, from the file's bytes a window at a time. */
async function scan(text: string) {
  const blob = new Blob([text]);
  return scanCsv(blobSource(blob), decodeCsv(new Uint8Array(await blob.arrayBuffer()), true));
}

/** A run's window, as imports.ts reads the file. */
const WINDOW = 1024 * 1024;
/** No queue hint: the runs a test makes are the only ones. */
const quiet = { ...env, BROADCAST_QUEUE: { send: async () => {} } as unknown as Env["BROADCAST_QUEUE"] };

/** A Blob that records the length of each read of its bytes and refuses to be read whole. */
function recordingUpload() {
  const reads: number[] = [];
  class Upload extends Blob {
    override slice(start?: number, end?: number, type?: string): Blob {
      reads.push(Math.min(end ?? this.size, this.size) - (start ?? 0));
      return super.slice(start, end, type);
    }
    override arrayBuffer(): Promise<ArrayBuffer> {
      throw new Error("the upload was read whole");
    }
    override text(): Promise<string> {
      throw new Error("the upload was read whole");
    }
  }
  return { Upload, reads };
}

describe("a run reads on from where the last one stopped", () => {
  // Quoted line breaks, doubled quotes, CRLF, blank lines before and between rows, multi-byte
  // characters (a window may cut one), a U+FEFF inside a cell and a last row without a break.
  const csv = [
    "", "email;name;note", "a1@example.com;Ada;plain", "", "a2@example.com;\"Zo\u00eb\r\nM\u00fcller\";\"say \"\"hi\"\"\"",
    "a3@example.com;\u5c71\u7530;\ud83d\ude00 emoji", "a4@example.com;\ufeffBom;x", "", "", "a5@example.com;\"multi\r\n\r\nline\";end",
    ...Array.from({ length: 20 }, (_, i) => `b${i}@example.com;N\u00e4me ${i};${"\u00e9".repeat(i)}`), "last@example.com;Last;no break",
  ].join("\r\n");

  // As Excel writes it (a BOM, CRLF, a quoted first cell), and sent as a form's text field, which
  // keeps the BOM; and a record that starts with U+FEFF mid-file, where a window may begin.
  const excel = ["\ufeffemail,name", ...Array.from({ length: 30 }, (_, i) => `"p${i}@example.com","Doe, Ann ${i}"`), "\ufeffq@example.com,Q"].join("\r\n");
  const lf = ["\ufeff\ufeffemail,name", "a@example.com,A", "\ufeffb@example.com,B", "", "c@example.com,C"].join("\n");

  it("reads every row exactly as the whole file parsed at once, whatever the window cuts", async () => {
    for (const [file, expected] of [[csv, { delimiter: ";", linebreak: "\r\n", header: ["email", "name", "note"], headerRecord: 1 }], [excel, { linebreak: "\r\n" }], [lf, { linebreak: "\n" }]] as const) {
    const key = `test/${crypto.randomUUID()}.csv`;
    await env.BLOBS.put(key, file);
    const { layout, rows } = await scan(file);
    const whole = wholeParse(file);
    const stored = r2Source(env.BLOBS, key, layout.bytes);
    expect(rows).toBe(whole.rows.length);
    expect(layout).toMatchObject(expected);
    for (const window of [5, 16, 33, 100, 4096]) {
      for (const want of [1, 3, 50]) {
        const got: { rows: Record<string, string>[]; numbers: number[] } = { rows: [], numbers: [] };
        let position: ParsePosition = { offset: 0, record: 0 };
        for (let reads = 0; ; reads++) {
          expect(reads, `window ${window}, want ${want}: no end`).toBeLessThan(1000);
          const read = (await readRows(stored, layout, position, want, window))!;
          expect(read.rows.length).toBeLessThanOrEqual(want);
          got.rows.push(...read.rows);
          got.numbers.push(...read.numbers);
          position = read.rows.length > 0 ? read.after.at(-1)! : read.end;
          if (read.done) break;
        }
        expect(got, `window ${window}, want ${want}`).toEqual(whole);
      }
    }
    if (file !== csv) continue;
    // A position is a byte offset: the rest of the file read from it is the rest of the text.
    const { after } = (await readRows(stored, layout, { offset: 0, record: 0 }, 5, 4096))!;
    const rest = await (await env.BLOBS.get(key, { range: { offset: after[3]!.offset } }))!.text();
    expect(csv.endsWith(rest)).toBe(true);
    expect(rest.startsWith("\r\n\r\na5@example.com")).toBe(true);
    }
  });

  it("each run starts at the last one's position, and an import made before positions were kept resumes at its cursor", async () => {
    const rows = Array.from({ length: 4500 }, (_, i) => `r${i}@example.com,R\u00f6w ${i}`);
    const text = ["email,first_name", ...rows].join("\n");
    const id = (await createImport(quiet, a.accountId, new Blob([text]), { on_conflict: "upsert" })).id;
    expect((await call(a, "GET", `/contacts/imports/${id}`)).body.counts.total).toBe(4500);
    // The runs the queue would make, with the file's reads recorded.
    const starts: number[] = [];
    const bucket = new Proxy(env.BLOBS, {
      get(target, prop) {
        if (prop === "get") return (k: string, o?: R2GetOptions) => {
          if (k.startsWith("imports/")) starts.push((o?.range as { offset?: number } | undefined)?.offset ?? -1);
          return target.get(k, o);
        };
        const v = Reflect.get(target, prop);
        return typeof v === "function" ? v.bind(target) : v;
      },
    });
    const run = () => runImport({ ...env, BLOBS: bucket }, id);
    expect(await run()).toBe(true);
    const after1 = (await env.DB.prepare("SELECT cursor, parse_offset, parse_record FROM contact_imports WHERE id = ?").bind(id).first<{ cursor: number; parse_offset: number; parse_record: number }>())!;
    expect(after1.cursor).toBe(2000);
    // The position is where row 2,001's record starts: the header and 2,000 rows are behind it.
    expect(after1.parse_record).toBe(2001);
    expect(after1.parse_offset).toBe(new TextEncoder().encode(["email,first_name", ...rows.slice(0, 2000)].join("\n") + "\n").length);
    expect(starts).toEqual([0]);
    expect(await run()).toBe(true);
    expect(starts).toEqual([0, after1.parse_offset]);
    // As an import made before this change would stand: no layout or position, its cursor at 4,000.
    await env.DB.prepare("UPDATE contact_imports SET layout_json = NULL, parse_offset = 0, parse_record = 0 WHERE id = ?").bind(id).run();
    expect(await run()).toBe(false);
    const done = (await call(a, "GET", `/contacts/imports/${id}`)).body;
    expect(done).toMatchObject({ status: "completed", counts: { total: 4500, created: 4500, failed: 0 } });
    const count = await env.DB.prepare("SELECT count(*) AS n FROM contacts WHERE account_id = ? AND email LIKE 'r%@example.com'").bind(a.accountId).first<{ n: number }>();
    expect(count!.n).toBe(4500);
    expect((await call(a, "GET", `/contacts/r4499@example.com`)).body.first_name).toBe("R\u00f6w 4499");
    // A run after the end (another finished it) changes nothing.
    expect(await run()).toBe(false);
    expect((await call(a, "GET", `/contacts/imports/${id}`)).body.status).toBe("completed");
  });

  it("an import made before positions were kept, whose cursor is at its end, completes", async () => {
    const text = ["email", "z1@example.com", "z2@example.com"].join("\n");
    const id = (await createImport(quiet, a.accountId, new Blob([text]), {})).id;
    await env.DB.prepare("UPDATE contact_imports SET status = 'in_progress', cursor = 2, total = 2, layout_json = NULL WHERE id = ?").bind(id).run();
    expect(await runImport(env, id)).toBe(false);
    expect((await call(a, "GET", `/contacts/imports/${id}`)).body.status).toBe("completed");
  });

  it("checks a file of several windows without ever holding it whole: each read is a window, and every window is checked", async () => {
    const t = await createAccount();
    const { Upload, reads } = recordingUpload();
    const enc = new TextEncoder();
    // About 2.5 MB in long rows (a few thousand contacts); a two-byte character straddles the
    // first window's end.
    const notes = "n".repeat(1000);
    const lines = ["email,first_name,notes"];
    let bytes = lines[0]!.length + 1;
    let n = 0;
    while (bytes < WINDOW - 2100) bytes += enc.encode(lines[lines.push(`w${n}@example.com,Name ${n++},${notes}`) - 1] + "\n").length;
    const straddler = `w${n++}@example.com`;
    const long = "x".repeat(WINDOW - 1 - bytes - straddler.length - ",Straddler,".length) + "\u00fc";
    lines.push(`${straddler},Straddler,${long}`);
    const head = lines.join("\n") + "\n";
    expect(enc.encode(head).length).toBe(WINDOW + 2);
    const more: string[] = [];
    for (bytes = 0; bytes < 1.5 * WINDOW; ) bytes += enc.encode(more[more.push(`v${n}@example.com,N\u00e4me ${n++},${notes}`) - 1] + "\n").length;
    const body = more.join("\n") + "\n";
    const text = head + body;
    const rows = n;

    // A control character in the last window's mapped cell, and a byte that is not UTF-8 there.
    const control = await createImport(quiet, t.accountId, new Upload([text + "last@example.com,Bo\u0001b,\n"]), {}).catch((e: Error) => e);
    expect(control).toMatchObject({ status: 422, message: expect.stringMatching(new RegExp(`row ${rows + 2} first_name`)) });
    const latin1 = new Uint8Array([...enc.encode(text + "last@example.com,Zo"), 0xe9, 0x0a]);
    expect(await createImport(quiet, t.accountId, new Upload([latin1]), {}).catch((e: Error) => e)).toMatchObject({ status: 422, message: expect.stringMatching(/not UTF-8 text/) });
    expect((await call(t, "GET", "/contacts/imports")).body.data).toEqual([]);

    reads.length = 0;
    const row = await createImport(quiet, t.accountId, new Upload([text]), {});
    expect(row.total).toBe(rows);
    expect(Math.max(...reads)).toBeLessThanOrEqual(2 * WINDOW); // a window grows only for a record it cannot hold
    // What R2 holds is the upload byte for byte; the import reads it to the end.
    expect(await (await env.BLOBS.get(row.fileKey))!.text()).toBe(text);
    while (await runImport(env, row.id));
    expect((await call(t, "GET", `/contacts/imports/${row.id}`)).body).toMatchObject({ status: "completed", counts: { total: rows, created: rows, failed: 0 } });
    expect((await call(t, "GET", `/contacts/${straddler}`)).body.first_name).toBe("Straddler");
    expect((await call(t, "GET", `/contacts/v${n - 1}@example.com`)).body.first_name).toBe(`N\u00e4me ${n - 1}`);
  });

  it("guesses the layout from whole records when the first rows pass a window, in new imports and older ones", async () => {
    const t = await createAccount();
    // Semicolons, and a long first row whose next row starts 5 bytes before the first window
    // ends: a cut row (one cell) would make Papa guess commas and read one column.
    const header = "email;first_name\n";
    const long = `a@example.com;${"n".repeat(WINDOW - header.length - "a@example.com;".length - 1 - 5)}\n`;
    const text = header + long + "b@example.com;Bee\nc@example.com;Cee\n";
    expect(new TextEncoder().encode(header + long).length).toBe(WINDOW - 5);
    expect(wholeParse(text).rows).toHaveLength(3);
    const row = await createImport(quiet, t.accountId, new Blob([text]), {});
    expect(row.total).toBe(3);
    expect(JSON.parse(row.layoutJson!)).toMatchObject({ delimiter: ";", header: ["email", "first_name"] });
    // The same file in an import made before layouts were kept, its first row done.
    await env.DB.prepare("UPDATE contact_imports SET layout_json = NULL, parse_offset = 0, parse_record = 0, cursor = 1 WHERE id = ?").bind(row.id).run();
    while (await runImport(env, row.id));
    expect((await call(t, "GET", `/contacts/imports/${row.id}`)).body).toMatchObject({ status: "completed", counts: { total: 3, created: 2, failed: 0 } });
    expect((await call(t, "GET", "/contacts/c@example.com")).body.first_name).toBe("Cee");
  });

  it("refuses a quote never closed instead of reading the rest of the file at once, and a header longer than a window", async () => {
    const t = await createAccount();
    const { Upload, reads } = recordingUpload();
    const rows = Array.from({ length: 6 * WINDOW / 32 }, (_, i) => `r${i}@example.com,Row ${i}`).join("\n");
    const stray = `email,name\nx@example.com,"5" TV\n${rows}\n`;
    const refused = await createImport(quiet, t.accountId, new Upload([stray]), {}).catch((e: Error) => e);
    expect(refused).toMatchObject({ status: 422, message: expect.stringMatching(/^Row 2 runs on for more than 2 MB: a cell that starts with a quote/) });
    expect(Math.max(...reads)).toBeLessThanOrEqual(2 * WINDOW);
    const wide = [...Array.from({ length: 5000 }, (_, i) => `column_${i}_${"c".repeat(200)}`), "email"].join(",");
    expect(await createImport(quiet, t.accountId, new Blob([`${wide}\nv@example.com\n`]), {}).catch((e: Error) => e)).toMatchObject({ status: 422, message: expect.stringMatching(/first line is longer than 1 MB/) });
    expect((await call(t, "GET", "/contacts/imports")).body.data).toEqual([]);
    // An import made before uploads were read this way fails with the reason instead of throwing.
    const old = await createImport(quiet, t.accountId, new Blob(["email\nz@example.com\n"]), {});
    await env.BLOBS.put(old.fileKey, stray);
    await env.DB.prepare("UPDATE contact_imports SET layout_json = NULL WHERE id = ?").bind(old.id).run();
    expect(await runImport(env, old.id)).toBe(false);
    const failed = await env.DB.prepare("SELECT status, error FROM contact_imports WHERE id = ?").bind(old.id).first<{ status: string; error: string }>();
    expect(failed).toMatchObject({ status: "failed", error: expect.stringMatching(/^Row 2 runs on for more than 2 MB/) });
  });

  it("a file sent as Excel writes it, BOM and all, imports every row", async () => {
    const big = ["\ufeffemail,name", ...Array.from({ length: 2001 }, (_, i) => `"x${i}-${a.accountId.slice(0, 8)}@example.com","Doe, Ann ${i}"`)].join("\r\n");
    const id = (await createImport(quiet, a.accountId, new Blob([big]), { column_map: { email: "email", first_name: "name" } })).id;
    while (await runImport(env, id));
    expect((await call(a, "GET", `/contacts/imports/${id}`)).body).toMatchObject({ status: "completed", counts: { total: 2001, created: 2001, failed: 0 } });
    expect((await call(a, "GET", `/contacts/x2000-${a.accountId.slice(0, 8)}@example.com`)).body.first_name).toBe("Doe, Ann 2000");
  });
});
