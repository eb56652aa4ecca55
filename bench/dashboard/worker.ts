// The dashboard benchmark's Worker (run by bench/dashboard.ts with `wrangler dev -c
// bench/dashboard/wrangler.toml`). Its routes call tern's own modules:
//   POST /seed?from&n&total emails g = from .. from+n-1 of total (1,200,000): five in six are the bench
//                          account's (1,000,000 in all), the sixth another account's, one every
//                          ~2 s over 30 days, statuses and 50,000 recipients spread as below;
//   GET /list?case         the Emails page's query (worker/dashboard/email-search.ts's
//                          searchEmails, the function the page calls) for one case;
//   POST /insert-cost?n&trigger  n emails inserted (and deleted) with the recipients trigger or
//                          without it, in a scratch account: the trigger's cost per insert;
//   GET /pk                one email by primary key and account, as GET /emails/{id} reads it;
//   POST /user             a verified user with a password (better-auth's own scrypt hash);
//   POST /sign-in          better-auth's email/password sign-in endpoint, configured as tern's
//                          dashboard configures it (worker/dashboard/auth.ts's authFor);
//   GET /health            nothing (the CPU baseline of a request).
// Timing is taken outside (Node): inside workerd the clock only moves on I/O.
import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { hashPassword } from "better-auth/crypto";
import { accounts, authAccounts, authUsers, emails } from "../../worker/db/schema.ts";
import { searchEmails } from "../../worker/dashboard/email-search.ts";
import { AUTH_BASE, authFor } from "../../worker/dashboard/auth.ts";
import { CASES, TOTAL } from "./cases.ts";

const ACCOUNT = "0193a8a0-1c2d-7000-8000-00000000da01";
const SCRATCH = "0193a8a0-1c2d-7000-8000-00000000da20";
const OTHERS = Array.from({ length: 4 }, (_, i) => `0193a8a0-1c2d-7000-8000-00000000da1${i}`);
const SPAN_MS = 30 * 86_400_000;
const ORIGIN = "http://bench.tern.test";
const USER = { email: "bench-signin@tern.test", password: "correct-horse-battery-staple-42" };

/** Inserts n emails with the recipients trigger on or off (dropped and put back from its own
 * SQL), into a scratch account, and deletes them again: what the trigger adds per insert. */
async function insertCost(env: { DB: D1Database }, n: number, trigger: boolean, now: number): Promise<Response> {
  const name = "email_recipients_on_insert";
  const row = await env.DB.prepare("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?").bind(name).first<{ sql: string }>();
  const saved = (globalThis as { savedTrigger?: string }).savedTrigger ??= row?.sql;
  if (!saved) return new Response("no trigger", { status: 500 });
  if (!trigger && row) await env.DB.prepare(`DROP TRIGGER ${name}`).run();
  if (trigger && !row) await env.DB.prepare(saved).run();
  const base = 10_000_000 + Math.floor(Math.random() * 1_000_000) * 1000;
  // Date.now() moves across I/O in workerd: around the one statement, it is the insert's time.
  const t0 = Date.now();
  await seedRows(env, base, n, TOTAL, now, SCRATCH);
  const ms = Date.now() - t0;
  await env.DB.prepare("DELETE FROM emails WHERE account_id = ?").bind(SCRATCH).run();
  if (!trigger) await env.DB.prepare(saved).run();
  return Response.json({ n, ms });
}

async function seed(env: { DB: D1Database }, from: number, n: number, total: number, now: number): Promise<Response> {
  if (from === 0) {
    await drizzle(env.DB).insert(accounts).values([ACCOUNT, SCRATCH, ...OTHERS].map((id) => ({ id, name: "bench", createdAt: now }))).onConflictDoNothing();
  }
  await seedRows(env, from, n, total, now, null);
  const row = await env.DB.prepare("SELECT count(*) AS n FROM emails WHERE account_id = ?").bind(ACCOUNT).first<{ n: number }>();
  return Response.json({ account: row?.n ?? 0 });
}

async function seedRows(env: { DB: D1Database }, from: number, n: number, total: number, now: number, only: string | null): Promise<void> {
  const start = now - SPAN_MS;
  // D1 binds numbers as REAL: cast, or ids and account ids would read "1.0".
  // Statuses by a multiplicative hash of g: 0.5% bounced, 0.05% complained, 0.2% failed, 4%
  // opened, 1% clicked, 0.1% suppressed, the rest delivered; recipients user0..user49999.
  await env.DB.prepare(
    `WITH RECURSIVE s(g) AS (SELECT CAST(?1 AS INTEGER) UNION ALL SELECT g + 1 FROM s WHERE g + 1 < ?1 + ?2),
     r AS (SELECT g, CAST(?3 AS INTEGER) + g * CAST(?4 AS INTEGER) / CAST(?5 AS INTEGER) AS t, (g * 2654435761) % 10000 AS h FROM s)
     INSERT OR IGNORE INTO emails (id, account_id, from_address, to_json, subject, state, last_event, pending_json, message_id, created_at, domain_id)
     SELECT printf('%08x-%04x-7000-8000-%012x', t / 65536, t % 65536, g),
       CASE WHEN ?6 = ?7 THEN ?7 WHEN g % 6 = 5 THEN ?6 || ((g / 6) % 4) ELSE ?7 END,
       'Shop <orders@shop.bench.example>',
       json_array('user' || ((g * 7919) % 50000) || '@example.com'),
       'Your order #' || g,
       'done',
       CASE WHEN h < 50 THEN 'bounced' WHEN h < 55 THEN 'complained' WHEN h < 75 THEN 'failed' WHEN h < 475 THEN 'opened'
            WHEN h < 575 THEN 'clicked' WHEN h < 585 THEN 'suppressed' ELSE 'delivered' END,
       '[]', 'm' || g || '@shop.bench.example', t, 'bench-domain'
     FROM r`,
  ).bind(from, n, start, SPAN_MS, total, only ?? "0193a8a0-1c2d-7000-8000-00000000da1", only ?? ACCOUNT).run();
}

async function list(env: { DB: D1Database }, which: string, now: number): Promise<Response> {
  const c = CASES[which];
  if (!c) return new Response("no such case", { status: 404 });
  let f = c.f;
  if (which === "bouncedDay") {
    const day = new Date(now - 10 * 86_400_000).toISOString().slice(0, 10);
    f = { ...f, from: day, to: day };
  }
  let after: string | undefined;
  if (which === "second") after = (await searchEmails(env.DB, ACCOUNT, f, { limit: 25 })).data.at(-1)?.id;
  const page = await searchEmails(env.DB, ACCOUNT, f, { limit: 25, after });
  if (page.error) return new Response(page.error, { status: 400 });
  return Response.json({ rows: page.data.length, has_more: page.has_more, statuses: [...new Set(page.data.map((e) => e.last_event))], to: [...new Set(page.data.flatMap((e) => e.to))] });
}

type BenchEnv = { DB: D1Database } & Record<string, unknown>;

export default {
  async fetch(req: Request, env: BenchEnv): Promise<Response> {
    const url = new URL(req.url);
    const now = Date.now();
    switch (url.pathname) {
      case "/health":
        return Response.json({ ok: true });
      case "/seed":
        return seed(env, Number(url.searchParams.get("from")), Number(url.searchParams.get("n")), Number(url.searchParams.get("total")) || TOTAL, Number(url.searchParams.get("now")) || now);
      case "/insert-cost":
        return insertCost(env, Number(url.searchParams.get("n")), url.searchParams.get("trigger") === "1", now);
      case "/list":
        return list(env, url.searchParams.get("case") ?? "", Number(url.searchParams.get("now")) || now);
      case "/pk": {
        const id = url.searchParams.get("id") ?? "";
        const row = await drizzle(env.DB).select().from(emails).where(and(eq(emails.id, id), eq(emails.accountId, ACCOUNT))).get();
        return Response.json({ found: !!row });
      }
      case "/user": {
        const id = crypto.randomUUID();
        const at = new Date(now);
        const db = drizzle(env.DB);
        await db.insert(authUsers).values({ id, name: "Bench", email: USER.email, emailVerified: true, createdAt: at, updatedAt: at });
        await db.insert(authAccounts).values({ id: crypto.randomUUID(), accountId: id, providerId: "credential", userId: id, password: await hashPassword(USER.password), createdAt: at, updatedAt: at });
        return Response.json({ id });
      }
      case "/sign-in": {
        const auth = await authFor(env as unknown as Env, ORIGIN);
        const res = await auth.handler(new Request(`${ORIGIN}${AUTH_BASE}/sign-in/email`, {
          method: "POST",
          headers: { origin: ORIGIN, "content-type": "application/json", "cf-connecting-ip": "203.0.113.9" },
          body: JSON.stringify({ email: USER.email, password: url.searchParams.get("wrong") ? "not-the-password-at-all" : USER.password }),
        }));
        return Response.json({ status: res.status, cookie: res.headers.getSetCookie().some((c) => c.includes("session_token=")) });
      }
    }
    return new Response("not found", { status: 404 });
  },
};
