// tern's Web Crypto signing against an implementation it shares nothing with: Node's own
// HMAC (node:crypto) computing the Standard Webhooks signature from the spec's definition.
// (svix 2.5.0 wraps standardwebhooks, so those two libraries are one implementation; this
// is the independent check.)
import { createHmac, randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { decodeWebhookSecret, generateWebhookSecret, signWebhook } from "../../worker/webhooks/signing.ts";

/** The spec: base64(HMAC-SHA256(base64decode(secret without "whsec_"), "id.timestamp.body")). */
function reference(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.slice("whsec_".length), "base64");
  return `v1,${createHmac("sha256", key).update(`${id}.${timestamp}.${body}`, "utf8").digest("base64")}`;
}

function randomText(seed: number): string {
  const alphabet = ["a", "Z", "0", " ", "{", '"', "\\", "\n", "é", "中", "🌧️", "\u0000", "."];
  let out = "";
  for (let i = 0; i < (seed * 37) % 300; i++) out += alphabet[(seed * 31 + i * 17) % alphabet.length];
  return out;
}

describe("signWebhook against node:crypto", () => {
  it("matches the spec's HMAC for many secrets, ids, timestamps and bodies", async () => {
    for (let i = 1; i <= 200; i++) {
      const secret = i % 3 === 0 ? `whsec_${randomBytes(24 + (i % 41)).toString("base64")}` : generateWebhookSecret();
      const id = `msg_${randomBytes(8).toString("hex")}`;
      const timestamp = 1_600_000_000 + i * 7919;
      const body = randomText(i);
      const headers = await signWebhook({ id, timestamp, body }, [secret]);
      expect(headers["webhook-signature"]).toBe(reference(secret, id, timestamp, body));
      expect(headers["svix-signature"]).toBe(headers["webhook-signature"]);
    }
  });

  it("lists one signature per secret, in order, during a rotation", async () => {
    const secrets = [generateWebhookSecret(), generateWebhookSecret(), generateWebhookSecret()];
    const headers = await signWebhook({ id: "evt_r", timestamp: 1_700_000_000, body: "{}" }, secrets);
    expect(headers["webhook-signature"]).toBe(secrets.map((s) => reference(s, "evt_r", 1_700_000_000, "{}")).join(" "));
  });

  it("issues secrets whose key is 24 random bytes", () => {
    const keys = new Set<string>();
    for (let i = 0; i < 100; i++) {
      const key = decodeWebhookSecret(generateWebhookSecret());
      expect(key?.length).toBe(24);
      keys.add(Buffer.from(key!).toString("hex"));
    }
    expect(keys.size).toBe(100);
  });
});
