// What a password must be: long enough, and not one of the passwords people pick most often
// (zxcvbn-ts's ranked list of common passwords, about 30,000, checked case-insensitively).
import { dictionary } from "@zxcvbn-ts/language-common";

export const MIN_PASSWORD_LENGTH = 10;
export const MAX_PASSWORD_LENGTH = 128;

let common: Set<string> | null = null;

function commonPasswords(): Set<string> {
  common ??= new Set((dictionary["passwords-common"] as string[]).map((p) => p.toLowerCase()));
  return common;
}

/** Why a password is refused, or null when it is acceptable. */
export function passwordProblem(password: string, email?: string): string | null {
  if (password.length < MIN_PASSWORD_LENGTH) return `Use at least ${MIN_PASSWORD_LENGTH} characters.`;
  if (password.length > MAX_PASSWORD_LENGTH) return `Use at most ${MAX_PASSWORD_LENGTH} characters.`;
  const lower = password.toLowerCase();
  if (commonPasswords().has(lower)) return "This is one of the most common passwords; choose one that is hard to guess.";
  if (email && lower === email.toLowerCase()) return "Do not use your email address as your password.";
  if (/^(.)\1+$/.test(password)) return "A single repeated character is easy to guess; choose another password.";
  return null;
}
