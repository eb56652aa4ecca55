// A focused measure of the send queue's consumer (`node bench/consumer.ts`, not part of
// `npm run bench`): what recording each message's outcome as soon as its reply arrives costs.
// K single-recipient emails through tern's API into the dev relay, beside the same K messages
// handed straight to the relay by nodemailer, in interleaved rounds (the order rotates, so a
// drift in the machine's load favours no one). With BASELINE_ROOT set to a checkout of another
// commit (`git archive <commit> | tar -x -C dir`, node_modules linked), that commit's tern runs
// beside this one in the same rounds and the two are compared as ratios to nodemailer. The
// consumer's own rate is its messages over the summed durations of its queue batches (wrangler
// dev's `QUEUE tern-<region>-send` lines). Each phase's CPU is read per process (bench/cpu.ts),
// nodemailer's too: on this 2-core machine the sum, not only the Worker's share, bounds the rate.
// With FLOOR=1 the delivery floor (bench/floor/delivery.ts: the least a Worker does to accept an
// email durably and relay it, DKIM-signed, under the same local runtime) runs in the same rounds
// into the same relay; its CPU counts its own processes plus the relay's (in tern's tree).
import { join, resolve } from "node:path";
import type { ChildProcess } from "node:child_process";
import { startTern as startThis, type TernProcess } from "../test/support/processes.ts";
import { cpuDelta, PARTS, sampleCpu, type CpuSample, type Part } from "./cpu.ts";
import { floorDeliveryCpu, startFloor, stopFloor } from "./floor.ts";
import { clearRelay, consumerLog, directToRelay, htmlOfSize, throughTern, type DeliveryResult, type Target } from "./delivery.ts";

const ROUNDS = Number(process.env.ROUNDS ?? 3);
const COUNT = Number(process.env.COUNT ?? 300);
const BASELINE = process.env.BASELINE_ROOT;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

type PartsPerEmail = Record<Part, number>;
/** CPU milliseconds per email of each process, from a delta of bench/cpu.ts's samples. */
function perEmail(cpu: NonNullable<CpuSample>, count: number): PartsPerEmail {
  return Object.fromEntries(PARTS.map((p) => [p, (cpu[p] * 1000) / count])) as PartsPerEmail;
}
/** The median of each part over rounds, to two decimals. */
function medianParts(rounds: PartsPerEmail[]): Record<Part, number> | null {
  return rounds.length ? (Object.fromEntries(PARTS.map((p) => [p, Number(median(rounds.map((r) => r[p])).toFixed(2))])) as Record<Part, number>) : null;
}
// Where the CPU goes with nodemailer: the generator is nodemailer itself, start+relay the relay.
const directParts: PartsPerEmail[] = [];
const env = { TERN_DEV_PLAN: "pro_50k", TERN_DEV_RATE_LIMIT: "100000" };

interface Subject {
  name: string;
  /** CPU so far of the processes this subject's phase runs on. */
  sample(): CpuSample;
  stop(): Promise<void>;
  target: Target;
  /** The consumer's batch lines (the process keeps only the tail of its output). */
  queueLines: () => string;
  /** The webhook consumer's batch lines: each is a fan-out's D1 reads and write. */
  webhookLines: () => string;
  webhookBatches: number[];
  /** CPU milliseconds per email: the Worker's workerd (API, local D1 and Queues, consumers), and
   * all of tern's processes. */
  cpu: Array<{ worker: number; total: number }>;
  /** The same by process (bench/cpu.ts's parts), per round. */
  parts: PartsPerEmail[];
  runs: DeliveryResult[];
  ratios: number[];
}

function subject(name: string, t: TernProcess): Subject {
  const port = Number(new URL(t.url).port);
  const target = { url: t.url, apiKey: t.apiKey, relayHttp: t.relayHttp, relaySmtpPort: t.relaySmtpPort, mailDir: join(t.stateDir, "tern", "mailbox") };
  return listen(name, t.child, target, () => sampleCpu(t.child.pid, port), async () => void (await t.stop()));
}

function listen(name: string, child: ChildProcess, target: Target, sample: () => CpuSample, stop: () => Promise<void>): Subject {
  let lines = "";
  let webhookLines = "";
  child.stdout!.on("data", (chunk: Buffer) => {
    for (const line of chunk.toString().split("\n")) {
      if (/QUEUE tern-[a-z0-9-]*send /.test(line)) lines += line + "\n";
      if (/QUEUE tern-webhooks /.test(line)) webhookLines += line + "\n";
      if (process.env.TIMING && /TIMING/.test(line)) console.error(name, line.trim());
    }
  });
  return { name, sample, stop, target, queueLines: () => lines, webhookLines: () => webhookLines, runs: [], webhookBatches: [], cpu: [], parts: [], ratios: [] };
}

const ternProcess = await startThis({ env });
const subjects: Subject[] = [subject("this", ternProcess)];
if (BASELINE) {
  const { startTern: startBaseline } = (await import(resolve(BASELINE, "test/support/processes.ts"))) as { startTern: typeof startThis };
  subjects.push(subject("baseline", await startBaseline({ env })));
}
const tern = subjects[0]!;
if (process.env.FLOOR === "1") {
  const floor = await startFloor((line) => console.error(line), { RELAY_PORT: String(tern.target.relaySmtpPort) });
  const ternAt = { pid: ternProcess.child.pid, port: Number(new URL(ternProcess.url).port) };
  subjects.push(listen("floor", floor.child, { ...tern.target, url: floor.url, apiKey: "" }, () => floorDeliveryCpu(floor, ternAt), () => stopFloor()));
}
try {
  const o = { count: COUNT, concurrency: 16, html: htmlOfSize(5 * 1024), timeoutMs: 180_000 };
  for (let round = 1; round <= ROUNDS; round++) {
    const phases: Array<() => Promise<string>> = subjects.map((s) => async () => {
      await clearRelay(s.target.relayHttp, s.target.mailDir);
      const from = s.queueLines().length;
      const hooksFrom = s.webhookLines().length;
      const cpuBefore = s.sample();
      const r = await throughTern(s.target, o, () => "");
      const cpu = cpuDelta(cpuBefore, s.sample());
      if (cpu) {
        s.cpu.push({ worker: (cpu["worker runtime"] * 1000) / o.count, total: ((cpu["worker runtime"] + cpu["dev proxy"] + cpu.wrangler + cpu["start+relay"]) * 1000) / o.count });
        s.parts.push(perEmail(cpu, o.count));
      }
      s.runs.push({ ...r, consumer: consumerLog(s.queueLines().slice(from)) });
      s.webhookBatches.push(s.webhookLines().slice(hooksFrom).split("\n").filter(Boolean).length);
      return `${s.name} ${r.rate.toFixed(0)}/s (accepted in ${r.acceptSeconds!.toFixed(2)} s)`;
    });
    let direct: DeliveryResult | undefined;
    phases.push(async () => {
      const s = subjects[0]!;
      await clearRelay(s.target.relayHttp, s.target.mailDir);
      const cpuBefore = s.sample();
      direct = await directToRelay(s.target, o);
      const cpu = cpuDelta(cpuBefore, s.sample());
      if (cpu) directParts.push(perEmail(cpu, o.count));
      return `nodemailer ${direct.rate.toFixed(0)}/s`;
    });
    const order = phases.map((_, i) => phases[(i + round) % phases.length]!);
    const said: string[] = [];
    for (const phase of order) said.push(await phase());
    for (const s of subjects) s.ratios.push(s.runs.at(-1)!.rate / direct!.rate);
    console.log(`round ${round}: ${said.join(", ")}; ratios ${subjects.map((s) => `${s.name} ${s.ratios.at(-1)!.toFixed(2)}`).join(", ")}`);
  }
  const summary = subjects.map((s) => ({
    name: s.name,
    perSecond: median(s.runs.map((a) => a.rate)),
    consumerPerBusySecond: median(s.runs.map((a) => a.consumer!.messages / a.consumer!.busySeconds)),
    consumerMedianBatchMs: median(s.runs.map((a) => a.consumer!.medianBatchMs)),
    consumerBatches: median(s.runs.map((a) => a.consumer!.batches)),
    webhookBatches: median(s.webhookBatches),
    workerCpuMsPerEmail: s.cpu.length ? Number(median(s.cpu.map((c) => c.worker)).toFixed(2)) : null,
    ternCpuMsPerEmail: s.cpu.length ? Number(median(s.cpu.map((c) => c.total)).toFixed(2)) : null,
    cpuMsPerEmailByProcess: medianParts(s.parts),
    ratioToNodemailer: median(s.ratios),
    ratios: s.ratios.map((r) => Number(r.toFixed(3))),
  }));
  /** This tern's ratio over another subject's, round by round. */
  const against = (name: string) => {
    const other = subjects.find((s) => s.name === name);
    return other ? subjects[0]!.ratios.map((r, i) => r / other.ratios[i]!) : [];
  };
  const thisVsBaseline = against("baseline");
  const thisVsFloor = against("floor");
  console.log(JSON.stringify({
    rounds: ROUNDS, count: COUNT, summary, nodemailerCpuMsPerEmailByProcess: medianParts(directParts),
    thisVsBaseline: thisVsBaseline.map((r) => Number(r.toFixed(3))), thisVsBaselineMedian: thisVsBaseline.length ? median(thisVsBaseline) : null,
    thisVsFloor: thisVsFloor.map((r) => Number(r.toFixed(3))), thisVsFloorMedian: thisVsFloor.length ? median(thisVsFloor) : null,
  }));
} finally {
  for (const s of subjects.toReversed()) await s.stop();
}
