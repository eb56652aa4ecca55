// The SMTP bridge's benchmark (part 5 of `npm run bench`; alone with BENCH_ONLY=bridge):
//   a. messages per second the bridge accepts from many concurrent SMTP sessions (nodemailer
//      pools: one pooled connection per session, STARTTLS + AUTH, the same prebuilt MIME sent
//      again and again), for a 10 KB and a 1 MB message, next to the same messages posted
//      straight to the API by as many keep-alive connections (the very JSON the bridge posts
//      for that message), and next to Postfix
//      accepting the same SMTP load on the same machine (STARTTLS, no AUTH: Postfix's AUTH needs
//      a SASL server; its queue is real, delivery goes to its `discard` transport);
//   b. the bridge's memory: peak RSS of its process during each bridge run, and a 40 MB message
//      sent to a fresh bridge process, peak RSS over its idle RSS.
// The bridge runs as its own process, built and started as in production (node
// smtp-bridge/dist/main.js, with the settings of smtp-bridge/runtime.ts), in front of the bench's tern.
// postfix's smtp-source cannot speak TLS or AUTH, so nodemailer pools generate the load for all
// three. Postfix is installed with apt-get when missing and runs as a private instance (its own
// config and queue directory under a temporary directory; the only change to the machine's
// default instance is one `alternate_config_directories` entry, which postfix requires).
import { execFileSync, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import nodemailer from "nodemailer";
import { readMessage } from "../smtp-bridge/message.ts";
import { memoryOnly } from "../smtp-bridge/spool.ts";
import { requestBody, toSubmission } from "../smtp-bridge/submission.ts";
import { startBridgeProcess, type BridgeProcess } from "../test/support/bridge.ts";
import { prepareTestCertificates } from "../test/support/certificates.ts";
import { freePort, type TernProcess } from "../test/support/processes.ts";
import { PARTS, pinProcesses, processCpuSeconds, processTree, sampleCpu } from "./cpu.ts";
import { htmlOfSize } from "./delivery.ts";
import { median, quantile, runLoad } from "./load.ts";

/** A run's warm-up (not measured) and its measured window. */
export interface Window {
  warmupMs: number;
  durationMs: number;
}

export interface BridgeSettings {
  sessions: number;
  rounds: number;
  /** The 10 KB message's windows, and the 1 MB message's: a run counts the messages that end in
   * its window, so the warm-up has to cover more than one message's latency at 100 sessions
   * (about 0.4 s at 10 KB; 2.3-3.5 s at 1 MB, and the first message of each session also
   * waits for STARTTLS and AUTH), or the window starts before the first messages end, and
   * the path with the longer latency loses part of its window. */
  small: Window;
  large: Window;
  /** Sends the 40 MB message (needs about a minute). */
  bigMessage: boolean;
}

export interface SmtpRun {
  messages: number;
  errors: number;
  firstError: string | null;
  seconds: number;
  rate: number;
  p50: number;
  p99: number;
  /** Bridge runs: peak RSS (MB) of the bridge process. */
  peakRssMb: number | null;
  /** CPU ms per message in the measured window: tern's processes, the bridge, the load generator. */
  cpu: CpuUse | null;
  /** Seconds after the window until tern's send queue had caught up (API and bridge runs). */
  drainSeconds?: number;
}

/** The messages over the window and the queue's catch-up after it: the rate tern sustains when
 * the work it put off past the window counts too (API and bridge runs; NaN for Postfix's). */
function sustainedRate(run: SmtpRun): number {
  return run.messages / (run.seconds + (run.drainSeconds ?? NaN));
}

export interface CpuUse {
  /** The server's processes: tern's tree, or Postfix's for the Postfix runs. */
  tern: number;
  bridge: number;
  generator: number;
}

/** CPU seconds so far of the server's process tree (tern's, or Postfix's master), the bridge process and this one. */
function sampleUse(server: { pid: number | undefined; port: number }, bridgePid: number | undefined): CpuUse | null {
  const s = sampleCpu(server.pid, server.port);
  if (!s) return null;
  return { tern: PARTS.filter((p) => p !== "generator").reduce((a, p) => a + s[p], 0), bridge: bridgePid ? processCpuSeconds(bridgePid) : 0, generator: s.generator };
}

function perMessage(a: CpuUse | null, b: CpuUse | null, messages: number): CpuUse | null {
  if (!a || !b || !messages) return null;
  const ms = (x: number, y: number) => ((y - x) * 1000) / messages;
  return { tern: ms(a.tern, b.tern), bridge: ms(a.bridge, b.bridge), generator: ms(a.generator, b.generator) };
}

export type Path = "api" | "bridge" | "postfix";
export const PATHS: Path[] = ["api", "bridge", "postfix"];

/** Where the processes run. "shared": all of them on all of the machine's CPUs, the Worker
 * (workerd, with wrangler and the dev relay) competing with the bridge and the load generator,
 * as on a small machine that runs both; the target is judged here. "apart": tern's processes on
 * one CPU, the bridge and the load generator (this process) on another. Apart, tern's CPU bounds
 * both paths (it is full on both; the bridge's is not), so that ratio shows whether the bridge
 * slows tern down when it does not take tern's CPU, not what the bridge costs: a bridge two or
 * three times as costly would read the same. The CPU figures show that cost. */
export type Placement = "shared" | "apart";
export const PLACEMENTS: Placement[] = ["apart", "shared"];

export interface SizeResult {
  label: string;
  mimeBytes: number;
  jsonBytes: number;
  /** Postfix is measured in the shared placement only (it has no Worker to be kept apart from). */
  runs: Record<Placement, Record<Path, SmtpRun[]>>;
}

export interface BigMessageResult {
  mimeBytes: number;
  jsonBytes: number;
  reply: string;
  seconds: number;
  idleRssMb: number;
  peakRssMb: number;
  /** (peak - idle) / message size */
  ratio: number;
}

export interface BridgeResults {
  settings: BridgeSettings;
  /** The CPUs of each placement, or why "apart" was not measured. */
  cpus: { all: string; apart: { tern: string; clients: string } | string };
  sizes: SizeResult[];
  postfix: string | null; // version, or why it was not measured
  big: BigMessageResult | null;
  seconds: number;
}

type Log = (line: string) => void;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const MB = 1024 * 1024;

// ---------------------------------------------------------------------------------------
// What the bridge's process uses, from /proc.

function procStatus(pid: number, field: "VmRSS" | "VmHWM"): number {
  const m = readFileSync(`/proc/${pid}/status`, "utf8").match(new RegExp(`^${field}:\\s+(\\d+) kB`, "m"));
  return m ? Number(m[1]) / 1024 : NaN;
}


// ---------------------------------------------------------------------------------------
// The messages: one MIME source for the SMTP paths, and for the API the request the bridge makes of it.

interface Message {
  label: string;
  raw: Buffer;
  json: string;
}

const FROM = "bench@tern.test";
const TO = "delivered@simulator.tern.test";

async function message(label: string, attachmentBytes: number): Promise<Message> {
  const html = htmlOfSize(10 * 1024);
  const attachments = attachmentBytes ? [{ filename: "data.bin", content: randomBytes(attachmentBytes), contentType: "application/octet-stream" }] : [];
  const composer = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: "windows" });
  const info = (await composer.sendMail({ from: `Bench <${FROM}>`, to: TO, subject: `bridge bench ${label}`, html, attachments })) as unknown as { message: Buffer };
  // The API path posts the very request the bridge makes of this message (the bridge's own
  // conversion, run here), so both paths ask tern for the same thing, byte for byte. It is
  // checked against the email as written: the same fields, html and attachment (a single-part
  // message's last line break belongs to SMTP's end of data, so the html may lack it).
  const read = await readMessage(Readable.from([info.message]), 64 * MB, memoryOnly);
  if (!read.ok) throw new Error("the bench message could not be read");
  let json = "";
  for await (const piece of requestBody(toSubmission(read.message, { mailFrom: FROM, rcptTo: [TO] })).chunks()) json += piece.toString();
  const sent = JSON.parse(json) as { from: string; to: string[]; subject: string; html: string; attachments?: { filename: string; content: string }[] };
  const same =
    sent.from === `Bench <${FROM}>` && sent.to.join() === TO && sent.subject === `bridge bench ${label}` && (sent.html === html || `${sent.html}\n` === html) &&
    (sent.attachments ?? []).length === attachments.length && attachments.every((a, i) => sent.attachments![i]!.filename === a.filename && sent.attachments![i]!.content === a.content.toString("base64"));
  if (!same) throw new Error(`the bench's ${label} request is not the email as written`);
  return { label, raw: info.message, json };
}

// ---------------------------------------------------------------------------------------
// Closed-loop SMTP load: `sessions` pooled connections sending back to back.

interface SmtpTarget {
  port: number;
  auth?: { user: string; pass: string };
  ca: Buffer;
}

async function runSmtpLoad(target: SmtpTarget, raw: Buffer, o: { sessions: number; warmupMs: number; durationMs: number; bridgePid?: number; sample?: () => CpuUse | null; onId?: (id: string) => void }): Promise<SmtpRun> {
  const start = performance.now();
  const from = start + o.warmupMs;
  const to = from + o.durationMs;
  const latencies: number[] = [];
  let errors = 0;
  let firstError: string | null = null;
  let peakRss = 0;
  let cpuAtStart: CpuUse | null = null;
  let cpuAtEnd: CpuUse | null = null;
  const sampler = o.bridgePid
    ? setInterval(() => {
        const now = performance.now();
        if (now >= from && now <= to) peakRss = Math.max(peakRss, procStatus(o.bridgePid!, "VmRSS"));
      }, 100)
    : null;
  const edges = o.sample
    ? [setTimeout(() => (cpuAtStart = o.sample!()), o.warmupMs), setTimeout(() => (cpuAtEnd = o.sample!()), o.warmupMs + o.durationMs)]
    : [];
  const transports = Array.from({ length: o.sessions }, () =>
    nodemailer.createTransport({
      // By address: a host name would have nodemailer ask DNS first, which stalls where there is none.
      host: "127.0.0.1", port: target.port, secure: false, requireTLS: true, pool: true, maxConnections: 1, maxMessages: Infinity,
      auth: target.auth, tls: { ca: target.ca, servername: "localhost" }, socketTimeout: 120_000,
    }),
  );
  const session = async (t: (typeof transports)[number]) => {
    while (performance.now() < to) {
      const t0 = performance.now();
      let ok = true;
      let response = "";
      try {
        response = (await t.sendMail({ envelope: { from: FROM, to: [TO] }, raw })).response;
      } catch (err) {
        ok = false;
        firstError ??= String((err as Error).message).slice(0, 200);
        await sleep(50);
      }
      const t1 = performance.now();
      if (t1 < from || t1 > to) continue;
      if (ok) {
        latencies.push(t1 - t0);
        const id = response.match(/queued as ([0-9a-f-]{36})/)?.[1];
        if (id) o.onId?.(id);
      } else errors++;
    }
  };
  try {
    await Promise.all(transports.map(session));
  } finally {
    for (const t of transports) t.close();
    if (sampler) clearInterval(sampler);
    for (const e of edges) clearTimeout(e);
  }
  latencies.sort((a, b) => a - b);
  const seconds = o.durationMs / 1000;
  return {
    messages: latencies.length,
    errors,
    firstError,
    seconds,
    rate: latencies.length / seconds,
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
    peakRssMb: o.bridgePid ? peakRss : null,
    cpu: perMessage(cpuAtStart, cpuAtEnd, latencies.length),
  };
}

// ---------------------------------------------------------------------------------------
// A private Postfix instance that accepts on loopback and discards.

export interface Postfix {
  port: number;
  version: string;
  masterPid(): number | undefined;
  stop(): void;
}

export function startPostfix(log: Log, certPath: string, keyPath: string, port: number): Postfix | string {
  const has = () => spawnSync("sh", ["-c", "command -v postfix"], { encoding: "utf8" }).status === 0;
  if (!has()) {
    log("postfix is not installed: apt-get install -y postfix ...");
    const r = spawnSync("sh", ["-c", "apt-get update -qq && apt-get install -y -qq postfix"], {
      encoding: "utf8",
      env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
      timeout: 240_000,
    });
    if (r.status !== 0 || !has()) return `postfix could not be installed (${(r.stderr || r.error?.message || "").trim().split("\n").at(-1)})`;
  }
  const dir = mkdtempSync(join(tmpdir(), "tern-bench-postfix-"));
  const etc = join(dir, "etc");
  /** Takes our directory off the default instance's list again. */
  const unlist = () => {
    const listed = spawnSync("postconf", ["-h", "alternate_config_directories"], { encoding: "utf8" }).stdout ?? "";
    const rest = listed.split(/[\s,]+/).filter((d) => d && d !== etc);
    spawnSync("postconf", ["-e", `alternate_config_directories = ${rest.join(", ")}`]);
  };
  chmodSync(dir, 0o755); // postfix's own processes run as the postfix user
  mkdirSync(etc);
  mkdirSync(join(dir, "spool"));
  mkdirSync(join(dir, "data"));
  try {
    execFileSync("chown", ["postfix", join(dir, "data")]);
    writeFileSync(join(etc, "main.cf"), [
      "compatibility_level = 3.6",
      `queue_directory = ${dir}/spool`,
      `data_directory = ${dir}/data`,
      "myhostname = postfix.bench.test",
      "inet_interfaces = loopback-only",
      "inet_protocols = ipv4",
      "mynetworks = 127.0.0.0/8",
      "mydestination =",
      "relay_domains =",
      "smtpd_relay_restrictions = permit_mynetworks, reject",
      "default_transport = discard",
      "local_transport = discard",
      "relay_transport = discard",
      "alias_maps =",
      "alias_database =",
      `message_size_limit = ${40 * MB}`,
      `smtpd_tls_cert_file = ${certPath}`,
      `smtpd_tls_key_file = ${keyPath}`,
      "smtpd_tls_security_level = may",
      // One smtpd process per session: room for every bench session, and no per-client caps.
      "default_process_limit = 400",
      "smtpd_client_connection_count_limit = 0",
      "smtpd_client_connection_rate_limit = 0",
      `maillog_file = ${dir}/maillog`,
      `maillog_file_prefixes = ${dir}`,
      "",
    ].join("\n"));
    // The stock master.cf with smtpd on our loopback port, nothing chrooted.
    const master = readFileSync("/etc/postfix/master.cf", "utf8")
      .split("\n")
      .map((line) => {
        if (/^smtp\s+inet\s/.test(line)) return `127.0.0.1:${port} inet n - n - - smtpd`;
        const f = line.split(/\s+/);
        if (/^[a-z0-9.:-]+$/.test(f[0] ?? "") && ["unix", "inet", "fifo", "unix-dgram", "pass"].includes(f[1] ?? "") && f.length >= 8) {
          f[4] = "n";
          return f.join(" ");
        }
        return line;
      });
    if (!master.some((l) => /^postlog\s/.test(l))) master.push("postlog unix-dgram n - n - 1 postlogd");
    writeFileSync(join(etc, "master.cf"), master.join("\n") + "\n");
    // postfix -c needs the directory listed in the default instance's configuration.
    const listed = execFileSync("postconf", ["-h", "alternate_config_directories"], { encoding: "utf8" }).trim();
    execFileSync("postconf", ["-e", `alternate_config_directories = ${[listed, etc].filter(Boolean).join(", ")}`]);
    execFileSync("postfix", ["-c", etc, "start"], { stdio: "pipe" });
    const version = execFileSync("postconf", ["-c", etc, "-h", "mail_version"], { encoding: "utf8" }).trim();
    return {
      port,
      version,
      masterPid: () => Number(readFileSync(join(dir, "spool", "pid", "master.pid"), "utf8").trim()) || undefined,
      stop() {
        spawnSync("postfix", ["-c", etc, "stop"], { stdio: "ignore" });
        unlist();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    spawnSync("postfix", ["-c", etc, "stop"], { stdio: "ignore" });
    unlist();
    rmSync(dir, { recursive: true, force: true });
    return `postfix did not start: ${(err as Error).message.split("\n")[0]}`;
  }
}

// ---------------------------------------------------------------------------------------

/** Everything the phase starts, so that the bench's cleanup can stop it on any exit; and the
 * CPUs this process may use, given back to it when the phase ends (later phases run unpinned). */
const running = { bridges: new Set<BridgeProcess>(), postfix: null as Postfix | null, cpus: null as string | null };

export async function stopBridgeBench(): Promise<void> {
  for (const b of running.bridges) await b.stop("SIGKILL");
  running.bridges.clear();
  running.postfix?.stop();
  running.postfix = null;
  const cpus = running.cpus;
  running.cpus = null;
  try {
    if (cpus) pinProcesses([process.pid], cpus);
  } catch (err) {
    // The rest of the cleanup (stopping tern) must still run.
    console.error(`the bench process keeps its pinned CPU: ${(err as Error).message}`);
  }
}

/** This process's CPU list (taskset's form, "0-1"), and the list of each CPU in it. */
function ownCpus(): { list: string; each: number[] } | null {
  const r = spawnSync("taskset", ["-c", "-p", String(process.pid)], { encoding: "utf8" });
  const list = r.status === 0 ? r.stdout.trim().split(": ").at(-1) ?? "" : "";
  if (!/^[\d,-]+$/.test(list)) return null;
  const each = list.split(",").flatMap((x) => {
    const [a, b] = x.split("-").map(Number);
    return Array.from({ length: (b ?? a!) - a! + 1 }, (_, i) => a! + i);
  });
  return { list, each };
}

/** Waits until email `id` (the last one accepted) has left the queue; resolves with the seconds that took. */
async function drain(t: TernProcess, id: string | null): Promise<number> {
  const t0 = performance.now();
  if (!id) return 0;
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    const res = await fetch(`${t.url}/emails/${id}`, { headers: { authorization: `Bearer ${t.apiKey}` } });
    const last = ((await res.json()) as { last_event?: string }).last_event;
    if (last !== "queued" && last !== "sending") return (performance.now() - t0) / 1000;
    await sleep(100);
  }
  throw new Error(`the send queue did not drain (email ${id})`);
}

export async function runBridgeBench(t: TernProcess, settings: BridgeSettings, log: Log): Promise<BridgeResults> {
  const started = performance.now();
  const certs = prepareTestCertificates();
  const ca = readFileSync(certs.caCertPath);
  // As in production: info level, a log line per message.
  const bridgeEnv = { TERN_BRIDGE_MAX_CONNECTIONS_PER_IP: "1000" };
  const bridge = await startBridgeProcess({ apiUrl: t.url, env: bridgeEnv });
  running.bridges.add(bridge);
  const pf = startPostfix(log, certs.certPath, certs.keyPath, await freePort());
  const postfix = typeof pf === "string" ? null : pf;
  running.postfix = postfix;
  log(postfix ? `postfix ${postfix.version} accepting on 127.0.0.1:${postfix.port} (discard transport)` : `no postfix comparison: ${pf}`);

  // The placements' CPUs: tern's process tree on the first, the bridge and this process (the
  // load generator) on the second; Postfix, measured shared, keeps all of them.
  const own = ownCpus();
  const apart = !own ? "taskset could not read this process's CPUs" : own.each.length < 2 ? `one CPU only (${own.list})` : { tern: String(own.each[0]), clients: String(own.each[1]) };
  const all = own?.list ?? "n/a";
  running.cpus = own?.list ?? null;
  const place = (p: Placement) => {
    if (!own) return;
    const ternPids = processTree(t.child.pid!);
    const clients = [process.pid, bridge.child.pid!];
    if (p === "apart" && typeof apart !== "string") {
      pinProcesses(ternPids, apart.tern);
      pinProcesses(clients, apart.clients);
    } else pinProcesses([...ternPids, ...clients], own.list);
  };
  const placements = PLACEMENTS.filter((p) => p === "shared" || typeof apart !== "string");
  log(typeof apart === "string" ? `bridge bench: shared placement only: ${apart}` : `bridge bench placements: apart (tern on CPU ${apart.tern}; bridge and load generator on CPU ${apart.clients}) and shared (all on ${all})`);

  const messages = [{ ...(await message("10 KB", 0)), window: settings.small }, { ...(await message("1 MB", 740 * 1024)), window: settings.large }];
  const ternTree = { pid: t.child.pid, port: Number(new URL(t.url).port) };
  const sizes: SizeResult[] = [];
  for (const m of messages) {
    const runs: Record<Placement, Record<Path, SmtpRun[]>> = { apart: { api: [], bridge: [], postfix: [] }, shared: { api: [], bridge: [], postfix: [] } };
    // Not recorded: the Worker's first sends, TLS session setup, V8 warm-up in the bridge.
    let lastId: string | null = null;
    place("shared");
    await runSmtpLoad({ port: bridge.startTlsPort, auth: { user: "tern", pass: t.apiKey }, ca }, m.raw, { sessions: settings.sessions, warmupMs: 0, durationMs: 1_500, onId: (id) => (lastId = id) });
    await drain(t, lastId);
    const viaApi = async (into: SmtpRun[]) => {
      lastId = null;
      let a: CpuUse | null = null;
      let b: CpuUse | null = null;
      const api = await runLoad({
        onWindow: (edge) => (edge === "start" ? (a = sampleUse(ternTree, undefined)) : (b = sampleUse(ternTree, undefined))),
        url: `${t.url}/emails`, method: "POST", body: m.json, connections: settings.sessions, ...m.window, timeoutMs: 60_000,
        headers: { authorization: `Bearer ${t.apiKey}`, "content-type": "application/json" },
        onBody: (b) => (lastId = (JSON.parse(b) as { id: string }).id),
      });
      into.push({ messages: api.requests - api.errors, errors: api.errors, firstError: api.errors ? JSON.stringify(api.statuses) : null, seconds: api.seconds, rate: (api.requests - api.errors) / api.seconds, p50: api.p50, p99: api.p99, peakRssMb: null, cpu: perMessage(a, b, api.requests - api.errors) });
      into.at(-1)!.drainSeconds = await drain(t, lastId);
    };
    const viaBridge = async (into: SmtpRun[]) => {
      lastId = null;
      into.push(await runSmtpLoad({ port: bridge.startTlsPort, auth: { user: "tern", pass: t.apiKey }, ca }, m.raw, {
        sessions: settings.sessions, ...m.window, bridgePid: bridge.child.pid, onId: (id) => (lastId = id),
        sample: () => sampleUse(ternTree, bridge.child.pid),
      }));
      into.at(-1)!.drainSeconds = await drain(t, lastId);
    };
    const fmt = (r: SmtpRun | undefined) => (r ? `${r.rate.toFixed(0)}/s p50 ${r.p50.toFixed(0)} ms${r.errors ? ` (${r.errors} errors: ${r.firstError})` : ""}` : "-");
    for (let round = 1; round <= settings.rounds; round++) {
      // ABBA across rounds, for the placements and for the paths in each, so that a slow drift
      // of the machine favours none of them.
      for (const p of round % 2 ? placements : [...placements].reverse()) {
        const r = runs[p];
        place(p);
        if (round % 2) {
          await viaApi(r.api);
          await viaBridge(r.bridge);
        } else {
          await viaBridge(r.bridge);
          await viaApi(r.api);
        }
        if (postfix && p === "shared") r.postfix.push(await runSmtpLoad({ port: postfix.port, ca }, m.raw, { sessions: settings.sessions, ...m.window, sample: () => sampleUse({ pid: postfix.masterPid(), port: 0 }, undefined) }));
        const b = r.bridge.at(-1)!;
        log(`bridge bench ${m.label} round ${round}/${settings.rounds}, ${p}, ${settings.sessions} sessions: API ${fmt(r.api.at(-1))}; bridge ${fmt(b)}, peak RSS ${b.peakRssMb?.toFixed(0)} MB${p === "shared" ? `; postfix ${fmt(r.postfix.at(-1))}` : ""}`);
      }
    }
    place("shared");
    sizes.push({ label: m.label, mimeBytes: m.raw.length, jsonBytes: Buffer.byteLength(m.json), runs });
  }
  postfix?.stop();
  running.postfix = null;
  await bridge.stop("SIGTERM");
  running.bridges.delete(bridge);

  let big: BigMessageResult | null = null;
  if (settings.bigMessage) {
    // A fresh process, so its peak is this message's and not the load runs'.
    const fresh = await startBridgeProcess({ apiUrl: t.url, env: bridgeEnv });
    running.bridges.add(fresh);
    const pid = fresh.child.pid!;
    const t0 = nodemailer.createTransport({ host: "127.0.0.1", port: fresh.startTlsPort, secure: false, requireTLS: true, auth: { user: "tern", pass: t.apiKey }, tls: { ca, servername: "localhost" } });
    await t0.sendMail({ envelope: { from: FROM, to: [TO] }, raw: messages[0]!.raw }); // warm: code loaded, first session done
    await sleep(1000);
    const idle = procStatus(pid, "VmRSS");
    const m = await message("40 MB", 29 * MB);
    const jsonBytes = Buffer.byteLength(m.json);
    m.json = "";
    const s0 = performance.now();
    const reply = (await t0.sendMail({ envelope: { from: FROM, to: [TO] }, raw: m.raw }).catch((e: Error) => ({ response: `failed: ${e.message}` }))).response;
    const seconds = (performance.now() - s0) / 1000;
    const peak = procStatus(pid, "VmHWM");
    t0.close();
    big = { mimeBytes: m.raw.length, jsonBytes, reply: reply.slice(0, 80), seconds, idleRssMb: idle, peakRssMb: peak, ratio: ((peak - idle) * MB) / m.raw.length };
    log(`40 MB message (${(m.raw.length / MB).toFixed(1)} MB of MIME): ${big.reply}; bridge RSS ${idle.toFixed(0)} MB idle, ${peak.toFixed(0)} MB peak: +${(peak - idle).toFixed(0)} MB = ${big.ratio.toFixed(2)}x the message`);
    await fresh.stop("SIGTERM");
    running.bridges.delete(fresh);
    const id = reply.match(/queued as ([0-9a-f-]{36})/)?.[1] ?? null;
    await drain(t, id);
  }
  return { settings, cpus: { all, apart }, sizes, postfix: postfix ? postfix.version : typeof pf === "string" ? pf : null, big, seconds: (performance.now() - started) / 1000 };
}

// ---------------------------------------------------------------------------------------

export const BRIDGE_BEGIN = "<!-- bench:bridge:begin (written by `npm run bench`; edit outside these markers) -->";
export const BRIDGE_END = "<!-- bench:bridge:end -->";
/** The bridge may cost at most this much over posting straight to the API (throughput ratio at least 1/1.25). */
export const BRIDGE_OVERHEAD_TARGET = 0.25;
export const BRIDGE_RSS_TARGET_MB = 200;
/** The placement the throughput target is judged in (see Placement). */
export const JUDGED_PLACEMENT: Placement = "shared";

const f0 = (n: number | null | undefined) => (n !== null && n !== undefined && Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "n/a");
const f2 = (n: number | null | undefined) => (n !== null && n !== undefined && Number.isFinite(n) ? n.toFixed(2) : "n/a");

export interface BridgeSummary {
  label: string;
  placement: Placement;
  /** Bridge / API, messages accepted in the window. */
  accepted: { median: number; rounds: number[] };
  /** Bridge / API, sustained rates (the window and the queue's catch-up after it): what the
   * target is judged on. Counted over the window alone, a path that leaves more of tern's
   * queue work (the consumer's, on the same Worker thread as the accepting) until after the
   * window has that work out of its window, and looks faster by it: up to 0.9 s of work after
   * a 6 s window at 10 KB, and either path may leave more. The catch-up charges each path for
   * its own. */
  sustained: { median: number; rounds: number[] };
  /** CPU per message of the bridge path (tern's processes and the bridge) over the API path's
   * (tern's processes), the median of the rounds' ratios: what the bridge adds in work,
   * whatever the placement (the load generators left out on both sides). */
  cpuOverApi: number;
  /** Shared placement only (Postfix is measured there). */
  bridgeOverPostfix: number | null;
  peakRssMb: number;
}

/** The ratios are each round's (its two runs were measured side by side, so a slow drift of the
 * shared machine between rounds cancels out), and their median is reported. */
export function bridgeSummary(r: BridgeResults): BridgeSummary[] {
  const ratios = (a: SmtpRun[], b: SmtpRun[], f: (x: SmtpRun) => number) => a.map((x, i) => f(x) / (b[i] ? f(b[i]!) : NaN));
  const of = (rounds: number[]) => ({ median: median(rounds), rounds });
  return r.sizes.flatMap((s) =>
    PLACEMENTS.filter((p) => s.runs[p].bridge.length).map((p) => {
      const runs = s.runs[p];
      return {
        label: s.label,
        placement: p,
        accepted: of(ratios(runs.bridge, runs.api, (x) => x.rate)),
        sustained: of(ratios(runs.bridge, runs.api, sustainedRate)),
        cpuOverApi: median(ratios(runs.bridge, runs.api, (x) => (x.cpu ? x.cpu.tern + x.cpu.bridge : NaN))),
        bridgeOverPostfix: runs.postfix.length ? median(ratios(runs.bridge, runs.postfix, (x) => x.rate)) : null,
        peakRssMb: Math.max(...runs.bridge.map((x) => x.peakRssMb ?? NaN)),
      };
    }),
  );
}

export function renderBridge(r: BridgeResults, facts: { date: string; commit: string; node: string; nproc: string; load: string }): string {
  const L: string[] = [];
  const s = r.settings;
  L.push(`### Last run: ${facts.date}`);
  L.push("");
  L.push(
    `Command: \`BENCH_ONLY=bridge npm run bench\` or part 5 of \`npm run bench\` (Node ${facts.node}, commit \`${facts.commit}\`, nproc ${facts.nproc}, load ${facts.load}), ${f0(r.seconds)} s. ` +
      `${s.sessions} concurrent sessions (or connections) per run, ${s.small.warmupMs / 1000} s warm-up then ${s.small.durationMs / 1000} s measured for the 10 KB message, ${s.large.warmupMs / 1000} s then ${s.large.durationMs / 1000} s for the 1 MB message (a run counts the messages that end in its window: the warm-up covers more than one message's latency), ${s.rounds} interleaved rounds (API and bridge in each placement, Postfix in the shared one); medians, and each ratio the median of the rounds' ratios. ` +
      `Every message goes to \`delivered@simulator.tern.test\`, so tern accepts and records it and its consumer does the simulator's work; the queue is drained between runs.`,
  );
  L.push("");
  const apart = r.cpus.apart;
  L.push(
    `Placements (taskset): **shared**, everything on CPUs ${r.cpus.all}: the bridge and the SMTP load generator (which costs more per message than the HTTP one) take CPU from the Worker they feed, as on a small machine that runs both; the target is judged here. ` +
      `**apart**, ${typeof apart === "string" ? `not measured: ${apart}` : `tern's processes on CPU ${apart.tern}, the bridge and the load generator on CPU ${apart.clients}`}: tern's CPU bounds both paths (and the API path's own rate falls, tern's three processes sharing one CPU), so this ratio shows whether the bridge slows tern down when it does not take tern's CPU, not what the bridge costs. ` +
      `The bridge's cost is the CPU ratio: CPU per message of the bridge path (tern's processes and the bridge) over the API path's (tern's processes), load generators left out.`,
  );
  L.push("");
  L.push(`Postfix: ${r.postfix ? (/^\d/.test(r.postfix) ? `${r.postfix}, private instance on loopback, STARTTLS, no AUTH, \`discard\` transport` : r.postfix) : "n/a"}.`);
  L.push("");
  L.push("CPU ms per message over the measured window: the server (tern's whole process tree: both workerd processes, wrangler, the dev relay; for the Postfix rows, Postfix's processes), the bridge process, and the load generator (this bench: the HTTP client, or the nodemailer pools with their TLS). Queue behind: how long after the window tern's send queue took to catch up (work of messages counted in the window but done after it, so not in its CPU figure). Sustained: the window's messages over the window and that catch-up; the ratios the target is judged on are the sustained ones (bench/bridge.ts, BridgeSummary, says why).");
  L.push("");
  L.push("| message | placement | path | messages/s | sustained/s | p50 ms | p99 ms | errors | bridge peak RSS MB | CPU ms: server | bridge | generator | queue behind s |");
  L.push("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  const label: Record<Path, string> = { api: "`POST /emails` straight to the API (JSON)", bridge: "SMTP -> bridge -> `POST /emails`", postfix: "SMTP -> Postfix (queued, discarded)" };
  for (const z of r.sizes) {
    for (const pl of PLACEMENTS) {
      for (const p of PATHS) {
        const runs = z.runs[pl][p];
        if (!runs.length) continue;
        const med = (f: (x: SmtpRun) => number | null) => median(runs.map((x) => f(x) ?? NaN));
        L.push(
          `| ${z.label} (${f0(z.mimeBytes / 1024)} KB MIME, ${f0(z.jsonBytes / 1024)} KB JSON) | ${pl} | ${label[p]} | ${f0(med((x) => x.rate))} | ${p === "postfix" ? "-" : f0(med(sustainedRate))} | ${f0(med((x) => x.p50))} | ${f0(med((x) => x.p99))} | ` +
            `${runs.reduce((a, x) => a + x.errors, 0)} | ${p === "bridge" ? f0(Math.max(...runs.map((x) => x.peakRssMb ?? NaN))) : "-"} | ` +
            `${f2(med((x) => x.cpu?.tern ?? null))} | ${p === "bridge" ? f2(med((x) => x.cpu?.bridge ?? null)) : "-"} | ${f2(med((x) => x.cpu?.generator ?? null))} | ` +
            `${p === "postfix" ? "-" : f2(med((x) => x.drainSeconds ?? null))} |`,
        );
      }
    }
  }
  L.push("");
  for (const x of bridgeSummary(r)) {
    const overhead = 1 / x.sustained.median - 1;
    const judged = x.placement === JUDGED_PLACEMENT;
    L.push(
      `- ${x.label}, ${x.placement}: bridge / API throughput sustained **${f2(x.sustained.median)}** (rounds: ${x.sustained.rounds.map(f2).join(", ")}; ${overhead >= 0 ? `the bridge adds ${f0(overhead * 100)}% per message` : `the bridge path ran ${f0(-overhead * 100 / (1 + overhead))}% faster`}` +
        `${judged ? `; target at most ${BRIDGE_OVERHEAD_TARGET * 100}%: ${overhead <= BRIDGE_OVERHEAD_TARGET ? "met" : "missed"}` : ""}); accepted in the window alone **${f2(x.accepted.median)}** (rounds: ${x.accepted.rounds.map(f2).join(", ")}); ` +
        `CPU per message, bridge path / API path **${f2(x.cpuOverApi)}**; ${x.bridgeOverPostfix !== null ? `bridge / Postfix **${f2(x.bridgeOverPostfix)}**; ` : ""}peak RSS ${f0(x.peakRssMb)} MB at ${s.sessions} sessions (target under ${BRIDGE_RSS_TARGET_MB} MB: ${x.peakRssMb < BRIDGE_RSS_TARGET_MB ? "met" : "missed"}).`,
    );
  }
  if (r.big) {
    const b = r.big;
    L.push(
      `- One ${f2(b.mimeBytes / MB)} MB message (a 29 MB attachment; ${f2(b.jsonBytes / MB)} MB as JSON) to a fresh bridge process: \`${b.reply}\` after ${f2(b.seconds)} s; ` +
        `RSS ${f0(b.idleRssMb)} MB idle, ${f0(b.peakRssMb)} MB peak (VmHWM): **+${f0(b.peakRssMb - b.idleRssMb)} MB = ${f2(b.ratio)}x the message** (bound: 2x: ${b.ratio <= 2 ? "met" : "missed"}).`,
    );
  }
  return L.join("\n");
}
