// The one window SMTP leaves open: the relay has said 250 and tern has not yet recorded it. tern
// runs as real processes (npm start, wrangler dev, workerd) delivering to an SMTP peer in this
// test process, which outlives them. When the message for one recipient of a three-recipient
// email arrives, the peer freezes tern's Worker (SIGSTOP to wrangler dev's process group), sends
// its 250, and tern is killed (SIGKILL): the reply is never read, so it is never recorded. tern
// starts again on the same state with a 4-second lease. Then: that message is sent again exactly
// once (same Message-ID), an `outcome_unknown` event on its email says so, the recipients whose
// replies were recorded get nothing twice, and no email is lost.
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { SMTPServer } from "smtp-server";
import { afterAll, expect, it } from "vitest";
import { startTern, type TernProcess } from "../support/processes.ts";

let tern: TernProcess | undefined;
let peer: SMTPServer | undefined;
afterAll(async () => {
  await tern?.stop();
  await new Promise<void>((r) => (peer ? peer.close(() => r()) : r()));
});

interface Arrival {
  to: string;
  envelopeFrom: string;
  messageId: string;
}

/** The processes of a process group and whether each is stopped ('T'), from /proc. */
function groupStates(pgid: number): string[] {
  const states: string[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[2]) === pgid) states.push(fields[0]!);
    } catch {} // gone meanwhile
  }
  return states;
}

async function freeze(pgid: number): Promise<void> {
  process.kill(-pgid, "SIGSTOP");
  for (let i = 0; i < 200; i++) {
    const states = groupStates(pgid);
    if (states.length > 0 && states.every((s) => s === "T")) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error("wrangler dev's processes did not stop");
}

const recovery = {
  TERN_STUCK_AFTER_SECONDS: "3",
  TERN_CRON_INTERVAL_MS: "1000",
  TERN_DEV_PLAN: "pro_50k",
  TERN_DEV_RATE_LIMIT: "1000",
  TERN_LEASE_SECONDS: "4",
};

it("a kill right after the relay's 250 resends that one message once, visibly, and loses nothing", async () => {
  const arrivals: Arrival[] = [];
  let target = "";
  let crashed!: () => void;
  const crash = new Promise<void>((r) => (crashed = r));
  peer = new SMTPServer({
    logger: false,
    disableReverseLookup: true,
    authOptional: true,
    disabledCommands: ["STARTTLS"],
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", async () => {
        const raw = Buffer.concat(chunks).toString("utf8");
        const to = session.envelope.rcptTo.map((r) => r.address.toLowerCase());
        for (const rcpt of to) {
          arrivals.push({ to: rcpt, envelopeFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : "", messageId: /^Message-ID:\s*(.+?)\r?$/im.exec(raw)?.[1] ?? "" });
        }
        if (target && to.includes(target) && tern) {
          target = "";
          // Frozen before the reply goes out, killed after: the 250 reaches a Worker that never
          // reads it. The message is the relay's now; tern has no record of its outcome.
          const wrangler = Number(readFileSync(join(tern.stateDir, "tern", "wrangler.pid"), "utf8"));
          await freeze(wrangler);
          callback(null, "2.0.0 Queued");
          await new Promise((r) => setTimeout(r, 50));
          await tern.kill();
          crashed();
          return;
        }
        callback(null, "2.0.0 Queued");
      });
    },
  });
  peer.on("error", () => {}); // the killed Worker's connections end abruptly
  const port = await new Promise<number>((resolve) => peer!.server.listen(0, "127.0.0.1", () => resolve((peer!.server.address() as { port: number }).port)));
  const env = { ...recovery, TERN_RELAY_URL: `smtp+plain://127.0.0.1:${port}` };

  tern = await startTern({ env });
  const { stateDir } = tern;
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${tern!.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${tern!.apiKey}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, json: (await res.json()) as any };
  };
  const tag = crypto.randomUUID().slice(0, 8);
  const [a, b, c] = ["a", "b", "c"].map((x) => `${x}-${tag}@example.com`) as [string, string, string];
  const singles = Array.from({ length: 8 }, (_, i) => `single-${i}-${tag}@example.com`);
  const everyone = [a, b, c, ...singles];
  target = b;
  const multi = await api("POST", "/emails", { from: `Crash <crash@${tern.domain}>`, to: [a, b, c], subject: "three readers", text: "hello" });
  expect(multi.status).toBe(200);
  const ids: Record<string, string> = { [a]: multi.json.id, [b]: multi.json.id, [c]: multi.json.id };
  const batch = await api("POST", "/emails/batch", singles.map((to) => ({ from: `Crash <crash@${tern!.domain}>`, to, subject: "one reader", text: "hello" })));
  expect(batch.status).toBe(200);
  for (const [i, s] of singles.entries()) ids[s] = batch.json.data[i].id;

  await crash;
  const count = (r: string) => arrivals.filter((x) => x.to === r).length;
  // The crash came after a's reply was recorded and before c's message left.
  expect(count(a)).toBe(1);
  expect(count(b)).toBe(1);
  expect(count(c)).toBe(0);

  tern = await startTern({ stateDir, env });
  const deadline = Date.now() + 90_000;
  for (;;) {
    for (const r of everyone) expect(count(r), `${r} arrived ${count(r)} times`).toBeLessThanOrEqual(2);
    const states = await Promise.all([...new Set(Object.values(ids))].map(async (id) => (await api("GET", `/emails/${id}`)).json.last_event));
    if (states.every((s) => s === "delivered") && everyone.every((r) => count(r) >= 1)) break;
    if (Date.now() > deadline) throw new Error(`not all delivered after the restart: ${states} ${everyone.map(count)}`);
    await new Promise((r) => setTimeout(r, 500));
  }
  // Longer than a lease and a few cron runs: nothing more arrives.
  const settled = everyone.map(count);
  await new Promise((r) => setTimeout(r, 6_000));
  expect(everyone.map(count)).toEqual(settled);

  // The message in the window was sent again, once, as the same message.
  expect(count(b)).toBe(2);
  const copies = arrivals.filter((x) => x.to === b);
  expect(copies[1]!.messageId).toBe(copies[0]!.messageId);
  expect(copies[1]!.envelopeFrom).toBe(copies[0]!.envelopeFrom);
  expect([count(a), count(c)]).toEqual([1, 1]);
  const events = (await api("GET", `/emails/${multi.json.id}/events`)).json.data as { type: string; data: { recipients?: string[] } }[];
  const unknown = events.filter((e) => e.type === "outcome_unknown");
  expect(unknown).toHaveLength(1);
  expect(unknown[0]!.data.recipients).toEqual([b]);
  const sent = events.filter((e) => e.type === "sent");
  expect(sent).toHaveLength(1);
  expect([...sent[0]!.data.recipients!].sort()).toEqual([a, b, c].sort());
  // Any other message caught in its window at the kill is resent at most once, and visibly.
  for (const r of singles) {
    if (count(r) < 2) continue;
    const evs = (await api("GET", `/emails/${ids[r]}/events`)).json.data as { type: string; data: { recipients?: string[] } }[];
    expect(evs.some((e) => e.type === "outcome_unknown" && e.data.recipients?.includes(r)), `${r} was resent without an outcome_unknown event`).toBe(true);
  }
}, 240_000);
