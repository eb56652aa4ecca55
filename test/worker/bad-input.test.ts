// Bad input always gets a clear error in the contract's shape and changes nothing; no input
// crashes anything or answers a bare 500. The cases are generated from the app's own OpenAPI
// document (made from the zod schemas that validate requests), for every operation in it, and
// sampled by a seeded generator: each operation draws from its own seed, so a failure
// reproduces when its test runs alone (`-t "POST /emails "`).
import { env, exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { ERROR_STATUS, type ErrorName } from "../../worker/errors.ts";
import { seeded } from "../support/random.ts";
import { call, createAccount, type TestAccount } from "./fixtures.ts";
import { endless, MALFORMED_IDS, nested } from "../support/hostile.ts";

const SEED = 20261105;

// ---- the document ----------------------------------------------------------------------------

interface Schema {
  $ref?: string;
  type?: string | string[];
  anyOf?: Schema[];
  oneOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  items?: Schema;
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
}
interface Parameter { name: string; in: "path" | "query" | "header"; required?: boolean; schema?: Schema }
interface Operation {
  method: string;
  path: string;
  params: Parameter[];
  body?: { type: string; schema: Schema; required: boolean };
  /** Whether a request without an API key may be answered (a signed link is its credential). */
  keyOptional: boolean;
}

const doc = (await (await exports.default.fetch("http://tern.test/openapi.json")).json()) as {
  paths: Record<string, Record<string, { parameters?: Parameter[]; security?: object[]; requestBody?: { required?: boolean; content: Record<string, { schema: Schema }> } }>>;
  components: { schemas: Record<string, Schema> };
};

const operations: Operation[] = Object.entries(doc.paths).flatMap(([path, methods]) =>
  Object.entries(methods).map(([method, op]) => {
    const [type, media] = Object.entries(op.requestBody?.content ?? {})[0] ?? [];
    return {
      method: method.toUpperCase(), path, params: op.parameters ?? [],
      body: type ? { type, schema: media!.schema, required: op.requestBody?.required !== false } : undefined,
      keyOptional: op.security?.length === 0 || (op.security ?? []).some((s) => Object.keys(s).length === 0),
    };
  }),
);

function resolve(s: Schema): Schema {
  while (s.$ref) s = doc.components.schemas[s.$ref.replace("#/components/schemas/", "")]!;
  return s;
}

type Kind = "string" | "number" | "integer" | "boolean" | "object" | "array" | "null";

/** The branches of a schema, each one kind of JSON value; [] when it takes anything. */
function branches(s: Schema): { kind: Kind; schema: Schema }[] {
  s = resolve(s);
  const alternatives = s.anyOf ?? s.oneOf;
  if (alternatives) return alternatives.flatMap(branches);
  const types = s.type === undefined ? [] : Array.isArray(s.type) ? s.type : [s.type];
  if (types.length > 0) return types.map((t) => ({ kind: t as Kind, schema: t === "null" ? {} : s }));
  const values = s.enum ?? (s.const !== undefined ? [s.const] : undefined);
  if (values) return [...new Set(values.map(kindOf))].map((kind) => ({ kind, schema: s }));
  if (s.properties) return [{ kind: "object", schema: s }];
  if (s.items) return [{ kind: "array", schema: s }];
  return [];
}

function kindOf(v: unknown): Kind {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  return typeof v as Kind;
}

// ---- the generator ---------------------------------------------------------------------------

const fuzz = seeded(SEED);
const { next: rnd, pick, sample, unknownId } = fuzz;

/** Values for fields the document types only as strings, so that a base body gets past its
 * first check and a bad value reaches the later ones (`html` too: a send needs it or `text`). */
const HINTS: Record<string, () => unknown> = {
  from: () => `Fuzz <fuzz@${acct.domain}>`,
  to: () => "delivered@simulator.tern.test",
  email: () => "ada@example.com",
  html: () => "<p>Fuzz</p>",
  segment_id: () => real.segments,
};

/** A value the schema probably takes: the base that one bad value is put into. */
function plausible(s: Schema, depth = 0): unknown {
  const b = branches(s)[0];
  if (!b) return "tern";
  const t = b.schema;
  if (t.enum) return t.enum[0];
  if (t.const !== undefined) return t.const;
  switch (b.kind) {
    case "string":
      if (t.format === "uuid") return unknownId();
      if (t.format === "uri" || t.format === "url") return "https://example.com/tern";
      if (t.format === "email") return "ada@example.com";
      return "t".repeat(Math.max(1, t.minLength ?? 1));
    case "number":
    case "integer":
      return Math.max(1, t.minimum ?? 1);
    case "boolean":
      return true;
    case "null":
      return null;
    case "array":
      return depth > 2 || !t.items ? [] : Array.from({ length: Math.max(1, t.minItems ?? 1) }, () => plausible(t.items!, depth + 1));
    case "object": {
      const out: Record<string, unknown> = {};
      if (depth > 2) return out;
      for (const k of t.required ?? []) out[k] = HINTS[k]?.() ?? plausible(t.properties?.[k] ?? {}, depth + 1);
      if (t.properties?.html && out.html === undefined) out.html = HINTS.html!();
      return out;
    }
  }
}

interface Bad { what: string; value: unknown }

/** Values the schema refuses, each with what makes it wrong: the wrong type of JSON value, and
 * each constraint of the kinds it takes broken (length, enum, format, range, size, nested fields). */
function badValues(s: Schema, name: string, depth = 0): Bad[] {
  const bs = branches(s);
  if (bs.length === 0) return []; // takes anything
  const kinds = new Set(bs.map((b) => b.kind));
  const takes = (k: Kind) => kinds.has(k) || (k === "integer" && kinds.has("number"));
  const out: Bad[] = [];
  if (!takes("string")) out.push({ what: `${name} as a string`, value: "tern" });
  if (!takes("number") && !takes("integer")) out.push({ what: `${name} as a number`, value: pick([42, -1, 0.5, 1e308]) });
  if (!takes("boolean")) out.push({ what: `${name} as a boolean`, value: true });
  if (!takes("object")) out.push({ what: `${name} as an object`, value: { tern: 1 } });
  if (!takes("array")) out.push({ what: `${name} as an array`, value: ["tern"] });
  if (!takes("null")) out.push({ what: `${name} as null`, value: null });
  for (const { kind, schema: t } of bs) {
    // A value of a kind that two branches take may suit the other one.
    if (bs.filter((b) => b.kind === kind).length > 1) continue;
    if (t.enum && kind === "string") out.push({ what: `${name} not one of its values`, value: "not-one-of-them" });
    if (kind === "string" && !t.enum) {
      if (t.format === "uuid") out.push({ what: `${name} not a UUID`, value: pick(["not-a-uuid", "0000000-0000-0000-0000-000000000000", "../../etc/passwd", "\u0000\u001b[2J"]) });
      if (t.format === "uri") out.push({ what: `${name} not a URL`, value: pick(["not a url", "javascript:alert(1)", "https://"]) });
      if (t.pattern) {
        const re = new RegExp(t.pattern, "u");
        const miss = ["", " ", "a b", "!!", "\u0000\u001b[31m", "é", "x".repeat(300)].find((v) => !re.test(v));
        if (miss !== undefined) out.push({ what: `${name} not matching ${t.pattern}`, value: miss });
      }
      if (t.maxLength !== undefined) {
        out.push({ what: `${name} one character too long`, value: "x".repeat(t.maxLength + 1) });
        out.push({ what: `${name} far too long`, value: "é".repeat(Math.min(Math.max(t.maxLength * 4, 10_000), 2_100_000)) });
      }
      if ((t.minLength ?? 0) > 0) out.push({ what: `${name} empty`, value: "" });
    }
    if (kind === "integer") out.push({ what: `${name} fractional`, value: 1.5 });
    if (kind === "integer" || kind === "number") {
      if (t.minimum !== undefined) out.push({ what: `${name} below its minimum`, value: t.minimum >= 0 ? -1 : t.minimum - 1 });
      if (t.maximum !== undefined) out.push({ what: `${name} huge`, value: pick([t.maximum + 1, 1e308, Number.MAX_SAFE_INTEGER * 4]) });
    }
    if (kind === "array" && depth < 2) {
      if (t.maxItems !== undefined) out.push({ what: `${name} with ${t.maxItems + 1} items`, value: Array.from({ length: t.maxItems + 1 }, () => plausible(t.items ?? {})) });
      if ((t.minItems ?? 0) > 0) out.push({ what: `${name} empty`, value: [] });
      if (t.items) for (const bad of sample(badValues(t.items, `${name}[0]`, depth + 1), 2)) out.push({ what: bad.what, value: [bad.value] });
    }
    if (kind === "object" && depth < 2) {
      const base = plausible(t, depth) as Record<string, unknown>;
      for (const [k, p] of sample(Object.entries(t.properties ?? {}), 3)) {
        for (const bad of sample(badValues(p, `${name}.${k}`, depth + 1), 1)) out.push({ what: bad.what, value: { ...base, [k]: bad.value } });
      }
      if (t.additionalProperties === false) out.push({ what: `${name} with a field it does not take`, value: { ...base, not_a_field: 1 } });
      if (typeof t.additionalProperties === "object") {
        for (const bad of sample(badValues(t.additionalProperties, `${name}.key`, depth + 1), 1)) out.push({ what: bad.what, value: { ...base, key: bad.value } });
      }
      for (const k of t.required ?? []) {
        const { [k]: _, ...rest } = base;
        out.push({ what: `${name} without ${k}`, value: rest });
      }
    }
  }
  return out;
}



// ---- the requests ----------------------------------------------------------------------------

interface Case {
  what: string;
  path: string;
  query?: string;
  headers?: Record<string, string>;
  /** The Authorization header; the account's key when absent. */
  authorization?: string | null;
  body?: BodyInit;
  /** It must be refused (a 4xx); otherwise it need only not fail (no 5xx; an error in shape). */
  refused: boolean;
  /** The statuses that fit it, when that is known. */
  statuses?: number[];
}

let acct: TestAccount;
/** Real resources of the test account, by the path segment that names their kind. */
const real: Record<string, string> = {};

function realFor(path: string, param: string): string | undefined {
  const parts = path.split("/");
  const before = parts[parts.indexOf(`{${param}}`) - 1]!;
  return real[before];
}

/** The path with every parameter filled (with a real resource's id where the account has one),
 * and `bad` put in place of one. */
function fill(op: Operation, bad?: { param: string; value: string }): string {
  return op.path.replace(/\{(\w+)\}/g, (_, p: string) => (bad?.param === p ? bad.value : encodeURIComponent(realFor(op.path, p) ?? unknownId())));
}


/** The query parameters an operation requires, each with a value it takes. */
function requiredQuery(op: Operation): string | undefined {
  const required = op.params.filter((p) => p.in === "query" && p.required);
  return required.length ? required.map((p) => `${p.name}=${encodeURIComponent(String(plausible(p.schema ?? {})))}`).join("&") : undefined;
}

function pathCases(op: Operation): Case[] {
  const cases: Case[] = [];
  // A body that is all right or wrong, whichever: only the path is on trial.
  const body = op.body?.type === "application/json" ? JSON.stringify(plausible(op.body.schema)) : undefined;
  for (const p of op.params.filter((x) => x.in === "path")) {
    const values = [...sample(MALFORMED_IDS, 4), ["a well-formed id that names nothing", unknownId()] as [string, string]];
    for (const [what, value] of values) {
      cases.push({
        what: `{${p.name}} is ${what}`, path: fill(op, { param: p.name, value }), query: requiredQuery(op), body, refused: true,
        headers: body ? { "content-type": "application/json" } : undefined,
        statuses: body || op.body ? [400, 404, 422] : [404],
      });
    }
  }
  return cases;
}

function jsonCase(op: Operation, what: string, body: BodyInit, contentType = "application/json", statuses?: number[]): Case {
  return { what, path: fill(op), body, headers: { "content-type": contentType }, refused: true, statuses };
}

function bodyCases(op: Operation): Case[] {
  if (!op.body) return [];
  if (op.body.type === "multipart/form-data") return formCases(op);
  const root = op.body.schema;
  const rootKinds = new Set(branches(root).map((b) => b.kind));
  const cases: Case[] = [];
  // Not JSON at all: 400.
  const notJson: [string, BodyInit][] = [
    ["cut short", '{"name": '], ["XML", "<email><to>a@example.com</to></email>"], ["empty", ""], ["whitespace", " \n\t "],
    ["trailing garbage", "{} {}"], ["NaN", "NaN"], ["single quotes", "{'name': 'x'}"], ["not UTF-8", new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d])],
    ["a lone surrogate escape", '{"name": "\\ud800"'],
  ];
  // An empty body is no body, which an operation whose body is optional takes.
  for (const [what, body] of sample(notJson.filter(([w]) => op.body!.required || w !== "empty"), 3)) cases.push(jsonCase(op, `a body that is not JSON (${what})`, body, "application/json", [400]));
  // JSON of a kind the body is not: 400 (or 422 for a kind one branch takes, e.g. an array of the wrong items).
  const kinds: [Kind, string][] = [["array", "[1, 2]"], ["string", '"tern"'], ["null", "null"], ["number", "42"], ["boolean", "true"], ["object", '{"tern": 1}']];
  for (const [kind, text] of kinds.filter(([k]) => !rootKinds.has(k) && !(k === "object" && rootKinds.size === 0))) {
    cases.push(jsonCase(op, `a JSON ${kind} as the body`, text, "application/json", kind === "object" ? [400, 422] : [400]));
  }
  // One field wrong at a time (the rest as plausible as the document makes them): 422.
  if (rootKinds.has("object") || rootKinds.has("array")) {
    const bad = badValues(root, "body").filter((b) => kindOf(b.value) === "object" || kindOf(b.value) === "array");
    for (const b of sample(bad, 8)) cases.push(jsonCase(op, b.what, JSON.stringify(b.value), "application/json", [400, 422]));
  }
  // Structural attacks, each with one field wrong so that the request is bad whatever else holds.
  const obj = branches(root).find((b) => b.kind === "object")?.schema;
  const wrong = obj ? sample(badValues(obj, "body").filter((b) => kindOf(b.value) === "object"), 1)[0] : undefined;
  if (wrong) {
    const fields = wrong.value as Record<string, unknown>;
    cases.push(jsonCase(op, `unknown fields, with ${wrong.what}`, JSON.stringify({ ...fields, not_a_field: "x", "": 1, "a.b": { c: [] } }), "application/json", [422]));
    cases.push(jsonCase(op, `an object nested 5,000 deep, with ${wrong.what}`, JSON.stringify({ ...fields, deep: nested(5000) }), "application/json", [400, 422]));
  }
  cases.push(jsonCase(op, "an array nested 100,000 deep", "[".repeat(100_000) + "]".repeat(100_000), "application/json", [400, 422]));
  // __proto__ is refused wherever it is: at the top, escaped, or inside a field that is an object.
  const text = JSON.stringify(obj ? plausible(obj) : {});
  const inner = text === "{}" ? "" : `, ${text.slice(1, -1)}`;
  cases.push(jsonCase(op, "a `__proto__` key", `{"__proto__": {"isAdmin": true}${inner}}`, "application/json", [422]));
  cases.push(jsonCase(op, "an escaped `__proto__` key", `{"\\u005f_proto__": {"x": 1}${inner}}`, "application/json", [422]));
  const objectField = Object.entries(obj?.properties ?? {}).find(([, p]) => branches(p).some((b) => b.kind === "object" && b.schema.additionalProperties !== false));
  if (objectField) cases.push(jsonCase(op, `a \`__proto__\` key in \`${objectField[0]}\``, `{"${objectField[0]}": {"__proto__": "x"}${inner}}`, "application/json", [422]));
  // A body in another format than JSON.
  cases.push(jsonCase(op, "a form-encoded body", "name=tern&email=a%40example.com", "application/x-www-form-urlencoded", [400, 415]));
  const form = new FormData();
  form.set("name", "tern");
  cases.push({ what: "a multipart body", path: fill(op), body: form, refused: true, statuses: [400, 415] });
  cases.push(jsonCase(op, "a text/plain body that is not JSON", "hello", "text/plain", [400, 415]));
  // Past the 40 MB limit: 413. Reading 40 MB costs a tenth of a second, so a few operations only.
  if (op.path === "/emails" || rnd() < 0.1) cases.push(jsonCase(op, "a body past 40 MB", endless(41 * 1024 * 1024), "application/json", [413]));
  return cases;
}

function formCases(op: Operation): Case[] {
  const schema = resolve(op.body!.schema);
  const fileField = Object.entries(schema.properties ?? {}).find(([, p]) => p.format === "binary")?.[0] ?? "file";
  const csv = () => new Blob(["email,first_name\nada@example.com,Ada\n"], { type: "text/csv" });
  const formOf = (fields: Record<string, string | Blob>) => {
    const f = new FormData();
    for (const [k, v] of Object.entries(fields)) f.set(k, v);
    return f;
  };
  const cases: Case[] = [
    jsonCase(op, "a JSON body", JSON.stringify({ [fileField]: "email\na@example.com" }), "application/json", [400, 415]),
    jsonCase(op, "a multipart type without a boundary", "--x\r\n\r\n", "multipart/form-data", [400]),
    jsonCase(op, "garbage under a multipart type", "this is not multipart at all", "multipart/form-data; boundary=tern", [400]),
    jsonCase(op, "a multipart body cut short", `--tern\r\nContent-Disposition: form-data; name="${fileField}"; filename="a.csv"\r\n\r\nemail\r\na@exa`, "multipart/form-data; boundary=tern", [400, 422]),
    { what: `no \`${fileField}\` part`, path: fill(op), body: formOf({ on_conflict: "upsert" }), refused: true, statuses: [422] },
    { what: "an empty file", path: fill(op), body: formOf({ [fileField]: new Blob([]) }), refused: true, statuses: [422] },
    { what: "a binary file", path: fill(op), body: formOf({ [fileField]: new Blob([new Uint8Array([0x50, 0x4b, 3, 4, 0, 0, 0xff, 0xfe])]) }), refused: true, statuses: [422] },
    { what: "a file that is not UTF-8", path: fill(op), body: formOf({ [fileField]: new Blob([new Uint8Array([0x65, 0x6d, 0x61, 0x69, 0x6c, 0x0a, 0xe9, 0xff, 0x0a])]) }), refused: true, statuses: [422] },
    { what: "a file past 50 MB", path: fill(op), body: endless(52 * 1024 * 1024), headers: { "content-type": "multipart/form-data; boundary=tern" }, refused: true, statuses: [413] },
    { what: "a file without a header row", path: fill(op), body: formOf({ [fileField]: new Blob(["ada@example.com\nbob@example.com\n"]) }), refused: true, statuses: [422] },
  ];
  // Every other field of the form, wrong in a few ways.
  for (const [name, p] of Object.entries(schema.properties ?? {})) {
    if (name === fileField) continue;
    const values = p.enum ? ["not-one-of-them", ""] : ["{not json", "null", '"tern"', '{"__proto__": {"x": 1}}', JSON.stringify(nested(5000)), `[${JSON.stringify(unknownId())}]`];
    for (const v of sample(values, 2)) cases.push({ what: `\`${name}\` as ${JSON.stringify(v.slice(0, 40))}`, path: fill(op), body: formOf({ [fileField]: csv(), [name]: v }), refused: true, statuses: [422] });
  }
  return cases;
}

/** Query values: wrong types and out-of-range numbers, garbage cursors and enums (refused);
 * odd text in free-form parameters (answered, or refused in shape, never a 5xx). */
function queryCases(op: Operation): Case[] {
  const cases: Case[] = [];
  const query = op.params.filter((p) => p.in === "query");
  const odd = ["x".repeat(5000), "%00", "%1B%5B2J", "%ZZ", "%E2%98%83", "'%20OR%201%3D1%20--", "..%2F..%2F", "-1", "1e999", "[object]", "%F0%9F%92%A9"];
  for (const p of query) {
    const s = resolve(p.schema ?? {});
    const t = branches(s)[0];
    let values: string[] = [];
    let refused = true;
    if (t?.kind === "integer" || t?.kind === "number") {
      values = ["abc", "1.5", "-1", "0", "1e999", "99999999999999999999", "%EF%BC%91%EF%BC%90", "", "0x", "Infinity"]
        .filter((v) => !(t.kind === "number" && v === "1.5"));
      if (t.schema.maximum !== undefined) values.push(String(t.schema.maximum + 1));
    } else if (t?.schema.enum) values = ["not-one-of-them", "", "%00", t.schema.enum.map(String).join(",").toUpperCase()];
    else if (t?.schema.format === "uuid" || ["after", "before"].includes(p.name)) values = ["not-a-cursor", "..%2F..%2F", "%00", "7".repeat(2000), "%ZZ", "01928f3e-7b1c-7cc0-9c3a-4d1a2b3c4d5g"];
    else {
      values = odd;
      refused = false;
    }
    for (const v of sample(values, refused ? 3 : 2)) cases.push({ what: `?${p.name}=${v.slice(0, 30)}`, path: fill(op), query: `${p.name}=${v}`, refused });
  }
  if (query.some((p) => p.name === "after") && query.some((p) => p.name === "before")) {
    cases.push({ what: "both after and before", path: fill(op), query: `after=${unknownId()}&before=${unknownId()}`, refused: true, statuses: [422] });
  }
  return cases;
}

/** Header parameters out of their range; and requests without a usable key. */
function headerCases(op: Operation): Case[] {
  const cases: Case[] = [];
  const body = op.body?.type === "application/json" ? JSON.stringify(plausible(op.body.schema)) : undefined;
  for (const p of op.params.filter((x) => x.in === "header")) {
    const t = branches(p.schema ?? {})[0];
    // Only the values no header of its kind takes: an empty or a 300-character idempotency key
    // is refused before it is stored, where a good key with a bad body is kept and replayed.
    const values = t?.schema.enum ? ["not-one-of-them", ""] : ["", "k".repeat(300)];
    for (const v of values) {
      cases.push({ what: `${p.name}: ${JSON.stringify(v.slice(0, 20))}`, path: fill(op), query: requiredQuery(op), body, headers: { "content-type": "application/json", [p.name]: v }, refused: true });
    }
  }
  if (!op.keyOptional) {
    const keys: [string, string | null, number][] = [["no key", null, 401], ["a Basic credential", "Basic dGVybjp0ZXJu", 401], ["an unknown key", `Bearer tern_${"x".repeat(40)}`, 403], ["a key of 5,000 characters", `Bearer tern_${"y".repeat(5000)}`, 403]];
    for (const [what, authorization, status] of sample(keys, 2)) cases.push({ what, path: fill(op), query: requiredQuery(op), authorization, body, headers: body ? { "content-type": "application/json" } : undefined, refused: true, statuses: [status] });
  }
  return cases;
}

// ---- the checks ------------------------------------------------------------------------------

/** What a person must never read in an error: stack frames, source files, the database's or
 * zod's own words, and the marks of a value turned to text by mistake. */
const INTERNALS = /\n\s+at |\bat \S+:\d+|node_modules|\.tsx?\b|\bSQLITE|\bD1_|drizzle|zod|TypeError|RangeError|SyntaxError|ReferenceError|Unexpected token|\bundefined\b|\[object Object\]|\bNaN\b/i;

async function problemOf(c: Case, res: Response): Promise<string | null> {
  const text = await res.text();
  const said = `${res.status} ${text.slice(0, 300)}`;
  if (res.status >= 500) return `answered ${said}`;
  if (c.refused && (res.status < 400 || res.status >= 500)) return `was not refused: ${said}`;
  if (c.refused && c.statuses && !c.statuses.includes(res.status)) return `answered ${said} (expected ${c.statuses.join(" or ")})`;
  if (res.status < 400) return null;
  if (!/^application\/json\b/.test(res.headers.get("content-type") ?? "")) return `error without a JSON content type: ${said}`;
  let body: { statusCode?: unknown; name?: unknown; message?: unknown };
  try {
    body = JSON.parse(text);
  } catch {
    return `error body is not JSON: ${said}`;
  }
  if (Object.keys(body).sort().join() !== "message,name,statusCode") return `error is not {statusCode, name, message}: ${said}`;
  if (body.statusCode !== res.status) return `statusCode differs from the status: ${said}`;
  const name = body.name as ErrorName;
  if (!(name in ERROR_STATUS)) return `error name is not the contract's: ${said}`;
  if (ERROR_STATUS[name] !== res.status && !(name === "validation_error" && [400, 403, 413, 415].includes(res.status))) return `error name does not go with the status: ${said}`;
  const message = body.message;
  if (typeof message !== "string" || message.trim().length < 8) return `no message a person can read: ${said}`;
  if (message.length > 1000) return `a message of ${message.length} characters: ${said}`;
  if (INTERNALS.test(message)) return `message shows internals: ${said}`;
  if (!/^[A-Z0-9`"']/.test(message) || !/[.!?)]$/.test(message)) return `message is not a sentence: ${said}`;
  if (/[\u0000-\u0008\u000b-\u001f\u007f]/.test(message)) return `message holds control characters: ${said}`;
  return null;
}

/** Every row of the account in every table that has an account_id (and the account's own row),
 * minus what a refused request rightly changes: the request log and the key's last use. */
let tables: string[] = [];
async function snapshot(): Promise<Record<string, string>> {
  const stmts = [
    env.DB.prepare("SELECT * FROM accounts WHERE id = ?").bind(acct.accountId),
    ...tables.map((t) => env.DB.prepare(`SELECT * FROM "${t}" WHERE account_id = ?`).bind(acct.accountId)),
  ];
  const results = await env.DB.batch<Record<string, unknown>>(stmts);
  return Object.fromEntries(["accounts", ...tables].map((t, i) => {
    const rows = results[i]!.results.map((r) => {
      if (t === "api_keys") delete r.last_used_at;
      return JSON.stringify(r);
    });
    return [t, rows.sort().join("\n")];
  }));
}

async function settled(): Promise<Record<string, string>> {
  let last = await snapshot();
  for (let i = 0; i < 20; i++) {
    await new Promise((r) => setTimeout(r, 150));
    const now = await snapshot();
    if (JSON.stringify(now) === JSON.stringify(last)) return now;
    last = now;
  }
  return last;
}

function send(c: Case, method: string): Promise<Response> {
  const authorization = c.authorization === undefined ? `Bearer ${acct.token}` : c.authorization;
  const headers: Record<string, string> = { ...(authorization ? { authorization } : {}), ...c.headers };
  const url = `http://tern.test${c.path}${c.query ? `?${c.query}` : ""}`;
  return exports.default.fetch(new Request(url, { method, headers, body: c.body }));
}

// ---- the account and its resources -----------------------------------------------------------

beforeAll(async () => {
  acct = await createAccount();
  const made = async (method: string, path: string, body: unknown) => {
    const res = await call(acct, method, path, body);
    expect(res.status, `${method} ${path}: ${JSON.stringify(res.body)}`).toBeLessThan(300);
    return res.body.id as string;
  };
  // A scheduled email stays as it is: nothing in the background touches it during the run.
  real.emails = await made("POST", "/emails", {
    from: `a@${acct.domain}`, to: "delivered@simulator.tern.test", subject: "s", text: "t",
    scheduled_at: new Date(Date.now() + 7 * 86_400_000).toISOString(),
  });
  real.domains = acct.domainId;
  real.segments = real.audiences = await made("POST", "/segments", { name: "Fuzz" });
  real.contacts = await made("POST", "/contacts", { email: "ada@example.com", first_name: "Ada" });
  real.topics = await made("POST", "/topics", { name: "News", default_subscription: "opt_in" });
  real["contact-properties"] = await made("POST", "/contact-properties", { key: "plan", type: "string" });
  real.templates = await made("POST", "/templates", { name: "T", html: "<p>Hi</p>" });
  real.broadcasts = await made("POST", "/broadcasts", { segment_id: real.segments, from: `a@${acct.domain}`, subject: "B", html: "<p>B</p>" });
  real.suppressions = await made("POST", "/suppressions", { email: "gone@example.com" });
  // Subscribed to inbound mail only, which never comes here: no deliveries during the run.
  real.webhooks = await made("POST", "/webhooks", { endpoint: "https://hooks.example.com/tern", events: ["email.received"] });
  real["api-keys"] = (await call(acct, "GET", "/api-keys")).body.data[0].id;
  real.logs = (await call(acct, "GET", "/logs")).body.data[0].id;
  // Tables with an account_id column, read from their definitions (D1 does not allow pragma_table_info).
  const found = await env.DB.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table'").all<{ name: string; sql: string }>();
  tables = found.results.filter((r) => /[`"]account_id[`"] (text|integer)/i.test(r.sql)).map((r) => r.name).filter((t) => t !== "api_logs").sort();
  expect(tables).toEqual(expect.arrayContaining(["api_keys", "broadcasts", "contact_properties", "contacts", "domains", "emails", "idempotency_keys", "segments", "suppressions", "templates", "webhook_events", "webhooks"]));
  await settled();
});

// ---- the tests -------------------------------------------------------------------------------

describe("every operation in the OpenAPI document refuses bad input cleanly", () => {
  it("the document has operations to try", () => {
    expect(operations.length).toBeGreaterThan(90);
  });

  for (const op of operations) {
    const name = `${op.method} ${op.path} `;
    it(`${name}answers bad ids, bodies and queries with a 4xx in the contract's shape, changing nothing`, async () => {
      fuzz.reseed(name);
      const cases = [...pathCases(op), ...bodyCases(op), ...queryCases(op), ...headerCases(op)];
      const before = await snapshot();
      const problems: string[] = [];
      for (const c of cases) {
        const res = await send(c, op.method);
        const problem = await problemOf(c, res);
        if (problem) problems.push(`${c.what}: ${problem}`);
      }
      const after = await snapshot();
      for (const t of Object.keys(before)) if (after[t] !== before[t]) problems.push(`table ${t} changed:\n${before[t]}\n->\n${after[t]}`.slice(0, 2000));
      expect(problems).toEqual([]);
    });
  }
});

// createImport checks every mapped property before it creates the missing ones: a map refused
// at its second property keeps nothing of the first.
it("a contact import refused for its column map creates no contact property", async () => {
  const before = await snapshot();
  const form = new FormData();
  form.set("file", new Blob(["email,score,plan\nada@example.com,3,pro\n"], { type: "text/csv" }));
  // `score` is new; `plan` exists as a string property, so mapping it as a number is refused.
  form.set("column_map", JSON.stringify({ email: "email", properties: { score: { column: "score", type: "number" }, plan: { column: "plan", type: "number" } } }));
  const res = await send({ what: "a column map with a conflicting property", path: "/contacts/imports", body: form, refused: true }, "POST");
  expect(res.status).toBe(422);
  expect((await snapshot()).contact_properties).toBe(before.contact_properties);
});
