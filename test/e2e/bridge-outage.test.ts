// The bridge as its own process (as systemd or Docker runs it) in front of tern started the way
// `npm start` starts it: when the API goes away the client is told to try again later and the
// retried message is delivered once; SIGTERM finishes the message in flight before exiting;
// repeated wrong keys from one address lock it out, parallel ones too; connections that never
// log in cannot keep others out; a session waits for a submission slot at its first RCPT, one
// key cannot take every slot, and a slot held without DATA is taken back.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import nodemailer from "nodemailer";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startBridgeProcess, type BridgeProcess } from "../support/bridge.ts";
import { startTern, type TernProcess } from "../support/processes.ts";
import { SmtpDialog } from "../support/smtp-dialog.ts";

const env = { TERN_DEV_PLAN: "pro_50k", TERN_DEV_RATE_LIMIT: "1000" };
let tern: TernProcess;
const bridges: BridgeProcess[] = [];

beforeAll(async () => {
  tern = await startTern({ env });
}, 120_000);

afterAll(async () => {
  for (const b of bridges) await b.stop("SIGKILL");
  await tern?.stop();
});

async function bridge(extra: Record<string, string> = {}): Promise<BridgeProcess> {
  const b = await startBridgeProcess({ apiUrl: tern.url, env: extra });
  bridges.push(b);
  return b;
}

async function relayCount(rcpt: string, waitMs = 0): Promise<number> {
  const res = await fetch(`${tern.relayHttp}/api/messages?to=${encodeURIComponent(rcpt)}${waitMs ? `&wait=${waitMs}` : ""}`);
  return ((await res.json()) as { data: unknown[] }).data.length;
}

/** `npm run admin` against this tern's local state. */
function admin(...args: string[]): string {
  const root = resolve(import.meta.dirname, "..", "..");
  const r = spawnSync(process.execPath, [join(root, "ops", "admin.ts"), ...args, "--persist-to", join(tern.stateDir, "wrangler")], { cwd: root, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`admin ${args[0]}: ${r.stderr}`);
  return r.stdout;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const plainLogin = (key: string) => `AUTH PLAIN ${Buffer.from(`\0tern\0${key}`).toString("base64")}`;

describe("the bridge in front of an API that goes away and comes back", () => {
  it("answers 4xx while the API is stopped, and the client's retry is delivered once when it is back", async () => {
    const b = await bridge();
    const t = nodemailer.createTransport({
      host: "127.0.0.1", port: b.startTlsPort, secure: false, requireTLS: true, pool: true, maxConnections: 1,
      auth: { user: "tern", pass: tern.apiKey }, tls: { ca: readFileSync(b.caCertPath), servername: "localhost" },
    });
    try {
      const before = await t.sendMail({ from: `hello@${tern.domain}`, to: "outage-before@example.com", subject: "before", text: "t" });
      expect(before.response).toMatch(/^250 /);
      expect(await relayCount("outage-before@example.com", 30_000)).toBe(1);

      const { stateDir } = tern;
      const port = Number(new URL(tern.url).port);
      await tern.stop();
      const message = { from: `hello@${tern.domain}`, to: "outage@example.com", subject: "during the outage", text: "kept by the client" };
      const refused = await t.sendMail(message).catch((e) => e);
      expect(refused.responseCode).toBe(451);
      expect(refused.response).toMatch(/^451 4\.4\.1 /);
      // A new session cannot even log in: the key cannot be checked (a temporary failure too).
      const fresh = await SmtpDialog.open(b.tlsPort, { tls: true, ca: readFileSync(b.caCertPath) });
      const login = await fresh.dialog.login("tern_" + "n".repeat(40));
      expect(login.code).toBe(454);
      fresh.dialog.close();

      tern = await startTern({ stateDir, port, env });
      const retried = await t.sendMail(message);
      expect(retried.response).toMatch(/^250 /);
      expect(await relayCount("outage@example.com", 30_000)).toBe(1);
      await new Promise((r) => setTimeout(r, 3000));
      expect(await relayCount("outage@example.com")).toBe(1);
    } finally {
      t.close();
    }
  });

  it("SIGTERM: the message in flight is finished and delivered, idle sessions are told 421, new connections are refused, exit 0", async () => {
    const b = await bridge();
    const ca = readFileSync(b.caCertPath);
    const busy = (await SmtpDialog.open(b.tlsPort, { tls: true, ca })).dialog;
    const idle = (await SmtpDialog.open(b.tlsPort, { tls: true, ca })).dialog;
    expect((await busy.login(tern.apiKey)).code).toBe(235);
    expect((await idle.login(tern.apiKey)).code).toBe(235);
    expect((await busy.command(`MAIL FROM:<hello@${tern.domain}>`)).code).toBe(250);
    expect((await busy.command("RCPT TO:<drain@example.com>")).code).toBe(250);
    expect((await busy.command("DATA")).code).toBe(354);
    await busy.write(`From: hello@${tern.domain}\r\nTo: drain@example.com\r\nSubject: in flight\r\n\r\nfirst half\r\n`);

    const exited = b.stop("SIGTERM");
    const told = await idle.reply();
    expect(told.code).toBe(421);
    expect(told.text).toMatch(/^4\.3\.2 /);
    await expect(SmtpDialog.open(b.tlsPort, { tls: true, ca })).rejects.toThrow(/ECONNREFUSED/);

    await busy.write("second half\r\n");
    const accepted = await busy.command(".");
    expect(accepted.code).toBe(250);
    expect(await exited).toBe(0);
    expect(await relayCount("drain@example.com", 30_000)).toBe(1);
    expect(b.output()).toMatch(/"event":"draining"/);
  });

  it("the account's rate limit: waited out and retried by the bridge, or, when it may not wait, a temporary 451", async () => {
    // An account allowed one API request a second. It has no verified domain, so a send that
    // gets past the limit is refused with the API's own verdict (550 5.7.1).
    const created = JSON.parse(admin("create-account", "rate limited", "--plan", "pro_50k")) as { account_id: string; api_key: string };
    admin("set-rate-limit", created.account_id, "1");
    const send = async (b: BridgeProcess) => {
      const { dialog } = await SmtpDialog.open(b.tlsPort, { tls: true, ca: readFileSync(b.caCertPath) });
      expect((await dialog.login(created.api_key)).code).toBe(235); // the key check takes the second's request
      expect((await dialog.command("MAIL FROM:<someone@limited.test>")).code).toBe(250);
      expect((await dialog.command("RCPT TO:<x@example.com>")).code).toBe(250);
      expect((await dialog.command("DATA")).code).toBe(354);
      const reply = await dialog.command("From: someone@limited.test\r\nTo: x@example.com\r\nSubject: s\r\n\r\nt\r\n.");
      dialog.close();
      return reply;
    };
    const impatient = await bridge({ TERN_BRIDGE_RATE_LIMIT_WAIT_MS: "0" });
    const refused = await send(impatient);
    expect(refused.code).toBe(451);
    expect(refused.text).toMatch(/^4\.7\.0 /);
    await new Promise((r) => setTimeout(r, 1500));
    const patient = await bridge({ TERN_BRIDGE_RATE_LIMIT_WAIT_MS: "10000" });
    const answered = await send(patient);
    expect(answered.code).toBe(550);
    expect(answered.text).toMatch(/^5\.7\.1 .*limited\.test/);
    expect(patient.output()).toMatch(/"event":"message".*"attempts":[2-9]/);
  });

  it("repeated wrong keys from one address lock it out for a while, even with the right key", async () => {
    const b = await bridge({ TERN_BRIDGE_AUTH_MAX_FAILURES: "3", TERN_BRIDGE_AUTH_FAILURE_DELAY_MS: "100" });
    const ca = readFileSync(b.caCertPath);
    const { dialog } = await SmtpDialog.open(b.tlsPort, { tls: true, ca });
    expect((await dialog.command("EHLO client.test")).code).toBe(250);
    const delays: number[] = [];
    for (let i = 0; i < 3; i++) {
      const t0 = Date.now();
      expect((await dialog.command(plainLogin("tern_" + "w".repeat(39) + i))).code).toBe(535);
      delays.push(Date.now() - t0);
    }
    // Each failure waits longer than the one before (100, 200, 400 ms).
    expect(delays[2]!).toBeGreaterThan(delays[0]! + 200);
    expect((await dialog.command(plainLogin(tern.apiKey))).code).toBe(454);
    dialog.close();
    const again = await SmtpDialog.open(b.tlsPort, { tls: true, ca });
    expect(again.greeting.code).toBe(421);
    expect(again.greeting.text).toMatch(/failed logins/);
    expect(b.output()).not.toContain(tern.apiKey);
  });

  it("50 wrong logins in parallel from one address: only the limit's worth are checked, the rest refused; 50 good ones all get in", async () => {
    const b = await bridge({ TERN_BRIDGE_AUTH_MAX_FAILURES: "5", TERN_BRIDGE_AUTH_FAILURE_DELAY_MS: "50", TERN_BRIDGE_MAX_CONNECTIONS_PER_IP: "60" });
    const ca = readFileSync(b.caCertPath);
    const open50 = () => Promise.all(Array.from({ length: 50 }, async () => (await SmtpDialog.open(b.tlsPort, { tls: true, ca })).dialog));
    // A pooled client opening its connections at once, with the right key: none is turned away.
    const good = await open50();
    expect((await Promise.all(good.map((d) => d.login(tern.apiKey)))).map((r) => r.code)).toEqual(Array(50).fill(235));
    for (const d of good) d.close();
    await sleep(300);

    const dialogs = await open50();
    try {
      for (const d of await Promise.all(dialogs.map((d) => d.command("EHLO client.test")))) expect(d.code).toBe(250);
      // Every AUTH is on its way before any is answered.
      await Promise.all(dialogs.map((d, i) => d.write(plainLogin("tern_" + "p".repeat(38) + String(i).padStart(2, "0")) + "\r\n")));
      const replies = await Promise.all(dialogs.map((d) => d.reply(20_000)));
      const codes = replies.map((r) => r.code);
      expect(codes.filter((c) => c === 535).length).toBeLessThanOrEqual(5);
      expect(codes.filter((c) => c === 454).length).toBeGreaterThanOrEqual(45);
      expect(codes.every((c) => c === 535 || c === 454)).toBe(true);
      expect(b.output().match(/"event":"auth_failed"/g)?.length ?? 0).toBeLessThanOrEqual(5);
      // The address stays locked out, even with the right key.
      const late = await SmtpDialog.open(b.tlsPort, { tls: true, ca });
      expect(late.greeting.code).toBe(421);
      late.dialog.close();
    } finally {
      for (const d of dialogs) d.close();
    }
  });

  it("connections that never log in are closed after TERN_BRIDGE_LOGIN_TIMEOUT_MS, so they cannot keep a real client out", async () => {
    const b = await bridge({ TERN_BRIDGE_MAX_CONNECTIONS: "10", TERN_BRIDGE_LOGIN_TIMEOUT_MS: "1000" });
    const ca = readFileSync(b.caCertPath);
    // A logged-in session is not held to the deadline.
    const member = (await SmtpDialog.open(b.tlsPort, { tls: true, ca })).dialog;
    expect((await member.login(tern.apiKey)).code).toBe(235);
    const silent = await Promise.all(Array.from({ length: 9 }, (_, i) => SmtpDialog.open(i % 2 ? b.tlsPort : b.startTlsPort, i % 2 ? { tls: true, ca } : {})));
    expect(silent.map((s) => s.greeting.code)).toEqual(Array(9).fill(220));
    try {
      // The bridge is full: a real client is turned away...
      const refused = await SmtpDialog.open(b.startTlsPort);
      expect(refused.greeting.code).toBe(421);
      expect(refused.greeting.text).toMatch(/Too many connections/);
      refused.dialog.close();
      // ...until the silent ones' time is up.
      for (const s of silent) expect((await s.dialog.reply(5_000)).text).toMatch(/^4\.4\.2 No login within 1 second /);
      const t = nodemailer.createTransport({
        host: "127.0.0.1", port: b.startTlsPort, secure: false, requireTLS: true,
        auth: { user: "tern", pass: tern.apiKey }, tls: { ca, servername: "localhost" },
      });
      const sent = await t.sendMail({ from: `hello@${tern.domain}`, to: "after-silence@example.com", subject: "in", text: "t" });
      expect(sent.response).toMatch(/^250 /);
      t.close();
      expect((await member.command("NOOP")).code).toBe(250);
      expect(await relayCount("after-silence@example.com", 30_000)).toBe(1);
    } finally {
      for (const s of silent) s.dialog.close();
      member.close();
    }
  });
});

describe("submission slots (TERN_BRIDGE_MAX_SUBMISSIONS)", () => {

  it("answers a session's first RCPT only once it holds a slot, so no DATA waits in the bridge; hang-ups, RSET and QUIT give slots back", async () => {
    const b = await bridge({ TERN_BRIDGE_MAX_SUBMISSIONS: "1" });
    const ca = readFileSync(b.caCertPath);
    const slots = async () => ((await (await fetch(b.healthUrl)).json()) as { submissions: { active: number; waiting: number } }).submissions;
    const session = async () => {
      const { dialog } = await SmtpDialog.open(b.tlsPort, { tls: true, ca });
      expect((await dialog.login(tern.apiKey)).code).toBe(235);
      expect((await dialog.command(`MAIL FROM:<hello@${tern.domain}>`)).code).toBe(250);
      return dialog;
    };
    const unanswered = async (reply: Promise<unknown>) => (await Promise.race([reply.then(() => "answered"), sleep(400).then(() => "waiting")])) === "waiting";
    const message = (to: string) => `From: hello@${tern.domain}\r\nTo: ${to}\r\nSubject: slots\r\n\r\nt\r\n.`;

    const first = await session();
    expect((await first.command("RCPT TO:<slot-1@example.com>")).code).toBe(250);
    const second = await session();
    await second.write("RCPT TO:<slot-2@example.com>\r\n");
    const secondRcpt = second.reply();
    const third = await session();
    await third.write("RCPT TO:<slot-3@example.com>\r\n");
    expect(await unanswered(secondRcpt)).toBe(true);
    expect(await slots()).toEqual({ active: 1, waiting: 2 });
    third.close(); // hangs up while waiting: its turn must not keep the slot

    expect((await first.command("DATA")).code).toBe(354);
    expect((await first.command(message("slot-1@example.com"))).code).toBe(250);
    expect((await secondRcpt).code).toBe(250);

    // RSET abandons the transaction; the next MAIL gives the slot back, and the RCPT after it waits its turn.
    const fourth = await session();
    await fourth.write("RCPT TO:<slot-4@example.com>\r\n");
    const fourthRcpt = fourth.reply();
    expect((await second.command("RSET")).code).toBe(250);
    expect(await unanswered(fourthRcpt)).toBe(true);
    expect((await second.command(`MAIL FROM:<hello@${tern.domain}>`)).code).toBe(250);
    expect((await fourthRcpt).code).toBe(250);
    await second.write("RCPT TO:<slot-2@example.com>\r\n");
    const secondAgain = second.reply();
    expect(await unanswered(secondAgain)).toBe(true);
    expect((await fourth.command("QUIT")).code).toBe(221); // leaves mid-transaction, slot and all
    expect((await secondAgain).code).toBe(250);
    expect((await second.command("DATA")).code).toBe(354);
    expect((await second.command(message("slot-2@example.com"))).code).toBe(250);
    second.close();
    first.close();
    await sleep(200);
    expect(await slots()).toEqual({ active: 0, waiting: 0 });
    expect(await relayCount("slot-1@example.com", 30_000)).toBe(1);
    expect(await relayCount("slot-2@example.com", 30_000)).toBe(1);
    expect(await relayCount("slot-4@example.com")).toBe(0);
  });

  it("a small message gives its slot back once it is read, while its request still waits for the API", async () => {
    // The only slot's message waits out an account's rate limit (1 request a second, the first
    // taken by the key check) inside the bridge; another session gets its turn meanwhile.
    const created = JSON.parse(admin("create-account", "slow sender", "--plan", "pro_50k")) as { account_id: string; api_key: string };
    admin("set-rate-limit", created.account_id, "1");
    const b = await bridge({ TERN_BRIDGE_MAX_SUBMISSIONS: "1", TERN_BRIDGE_RATE_LIMIT_WAIT_MS: "10000" });
    const ca = readFileSync(b.caCertPath);
    const slow = (await SmtpDialog.open(b.tlsPort, { tls: true, ca })).dialog;
    expect((await slow.login(created.api_key)).code).toBe(235);
    expect((await slow.command("MAIL FROM:<someone@slow.test>")).code).toBe(250);
    expect((await slow.command("RCPT TO:<x@example.com>")).code).toBe(250);
    expect((await slow.command("DATA")).code).toBe(354);
    await slow.write("From: someone@slow.test\r\nTo: x@example.com\r\nSubject: s\r\n\r\nt\r\n.\r\n");
    const slowReply = slow.reply();
    let slowAnswered = false;
    void slowReply.then(() => (slowAnswered = true));

    const next = (await SmtpDialog.open(b.tlsPort, { tls: true, ca })).dialog;
    expect((await next.login(tern.apiKey)).code).toBe(235);
    expect((await next.command(`MAIL FROM:<hello@${tern.domain}>`)).code).toBe(250);
    expect((await next.command("RCPT TO:<slot-next@example.com>")).code).toBe(250);
    expect(slowAnswered).toBe(false);
    expect((await slowReply).code).toBe(550); // its domain is not verified: the API's own verdict, after the wait
    expect(b.output()).toMatch(/"event":"message".*"attempts":[2-9]/);
    slow.close();
    next.close();
  });

  const loggedIn = async (b: BridgeProcess, key: string, from: string) => {
    const { dialog } = await SmtpDialog.open(b.tlsPort, { tls: true, ca: readFileSync(b.caCertPath) });
    expect((await dialog.login(key)).code).toBe(235);
    expect((await dialog.command(`MAIL FROM:<${from}>`)).code).toBe(250);
    return dialog;
  };
  const answeredWithin = async <T>(reply: Promise<T>, ms: number) => Promise.race([reply, sleep(ms).then(() => "not answered" as const)]);

  it("one account holds at most TERN_BRIDGE_MAX_SUBMISSIONS_PER_ACCOUNT slots, whichever of its keys it uses: another account's RCPT is answered at once", async () => {
    const other = JSON.parse(admin("create-account", "neighbour", "--plan", "pro_50k")) as { api_key: string };
    // The hog's second key, of the same account: more keys must not mean more slots.
    const made = await fetch(`${tern.url}/api-keys`, { method: "POST", headers: { authorization: `Bearer ${tern.apiKey}`, "content-type": "application/json" }, body: JSON.stringify({ name: "second", permission: "sending_access" }) });
    const secondKey = ((await made.json()) as { token: string }).token;
    const b = await bridge({ TERN_BRIDGE_MAX_SUBMISSIONS: "4", TERN_BRIDGE_MAX_SUBMISSIONS_PER_ACCOUNT: "2", TERN_BRIDGE_SUBMISSION_HOLD_MS: "60000" });
    const slots = async () => ((await (await fetch(b.healthUrl)).json()) as { submissions: { active: number; waiting: number } }).submissions;
    // The attack: as many sessions as there are slots, each at RCPT, none sending DATA.
    const hog = await Promise.all([tern.apiKey, secondKey, tern.apiKey, secondKey].map((key) => loggedIn(b, key, `hello@${tern.domain}`)));
    await Promise.all(hog.map((d, i) => d.write(`RCPT TO:<hog-${i}@example.com>\r\n`)));
    const granted = new Set<number>();
    hog.forEach((d, i) => void d.reply(60_000).then((r) => r.code === 250 && granted.add(i), () => {}));
    for (let i = 0; i < 50 && granted.size < 2; i++) await sleep(100);
    await sleep(400);
    expect(granted.size).toBe(2); // the other two wait

    const neighbour = await loggedIn(b, other.api_key, "someone@neighbour.test");
    const t0 = Date.now();
    const answer = await answeredWithin(neighbour.command("RCPT TO:<neighbour@example.com>"), 3_000);
    expect(answer).toMatchObject({ code: 250 });
    expect(Date.now() - t0).toBeLessThan(2_000); // one round trip, not the hog's 60 s
    expect(await slots()).toEqual({ active: 3, waiting: 2 });

    // The key's own waiting sessions go on as its slots come back.
    hog[[...granted][0]!]!.close();
    for (let i = 0; i < 50 && granted.size < 3; i++) await sleep(100);
    expect(granted.size).toBe(3);
    for (const d of [...hog, neighbour]) d.close();
  });

  it("a slot held without DATA for TERN_BRIDGE_SUBMISSION_HOLD_MS is taken back (421), keep-alive NOOPs or not; DATA started in time is not cut", async () => {
    const hogAccount = JSON.parse(admin("create-account", "slot holder", "--plan", "pro_50k")) as { api_key: string };
    const b = await bridge({ TERN_BRIDGE_MAX_SUBMISSIONS: "1", TERN_BRIDGE_SUBMISSION_HOLD_MS: "1000" });
    const hog = await loggedIn(b, hogAccount.api_key, "someone@holder.test");
    expect((await hog.command("RCPT TO:<held@example.com>")).code).toBe(250);
    const keepalive = setInterval(() => void (hog.closed || hog.write("NOOP\r\n")), 250);
    try {
      const waiter = await loggedIn(b, tern.apiKey, `hello@${tern.domain}`);
      const t0 = Date.now();
      const rcpt = await answeredWithin(waiter.command("RCPT TO:<after-hold@example.com>", 10_000), 5_000);
      expect(rcpt).toMatchObject({ code: 250 });
      expect(Date.now() - t0).toBeLessThan(3_000);
      let last = await hog.reply(5_000);
      while (last.code === 250) last = await hog.reply(5_000);
      expect(last.code).toBe(421);
      expect(last.text).toMatch(/^4\.4\.2 No DATA within 1 second /);
      expect(b.output()).toMatch(/"event":"submission_hold_timeout"/);

      // The waiter's message takes longer than the bound to send, but DATA began in time.
      expect((await waiter.command("DATA")).code).toBe(354);
      await waiter.write(`From: hello@${tern.domain}\r\nTo: after-hold@example.com\r\nSubject: held\r\n\r\nfirst half\r\n`);
      await sleep(1_500);
      expect((await waiter.command("second half\r\n.")).code).toBe(250);
      waiter.close();
      expect(await relayCount("after-hold@example.com", 30_000)).toBe(1);
    } finally {
      clearInterval(keepalive);
      hog.close();
    }
  });
});
