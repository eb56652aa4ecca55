// Which consumer a queue's batch goes to, by the queue's name. A deployment names its queues
// (tern-us-east-1-send, or tern-eu-eu-west-1-send in the README's EU environment), so the role is
// the name's last part: -send, -webhooks or -broadcasts; a send queue also names its region
// just before (-<region>-send), one per region of the table (worker/regions.ts).
// test/node/deploy-config.test.ts checks that every environment the README describes has a
// send queue, its producer binding and its consumer for every region, and a consumer for
// every other queue.
import { REGION_TABLE, type RegionName } from "./region-table.ts";

export type QueueRole = "send" | "webhooks" | "broadcasts";

export function queueRole(queue: string): QueueRole | null {
  const m = /-(send|webhooks|broadcasts)$/.exec(queue);
  return m ? (m[1] as QueueRole) : null;
}

/** The region a send queue carries (`...-<region>-send`), or null for a queue that names none. */
export function queueRegion(queue: string): RegionName | null {
  if (queueRole(queue) !== "send") return null;
  return REGION_TABLE.find((r) => queue.endsWith(`-${r.name}-send`))?.name ?? null;
}

/** The producer binding of a region's send queue: SEND_QUEUE_US_EAST_1, ... */
export function sendQueueBinding(region: string): string {
  return `SEND_QUEUE_${region.toUpperCase().replace(/-/g, "_")}`;
}

/** Every region's send-queue binding, in the table's order. */
export const SEND_QUEUE_BINDINGS = REGION_TABLE.map((r) => sendQueueBinding(r.name));
