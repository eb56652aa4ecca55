// Which consumer a queue's batch goes to, by the queue's name. A deployment names its queues
// (tern-send, or tern-eu-send in the README's EU environment), so the role is the name's last
// part: -send, -webhooks or -broadcasts. test/node/deploy-config.test.ts checks that every
// consumer of every environment the README describes has one.
export type QueueRole = "send" | "webhooks" | "broadcasts";

export function queueRole(queue: string): QueueRole | null {
  const m = /-(send|webhooks|broadcasts)$/.exec(queue);
  return m ? (m[1] as QueueRole) : null;
}
