// Submission slots shared fairly between API keys: at most `size` holders in all and
// `perOwner` for any one key, so one tenant cannot take every slot; a freed slot goes to the
// waiting keys in turn (round robin), not in arrival order, so a tenant that queues hundreds
// of sessions does not make another tenant's single session wait behind all of them.

export class FairSlots {
  readonly #size: number;
  readonly #perOwner: number;
  #held = 0;
  readonly #heldBy = new Map<string, number>();
  /** Waiters by owner; the map's order is the round robin's (an owner served goes to the end). */
  readonly #waiting = new Map<string, (() => void)[]>();
  #waitingCount = 0;

  constructor(size: number, perOwner: number) {
    this.#size = size;
    this.#perOwner = Math.min(perOwner, size);
  }

  get held(): number {
    return this.#held;
  }
  get waiting(): number {
    return this.#waitingCount;
  }
  heldBy(owner: string): number {
    return this.#heldBy.get(owner) ?? 0;
  }

  /** Resolves once `owner` holds a slot. A waiter whose session ends still gets its turn and
   * must give it back with release(). */
  acquire(owner: string): Promise<void> {
    // Anyone still waiting while a slot is free is at its own cap (pump() runs on each release).
    if (this.#held < this.#size && this.heldBy(owner) < this.#perOwner) {
      this.#grant(owner);
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const queue = this.#waiting.get(owner);
      if (queue) queue.push(resolve);
      else this.#waiting.set(owner, [resolve]);
      this.#waitingCount++;
    });
  }

  release(owner: string): void {
    const n = this.heldBy(owner);
    if (n <= 0) return;
    if (n === 1) this.#heldBy.delete(owner);
    else this.#heldBy.set(owner, n - 1);
    this.#held--;
    this.#pump();
  }

  #grant(owner: string): void {
    this.#held++;
    this.#heldBy.set(owner, this.heldBy(owner) + 1);
  }

  #pump(): void {
    while (this.#held < this.#size) {
      let next: string | undefined;
      for (const owner of this.#waiting.keys()) {
        if (this.heldBy(owner) < this.#perOwner) {
          next = owner;
          break;
        }
      }
      if (next === undefined) return;
      const queue = this.#waiting.get(next)!;
      const resolve = queue.shift()!;
      this.#waiting.delete(next);
      if (queue.length) this.#waiting.set(next, queue); // to the back of the round
      this.#waitingCount--;
      this.#grant(next);
      resolve();
    }
  }
}
