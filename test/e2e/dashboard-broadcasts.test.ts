// The Broadcasts and Templates pages in a real headless Chromium against `npm start`: a person,
// with the mouse and keyboard only, writes a broadcast in the block editor (a subject, a preview
// text and a paragraph with variables shown as chips, a heading, a button and an uploaded
// image), previews it at desktop and phone widths, sends a test to themselves, reviews it and
// sends it to a segment of dev-relay addresses; each recipient's message shows their own name
// (in the subject, the preheader and the body), the button's link, the image tern serves and a
// working one-click unsubscribe. Then a template is written (its subject pasted in Resend's
// syntax, the broadcast's image picked again from the image dialog) and published, and that
// image is seen on the Images page and deleted after the page that lists where it is used. Last, a broadcast written through the API keeps
// its html when only its name is edited, until the person chooses to edit it in the editor.
// Screenshots: test-results/dashboard/5x-*.png, 6x-images*.png, 61-image-delete.png and
// 6x-broadcast-api-html*.png.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { crc32, deflateSync } from "node:zlib";
import { simpleParser } from "mailparser";
import type { Browser, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { axeViolations, launchBrowser, SCREENSHOTS, shot } from "../support/browser.ts";
import { startTern, type TernProcess } from "../support/processes.ts";

let tern: TernProcess;
let browser: Browser;

beforeAll(async () => {
  [tern, browser] = await Promise.all([startTern(), launchBrowser()]);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await tern?.stop();
});

afterEach((ctx) => {
  if (ctx.task.result?.state === "fail") console.log(tern.output().slice(-6000));
});

const api = async (path: string, init: RequestInit = {}) => {
  const res = await fetch(`${tern.url}${path}`, { ...init, headers: { authorization: `Bearer ${tern.apiKey}`, "content-type": "application/json", ...(init.headers ?? {}) } });
  const body = (await res.json()) as Record<string, unknown>;
  if (!res.ok) throw new Error(`${init.method ?? "GET"} ${path}: ${res.status} ${JSON.stringify(body)}`);
  return body;
};

/** A real PNG (a two-colour banner), made here so the test needs no fixture file. */
function png(w: number, h: number): Buffer {
  const raw = Buffer.alloc((w * 3 + 1) * h);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const o = y * (w * 3 + 1) + 1 + x * 3;
      const band = x < w / 3;
      raw[o] = band ? 0x25 : 0xe0; raw[o + 1] = band ? 0x63 : 0xe7; raw[o + 2] = band ? 0xeb : 0xff;
    }
  }
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type, "latin1"), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(td));
    return Buffer.concat([len, td, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", ihdr), chunk("IDAT", deflateSync(raw)), chunk("IEND", Buffer.alloc(0))]);
}

interface RelayMessage { id: string; subject?: string }
async function relayMessage(to: string): Promise<{ id: string; raw: Buffer }> {
  const list = (await (await fetch(`${tern.relayHttp}/api/messages?to=${encodeURIComponent(to)}&wait=30000`)).json()) as { data: RelayMessage[] };
  expect(list.data.length, `a message for ${to}`).toBeGreaterThan(0);
  const id = list.data[0]!.id;
  return { id, raw: Buffer.from(await (await fetch(`${tern.relayHttp}/api/messages/${id}/raw`)).arrayBuffer()) };
}

async function signIn(page: Page): Promise<string> {
  const dev = JSON.parse(readFileSync(`${tern.stateDir}/tern/dev-user.json`, "utf8")) as { email: string; password: string };
  await page.goto(`${tern.url}/dashboard/sign-in`);
  await page.getByLabel("Email").fill(dev.email);
  await page.getByLabel("Password").fill(dev.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL("**/dashboard/emails");
  return dev.email;
}

describe("the Broadcasts page and the block editor", () => {
  it("writes, previews, tests, reviews and sends a broadcast; each recipient gets their own", async () => {
    // The audience, set up through the API as a developer would.
    const tag = crypto.randomUUID().slice(0, 6);
    const segmentId = (await api("/segments", { method: "POST", body: JSON.stringify({ name: `Readers ${tag}` }) })).id as string;
    const readers = [{ name: "Ada", email: `ada-${tag}@example.com` }, { name: "Bob", email: `bob-${tag}@example.com` }];
    const contactIds: string[] = [];
    for (const r of readers) {
      const c = await api("/contacts", { method: "POST", body: JSON.stringify({ email: r.email, first_name: r.name, segments: [{ id: segmentId }] }) });
      contactIds.push(c.id as string);
    }

    const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: "en-US" })).newPage();
    const scriptErrors: string[] = [];
    page.on("pageerror", (err) => scriptErrors.push(err.message));
    page.on("console", (m) => { if (m.type() === "error") scriptErrors.push(m.text()); });
    const me = await signIn(page);

    // The list: empty, saying what to do; the first page loads no editor script.
    await page.getByRole("link", { name: "Broadcasts" }).click();
    await page.waitForURL("**/dashboard/broadcasts");
    expect(await page.locator("main").innerText()).toContain("No broadcasts yet.");
    expect(await page.locator("script[src*=editor]").count()).toBe(0);
    await shot(page, "50-broadcasts-empty");
    expect(await axeViolations(page)).toEqual([]);

    await page.getByLabel("Name").fill("November news");
    await page.getByLabel("From").fill(`News <news@${tern.domain}>`);
    await page.getByLabel("Subject").fill("What's new");
    await page.getByLabel("Send to segment").selectOption({ label: `Readers ${tag}` });
    await page.getByRole("button", { name: "Create and edit" }).click();
    await page.waitForURL(/\/dashboard\/broadcasts\/[0-9a-f-]{36}$/);
    const broadcastId = page.url().split("/").pop()!;
    // A test of the untouched design is refused as its send would be, saying what to do.
    await page.getByRole("button", { name: /^Send a test to / }).click();
    await expect.poll(() => page.locator("#editor-error").innerText()).toMatch(/The broadcast's body is empty: its html shows no text or image\. Write the message in the editor/);
    // The browser logs the refused request (a 422) as a console error: that one is expected.
    expect(scriptErrors).toEqual([expect.stringContaining("status of 422")]);
    scriptErrors.length = 0;

    // The subject, with the keyboard only: its own Variable button, the same menu as the body's;
    // the variable shows as a chip, Enter adds no line, the form holds Resend's syntax.
    const subject = page.getByRole("textbox", { name: "Subject", exact: true });
    await subject.focus();
    await page.keyboard.press("End");
    await page.keyboard.type(", ");
    await page.keyboard.press("Tab");
    expect(await page.evaluate("document.activeElement.textContent")).toBe("{ } Variable in Subject");
    await page.keyboard.press("Enter");
    const varDialog = page.getByRole("dialog", { name: "Insert a variable" });
    await varDialog.waitFor();
    expect(await varDialog.getByLabel("Variable").inputValue()).toBe("FIRST_NAME");
    await page.keyboard.press("Tab"); // to the fallback, "there", selected
    await page.keyboard.type("friend");
    await page.keyboard.press("Enter");
    await expect.poll(() => varDialog.isVisible()).toBe(false);
    // Focus goes back to the field (TipTap gives it back on the next frame): typing goes on there.
    const focused = (field: typeof subject) => field.evaluate((el) => el.contains((el.ownerDocument as { activeElement: unknown }).activeElement as never));
    await expect.poll(() => focused(subject)).toBe(true);
    expect(await subject.locator(".variable-chip").innerText()).toBe("First name (or “friend”)");
    await page.keyboard.press("Enter");
    expect(await subject.locator("p").count()).toBe(1);
    expect(await subject.textContent()).toBe("What's new, First name (or “friend”)");
    expect(await page.locator("input[name=subject]").inputValue()).toBe("What's new, {{{FIRST_NAME|friend}}}");
    // The preview text is the same kind of field: "{{" there opens the menu; Enter adds nothing.
    const previewText = page.getByRole("textbox", { name: "Preview text", exact: true });
    await previewText.focus();
    await expect.poll(() => focused(previewText)).toBe(true);
    await page.keyboard.type("A note for {{");
    await varDialog.waitFor();
    await page.keyboard.press("Tab");
    await page.keyboard.type("friend");
    await page.keyboard.press("Enter");
    await expect.poll(() => varDialog.isVisible()).toBe(false);
    await expect.poll(() => focused(previewText)).toBe(true);
    await page.keyboard.type(" on what changed");
    await page.keyboard.press("Enter");
    expect(await previewText.locator("p").count()).toBe(1);
    expect(await previewText.textContent()).toBe("A note for First name (or “friend”) on what changed");
    expect(await page.locator("input[name=preview_text]").inputValue()).toBe("A note for {{{FIRST_NAME|friend}}} on what changed");

    // A heading, then a paragraph with the first name from the Variable menu.
    const canvas = page.getByRole("textbox", { name: "Email content" });
    await canvas.locator("h1").click();
    await page.keyboard.type("Our November news");
    await page.keyboard.press("Enter");
    await page.keyboard.type("Hi ");
    await page.getByRole("button", { name: "Insert variable" }).click();
    await varDialog.getByLabel("Variable").selectOption({ label: "First name" });
    expect(await varDialog.getByLabel(/Fallback/).inputValue()).toBe("there");
    await varDialog.getByRole("button", { name: "Insert" }).click();
    await page.keyboard.type(", the editor has landed. ");
    await page.keyboard.press("Control+b");
    await page.keyboard.type("Bold news");
    await page.keyboard.press("Control+b");
    await page.keyboard.type(" for everyone.");

    // A button: a link is required, and the dialog says so.
    await page.getByRole("button", { name: "Insert button" }).click();
    const btnDialog = page.getByRole("dialog", { name: "Button" });
    await btnDialog.getByLabel("Button text").fill("Read the changelog");
    await btnDialog.getByRole("button", { name: "Apply" }).click();
    expect(await btnDialog.locator("[data-dialog-error]").innerText()).toContain("Enter the address");
    await btnDialog.getByLabel("Link").fill("https://tern.test/changelog");
    await btnDialog.getByRole("button", { name: "Apply" }).click();
    await expect.poll(() => btnDialog.isVisible()).toBe(false);

    // An image, uploaded from a file the person picks.
    const image = png(480, 120);
    await page.getByRole("button", { name: "Insert image" }).click();
    const imgDialog = page.getByRole("dialog", { name: "Image" });
    const [chooser] = await Promise.all([page.waitForEvent("filechooser"), imgDialog.getByLabel(/Upload an image/).click()]);
    await chooser.setFiles({ name: "banner.png", mimeType: "image/png", buffer: image });
    await expect.poll(() => imgDialog.locator("[data-upload-state]").innerText()).toContain("Uploaded banner.png");
    const src = await imgDialog.getByLabel(/web address/).inputValue();
    expect(src).toMatch(new RegExp(`^${tern.url}/media/`));
    await imgDialog.getByLabel(/alt text/).fill("The tern banner");
    await imgDialog.getByRole("button", { name: "Apply" }).click();
    await expect.poll(() => imgDialog.isVisible()).toBe(false);
    await page.keyboard.type("See you next month on our blog.");
    // A link with the keyboard: select two words (Ctrl+Shift+Left), Ctrl+K, the address, Enter.
    await page.keyboard.press("ArrowLeft");
    await page.keyboard.press("Control+Shift+ArrowLeft");
    await page.keyboard.press("Control+Shift+ArrowLeft");
    await expect.poll(() => page.evaluate("String(getSelection())")).toBe("our blog");
    await page.keyboard.press("Control+k");
    const linkDialog = page.getByRole("dialog", { name: "Link" });
    await linkDialog.getByLabel("Web address").fill("tern.test/blog");
    await page.keyboard.press("Enter");
    await expect.poll(() => linkDialog.isVisible()).toBe(false);
    // The link is on the words and the caret back in the text before it moves on (under load the
    // focus came back after End was pressed, and the divider replaced the selected words).
    await expect.poll(() => canvas.locator('a[href="https://tern.test/blog"]').allInnerTexts()).toEqual(["our blog"]);
    await expect.poll(() => page.evaluate("document.activeElement?.getAttribute('aria-label')")).toBe("Email content");
    await page.keyboard.press("End");
    await expect.poll(() => page.evaluate("String(getSelection())")).toBe("");
    await page.getByRole("button", { name: "Insert divider" }).click();
    await shot(page, "51-broadcast-editor");
    expect(await axeViolations(page)).toEqual([]);

    // Preview at both widths: the first contact's name, the button and the image.
    await page.getByRole("button", { name: "Preview", exact: true }).click();
    const frame = page.locator("#preview-frame");
    await expect.poll(() => frame.getAttribute("srcdoc"), { timeout: 15_000 }).toContain("Hi Ada, the editor has landed.");
    const srcdoc = (await frame.getAttribute("srcdoc"))!;
    expect(srcdoc).toContain('href="https://tern.test/changelog"');
    expect(srcdoc).toContain(`src="${src}"`);
    expect(srcdoc).toMatch(/on <a href="https:\/\/tern.test\/blog"[^>]*>our blog<\/a>\./);
    expect(srcdoc).toContain("<hr");
    expect(await page.locator("#preview-who").innerText()).toContain(readers[0]!.email);
    // The inbox's line for that contact: subject, then the preheader, as the sends render them.
    expect(await page.locator("#preview-subject").innerText()).toBe("What's new, Ada");
    expect(await page.locator("#preview-preheader").innerText()).toBe("A note for Ada on what changed");
    await page.frameLocator("#preview-frame").getByRole("link", { name: "Read the changelog" }).waitFor();
    // The panels alone: a full-page shot taken scrolled down paints the sticky toolbar mid-page,
    // and one scrolled to the top leaves the off-screen preview frame unpainted.
    const previewPanel = page.locator("#preview-panel");
    await previewPanel.screenshot({ path: join(SCREENSHOTS, "52-broadcast-preview-desktop.png") });
    await page.getByRole("button", { name: "Mobile" }).click();
    await page.waitForTimeout(300); // the frame's width eases over 200 ms
    await previewPanel.screenshot({ path: join(SCREENSHOTS, "53-broadcast-preview-mobile.png") });
    // Preview saved it: the stored subject is the string, shown again as a chip after a reload.
    expect(await api(`/broadcasts/${broadcastId}`)).toMatchObject({ subject: "What's new, {{{FIRST_NAME|friend}}}", preview_text: "A note for {{{FIRST_NAME|friend}}} on what changed" });
    await page.reload();
    expect(await subject.locator(".variable-chip").innerText()).toBe("First name (or “friend”)");
    expect(await previewText.locator(".variable-chip").innerText()).toBe("First name (or “friend”)");
    await page.locator(".editor-settings").screenshot({ path: join(SCREENSHOTS, "51-broadcast-subject.png") });

    // A test to the signed-in person's own address.
    await page.getByRole("button", { name: `Send a test to ${me}` }).click();
    await expect.poll(() => page.locator("#save-state").innerText()).toContain(`Test sent to ${me}`);
    const test = await simpleParser((await relayMessage(me)).raw);
    expect(test.subject).toBe("[Test] What's new, Ada");

    // The review: nothing blocks; the deliverability checks are listed. Then send now.
    await page.getByRole("button", { name: "Review and send…" }).click();
    const reviewPanel = page.locator("#review-panel");
    await expect.poll(() => reviewPanel.isVisible()).toBe(true);
    // Its verdict comes last, after any problems and warnings (here there are none).
    expect(await reviewPanel.locator("#review-verdict").innerText()).toMatch(/^(Ready to send: nothing stops it\.|It can be sent, but (a deliverability check|\d+ deliverability checks) below failed: fix (it|them) or more of it may land in spam\.) Sent now, it goes to \d+ contacts\.$/);
    expect(await reviewPanel.locator("li").count()).toBeGreaterThan(5);
    await reviewPanel.screenshot({ path: join(SCREENSHOTS, "54-broadcast-review.png") });
    expect(await axeViolations(page)).toEqual([]);
    page.once("dialog", (d) => void d.accept());
    await page.getByRole("button", { name: "Send now" }).click();
    await page.waitForURL(`**/dashboard/broadcasts/${broadcastId}`);
    await expect.poll(async () => {
      await page.reload();
      return page.locator("main .badge").first().innerText();
    }, { timeout: 60_000, interval: 1000 }).toBe("sent");
    // Just sent, its counts are still coming in, and the page says so.
    expect(await page.getByText("These counts grow as recipients' servers answer").count()).toBe(1);
    await shot(page, "55-broadcast-sent");
    // The summary reads as the editor's chips do, never in the placeholder syntax; what
    // recipients get starts with the inbox's line for the first contact.
    const field = (name: string) => page.locator("dl.fields dt", { hasText: new RegExp(`^${name}$`) }).locator("xpath=following-sibling::dd[1]");
    expect(await field("Subject").innerText()).toBe("What's new, First name (or “friend”)");
    expect(await field("Preview text").innerText()).toBe("A note for First name (or “friend”) on what changed");
    expect(await page.locator("main").innerText()).not.toContain("{{{");
    expect(await page.locator(".inbox-line .inbox-subject").innerText()).toBe("What's new, Ada");
    expect(await page.locator(".inbox-line .inbox-preheader").innerText()).toBe("A note for Ada on what changed");
    expect(await axeViolations(page)).toEqual([]);

    // Each recipient's own message at the dev relay.
    const stored = await api(`/broadcasts/${broadcastId}`);
    expect(stored.html).toContain("{{{FIRST_NAME|there}}}");
    for (const [i, r] of readers.entries()) {
      const { id, raw } = await relayMessage(r.email);
      const mail = await simpleParser(raw);
      expect(mail.subject).toBe(`What's new, ${r.name}`);
      const html = String(mail.html);
      // The preheader (the hidden div the html starts with), personalised as the subject is.
      expect(/<div style="display:none;max-height:0;overflow:hidden">([^<]*)<\/div>/.exec(html)?.[1]).toBe(`A note for ${r.name} on what changed`);
      expect(html).toContain(`Hi ${r.name}, the editor has landed.`);
      expect(mail.text).toContain(`Hi ${r.name}, the editor has landed.`);
      // The button's link (through click tracking, if the domain has it on).
      const href = /<a href="([^"]+)"[^>]*>Read the changelog<\/a>/.exec(html)![1]!.replace(/&amp;/g, "&");
      if (href !== "https://tern.test/changelog") {
        const hop = await fetch(href, { redirect: "manual" });
        expect(hop.headers.get("location")).toBe("https://tern.test/changelog");
      }
      // The image tern serves, with the type it found at upload.
      const img = await fetch(/<img src="([^"]+)"/.exec(html)![1]!.replace(/&amp;/g, "&"));
      expect(img.status).toBe(200);
      expect(img.headers.get("content-type")).toBe("image/png");
      expect(Buffer.from(await img.arrayBuffer()).equals(image)).toBe(true);
      // One-click unsubscribe (RFC 8058) from the header; the visible link is the same.
      const headers = raw.toString("latin1").replace(/\r\n[ \t]+/g, " ");
      const link = headers.match(/^List-Unsubscribe: <(http[^>]+)>\r$/m)![1]!;
      expect(html).toContain(`href="${link}"`);
      if (i === 0) {
        // The dev mailbox's own page (its CSP keeps remote images out, by design).
        const mailbox = await page.context().newPage();
        await mailbox.goto(`${tern.relayHttp}/messages/${id}`);
        await shot(mailbox, "56-relay-message");
        await mailbox.close();
        const res = await fetch(link, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "List-Unsubscribe=One-Click" });
        expect(res.status).toBe(200);
        expect((await api(`/contacts/${contactIds[0]}`)).unsubscribed).toBe(true);
      }
    }
    expect((await api(`/contacts/${contactIds[1]}`)).unsubscribed).toBe(false);

    // The list: sent, with its recipients and counts.
    await page.goto(`${tern.url}/dashboard/broadcasts`);
    const row = page.locator("tbody tr", { hasText: "November news" });
    expect(await row.locator(".badge").innerText()).toBe("sent");
    expect(await row.locator("td").first().innerText()).toBe("November news\nWhat's new, First name (or “friend”)");
    await expect.poll(async () => {
      await page.reload();
      return page.locator("tbody tr", { hasText: "November news" }).locator("td[data-stat=delivered]").innerText();
    }, { timeout: 30_000, interval: 1000 }).toBe("2");
    expect(await page.locator("tbody tr", { hasText: "November news" }).locator("td[data-stat=unsubscribed]").innerText()).toBe("1");
    await shot(page, "57-broadcasts-list");
    expect(scriptErrors).toEqual([]);
    // The dashboard's endpoints refuse a request without the page's CSRF token.
    const forged = await page.evaluate(`fetch("/dashboard/api/broadcasts/${broadcastId}/duplicate", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" }).then((r) => r.status)`);
    expect(forged).toBe(403);
  }, 180_000);

  it("writes and publishes a template in the same editor", async () => {
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: "en-US", permissions: ["clipboard-read", "clipboard-write"] })).newPage();
    await signIn(page);
    await page.goto(`${tern.url}/dashboard/templates`);
    expect(await page.locator("main").innerText()).toContain("No templates yet.");
    await page.getByLabel("Name").fill("Order shipped");
    await page.getByLabel("Alias (optional)").fill("order-shipped");
    await page.getByRole("button", { name: "Create and edit" }).click();
    await page.waitForURL(/\/dashboard\/templates\/[0-9a-f-]{36}$/);
    // A subject pasted in Resend's syntax (with a line break) becomes one line with a chip.
    await page.evaluate(`navigator.clipboard.writeText(${JSON.stringify("Your order {{{ORDER}}}\nis on its way")})`);
    const subject = page.getByRole("textbox", { name: "Subject", exact: true });
    await subject.click();
    await page.keyboard.press("Control+V");
    expect(await subject.innerText()).toBe("Your order ORDER is on its way");
    expect(await subject.locator(".variable-chip").innerText()).toBe("ORDER");
    // "{{" opens the same menu there; Escape leaves the subject as it was.
    await page.keyboard.type("{{");
    const dialog = page.getByRole("dialog", { name: "Insert a variable" });
    await dialog.waitFor();
    await page.keyboard.press("Escape");
    await expect.poll(() => dialog.isVisible()).toBe(false);
    expect(await subject.textContent()).toBe("Your order ORDER is on its way");
    // Its maxlength holds as the input's would: a paste past 998 characters changes nothing.
    await page.evaluate(`navigator.clipboard.writeText("${"x".repeat(990)}")`);
    await subject.press("Control+V");
    expect(await subject.textContent()).toBe("Your order ORDER is on its way");
    await page.getByRole("textbox", { name: "Email content" }).locator("h1").click();
    await page.keyboard.type("On its way");
    await page.keyboard.press("Enter");
    await page.keyboard.type("Order ");
    await page.getByRole("button", { name: "Insert variable" }).click();
    await dialog.getByLabel("Variable").selectOption({ label: "Another key…" });
    await dialog.getByLabel("Key", { exact: true }).fill("ORDER");
    await dialog.getByLabel(/Fallback/).fill("soon");
    await dialog.getByRole("button", { name: "Insert" }).click();
    await page.keyboard.type(" has shipped.");
    // The banner uploaded for the broadcast, picked from the image dialog with the keyboard:
    // Tab from the upload to the newest image, Space picks it, Tab Tab to the alt text.
    await page.keyboard.press("Enter");
    await page.getByRole("button", { name: "Insert image" }).click();
    const imgDialog = page.getByRole("dialog", { name: "Image" });
    const banner = imgDialog.getByRole("radio", { name: /banner\.png/ });
    await banner.waitFor();
    await imgDialog.getByLabel(/Upload an image/).focus();
    await page.keyboard.press("Tab");
    await page.keyboard.press("Space");
    expect(await banner.isChecked()).toBe(true);
    const bannerUrl = await imgDialog.getByLabel(/web address/).inputValue();
    expect(bannerUrl).toMatch(new RegExp(`^${tern.url}/media/`));
    await page.keyboard.press("Tab");
    await page.keyboard.press("Tab");
    await page.keyboard.type("The banner");
    await imgDialog.screenshot({ path: join(SCREENSHOTS, "58-template-image-picker.png") });
    expect(await axeViolations(page)).toEqual([]);
    await page.keyboard.press("Enter");
    await expect.poll(() => imgDialog.isVisible()).toBe(false);
    expect(await page.getByRole("textbox", { name: "Email content" }).locator("img").getAttribute("src")).toBe(bannerUrl);
    // The review before publishing: the subject's ORDER has no fallback and is not declared, so
    // every send must give it: a warning, then the verdict; publishing is not blocked.
    await page.getByRole("button", { name: "Review and publish…" }).click();
    const tplReview = page.locator("#review-panel");
    await expect.poll(() => tplReview.isVisible()).toBe(true);
    expect(await tplReview.locator("#review-warnings").innerText()).toMatch(/ORDER \(in the subject(, the body)? and the text version\) is used without a fallback and not declared/);
    expect(await tplReview.locator("#review-verdict").innerText()).toBe("It can be published, but read the warning above first. Once published, every send that names this template uses this version.");
    await tplReview.screenshot({ path: join(SCREENSHOTS, "58-template-review.png") });
    await page.getByRole("button", { name: "Publish", exact: true }).click();
    await page.waitForLoadState("load");
    await expect.poll(() => page.locator("main p .badge").first().innerText()).toBe("published");
    await shot(page, "58-template-editor");
    expect(await axeViolations(page)).toEqual([]);
    // Under the dark theme the page turns dark; the email canvas stays as mail clients show it.
    await page.emulateMedia({ colorScheme: "dark" });
    await page.reload();
    await page.getByRole("textbox", { name: "Email content" }).waitFor();
    await shot(page, "58-template-editor-dark");
    expect(await axeViolations(page)).toEqual([]);
    await page.emulateMedia({ colorScheme: "light" });
    const t = await api("/templates/order-shipped");
    expect(t).toMatchObject({ status: "published", subject: "Your order {{{ORDER}}} is on its way" });
    expect(t.html).toContain("Order {{{ORDER|soon}}} has shipped.");
    expect(t.html).toContain(`src="${bannerUrl}"`);
    // A send with it fills the variable, as any API send.
    const to = `order-${crypto.randomUUID().slice(0, 6)}@example.com`;
    await api("/emails", { method: "POST", body: JSON.stringify({ from: `Shop <shop@${tern.domain}>`, to, template: { id: "order-shipped", variables: { ORDER: "#42" } } }) });
    const mail = await simpleParser((await relayMessage(to)).raw);
    expect(mail.subject).toBe("Your order #42 is on its way");
    expect(String(mail.html)).toContain("Order #42 has shipped.");
    await page.goto(`${tern.url}/dashboard/templates`);
    await shot(page, "59-templates-list");

    // The Images page: the banner with its size and the account's use of its limits; deleting
    // it (an owner, after the warning) empties the page and its URL answers 404.
    await page.getByRole("link", { name: "Images" }).click();
    await page.waitForURL("**/dashboard/images");
    const card = page.locator(".media-card", { hasText: "banner.png" });
    const size = png(480, 120).length;
    expect(await card.innerText()).toContain(`PNG · ${size} bytes`);
    expect(await page.locator(".usage-line").innerText()).toBe(`${size} bytes of 500 MB, 1 of 10,000 images`);
    await expect.poll(() => card.locator("img").evaluate((img) => (img as unknown as { naturalWidth: number }).naturalWidth)).toBe(480);
    await shot(page, "60-images");
    expect(await axeViolations(page)).toEqual([]);
    // Delete leads to where it is used: the sent broadcast (its recipients' copies break) and
    // the published template, then the button.
    await card.getByRole("link", { name: "Delete banner.png…" }).click();
    await page.waitForURL("**/dashboard/images/*/delete");
    const used = await page.locator("main").innerText();
    expect(used).toContain("November news");
    expect(used).toContain("Order shipped");
    expect(used).toMatch(/A broadcast already sent to \d+ recipients shows it: the copies in their inboxes load it from its URL, so they will show a broken image/);
    expect(used).toContain("A published template would send a broken image");
    await shot(page, "61-image-delete");
    expect(await axeViolations(page)).toEqual([]);
    await page.getByRole("button", { name: "Delete the image" }).click();
    await page.waitForURL("**/dashboard/images");
    await expect.poll(() => page.locator("main").innerText()).toContain("No images uploaded yet.");
    expect((await fetch(bannerUrl)).status).toBe(404);
    await shot(page, "61-images-empty");
  }, 90_000);

  it("keeps a body written through the API until the person chooses the editor", async () => {
    const segmentId = (await api("/segments", { method: "POST", body: JSON.stringify({ name: "Nobody yet" }) })).id as string;
    const html = "<h1>API written</h1><p>Important body text</p>";
    const id = (await api("/broadcasts", { method: "POST", body: JSON.stringify({ segment_id: segmentId, from: `Acme <hello@${tern.domain}>`, subject: "API html", name: "API html bc", html }) })).id as string;
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 }, locale: "en-US" })).newPage();
    const scriptErrors: string[] = [];
    page.on("pageerror", (err) => scriptErrors.push(err.message));
    await signIn(page);
    await page.goto(`${tern.url}/dashboard/broadcasts/${id}`);
    // The html as it renders, not an empty design; the editor stays closed.
    await page.frameLocator("#api-body-frame").getByRole("heading", { name: "API written" }).waitFor();
    expect(await page.locator(".editor-frame").isVisible()).toBe(false);
    // Only the name changes: the autosave stores it and leaves the html as the API wrote it.
    await page.locator("#editor-settings input[name=name]").fill("API html renamed");
    await expect.poll(() => page.locator("#save-state").innerText(), { timeout: 10_000 }).toContain("Saved at");
    expect(await api(`/broadcasts/${id}`)).toMatchObject({ name: "API html renamed", html });
    await shot(page, "62-broadcast-api-html");
    expect(await axeViolations(page)).toEqual([]);
    // The editor takes the body only on an explicit, confirmed choice: here, from the html.
    await page.getByRole("button", { name: "Edit the body in the editor…" }).click();
    await page.getByRole("dialog", { name: "Edit the body in the editor?" }).getByRole("button", { name: "Start from this HTML" }).click();
    await page.getByRole("textbox", { name: "Email content" }).locator("h1", { hasText: "API written" }).waitFor();
    await expect.poll(async () => (await api(`/broadcasts/${id}`)).html as string).toMatch(/API written<\/h1>[\s\S]*Important body text/);
    expect(await page.locator("#api-body").isVisible()).toBe(false);
    // Its segment is empty: the review says it would reach nobody, without blocking the send.
    await page.getByRole("button", { name: "Review and send…" }).click();
    const reviewPanel = page.locator("#review-panel");
    await expect.poll(() => reviewPanel.isVisible()).toBe(true);
    expect(await reviewPanel.innerText()).toContain("has no contacts, so sent now it would reach nobody");
    await shot(page, "63-broadcast-api-html-imported");
    expect(scriptErrors).toEqual([]);
  }, 60_000);
});
