// The Worker's entry: the HTTP API, the send queue's consumer and the cron.
import { queueRole } from "./queues.ts";
import { newApp } from "./app.ts";
import { ApiError, errorResponse } from "./errors.ts";
import { readConfig } from "./config.ts";
import { handleEmail } from "./inbound/email-handler.ts";
import { recheckDueDomains, reportTrackingHostChange } from "./domains/service.ts";
import { reconcileTrackingHostnames } from "./tracking/hostnames.ts";
import { consumeRegionBatch } from "./delivery/region-batch.ts";
import { sweepDelivery } from "./delivery/cron.ts";
import { registerApiKeyRoutes } from "./routes/api-keys.ts";
import { registerDocRoutes } from "./routes/docs.ts";
import { registerDomainRoutes } from "./routes/domains.ts";
import { registerReceivingRoutes } from "./routes/receiving.ts";
import { registerEmailRoutes } from "./routes/emails.ts";
import { registerAttachmentRoutes } from "./routes/attachments.ts";
import { registerShareRoutes } from "./routes/share.ts";
import { registerDomainClaimRoutes } from "./routes/domain-claims.ts";
import { registerLogRoutes } from "./routes/logs.ts";
import { registerMetricsRoutes } from "./routes/metrics.ts";
import { registerInsightRoutes } from "./routes/insights.ts";
import { registerContactRoutes } from "./routes/contacts.ts";
import { registerContactPropertyRoutes } from "./routes/contact-properties.ts";
import { registerSegmentRoutes } from "./routes/segments.ts";
import { registerTopicRoutes } from "./routes/topics.ts";
import { registerTemplateRoutes } from "./routes/templates.ts";
import { registerBroadcastRoutes } from "./routes/broadcasts.ts";
import { consumeBroadcastBatch, sweepBroadcasts } from "./broadcasts/fanout.ts";
import type { BroadcastMessage } from "./broadcasts/broadcasts.ts";
import type { ImportMessage } from "./contacts/imports.ts";
import { registerSuppressionRoutes } from "./routes/suppressions.ts";
import { registerTrackingRoutes } from "./routes/tracking.ts";
import { servesPath } from "./tracking/hosts.ts";
import { registerMediaRoutes } from "./routes/media.ts";
import { registerWebhookRoutes } from "./routes/webhooks.ts";
import { dashboardApp } from "./dashboard/routes.tsx";
import { scrubDashboardMail } from "./dashboard/mail.ts";
import type { WebhookQueueMessage } from "./events/outbox.ts";
import { consumeWebhookBatch, sweepWebhooks } from "./webhooks/consumer.ts";
import type { QueueMessage } from "./sending/accept.ts";
import { purgeExpired, sweepOrphanedContent } from "./retention/purge.ts";
import { runMaintenance } from "./maintenance.ts";
import { sweepIdempotencyKeys } from "./sending/idempotency.ts";

export { RateLimiter } from "../durable-objects/rate-limiter.ts";
export { IdempotencyFront } from "../durable-objects/idempotency-front.ts";
export { RegionSender } from "../durable-objects/region-sender.ts";

export const app = newApp();
registerEmailRoutes(app);
registerMetricsRoutes(app);
registerInsightRoutes(app);
registerApiKeyRoutes(app);
registerDomainRoutes(app);
registerReceivingRoutes(app);
registerWebhookRoutes(app);
registerContactRoutes(app);
registerSegmentRoutes(app);
registerTopicRoutes(app);
registerContactPropertyRoutes(app);
registerTemplateRoutes(app);
registerBroadcastRoutes(app);
registerSuppressionRoutes(app);
registerTrackingRoutes(app);
registerMediaRoutes(app);
registerLogRoutes(app);
registerAttachmentRoutes(app);
registerShareRoutes(app);
registerDomainClaimRoutes(app);
registerDocRoutes(app);
// The dashboard (sessions, never API keys) under /dashboard; the REST API keeps the root paths.
app.route("/dashboard", dashboardApp() as never);

export default {
  async fetch(request, env, ctx) {
    // A domain's tracking host answers its pixel and click paths only (tracking/hosts.ts).
    if (!servesPath(readConfig(env), request.url)) return errorResponse(new ApiError("not_found", "This host serves an email's tracked links only."));
    return app.fetch(request, env, ctx);
  },
  async queue(batch, env) {
    const role = queueRole(batch.queue);
    if (role === "webhooks") await consumeWebhookBatch(batch as unknown as MessageBatch<WebhookQueueMessage>, env);
    else if (role === "broadcasts") await consumeBroadcastBatch(batch as unknown as MessageBatch<BroadcastMessage | ImportMessage>, env);
    else if (role === "send") await consumeRegionBatch(batch as MessageBatch<QueueMessage>, env);
    // Retried, not acknowledged: nothing is lost while an operator fixes the name.
    else throw new Error(`queue ${batch.queue}: its name must end in -send, -webhooks or -broadcasts`);
  },
  async scheduled(_controller, env) {
    const now = Date.now();
    // Independent duties: one failing must not keep the other from running.
    const results = await Promise.allSettled([
      sweepDelivery(env, now),
      sweepBroadcasts(env, now),
      recheckDueDomains(env, readConfig(env), now),
      reconcileTrackingHostnames(env, readConfig(env), now, undefined, (h) => reportTrackingHostChange(env, readConfig(env), h, now)),
      sweepWebhooks(env, now),
      sweepIdempotencyKeys(env, now),
      purgeExpired(env, readConfig(env).retentionDays, now),
      sweepOrphanedContent(env, now),
      runMaintenance(env, now),
      scrubDashboardMail(env, now),
    ]);
    for (const r of results) if (r.status === "rejected") console.error("cron duty failed", r.reason);
  },
  async email(message, env) {
    await handleEmail(message, env);
  },
} satisfies ExportedHandler<Env, QueueMessage>;
