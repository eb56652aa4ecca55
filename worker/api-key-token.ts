// API key tokens: `tern_` + 40 base62 characters; only their SHA-256 is stored, with a short
// prefix people can recognise. Web Crypto only, so the Worker and the Node tools share it.
import { toHex } from "./bytes.ts";

export const TOKEN_PREFIX = "tern_";
const TOKEN_RANDOM_LENGTH = 40;
const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const TOKEN_SHAPE = /^tern_[0-9A-Za-z]{32,128}$/;

export function generateToken(): string {
  // Rejection sampling keeps every base62 character equally likely.
  let out = "";
  while (out.length < TOKEN_RANDOM_LENGTH) {
    const bytes = crypto.getRandomValues(new Uint8Array(64));
    for (const b of bytes) {
      if (b < 248 && out.length < TOKEN_RANDOM_LENGTH) out += BASE62[b % 62];
    }
  }
  return TOKEN_PREFIX + out;
}

export function isTokenShape(token: string): boolean {
  return TOKEN_SHAPE.test(token);
}

export async function hashToken(token: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(token));
  return toHex(new Uint8Array(digest));
}

/** What people see of a key: enough to recognise it, far too little to use it. */
export function tokenPrefix(token: string): string {
  return token.slice(0, TOKEN_PREFIX.length + 6);
}
