// Session tokens are secrets: the cookie carries the token, D1 keeps only its SHA-256.
// better-auth stores session tokens in clear and has no option to hash them (it does for
// verification identifiers: auth.ts sets verification.storeIdentifier "hashed"), so this wraps
// its database adapter: a session's `token` is hashed on create and in every where-clause over
// `token`, and rows read back by a token get that token again, so better-auth sets and matches
// cookies as before. A stored value carries the "sha256:" prefix, so a value already hashed
// (a session listed by user, then deleted by its token) is never hashed twice. The tokens are
// 32 random alphanumerics (~190 bits): a plain hash is enough, no salt or slow KDF.
import type { BetterAuthOptions } from "better-auth";

export const HASHED_PREFIX = "sha256:";

/** What D1 stores for a session token (idempotent). */
export async function storedSessionToken(token: string): Promise<string> {
  if (token.startsWith(HASHED_PREFIX)) return token;
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(token)));
  let bin = "";
  for (const b of digest) bin += String.fromCharCode(b);
  return HASHED_PREFIX + btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

interface Where {
  field: string;
  value: unknown;
  operator?: string;
  connector?: string;
}

type Row = Record<string, unknown>;
// better-auth's adapter, as its factories (drizzleAdapter) make it; only the methods that
// carry a session token are changed.
type AdapterFactory = (options: BetterAuthOptions) => Record<string, unknown>;

const isSession = (model: unknown) => model === "session";

/** Hashes the token values of a where-clause; `clear` learns each hash's token. */
async function hashWhere(where: Where[] | undefined, clear: Map<string, string>): Promise<Where[] | undefined> {
  if (!where) return where;
  return Promise.all(where.map(async (w) => {
    if (w.field !== "token") return w;
    const one = async (v: unknown) => {
      if (typeof v !== "string") return v;
      const h = await storedSessionToken(v);
      if (h !== v) clear.set(h, v);
      return h;
    };
    return { ...w, value: Array.isArray(w.value) ? await Promise.all(w.value.map(one)) : await one(w.value) };
  }));
}

function restore<T>(result: T, clear: Map<string, string>): T {
  const fix = (r: unknown) => {
    if (r && typeof r === "object" && typeof (r as Row).token === "string") {
      const token = clear.get((r as Row).token as string);
      if (token) return { ...(r as Row), token };
    }
    return r;
  };
  return (Array.isArray(result) ? result.map(fix) : fix(result)) as T;
}

export function hashingSessionTokens(factory: AdapterFactory): AdapterFactory {
  return (options) => hashing(factory(options) as Record<string, (args: Row) => Promise<unknown>>);
}

function hashing(inner: Record<string, (args: Row) => Promise<unknown>>): Record<string, unknown> {
  const wrapped: Record<string, unknown> = { ...inner };
  // better-auth runs some writes in a "transaction" (runWithTransaction): the adapter it hands
  // the callback is its own, not this one, so a session made there (a password change that
  // signs out the other sessions) kept its token in clear, and no cookie could find it.
  const transaction = inner.transaction as ((cb: (trx: unknown) => Promise<unknown>) => Promise<unknown>) | undefined;
  if (transaction) wrapped.transaction = (cb: (trx: unknown) => Promise<unknown>) => transaction((trx) => cb(hashing(trx as Record<string, (args: Row) => Promise<unknown>>)));
  wrapped.create = async (args: Row) => {
    if (!isSession(args.model)) return inner.create!(args);
    const data = args.data as Row;
    if (typeof data.token !== "string") return inner.create!(args);
    const clear = new Map([[await storedSessionToken(data.token), data.token]]);
    return restore(await inner.create!({ ...args, data: { ...data, token: await storedSessionToken(data.token) } }), clear);
  };
  for (const method of ["findOne", "findMany", "update", "updateMany", "delete", "deleteMany", "count"]) {
    const original = inner[method];
    if (!original) continue;
    wrapped[method] = async (args: Row) => {
      if (!isSession(args.model)) return original(args);
      const clear = new Map<string, string>();
      const where = await hashWhere(args.where as Where[] | undefined, clear);
      const update = args.update as Row | undefined;
      const next = { ...args, where, ...(update && typeof update.token === "string" ? { update: { ...update, token: await storedSessionToken(update.token) } } : {}) };
      return restore(await original(next), clear);
    };
  }
  return wrapped;
}
