// How much memory one large message costs the Worker's isolate (issue 20, item 3): tern as
// `npm start` runs it, a local file server for attachment paths (dev mode fetches http and
// loopback), and the resident memory (VmRSS, /proc) of the workerd process that runs the
// Worker, sampled every 10 ms. Linux only. Run: `node bench/message-memory.ts`.
//
// Scenarios, one after the other, each measured from the RSS just before it:
//   small    a 1 KB text email, accepted and delivered to the dev relay
//   attack   three 30 MB paths (the probe): refused with 422, nothing stored
//   fetched  three 13 MB paths: two fetched (one without a length), the third refused by its
//            Content-Length, nothing stored: what fetching alone costs
//   accept   two 13 MB paths, scheduled a day ahead: acceptance alone (fetch, R2, D1)
//   largest  two 13 MB paths (about 35 MB encoded, near the 40 MB bound), accepted and delivered
//   deliver  delivery alone, in a fresh workerd: tern is restarted on the same state and the email
//            `accept` scheduled is made due (RSS never shrinks, so in the first process delivery
//            reuses what acceptance freed and its own growth is understated)
import { readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { startTern } from "../test/support/processes.ts";
import { processTree } from "./cpu.ts";

const MB = 1024 * 1024;

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) / 1024 : NaN;
}

const files = createServer((req, res) => {
  const url = new URL(req.url ?? "/", "http://x");
  const total = Number(url.searchParams.get("bytes") ?? 0);
  res.writeHead(200, { "content-type": "application/octet-stream", ...(url.searchParams.has("undeclared") ? {} : { "content-length": total }) });
  const chunk = Buffer.alloc(64 * 1024, 97);
  let sent = 0;
  const pump = () => {
    while (sent < total && !res.destroyed) {
      const piece = chunk.subarray(0, Math.min(chunk.length, total - sent));
      sent += piece.length;
      if (!res.write(piece)) return void res.once("drain", pump);
    }
    if (!res.destroyed) res.end();
  };
  pump();
});
await new Promise<void>((r) => files.listen(0, "127.0.0.1", r));
const filesUrl = `http://127.0.0.1:${(files.address() as AddressInfo).port}`;

const ternEnv = { X_LOCAL_OBSERVABILITY: "false", WRANGLER_SEND_METRICS: "false", TERN_DEV_RATE_LIMIT: "1000" };

function runtimeOf(tern: Awaited<ReturnType<typeof startTern>>): number {
  const port = new URL(tern.url).port;
  const runtime = processTree(tern.child.pid!).find((pid) => {
    const comm = readFileSync(`/proc/${pid}/comm`, "utf8").trim();
    const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ");
    return comm === "workerd" && !cmd.includes(`entry=127.0.0.1:${port} `);
  });
  if (runtime === undefined) throw new Error("the Worker's workerd process was not found");
  return runtime;
}

function client(tern: Awaited<ReturnType<typeof startTern>>) {
  const call = async (method: string, path: string, body: Record<string, unknown>) => {
    const res = await fetch(`${tern.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${tern.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  };
  const send = (body: Record<string, unknown>) => call("POST", "/emails", { from: `Mem <mem@${tern.domain}>`, subject: "memory", text: "see attached", ...body });
  const delivered = async (to: string) => {
    for (let i = 0; i < 120; i++) {
      const list = (await (await fetch(`${tern.relayHttp}/api/messages?to=${encodeURIComponent(to)}&wait=1000`)).json()) as { data: unknown[] };
      if (list.data.length > 0) return;
    }
    throw new Error(`${to} never reached the relay`);
  };
  const measure = async (runtime: number, name: string, run: () => Promise<string>) => {
    await new Promise((r) => setTimeout(r, 2_000)); // let the last scenario's garbage go
    const before = rssMb(runtime);
    let peak = before;
    const timer = setInterval(() => (peak = Math.max(peak, rssMb(runtime))), 10);
    const outcome = await run();
    await new Promise((r) => setTimeout(r, 500));
    clearInterval(timer);
    console.log(`${name.padEnd(8)} ${outcome.padEnd(34)} workerd RSS before ${before.toFixed(0)} MB, peak ${peak.toFixed(0)} MB (+${(peak - before).toFixed(0)} MB)`);
  };
  return { call, send, delivered, measure };
}

let tern = await startTern({ env: ternEnv });
const later = { id: "", to: `later-${Date.now()}@example.com` };
try {
  const runtime = runtimeOf(tern);
  const { send, delivered, measure } = client(tern);

  await measure(runtime, "small", async () => {
    const to = `small-${Date.now()}@example.com`;
    const r = await send({ to, text: "x".repeat(1024) });
    await delivered(to);
    return `${r.status}, delivered`;
  });
  await measure(runtime, "attack", async () => {
    const r = await send({ to: "attack@example.com", attachments: [1, 2, 3].map((i) => ({ path: `${filesUrl}/f${i}?bytes=${30 * MB}` })) });
    return `${r.status} ${String(r.json.name ?? "")}`;
  });
  await measure(runtime, "fetched", async () => {
    const r = await send({ to: "refused@example.com", attachments: [1, 2, 3].map((i) => ({ path: `${filesUrl}/g${i}?bytes=${13 * MB}${i === 2 ? "&undeclared" : ""}` })) });
    return `${r.status} ${String(r.json.name ?? "")} (26 MB fetched)`;
  });
  await measure(runtime, "accept", async () => {
    const r = await send({ to: later.to, scheduled_at: "in 1 day", attachments: [{ path: `${filesUrl}/a.bin?bytes=${13 * MB}` }, { path: `${filesUrl}/b.bin?bytes=${13 * MB}&undeclared` }] });
    later.id = String(r.json.id ?? "");
    return `${r.status}, scheduled (accepted, not sent)`;
  });
  await measure(runtime, "largest", async () => {
    const to = `largest-${Date.now()}@example.com`;
    const r = await send({ to, attachments: [{ path: `${filesUrl}/a.bin?bytes=${13 * MB}` }, { path: `${filesUrl}/b.bin?bytes=${13 * MB}&undeclared` }] });
    if (r.status !== 200) return `${r.status} ${JSON.stringify(r.json)}`;
    await delivered(to);
    return "200, delivered (about 35 MB)";
  });

  await tern.stop();
  tern = await startTern({ env: ternEnv, stateDir: tern.stateDir });
  const fresh = client(tern);
  await fresh.measure(runtimeOf(tern), "deliver", async () => {
    const r = await fresh.call("PATCH", `/emails/${later.id}`, { scheduled_at: new Date(Date.now() + 1_000).toISOString() });
    if (r.status !== 200) return `${r.status} ${JSON.stringify(r.json)}`;
    await fresh.delivered(later.to);
    return "200, delivered (scheduled by accept)";
  });
} finally {
  await tern.stop();
  files.close();
  rmSync(tern.stateDir, { recursive: true, force: true });
}
