// The contact import's form read as it streams in (worker/multipart-form.ts): the file is kept
// as the body's own pieces, however the body is cut, and read as Response.formData() reads it.
import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { concatBytes } from "../../worker/bytes.ts";
import { bytesSource, chunksSource, createImport, MAX_IMPORT_BYTES } from "../../worker/contacts/imports.ts";
import { fieldText, formParts } from "../../worker/multipart-form.ts";
import { readImportForm } from "../../worker/routes/contact-imports.ts";
import { call, createAccount, type TestAccount } from "./fixtures.ts";
import { waitFor } from "./wait.ts";

const enc = new TextEncoder();
const BOUNDARY = "----tern-form-7MA4YWxkTrZu0gW";

interface Part { name: string; filename?: string; type?: string; content: string | Uint8Array }

/** A multipart/form-data body as clients write one, the closing boundary followed by a CRLF. */
function multipart(parts: Part[], boundary = BOUNDARY): Uint8Array {
  const pieces: Uint8Array[] = [];
  for (const p of parts) {
    const disposition = `form-data; name="${p.name}"${p.filename !== undefined ? `; filename="${p.filename}"` : ""}`;
    pieces.push(enc.encode(`--${boundary}\r\ncontent-disposition: ${disposition}\r\n${p.type ? `content-type: ${p.type}\r\n` : ""}\r\n`));
    pieces.push(typeof p.content === "string" ? enc.encode(p.content) : p.content, enc.encode("\r\n"));
  }
  pieces.push(enc.encode(`--${boundary}--\r\n`));
  return concatBytes(pieces);
}

/** The body delivered as a stream, one piece a pull: cut every `size` bytes, or at `cuts`. */
function delivered(body: Uint8Array, cut: number | number[]): ReadableStream<Uint8Array> {
  const at = typeof cut === "number" ? Array.from({ length: Math.ceil(body.length / cut) - 1 }, (_, i) => (i + 1) * cut) : cut;
  const edges = [0, ...at, body.length];
  let i = 0;
  return new ReadableStream({
    pull(controller) {
      if (i === edges.length - 1) return controller.close();
      controller.enqueue(body.slice(edges[i], edges[i + 1]));
      i++;
    },
  });
}

function formRequest(body: BodyInit, headers: Record<string, string> = {}) {
  return new Request("http://tern.test/contacts/imports", { method: "POST", headers: { "content-type": `multipart/form-data; boundary=${BOUNDARY}`, ...headers }, body });
}

async function post(t: TestAccount, body: BodyInit, headers: Record<string, string> = {}) {
  const req = formRequest(body, { authorization: `Bearer ${t.token}`, ...headers });
  const res = await exports.default.fetch(req);
  return { status: res.status, body: (await res.json()) as any };
}

async function finished(t: TestAccount, id: string) {
  return waitFor("the import to complete", async () => {
    const r = (await call(t, "GET", `/contacts/imports/${id}`)).body;
    return r.status === "completed" || r.status === "failed" ? r : undefined;
  }, 30_000);
}

/** No queue hint: the runs a test makes are the only ones. */
const quiet = { ...env, BROADCAST_QUEUE: { send: async () => {} } as unknown as Env["BROADCAST_QUEUE"] };

const contactsOf = async (t: TestAccount) =>
  (await env.DB.prepare("SELECT email, first_name, last_name, unsubscribed, properties_json FROM contacts WHERE account_id = ? ORDER BY email").bind(t.accountId).all()).results;

/** Index of the first byte of `needle` in `hay` at or after `from`. */
function indexOf(hay: Uint8Array, needle: string, from = 0): number {
  const n = enc.encode(needle);
  outer: for (let i = from; i <= hay.length - n.length; i++) {
    for (let j = 0; j < n.length; j++) if (hay[i + j] !== n[j]) continue outer;
    return i;
  }
  return -1;
}

describe("the import form, read as it streams in", () => {
  it("a form streamed in pieces of any size is imported exactly as the same form sent whole", async () => {
    // About 135 KB: multi-byte characters throughout, CRLF, a quoted cell with a comma.
    const rows = Array.from({ length: 3000 }, (_, i) => `p${i}@example.com,Zo\u00eb ${i} \u5c71\u7530,"K\u00f6ln, \ud83c\udf89 ${i % 7}"`);
    const csv = ["email,first_name,city", ...rows].join("\r\n") + "\r\n";
    const columnMap = JSON.stringify({ email: "email", first_name: "first_name", properties: { city: { column: "city" } } });
    // The fields first and the file last, so the pieces below can cut the file and its end.
    const body = multipart([
      { name: "column_map", content: columnMap },
      { name: "on_conflict", content: "upsert" },
      { name: "file", filename: "contacts.csv", type: "text/csv", content: csv },
    ]);
    const fileEnd = indexOf(body, `\r\n--${BOUNDARY}--`);
    // Inside a three-byte character, far enough in that the piece before it is not joined to another.
    const midCharacter = indexOf(body, "\u5c71", 70_000) + 1;
    // Inside the delimiter that ends the file (after "\r\n--" and 3 characters of the boundary).
    const midBoundary = fileEnd + 7;
    expect(midBoundary - midCharacter).toBeGreaterThan(64 * 1024);
    // Through the runtime (exports.default.fetch) a body arrives in pieces of at most 4 KB, a
    // smaller write as it was made; a Request handed to readImportForm keeps the pieces as cut.
    const deliveries: [string, "fetch" | "direct", () => BodyInit][] = [
      ["whole", "fetch", () => body],
      ["7-byte pieces", "fetch", () => delivered(body, 7)],
      ["64 KB pieces", "fetch", () => delivered(body, 64 * 1024)],
      ["7-byte pieces, kept", "direct", () => delivered(body, 7)],
      ["64 KB pieces, kept", "direct", () => delivered(body, 64 * 1024)],
      ["cut inside a character and inside the boundary", "direct", () => delivered(body, [midCharacter, midBoundary])],
      // The parser refuses data after the closing boundary; a client's CRLF there may come alone.
      ["the closing CRLF alone", "direct", () => delivered(body, [body.length - 2])],
    ];
    let whole: { counts: unknown; contacts: unknown[]; options: string } | undefined;
    for (const [how, via, make] of deliveries) {
      const t = await createAccount();
      if (via === "fetch") {
        const created = await post(t, make());
        expect(created.status, `${how}: ${JSON.stringify(created.body)}`).toBe(201);
        const done = await finished(t, created.body.id);
        const row = await env.DB.prepare("SELECT options_json FROM contact_imports WHERE id = ?").bind(created.body.id).first<{ options_json: string }>();
        const got = { counts: done.counts, contacts: await contactsOf(t), options: row!.options_json };
        if (!whole) {
          whole = got;
          expect(done.counts).toEqual({ total: 3000, created: 3000, updated: 0, skipped: 0, failed: 0 });
          expect(got.contacts.find((c: any) => c.email === "p2999@example.com")).toMatchObject({ first_name: "Zo\u00eb 2999 \u5c71\u7530", properties_json: JSON.stringify({ city: "K\u00f6ln, \ud83c\udf89 3" }) });
        } else expect(got, how).toEqual(whole);
        continue;
      }
      // What an import reads is its stored file and options: the same as the whole form's here.
      const form = await readImportForm(formRequest(make()));
      const row = await createImport(quiet, t.accountId, form.file, form.options);
      expect(new TextDecoder().decode(await (await env.BLOBS.get(row.fileKey))!.arrayBuffer()), how).toBe(csv);
      expect([row.total, row.optionsJson], how).toEqual([3000, whole!.options]);
    }
  });

  it("stores the file in R2 byte for byte as it came in pieces, and reads it without joining them", async () => {
    const t = await createAccount();
    // Over 2 MB, so the checks read several windows, each across pieces.
    const rows = Array.from({ length: 40_000 }, (_, i) => `w${i}@example.com,N\u00e4me ${i}`);
    const csv = enc.encode(["email,first_name", ...rows].join("\n") + "\n");
    const body = multipart([{ name: "file", filename: "big.csv", type: "text/csv", content: csv }]);
    const form = await readImportForm(formRequest(delivered(body, 64 * 1024)));
    // The body's own pieces: none holds the whole file.
    expect(form.file.length).toBeGreaterThan(csv.length / (64 * 1024));
    expect(Math.max(...form.file.map((c) => c.byteLength))).toBeLessThanOrEqual(64 * 1024);
    const row = await createImport(quiet, t.accountId, form.file, {});
    expect(row.total).toBe(40_000);
    expect(new Uint8Array(await (await env.BLOBS.get(row.fileKey))!.arrayBuffer())).toEqual(csv);
  });

  it("reads every part as Response.formData() does, wherever the body is cut", async () => {
    const filler = "f".repeat(70 * 1024);
    const parts: Part[] = [
      { name: "first", content: filler },
      // A BOM, every line break, and bytes that are not UTF-8 (replaced in a text field, kept in a file).
      { name: "column_map", content: concatBytes([enc.encode("\ufeff{\"a\":\r\n\"\u00e9\"\r}\n"), new Uint8Array([0xe9, 0xff, 0x41])]) },
      { name: "file", filename: "R\u00e9sum\u00e9.csv", type: "text/csv", content: concatBytes([enc.encode(`email\r\n\r\n--${BOUNDARY.slice(0, 10)}\r\n-\r\n`), new Uint8Array([0xe9, 0x00, 0x0d])]) },
      { name: "file", filename: "second.csv", content: "not this one" },
      { name: "empty", filename: "", content: "" },
      { name: "named", filename: "", content: "a text field after all" },
      { name: "column_map", content: "the first one counts" },
      { name: "last", filename: "filler.bin", content: filler },
    ];
    const body = multipart(parts);
    const expected: [string, string | { filename: string; bytes: Uint8Array }][] = [];
    for (const [name, value] of (await new Response(body, { headers: { "content-type": `multipart/form-data; boundary=${BOUNDARY}` } }).formData()).entries()) {
      expected.push([name, typeof value === "string" ? value : { filename: value.name, bytes: new Uint8Array(await value.arrayBuffer()) }]);
    }
    expect(expected.map(([name]) => name)).toEqual(parts.map((p) => p.name));
    const middle = [indexOf(body, `--${BOUNDARY}`, filler.length), indexOf(body, `--${BOUNDARY}`, body.length - filler.length - 300)];
    expect(middle[1]! - middle[0]!).toBeLessThan(1000);
    // Two pieces, each large enough to go to the parser as it is: every cut in the middle parts.
    for (let cut = middle[0]!; cut <= middle[1]!; cut++) {
      const got: typeof expected = [];
      for await (const p of formParts(formRequest(delivered(body, [cut])), 1024 * 1024)) {
        got.push([p.name, p.filename === undefined ? fieldText(p.content) : { filename: p.filename, bytes: concatBytes(p.content) }]);
      }
      expect(got, `cut at ${cut}`).toEqual(expected);
    }
  });

  it("a file sent as a text field is read as before, invalid UTF-8 replaced, however it is cut", async () => {
    const t = await createAccount();
    const raw = concatBytes([enc.encode("\ufeffemail,first_name\r\nzoe@example.com,Zo"), new Uint8Array([0xe9]), enc.encode("\r\nyu@example.com,\u5c71\u7530\r\n")]);
    const body = multipart([{ name: "file", content: raw }]);
    const form = await readImportForm(formRequest(delivered(body, 7)));
    expect(new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(concatBytes(form.file))).toBe("\ufeffemail,first_name\r\nzoe@example.com,Zo\ufffd\r\nyu@example.com,\u5c71\u7530\r\n");
    const created = await post(t, delivered(body, 7));
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect((await finished(t, created.body.id)).counts).toMatchObject({ total: 2, created: 2, failed: 0 });
    expect((await call(t, "GET", "/contacts/zoe@example.com")).body.first_name).toBe("Zo\ufffd");
    expect((await call(t, "GET", "/contacts/yu@example.com")).body.first_name).toBe("\u5c71\u7530");
  });

  it("refuses a body that is not such a form with the same 400, and one past the limit with the 413 before reading it", async () => {
    const t = await createAccount();
    const formError = { statusCode: 400, name: "validation_error", message: "The request body must be multipart/form-data with a `file` field." };
    const file = { name: "file", filename: "a.csv", content: "email\na@example.com\n" };
    const whole = multipart([file]);
    const unclosed = whole.subarray(0, indexOf(whole, `\r\n--${BOUNDARY}--`));
    expect((await post(t, delivered(unclosed, 7))).body).toEqual(formError);
    expect((await post(t, unclosed)).body).toEqual(formError);
    expect((await post(t, whole, { "content-type": "multipart/form-data" })).body).toEqual(formError);
    expect((await post(t, whole, { "content-type": "multipart/form-data; boundary=another" })).body).toEqual(formError);
    expect((await post(t, JSON.stringify({ file: "email\na@example.com" }), { "content-type": "application/json" })).body).toEqual(formError);
    expect((await post(t, enc.encode(`--${BOUNDARY}\r\ncontent-type: text/csv\r\n\r\nemail\r\n--${BOUNDARY}--\r\n`))).body).toEqual(formError);
    expect((await post(t, multipart([{ name: "on_conflict", content: "skip" }]))).body).toMatchObject({ statusCode: 422, name: "missing_required_field" });
    // A url-encoded form is read as Response.formData() read it.
    const encoded = await post(t, new URLSearchParams({ file: "email\nurl@example.com\n" }).toString(), { "content-type": "application/x-www-form-urlencoded" });
    expect(encoded.status, JSON.stringify(encoded.body)).toBe(201);

    // A declared length past the limit: refused before a byte is read.
    let pulled = 0;
    const endless = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulled += 64 * 1024;
        controller.enqueue(new Uint8Array(64 * 1024).fill(0x61));
      },
    });
    const declared = await post(t, endless, { "content-length": String(MAX_IMPORT_BYTES + 2 * 1024 * 1024) });
    expect(declared).toEqual({ status: 413, body: { statusCode: 413, name: "validation_error", message: "The file must be at most 50 MB." } });
    expect(pulled).toBeLessThan(1024 * 1024);
    expect((await call(t, "GET", "/contacts/imports")).body.data).toHaveLength(1);
  });
});

describe("a file read from its pieces", () => {
  it("reads any window as the whole file would, a view of one piece where it can", async () => {
    const bytes = new Uint8Array(5000).map((_, i) => (i * 7 + 3) & 0xff);
    // Pieces of uneven sizes, some empty.
    const sizes = [1, 0, 7, 999, 0, 64, 2, 1500, 1, 2426];
    const pieces: Uint8Array[] = [];
    for (let at = 0, i = 0; at < bytes.length; i++) {
      const n = Math.min(sizes[i % sizes.length]!, bytes.length - at);
      pieces.push(bytes.slice(at, at + n));
      at += n;
    }
    const source = chunksSource(pieces);
    const whole = bytesSource(bytes);
    expect(source.size).toBe(bytes.length);
    for (const offset of [0, 1, 7, 8, 1000, 1007, 1008, 2500, 4999, 5000, 6000]) {
      for (const length of [1, 2, 63, 64, 1500, 5000, 10_000]) {
        expect(await source.read(offset, length), `${offset}+${length}`).toEqual(await whole.read(offset, length));
      }
    }
    // Inside the 1,500-byte piece: a view of it, not a copy.
    const inside = (await source.read(1080, 100))!;
    expect(inside.buffer).toBe(pieces.find((p) => p.byteLength === 1500)!.buffer);
  });
});
