// Web Crypto types that read the same under the Workers types and Node's: these modules also
// run in Node (npm start seeds the dev domain's DKIM key with them).
export type Key = Awaited<ReturnType<typeof crypto.subtle.importKey>>;
/** Bytes backed by an ArrayBuffer, as Web Crypto takes them. */
export type Bytes = Uint8Array<ArrayBuffer>;
export type DeriveAlgorithm = Parameters<typeof crypto.subtle.deriveKey>[2];
export type Usages = Parameters<typeof crypto.subtle.deriveKey>[4];
