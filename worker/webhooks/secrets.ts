// Signing secrets at rest: each endpoint's whsec_ secret is sealed under the master key, bound
// to the endpoint's id, and opened only to sign a delivery. During a rotation the previous
// secret signs too, until it expires (contract section 6: 24 hours).
import { open, seal } from "../crypto/sealed.ts";
import type { WebhookRow } from "../db/schema.ts";

/** How long the previous secret keeps signing after a rotation. */
export const ROTATION_OVERLAP_MS = 24 * 3600 * 1000;

const context = (webhookId: string) => `webhook:${webhookId}`;

export function sealWebhookSecret(masterKey: string | undefined, webhookId: string, secret: string): Promise<string> {
  return seal(masterKey, "webhook-secret", new TextEncoder().encode(secret), context(webhookId));
}

async function openSecret(masterKey: string | undefined, webhookId: string, sealed: string): Promise<string> {
  return new TextDecoder().decode(await open(masterKey, "webhook-secret", sealed, context(webhookId)));
}

/** The secrets that sign a delivery at `now`: the current one, and the previous one while its overlap lasts. */
export async function liveSecrets(
  masterKey: string | undefined,
  webhook: Pick<WebhookRow, "id" | "secretSealed" | "previousSecretSealed" | "previousSecretExpiresAt">,
  now: number,
): Promise<string[]> {
  const secrets = [await openSecret(masterKey, webhook.id, webhook.secretSealed)];
  if (webhook.previousSecretSealed && (webhook.previousSecretExpiresAt ?? 0) > now) {
    secrets.push(await openSecret(masterKey, webhook.id, webhook.previousSecretSealed));
  }
  return secrets;
}
