// Reading what the loopback SMTP peers (test/support/smtp-peers.ts) captured, from workerd.
import { env } from "cloudflare:workers";
import type { CapturedMessage } from "../support/captured.ts";

export type Captured = CapturedMessage;

/** Every message a peer accepted for this envelope recipient. */
export async function capturedFor(rcpt: string): Promise<Captured[]> {
  const res = await fetch(`http://127.0.0.1:${env.TEST_PEERS.control}/messages?rcpt=${encodeURIComponent(rcpt)}`);
  return res.json();
}

export function bytesOf(base64: string): Uint8Array {
  return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
}

export function rawText(c: Captured): string {
  return new TextDecoder().decode(bytesOf(c.rawBase64));
}

/** A recipient no other test uses; its local part still picks the peer's behaviour. */
export function address(kind: string, domain = "example.test"): string {
  return `${kind}-${crypto.randomUUID()}@${domain}`;
}
