// One-off rewrites of rows stored under an older rule, run a slice per cron tick until done
// (each job's row in maintenance_jobs, added by the migration that brings the rule).
//
// canonical_addresses: contacts and suppressions are keyed by an address's canonical spelling
// (addressKey: its domain's one IDNA form). Rows stored before kept the spelling they came in
// (an A-label, say), and would no longer match the same mailbox written the new way. Each row
// whose address holds a non-ASCII character or an A-label is rewritten to its key; where the
// key's row already exists, a suppression's older copy is dropped (the address stays
// suppressed) and a contact is left as it is (two contacts of one mailbox are not merged
// without a person: both keep their segments and history).
import { and, eq, gt, like, or, sql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { contacts, maintenanceJobs, suppressions } from "./db/schema.ts";
import { addressKey } from "./mime/address.ts";

const JOB = "canonical_addresses";
/** Rows read per table per tick; the filter walks the primary key, one-off. */
const SLICE = 500;

type Cursor = { table: "suppressions" | "contacts"; after: string };

export interface MaintenanceResult {
  rewritten: number;
  done: boolean;
}

export async function runMaintenance(env: Pick<Env, "DB">, now = Date.now()): Promise<MaintenanceResult> {
  const db = drizzle(env.DB);
  const job = await db.select().from(maintenanceJobs).where(eq(maintenanceJobs.name, JOB)).get();
  if (!job || job.doneAt !== null) return { rewritten: 0, done: true };
  const cursor: Cursor = job.cursorJson ? (JSON.parse(job.cursorJson) as Cursor) : { table: "suppressions", after: "" };
  const table = cursor.table === "suppressions" ? suppressions : contacts;
  // Not ASCII, or an A-label: the only spellings addressKey can change beyond lower case, which
  // rows always had.
  const rows = await db.select({ id: table.id, email: table.email }).from(table)
    .where(and(gt(table.id, cursor.after), or(sql`${table.email} GLOB '*[^ -~]*'`, like(table.email, "%xn--%"))))
    .orderBy(table.id).limit(SLICE);
  const statements = [];
  let rewritten = 0;
  for (const r of rows) {
    const key = addressKey(r.email);
    if (key === r.email) continue;
    rewritten++;
    statements.push(env.DB.prepare(`UPDATE OR IGNORE ${cursor.table} SET email = ? WHERE id = ?`).bind(key, r.id));
    // Kept under the old spelling only when the key's row exists: a suppression's older copy goes.
    if (cursor.table === "suppressions") statements.push(env.DB.prepare("DELETE FROM suppressions WHERE id = ? AND email = ?").bind(r.id, r.email));
  }
  const next: Cursor | null = rows.length === SLICE ? { table: cursor.table, after: rows.at(-1)!.id }
    : cursor.table === "suppressions" ? { table: "contacts", after: "" } : null;
  statements.push(env.DB.prepare("UPDATE maintenance_jobs SET cursor_json = ?, done_at = ? WHERE name = ?")
    .bind(next ? JSON.stringify(next) : job.cursorJson, next ? null : now, JOB));
  await env.DB.batch(statements);
  return { rewritten, done: next === null };
}
