// The single-flight point of one Idempotency-Key (contract 4.3, architecture step 3): every
// request with the key comes through this object, named after (account, scope, key). The first
// one runs its send (the caller's own callback, in the caller's isolate, so the send and its
// D1 batch are exactly what they are without the object); requests that arrive while it runs
// wait here and get its answer, so a retry storm costs D1 one batch instead of one failing
// batch per repeat. The object remembers only the send in flight and forgets it when it settles:
// it keeps nothing D1 does not have, and if it is lost (evicted, restarted) the key's row in D1
// still decides (worker/sending/idempotency.ts falls back to it).
import { DurableObject } from "cloudflare:workers";

/** What a send answered, and whether that answer is the key's for good (stored in D1 with
 * the emails or as a validation outcome) or released it (429, 5xx). */
export interface Settled {
  status: number;
  body: string;
  headers: Record<string, string>;
  stored: boolean;
}

export type FrontResult =
  /** The caller's own callback ran: its answer is the caller's to give. */
  | { kind: "ran" }
  /** Another request with the same body ran while this one waited: replay its answer. */
  | { kind: "replay"; answer: Omit<Settled, "stored"> }
  /** Another request with another body stored its answer while this one waited. */
  | { kind: "conflict" };

interface InFlight {
  fingerprint: string;
  /** Settles with the answer, or with null when the runner's send failed. */
  done: Promise<Settled | null>;
}

export class IdempotencyFront extends DurableObject<Env> {
  private inFlight: InFlight | undefined;

  /** Runs `send` unless a send with this key is in flight: then waits for it and replays its
   * answer (same body) or reports the conflict (another body). When the one in flight released
   * the key or failed, one of the waiters runs next. */
  async run(fingerprint: string, send: () => Promise<Settled | null>): Promise<FrontResult> {
    for (;;) {
      const current = this.inFlight;
      if (!current) break;
      const settled = await current.done;
      if (settled?.stored) {
        if (current.fingerprint !== fingerprint) return { kind: "conflict" };
        const { stored: _, ...answer } = settled;
        return { kind: "replay", answer: { ...answer, headers: { ...answer.headers, "idempotent-replayed": "true" } } };
      }
      // Released or failed: the first waiter to get here runs; the others wait for it.
    }
    let settle!: (s: Settled | null) => void;
    const mine: InFlight = { fingerprint, done: new Promise((r) => (settle = r)) };
    this.inFlight = mine;
    let settled: Settled | null;
    try {
      settled = await send();
    } catch {
      // The caller is gone (its isolate ended mid-send): the waiters try for themselves.
      settled = null;
    }
    // Forgotten before the waiters wake, so that the first of them finds the way clear.
    if (this.inFlight === mine) this.inFlight = undefined;
    settle(settled);
    return { kind: "ran" };
  }
}
