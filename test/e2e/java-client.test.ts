// resend-java has no base-URL option: it always calls https://api.resend.com. This proves the
// route the README documents for it, end to end with a real JVM: the JVM's hosts file sends
// api.resend.com to `npm run resend-host-proxy` (a TLS reverse proxy presenting a certificate
// from its own CA), a trust store holding only that CA makes the JVM accept it, and the proxy
// forwards to tern, whose dev relay receives the mail. The Java program sends exactly what
// resend-java sends for emails.send (test/fixtures/java/ResendJavaSend.java), through the JDK's
// HttpClient, which resolves and trusts through the same JVM defaults as resend-java's OkHttp.
import { execFile, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { promisify } from "node:util";
import { join, resolve } from "node:path";
import { simpleParser } from "mailparser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keepTail } from "../support/output-tail.ts";
import { startTern, type TernProcess } from "../support/processes.ts";

const root = resolve(import.meta.dirname, "..", "..");
const program = join(root, "test", "fixtures", "java", "ResendJavaSend.java");

let tern: TernProcess;
let proxy: ChildProcess | undefined;
let proxyDir: string;
let classes: string;

function requireJdk(): void {
  // The project's machines have a JDK; a skipped test would prove nothing, so its absence fails.
  for (const tool of ["java", "javac", "keytool"]) {
    const probe = spawnSync(tool, tool === "java" ? ["-version"] : ["-help"], { stdio: "pipe" });
    if (probe.error) {
      throw new Error(`\`${tool}\` is not on the PATH: this test runs a Java program through the route the README documents for resend-java, and needs a JDK 11 or later (Debian: apt-get install openjdk-17-jdk-headless)`);
    }
  }
}

beforeAll(async () => {
  requireJdk();
  // Compiled once, while tern starts, rather than by each `java File.java` launch.
  classes = mkdtempSync(join(process.env.TERN_TEST_TMP ?? tmpdir(), "java-classes-"));
  const compiled = promisify(execFile)("javac", ["-d", classes, program]);
  tern = await startTern();
  await compiled;
  proxyDir = join(tern.stateDir, "resend-host-proxy");
  // Port 443 (the client's URL fixes it) on an address of 127.0.0.0/8 of this run's own, so that
  // two runs on one machine do not collide; Linux answers on all of 127/8 without setup.
  const address = `127.${1 + Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}.${1 + Math.floor(Math.random() * 250)}`;
  proxy = spawn(process.execPath, [join(root, "ops", "resend-host-proxy.ts"), "--upstream", tern.url, "--listen", `${address}:443`, "--dir", proxyDir], { stdio: ["ignore", "pipe", "pipe"] });
  const tail = keepTail(proxy, 16 * 1024);
  await new Promise<void>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`resend-host-proxy did not start in time:\n${tail.text()}`)), 20_000);
    proxy!.stdout!.on("data", () => {
      if (tail.text().includes("run the JVM with")) {
        clearTimeout(timer);
        res();
      }
    });
    proxy!.once("exit", (code) => {
      clearTimeout(timer);
      // EADDRINUSE and EACCES come back as sentences naming the address and what to do.
      rej(new Error(`resend-host-proxy exited with ${code} before it listened on ${address}:443:\n${tail.text()}`));
    });
  });
}, 120_000);

afterAll(async () => {
  if (proxy && proxy.exitCode === null) {
    const exited = new Promise((r) => proxy!.once("exit", r));
    proxy.kill("SIGTERM");
    await exited;
  }
  const code = await tern?.stop();
  expect(code).toBe(0);
});

interface JavaRun { code: number | null; stdout: string; stderr: string; status?: number; version?: string; body?: string }

const trusting = () => [`-Djdk.net.hosts.file=${join(proxyDir, "hosts")}`, `-Djavax.net.ssl.trustStore=${join(proxyDir, "truststore.p12")}`, "-Djavax.net.ssl.trustStorePassword=changeit"];

function runJava(jvmFlags: string[], key: string, args: string[]): Promise<JavaRun> {
  return new Promise((res, rej) => {
    const child = spawn("java", [...jvmFlags, "-cp", classes, "ResendJavaSend", ...args], { env: { ...process.env, RESEND_API_KEY: key }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 40_000);
    child.once("error", rej);
    child.once("exit", (code) => {
      clearTimeout(timer);
      const line = (name: string) => stdout.match(new RegExp(`^${name}=(.*)$`, "m"))?.[1];
      const status = line("status");
      res({ code, stdout, stderr, status: status ? Number(status) : undefined, version: line("version"), body: line("body") });
    });
  });
}

describe("resend-java's route to tern: JVM hosts file, trust store, resend-host-proxy", () => {
  it("sends an email as resend-java does, and it reaches the relay", async () => {
    const to = `java-${Date.now()}@example.com`;
    const run = await runJava(trusting(), tern.apiKey, [`Java Test <hello@${tern.domain}>`, to, "Hello from the JVM ✓", "Sent through api.resend.com", "<p>Sent through <b>api.resend.com</b></p>"]);
    expect(run, run.stderr).toMatchObject({ code: 0, status: 200 });
    // OkHttp, like the JDK's client, negotiates HTTP/2 by ALPN: the proxy must speak it.
    expect(run.version).toBe("HTTP_2");
    const id = (JSON.parse(run.body!) as { id: string }).id;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);

    const list = (await (await fetch(`${tern.relayHttp}/api/messages?to=${encodeURIComponent(to)}&wait=30000`)).json()) as { data: { id: string }[] };
    expect(list.data).toHaveLength(1);
    const raw = Buffer.from(await (await fetch(`${tern.relayHttp}/api/messages/${list.data[0]!.id}/raw`)).arrayBuffer());
    const mail = await simpleParser(raw);
    expect(mail.subject).toBe("Hello from the JVM ✓");
    expect(mail.from!.value).toEqual([{ address: `hello@${tern.domain}`, name: "Java Test" }]);
    expect(mail.replyTo!.value[0]!.address).toBe(`hello@${tern.domain}`);
    expect(mail.headers.get("x-client")).toBe("resend-java");
    expect(mail.text!.trim()).toBe("Sent through api.resend.com");
    expect(mail.html).toContain("<b>api.resend.com</b>");
    expect(mail.messageId).toBe(`<${id}@${tern.domain}>`);

    // tern saw the request as resend-java made it: its log has the client's user agent.
    const auth = { authorization: `Bearer ${tern.apiKey}` };
    type LogSummary = { endpoint: string; method: string; user_agent: string | null; response_status: number };
    let logged: LogSummary | undefined;
    for (let i = 0; i < 50 && !logged; i++) {
      const logs = (await (await fetch(`${tern.url}/logs`, { headers: auth })).json()) as { data: LogSummary[] };
      logged = logs.data.find((l) => l.user_agent === "resend-java/4.20.0");
      if (!logged) await new Promise((r) => setTimeout(r, 100));
    }
    expect(logged).toMatchObject({ endpoint: "/emails", method: "POST", response_status: 200 });
    const email = (await (await fetch(`${tern.url}/emails/${id}`, { headers: auth })).json()) as { tags: unknown };
    expect(email.tags).toEqual([{ name: "client", value: "java" }]);
  });

  it("answers tern's own errors through the proxy, as resend-java's ResendException reads them", async () => {
    const run = await runJava(trusting(), "re_not_a_tern_key", [`hello@${tern.domain}`, "nobody@example.com", "s", "t", "<p>t</p>"]);
    expect(run, run.stderr).toMatchObject({ code: 0, status: 403 });
    expect(JSON.parse(run.body!)).toMatchObject({ statusCode: 403, name: "invalid_api_key" });
  });

  it("is refused by a JVM that does not trust the proxy's CA: the trust store is what lets it in", async () => {
    const run = await runJava([`-Djdk.net.hosts.file=${join(proxyDir, "hosts")}`], tern.apiKey, [`hello@${tern.domain}`, "never@example.com", "s", "t", "<p>t</p>"]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/SSLHandshakeException/);
    expect(run.stderr).toMatch(/PKIX path building failed/);
  });
});
