// `npm start`: tern on one machine. Applies the D1 migrations, starts the dev relay (a local
// SMTP server with a mailbox page), creates the dev account, API key and sending domain on
// first start, runs `wrangler dev` with the dev settings, and fires the cron locally.
// Ctrl-C stops everything it started; state (.wrangler/, .tern/) survives restarts.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { WRANGLER, apiKeyInsert, d1Execute, d1Target, generateToken, isTokenShape, runWrangler, sqlString, wranglerEnv } from "../ops/d1.ts";
import { PLANS, isPlan } from "../worker/plans.ts";
import { generatePassword, userInserts } from "../ops/admin.ts";
import { toBase64 } from "../worker/bytes.ts";
import { generateDkimKey, newSelector, sealPrivateKey } from "../worker/dkim/keys.ts";
import { bridgeSettings, startDevBridge, type DevBridge } from "./bridge.ts";
import { startDevRelay, type DevRelay } from "./relay.ts";
import { deliverReport, reportsFor } from "./reports.ts";
import { buildEditor, editorStale } from "./build-editor.ts";
import { startDevDns, workerHosts, type DevDns } from "./dns.ts";
import type { ZoneHosts } from "./dns-records.ts";

const root = resolve(import.meta.dirname, "..");

export interface StartOptions {
  port: number;
  relaySmtpPort: number;
  relayHttpPort: number;
  /** Where wrangler keeps local D1/R2/Queues/DO state. */
  persistTo: string;
  /** Where tern keeps the dev key, the mailbox and certificates. */
  stateDir: string;
  domain: string;
  apiKey?: string;
  cronIntervalMs: number;
  /** The dev account's API requests per second (production's default is 10) and plan. */
  rateLimit: number;
  plan: string;
  /** The SMTP bridge's TERN_BRIDGE_* settings (dev/bridge.ts has the dev defaults). */
  bridge: Record<string, string | undefined>;
  /** The dev DNS zone (dev/dns.ts): its port (0: any), or null to check domains on real DNS. */
  devDnsPort: number | null;
  log: (line: string) => void;
}

export interface Running {
  url: string;
  apiKey: string;
  /** The dev account's dashboard user. */
  devUser: { email: string; password: string };
  domain: string;
  relay: DevRelay;
  bridge: DevBridge;
  dns: DevDns | null;
  stop(): Promise<void>;
}

function optionsFromEnv(): StartOptions {
  const stateDir = resolve(process.env.TERN_STATE_DIR ?? join(root, ".tern"));
  return {
    port: Number(process.env.PORT ?? 8787),
    relaySmtpPort: Number(process.env.RELAY_SMTP_PORT ?? 2525),
    relayHttpPort: Number(process.env.RELAY_HTTP_PORT ?? 8025),
    persistTo: resolve(process.env.TERN_PERSIST_TO ?? join(root, ".wrangler", "state")),
    stateDir,
    domain: (process.env.TERN_DEV_DOMAIN ?? "tern.test").toLowerCase(),
    apiKey: process.env.TERN_DEV_API_KEY,
    cronIntervalMs: Number(process.env.TERN_CRON_INTERVAL_MS ?? 15_000),
    rateLimit: Number(process.env.TERN_DEV_RATE_LIMIT ?? 10),
    plan: process.env.TERN_DEV_PLAN ?? "free",
    bridge: bridgeSettings(process.env),
    devDnsPort: process.env.TERN_DEV_DNS === "off" ? null : Number(process.env.TERN_DEV_DNS_PORT ?? 0),
    log: (line) => console.log(line),
  };
}



const sql = sqlString;

interface DevIdentity {
  accountId: string;
  domainId: string;
  /** The account the dashboard's own mail is sent from: no user belongs to it, so nobody can
   * read the sign-in links in its Emails (worker/dashboard/mail.ts). */
  systemAccountId?: string;
  systemDomainId?: string;
  keys: Record<string, string>; // token -> key id
}

/** The dev deployment's MASTER_KEY secret: random, made once, kept (mode 600) in stateDir. */
function devMasterKey(o: StartOptions): string {
  const file = join(o.stateDir, "master-key");
  if (!existsSync(file)) writeFileSync(file, toBase64(crypto.getRandomValues(new Uint8Array(32))), { mode: 0o600 });
  return readFileSync(file, "utf8").trim();
}

/** The dev domain's DKIM key, made the way POST /domains makes one (only in dev is a domain
 * verified without DNS). Nothing is written when the domain already has an active key. */
async function devDkimKeyInsert(o: StartOptions, masterKey: string, accountId: string, domainId: string, now: number): Promise<string[]> {
  const found = d1Execute(d1Target(false, o.persistTo), [
    `SELECT count(*) AS n FROM dkim_keys WHERE domain_id = ${sql(domainId)} AND state = 'active';`,
  ], true) as { results: { n: number }[] }[];
  if ((found[0]?.results[0]?.n ?? 0) > 0) return [];
  const key = await generateDkimKey("rsa");
  const selector = newSelector();
  const sealed = await sealPrivateKey(masterKey, domainId, selector, key.pkcs8);
  return [
    `INSERT INTO dkim_keys (id, domain_id, account_id, selector, algorithm, public_key, private_key_sealed, state, status, created_at, activated_at) VALUES (${sql(crypto.randomUUID())}, ${sql(domainId)}, ${sql(accountId)}, ${sql(selector)}, 'rsa', ${sql(key.publicKey)}, ${sql(sealed)}, 'active', 'verified', ${now}, ${now});`,
  ];
}

interface Seeded {
  token: string;
  accountId: string;
  systemAccountId: string;
  devUser: { email: string; password: string };
}

/** The dev account's dashboard user: made once, its password kept (mode 600) in stateDir. */
async function devUserInserts(o: StartOptions, accountId: string, now: number): Promise<{ statements: string[]; devUser: Seeded["devUser"] }> {
  const file = join(o.stateDir, "dev-user.json");
  if (existsSync(file)) return { statements: [], devUser: JSON.parse(readFileSync(file, "utf8")) };
  const devUser = { email: `dev@${o.domain}`, password: generatePassword() };
  const statements = await userInserts({ id: crypto.randomUUID(), accountId, email: devUser.email, name: "Dev", role: "owner", password: devUser.password }, now);
  writeFileSync(file, JSON.stringify(devUser, null, 2), { mode: 0o600 });
  return { statements, devUser };
}

/** The dev account, its key and its verified domain: created once, kept in stateDir. */
async function seedDevAccount(o: StartOptions, masterKey: string): Promise<Seeded> {
  const file = join(o.stateDir, "dev-account.json");
  const identity: DevIdentity = existsSync(file)
    ? JSON.parse(readFileSync(file, "utf8"))
    : { accountId: crypto.randomUUID(), domainId: crypto.randomUUID(), keys: {} };
  const existing = Object.keys(identity.keys)[0];
  const token = o.apiKey ?? existing ?? generateToken();
  if (!isPlan(o.plan)) throw new Error(`TERN_DEV_PLAN must be one of ${Object.keys(PLANS).join(", ")}.`);
  if (!isTokenShape(token)) {
    throw new Error("TERN_DEV_API_KEY must look like tern_ followed by 32 to 128 letters and digits.");
  }
  identity.keys[token] ??= crypto.randomUUID();
  identity.systemAccountId ??= crypto.randomUUID();
  identity.systemDomainId ??= crypto.randomUUID();
  const now = Date.now();
  const user = await devUserInserts(o, identity.accountId, now);
  const statements = [
    `INSERT OR IGNORE INTO accounts (id, name, plan, created_at) VALUES (${sql(identity.accountId)}, 'Dev account', 'free', ${now});`,
    `UPDATE accounts SET rate_limit = ${Math.max(1, Math.floor(o.rateLimit)) || 10}, plan = ${sql(o.plan)} WHERE id = ${sql(identity.accountId)};`,
    `INSERT OR IGNORE INTO domains (id, account_id, name, region, status, created_at) VALUES (${sql(identity.domainId)}, ${sql(identity.accountId)}, ${sql(o.domain)}, 'us-east-1', 'verified', ${now});`,
    `UPDATE domains SET status = 'verified' WHERE account_id = ${sql(identity.accountId)} AND name = ${sql(o.domain)};`,
    ...(await devDkimKeyInsert(o, masterKey, identity.accountId, identity.domainId, now)),
    `INSERT OR IGNORE INTO accounts (id, name, plan, created_at) VALUES (${sql(identity.systemAccountId)}, 'tern system (dashboard mail)', 'scale_1m', ${now});`,
    `INSERT OR IGNORE INTO domains (id, account_id, name, region, status, created_at) VALUES (${sql(identity.systemDomainId)}, ${sql(identity.systemAccountId)}, ${sql(o.domain)}, 'us-east-1', 'verified', ${now});`,
    ...(await devDkimKeyInsert(o, masterKey, identity.systemAccountId, identity.systemDomainId, now)),
    await apiKeyInsert({ id: identity.keys[token]!, accountId: identity.accountId, name: "Dev key", token }, now),
    ...user.statements,
  ];
  const seedFile = join(o.stateDir, "seed.sql");
  writeFileSync(seedFile, statements.join("\n"));
  runWrangler(["d1", "execute", "DB", ...d1Target(false, o.persistTo), "--file", seedFile]);
  writeFileSync(file, JSON.stringify(identity, null, 2), { mode: 0o600 });
  return { token, accountId: identity.accountId, systemAccountId: identity.systemAccountId, devUser: user.devUser };
}

/** Sign-in with Google and GitHub in dev: configured from the environment (tests point them at
 * a local OAuth server), passed to the Worker like the other dev settings. */
const OAUTH_VARS = ["GOOGLE_CLIENT_ID", "GOOGLE_CLIENT_SECRET", "GOOGLE_DISCOVERY_URL", "GITHUB_CLIENT_ID", "GITHUB_CLIENT_SECRET", "GITHUB_AUTHORIZE_URL", "GITHUB_TOKEN_URL", "GITHUB_API_URL"];


async function waitForHttp(url: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`wrangler dev exited with code ${child.exitCode}`);
    try {
      const r = await fetch(url);
      if (r.ok) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`wrangler dev did not answer on ${url} within ${timeoutMs / 1000}s`);
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid!, signal);
  } catch {}
}

export async function start(o: StartOptions): Promise<Running> {
  mkdirSync(o.stateDir, { recursive: true });
  mkdirSync(o.persistTo, { recursive: true });
  const stale = editorStale();
  if (stale) {
    o.log(`building the editor (${stale})...`);
    o.log(await buildEditor());
  }
  o.log("applying D1 migrations...");
  runWrangler(["d1", "migrations", "apply", "DB", ...d1Target(false, o.persistTo)]);
  const masterKey = devMasterKey(o);
  const { token: apiKey, systemAccountId, devUser } = await seedDevAccount(o, masterKey);

  const relay = await startDevRelay({
    smtpPort: o.relaySmtpPort,
    httpPort: o.relayHttpPort,
    mailDir: join(o.stateDir, "mailbox"),
    log: (line) => o.log(`[relay] ${line}`),
    // Some recipients answer later by mail, as the outside world does (dev/reports.ts).
    onMessage: async (m) => {
      for (const report of reportsFor(m)) {
        await new Promise((r) => setTimeout(r, 200));
        await deliverReport(`http://127.0.0.1:${o.port}`, report);
        o.log(`[relay] sent a delivery report about ${m.id} to ${report.to}`);
      }
    },
  });

  const vars: Record<string, string> = {
    TERN_DEV_MODE: "true",
    RELAY_URL: `smtp+plain://127.0.0.1:${relay.smtpPort}`,
    RELAY_FINAL: "true",
    // Open pixels, click redirects and unsubscribe links in dev mail point at this API.
    PUBLIC_URL: `http://127.0.0.1:${o.port}`,
    // Domains' tracking hosts show their Tracking record; the dev DNS zone leaves it unpublished
    // (such a host cannot reach this machine), so dev mail's links keep using PUBLIC_URL.
    TRACKING_CNAME_TARGET: "tracking.tern.localhost",
    // No zone to make their custom hostnames in: dev never calls Cloudflare's API, even with a
    // CLOUDFLARE_API_TOKEN in the shell (wrangler reads secrets from the environment).
    CLOUDFLARE_ZONE_ID: "",
    // The dashboard's mail (address verification, resets, invitations) goes out through tern
    // from an account of its own, and lands in the dev mailbox.
    DASHBOARD_MAIL_ACCOUNT: systemAccountId,
    DASHBOARD_MAIL_FROM: `tern <no-reply@${o.domain}>`,
  };
  // Domains added here are answered for by the dev DNS zone, with the hosts (SPF include,
  // bounce MX) the Worker will expect: its wrangler.toml vars with the dev ones over them.
  // wrangler's config reader costs over a second to load, so it is loaded once tern is up
  // (or at the first lookup), not on the way there.
  let dns: DevDns | null = null;
  let hosts: Promise<ZoneHosts> | undefined;
  const loadHosts = () => (hosts ??= import("wrangler").then(({ unstable_readConfig }) =>
    workerHosts({ ...(unstable_readConfig({ config: join(root, "wrangler.toml") }, {}).vars as Record<string, string>), ...vars })));
  if (o.devDnsPort !== null) {
    try {
      dns = await startDevDns({ persistTo: o.persistTo, port: o.devDnsPort, hosts: loadHosts, log: (line) => o.log(`[dns] ${line}`) });
    } catch (err) {
      await relay.close();
      throw err;
    }
    vars.DOH_URL = dns.url;
  }
  for (const name of OAUTH_VARS) if (process.env[name]) vars[name] = process.env[name]!;
  if (process.env.TERN_STUCK_AFTER_SECONDS) vars.STUCK_AFTER_SECONDS = process.env.TERN_STUCK_AFTER_SECONDS;
  if (process.env.TERN_RETRY_SCHEDULE) vars.RETRY_SCHEDULE = process.env.TERN_RETRY_SCHEDULE;
  if (process.env.TERN_LEASE_SECONDS) vars.LEASE_SECONDS = process.env.TERN_LEASE_SECONDS;
  // Another relay than the dev one (a fault test's SMTP peer that outlives tern).
  if (process.env.TERN_RELAY_URL) vars.RELAY_URL = process.env.TERN_RELAY_URL;
  if (process.env.TERN_IDEMPOTENCY_FRONT) vars.IDEMPOTENCY_FRONT = process.env.TERN_IDEMPOTENCY_FRONT;
  if (process.env.TERN_BROADCAST_RATE) vars.BROADCAST_RATE = process.env.TERN_BROADCAST_RATE;
  // TRANSPORT=cloudflare npm start: mail leaves through wrangler's local send_email simulation.
  for (const [k, v] of Object.entries(process.env)) if (/^TRANSPORT(_[A-Z0-9_]+)?$/.test(k) && v) vars[k] = v;
  const child = spawn(
    process.execPath,
    [WRANGLER, "dev", "--ip", "127.0.0.1", "--port", String(o.port), "--persist-to", o.persistTo,
      "--show-interactive-dev-session=false", ...Object.entries(vars).flatMap(([k, v]) => ["--var", `${k}:${v}`]),
      // A benchmark reads the isolate's heap through the inspector (bench/message-memory.ts).
      ...(process.env.TERN_INSPECTOR_PORT ? ["--inspector-port", process.env.TERN_INSPECTOR_PORT] : [])],
    // The secret goes in the environment (wrangler reads required secrets from it), not on the
    // command line where any process listing shows it.
    { cwd: root, env: { ...wranglerEnv(), MASTER_KEY: masterKey }, stdio: ["ignore", "pipe", "pipe"], detached: true },
  );
  // Tests that kill tern hard need wrangler's process group (it is detached from this one).
  const pidFile = join(o.stateDir, "wrangler.pid");
  writeFileSync(pidFile, String(child.pid));
  // Detached, wrangler dev outlives this process unless killed: an exit before stop() (a
  // failed start, a Ctrl-C while starting) takes its group down, synchronously.
  const lastResort = () => killGroup(child, "SIGKILL");
  process.on("exit", lastResort);
  const forward = (chunk: Buffer) => {
    for (const line of chunk.toString().split("\n")) if (line.trim()) o.log(`[worker] ${line}`);
  };
  child.stdout!.on("data", forward);
  child.stderr!.on("data", forward);

  const url = `http://127.0.0.1:${o.port}`;
  let stopping: Promise<void> | null = null;
  let bridge: DevBridge | null = null;
  const stop = () =>
    (stopping ??= (async () => {
      clearInterval(cron);
      await bridge?.close(); // drains first: sessions in flight still need the API
      killGroup(child, "SIGTERM");
      const exited = new Promise<void>((r) => (child.exitCode !== null ? r() : child.once("exit", () => r())));
      const timer = setTimeout(() => killGroup(child, "SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
      // Whatever of wrangler's group outlived it goes too; then the pid file is removed, so no
      // later clean-up (test/support/processes.ts) signals a group id the system may reuse.
      killGroup(child, "SIGKILL");
      rmSync(pidFile, { force: true });
      process.off("exit", lastResort);
      await relay.close();
      await dns?.close();
    })());
  // wrangler dev does not fire cron triggers by itself; this stands in for Cloudflare's scheduler.
  const cron = setInterval(() => {
    fetch(`${url}/cdn-cgi/local/scheduled?cron=${encodeURIComponent("* * * * *")}`).catch(() => {});
  }, o.cronIntervalMs);
  try {
    await waitForHttp(`${url}/openapi.json`, child, 60_000);
    bridge = await startDevBridge({ apiUrl: url, stateDir: o.stateDir, settings: o.bridge, log: (line) => o.log(`[bridge] ${line}`) });
    if (dns) loadHosts().catch((err) => o.log(`[dns] cannot read wrangler.toml's vars: ${String(err)}`));
  } catch (err) {
    await stop();
    throw err;
  }
  return { url, apiKey, devUser, domain: o.domain, relay, bridge, dns, stop };
}

/** "100 emails a day, 3000 a month": the plan's limits, as the banner states them. */
function planLine(plan: string): string {
  const p: { monthly: number; daily?: number } = isPlan(plan) ? PLANS[plan] : PLANS.free;
  return [p.daily ? `${p.daily} emails a day` : null, `${p.monthly} a month`].filter(Boolean).join(", ");
}

if (import.meta.main) {
  const o = optionsFromEnv();
  // One handler from the start: until tern is running there is nothing to stop gracefully, so
  // a signal ends the start and the exit takes wrangler dev down (start()'s last resort).
  // (Swapping handlers later would drop a signal that arrives during the swap.)
  let running: Running | undefined;
  let signals = 0;
  const shutdown = () => {
    if (!running || ++signals > 1) process.exit(running ? 1 : 130);
    console.log("\nstopping...");
    running.stop().then(() => process.exit(0));
  };
  process.on("SIGINT", shutdown);
  process.on("SIGTERM", shutdown);
  running = await start(o).catch((err) => {
    console.error(String(err?.message ?? err));
    process.exit(1);
  });
  console.log(`
tern is running.

  API         ${running.url}
  Dashboard   ${running.url.replace("127.0.0.1", "localhost")}/dashboard  (sign in as ${running.devUser.email}, password ${running.devUser.password})
  Reference   ${running.url}/docs
  Mailbox     http://127.0.0.1:${running.relay.httpPort}
  Dev relay   smtp://127.0.0.1:${running.relay.smtpPort}
  SMTP bridge ${running.bridge.ports.map((p) => `${p.port} (${p.tls === "implicit" ? "TLS" : "STARTTLS"})`).join(", ")} on 127.0.0.1, user tern, password the API key
              certificate signed by ${running.bridge.caCertPath}
  API key     ${running.apiKey}
  Domain      ${running.domain} (verified; send from any address at it)
  Plan        ${o.plan} (${planLine(o.plan)}; TERN_DEV_PLAN=scale_1m npm start raises it)
  DNS         ${running.dns ? `${running.dns.url} answers for the domains added here: add one, press Verify` : "real DNS (TERN_DEV_DNS=off)"}

  curl -X POST ${running.url}/emails \\
    -H 'Authorization: Bearer ${running.apiKey}' -H 'Content-Type: application/json' \\
    -d '{"from":"Tern <hello@${running.domain}>","to":"you@example.com","subject":"Hi","html":"<p>It works</p>"}'

Ctrl-C stops everything.`);
}
