// Suppression on the real send path: hard bounces (the simulator's and a relay's 5xx) and
// complaints put the address on the account's list; a later send to it is not attempted and
// gives `suppressed` / email.suppressed while the other recipients go on; transient bounces do
// not suppress; /suppressions lists, adds and removes, and a removed address is sent to again.
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { api, createAccount, type TestAccount } from "./fixtures.ts";
import { address, capturedFor } from "./peers.ts";
import { waitFor } from "./wait.ts";

let acct: TestAccount;
beforeAll(async () => {
  acct = await createAccount({ listening: true });
});

async function send(to: string | string[], a = acct) {
  const res = await api(a.token, "POST", "/emails", { from: `Acme <news@${a.domain}>`, to, subject: "Suppression", text: "hello" });
  expect(res.status, await res.clone().text()).toBe(200);
  return ((await res.json()) as { id: string }).id;
}
async function settled(id: string, lastEvent: string, a = acct) {
  return waitFor(`${id} to reach ${lastEvent}`, async () => {
    const email = (await (await api(a.token, "GET", `/emails/${id}`)).json()) as { last_event: string };
    return email.last_event === lastEvent ? email : undefined;
  }, 15_000);
}
async function events(id: string) {
  return ((await (await api(acct.token, "GET", `/emails/${id}/events`)).json()) as { data: { type: string; data: Record<string, unknown> }[] }).data;
}
interface Suppression { id: string; email: string; reason: string; email_id: string | null; detail: string | null }
async function list(a = acct): Promise<Suppression[]> {
  return ((await (await api(a.token, "GET", "/suppressions?limit=100")).json()) as { data: Suppression[] }).data;
}
async function suppressedWebhooks(emailId: string) {
  const rows = await env.DB.prepare("SELECT payload_json FROM webhook_events WHERE account_id = ? AND type = 'email.suppressed'").bind(acct.accountId).all<{ payload_json: string }>();
  return rows.results.map((r) => JSON.parse(r.payload_json) as { data: { email_id: string } }).filter((p) => p.data.email_id === emailId);
}

describe("suppression", () => {
  it("a simulated hard bounce suppresses the address; the next send to it is not attempted", async () => {
    const to = `bounced+${crypto.randomUUID().slice(0, 8)}@simulator.tern.test`;
    const first = await send(to);
    await settled(first, "bounced");
    const entry = (await list()).find((s) => s.email === to);
    expect(entry).toMatchObject({ reason: "bounce", email_id: first });
    expect(entry!.detail).toContain("550");

    const second = await send(to.toUpperCase().replace("SIMULATOR.TERN.TEST", "simulator.tern.test"));
    await settled(second, "suppressed");
    expect((await events(second)).map((e) => e.type)).toEqual(["queued", "suppressed"]);
    expect(await suppressedWebhooks(second)).toHaveLength(1);
  });

  it("a simulated complaint suppresses the address", async () => {
    const to = `complained+${crypto.randomUUID().slice(0, 8)}@simulator.tern.test`;
    await settled(await send(to), "complained");
    expect((await list()).find((s) => s.email === to)).toMatchObject({ reason: "complaint" });
  });

  it("a relay's 5xx suppresses the address; later the suppressed recipient is skipped and the others delivered", async () => {
    const bad = address("reject", "example.com"), ok = address("fine", "example.com");
    await settled(await send(bad), "bounced");
    expect((await list()).find((s) => s.email === bad)).toMatchObject({ reason: "bounce" });
    const id = await send([bad, ok]);
    await settled(id, "delivered");
    const evs = await events(id);
    expect(evs.map((e) => e.type)).toEqual(["queued", "suppressed", "sent", "delivered"]);
    expect(evs[1]!.data).toMatchObject({ recipients: [bad] });
    const [msg] = await capturedFor(ok);
    expect(msg!.recipients).toEqual([ok]);
    expect(await suppressedWebhooks(id)).toHaveLength(1);
  });

  it("a 5xx policy block (5.7.1) bounces as Transient and does not suppress: the address is fine", async () => {
    const blocked = address("policy", "example.com");
    const id = await send(blocked);
    await settled(id, "bounced");
    const bounced = (await events(id)).find((e) => e.type === "bounced")!;
    expect(bounced.data).toMatchObject({ bounce: { type: "Transient", subType: "ContentRejected" } });
    expect((await list()).find((s) => s.email === blocked)).toBeUndefined();
  });

  it("a transient bounce does not suppress", async () => {
    const later = address("tempfail", "example.com");
    await settled(await send(later), "delivery_delayed");
    expect((await list()).find((s) => s.email === later)).toBeUndefined();
  });

  it("a manually suppressed address is not sent to (the relay sees nothing); removing it makes sending work again", async () => {
    const to = address("manual", "example.com");
    const added = await api(acct.token, "POST", "/suppressions", { email: to.toUpperCase(), detail: "asked by phone" });
    expect(added.status).toBe(201);
    const entry = (await added.json()) as Suppression & { object: string };
    expect(entry).toMatchObject({ object: "suppression", email: to, reason: "manual", detail: "asked by phone", email_id: null });

    const blocked = await send(to);
    await settled(blocked, "suppressed");
    await new Promise((r) => setTimeout(r, 300));
    expect(await capturedFor(to)).toEqual([]);

    const removed = await api(acct.token, "DELETE", `/suppressions/${entry.id}`);
    expect(await removed.json()).toEqual({ object: "suppression", id: entry.id, deleted: true });
    const again = await send(to);
    await settled(again, "delivered");
    expect(await capturedFor(to)).toHaveLength(1);
  });
});

describe("one mailbox, however its domain is spelled", () => {
  it("a suppressed address is not reached through a full-width or A-label spelling of its domain", async () => {
    const local = `fw-${crypto.randomUUID()}`;
    expect((await api(acct.token, "POST", "/suppressions", { email: `${local}@example.com` })).status).toBe(201);
    // U+FF45 is a full-width "e": delivery would write the domain as example.com.
    const fullWidth = await send(`${local}@\uff45xample.com`);
    await settled(fullWidth, "suppressed");
    expect(await capturedFor(`${local}@example.com`)).toEqual([]);
    // Added as an A-label, suppressed as the Unicode name (and listed once, in Unicode).
    expect((await api(acct.token, "POST", "/suppressions", { email: `${local}@xn--exmple-cua.com` })).status).toBe(201);
    expect((await api(acct.token, "POST", "/suppressions", { email: `${local}@EX\u00c4MPLE.com` })).status).toBe(200);
    expect((await list()).filter((s) => s.email.startsWith(local)).map((s) => s.email).sort()).toEqual([`${local}@example.com`, `${local}@ex\u00e4mple.com`]);
    await settled(await send(`${local}@ex\u00e4mple.com`), "suppressed");
  });

  it("a suppression stored before, as an A-label, still holds; the one-off rewrite gives every older row its key", async () => {
    const { runMaintenance } = await import("../../worker/maintenance.ts");
    const t = await createAccount();
    const local = `legacy-${crypto.randomUUID()}`;
    const legacy = `${local}@xn--bcher-kva.de`;
    const insert = (table: string, email: string) => env.DB.prepare(`INSERT INTO ${table} (id, account_id, email, ${table === "suppressions" ? "reason, created_at" : "unsubscribed, properties_json, created_at, updated_at"}) VALUES (?, ?, ?, ${table === "suppressions" ? "'manual', 0" : "0, '{}', 0, 0"})`).bind(crypto.randomUUID(), t.accountId, email).run();
    await insert("suppressions", legacy);
    // Before the rewrite: a send to either spelling is suppressed, not sent.
    await settled(await send(legacy, t), "suppressed", t);
    await settled(await send(`${local}@b\u00fccher.de`, t), "suppressed", t);
    // Older rows: an A-label suppression beside its canonical copy, a full-width one, contacts.
    const twin = `twin-${crypto.randomUUID()}`;
    await insert("suppressions", `${twin}@xn--bcher-kva.de`);
    await insert("suppressions", `${twin}@b\u00fccher.de`);
    await insert("suppressions", `fw-${local}@\uff45xample.com`);
    await insert("contacts", `${local}@xn--bcher-kva.de`);
    await env.DB.prepare("UPDATE maintenance_jobs SET cursor_json = NULL, done_at = NULL WHERE name = 'canonical_addresses'").run();
    for (let i = 0; i < 100 && !(await runMaintenance(env)).done; i++);
    const emailsOf = async (table: string) => (await env.DB.prepare(`SELECT email FROM ${table} WHERE account_id = ? ORDER BY email`).bind(t.accountId).all<{ email: string }>()).results.map((r) => r.email);
    expect(await emailsOf("suppressions")).toEqual([`fw-${local}@example.com`, `${local}@b\u00fccher.de`, `${twin}@b\u00fccher.de`].sort());
    expect(await emailsOf("contacts")).toEqual([`${local}@b\u00fccher.de`]);
    expect((await env.DB.prepare("SELECT done_at FROM maintenance_jobs WHERE name = 'canonical_addresses'").first<{ done_at: number | null }>())!.done_at).not.toBeNull();
    // Done is done: another tick reads nothing.
    expect(await runMaintenance(env)).toEqual({ rewritten: 0, done: true });
  });

  it("a contact is one per mailbox: another spelling of its domain finds and updates it", async () => {
    const local = `c-${crypto.randomUUID()}`;
    const created = await api(acct.token, "POST", "/contacts", { email: `${local}@xn--exmple-cua.com`, first_name: "Ana" });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    const got = (await (await api(acct.token, "GET", `/contacts/${encodeURIComponent(`${local}@EX\u00c4MPLE.com`)}`)).json()) as { id: string; email: string };
    expect(got).toMatchObject({ id, email: `${local}@ex\u00e4mple.com` });
    const again = await api(acct.token, "POST", "/contacts", { email: `${local}@ex\u00e4mple.com`, first_name: "Ana" });
    // The same mailbox: refused as the contact it already is, named in its one spelling.
    expect(again.status).toBe(422);
    expect(((await again.json()) as { message: string }).message).toBe(`A contact with the email ${local}@ex\u00e4mple.com already exists.`);
    const rows = await env.DB.prepare("SELECT count(*) AS n FROM contacts WHERE account_id = ? AND email LIKE ?").bind(acct.accountId, `${local}@%`).first<{ n: number }>();
    expect(rows!.n).toBe(1);
  });
});

describe("/suppressions", () => {
  it("adds once (201, then 200 with the same entry), lists newest first, removes by id or by address", async () => {
    const a = await createAccount();
    const one = address("one"), two = address("two");
    const r1 = await api(a.token, "POST", "/suppressions", { email: one });
    expect(r1.status).toBe(201);
    const first = (await r1.json()) as Suppression;
    const again = await api(a.token, "POST", "/suppressions", { email: one });
    expect(again.status).toBe(200);
    expect(((await again.json()) as Suppression).id).toBe(first.id);
    await api(a.token, "POST", "/suppressions", { email: two });
    expect((await list(a)).map((s) => s.email)).toEqual([two, one]);
    const page = (await (await api(a.token, "GET", "/suppressions?limit=1")).json()) as { object: string; has_more: boolean; data: Suppression[] };
    expect(page).toMatchObject({ object: "list", has_more: true });
    expect(page.data).toHaveLength(1);

    const byEmail = await api(a.token, "DELETE", `/suppressions?email=${encodeURIComponent(two.toUpperCase())}`);
    expect(byEmail.status).toBe(200);
    expect(((await byEmail.json()) as { deleted: boolean }).deleted).toBe(true);
    expect((await list(a)).map((s) => s.email)).toEqual([one]);
    expect((await api(a.token, "DELETE", `/suppressions?email=${encodeURIComponent(two)}`)).status).toBe(404);
  });

  it("validates input", async () => {
    for (const body of [{}, { email: "not an address" }, { email: "Name <a@example.com>" }, { email: 5 }]) {
      const res = await api(acct.token, "POST", "/suppressions", body);
      expect(res.status, JSON.stringify(body)).toBe(422);
    }
    expect((await api(acct.token, "DELETE", "/suppressions?email=nope")).status).toBe(422);
  });

  it("is per account: another account's entries are invisible and cannot be removed", async () => {
    const other = await createAccount();
    const entry = (await (await api(other.token, "POST", "/suppressions", { email: address("theirs") })).json()) as Suppression;
    expect((await list()).find((s) => s.id === entry.id)).toBeUndefined();
    expect((await api(acct.token, "DELETE", `/suppressions/${entry.id}`)).status).toBe(404);
    expect((await list(other)).map((s) => s.id)).toEqual([entry.id]);
  });
});
