// The Worker's entry: the HTTP API, the send queue's consumer and the cron.
import { newApp } from "./app.ts";
import { consumeSendBatch } from "./delivery/consumer.ts";
import { sweepDelivery } from "./delivery/cron.ts";
import { registerApiKeyRoutes } from "./routes/api-keys.ts";
import { registerDocRoutes } from "./routes/docs.ts";
import { registerEmailRoutes } from "./routes/emails.ts";
import type { QueueMessage } from "./sending/accept.ts";

export { IdempotencyKey } from "../durable-objects/idempotency-key.ts";
export { RateLimiter } from "../durable-objects/rate-limiter.ts";

export const app = newApp();
registerEmailRoutes(app);
registerApiKeyRoutes(app);
registerDocRoutes(app);

export default {
  fetch: app.fetch,
  async queue(batch, env) {
    await consumeSendBatch(batch as MessageBatch<QueueMessage>, env);
  },
  async scheduled(_controller, env) {
    await sweepDelivery(env);
  },
} satisfies ExportedHandler<Env, QueueMessage>;
