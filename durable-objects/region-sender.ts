// A region's sender: the object its send queue's consumer hands each batch to
// (worker/delivery/region-batch.ts), created with the region's location hint so it runs near
// the region's relay. It keeps its relay connections open across batches: a socket opened by
// `connect()` in a Durable Object belongs to the object, not to the request that opened it,
// so the next request finds it connected (test/worker/region-sender.test.ts shows it in
// workerd). A connection idle for 20 s is closed with QUIT, a broken one is reopened, and at
// most 5 are open at once (session-pool.ts). The object stores nothing: each email's claim,
// lease and progress are in D1 exactly as for the in-process consumer (consumer.ts).
import { DurableObject } from "cloudflare:workers";
import { readConfig } from "../worker/config.ts";
import { deliverBatch, type DeliveryOutcome } from "../worker/delivery/consumer.ts";
import { SessionPool } from "../worker/delivery/session-pool.ts";
import { transportFor } from "../worker/transports/select.ts";

export class RegionSender extends DurableObject<Env> {
  private readonly pool: SessionPool;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    const config = readConfig(env);
    this.pool = new SessionPool((region) => transportFor(env, config, region));
  }

  /** Delivers a queue batch's emails; answers each one's outcome for the queue message. */
  async deliver(emailIds: string[]): Promise<Array<{ id: string; outcome: DeliveryOutcome }>> {
    return [...(await deliverBatch(this.env, emailIds, this.pool))].map(([id, outcome]) => ({ id, outcome }));
  }

  /** The sessions (each one relay connection, reopened when it broke) this object has made for
   * a region since it started, and how many wait idle now. */
  async connections(region: string): Promise<{ sessions: number; idle: number; busy: number }> {
    return this.pool.stats(region);
  }
}
