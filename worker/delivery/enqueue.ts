// Enqueueing emails for delivery, each on its region's send queue (worker/queues.ts).
import { sendQueueBinding } from "../queues.ts";
import { DEFAULT_REGION, isRegion } from "../regions.ts";
import type { QueueMessage } from "../sending/accept.ts";

type SendQueues = Record<string, Queue<QueueMessage> | undefined>;

/** Hints each email's region's sender: one queue message per email on its region's queue (an
 * unknown region, a row older than the table, goes to the default region's queue, whose sender
 * uses the email's own region's transport). Hints only: the consumer's claim decides, and the
 * cron re-enqueues emails left in `queued`, so a failed send here loses nothing. */
export async function enqueueEmails(env: object, list: Array<{ id: string; region: string }>): Promise<void> {
  const byRegion = new Map<string, string[]>();
  for (const e of list) {
    const region = isRegion(e.region) ? e.region : DEFAULT_REGION;
    let ids = byRegion.get(region);
    if (!ids) byRegion.set(region, (ids = []));
    ids.push(e.id);
  }
  await Promise.all([...byRegion].map(async ([region, ids]) => {
    const queue = (env as SendQueues)[sendQueueBinding(region)];
    if (!queue) throw new Error(`the Worker has no queue binding ${sendQueueBinding(region)} for region ${region} (wrangler.toml)`);
    // A queue's sendBatch takes 100 messages.
    for (let i = 0; i < ids.length; i += 100) {
      await queue.sendBatch(ids.slice(i, i + 100).map((emailId) => ({ body: { emailId } satisfies QueueMessage })));
    }
  }));
}
