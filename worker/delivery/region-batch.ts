// A region's send queue consumer: it hands the batch to the region's sender object
// (durable-objects/region-sender.ts), obtained with the region's location hint, and answers
// each queue message with what became of its email. Each region has its own queue, consumer
// and sender, so a relay that is slow or down in one region holds only that region's mail.
import { inJurisdiction, regionFacts } from "../regions.ts";
import type { QueueMessage } from "../sending/accept.ts";
import { answerBatch, consumeSendBatch, type DeliveryOutcome } from "./consumer.ts";
import { queueRegion } from "../queues.ts";
import { describeFailure } from "../errors.ts";

/** The sender of a region: one object per region, named by it, placed by its hint (a hint
 * takes effect when the object is first created). SENDERS_PER_REGION > 1 spreads a busy
 * region's batches over that many objects (one thread and 5 connections each), each batch
 * going to one picked at random. */
export function senderFor(env: Env, region: string): DurableObjectStub<import("../../durable-objects/region-sender.ts").RegionSender> {
  const ns = inJurisdiction(env, env.SENDER);
  const hint = regionFacts(region)?.locationHint;
  const pool = Math.min(Math.max(Math.floor(Number(env.SENDERS_PER_REGION) || 1), 1), 32);
  const n = pool > 1 ? Math.floor(Math.random() * pool) : 0;
  return ns.get(ns.idFromName(senderName(region, n)), hint ? { locationHint: hint } : undefined);
}

/** The name of a region's n-th sender (the first keeps the plain name). */
export function senderName(region: string, n: number): string {
  return n === 0 ? `region:${region}` : `region:${region}#${n}`;
}

export async function consumeRegionBatch(batch: MessageBatch<QueueMessage>, env: Env): Promise<void> {
  const region = queueRegion(batch.queue);
  // A send queue that names no region (an older deployment's tern-send) is consumed here, as
  // before regions had their own senders: its messages are not stranded.
  if (region === null) return consumeSendBatch(batch, env);
  let outcomes: Array<{ id: string; outcome: DeliveryOutcome }>;
  try {
    outcomes = await senderFor(env, region).deliver(batch.messages.map((m) => m.body.emailId));
  } catch (err) {
    // The object failed or was reset mid-batch: what it claimed waits for its lease (the cron
    // hands it back, with outcome_unknown for a message in flight); the rest is tried again.
    console.error(`region ${region}: its sender failed; the batch is retried`, describeFailure(err));
    batch.retryAll({ delaySeconds: 30 });
    return;
  }
  answerBatch(batch, new Map(outcomes.map((o) => [o.id, o.outcome])));
}
