// Idempotency keys (contract 4.3) on POST /emails and /emails/batch, and on SMTP submissions
// that carry Tern-Idempotency-Key (the bridge passes it on as this header): one mechanism,
// keyed by (account, method + path, key). A request without a key never comes here.
//
// The key's row is written in the same D1 batch that records the emails and consumes the
// quota (worker/sending/accept.ts), under the row's primary key. So the decision of which of
// two racing requests sends is the database's, made atomically with recording the email: the
// loser's whole batch fails (nothing of it recorded, no quota used, nothing enqueued) and it
// replays the winner's stored answer. A request that dies before its batch commits leaves
// nothing behind, so a retry simply runs; one that dies after it left its answer, so a retry
// replays it. A fresh key costs two small statements in a batch the send makes anyway, and no
// D1 round trip of its own.
//
// In front of the row, the key's Durable Object (durable-objects/idempotency-front.ts) is the
// single-flight point: concurrent repeats wait on it and replay the first one's answer, so a
// retry storm reaches D1 once. It keeps nothing D1 does not: without it the row still decides.
import { z } from "@hono/zod-openapi";
import { and, eq, gt, inArray, lte, sql } from "drizzle-orm";
import { drizzle, type DrizzleD1Database } from "drizzle-orm/d1";
import type { FrontResult, Settled } from "../../durable-objects/idempotency-front.ts";
import type { Principal } from "../auth.ts";
import { sha256Stream, toHex } from "../bytes.ts";
import { idempotencyKeys, usage } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { inJurisdiction } from "../regions.ts";
import { planLimits } from "../plans.ts";
import { deleteIfExpired, KeyTaken, keyRow, thisKey, type KeyClaim } from "./key-claim.ts";
import { periodsAt, quotaHeaders, type QuotaUse } from "./quota.ts";
import type { Defer } from "./accept.ts";
import type { SendLog } from "../logs/record.ts";
import { performSend, type Answer, type SendRequest } from "./send.ts";

export const MAX_KEY_LENGTH = 256;

/** The `Idempotency-Key` header as the send routes document it; checkKey enforces the same
 * schema, with the contract's own error (400 invalid_idempotency_key, not a 422). */
export const IdempotencyKeyHeader = z.string().min(1).max(MAX_KEY_LENGTH).openapi({
  description: `Sends at most once per key for 24 hours. 1 to ${MAX_KEY_LENGTH} characters; scoped to the account and route.`,
});

export function checkKey(key: string): void {
  if (!IdempotencyKeyHeader.safeParse(key).success) {
    throw new ApiError("invalid_idempotency_key", `The idempotency key must be 1 to ${MAX_KEY_LENGTH} characters long.`);
  }
}

/** JSON with object keys sorted at every depth: key order and whitespace do not make two
 * bodies different. */
export function canonicalJson(value: unknown): string {
  return [...canonicalPieces(value)].join("");
}

/** At most this many characters of one string's JSON in a piece. */
const PIECE_CHARS = 64 * 1024;

/** canonicalJson in pieces, in order, a long string's JSON in several (issue 20, item 3: an
 * attachment's base64 `content` near the 40 MB bound is 39 MB; its JSON, the joined text and
 * their UTF-8 were three more copies). A loop over an explicit stack, not recursion: JSON.parse
 * accepts bodies nested far deeper than the call stack goes (100,000 levels fit in a few
 * hundred KB). */
function* canonicalPieces(value: unknown): Generator<string> {
  // Work items, last first: a value to write, or punctuation already decided.
  const stack: ({ value: unknown } | string)[] = [{ value }];
  while (stack.length > 0) {
    const item = stack.pop()!;
    if (typeof item === "string") {
      yield item;
      continue;
    }
    const v = item.value;
    if (Array.isArray(v)) {
      stack.push("]");
      for (let i = v.length - 1; i >= 0; i--) {
        stack.push({ value: v[i] });
        if (i > 0) stack.push(",");
      }
      stack.push("[");
    } else if (v !== null && typeof v === "object") {
      const record = v as Record<string, unknown>;
      const keys = Object.keys(record).sort().filter((k) => record[k] !== undefined);
      stack.push("}");
      for (let i = keys.length - 1; i >= 0; i--) {
        stack.push({ value: record[keys[i]!] });
        stack.push(`${i > 0 ? "," : ""}${JSON.stringify(keys[i])}:`);
      }
      stack.push("{");
    } else if (typeof v === "string" && v.length > PIECE_CHARS) {
      yield '"';
      for (let at = 0; at < v.length; ) {
        let end = Math.min(at + PIECE_CHARS, v.length);
        // A surrogate pair stays in one piece: split, each half would be escaped alone.
        const last = v.charCodeAt(end - 1);
        if (end < v.length && last >= 0xd800 && last <= 0xdbff) end--;
        yield JSON.stringify(v.slice(at, end)).slice(1, -1);
        at = end;
      }
      yield '"';
    } else {
      yield JSON.stringify(v) ?? "";
    }
  }
}

/** SHA-256 of the request kind, batch mode and canonical body, hashed a piece at a time so the
 * canonical text is never held whole (the same bytes, so the same hex, as hashing it joined). */
export async function fingerprint(req: SendRequest): Promise<string> {
  const digest = sha256Stream();
  const writer = digest.getWriter();
  const encoder = new TextEncoder();
  let batch = `${req.kind}\n${req.kind === "batch" ? req.batchMode : ""}\n`;
  for (const piece of canonicalPieces(req.body)) {
    batch += piece;
    if (batch.length >= PIECE_CHARS) {
      await writer.write(encoder.encode(batch));
      batch = "";
    }
  }
  await writer.write(encoder.encode(batch));
  await writer.close();
  return toHex(new Uint8Array(await digest.digest));
}

/** Stores a 4xx validation answer (no email was recorded for it). False when another request
 * stored its answer first. */
async function storeAnswer(db: DrizzleD1Database, claim: KeyClaim, answer: Answer, now: number): Promise<boolean> {
  const [, inserted] = await db.batch([
    deleteIfExpired(db, claim, now),
    db.insert(idempotencyKeys).values(keyRow(claim, answer, now)).onConflictDoNothing().returning({ key: idempotencyKeys.key }),
  ]);
  return inserted.length > 0;
}

/** The stored answer as a replay, a 409 for another body, or null when there is none (it
 * expired in the meantime). */
async function replay(db: DrizzleD1Database, claim: KeyClaim, principal: Principal, now: number): Promise<Answer | null> {
  const p = periodsAt(now);
  const [rows, used] = await db.batch([
    db.select().from(idempotencyKeys).where(and(thisKey(claim), gt(idempotencyKeys.expiresAt, now))),
    db.select().from(usage).where(and(eq(usage.accountId, claim.accountId), inArray(usage.period, [p.month, p.day]))),
  ]);
  const row = rows[0];
  if (!row) return null;
  if (row.fingerprint !== claim.fingerprint) {
    throw new ApiError("invalid_idempotent_request", "This idempotency key was already used with a different request body.");
  }
  const headers: Record<string, string> = { "idempotent-replayed": "true" };
  if (row.status < 300) {
    const of = (period: string) => used.find((u) => u.period === period)?.used ?? 0;
    const use: QuotaUse = { monthlyUsed: of(p.month) };
    if (planLimits(principal.plan).daily !== undefined) use.dailyUsed = of(p.day);
    Object.assign(headers, quotaHeaders(use));
  }
  return { status: row.status, body: row.body, headers };
}

/** Sends at most once per key: replays the stored answer (with idempotent-replayed: true).
 * Through the key's Durable Object (the single-flight point) unless IDEMPOTENCY_FRONT is
 * "false"; either way the key's row in D1 decides. */
export async function sendIdempotently(env: Env, principal: Principal, route: string, key: string, req: SendRequest, defer?: Defer, log?: SendLog): Promise<Answer> {
  checkKey(key);
  const claim: KeyClaim = { accountId: principal.accountId, scope: route, key, fingerprint: await fingerprint(req) };
  const decide = () => decideInD1(env, principal, claim, req, defer, log);
  return env.IDEMPOTENCY_FRONT === "false" ? decide() : throughFront(env, claim, decide, defer);
}

/** 2xx answers are stored with the emails and other 4xx as validation outcomes; 429 and 5xx
 * release the key (contract 4.3). */
const isStored = (status: number) => status < 500 && status !== 429;

/** Objects per account that keys are spread over (by a hash of scope and key). */
export const FRONT_SHARDS = 32;

/** The object a key's requests meet at: one of FRONT_SHARDS per account, chosen by the key, so
 * that every request with the key reaches the same object and a fresh key usually finds one
 * already running. */
export function frontName(claim: Pick<KeyClaim, "accountId" | "scope" | "key">): string {
  // FNV-1a: a stable spread, not a secret.
  let h = 0x811c9dc5;
  const s = `${claim.scope}\n${claim.key}`;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return `${claim.accountId}/${(h >>> 0) % FRONT_SHARDS}`;
}

/** The key's object lets one request at a time run `decide`; the others wait there for its
 * answer. Only asking the object is on the request's path: the report goes after the answer. */
async function throughFront(env: Env, claim: KeyClaim, decide: () => Promise<Answer>, defer?: Defer): Promise<Answer> {
  const stub = inJurisdiction(env, env.IDEMPOTENCY).getByName(frontName(claim));
  const slot = `${claim.scope}\n${claim.key}`;
  let entry: FrontResult;
  try {
    entry = await stub.enter(slot, claim.fingerprint);
  } catch (err) {
    // The object could not be reached: the row in D1 decides alone.
    console.error("idempotency object unavailable; deciding in D1 alone", err instanceof Error ? err.message : String(err));
    return decide();
  }
  if (entry.kind === "replay") return entry.answer;
  if (entry.kind === "conflict") throw new ApiError("invalid_idempotent_request", "This idempotency key was already used with a different request body.");
  const report = (settled: Settled | null) => {
    // A lost report only makes the waiters wait out the object's deadline, then ask D1.
    const sent = stub.settle(slot, entry.token, settled).catch((err: unknown) => console.error("could not report to the idempotency object", err instanceof Error ? err.message : String(err)));
    if (defer) defer(sent);
    else return sent;
  };
  let answer: Answer;
  try {
    answer = await decide();
  } catch (err) {
    await report(null);
    throw err;
  }
  await report({ ...answer, stored: isStored(answer.status) });
  return answer;
}

/** The key's row in D1 decides: the send claims it in its own batch; a request that loses
 * replays the winner's stored answer. */
async function decideInD1(env: Env, principal: Principal, claim: KeyClaim, req: SendRequest, defer?: Defer, log?: SendLog): Promise<Answer> {
  const db = drizzle(env.DB);
  // A second round only when the row we lost to expired between the two reads.
  for (let round = 0; round < 3; round++) {
    const now = Date.now();
    try {
      const answer = await performSend(env, principal, req, { claim, defer, log });
      // 2xx answers were stored with the emails; 429 and 5xx release the key (store nothing);
      // other 4xx are validation outcomes, stored so that a retry gets the same answer.
      if (answer.status < 400 || answer.status === 429 || answer.status >= 500) return answer;
      if (await storeAnswer(db, claim, answer, now)) return answer;
    } catch (err) {
      if (!(err instanceof KeyTaken)) throw err;
    }
    const stored = await replay(db, claim, principal, Date.now());
    if (stored) return stored;
  }
  throw new ApiError("concurrent_idempotent_requests", "A request with this idempotency key is still being processed. Retry in a moment.");
}

/** The cron's share: forget keys 24 hours after their first use. */
export async function sweepIdempotencyKeys(env: Env, now: number = Date.now()): Promise<number> {
  const db = drizzle(env.DB);
  const expired = db.select({ rowid: sql`rowid` }).from(idempotencyKeys).where(lte(idempotencyKeys.expiresAt, now)).limit(5000);
  const { meta } = await db.delete(idempotencyKeys).where(inArray(sql`rowid`, expired)).run();
  return meta.changes ?? 0;
}
