// One Durable Object per (account, method + path, Idempotency-Key): it serialises everything
// about that key. The first request gets a lease and the email ids to use; while the lease
// holds, a second request is told the first is in flight (409); once the answer is stored it
// is replayed; a different body is a conflict. 24 hours after first use an alarm deletes it.
// The send itself runs in the Worker with the reserved ids, so even a request that outlives
// its lease cannot record twice: the ids are the emails' primary keys.
import { DurableObject } from "cloudflare:workers";
import { uuidv7 } from "../worker/ids.ts";
import type { Answer } from "../worker/sending/send.ts";

export const KEY_LIFETIME_MS = 24 * 3600_000;
/** How long a first request may take before another request with the key may take over. */
export const LEASE_MS = 60_000;

interface KeyState {
  fingerprint: string;
  ids: string[];
  firstUsedAt: number;
  leaseUntil: number;
  answer: Answer | null;
}

export type Begin =
  | { kind: "run"; ids: string[] }
  | { kind: "replay"; answer: Answer }
  | { kind: "conflict" }
  | { kind: "in_flight" };

export class IdempotencyKey extends DurableObject<Env> {
  async begin(fingerprint: string, count: number, now: number = Date.now()): Promise<Begin> {
    const state = await this.ctx.storage.get<KeyState>("state");
    if (!state) {
      const ids = Array.from({ length: count }, () => uuidv7(now));
      // Not awaited one by one: the two writes coalesce into one durable commit, and the output
      // gate holds this answer until it is on disk.
      void this.ctx.storage.put<KeyState>("state", { fingerprint, ids, firstUsedAt: now, leaseUntil: now + LEASE_MS, answer: null });
      void this.ctx.storage.setAlarm(now + KEY_LIFETIME_MS);
      return { kind: "run", ids };
    }
    if (state.fingerprint !== fingerprint) return { kind: "conflict" };
    if (state.answer) return { kind: "replay", answer: state.answer };
    if (state.leaseUntil > now) return { kind: "in_flight" };
    // The first request died (or is very late): run again with the same ids.
    await this.ctx.storage.put<KeyState>("state", { ...state, leaseUntil: now + LEASE_MS });
    return { kind: "run", ids: state.ids };
  }

  /** Stores the answer to replay; 429 and 5xx answers release the key so the client can retry. */
  async finish(fingerprint: string, answer: Answer): Promise<void> {
    const state = await this.ctx.storage.get<KeyState>("state");
    if (!state || state.fingerprint !== fingerprint) return;
    if (answer.status === 429 || answer.status >= 500) {
      await this.release();
      return;
    }
    await this.ctx.storage.put<KeyState>("state", { ...state, answer });
  }

  override async alarm(): Promise<void> {
    await this.release();
  }

  private async release(): Promise<void> {
    void this.ctx.storage.deleteAlarm();
    await this.ctx.storage.deleteAll();
  }
}
