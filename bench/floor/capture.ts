// What tern itself sends to D1 for the floor's two database routes, captured by running tern's
// own code against a recording D1 binding (no database): recordEmails (worker/sending/accept.ts)
// for a plain send of the bench's body, as prepareEmail makes it, and the query findEmail
// (worker/routes/emails.ts) builds for GET /emails/<id>. bench/floor.ts imports this at run
// time (Node runs the TypeScript) and refuses to measure if the floor's statements
// (bench/floor/statements.ts) differ from these in SQL text, parameters or D1 method.
// Type-checked with the Worker's tsconfig, like the code it runs.
import { and, eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { Principal } from "../../worker/auth.ts";
import type { TernConfig } from "../../worker/config.ts";
import { emails } from "../../worker/db/schema.ts";
import { uuidv7 } from "../../worker/ids.ts";
import { recordEmails, type PreparedEmail } from "../../worker/sending/accept.ts";
import { FLOOR_ACCOUNT, FLOOR_DOMAIN, FLOOR_DOMAIN_NAME, FLOOR_PLAN, SEND_FROM, SEND_SUBJECT, SEND_TEXT, SEND_TO, type Statement } from "./statements.ts";

export interface D1Call {
  /** "batch", or the method a single statement was run with ("raw", "all", "first", "run"). */
  method: string;
  statements: Statement[];
}

class RecordingStatement {
  sql: string;
  params: unknown[] = [];
  private calls: D1Call[];
  constructor(sql: string, calls: D1Call[]) {
    this.sql = sql;
    this.calls = calls;
  }
  bind(...params: unknown[]): RecordingStatement {
    this.params = params;
    return this;
  }
  private record(method: string): void {
    this.calls.push({ method, statements: [{ sql: this.sql, params: this.params }] });
  }
  async raw(): Promise<unknown[][]> {
    this.record("raw");
    return [];
  }
  async all(): Promise<D1Result> {
    this.record("all");
    return { results: [], success: true, meta: {} } as unknown as D1Result;
  }
  async first(): Promise<null> {
    this.record("first");
    return null;
  }
  async run(): Promise<D1Result> {
    this.record("run");
    return { results: [], success: true, meta: {} } as unknown as D1Result;
  }
}

function recordingD1(calls: D1Call[]): D1Database {
  return {
    prepare: (sql: string) => new RecordingStatement(sql, calls),
    batch: async (statements: RecordingStatement[]) => {
      calls.push({ method: "batch", statements: statements.map((s) => ({ sql: s.sql, params: s.params })) });
      // The quota statement returns the new total, which recordEmails reads.
      return statements.map((s) => ({ results: /\breturning\b/.test(s.sql) ? [{ used: 1 }] : [], success: true, meta: {} }));
    },
  } as unknown as D1Database;
}

function unavailable(name: string): never {
  throw new Error(`tern's accept path touched ${name}, which a plain send of the bench's body should not do before the batch`);
}

/** The D1 calls tern makes to record one plain send of the bench's body at `now`, and to look
 * up an email by id. */
export async function captureTern(now: number = Date.now()): Promise<{ emailId: string; send: D1Call[]; read: D1Call[] }> {
  const send: D1Call[] = [];
  const env = {
    DB: recordingD1(send),
    BLOBS: new Proxy({}, { get: () => unavailable("R2") }),
    SEND_QUEUE_US_EAST_1: { sendBatch: async () => undefined },
    WEBHOOK_QUEUE: { sendBatch: async () => undefined },
  } as unknown as Env;
  const principal: Principal = { accountId: FLOOR_ACCOUNT, keyId: "bench", permission: "full_access", domainId: null, plan: FLOOR_PLAN, rateLimit: 1_000_000 };
  const id = uuidv7(now);
  // What prepareEmail makes of {"from": SEND_FROM, "to": SEND_TO, "subject": "bench", "text": "hello"}.
  const prepared: PreparedEmail = {
    id, accountId: FLOOR_ACCOUNT, from: SEND_FROM, to: [SEND_TO], cc: [], bcc: [], replyTo: [], subject: SEND_SUBJECT, html: null, text: SEND_TEXT,
    headers: {}, tags: [], attachments: [], scheduledAt: null, domainId: FLOOR_DOMAIN, region: "us-east-1", recipients: [SEND_TO],
    messageId: `${id}@${FLOOR_DOMAIN_NAME}`, createdAt: now,
  };
  const config = { inlineContentLimit: 65536 } as TernConfig;
  await recordEmails(env, config, principal, [prepared], now);

  const read: D1Call[] = [];
  // findEmail's query, built the same way.
  await drizzle(recordingD1(read)).select().from(emails).where(and(eq(emails.id, "00000000-0000-4000-8000-000000000000"), eq(emails.accountId, FLOOR_ACCOUNT))).get();
  return { emailId: id, send, read };
}
