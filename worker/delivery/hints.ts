// The webhook queue's hints of a sender's settlements, gathered for a moment and sent together.
// A hint per settlement was a queue send on the connection's path for every email, and each
// woke the webhook consumer for a fan-out of its own (two D1 reads and a write) for one or two
// events. The events are already in D1 (the outbox rows ride in the settlement's batch), so a
// hint only says "look now": delaying it by up to `windowMs` keeps an idle queue's webhook well
// inside its 1 s budget, and a hint lost in a crash is found by the cron as before.
import { announce, type OutboxEvent } from "../events/outbox.ts";

/** How long a hint waits for others to go with it. */
export const HINT_WINDOW_MS = 100;
/** A queue sendBatch takes at most 100 messages. */
const MAX_HINTS = 100;

export class HintBuffer {
  private events: OutboxEvent[] = [];
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly sends: Promise<void>[] = [];

  constructor(
    private readonly env: Pick<Env, "WEBHOOK_QUEUE">,
    private readonly windowMs = HINT_WINDOW_MS,
  ) {}

  /** Queues the hints of one settlement; they leave within `windowMs`, or at once when a
   * sendBatch is full. */
  add(events: readonly OutboxEvent[]): void {
    if (events.length === 0) return;
    this.events.push(...events);
    if (this.events.length >= MAX_HINTS) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.windowMs);
  }

  private flush(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    const events = this.events.splice(0);
    // announce never throws: a hint that does not leave is found by the cron.
    if (events.length > 0) this.sends.push(announce(this.env, events));
  }

  /** Sends what waits and resolves once every hint has left (a sender's request ends here). */
  async close(): Promise<void> {
    this.flush();
    await Promise.all(this.sends.splice(0));
  }
}
