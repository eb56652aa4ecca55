// Accepted mail is never lost and never sent twice: tern is killed hard (SIGKILL to wrangler
// dev, workerd and npm start) right after accepting sends, then started again on the same
// state. Every accepted email reaches the relay exactly once.
import { afterAll, expect, it } from "vitest";
import { startTern, type TernProcess } from "../support/processes.ts";

let tern: TernProcess | undefined;
afterAll(async () => {
  await tern?.stop();
});

// A loaded machine can let the consumer claim the batch before the kill: its lease (600 s by
// default) would then hold the claimed emails past the deadline, so it is short here, though
// longer than a delivery takes (a shorter one would resend mail still on its way).
const recovery = { TERN_STUCK_AFTER_SECONDS: "3", TERN_LEASE_SECONDS: "10", TERN_CRON_INTERVAL_MS: "1000", TERN_DEV_PLAN: "pro_50k", TERN_DEV_RATE_LIMIT: "1000" };

async function relayCount(relayHttp: string, rcpt: string): Promise<number> {
  const list = (await (await fetch(`${relayHttp}/api/messages?to=${encodeURIComponent(rcpt)}`)).json()) as { data: unknown[] };
  return list.data.length;
}

it("a crash between accepting and delivering loses nothing and sends nothing twice", async () => {
  tern = await startTern({ env: recovery });
  const { stateDir } = tern;
  const post = (body: unknown, path = "/emails", headers: Record<string, string> = {}) =>
    fetch(`${tern!.url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${tern!.apiKey}`, "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
  const rcpts = Array.from({ length: 20 }, (_, i) => `crash-${i}@example.com`);
  // One batch and one idempotent single send, then the kill before the queue's batch window.
  const batch = await post(rcpts.slice(0, 19).map((to) => ({ from: `c@${tern!.domain}`, to, subject: "crash", text: "t" })), "/emails/batch");
  const single = await post({ from: `c@${tern.domain}`, to: rcpts[19], subject: "crash", text: "t" }, "/emails", { "idempotency-key": "crash-key" });
  expect(batch.status).toBe(200);
  expect(single.status).toBe(200);
  const singleId = ((await single.json()) as { id: string }).id;
  const deliveredBeforeCrash = (await Promise.all(rcpts.map((r) => relayCount(tern!.relayHttp, r)))).filter((c) => c > 0).length;
  await tern.kill();
  // The scenario needs mail that was accepted and not yet delivered when tern died.
  expect(deliveredBeforeCrash).toBeLessThan(rcpts.length);

  tern = await startTern({ stateDir, env: recovery });
  // The client retries its idempotent request after the crash: it is replayed, not resent.
  const retried = await post({ from: `c@${tern.domain}`, to: rcpts[19], subject: "crash", text: "t" }, "/emails", { "idempotency-key": "crash-key" });
  expect(retried.status).toBe(200);
  expect(retried.headers.get("idempotent-replayed")).toBe("true");
  expect(((await retried.json()) as { id: string }).id).toBe(singleId);

  const deadline = Date.now() + 60_000;
  for (;;) {
    const counts = await Promise.all(rcpts.map((r) => relayCount(tern!.relayHttp, r)));
    if (counts.every((c) => c === 1)) break;
    expect(counts.every((c) => c <= 1), `a message arrived twice: ${counts}`).toBe(true);
    if (Date.now() > deadline) throw new Error(`not all delivered after the restart: ${counts}`);
    await new Promise((r) => setTimeout(r, 500));
  }
  // And nothing more arrives later (the cron keeps sweeping every second).
  await new Promise((r) => setTimeout(r, 5000));
  const after = await Promise.all(rcpts.map((r) => relayCount(tern!.relayHttp, r)));
  expect(after).toEqual(rcpts.map(() => 1));
}, 180_000);
