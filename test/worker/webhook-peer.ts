// Talking to the webhook receivers of test/support/webhook-control.ts from workerd, and driving
// the webhook consumer with a clock the test sets.
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { drizzle } from "drizzle-orm/d1";
import { emailOutboxEvent, outboxInsert, type OutboxEvent, type WebhookQueueMessage } from "../../worker/events/outbox.ts";
import { consumeWebhookBatch } from "../../worker/webhooks/consumer.ts";
import { api } from "./fixtures.ts";

// The receiver's records as JSON (test/support/webhook-receiver.ts: a Node module, so only its shapes here).
export type Answer = { status: number; body?: string; delayMs?: number } | { hang: true } | { reset: true };
export interface Delivery {
  path: string;
  headers: Record<string, string>;
  body: string;
  receivedAt: number;
  verifications: { secret: string; svix: string | null; standardwebhooks: string | null }[];
  verified: boolean;
  timestampSkewSeconds: number | null;
}
/** real: checks signed timestamps against the clock; driven: signatures only (the test runs tern's clock ahead). */
export type ReceiverKind = "real" | "driven";

const control = (p: string) => `http://127.0.0.1:${env.TEST_PEERS.webhookControl}${p}`;

/** A path no other test uses, on one of the receivers. */
export function receiverUrl(kind: ReceiverKind, name = "hook"): { url: string; path: string } {
  const path = `/${name}-${crypto.randomUUID()}`;
  const port = kind === "real" ? env.TEST_PEERS.webhooks : env.TEST_PEERS.webhooksDriven;
  return { url: `http://127.0.0.1:${port}${path}`, path };
}

export async function deliveriesAt(kind: ReceiverKind, path: string): Promise<Delivery[]> {
  return (await fetch(control(`/deliveries?receiver=${kind}&path=${encodeURIComponent(path)}`))).json();
}

export async function script(kind: ReceiverKind, path: string, answers: Answer[], then?: Answer): Promise<void> {
  await fetch(control(`/script?receiver=${kind}&path=${encodeURIComponent(path)}`), { method: "POST", body: JSON.stringify({ answers, then }) });
}

export async function setSecrets(kind: ReceiverKind, path: string, secrets: string[]): Promise<void> {
  await fetch(control(`/secrets?receiver=${kind}&path=${encodeURIComponent(path)}`), { method: "POST", body: JSON.stringify({ secrets }) });
}

export async function createWebhook(token: string, endpoint: string, events: string[]): Promise<{ id: string; signing_secret: string }> {
  const res = await api(token, "POST", "/webhooks", { endpoint, events });
  if (res.status !== 201) throw new Error(`webhook not created: ${res.status} ${await res.text()}`);
  return res.json();
}

/**
 * A clock for the consumer: starts at `at` and runs at real speed (so attempt durations are
 * real); `set` jumps it. Tests start it weeks ahead, so the background consumer, which runs on
 * the real clock, never finds their deliveries due.
 */
export class Clock {
  private base: number;
  private realStart = Date.now();
  constructor(at = Date.now() + 30 * 24 * 3600_000) {
    this.base = at;
  }
  now = (): number => this.base + (Date.now() - this.realStart);
  set(at: number): void {
    this.base = at;
    this.realStart = Date.now();
  }
}

/** Writes an email event to the outbox as tern does, without announcing it (the test drives the consumer). */
export async function outboxEmailEvent(accountId: string, type: "email.sent" | "email.delivered", at: number, emailId = crypto.randomUUID()): Promise<OutboxEvent> {
  const event = emailOutboxEvent(accountId, {
    type,
    email: { id: emailId, createdAt: at, from: "Acme <news@acme.test>", to: ["someone@example.com"], subject: "Driven", messageId: `${emailId}@acme.test`, tags: [{ name: "k", value: "v" }] },
    at,
  }, at);
  await drizzle(env.DB).batch([outboxInsert(drizzle(env.DB), event)]);
  return event;
}

/** Runs the real consumer on a batch of messages at the clock's time; answers what it did with each message. */
export async function consume(bodies: WebhookQueueMessage[], clock: Clock) {
  const batch = createMessageBatch<WebhookQueueMessage>("tern-webhooks", bodies.map((body, i) => ({ id: `m${i}-${crypto.randomUUID()}`, timestamp: new Date(), attempts: 1, body })));
  const ctx = createExecutionContext();
  await consumeWebhookBatch(batch, env, { now: clock.now });
  return getQueueResult(batch, ctx);
}

export async function deliveryRow(webhookId: string, eventId: string) {
  return env.DB.prepare("SELECT * FROM webhook_deliveries WHERE webhook_id = ? AND event_id = ?").bind(webhookId, eventId)
    .first<{ id: string; status: string; attempts: number; next_attempt_at: number | null }>();
}
