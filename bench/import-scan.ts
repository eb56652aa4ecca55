// The CPU a contact import's upload costs before it is queued, at the 50 MB limit: the strict
// UTF-8 pass and the windowed layout, count and control-character scan createImport runs
// (worker/contacts/imports.ts), over a Blob as the upload's form gives it. In Node 22, whose V8
// is workerd's; a Worker's CPU limit (30 s by default on the paid plan) is the figure to hold it
// against. Run: node_modules/.bin/node bench/import-scan.ts [MB]

interface ImportsModule {
  blobSource(blob: Blob): unknown;
  decodeCsv(bytes: Uint8Array, partial?: boolean): string;
  scanCsv(source: unknown, head: string, map?: { email: string; first_name?: string; last_name?: string }): Promise<{ rows: number }>;
}
// Loaded by a computed name: its types need the Workers' (D1Database, R2Bucket), which this Node
// script's type check does not have; what it uses of it is typed above.
const { blobSource, decodeCsv, scanCsv } = (await import(["..", "worker", "contacts", "imports.ts"].join("/"))) as ImportsModule;

const megabytes = Number(process.argv[2] ?? 50);
const lines = ["email,first_name,last_name,plan"];
let size = lines[0]!.length + 1;
for (let i = 0; size < megabytes * 1024 * 1024 - 200; i++) {
  const row = `person-${i}@example.com,F\u00efrst ${i},Last ${i},pro`;
  lines.push(row);
  size += Buffer.byteLength(row) + 1;
}
const blob = new Blob([lines.join("\n") + "\n"]);
const WINDOW = 1024 * 1024;
for (let round = 1; round <= 3; round++) {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const decoder = new TextDecoder("utf-8", { fatal: true });
  for (let o = 0; o < blob.size; o += WINDOW) decoder.decode(new Uint8Array(await blob.slice(o, o + WINDOW).arrayBuffer()), { stream: o + WINDOW < blob.size });
  const t1 = performance.now();
  const head = decodeCsv(new Uint8Array(await blob.slice(0, WINDOW).arrayBuffer()), true);
  const { rows } = await scanCsv(blobSource(blob), head, { email: "email", first_name: "first_name", last_name: "last_name" });
  const t2 = performance.now();
  const cpu = process.cpuUsage(cpu0);
  console.log(`round ${round}: ${(blob.size / 1048576).toFixed(1)} MB, ${rows.toLocaleString("en-US")} rows: UTF-8 pass ${Math.round(t1 - t0)} ms, scan ${Math.round(t2 - t1)} ms, CPU ${Math.round((cpu.user + cpu.system) / 1000)} ms`);
}

export {};
