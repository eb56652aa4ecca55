// The memory a contact import's upload costs at the 50 MB limit, before it is queued: the form
// read (readImportForm) and createImport's reading of the file (the strict UTF-8 pass, then the
// layout, row count and control-character scan), D1 and R2 left out. Two ways of reading the
// form, each in a process of its own (memory freed by one would be reused by the other):
//   before  the whole body read into one array (readBodyLimited), then Response.formData():
//           readImportForm as it was until the form was streamed (commit b46428c)
//   after   readImportForm now: the parts parsed as the body streams in, the file kept as the
//           body's pieces (worker/multipart-form.ts) and read through chunksSource
// The body is made as it is read (a 50 MB CSV of import-scan.ts's rows in a multipart form),
// so nothing holds it but the code measured. Reported: the peak of heapUsed + arrayBuffers,
// sampled at each piece of the body and each window read, after a full GC (what is still
// held, not garbage yet to be collected), and the process's peak resident memory above what it
// had before the form was read (Node keeps a Blob's bytes outside the JavaScript heap, where
// only the resident memory sees them). In Node 22 (undici's Request and formData(), not
// workerd's): the figures compare the two ways; workerd's own are not these.
// Run: node_modules/.bin/node --expose-gc bench/import-memory.ts [MB] [piece KB]
//
// In workerd: `node_modules/.bin/node bench/import-memory.ts --workerd [root]` starts tern from
// the checkout at `root` (this one by default) as `npm start` runs it, posts the 50 MB form to
// POST /contacts/imports (with a Content-Length, in 64 KB writes) and samples the Worker's
// isolate through the inspector (Runtime.getHeapUsage: the V8 heap in use plus ArrayBuffers'
// backing stores, as often as the isolate answers between its tasks), once as it stands and once
// after a full collection at each sample, each in a tern of its own. For the code before,
// run it against a worktree of it: `git worktree add /tmp/tern-before b46428c` (with
// node_modules linked and `npm run prepare` run there), then `... --workerd /tmp/tern-before`.
import { spawnSync } from "node:child_process";
import { request as httpRequest } from "node:http";
import { resolve } from "node:path";
import WS from "ws";

interface ImportsModule {
  MAX_IMPORT_BYTES: number;
  blobSource(blob: Blob): Source;
  bytesSource(bytes: Uint8Array): Source;
  chunksSource(chunks: readonly Uint8Array[]): Source;
  decodeCsv(bytes: Uint8Array, partial?: boolean): string;
  scanCsv(source: Source, head: string, map?: { email: string; first_name?: string; last_name?: string }): Promise<{ rows: number }>;
}
interface Source {
  size: number;
  read(offset: number, length: number): Promise<Uint8Array | null>;
}
// Loaded by computed names: their types need the Workers' (D1Database, R2Bucket), which this
// Node script's type check does not have; what it uses of them is typed here.
const load = (path: string) => import(["..", "worker", ...path.split("/")].join("/"));
const imports = (await load("contacts/imports.ts")) as ImportsModule;
const { readImportForm } = (await load("routes/contact-imports.ts")) as { readImportForm(req: Request): Promise<{ file: Uint8Array[] }> };
const { readBodyLimited } = (await load("http.ts")) as { readBodyLimited(req: Request, limit: number): Promise<Uint8Array> };

const MB = 1024 * 1024;
// The parent is given [MB] [piece KB]; each child its way first.
const args = process.argv.slice(2);
const workerdRoot = args[0] === "--workerd" ? resolve(args[1] ?? resolve(import.meta.dirname, "..")) : undefined;
if (workerdRoot !== undefined) args.splice(0, 2);
const mode = args[0] === "before" || args[0] === "after" ? args.shift() : undefined;
const [megabytes = "50", pieceKb = "64"] = args;
const gc = (globalThis as { gc?: () => void }).gc;

if (mode === undefined && workerdRoot === undefined) {
  // The parent: each way in a child of its own, then the table.
  if (!gc) throw new Error("run with --expose-gc");
  console.log(`A ${megabytes} MB CSV file in a multipart form, in pieces of ${pieceKb} KB, Node ${process.version}:`);
  console.log("| reading the form | held once it is read | held at peak, the file's reading included | resident memory at peak |");
  console.log("|---|---:|---:|---:|");
  for (const way of ["before", "after"]) {
    const child = spawnSync(process.execPath, ["--expose-gc", import.meta.filename, way, megabytes, pieceKb], { encoding: "utf8" });
    if (child.status !== 0) throw new Error(`${way}: ${child.stderr}`);
    console.log(child.stdout.trim());
  }
  process.exit(0);
}

const encoder = new TextEncoder();
const BOUNDARY = "----tern-bench-import-memory";
const fileBytes = Number(megabytes) * MB - 200;
/** import-scan.ts's rows (the same file), made a piece of about `piece` bytes at a time. */
function* csvPieces(piece: number): Generator<Uint8Array> {
  let text = "email,first_name,last_name,plan\n";
  let size = text.length;
  for (let i = 0; size < fileBytes; i++) {
    const row = `person-${i}@example.com,F\u00efrst ${i},Last ${i},pro\n`;
    text += row;
    size += Buffer.byteLength(row);
    if (text.length >= piece) {
      yield encoder.encode(text);
      text = "";
    }
  }
  if (text !== "") yield encoder.encode(text);
}
const head = encoder.encode(`--${BOUNDARY}\r\ncontent-disposition: form-data; name="on_conflict"\r\n\r\nupsert\r\n--${BOUNDARY}\r\ncontent-disposition: form-data; name="file"; filename="contacts.csv"\r\ncontent-type: text/csv\r\n\r\n`);
const tail = encoder.encode(`\r\n--${BOUNDARY}--\r\n`);
const piece = Number(pieceKb) * 1024;
let length = head.length + tail.length;
for (const p of csvPieces(piece)) length += p.length;

if (workerdRoot !== undefined) {
  // Each in a tern of its own: the first import's run would go on during the second.
  for (const collect of [false, true]) await inWorkerd(workerdRoot, collect);
  process.exit(0);
}

let peak = 0;
/** The peak until the form was read (its file ready for createImport). */
let formPeak = 0;
let samples = 0;
/** What is held now: heapUsed + arrayBuffers after a full GC. */
function held(): number {
  gc!();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}
function sample(): void {
  peak = Math.max(peak, held());
  samples++;
}

function body(): ReadableStream<Uint8Array> {
  const pieces = csvPieces(piece);
  let stage: "head" | "file" | "tail" | "done" = "head";
  let pulls = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (pulls++ % 16 === 0) sample();
      if (stage === "head") {
        stage = "file";
        return controller.enqueue(head.slice());
      }
      if (stage === "file") {
        const next = pieces.next();
        if (!next.done) return controller.enqueue(next.value);
        stage = "tail";
      }
      if (stage === "tail") {
        stage = "done";
        return controller.enqueue(tail.slice());
      }
      controller.close();
    },
  }, { highWaterMark: 0 });
}

/** createImport's reading of the file (worker/contacts/imports.ts, checkText then scanCsv). */
async function readAsCreateImportDoes(source: Source): Promise<number> {
  const watched: Source = { size: source.size, read: async (offset, n) => { sample(); return source.read(offset, n); } };
  const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });
  const WINDOW = MB;
  for (let offset = 0; offset < watched.size; offset += WINDOW) decoder.decode((await watched.read(offset, WINDOW))!, { stream: offset + WINDOW < watched.size });
  const first = imports.decodeCsv((await watched.read(0, WINDOW))!, true);
  const headText = first.slice(0, first.lastIndexOf("\n") + 1);
  return (await imports.scanCsv(watched, headText, { email: "email", first_name: "first_name", last_name: "last_name" })).rows;
}

const heldBefore = held();
const rssBefore = process.memoryUsage().rss;
const request = new Request("http://tern.test/contacts/imports", {
  method: "POST", body: body(), duplex: "half",
  headers: { "content-type": `multipart/form-data; boundary=${BOUNDARY}`, "content-length": String(length) },
} as RequestInit);
let rows: number;
if (mode === "before") {
  let bytes: Uint8Array | undefined = await readBodyLimited(request, imports.MAX_IMPORT_BYTES + MB);
  sample();
  const form = await new Response(bytes, { headers: { "content-type": request.headers.get("content-type")! } }).formData();
  sample(); // the body and the form's File, both held until here
  formPeak = peak;
  bytes = undefined;
  const file = form.get("file");
  if (!(file instanceof Blob)) throw new Error("no file part");
  rows = await readAsCreateImportDoes(imports.blobSource(file));
} else {
  const form = await readImportForm(request);
  sample();
  formPeak = peak;
  rows = await readAsCreateImportDoes(imports.chunksSource(form.file));
}
sample();
// maxRSS is in KiB.
const rssPeak = process.resourceUsage().maxRSS * 1024 - rssBefore;
const label = mode === "before" ? "before: whole body, then `Response.formData()`" : "after: parts as they stream in, the file in pieces";
console.log(`| ${label} (${rows.toLocaleString("en-US")} rows, ${(length / MB).toFixed(1)} MB of form, ${samples} samples) | ${((formPeak - heldBefore) / MB).toFixed(1)} MB | ${((peak - heldBefore) / MB).toFixed(1)} MB | ${(rssPeak / MB).toFixed(1)} MB |`);

/** The form posted to tern in workerd, the Worker's isolate sampled meanwhile: as it stands
 * (garbage not yet collected included), or after a full collection each time (what is held). */
async function inWorkerd(root: string, collect: boolean): Promise<void> {
  const { startTern, freePort } = (await import(`${root}/test/support/processes.ts`)) as {
    startTern(o: { env: Record<string, string> }): Promise<{ url: string; apiKey: string; stop(): Promise<unknown> }>;
    freePort(): Promise<number>;
  };
  const port = await freePort();
  const tern = await startTern({ env: { X_LOCAL_OBSERVABILITY: "false", WRANGLER_SEND_METRICS: "false", TERN_DEV_RATE_LIMIT: "1000", TERN_INSPECTOR_PORT: String(port) } });
  try {
    const targets = (await (await fetch(`http://127.0.0.1:${port}/json`)).json()) as { webSocketDebuggerUrl: string }[];
    // wrangler's inspector proxy wants a devtools origin.
    const ws = new WS(targets[0]!.webSocketDebuggerUrl, { origin: "https://devtools.devprod.cloudflare.dev" });
    await new Promise<void>((res, rej) => {
      ws.once("open", () => res());
      ws.once("error", rej);
    });
    let id = 0;
    const call = (method: string) => new Promise<Record<string, number>>((res) => {
      const mine = ++id;
      const onMessage = (data: WS.RawData) => {
        const m = JSON.parse(String(data)) as { id?: number; result?: Record<string, number> };
        if (m.id !== mine) return;
        ws.off("message", onMessage);
        res(m.result ?? {});
      };
      ws.on("message", onMessage);
      ws.send(JSON.stringify({ id: mine, method, params: {} }));
    });
    const used = async () => {
      const u = await call("Runtime.getHeapUsage");
      return ((u.usedSize ?? 0) + (u.backingStorageSize ?? 0) + (u.embedderHeapUsedSize ?? 0)) / MB;
    };
    const post = (pieces: Iterable<Uint8Array>, bytes: number) => new Promise<string>((resolve, reject) => {
      const req = httpRequest(`${tern.url}/contacts/imports`, {
        method: "POST",
        headers: { authorization: `Bearer ${tern.apiKey}`, "content-type": `multipart/form-data; boundary=${BOUNDARY}`, "content-length": String(bytes) },
      }, (res) => {
        let text = "";
        res.on("data", (d) => (text += d));
        res.on("end", () => resolve(`${res.statusCode} ${text}`));
      });
      req.on("error", reject);
      void (async () => {
        for (const p of pieces) if (!req.write(p)) await new Promise((r) => req.once("drain", r));
        req.end();
      })();
    });
    // A small import first: the code loaded and warm, the isolate at its working size.
    const small = encoder.encode(`--${BOUNDARY}\r\ncontent-disposition: form-data; name="file"; filename="c.csv"\r\n\r\nemail\nwarm@example.com\n\r\n--${BOUNDARY}--\r\n`);
    console.log(`warm-up: ${await post([small], small.length)}`);
    await new Promise((r) => setTimeout(r, 3_000));
    await call("HeapProfiler.collectGarbage");
    const before = await used();
    let peak = before;
    let running = true;
    const sampling = (async () => {
      while (running) {
        if (collect) await call("HeapProfiler.collectGarbage");
        peak = Math.max(peak, await used());
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const answer = await post([head, ...csvPieces(piece), tail], length);
    await new Promise((r) => setTimeout(r, 500));
    running = false;
    await sampling;
    ws.close();
    console.log(`${root}: ${answer}`);
    console.log(`the Worker's isolate, ${collect ? "after a full GC each sample" : "as sampled"}: ${before.toFixed(1)} MB before, ${peak.toFixed(1)} MB at peak (+${(peak - before).toFixed(1)} MB)`);
  } finally {
    await tern.stop();
  }
}
