// A region's send queue consumer: it hands the batch to the region's sender object
// (durable-objects/region-sender.ts), obtained with the region's location hint, and answers
// each queue message with what became of its email. Each region has its own queue, consumer
// and sender, so a relay that is slow or down in one region holds only that region's mail.
import { inJurisdiction, regionFacts } from "../regions.ts";
import type { QueueMessage } from "../sending/accept.ts";
import { answerBatch, consumeSendBatch, type DeliveryOutcome } from "./consumer.ts";
import { queueRegion } from "../queues.ts";

/** The sender of a region: one object per region, named by it, placed by its hint (a hint
 * takes effect when the object is first created). */
export function senderFor(env: Env, region: string): DurableObjectStub<import("../../durable-objects/region-sender.ts").RegionSender> {
  const ns = inJurisdiction(env, env.SENDER);
  const hint = regionFacts(region)?.locationHint;
  return ns.get(ns.idFromName(`region:${region}`), hint ? { locationHint: hint } : undefined);
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
    console.error(`region ${region}: its sender failed; the batch is retried`, err);
    batch.retryAll({ delaySeconds: 30 });
    return;
  }
  answerBatch(batch, new Map(outcomes.map((o) => [o.id, o.outcome])));
}
