// The row that claims an idempotency key (worker/sending/idempotency.ts), as statements that
// ride first in the D1 batch recording a send, so that claiming the key and recording the
// emails are one atomic fact.
import { and, eq, lte } from "drizzle-orm";
import type { DrizzleD1Database } from "drizzle-orm/d1";
import { deleteExpiredKey, insertKey } from "../db/compiled.ts";
import { idempotencyKeys } from "../db/schema.ts";
import { d1ErrorText } from "./quota.ts";

export const KEY_LIFETIME_MS = 24 * 3600_000;

/** The key a request claims: written with its answer when it is the first. */
export interface KeyClaim {
  accountId: string;
  /** Method and path: "POST /emails". */
  scope: string;
  key: string;
  fingerprint: string;
}

/** Another request with this key has already recorded its answer. */
export class KeyTaken extends Error {
  constructor() {
    super("the idempotency key is already used");
  }
}

export const thisKey = (c: KeyClaim) => and(eq(idempotencyKeys.accountId, c.accountId), eq(idempotencyKeys.scope, c.scope), eq(idempotencyKeys.key, c.key));

/** Deletes the key's row if its 24 hours are over, so that it can be claimed again. */
export function deleteIfExpired(db: DrizzleD1Database, claim: KeyClaim, now: number) {
  return db.delete(idempotencyKeys).where(and(thisKey(claim), lte(idempotencyKeys.expiresAt, now)));
}

/** The key's row with its answer. */
export function keyRow(claim: KeyClaim, answer: { status: number; body: string }, now: number) {
  return { ...claim, status: answer.status, body: answer.body, createdAt: now, expiresAt: now + KEY_LIFETIME_MS };
}

/** The statements that claim the key with its answer; they go first in the send's batch. A
 * live row makes the INSERT fail, and with it the batch; an expired one is deleted first.
 * Compiled once per isolate (db/compiled.ts): drizzle built them on every keyed send. */
export function claimBound(d1: D1Database, claim: KeyClaim, answer: { status: number; body: string }, now: number): D1PreparedStatement[] {
  return [deleteExpiredKey.bind(d1, { accountId: claim.accountId, scope: claim.scope, key: claim.key, now }), insertKey.bind(d1, keyRow(claim, answer, now))];
}

export function isKeyTaken(err: unknown): boolean {
  return /UNIQUE constraint failed: idempotency_keys\./i.test(d1ErrorText(err));
}
