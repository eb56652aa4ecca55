// The transport sessions (SMTP connections) a sender keeps per region. A worker borrows one for
// the messages of one email and gives it back; a session given back waits, connected, for the
// next email, and is closed (QUIT) once it has been idle for `idleMs`. In the region's sender
// Durable Object (durable-objects/region-sender.ts) the pool outlives the request that filled it,
// so a connection set up for one queue batch carries the next ones too; a consumer running
// in-process makes a pool per batch and closes it at the end.
//
// A region whose relay could not be reached (refused, silent, TLS or auth failure) is held off
// for `holdMs`: its messages are deferred at once with the same reason instead of each waiting
// out another connect, which would also keep the region's sender busy for nothing.
import type { OutboundMessage, RecipientResult, Transport, TransportSession } from "../transports/transport.ts";

export interface SessionPoolOptions {
  /** Sessions open at once per region: a Worker invocation may hold 6 sockets at once. */
  perRegion: number;
  /** How long an unused session stays connected. */
  idleMs: number;
  /** How long a region whose relay failed to set up a session is not tried again. */
  holdMs: number;
  /** How long mail to a recipient domain waits after the relay asked to slow down for it. */
  throttleMs?: number;
  now?: () => number;
}

// 5 connections, one short of the 6 open sockets an invocation may hold: against 3 they took
// end-to-end delivery from 0.28 to 0.40 of nodemailer (also 5) in the same rounds
// (docs/benchmarks.md, "Where an email's wall time goes").
export const SENDER_POOL_DEFAULTS: SessionPoolOptions = { perRegion: 5, idleMs: 20_000, holdMs: 15_000, throttleMs: 60_000 };

interface Idle {
  session: TransportSession;
  timer: ReturnType<typeof setTimeout>;
}

interface RegionSessions {
  idle: Idle[];
  /** Sessions lent out now. */
  busy: number;
  waiting: Array<() => void>;
  heldOff?: { until: number; reason: string };
  /** Recipient domains the relay asked to slow down for, until when, and why. */
  throttled: Map<string, { until: number; reason: string }>;
  /** Sessions opened for this region since the pool was made (a warm pool opens few). */
  opened: number;
}

export class SessionPool {
  private readonly regions = new Map<string, RegionSessions>();
  private readonly now: () => number;

  constructor(
    private readonly transportFor: (region: string) => Transport,
    private readonly options: SessionPoolOptions = SENDER_POOL_DEFAULTS,
  ) {
    this.now = options.now ?? Date.now;
  }

  private of(region: string): RegionSessions {
    let r = this.regions.get(region);
    if (!r) this.regions.set(region, (r = { idle: [], busy: 0, waiting: [], opened: 0, throttled: new Map() }));
    return r;
  }

  /** How many sessions (each one connection, reopened when it broke) this pool has made for a
   * region, and how many wait idle now. */
  stats(region: string): { sessions: number; idle: number; busy: number } {
    const r = this.of(region);
    return { sessions: r.opened, idle: r.idle.length, busy: r.busy };
  }

  /** A session for one email's messages: an idle one (the most recently used), a new one while
   * the region has fewer than `perRegion`, or the next one given back. */
  async acquire(region: string): Promise<TransportSession> {
    const r = this.of(region);
    for (;;) {
      if (r.heldOff && r.heldOff.until > this.now()) return deferring(r.heldOff.reason);
      const idle = r.idle.pop();
      if (idle) {
        clearTimeout(idle.timer);
        r.busy++;
        return idle.session;
      }
      if (r.busy < this.options.perRegion) {
        r.busy++;
        r.opened++;
        try {
          return await this.transportFor(region).open();
        } catch (err) {
          this.wake(r, -1);
          throw err;
        }
      }
      await new Promise<void>((resolve) => r.waiting.push(resolve));
    }
  }

  /** Gives a session back: kept for the next email, or closed when it could not connect (and
   * the region is then held off) or the pool is closing. */
  release(region: string, session: TransportSession): void {
    if (HELD_OFF.has(session)) return;
    const r = this.of(region);
    const failure = session.setupFailure?.();
    if (failure !== undefined) {
      r.heldOff = { until: this.now() + this.options.holdMs, reason: `${failure} (not tried again for ${Math.round(this.options.holdMs / 1000)} s)` };
      void session.close().catch(() => {});
    } else {
      const entry: Idle = {
        session,
        timer: setTimeout(() => {
          const i = r.idle.indexOf(entry);
          if (i >= 0) r.idle.splice(i, 1);
          void session.close().catch(() => {});
        }, this.options.idleMs),
      };
      r.idle.push(entry);
    }
    this.wake(r, -1);
  }

  private wake(r: RegionSessions, busyDelta: number): void {
    r.busy += busyDelta;
    r.waiting.shift()?.();
  }

  /** The relay answered a message to `domain` with a rate-limit reply (rateLimited below): the
   * region's mail to that domain waits for its retry for a while; other domains go on. */
  throttle(region: string, domain: string, reply: string): void {
    const ms = this.options.throttleMs ?? 60_000;
    const r = this.of(region);
    if (r.throttled.size > 10_000) r.throttled.clear();
    r.throttled.set(domain.toLowerCase(), { until: this.now() + ms, reason: `The relay asked tern to slow down for ${domain.toLowerCase()} ("${reply}"); mail to that domain waits ${Math.round(ms / 1000)} s before the next try.` });
  }

  /** Why mail to `domain` must wait now, or undefined when it may go. */
  throttled(region: string, domain: string): string | undefined {
    const t = this.of(region).throttled.get(domain.toLowerCase());
    return t && t.until > this.now() ? t.reason : undefined;
  }

  /** Closes every idle session (QUIT); sessions lent out are closed by their borrowers' release
   * only if the pool is used again, so call this when no email is being sent. */
  async closeAll(): Promise<void> {
    const closing: Promise<void>[] = [];
    for (const r of this.regions.values()) {
      for (const idle of r.idle.splice(0)) {
        clearTimeout(idle.timer);
        closing.push(idle.session.close().catch(() => {}));
      }
    }
    await Promise.all(closing);
  }
}

/** Sessions handed out while a region is held off: they defer every message with the reason,
 * hold no connection and are not counted against the region's sessions. */
const HELD_OFF = new WeakSet<TransportSession>();

function deferring(reason: string): TransportSession {
  const session: TransportSession = {
    async deliver(m: OutboundMessage): Promise<RecipientResult[]> {
      return m.recipients.map((recipient) => ({ recipient, status: "deferred" as const, message: reason }));
    },
    async close() {},
  };
  HELD_OFF.add(session);
  return session;
}

/** A relay's reply that asks the sender to slow down: 421, 450 or 451 with RFC 3463's 4.7.28
 * ("mail flood") or words to that effect. A plain 4xx (a full mailbox, greylisting) is not. */
export function rateLimited(r: RecipientResult): boolean {
  if (r.status !== "deferred" || (r.code !== 421 && r.code !== 450 && r.code !== 451)) return false;
  return r.enhancedCode === "4.7.28" || /rate.?limit|too many|throttl|slow down/i.test(r.message);
}
