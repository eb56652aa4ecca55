// The part of workerd's node:url (nodejs_compat) tern uses. @types/node would pull in Node's
// global types and change the Worker's own (as worker/papaparse.d.ts explains).
declare module "node:url" {
  export function domainToUnicode(domain: string): string;
}
