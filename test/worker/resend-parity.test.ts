// Resend parity, checked against Resend's own OpenAPI document (test/data/resend-openapi.yaml,
// MIT, see test/data/README.md): every operation in it that tern serves must be routed (a real
// request does not fall through to "endpoint not found" or 405) and documented in tern's
// /openapi.json. What tern does not serve is listed below, by name and owner, and kept small:
// an exemption whose operations have all landed fails the test until it is removed.
import { exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { api, createAccount, type TestAccount } from "./fixtures.ts";

const source = Object.values(import.meta.glob("../data/resend-openapi.yaml", { query: "?raw", import: "default", eager: true }))[0] as string;
const doc = parse(source) as { paths: Record<string, Record<string, { operationId?: string }>> };

interface Exemption { paths: RegExp; why: string }
/** Operations tern does not serve, and who owns them. */
export const NOT_SERVED: Exemption[] = [
  { paths: /^\/automations(\/|$)/, why: "out of scope (issue 19): Resend's automations API" },
  { paths: /^\/events(\/|$)/, why: "out of scope (issue 19): Resend's custom events API" },
  { paths: /^\/oauth\//, why: "out of scope (issue 19): OAuth grants" },
];

const METHODS = ["get", "post", "put", "patch", "delete"] as const;
const operations = Object.entries(doc.paths).flatMap(([path, item]) =>
  METHODS.filter((m) => item[m]).map((m) => ({ method: m.toUpperCase(), path, id: item[m]!.operationId ?? `${m} ${path}` })),
);
const exemptionOf = (path: string) => NOT_SERVED.find((e) => e.paths.test(path));
const inScope = operations.filter((o) => !exemptionOf(o.path));

/** A concrete request path: every parameter a fresh UUID (nothing of this account's). */
const concrete = (path: string) => path.replace(/\{[^}]+\}/g, () => crypto.randomUUID());
const shape = (path: string) => path.replace(/\{[^}]+\}/g, "{}");

let acct: TestAccount;
let documented: Set<string>;
beforeAll(async () => {
  acct = await createAccount();
  const tern = (await (await exports.default.fetch("http://tern.test/openapi.json")).json()) as { paths: Record<string, Record<string, unknown>> };
  documented = new Set(Object.entries(tern.paths).flatMap(([p, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${shape(p)}`)));
});

/** Is the request answered by a route (any status), rather than by "no such endpoint"? */
async function routed(method: string, path: string): Promise<{ ok: boolean; detail: string }> {
  const body = method === "POST" || method === "PATCH" || method === "PUT" ? {} : undefined;
  const res = await api(acct.token, method, concrete(path), body);
  const text = await res.text();
  const unrouted = res.status === 405 || (res.status === 404 && text.includes("The requested endpoint could not be found."));
  return { ok: !unrouted, detail: `${res.status} ${text.slice(0, 120)}` };
}

describe("Resend's OpenAPI document", () => {
  it("has the operations this test expects (the copy is intact)", () => {
    expect(operations.length).toBeGreaterThanOrEqual(100);
    expect(inScope.length).toBeGreaterThanOrEqual(40);
  });

  it("every in-scope operation is routed by tern and documented in /openapi.json", async () => {
    const missing: string[] = [];
    for (const op of inScope) {
      const r = await routed(op.method, op.path);
      if (!r.ok) missing.push(`${op.method} ${op.path} (${op.id}): ${r.detail}`);
      else if (!documented.has(`${op.method} ${shape(op.path)}`)) missing.push(`${op.method} ${op.path} (${op.id}): routed but not in /openapi.json`);
    }
    expect(missing, "Resend operations tern does not serve").toEqual([]);
  });

  it("each exemption names operations that exist, and is dropped once all of them are served", async () => {
    for (const e of NOT_SERVED) {
      const ops = operations.filter((o) => e.paths.test(o.path));
      expect(ops.length, `${e.paths} (${e.why}) matches no operation: remove it`).toBeGreaterThan(0);
      const served = await Promise.all(ops.map((o) => routed(o.method, o.path)));
      expect(served.every((s) => s.ok), `every operation of ${e.paths} is served now: remove the exemption "${e.why}"`).toBe(false);
    }
  });
});
