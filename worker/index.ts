// The Worker's entry: the HTTP API, the send queue's consumer and the cron.
import { newApp } from "./app.ts";
import { readConfig } from "./config.ts";
import { handleEmail } from "./inbound/email-handler.ts";
import { recheckDueDomains } from "./domains/service.ts";
import { consumeSendBatch } from "./delivery/consumer.ts";
import { sweepDelivery } from "./delivery/cron.ts";
import { registerApiKeyRoutes } from "./routes/api-keys.ts";
import { registerDocRoutes } from "./routes/docs.ts";
import { registerDomainRoutes } from "./routes/domains.ts";
import { registerReceivingRoutes } from "./routes/receiving.ts";
import { registerEmailRoutes } from "./routes/emails.ts";
import { registerContactRoutes } from "./routes/contacts.ts";
import { registerSuppressionRoutes } from "./routes/suppressions.ts";
import { registerTrackingRoutes } from "./routes/tracking.ts";
import { registerWebhookRoutes } from "./routes/webhooks.ts";
import { dashboardApp } from "./dashboard/routes.tsx";
import type { WebhookQueueMessage } from "./events/outbox.ts";
import { consumeWebhookBatch, sweepWebhooks } from "./webhooks/consumer.ts";
import type { QueueMessage } from "./sending/accept.ts";
import { purgeExpired } from "./retention/purge.ts";
import { sweepIdempotencyKeys } from "./sending/idempotency.ts";

export { RateLimiter } from "../durable-objects/rate-limiter.ts";
export { IdempotencyFront } from "../durable-objects/idempotency-front.ts";

export const app = newApp();
registerEmailRoutes(app);
registerApiKeyRoutes(app);
registerDomainRoutes(app);
registerReceivingRoutes(app);
registerWebhookRoutes(app);
registerContactRoutes(app);
registerSuppressionRoutes(app);
registerTrackingRoutes(app);
registerDocRoutes(app);
// The dashboard (sessions, never API keys) under /dashboard; the REST API keeps the root paths.
app.route("/dashboard", dashboardApp() as never);

export default {
  fetch: app.fetch,
  async queue(batch, env) {
    if (batch.queue === "tern-webhooks") await consumeWebhookBatch(batch as unknown as MessageBatch<WebhookQueueMessage>, env);
    else await consumeSendBatch(batch as MessageBatch<QueueMessage>, env);
  },
  async scheduled(_controller, env) {
    const now = Date.now();
    // Independent duties: one failing must not keep the other from running.
    const results = await Promise.allSettled([
      sweepDelivery(env, now),
      recheckDueDomains(env, readConfig(env), now),
      sweepWebhooks(env, now),
      sweepIdempotencyKeys(env, now),
      purgeExpired(env, readConfig(env).retentionDays, now),
    ]);
    for (const r of results) if (r.status === "rejected") console.error("cron duty failed", r.reason);
  },
  async email(message, env) {
    await handleEmail(message, env);
  },
} satisfies ExportedHandler<Env, QueueMessage>;
