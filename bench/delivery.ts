// End-to-end delivery: K emails through tern's API until the dev relay holds all of them,
// beside the same K messages handed straight to the relay by a pooled nodemailer transport.
// Both are timed from the first request to the moment the K-th .eml is on the relay's disk.
import { readdir } from "node:fs/promises";
import { Agent } from "node:http";
import nodemailer from "nodemailer";
import { htmlToText } from "../worker/mime/html-to-text.ts";
import { once } from "./load.ts";

export interface DeliveryResult {
  messages: number;
  /** First request to the moment the relay holds all of them. */
  seconds: number;
  /** Messages delivered per second. */
  rate: number;
  /** tern only: first request to the last 200 from POST /emails. */
  acceptSeconds: number | null;
  /** Mean size of the delivered .eml files. */
  meanBytes: number;
  /** tern only: the queue consumer's batches during the phase, from wrangler dev's log lines. */
  consumer: ConsumerLog | null;
}

export interface ConsumerLog {
  batches: number;
  messages: number;
  /** Sum of the batches' durations. */
  busySeconds: number;
  medianBatchMs: number;
}

/** Reads wrangler dev's `QUEUE tern-us-east-1-send 10/10 (171ms)` lines. */
export function consumerLog(output: string): ConsumerLog {
  const plain = output.replace(/\x1b\[[0-9;]*m/g, "");
  const ms: number[] = [];
  let messages = 0;
  for (const m of plain.matchAll(/QUEUE tern-[a-z0-9-]*send (\d+)\/(\d+) \((\d+)ms\)/g)) {
    messages += Number(m[2]);
    ms.push(Number(m[3]));
  }
  ms.sort((a, b) => a - b);
  return {
    batches: ms.length,
    messages,
    busySeconds: ms.reduce((a, x) => a + x, 0) / 1000,
    medianBatchMs: ms.length ? ms[ms.length >> 1]! : NaN,
  };
}

/** About `bytes` of plain newsletter-like html. */
export function htmlOfSize(bytes: number): string {
  const para =
    '<p style="margin:0 0 12px">Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor ' +
    'incididunt ut labore et dolore magna aliqua. <a href="https://example.com/read">Read more</a></p>\n';
  const head = "<!doctype html><html><body>\n";
  const tail = "</body></html>\n";
  return head + para.repeat(Math.max(1, Math.round((bytes - head.length - tail.length) / para.length))) + tail;
}

export const recipient = (i: number) => `bench-${i}@example.com`;

async function mailboxCount(dir: string): Promise<number> {
  const names = await readdir(dir).catch(() => [] as string[]);
  let n = 0;
  for (const name of names) if (name.endsWith(".eml") && !name.startsWith(".")) n++;
  return n;
}

/** Polls the relay's mail directory every 10 ms (the relay lists a message once its .eml exists). */
async function waitForMailbox(dir: string, count: number, deadline: number, what: string): Promise<number> {
  for (;;) {
    const n = await mailboxCount(dir);
    if (n >= count) return performance.now();
    if (performance.now() > deadline) throw new Error(`${what}: the relay holds ${n} of ${count} messages at the deadline`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Empties the relay's mailbox through its API and checks that it is empty. */
export async function clearRelay(relayHttp: string, mailDir: string): Promise<void> {
  const res = await fetch(`${relayHttp}/api/messages`, { method: "DELETE" });
  if (!res.ok) throw new Error(`DELETE ${relayHttp}/api/messages answered ${res.status}`);
  await res.text();
  const left = await mailboxCount(mailDir);
  if (left !== 0) throw new Error(`the relay still holds ${left} messages after DELETE /api/messages`);
}

/** Through the relay's API: each recipient exactly once; returns the mean message size. */
async function checkRelay(relayHttp: string, count: number): Promise<number> {
  const res = await fetch(`${relayHttp}/api/messages`);
  const list = (await res.json()) as { data: { size: number; envelope: { to: string[] } }[] };
  const seen = new Map<string, number>();
  let bytes = 0;
  for (const m of list.data) {
    bytes += m.size;
    for (const to of m.envelope.to) seen.set(to, (seen.get(to) ?? 0) + 1);
  }
  for (let i = 0; i < count; i++) {
    const n = seen.get(recipient(i)) ?? 0;
    if (n !== 1) throw new Error(`the relay holds ${n} messages for ${recipient(i)}, expected 1`);
  }
  if (list.data.length !== count) throw new Error(`the relay holds ${list.data.length} messages, expected ${count}`);
  return bytes / list.data.length;
}

/** Runs `work(i)` for i in 0..count-1 with `concurrency` in flight. */
async function pool(count: number, concurrency: number, work: (i: number, worker: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      while (next < count) await work(next++, w);
    }),
  );
}

export interface Target {
  url: string;
  apiKey: string;
  relayHttp: string;
  relaySmtpPort: number;
  mailDir: string;
}

export async function throughTern(
  t: Target,
  o: { count: number; concurrency: number; html: string; timeoutMs: number },
  output: () => string,
): Promise<DeliveryResult> {
  const logFrom = output().length;
  const url = new URL("/emails", t.url);
  const headers = { authorization: `Bearer ${t.apiKey}`, "content-type": "application/json" };
  const agents = Array.from({ length: o.concurrency }, () => new Agent({ keepAlive: true, maxSockets: 1 }));
  const start = performance.now();
  const deadline = start + o.timeoutMs;
  let accepted = 0;
  try {
    await pool(o.count, o.concurrency, async (i, w) => {
      const body = JSON.stringify({ from: "Bench <bench@tern.test>", to: recipient(i), subject: `bench ${i}`, html: o.html });
      const res = await once(agents[w]!, url, { method: "POST", headers, body, timeoutMs: 30_000 });
      if (res.status !== 200) throw new Error(`POST /emails answered ${res.status}: ${res.body.slice(0, 300)}`);
      accepted++;
    });
  } finally {
    for (const a of agents) a.destroy();
  }
  const acceptedAt = performance.now();
  const doneAt = await waitForMailbox(t.mailDir, o.count, deadline, `tern (${accepted} accepted)`);
  const seconds = (doneAt - start) / 1000;
  const meanBytes = await checkRelay(t.relayHttp, o.count);
  const consumer = consumerLog(output().slice(logFrom));
  return { messages: o.count, seconds, rate: o.count / seconds, acceptSeconds: (acceptedAt - start) / 1000, meanBytes, consumer };
}

export async function directToRelay(t: Target, o: { count: number; concurrency: number; html: string; timeoutMs: number }): Promise<DeliveryResult> {
  // The same message tern would build: html plus the text part tern derives from it.
  const text = htmlToText(o.html);
  const transport = nodemailer.createTransport({
    host: "127.0.0.1",
    port: t.relaySmtpPort,
    secure: false,
    ignoreTLS: true,
    pool: true,
    maxConnections: 5,
    connectionTimeout: 10_000,
    socketTimeout: 30_000,
  });
  try {
    const start = performance.now();
    const deadline = start + o.timeoutMs;
    await pool(o.count, o.concurrency, async (i) => {
      await transport.sendMail({ from: "Bench <bench@tern.test>", to: recipient(i), subject: `bench ${i}`, html: o.html, text });
    });
    const doneAt = await waitForMailbox(t.mailDir, o.count, deadline, "nodemailer");
    const seconds = (doneAt - start) / 1000;
    const meanBytes = await checkRelay(t.relayHttp, o.count);
    return { messages: o.count, seconds, rate: o.count / seconds, acceptSeconds: null, meanBytes, consumer: null };
  } finally {
    transport.close();
  }
}
