// An account's data as one JSON document (the owner's right to a copy): the account, its
// members, domains (public DKIM keys only: private keys and secrets never leave), API keys
// (names and prefixes, never hashes), emails' metadata with their events, contacts,
// suppressions, webhooks (no signing secrets), received mail's metadata and the audit log.
// Streamed a page at a time, each page read through an (account_id, id) index or by the ids
// of the page before, so an account of any size is exported in bounded memory.
import { and, asc, eq, gt, inArray } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import {
  accounts, apiKeys, auditLog, authUsers, contacts, dkimKeys, domains, emailEvents, emails, inboundEmails, memberships, suppressions, webhooks,
} from "../db/schema.ts";

const PAGE = 200;
const iso = (ms: number | null | undefined) => (ms == null ? null : new Date(ms).toISOString());

type Row = Record<string, unknown>;

/** Every row of `table` in the account, in id order, a page at a time. */
async function* pages(d1: D1Database, table: SQLiteTable & { id: SQLiteColumn; accountId: SQLiteColumn }, accountId: string): AsyncGenerator<Row[]> {
  const db = drizzle(d1);
  let after: string | null = null;
  for (;;) {
    const rows = (await db.select().from(table)
      .where(and(eq(table.accountId, accountId), after ? gt(table.id, after) : undefined))
      .orderBy(asc(table.id)).limit(PAGE)) as Row[];
    if (rows.length === 0) return;
    yield rows;
    if (rows.length < PAGE) return;
    after = String(rows[rows.length - 1]!.id);
  }
}

export function exportAccount(d1: D1Database, accountId: string): ReadableStream<Uint8Array> {
  const enc = new TextEncoder();
  const db = drizzle(d1);
  async function* parts(): AsyncGenerator<string> {
    const account = await db.select().from(accounts).where(eq(accounts.id, accountId)).get();
    yield `{"exported_at":${JSON.stringify(new Date().toISOString())},"account":${JSON.stringify({ id: account?.id, name: account?.name, plan: account?.plan, rate_limit: account?.rateLimit, created_at: iso(account?.createdAt) })}`;
    const members = await db.select({ email: authUsers.email, name: authUsers.name, role: memberships.role, since: memberships.createdAt })
      .from(memberships).innerJoin(authUsers, eq(authUsers.id, memberships.userId)).where(eq(memberships.accountId, accountId));
    yield `,"members":${JSON.stringify(members.map((m) => ({ ...m, since: iso(m.since) })))}`;
    const keys = await db.select({ id: apiKeys.id, name: apiKeys.name, permission: apiKeys.permission, domain_id: apiKeys.domainId, token_prefix: apiKeys.tokenPrefix, created_at: apiKeys.createdAt, last_used_at: apiKeys.lastUsedAt })
      .from(apiKeys).where(eq(apiKeys.accountId, accountId));
    yield `,"api_keys":${JSON.stringify(keys.map((k) => ({ ...k, created_at: iso(k.created_at), last_used_at: iso(k.last_used_at) })))}`;
    const doms = await db.select().from(domains).where(eq(domains.accountId, accountId));
    const pub = await db.select({ domainId: dkimKeys.domainId, selector: dkimKeys.selector, algorithm: dkimKeys.algorithm, publicKey: dkimKeys.publicKey, state: dkimKeys.state })
      .from(dkimKeys).where(eq(dkimKeys.accountId, accountId));
    yield `,"domains":${JSON.stringify(doms.map((d) => ({
      id: d.id, name: d.name, region: d.region, status: d.status, return_path: d.returnPath, open_tracking: d.openTracking, click_tracking: d.clickTracking,
      tls: d.tls, receiving: d.receiving, created_at: iso(d.createdAt), dkim_keys: pub.filter((k) => k.domainId === d.id).map(({ domainId: _, ...k }) => k),
    })))}`;

    yield `,"emails":[`;
    let first = true;
    for await (const rows of pages(d1, emails, accountId)) {
      const ids = rows.map((r) => String(r.id));
      const events = await db.select().from(emailEvents).where(inArray(emailEvents.emailId, ids)).orderBy(asc(emailEvents.id));
      for (const r of rows as (typeof emails.$inferSelect)[]) {
        const item = {
          id: r.id, from: r.fromAddress, to: JSON.parse(r.toJson), cc: JSON.parse(r.ccJson), bcc: JSON.parse(r.bccJson), reply_to: JSON.parse(r.replyToJson),
          subject: r.subject, tags: JSON.parse(r.tagsJson), created_at: iso(r.createdAt), scheduled_at: iso(r.scheduledAt), last_event: r.lastEvent,
          events: events.filter((e) => e.emailId === r.id).map((e) => ({ type: e.type, created_at: iso(e.createdAt), data: JSON.parse(e.dataJson) })),
        };
        yield (first ? "" : ",") + JSON.stringify(item);
        first = false;
      }
    }
    yield "]";

    const simple: [string, SQLiteTable & { id: SQLiteColumn; accountId: SQLiteColumn }, (r: Row) => Row][] = [
      ["contacts", contacts, (r) => ({ id: r.id, email: r.email, first_name: r.firstName, last_name: r.lastName, unsubscribed: r.unsubscribed, created_at: iso(r.createdAt as number) })],
      ["suppressions", suppressions, (r) => ({ id: r.id, email: r.email, reason: r.reason, email_id: r.emailId, detail: r.detail, created_at: iso(r.createdAt as number) })],
      ["webhooks", webhooks, (r) => ({ id: r.id, endpoint: r.endpoint, events: JSON.parse(String(r.eventsJson)), status: r.status, created_at: iso(r.createdAt as number) })],
      ["received_emails", inboundEmails, (r) => ({ id: r.id, from: r.fromAddress, to: JSON.parse(String(r.toJson)), subject: r.subject, created_at: iso(r.createdAt as number) })],
      ["audit_log", auditLog, (r) => ({ at: iso(r.createdAt as number), who: r.actorEmail, action: r.action, target: r.target, detail: r.detailJson ? JSON.parse(String(r.detailJson)) : null, ip: r.ip })],
    ];
    for (const [name, table, view] of simple) {
      yield `,${JSON.stringify(name)}:[`;
      let firstRow = true;
      for await (const rows of pages(d1, table, accountId)) {
        for (const r of rows) {
          yield (firstRow ? "" : ",") + JSON.stringify(view(r));
          firstRow = false;
        }
      }
      yield "]";
    }
    yield "}\n";
  }
  const it = parts();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = await it.next();
      if (next.done) controller.close();
      else controller.enqueue(enc.encode(next.value));
    },
  });
}
