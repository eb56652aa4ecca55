// The dashboard in a real headless Chromium against the processes `npm start` runs, with
// Google and GitHub played by real local OAuth servers. Screenshots: test-results/dashboard/.
import { simpleParser } from "mailparser";
import * as OTPAuth from "otpauth";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { axeViolations, launchBrowser, shot } from "../support/browser.ts";
import { startOAuthProviders, type OAuthProviders } from "../support/oauth-providers.ts";
import { startTern, type TernProcess } from "../support/processes.ts";

let tern: TernProcess;
let oauth: OAuthProviders;
let browser: Browser;

beforeAll(async () => {
  oauth = await startOAuthProviders();
  [tern, browser] = await Promise.all([startTern({ env: oauth.env }), launchBrowser()]);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await tern?.stop();
  await oauth?.stop();
});

afterEach((ctx) => {
  // A failed step is explained by what the Worker logged.
  if (ctx.task.result?.state === "fail") console.log(tern.output().slice(-6000));
});

/** Pages answer in well under a second, but the machine may be busy. */
const POLL = { timeout: 15_000 };

const STRONG = "correct-horse-battery-staple-42";
/** The dev user's password once the reset test has set it. */
const RESET_PASSWORD = "a-brand-new-passphrase-77";

/** The link of the newest dashboard mail to an address, read from the dev relay's mailbox. */
async function mailedLink(to: string, pathPart: string, after = 0): Promise<string> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const res = await fetch(`${tern.relayHttp}/api/messages?to=${encodeURIComponent(to)}&wait=5000`);
    const list = ((await res.json()) as { data: { id: string }[] }).data;
    for (const meta of list.slice(after)) {
      const raw = Buffer.from(await (await fetch(`${tern.relayHttp}/api/messages/${meta.id}/raw`)).arrayBuffer());
      const mail = await simpleParser(raw);
      const link = (mail.text ?? "").match(/https?:\/\/\S+/g)?.find((u) => u.includes(pathPart));
      if (link) return link;
    }
    await new Promise((r) => setTimeout(r, 300));
  }
  throw new Error(`no mail with a ${pathPart} link reached ${to}`);
}

async function signIn(page: Page, email: string, password: string): Promise<void> {
  await page.goto(`${tern.url}/dashboard/sign-in`);
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
}

async function signOut(page: Page): Promise<void> {
  await page.waitForLoadState("load"); // app.js (a module script) is running by then
  await page.getByRole("button", { name: "Sign out", exact: true }).click();
  await page.waitForURL("**/dashboard/sign-in**");
}

/** A TOTP code for a step other than `usedStep` (a code is accepted once per step). */
async function totpCode(totp: OTPAuth.TOTP, usedSteps: Set<number>): Promise<string> {
  for (;;) {
    const step = Math.floor(Date.now() / 1000 / totp.period);
    if (!usedSteps.has(step)) {
      usedSteps.add(step);
      return totp.generate();
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** Turns TOTP on from Settings; returns the authenticator and the recovery codes shown. */
async function enableTotp(page: Page, password: string | null, used: Set<number>): Promise<{ totp: OTPAuth.TOTP; recovery: string[] }> {
  await page.goto(`${tern.url}/dashboard/settings`);
  if (password) await page.locator("#mfa").locator("..").getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Set up two-factor authentication" }).click();
  const uriBox = page.getByLabel("Authenticator link", { exact: true });
  await expect.poll(() => uriBox.inputValue(), POLL).toMatch(/^otpauth:\/\//);
  const totp = OTPAuth.URI.parse(await uriBox.inputValue()) as OTPAuth.TOTP;
  // The setup key is the link's secret, shown whole for typing in, not cut off at either end.
  const keyBox = page.getByLabel("Setup key", { exact: true });
  expect(await keyBox.inputValue()).toBe(new URL(await uriBox.inputValue()).searchParams.get("secret"));
  expect(await keyBox.evaluate((el) => el.scrollWidth <= el.clientWidth && el.scrollLeft === 0)).toBe(true);
  const recovery = (await page.locator("pre[data-field=backupCodes]").innerText()).split(/\s+/).filter(Boolean);
  expect(recovery.length).toBeGreaterThanOrEqual(5);
  await shot(page, `mfa-setup-${password ? "password" : "oauth"}`);
  await page.getByLabel("Code from the app").fill(await totpCode(totp, used));
  await page.getByRole("button", { name: "Turn on" }).click();
  await expect.poll(() => page.locator("#mfa").locator("..").innerText(), POLL).toContain("Every sign-in asks for a code");
  return { totp, recovery };
}

describe("the dashboard in a browser", () => {
  let context: BrowserContext;
  beforeAll(async () => {
    context = await browser.newContext();
  });
  afterAll(async () => {
    await context.close();
  });

  it("signs up, verifies the address from the mailbox, signs in, and requires TOTP or a recovery code once enabled", async () => {
    const page = await context.newPage();
    const email = "ada@example.com";
    await page.goto(`${tern.url}/dashboard/sign-up`);
    await page.getByLabel("Name").fill("Ada");
    await page.getByLabel("Email").fill(email);
    await page.getByLabel(/^Password/).fill("password123");
    await page.getByRole("button", { name: "Create account" }).click();
    await expect.poll(() => page.getByRole("alert").innerText(), POLL).toMatch(/common password|at least/);
    await shot(page, "01-sign-up-refused");
    await page.getByLabel(/^Password/).fill(STRONG);
    await page.getByRole("button", { name: "Create account" }).click();
    await page.waitForURL("**/dashboard/sign-in?notice=check-email");
    await shot(page, "02-check-email");

    // Before the address is confirmed, a sign-in is refused.
    await signIn(page, email, STRONG);
    await expect.poll(() => page.getByRole("alert").innerText(), POLL).toMatch(/verif/i);

    const link = await mailedLink(email, "verify-email");
    await page.goto(link);
    await page.waitForURL("**/dashboard/sign-in?notice=verified");
    await signIn(page, email, STRONG);
    await page.waitForURL("**/dashboard/emails");
    await shot(page, "03-signed-in");

    const used = new Set<number>();
    const { totp, recovery } = await enableTotp(page, STRONG, used);
    await shot(page, "04-mfa-enabled");
    expect(await axeViolations(page)).toEqual([]);

    await signOut(page);
    await signIn(page, email, STRONG);
    await page.waitForURL("**/dashboard/sign-in/two-factor");
    await shot(page, "05-two-factor");
    expect(await axeViolations(page)).toEqual([]);
    await page.getByLabel(/6-digit code/).fill("000000");
    await page.getByRole("button", { name: "Verify" }).click();
    await expect.poll(() => page.getByRole("alert").innerText(), POLL).toMatch(/invalid/i);
    await page.getByLabel(/6-digit code/).fill(await totpCode(totp, used));
    await page.getByRole("button", { name: "Verify" }).click();
    await page.waitForURL("**/dashboard/emails");

    await signOut(page);
    await signIn(page, email, STRONG);
    await page.waitForURL("**/dashboard/sign-in/two-factor");
    await page.getByText("Use a recovery code instead").click();
    await page.getByLabel("Recovery code").fill(recovery[0]!);
    await page.getByRole("button", { name: "Use recovery code" }).click();
    await page.waitForURL("**/dashboard/emails");

    // The used-up code is replaced by a new set, shown once.
    await page.goto(`${tern.url}/dashboard/settings`);
    const mfa = page.locator("#mfa").locator("..");
    await mfa.getByText("Make new recovery codes").first().click();
    await mfa.getByLabel("Password").last().fill(STRONG);
    await mfa.getByRole("button", { name: "Make new recovery codes" }).click();
    const fresh = mfa.locator("pre[data-field=backupCodes]").last();
    await expect.poll(async () => (await fresh.innerText()).split(/\s+/).filter(Boolean).length, POLL).toBeGreaterThanOrEqual(5);
    expect((await fresh.innerText()).split(/\s+/)).not.toContain(recovery[1]);
    await shot(page, "05b-new-recovery-codes");

    await page.goto(`${tern.url}/dashboard/audit-log`);
    const log = await page.locator("main").innerText();
    expect(log).toContain("user.signed_in");
    expect(log).toContain("mfa.enabled");
    expect(log).toContain("mfa.recovery_codes_regenerated");
    await shot(page, "06-audit-log");
    await page.close();
  });

  it("adds a passkey in Settings and signs in with it alone, in Chromium's virtual authenticator (on localhost: passkeys need a domain name)", async () => {
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    const cdp = await ctx.newCDPSession(page);
    await cdp.send("WebAuthn.enable");
    const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
      options: { protocol: "ctap2", transport: "internal", hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
    });
    // npm start's address is 127.0.0.1, where the Settings page says to use localhost instead.
    const local = tern.url.replace("127.0.0.1", "localhost");
    const email = "grace@example.com";
    await page.goto(`${local}/dashboard/sign-up`);
    await page.getByLabel("Name").fill("Grace");
    await page.getByLabel("Email").fill(email);
    await page.getByLabel(/^Password/).fill(STRONG);
    await page.getByRole("button", { name: "Create account" }).click();
    await page.waitForURL("**/dashboard/sign-in?notice=check-email");
    await page.goto(await mailedLink(email, "verify-email"));
    await page.waitForURL("**/dashboard/sign-in?notice=verified");
    await page.getByLabel("Email").fill(email);
    await page.getByLabel("Password").fill(STRONG);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await page.waitForURL("**/dashboard/emails");
    expect(new URL(page.url()).hostname).toBe("localhost");

    await page.goto(`${local}/dashboard/settings#passkeys`);
    const section = page.locator("#passkeys").locator("..");
    await expect.poll(() => section.innerText(), POLL).toContain("No passkeys yet");
    await section.getByLabel(/^Name/).fill("Grace's laptop");
    await section.getByLabel("Password").fill("not-my-password-at-all");
    await section.getByRole("button", { name: "Add a passkey" }).click();
    await expect.poll(() => section.getByRole("alert").innerText(), POLL).toMatch(/invalid password/i);
    await section.getByLabel("Password").fill(STRONG);
    await section.getByRole("button", { name: "Add a passkey" }).click();
    await expect.poll(() => section.innerText(), POLL).toContain("Grace's laptop");
    await expect.poll(() => page.locator("p.notice").innerText(), POLL).toContain('Passkey "Grace\'s laptop" added');
    await section.scrollIntoViewIfNeeded();
    await shot(page, "passkeys-settings");
    // Its owner is told by mail, with the way to remove it.
    expect(await mailedLink(email, "/dashboard/settings#passkeys")).toBe(`${local}/dashboard/settings#passkeys`);
    // The password is changed from Settings too; the page reloads under the renewed session.
    const password = page.locator("#password").locator("..");
    await password.getByLabel("Current password").fill("not-my-password-at-all");
    await password.getByLabel(/^New password/).fill("another-long-passphrase-93");
    await password.getByRole("button", { name: "Change password" }).click();
    await expect.poll(() => password.getByRole("alert").innerText(), POLL).toMatch(/invalid password/i);
    await password.getByLabel("Current password").fill(STRONG);
    await password.getByRole("button", { name: "Change password" }).click();
    await expect.poll(() => page.locator("p.notice").innerText(), POLL).toContain("Your password is changed.");
    const held = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
    expect(held.credentials).toHaveLength(1);
    expect(held.credentials[0]).toMatchObject({ isResidentCredential: true, rpId: "localhost" });

    await signOut(page);
    await shot(page, "passkeys-sign-in");
    await page.getByRole("button", { name: "Sign in with a passkey" }).click();
    await page.waitForURL("**/dashboard/emails");
    expect(await page.locator("nav.side").innerText()).toContain(email);
    await page.goto(`${local}/dashboard/audit-log`);
    const log = await page.locator("main").innerText();
    expect(log).toContain("passkey.added");
    expect(log).toMatch(/user\.signed_in[\s\S]*passkey/);
    // The same dashboard at 127.0.0.1 offers no passkey and says why.
    const ip = await ctx.newPage();
    await ip.goto(`${tern.url}/dashboard/sign-in`);
    expect(await ip.getByRole("button", { name: "Sign in with a passkey" }).count()).toBe(0);
    await ctx.close();
  });

  it("signs in with Google and with GitHub through real OAuth servers (PKCE and state), and asks an OAuth user for their second factor", async () => {
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    await page.goto(`${tern.url}/dashboard/sign-in`);
    await shot(page, "07-sign-in-providers");
    await page.getByRole("button", { name: "Continue with Google" }).click();
    await page.waitForURL("**/dashboard/emails");
    expect(await page.locator("nav.side").innerText()).toContain(oauth.google.identity.email);
    await shot(page, "08-google-signed-in");

    // The gap better-auth leaves: its second factor guards password sign-ins only.
    const used = new Set<number>();
    const { totp } = await enableTotp(page, null, used);
    await signOut(page);
    await page.getByRole("button", { name: "Continue with Google" }).click();
    await page.waitForURL("**/dashboard/sign-in/two-factor");
    expect(await ctx.cookies()).not.toContainEqual(expect.objectContaining({ name: "tern.session_token" }));
    await page.goto(`${tern.url}/dashboard/settings`);
    await page.waitForURL("**/dashboard/sign-in");
    await page.goto(`${tern.url}/dashboard/sign-in`);
    await page.getByRole("button", { name: "Continue with Google" }).click();
    await page.waitForURL("**/dashboard/sign-in/two-factor");
    await page.getByLabel(/6-digit code/).fill(await totpCode(totp, used));
    await page.getByRole("button", { name: "Verify" }).click();
    await page.waitForURL("**/dashboard/emails");
    // With no password to ask for, turning the second factor off takes a current code.
    await page.goto(`${tern.url}/dashboard/settings`);
    const mfa = page.locator("#mfa").locator("..");
    page.on("dialog", (d) => void d.accept());
    await mfa.getByLabel("Code from the app, or a recovery code").first().fill("000000");
    await mfa.getByRole("button", { name: "Turn off" }).click();
    await expect.poll(() => mfa.getByRole("alert").innerText(), POLL).toMatch(/That code is not right/);
    await shot(page, "mfa-oauth-turn-off-refused");
    await mfa.getByLabel("Code from the app, or a recovery code").first().fill(totp.generate()); // a settings change may reuse the step's code
    await mfa.getByRole("button", { name: "Turn off" }).click();
    await expect.poll(() => mfa.innerText(), POLL).toContain("Set up two-factor authentication");
    await signOut(page);

    await page.getByRole("button", { name: "Continue with GitHub" }).click();
    await page.waitForURL("**/dashboard/emails");
    expect(await page.locator("nav.side").innerText()).toContain(oauth.github.identity.email);
    await shot(page, "09-github-signed-in");
    expect(oauth.withoutPkce()).toBe(0);
    await ctx.close();
  });

  it("refuses a forged or missing CSRF token, a replayed cookie after sign-out, API keys on the dashboard and sessions on the API", async () => {
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    const dev = JSON.parse(await import("node:fs").then((fs) => fs.readFileSync(`${tern.stateDir}/tern/dev-user.json`, "utf8"))) as { email: string; password: string };
    await signIn(page, dev.email, dev.password);
    await page.waitForURL("**/dashboard/emails");
    const cookie = (await ctx.cookies()).map((c) => `${c.name}=${c.value}`).join("; ");
    const origin = tern.url;
    const call = (path: string, headers: Record<string, string>) =>
      fetch(`${tern.url}${path}`, { method: "POST", redirect: "manual", headers: { "content-type": "application/json", origin, ...headers }, body: JSON.stringify({ name: "Hijacked" }) });
    expect((await call("/dashboard/api/account", { cookie })).status).toBe(403);
    expect((await call("/dashboard/api/account", { cookie, "x-csrf-token": "forged-token" })).status).toBe(403);
    const csrf = await page.locator('meta[name="csrf-token"]').getAttribute("content");
    expect((await call("/dashboard/api/account", { cookie, "x-csrf-token": csrf!, origin: "https://evil.example" })).status).toBe(403);
    // The same request from the page's own origin with its token is accepted.
    const renamed = await fetch(`${tern.url}/dashboard/api/account`, { method: "POST", headers: { "content-type": "application/json", origin, cookie, "x-csrf-token": csrf! }, body: JSON.stringify({ name: "Dev account" }) });
    expect(renamed.status).toBe(200);

    // A session cookie never authenticates the REST API; an API key never opens the dashboard.
    expect((await fetch(`${tern.url}/api-keys`, { headers: { cookie } })).status).toBe(401);
    const withKey = await fetch(`${tern.url}/dashboard/api/nothing`, { headers: { authorization: `Bearer ${tern.apiKey}` } });
    expect(withKey.status).toBe(401);
    expect((await fetch(`${tern.url}/dashboard/settings`, { redirect: "manual", headers: { authorization: `Bearer ${tern.apiKey}` } })).status).toBe(303);

    await signOut(page);
    // The stolen cookie, replayed after its session ended, opens nothing.
    const replay = await fetch(`${tern.url}/dashboard/settings`, { redirect: "manual", headers: { cookie } });
    expect(replay.status).toBe(303);
    expect(replay.headers.get("location")).toBe("/dashboard/sign-in");
    expect((await call("/dashboard/api/account", { cookie, "x-csrf-token": csrf! })).status).toBe(401);
    await ctx.close();
  });

  it("finds an email sent with the API, adds a domain, creates and revokes a key; a member cannot make keys; accounts never see each other", async () => {
    const api = (path: string, init: RequestInit = {}) =>
      fetch(`${tern.url}${path}`, { ...init, headers: { authorization: `Bearer ${tern.apiKey}`, "content-type": "application/json", ...(init.headers ?? {}) } });
    const sent = (await (await api("/emails", { method: "POST", body: JSON.stringify({ from: "Tern <hello@tern.test>", to: "reader@example.com", subject: "Dashboard proof", html: "<h1>Hello</h1><p>from the API</p>", tags: [{ name: "kind", value: "proof" }] }) })).json()) as { id: string };
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    const dev = JSON.parse(await import("node:fs").then((fs) => fs.readFileSync(`${tern.stateDir}/tern/dev-user.json`, "utf8"))) as { email: string; password: string };
    await signIn(page, dev.email, dev.password);
    await page.waitForURL("**/dashboard/emails");

    // Emails: search by recipient, open it, see its timeline and its HTML in a sandboxed frame.
    await page.getByRole("textbox", { name: "Search" }).fill("reader@example");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.getByRole("link", { name: "Dashboard proof" }).click();
    await page.waitForURL(`**/dashboard/emails/${sent.id}`);
    await expect.poll(async () => { await page.reload(); return page.locator("ol.timeline").innerText(); }, POLL).toContain("delivered");
    expect(await page.locator("iframe.preview").getAttribute("sandbox")).toBe("");
    expect(await page.frameLocator("iframe.preview").locator("h1").innerText()).toBe("Hello");
    await page.getByText("Raw message", { exact: true }).click();
    expect(await page.locator("main").innerText()).toContain("Subject: Dashboard proof");
    await shot(page, "10-email");
    expect(await axeViolations(page)).toEqual([]);
    await page.goto(`${tern.url}/dashboard/emails?status=bounced`);
    expect(await page.locator("main").innerText()).toContain("No email matches these filters.");
    await page.goto(`${tern.url}/dashboard/emails?tag=kind:proof`);
    expect(await page.locator("main").innerText()).toContain("Dashboard proof");
    await shot(page, "11-emails-filtered");
    // Searches of any length and characters (D1 refuses a LIKE pattern over 50 bytes).
    const long = "Dashboard proof: 50% of_it \\ caf\u00e9, and a few more words after that";
    expect((await page.goto(`${tern.url}/dashboard/emails?q=${encodeURIComponent(long)}`))!.status()).toBe(200);
    expect(await page.locator("main").innerText()).toContain("No email matches these filters.");
    expect((await page.goto(`${tern.url}/dashboard/emails?q=${encodeURIComponent("Dashboard proof")}`))!.status()).toBe(200);
    expect(await page.locator("main").innerText()).toContain("Dashboard proof");

    // Logs: the send's request, opened: its redacted body and a link back to the email it made.
    await page.getByRole("link", { name: "Logs", exact: true }).click();
    await page.getByRole("link", { name: "POST /emails", exact: true }).first().click();
    await page.waitForURL("**/dashboard/logs/*");
    const logId = new URL(page.url()).pathname.split("/").pop();
    expect(await page.locator("pre.json").first().innerText()).toContain('"subject": "Dashboard proof"');
    await expect.poll(() => page.getByRole("link", { name: sent.id }).count(), POLL).toBe(1);
    await shot(page, "11b-log");
    expect(await axeViolations(page)).toEqual([]);

    // Domains: add one with a region and read the records to publish.
    await page.goto(`${tern.url}/dashboard/domains`);
    await page.getByLabel("Domain", { exact: true }).fill("news.example.org");
    await page.getByLabel("Region").selectOption("eu-west-1");
    await page.getByRole("button", { name: "Add domain" }).click();
    await page.waitForURL("**/dashboard/domains/*"); // the new domain's page, with its records
    const domainId = new URL(page.url()).pathname.split("/").pop();
    const records = await page.locator("table").innerText();
    expect(records).toMatch(/DKIM\s+signs each message\s+TXT/);
    expect(records).toContain("_domainkey");
    expect(records).toContain("v=spf1");
    expect(records).toContain("v=DMARC1; p=none");
    expect(await page.locator("main").innerText()).toContain("eu-west-1");
    // npm start's dev DNS zone (dev/dns.ts) answers for it: Verify works offline.
    await page.getByRole("button", { name: "Verify DNS records now" }).click();
    await expect.poll(() => page.locator("main").innerText(), POLL).toContain("Every record was found: the domain is verified");
    expect(await page.locator("main .badge.verified").count()).toBeGreaterThanOrEqual(4); // the domain, DKIM, SPF MX and TXT
    await shot(page, "12a-domain-verified");
    await page.getByLabel("Track opens").check();
    await page.getByRole("textbox", { name: /Tracking host/ }).fill("links");
    await page.getByRole("button", { name: "Save settings" }).click();
    await expect.poll(() => page.locator("main").innerText(), POLL).toContain("opens on");
    // The domain's own tracking host: its CNAME joins the records, and is used once verified.
    expect(await page.locator("main").innerText()).toContain("links use links.news.example.org once its Tracking record below is verified");
    expect(await page.locator("table").innerText()).toMatch(/Tracking\s+open and click links\s+CNAME\s+links/);
    page.once("dialog", (d) => void d.accept());
    await page.getByRole("button", { name: "Rotate the DKIM key" }).click();
    await expect.poll(async () => ((await page.locator("table").innerText()).match(/_domainkey/g) ?? []).length, POLL).toBe(2);
    await shot(page, "12-domain-records");
    expect(await axeViolations(page)).toEqual([]);

    // API keys: the token is shown once, works, and stops working when revoked.
    await page.goto(`${tern.url}/dashboard/api-keys`);
    await page.getByLabel("Name").fill("Browser key");
    await page.getByRole("button", { name: "Create key" }).click();
    const tokenBox = page.getByLabel("New API key");
    await expect.poll(() => tokenBox.inputValue(), POLL).toMatch(/^tern_/);
    const token = await tokenBox.inputValue();
    // The list made before the key lacks it: hidden until "Done" reloads the page.
    expect(await page.locator("#key-list").getAttribute("hidden")).not.toBeNull();
    await shot(page, "13-key-created");
    expect((await fetch(`${tern.url}/domains`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    await page.goto(`${tern.url}/dashboard/api-keys`);
    expect(await page.locator("main").innerText()).not.toContain(token);
    page.once("dialog", (d) => void d.accept());
    await page.getByRole("button", { name: "Revoke Browser key" }).click();
    await expect.poll(() => page.locator("main").innerText(), POLL).not.toContain("Browser key");
    await expect.poll(async () => (await fetch(`${tern.url}/domains`, { headers: { authorization: `Bearer ${token}` } })).status, { timeout: 15_000 }).toBe(403); // invalid_api_key

    // Webhooks: add one, then change its URL and events on its page (a group's select-all).
    await page.goto(`${tern.url}/dashboard/webhooks`);
    await page.getByLabel("Endpoint URL").fill("http://127.0.0.1:9/edit-me");
    await page.getByRole("button", { name: "Add endpoint" }).click();
    await expect.poll(() => page.getByLabel("Signing secret").inputValue(), POLL).toMatch(/^whsec_/);
    // The list under it, made before the endpoint, is hidden rather than saying there is none.
    expect(await page.locator("#webhook-list").getAttribute("hidden")).not.toBeNull();
    await shot(page, "13a-webhook-added");
    await page.goto(`${tern.url}/dashboard/webhooks`);
    await page.getByRole("link", { name: "http://127.0.0.1:9/edit-me" }).click();
    await page.getByText("Edit the endpoint").click();
    const edit = page.getByRole("form", { name: "Edit the webhook endpoint" });
    await edit.getByLabel("Endpoint URL").fill("http://127.0.0.1:9/edited");
    await edit.getByLabel("All email events").uncheck();
    await edit.getByLabel("email.bounced").check();
    expect(await edit.getByLabel("All email events").evaluate((el) => (el as unknown as { indeterminate: boolean }).indeterminate)).toBe(true);
    await edit.getByLabel("All contact events").check();
    await shot(page, "13b-webhook-edit");
    await edit.getByRole("button", { name: "Save changes" }).click();
    await expect.poll(() => page.locator("dl.fields").innerText(), POLL).toContain("http://127.0.0.1:9/edited");
    expect(await page.locator("dl.fields").innerText()).toContain("email.bounced, contact.created, contact.updated, contact.deleted");
    expect(await axeViolations(page)).toEqual([]);

    // Suppressions: added by hand here, honoured by the API's send path.
    await page.goto(`${tern.url}/dashboard/suppressions`);
    await page.getByRole("textbox", { name: "Address" }).fill("blocked@example.com");
    await page.getByRole("button", { name: "Suppress" }).click();
    await expect.poll(() => page.locator("table").innerText(), POLL).toContain("blocked@example.com");
    await shot(page, "14a-suppressions");
    const blocked = (await (await api("/emails", { method: "POST", body: JSON.stringify({ from: "hello@tern.test", to: "blocked@example.com", subject: "Blocked", text: "x" }) })).json()) as { id: string };
    await page.goto(`${tern.url}/dashboard/emails/${blocked.id}`);
    await expect.poll(async () => { await page.reload(); return page.locator("ol.timeline").innerText(); }, POLL).toContain("suppressed");
    await page.goto(`${tern.url}/dashboard/received`);
    expect(await page.locator("main").innerText()).toContain("No mail received yet.");

    // An invitation sent through tern; the invited member sees keys but cannot make one.
    await page.goto(`${tern.url}/dashboard/settings`);
    await page.locator("form[data-api='/dashboard/api/invitations']").getByLabel("Email").fill("mia@example.com");
    await page.getByRole("button", { name: "Send invitation" }).click();
    await expect.poll(() => page.locator("main").innerText(), POLL).toContain("Invitation sent to mia@example.com as member");
    // Inviting a member (yourself) is refused; inviting a waiting address renews its invitation.
    await page.locator("form[data-api='/dashboard/api/invitations']").getByLabel("Email").fill(dev.email);
    await page.getByRole("button", { name: "Send invitation" }).click();
    await expect.poll(() => page.locator("form[data-api='/dashboard/api/invitations'] [role=alert]").innerText(), POLL).toContain(`${dev.email} is already a member`);
    await page.locator("form[data-api='/dashboard/api/invitations']").getByLabel("Email").fill("mia@example.com");
    await page.getByRole("button", { name: "Send invitation" }).click();
    await expect.poll(() => page.locator("main").innerText(), POLL).toContain("mia@example.com was already invited: a new link went out");
    expect(((await page.locator("main").innerText()).match(/mia@example\.com\s+member/g) ?? []).length).toBe(1);
    await shot(page, "14b-invitation-renewed");
    // The renewed link is in the second mail (the first one's no longer works).
    await expect.poll(async () => ((await (await fetch(`${tern.relayHttp}/api/messages?to=mia@example.com`)).json()) as { data: unknown[] }).data.length, POLL).toBe(2);
    const invitation = await mailedLink("mia@example.com", "/dashboard/invitations/");
    const member = await (await browser.newContext()).newPage();
    await member.goto(`${tern.url}/dashboard/sign-up`);
    await member.getByLabel("Name").fill("Mia");
    await member.getByLabel("Email").fill("mia@example.com");
    await member.getByLabel(/^Password/).fill(STRONG);
    await member.getByRole("button", { name: "Create account" }).click();
    await member.waitForURL("**/dashboard/sign-in?notice=check-email");
    await member.goto(await mailedLink("mia@example.com", "verify-email"));
    await signIn(member, "mia@example.com", STRONG);
    await member.waitForURL("**/dashboard/emails");
    await member.goto(invitation);
    await member.getByRole("button", { name: /^Join/ }).click();
    await member.waitForURL("**/dashboard/emails");
    expect(await member.locator("nav.side").innerText()).toContain("member");
    await member.goto(`${tern.url}/dashboard/api-keys`);
    expect(await member.locator("main").innerText()).toContain("Only owners and admins create and revoke API keys.");
    await shot(member, "14-member-api-keys");
    const memberCsrf = (await member.locator('meta[name="csrf-token"]').getAttribute("content"))!;
    const memberCookie = (await member.context().cookies()).map((c) => `${c.name}=${c.value}`).join("; ");
    const refused = await fetch(`${tern.url}/dashboard/api/api-keys`, { method: "POST", headers: { "content-type": "application/json", origin: tern.url, cookie: memberCookie, "x-csrf-token": memberCsrf }, body: JSON.stringify({ name: "sneaky" }) });
    expect(refused.status).toBe(403);
    // The owner makes the member an admin; now the same request makes a key.
    await page.goto(`${tern.url}/dashboard/settings`);
    await page.getByLabel("Role of mia@example.com").selectOption("admin");
    await Promise.all([page.waitForEvent("load"), page.getByRole("button", { name: "Change", exact: true }).click()]); // the page reloads
    await expect.poll(async () => (await fetch(`${tern.url}/dashboard/api/api-keys`, { method: "POST", headers: { "content-type": "application/json", origin: tern.url, cookie: memberCookie, "x-csrf-token": memberCsrf }, body: JSON.stringify({ name: "by an admin" }) })).status, POLL).toBe(201);
    // Only an owner takes a copy of the account's data.
    expect((await fetch(`${tern.url}/dashboard/api/export`, { headers: { cookie: memberCookie } })).status).toBe(403);
    await page.goto(`${tern.url}/dashboard/settings`);
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("link", { name: "Export account data" }).click()]);
    const exported = JSON.parse(await import("node:fs").then(async (fs) => fs.readFileSync((await download.path())!, "utf8"))) as { tables: Record<string, any[]> };
    const t = exported.tables;
    expect(t.emails!.map((e: { id: string }) => e.id)).toContain(sent.id);
    expect(t.email_events!.filter((e: { email_id: string }) => e.email_id === sent.id).map((e: { type: string }) => e.type)).toContain("delivered");
    const dom = t.domains!.find((d: { name: string }) => d.name === "news.example.org");
    expect(t.dkim_keys!.filter((k: { domain_id: string }) => k.domain_id === dom.id)).toHaveLength(2);
    expect(JSON.stringify(exported)).not.toMatch(/private_key|token_hash|secret_sealed|BEGIN PRIVATE/i);
    expect(t.suppressions!.map((x: { email: string }) => x.email)).toContain("blocked@example.com");
    expect(t.audit_log!.map((x: { action: string }) => x.action)).toContain("api_key.revoked");
    // Nor does anyone but an owner delete it.
    const del = await fetch(`${tern.url}/dashboard/api/account/delete`, { method: "POST", headers: { "content-type": "application/json", origin: tern.url, cookie: memberCookie, "x-csrf-token": memberCsrf }, body: JSON.stringify({ name: "Dev account" }) });
    expect(del.status).toBe(403);

    // The member sees the dev account's mail.
    await member.goto(`${tern.url}/dashboard/emails/${sent.id}`);
    expect(await member.locator("h1").innerText()).toBe("Dashboard proof");
    await member.context().close();

    // Another account (Ada's, from the first test) sees none of it, through pages or endpoints.
    const outsider = await (await browser.newContext()).newPage();
    await outsider.goto(`${tern.url}/dashboard/sign-up`);
    await outsider.getByLabel("Name").fill("Otto");
    await outsider.getByLabel("Email").fill("otto@example.com");
    await outsider.getByLabel(/^Password/).fill(STRONG);
    await outsider.getByRole("button", { name: "Create account" }).click();
    await outsider.waitForURL("**/dashboard/sign-in?notice=check-email");
    await outsider.goto(await mailedLink("otto@example.com", "verify-email"));
    await signIn(outsider, "otto@example.com", STRONG);
    await outsider.waitForURL("**/dashboard/emails");
    expect(await outsider.locator("main").innerText()).toContain("No emails yet.");
    await shot(outsider, "15-empty-emails");
    // The domain last: its refusal's way back is checked below.
    for (const path of [`/dashboard/emails/${sent.id}`, `/dashboard/logs/${logId}`, `/dashboard/domains/${domainId}`]) {
      const res = await outsider.goto(`${tern.url}${path}`);
      expect(res!.status(), path).toBe(404);
    }
    // A refusal keeps the dashboard's frame: navigation, and the way back to the section.
    expect(await outsider.getByRole("navigation", { name: "Dashboard" }).isVisible()).toBe(true);
    expect(await outsider.getByRole("main").getByRole("link", { name: "Domains" }).getAttribute("href")).toBe("/dashboard/domains");
    await shot(outsider, "16-not-found");
    expect(await axeViolations(outsider)).toEqual([]);
    await outsider.goto(`${tern.url}/dashboard/emails?q=${sent.id}`);
    expect(await outsider.locator("main").innerText()).not.toContain("Dashboard proof");
    const oCsrf = (await outsider.locator('meta[name="csrf-token"]').getAttribute("content"))!;
    const oCookie = (await outsider.context().cookies()).map((c) => `${c.name}=${c.value}`).join("; ");
    const post = (path: string, data: unknown) => fetch(`${tern.url}${path}`, { method: "POST", headers: { "content-type": "application/json", origin: tern.url, cookie: oCookie, "x-csrf-token": oCsrf }, body: JSON.stringify(data) });
    expect((await post(`/dashboard/api/domains/${domainId}/delete`, {})).status).toBe(404);
    expect((await post(`/dashboard/api/emails/${sent.id}/cancel`, {})).status).toBe(404);
    const devAccount = JSON.parse(await import("node:fs").then((fs) => fs.readFileSync(`${tern.stateDir}/tern/dev-account.json`, "utf8"))) as { accountId: string };
    expect((await post("/dashboard/api/switch-account", { accountId: devAccount.accountId })).status).toBe(404);
    await outsider.context().close();
    await ctx.close();
  });

  it("resets a forgotten password by an emailed link, ending the sessions the old password opened (in dark mode)", async () => {
    const ctx = await browser.newContext({ colorScheme: "dark" });
    const page = await ctx.newPage();
    const dev = JSON.parse(await import("node:fs").then((fs) => fs.readFileSync(`${tern.stateDir}/tern/dev-user.json`, "utf8"))) as { email: string; password: string };
    await signIn(page, dev.email, dev.password);
    await page.waitForURL("**/dashboard/emails");
    await shot(page, "16-emails-dark");
    const oldCookie = (await ctx.cookies()).map((c) => `${c.name}=${c.value}`).join("; ");
    const before = (await (await fetch(`${tern.relayHttp}/api/messages?to=${encodeURIComponent(dev.email)}`)).json() as { data: unknown[] }).data.length;

    const other = await (await browser.newContext({ colorScheme: "dark" })).newPage();
    await other.goto(`${tern.url}/dashboard/forgot-password`);
    await other.getByLabel("Email").fill(dev.email);
    await other.getByRole("button", { name: "Email me a link" }).click();
    await expect.poll(() => other.getByRole("status").innerText(), POLL).toContain("on its way");
    await other.goto(await mailedLink(dev.email, "reset-password", before));
    await other.waitForURL("**/dashboard/reset-password?token=*");
    await shot(other, "17-reset-password-dark");
    const fresh = RESET_PASSWORD;
    await other.getByLabel(/New password/).fill(fresh);
    await other.getByRole("button", { name: "Set password" }).click();
    await other.waitForURL("**/dashboard/sign-in?notice=reset");
    await signIn(other, dev.email, fresh);
    await other.waitForURL("**/dashboard/emails");
    const stale = await fetch(`${tern.url}/dashboard/settings`, { redirect: "manual", headers: { cookie: oldCookie } });
    expect(stale.status).toBe(303);
    await other.context().close();
    await ctx.close();
  });

  it("deletes an account when its owner types its name, signs the owner out, and their sign-in is gone", async () => {
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    await page.goto(`${tern.url}/dashboard/sign-up`);
    await page.getByLabel("Name").fill("Dora");
    await page.getByLabel("Email").fill("dora@example.com");
    await page.getByLabel(/^Password/).fill(STRONG);
    await page.getByRole("button", { name: "Create account" }).click();
    await page.waitForURL("**/dashboard/sign-in?notice=check-email");
    await page.goto(await mailedLink("dora@example.com", "verify-email"));
    await signIn(page, "dora@example.com", STRONG);
    await page.waitForURL("**/dashboard/emails");
    await page.goto(`${tern.url}/dashboard/settings`);
    await page.waitForLoadState("load");
    const cookie = (await ctx.cookies()).map((c) => `${c.name}=${c.value}`).join("; ");
    const name = (await page.locator("#delete-account + p + form strong").innerText()).trim();
    const confirmBox = page.getByLabel(/Type the account's name/);
    page.on("dialog", (d) => void d.accept());
    await confirmBox.fill(`${name} (not quite)`);
    await page.getByRole("button", { name: "Delete account" }).click();
    await expect.poll(() => page.getByRole("alert").first().innerText(), POLL).toContain("exactly to confirm");
    await shot(page, "18-delete-account-refused");
    await confirmBox.fill(name);
    await page.getByRole("button", { name: "Delete account" }).click();
    await page.waitForURL("**/dashboard/sign-in?notice=account-deleted");
    expect(await page.getByRole("status").innerText()).toContain("deleted");
    await shot(page, "19-account-deleted");
    // The old cookie opens nothing, and the user (of no other account) is gone with the account.
    expect((await fetch(`${tern.url}/dashboard/settings`, { redirect: "manual", headers: { cookie } })).status).toBe(303);
    await signIn(page, "dora@example.com", STRONG);
    await expect.poll(() => page.getByRole("alert").first().innerText(), POLL).toMatch(/invalid|incorrect|wrong/i);
    await ctx.close();
  });

  it("throttles repeated wrong passwords for an address", async () => {
    const attempt = (password: string) =>
      fetch(`${tern.url}/dashboard/api/auth/sign-in/email`, { method: "POST", headers: { "content-type": "application/json", origin: tern.url, "cf-connecting-ip": "198.51.100.7" }, body: JSON.stringify({ email: "victim@example.com", password }) });
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) statuses.push((await attempt(`wrong-password-${i}`)).status);
    expect(statuses.slice(0, 5).every((s) => s === 401)).toBe(true);
    expect(statuses.slice(5)).toEqual([429, 429]);
    const refused = await attempt("wrong-password-x");
    expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
  });
  it("manages contacts: segments, topics, properties, add, edit, CSV import, search, remove; downloads a received attachment", async () => {
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    const dev = JSON.parse(await import("node:fs").then((fs) => fs.readFileSync(`${tern.stateDir}/tern/dev-user.json`, "utf8"))) as { email: string; password: string };
    // The reset test before this one changed the dev user's password.
    await signIn(page, dev.email, RESET_PASSWORD);
    await page.waitForURL("**/dashboard/emails");
    const main = () => page.locator("main").innerText();

    await page.goto(`${tern.url}/dashboard/contacts`);
    expect(await main()).toContain("No contacts yet.");
    await shot(page, "20-contacts-empty");
    await page.getByRole("link", { name: "Segments" }).click();
    await page.getByLabel("Name").fill("Readers");
    await page.getByRole("button", { name: "Create segment" }).click();
    await expect.poll(() => page.locator("table").innerText(), POLL).toMatch(/Readers\s+0/);
    await page.goto(`${tern.url}/dashboard/contacts/topics`);
    await page.getByLabel("Name").fill("Product news");
    await page.getByRole("button", { name: "Create topic" }).click();
    await expect.poll(() => page.locator("table").innerText(), POLL).toContain("everyone, unless they opt out");
    await shot(page, "21-topics");
    await page.goto(`${tern.url}/dashboard/contacts/properties`);
    await page.getByLabel("Key").fill("plan");
    await page.getByLabel("Fallback").fill("free");
    await page.getByRole("button", { name: "Create property" }).click();
    await expect.poll(() => page.getByLabel("Fallback of plan", { exact: true }).inputValue(), POLL).toBe("free");

    // Add one by hand into the segment, then edit its name, a property and a topic choice.
    await page.goto(`${tern.url}/dashboard/contacts`);
    await page.getByLabel("Email").fill("grace@example.com");
    await page.getByLabel("First name").fill("Grace");
    await page.getByRole("checkbox", { name: "Readers" }).check();
    await page.getByRole("button", { name: "Add contact" }).click();
    await page.getByRole("link", { name: "grace@example.com" }).click();
    await page.waitForURL("**/dashboard/contacts/*");
    await page.getByLabel("Last name").fill("Hopper");
    await page.getByLabel(/^plan/).fill("team");
    await page.getByRole("button", { name: "Save changes" }).click();
    await expect.poll(async () => { await page.reload(); return page.getByLabel("Last name").inputValue(); }, POLL).toBe("Hopper");
    await page.getByLabel("Product news").selectOption("opt_out");
    await page.getByRole("button", { name: "Save topics" }).click();
    await expect.poll(async () => { await page.reload(); return page.getByLabel("Product news").inputValue(); }, POLL).toBe("opt_out");
    expect(await page.getByLabel(/^plan/).inputValue()).toBe("team");
    expect(await page.getByRole("link", { name: "Emails sent to this address" }).getAttribute("href")).toBe("/dashboard/emails?q=grace%40example.com");
    await shot(page, "22-contact");
    expect(await axeViolations(page)).toEqual([]);

    // A CSV file: its columns are offered (and guessed), a bad row is counted as failed.
    await page.goto(`${tern.url}/dashboard/contacts/imports`);
    // A workbook is refused with what to do, before any column is offered.
    await page.getByLabel("CSV file", { exact: true }).setInputFiles({ name: "people.xlsx", mimeType: "application/octet-stream", buffer: Buffer.from([0x50, 0x4b, 3, 4, 20, 0, 6, 0, 0, 0]) });
    await expect.poll(() => page.locator("form[data-import] [data-error]").innerText(), POLL).toMatch(/spreadsheet workbook.*CSV UTF-8/);
    expect(await page.locator('select[data-column="email"]').isDisabled()).toBe(true);
    await shot(page, "23a-import-refused");
    await page.getByLabel("CSV file", { exact: true }).setInputFiles({ name: "people.csv", mimeType: "text/csv", buffer: Buffer.from("Email,First name,Plan\nalan@example.com,Alan,pro\nbarbara@example.com,Barbara,free\nnot-an-address,X,free\n") });
    await expect.poll(() => page.locator('select[data-column="email"]').inputValue(), POLL).toBe("Email");
    expect(await page.locator('select[data-column="first_name"]').inputValue()).toBe("First name");
    expect(await page.locator('select[data-property="plan"]').inputValue()).toBe("Plan");
    await page.getByRole("checkbox", { name: "Readers" }).check();
    // The page reloads itself once the upload is answered: a reload of the test's own before
    // that would race it (and could cut the upload off).
    const answered = page.waitForEvent("load");
    await page.getByRole("button", { name: "Import" }).click();
    await answered;
    await expect.poll(async () => { await page.reload(); return page.locator("tr[data-import-id]").first().innerText(); }, { timeout: 30_000 }).toMatch(/completed\s+3\s+2\s+0\s+0\s+1/);
    await shot(page, "23-import-done");
    expect(await axeViolations(page)).toEqual([]);
    // Its page says which row failed and why.
    await page.getByRole("link", { name: /^1 failed: see which rows/ }).first().click();
    await expect.poll(() => page.locator("main table").innerText(), POLL).toMatch(/4\s+not-an-address\s+Not a valid email address/);
    await shot(page, "23b-import-failures");
    expect(await axeViolations(page)).toEqual([]);

    // Search by part of a name; filter by the segment; remove one.
    await page.goto(`${tern.url}/dashboard/contacts`);
    await page.getByRole("searchbox", { name: "Search" }).fill("barb");
    await page.getByRole("button", { name: "Search" }).click();
    await page.waitForURL((u) => u.pathname === "/dashboard/contacts" && u.searchParams.get("q") === "barb");
    expect(await page.locator("table").innerText()).toContain("barbara@example.com");
    expect(await page.locator("table").innerText()).not.toContain("alan@example.com");
    await shot(page, "24-contacts-search");
    await page.goto(`${tern.url}/dashboard/contacts/segments`);
    expect(await main()).toMatch(/Readers\s+3/);
    await shot(page, "24b-segments");
    await page.goto(`${tern.url}/dashboard/contacts`);
    await page.getByRole("link", { name: "alan@example.com" }).click();
    await page.waitForURL("**/dashboard/contacts/*"); // loaded: app.js handles the form
    page.once("dialog", (d) => void d.accept());
    await page.getByRole("button", { name: "Remove contact" }).click();
    await page.waitForURL("**/dashboard/contacts");
    expect(await page.locator("table").innerText()).not.toContain("alan@example.com");
    await shot(page, "25-contacts");
    expect(await axeViolations(page)).toEqual([]);

    // Received mail's attachment, downloaded through the session (not an API key's link).
    const api = (method: string, path: string, body?: unknown) => fetch(`${tern.url}${path}`, { method, headers: { authorization: `Bearer ${tern.apiKey}`, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
    const domains = ((await (await api("GET", "/domains")).json()) as { data: { id: string; name: string }[] }).data;
    expect((await api("PATCH", `/domains/${domains.find((d) => d.name === tern.domain)!.id}`, { receiving: true })).status).toBe(200);
    const raw = [
      "From: Alice <alice@sender.example>", `To: files@${tern.domain}`, "Subject: Notes attached", "Message-ID: <notes-e2e@sender.example>", "MIME-Version: 1.0",
      'Content-Type: multipart/mixed; boundary="b1"', "", "--b1", "Content-Type: text/plain", "", "See the notes.", "--b1",
      'Content-Type: text/plain; name="notes.txt"', 'Content-Disposition: attachment; filename="notes.txt"', "Content-Transfer-Encoding: base64", "",
      Buffer.from("attached words\n").toString("base64"), "--b1--", "",
    ].join("\r\n");
    const received = await fetch(`${tern.url}/cdn-cgi/local/email?from=alice@sender.example&to=files@${tern.domain}`, { method: "POST", body: raw });
    expect(received.status, await received.text()).toBeLessThan(300);
    await page.goto(`${tern.url}/dashboard/received`);
    await page.getByRole("link", { name: "Notes attached" }).click();
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("link", { name: "notes.txt" }).click()]);
    expect(download.suggestedFilename()).toBe("notes.txt");
    expect(await import("node:fs").then(async (fs) => fs.readFileSync((await download.path())!, "utf8"))).toBe("attached words\n");
    await shot(page, "26-received-attachment");
    expect(await axeViolations(page)).toEqual([]);

    // On a phone (390 px wide) no page scrolls sideways: the navigation is one bar whose links
    // scroll, tables scroll in their own box, long values wrap. A scheduled email's list date
    // says when it will go.
    const later = new Date(Date.now() + 3 * 86_400_000);
    expect((await api("POST", "/emails", { from: `Tern <hello@${tern.domain}>`, to: "later@example.com", subject: "Sent later", text: "later", scheduled_at: later.toISOString() })).status).toBe(200);
    await page.setViewportSize({ width: 390, height: 844 });
    for (const path of ["emails", "broadcasts", "contacts", "contacts/segments", "domains", "webhooks", "suppressions", "settings", "audit-log"]) {
      await page.goto(`${tern.url}/dashboard/${path}`);
      expect(await page.evaluate("document.scrollingElement.scrollWidth - innerWidth"), path).toBeLessThanOrEqual(0);
      // The current page's link is in view in the navigation bar, however far along it is.
      const box = (await page.locator("nav.side a[aria-current=page]").boundingBox())!;
      expect(box.x >= 0 && box.x + box.width <= 390, path).toBe(true);
      await shot(page, `27-phone-${path.replace("/", "-")}`);
      if (path === "emails") expect(await page.locator("tr", { hasText: "Sent later" }).innerText()).toContain(`Scheduled for ${later.toISOString().slice(0, 10)}`);
      if (path === "settings") {
        // Sessions name the browser; the full User-Agent is its title.
        const browserCell = page.locator("section[aria-labelledby=sessions] tbody td[title]").first();
        expect(await browserCell.innerText()).toMatch(/^Chrome \d+ \(headless\) on Linux$/);
        expect(await browserCell.getAttribute("title")).toContain("HeadlessChrome/");
      }
    }
    await page.goto(`${tern.url}/dashboard/emails`);
    await page.getByRole("link", { name: "Sent later" }).click();
    expect(await page.locator("ol.timeline li[data-event=scheduled] p").innerText()).toBe(`Scheduled for ${later.toISOString().slice(0, 16).replace("T", " ")} UTC to later@example.com.`);
    expect(await page.evaluate("document.scrollingElement.scrollWidth - innerWidth")).toBeLessThanOrEqual(0);
    await shot(page, "27-phone-email");
    await ctx.close();
  });
});
