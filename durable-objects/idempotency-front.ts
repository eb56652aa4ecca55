// The single-flight point of Idempotency-Keys (contract 4.3, architecture step 3): every
// request with a key asks the key's object first (one of a few per account, picked by hashing
// the key: worker/sending/idempotency.ts frontName). The first
// one is told to run its send itself, in its own isolate (the send and its D1 batch are
// exactly what they are without the object), and reports the answer when it has it; requests
// that arrive meanwhile wait here and get that answer, so a retry storm costs D1 one batch
// instead of one failing batch per repeat. The object remembers only the send in flight and
// forgets it when it settles: it keeps nothing D1 does not have, and if it is lost (evicted,
// restarted) the key's row in D1 still decides (worker/sending/idempotency.ts falls back to it).
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
  /** No send with this key is in flight: run it, then report with `settle(key, token, ...)`. */
  | { kind: "run"; token: string }
  /** Another request with the same body ran while this one waited: replay its answer. */
  | { kind: "replay"; answer: Omit<Settled, "stored"> }
  /** Another request with another body stored its answer while this one waited. */
  | { kind: "conflict" };

/** How long waiters trust a runner that has not reported: past it (the runner's isolate died,
 * or its report was lost) the next waiter runs, and the D1 row decides between them. Longer
 * than any send: attachment fetches time out at 15 s, the D1 batch well before this. */
export const RUN_DEADLINE_MS = 60_000;

interface InFlight {
  fingerprint: string;
  token: string;
  /** Settles with the answer, or with null when the runner failed or went silent. */
  done: Promise<Settled | null>;
  settle: (s: Settled | null) => void;
  deadline: ReturnType<typeof setTimeout>;
}

export class IdempotencyFront extends DurableObject<Env> {
  /** The sends in flight, by key (scope and key: an object serves many keys of one account). */
  private readonly inFlight = new Map<string, InFlight>();

  /** Lets the caller run its send unless one with this key is in flight: then waits for it
   * and replays its answer (same body) or reports the conflict (another body). When the one in
   * flight released the key or failed, the first waiter to wake runs next. */
  async enter(key: string, fingerprint: string): Promise<FrontResult> {
    for (;;) {
      const current = this.inFlight.get(key);
      if (!current) break;
      const settled = await current.done;
      if (settled?.stored) {
        if (current.fingerprint !== fingerprint) return { kind: "conflict" };
        const { stored: _, ...answer } = settled;
        return { kind: "replay", answer: { ...answer, headers: { ...answer.headers, "idempotent-replayed": "true" } } };
      }
    }
    const token = crypto.randomUUID();
    let settle!: (s: Settled | null) => void;
    const done = new Promise<Settled | null>((r) => (settle = r));
    const deadline = setTimeout(() => this.settle(key, token, null), RUN_DEADLINE_MS);
    this.inFlight.set(key, { fingerprint, token, done, settle, deadline });
    return { kind: "run", token };
  }

  /** The runner's answer (null: its send failed). A report from a runner whose turn ended
   * (its deadline passed) changes nothing. */
  settle(key: string, token: string, settled: Settled | null): void {
    const current = this.inFlight.get(key);
    if (!current || current.token !== token) return;
    clearTimeout(current.deadline);
    // Forgotten before the waiters wake, so that the first of them finds the way clear.
    this.inFlight.delete(key);
    current.settle(settled);
  }
}
