// The dashboard's own endpoints refuse bad input as the API does: a clear error, nothing
// changed, never a 5xx. The routes come from the Hono app itself (dashboardApp().routes), so a
// new endpoint or page is tried as soon as it is registered; what a handler reads (a JSON body,
// a form, raw bytes or nothing), the fields it reads and whether it is for managers only are
// read from its source. Cases are sampled by a seeded generator, one seed per route, so a
// failure reproduces when its test runs alone (`-t "POST /dashboard/api/account "`).
// better-auth's endpoints under /dashboard/api/auth/ are left to test/worker/dashboard.test.ts
// and test/worker/passkeys.test.ts.
import { env, exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { inviteToAccount } from "../../worker/dashboard/invitations.ts";
import { dashboardApp } from "../../worker/dashboard/routes.tsx";
import { storeImage } from "../../worker/media/images.ts";
import { seeded } from "../support/random.ts";
import { signedIn } from "./dashboard-session.ts";
import { call, createAccount, type TestAccount } from "./fixtures.ts";
import { endless, MALFORMED_IDS, nested } from "../support/hostile.ts";

const SEED = 20261112;
const DASH = "https://t.tern.test";
const UNSAFE = new Set(["POST", "PUT", "PATCH", "DELETE"]);

// ---- the routes ------------------------------------------------------------------------------

type Reads = "json" | "form" | "bytes" | "nothing";
interface Route {
  method: string;
  /** The full path, as registered: `/dashboard/api/contacts/:id{[0-9a-fA-F-]{36}}`. */
  path: string;
  params: string[];
  api: boolean;
  reads: Reads;
  /** Fields of the JSON body the handler reads by name. */
  fields: string[];
  /** Whether the handler refuses members (requireManager, canManage, an owner check). */
  managers: boolean;
}

const doc = (await (await exports.default.fetch("http://tern.test/openapi.json")).json()) as {
  paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: Schema }> } }>>;
  components: { schemas: Record<string, Schema> };
};
interface Schema { $ref?: string; type?: string | string[]; anyOf?: Schema[]; enum?: unknown[]; properties?: Record<string, Schema> }

function resolve(s: Schema): Schema {
  while (s.$ref) s = doc.components.schemas[s.$ref.replace("#/components/schemas/", "")]!;
  return s;
}

/** What the handler's source says it reads. The worker's modules are loaded as vite transforms
 * them (`(0, __vite_ssr_import_3__.body)(c)`), hence the optional `)`. */
function readsOf(source: string): Reads {
  if (/\bbody\)?\(c\)/.test(source)) return "json";
  if (/readImportForm|formData\(\)/.test(source)) return "form";
  if (/readBodyLimited|arrayBuffer\(\)/.test(source)) return "bytes";
  return "nothing";
}

function fieldsOf(source: string): string[] {
  const out = new Set<string>();
  for (const m of source.matchAll(/\bb\.(\w+)/g)) out.add(m[1]!);
  for (const m of source.matchAll(/\bbody\)?\(c\)\)\.(\w+)/g)) out.add(m[1]!);
  // validate(SomeRequest, await body(c)) or validate(SomeRequest, { ...b, ... }): the body goes
  // whole to the schema, whose fields are the OpenAPI document's. (Where the handler picks the
  // fields itself, the b.x above are all it reads.)
  for (const m of source.matchAll(/validate\)?\(\(?(?:0,\s*)?(?:__vite_ssr_import_\d+__\.)?(\w+)\)?,\s*(?:await [^;]*\bbody\)?\(c\)|\{\s*\.\.\.b\s*[,}])/g)) {
    for (const k of Object.keys(doc.components.schemas[m[1]!]?.properties ?? {})) out.add(k);
  }
  for (const m of source.matchAll(/prefixed\(.*?,\s*"(\w+\.)"\)/g)) out.add(`${m[1]}*`);
  // The contact import's form is the API's: its fields are the document's.
  if (/readImportForm/.test(source)) {
    for (const k of Object.keys(resolve(doc.paths["/contacts/imports"]!.post!.requestBody!.content["multipart/form-data"]!.schema).properties ?? {})) out.add(k);
  }
  out.delete("file");
  return [...out];
}

const routes: Route[] = [];
for (const r of dashboardApp().routes) {
  if (r.method === "ALL") continue;
  const path = `/dashboard${r.path}`;
  if (path.startsWith("/dashboard/api/auth/")) continue;
  if (!(r.method === "GET" || (UNSAFE.has(r.method) && path.startsWith("/dashboard/api/")))) continue;
  if (routes.some((x) => x.method === r.method && x.path === path)) continue;
  const source = String(r.handler);
  routes.push({
    method: r.method, path, params: [...path.matchAll(/:(\w+)/g)].map((m) => m[1]!), api: path.startsWith("/dashboard/api/"),
    reads: r.method === "GET" ? "nothing" : readsOf(source), fields: fieldsOf(source),
    managers: /requireManager|canManage|role !== "owner"/.test(source),
  });
}

// ---- the generator ---------------------------------------------------------------------------

const fuzz = seeded(SEED);
const { next: rnd, sample, unknownId } = fuzz;


/** Query parameters the pages read, and values no page expects. */
const QUERY_NAMES = ["after", "before", "q", "status", "domain", "tag", "from", "to", "segment", "limit", "start_date", "end_date", "domain_id", "notice", "error", "token", "method", "key_id", "period"];
const ODD_VALUES = ["x".repeat(5000), "%00", "%1B%5B2J", "%ZZ", "%E2%98%83", "'%20OR%201%3D1%20--", "..%2F..%2F", "-1", "1e999", "99999999999999999999", "[object]", "%F0%9F%92%A9", "2026-13-45", "%0D%0ASet-Cookie:%20x=1", "NaN"];

/** Values a form would send, so that one wrong field is what a body gets refused for. */
const HINTS: Record<string, () => unknown> = {
  name: () => "Fuzz", email: () => "fuzz@example.com", role: () => "member", token: () => "t".repeat(40),
  detail: () => "A note", status: () => "enabled", scheduled_at: () => "in 1 hour", key: () => "fuzz_key", type: () => "string",
  fallback_value: () => "x", endpoint: () => "https://hooks.example.com/fuzz", events: () => ["email.received"], enabled: () => true,
  segments: () => [], subject: () => "Subject", from: () => `Fuzz <fuzz@${acct.domain}>`, reply_to: () => "reply@example.com",
  preview_text: () => "Preview", segment_id: () => real.segments, topic_id: () => "", alias: () => "fuzz-alias",
  accountId: () => acct.accountId, first_name: () => "Ada", last_name: () => "Lovelace", unsubscribed: () => false,
  description: () => "About", default_subscription: () => "opt_in", visibility: () => "public",
  "topics.*": () => "opt_in", "properties.*": () => "1", html: () => "<p>Fuzz</p>", text: () => "Fuzz", document: () => DOCUMENT,
};

/** An editor document as the dashboard's editor saves one. */
const DOCUMENT = { type: "doc", content: [{ type: "paragraph", content: [{ type: "text", text: "Fuzz" }] }] };

/** Body fields that name a resource, by the kind of resource: set to another account's, they
 * must be refused as an unknown id would be. */
const ID_FIELDS: Record<string, string> = { segment_id: "segments", topic_id: "topics", domain_id: "domains", accountId: "accounts", segments: "segments", "topics.*": "topics" };

function plausibleOf(schema: Schema | undefined): unknown {
  let s = schema && resolve(schema);
  s = s?.anyOf?.[0] ?? s;
  if (s?.enum) return s.enum[0];
  const type = Array.isArray(s?.type) ? s.type[0] : s?.type;
  if (type === "boolean") return true;
  if (type === "number" || type === "integer") return 1;
  if (type === "array") return [];
  if (type === "object") return {};
  return "Fuzz";
}

function schemaField(name: string): Schema | undefined {
  for (const s of Object.values(doc.components.schemas)) if (s.properties?.[name]) return s.properties[name];
  return undefined;
}

/** The field's name in a body (`topics.*` names one of the account's topics). */
const fieldKey = (f: string) => (f === "topics.*" ? `topics.${real.topics}` : f === "properties.*" ? "properties.plan" : f);

/** A body that gets past the first checks: each field the route reads, as a form fills it,
 * less those the route refuses whatever their value (calibrate()). */
const refusedFields = new Map<Route, Set<string>>();
function plausibleBody(route: Route): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of route.fields) if (!refusedFields.get(route)?.has(f)) out[fieldKey(f)] = HINTS[f]?.() ?? plausibleOf(schemaField(f));
  return out;
}

/** Drops from the plausible body each field the route refuses by name (`default_subscription`
 * cannot be changed, say), asking with ids that name nothing, so that nothing can change. */
async function calibrate(route: Route): Promise<void> {
  if (route.reads !== "json" || route.params.length === 0) return;
  const dropped = new Set<string>();
  refusedFields.set(route, dropped);
  for (let i = 0; i < 5; i++) {
    const res = await send({ what: "calibration", path: fill(route, {}), body: JSON.stringify(plausibleBody(route)), type: "application/json", who: "owner", expect: "refused" }, route.method);
    const { message } = await res.json<{ message?: string }>().catch(() => ({ message: undefined }));
    const named = route.fields.find((f) => !dropped.has(f) && message?.includes(`\`${f}\``));
    if (res.status !== 422 || !named) return;
    dropped.add(named);
  }
}

/** Values of another kind than the field takes, an over-long string and a huge array. */
function wrongValues(good: unknown): unknown[] {
  if (typeof good === "string") return [42, { tern: 1 }, ["tern"], true, "é".repeat(100_001)];
  if (typeof good === "boolean") return ["yes", 1, { tern: 1 }];
  if (typeof good === "number") return ["many", { tern: 1 }, true, 1e308];
  if (Array.isArray(good)) return ["tern", { tern: 1 }, Array.from({ length: 100_001 }, () => "x")];
  return [42, "tern", ["tern"]];
}

// ---- the cases -------------------------------------------------------------------------------

type Who = "owner" | "member" | "nobody" | "cross-site";
type Expect =
  /** Refused with a 4xx, changing nothing. */
  | "refused"
  /** A 4xx as a nonexistent id gets it (another account's id): nothing of that account shown. */
  | "as-unknown"
  /** Anything but a 5xx; an error in the right shape. */
  | "answered";
interface Case {
  what: string;
  path: string;
  query?: string;
  body?: BodyInit;
  type?: string;
  headers?: Record<string, string>;
  who: Who;
  expect: Expect;
  /** For "as-unknown": the case with a nonexistent id in its place. */
  twin?: Case;
  statuses?: number[];
}

/** Real resources of the account, and another account's, by the path segment before the id. */
const real: Record<string, string> = {};
const foreign: Record<string, string> = {};
let acct: TestAccount;
let other: TestAccount;
const MARKER = "tenant-b-secret";

function kindOf(path: string, param: string): string {
  if (param === "token") return "token";
  const parts = path.split("/");
  const i = parts.findIndex((p) => p.startsWith(`:${param}`));
  return parts[i - 1]!;
}

/** The path with every parameter filled from `ids` (a nonexistent id where it has none), and
 * `bad` put in place of one. */
function fill(route: Route, ids: Record<string, string>, bad?: { param: string; value: string }): string {
  return route.path.replace(/:(\w+)(\{[^/]*\})?/g, (_, p: string) => (bad?.param === p ? bad.value : encodeURIComponent(ids[kindOf(route.path, p)] ?? unknownId())));
}

function jsonCase(route: Route, what: string, body: BodyInit, type = "application/json", who: Who = "owner"): Case {
  return { what, path: fill(route, real), body, type, who, expect: "refused" };
}

function pathCases(route: Route): Case[] {
  const cases: Case[] = [];
  const body = route.reads === "json" ? JSON.stringify(plausibleBody(route)) : undefined;
  const type = body ? "application/json" : undefined;
  for (const param of route.params) {
    const token = param === "token";
    for (const [what, value] of sample(MALFORMED_IDS, 3)) {
      cases.push({ what: `:${param} as ${what}`, path: fill(route, real, { param, value }), body, type, who: "owner", expect: token ? "answered" : "refused" });
    }
    const twin: Case = { what: `:${param} naming nothing`, path: fill(route, real, { param, value: unknownId() }), body, type, who: "owner", expect: token ? "answered" : "refused" };
    cases.push(twin);
    // A token is a credential, not an id: an invitation's link shows its account to whoever has it.
    const theirs = foreign[kindOf(route.path, param)];
    if (theirs && !token) cases.push({ what: `:${param} of another account`, path: fill(route, real, { param, value: encodeURIComponent(theirs) }), body, type, who: "owner", expect: "as-unknown", twin });
  }
  if (route.params.length > 1) {
    const twin: Case = { what: "every id naming nothing", path: fill(route, {}), body, type, who: "owner", expect: "refused" };
    cases.push(twin, { what: "every id another account's", path: fill(route, foreign), body, type, who: "owner", expect: "as-unknown", twin });
  }
  return cases;
}

function jsonBodyCases(route: Route): Case[] {
  const cases: Case[] = [];
  const notJson: [string, BodyInit][] = [
    ["cut short", '{"name": '], ["XML", "<name>x</name>"], ["empty", ""], ["whitespace", " \n\t "], ["trailing garbage", "{} {}"],
    ["NaN", "NaN"], ["single quotes", "{'name': 'x'}"], ["not UTF-8", new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d])],
  ];
  for (const [what, b] of sample(notJson, 3)) cases.push(jsonCase(route, `a body that is not JSON (${what})`, b));
  for (const [kind, text] of sample<[string, string]>([["array", "[1, 2]"], ["string", '"tern"'], ["null", "null"], ["number", "42"], ["boolean", "true"]], 3)) {
    cases.push(jsonCase(route, `a JSON ${kind} as the body`, text));
  }
  const base = plausibleBody(route);
  const inner = Object.keys(base).length ? `, ${JSON.stringify(base).slice(1, -1)}` : "";
  cases.push(jsonCase(route, "a `__proto__` key", `{"__proto__": {"isAdmin": true}${inner}}`));
  cases.push(jsonCase(route, "an escaped `__proto__` key", `{"\\u005f_proto__": {"x": 1}${inner}}`));
  cases.push(jsonCase(route, "an array nested 100,000 deep", "[".repeat(100_000) + "]".repeat(100_000)));
  cases.push(jsonCase(route, "a multipart body", formOf({ name: "Fuzz", email: "fuzz@example.com" }), ""));
  cases.push(jsonCase(route, "a form-encoded body", "name=Fuzz&email=fuzz%40example.com", "application/x-www-form-urlencoded"));
  cases.push(jsonCase(route, "a text/plain body that is not JSON", "hello", "text/plain"));
  if (rnd() < 0.15) cases.push(jsonCase(route, "a body past 4 MB", endless(5 * 1024 * 1024)));
  // One field wrong at a time, the others as a form fills them.
  for (const f of route.fields) {
    const key = fieldKey(f);
    for (const wrong of sample(wrongValues(base[key]), 2)) {
      const shown = typeof wrong === "string" && wrong.length > 20 ? `a string of ${wrong.length}` : Array.isArray(wrong) && wrong.length > 20 ? `an array of ${wrong.length}` : JSON.stringify(wrong);
      cases.push(jsonCase(route, `\`${key}\` as ${shown}`, JSON.stringify({ ...base, [key]: wrong })));
    }
  }
  for (const f of route.fields.filter((x) => ID_FIELDS[x] && foreign[ID_FIELDS[x]!])) {
    const theirs = foreign[ID_FIELDS[f]!]!;
    const field = f === "topics.*" ? { [`topics.${theirs}`]: "opt_in" } : { [f]: f === "segments" ? [theirs] : theirs };
    cases.push(jsonCase(route, `\`${f}\` naming another account's ${ID_FIELDS[f]}`, JSON.stringify({ ...base, ...field })));
  }
  if (Object.keys(base).length) {
    const [f] = sample(Object.keys(base), 1);
    cases.push(jsonCase(route, `\`${f}\` nested 5,000 deep`, JSON.stringify({ ...base, [f!]: nested(5000) })));
  }
  return cases;
}

function formOf(fields: Record<string, string | Blob>): FormData {
  const f = new FormData();
  for (const [k, v] of Object.entries(fields)) f.set(k, v);
  return f;
}

function formBodyCases(route: Route): Case[] {
  const csv = () => new Blob(["email,first_name\nada@example.com,Ada\n"], { type: "text/csv" });
  const cases: Case[] = [
    jsonCase(route, "a JSON body", JSON.stringify({ file: "email\na@example.com" })),
    jsonCase(route, "a multipart type without a boundary", "--x\r\n\r\n", "multipart/form-data"),
    jsonCase(route, "garbage under a multipart type", "this is not multipart at all", "multipart/form-data; boundary=tern"),
    jsonCase(route, "a multipart body cut short", '--tern\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\nemail\r\na@exa', "multipart/form-data; boundary=tern"),
    jsonCase(route, "no file part", formOf({ on_conflict: "upsert" }), ""),
    jsonCase(route, "an empty file", formOf({ file: new Blob([]) }), ""),
    jsonCase(route, "a binary file", formOf({ file: new Blob([new Uint8Array([0x50, 0x4b, 3, 4, 0, 0, 0xff, 0xfe])]) }), ""),
    jsonCase(route, "a file that is not UTF-8", formOf({ file: new Blob([new Uint8Array([0x65, 0x6d, 0x61, 0x69, 0x6c, 0x0a, 0xe9, 0xff, 0x0a])]) }), ""),
    jsonCase(route, "a file past 50 MB", endless(52 * 1024 * 1024), "multipart/form-data; boundary=tern"),
  ];
  for (const field of route.fields) {
    for (const v of sample(["{not json", "null", '"tern"', '{"__proto__": {"x": 1}}', JSON.stringify(nested(5000)), "not-one-of-them"], 1)) {
      cases.push(jsonCase(route, `\`${field}\` as ${JSON.stringify(v.slice(0, 30))}`, formOf({ file: csv(), [field]: v }), ""));
    }
  }
  return cases;
}

function bytesBodyCases(route: Route): Case[] {
  return [
    jsonCase(route, "an empty body", "", "image/png"),
    jsonCase(route, "text, not an image", "hello, not an image", "image/png"),
    jsonCase(route, "a JSON body", JSON.stringify({ file: "x" })),
    jsonCase(route, "a multipart body", formOf({ file: new Blob(["GIF89a"]) }), ""),
    jsonCase(route, "a body past 5 MB", endless(6 * 1024 * 1024), "image/png"),
  ];
}

function queryCases(route: Route): Case[] {
  const cases: Case[] = [];
  for (const name of sample(QUERY_NAMES, 4)) {
    for (const v of sample(ODD_VALUES, 2)) cases.push({ what: `?${name}=${v.slice(0, 30)}`, path: fill(route, real), query: `${name}=${v}`, who: "owner", expect: "answered" });
  }
  cases.push({ what: "a parameter given twice", path: fill(route, real), query: "after=a&after=b&q=x&q=y", who: "owner", expect: "answered" });
  cases.push({ what: "a parameter in brackets", path: fill(route, real), query: "q[]=x&status[a]=b&__proto__=x", who: "owner", expect: "answered" });
  return cases;
}

/** A member (and people without a session, and other sites) get no further than the owner. */
function doorCases(route: Route, refusedAsOwner: Case[]): Case[] {
  const cases: Case[] = sample(refusedAsOwner, 3).map((c) => ({ ...c, what: `as a member: ${c.what}`, who: "member" as Who, body: rebuilt(c.body) }));
  // Managers only: a member's most plausible request, with the account's own ids, is a 403.
  if (route.managers && (route.method !== "GET" || route.api)) {
    const body = route.reads === "json" ? JSON.stringify({ ...plausibleBody(route), ...(route.path.endsWith("/account/delete") ? { name: "Test" } : {}) }) : undefined;
    cases.push({ what: "a member's plausible request to an owners' and admins' endpoint", path: fill(route, real), body, type: body ? "application/json" : undefined, who: "member", expect: "refused", statuses: [403] });
  }
  if (route.method !== "GET") {
    const body = route.reads === "json" ? JSON.stringify(plausibleBody(route)) : undefined;
    cases.push({ what: "without a session", path: fill(route, real), body, type: body ? "application/json" : undefined, who: "nobody", expect: "refused", statuses: [401] });
    cases.push({ what: "from another site", path: fill(route, real), body, type: body ? "application/json" : undefined, who: "cross-site", expect: "refused", statuses: [403] });
  }
  return cases;
}

/** A body can be sent once: a copy for a second sending. */
function rebuilt(body: BodyInit | undefined): BodyInit | undefined {
  return body instanceof ReadableStream ? endless(6 * 1024 * 1024) : body;
}

/** A route without an id or a body (sign out, sign out everywhere): there is nothing to get
 * wrong, the request is the action, so only its doors are tried. */
const takesNothing = (route: Route) => route.method !== "GET" && route.params.length === 0 && route.reads === "nothing";

function casesFor(route: Route): Case[] {
  if (takesNothing(route)) return doorCases(route, []);
  const cases = pathCases(route);
  if (route.method === "GET") cases.push(...queryCases(route));
  else if (route.reads === "json") cases.push(...jsonBodyCases(route));
  else if (route.reads === "form") cases.push(...formBodyCases(route));
  else if (route.reads === "bytes") cases.push(...bytesBodyCases(route));
  cases.push(...doorCases(route, cases.filter((c) => c.expect === "refused" && !(c.body instanceof ReadableStream))));
  return cases;
}

// ---- the checks ------------------------------------------------------------------------------

/** What a person must never read in an error: stack frames, source files, the database's or
 * zod's own words, and the marks of a value turned to text by mistake. */
const INTERNALS = /\n\s+at |\bat \S+:\d+|node_modules|\.tsx?\b|\bSQLITE|\bD1_|drizzle|zod|TypeError|RangeError|SyntaxError|ReferenceError|Unexpected token|\bundefined\b|\[object Object\]|\bNaN\b/i;

function sentenceProblem(message: unknown): string | null {
  if (typeof message !== "string" || message.trim().length < 8) return "no message a person can read";
  if (message.length > 1000) return `a message of ${message.length} characters`;
  if (INTERNALS.test(message)) return "the message shows internals";
  if (/[\u0000-\u0008\u000b-\u001f\u007f]/.test(message)) return "the message holds control characters";
  if (!/^[A-Z0-9`"'(]/.test(message) || !/[.!?)]$/.test(message)) return "the message is not a sentence";
  return null;
}

const decodeEntities = (s: string) => s.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");

async function problemOf(route: Route, c: Case, res: Response): Promise<string | null> {
  const text = await res.text();
  const said = `${res.status} ${text.slice(0, 300)}`;
  if (res.status >= 500) return `answered ${said}`;
  if (text.includes(MARKER)) return `shows another account's data: ${said}`;
  if (c.expect !== "answered" && (res.status < 400 || res.status >= 500)) return `was not refused: ${said}`;
  if (c.statuses && !c.statuses.includes(res.status)) return `answered ${said} (expected ${c.statuses.join(" or ")})`;
  if (res.status < 400) return null;
  const type = res.headers.get("content-type") ?? "";
  if (route.api) {
    if (!/^application\/json\b/.test(type)) return `error without a JSON content type: ${said}`;
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(text);
    } catch {
      return `error body is not JSON: ${said}`;
    }
    if (!body || typeof body !== "object" || Object.keys(body).some((k) => k !== "message" && k !== "code")) return `error is not {message}: ${said}`;
    const problem = sentenceProblem(body.message);
    return problem ? `${problem}: ${said}` : null;
  }
  if (!/^text\/html\b/.test(type)) return `a page's error is not HTML: ${said}`;
  // The page's frame around a message: the error block, or a page's own "no such ..." one.
  const message = text.match(/<div class="empty"(?: role="alert")?><strong>([^<]*)<\/strong>/)?.[1] ?? text.match(/<p class="error" role="alert">([^<]*)<\/p>/)?.[1] ?? null;
  if (!/<title>[^<]+<\/title>/.test(text) || message === null) return `a page's error shows no message in the dashboard's frame: ${said}`;
  const problem = sentenceProblem(decodeEntities(message));
  return problem ? `${problem}: ${said}` : null;
}

// ---- the people, the accounts and their rows ---------------------------------------------------

interface Person { account: string; user: string; cookie: string; csrf: string }
let owner: Person;
let member: Person;
let otherOwner: Person;

function send(c: Case, method: string): Promise<Response> {
  const person = c.who === "member" ? member : owner;
  const headers: Record<string, string> = { ...(c.type ? { "content-type": c.type } : {}), ...c.headers };
  if (c.who !== "nobody") headers.cookie = person.cookie;
  if (UNSAFE.has(method)) {
    headers.origin = c.who === "cross-site" ? "https://evil.example" : DASH;
    if (c.who !== "nobody" && c.who !== "cross-site") headers["x-csrf-token"] = person.csrf;
  }
  const url = `${DASH}${c.path}${c.query ? `?${c.query}` : ""}`;
  return exports.default.fetch(new Request(url, { method, headers, body: method === "GET" ? undefined : rebuilt(c.body) ?? undefined, redirect: "manual" }));
}

/** Every row of both accounts in every table with an account_id (and the accounts' own rows),
 * the sessions (not when they expire: using one renews it) and passkeys of their people. Audit-log rows of an export that was answered are
 * left out: an export ignores its query string and records that it ran. No refused request
 * writes the audit log or the API's request log, so both are compared whole. */
let tables: string[] = [];
async function snapshot(): Promise<string> {
  const users = [owner.user, member.user, otherOwner.user];
  const stmts = [
    env.DB.prepare("SELECT * FROM accounts WHERE id IN (?, ?) ORDER BY id").bind(acct.accountId, other.accountId),
    env.DB.prepare("SELECT id, user_id FROM auth_sessions WHERE user_id IN (?, ?, ?) ORDER BY id").bind(...users),
    env.DB.prepare("SELECT * FROM auth_passkeys WHERE user_id IN (?, ?, ?) ORDER BY id").bind(...users),
    ...tables.map((t) => env.DB.prepare(`SELECT * FROM "${t}" WHERE account_id IN (?, ?)${t === "audit_log" ? " AND action <> 'account.exported'" : ""}`).bind(acct.accountId, other.accountId)),
  ];
  const results = await env.DB.batch<Record<string, unknown>>(stmts);
  return ["accounts", "auth_sessions", "auth_passkeys", ...tables].map((t, i) => {
    const rows = results[i]!.results.map((r) => {
      if (t === "api_keys") delete r.last_used_at;
      return JSON.stringify(r);
    });
    return `${t}:\n${rows.sort().join("\n")}`;
  }).join("\n\n");
}

async function settled(): Promise<string> {
  let last = await snapshot();
  for (let i = 0; i < 40; i++) {
    await new Promise((r) => setTimeout(r, 150));
    const now = await snapshot();
    if (now === last) return now;
    last = now;
  }
  return last;
}

function difference(before: string, after: string): string {
  const a = new Set(before.split("\n"));
  const b = new Set(after.split("\n"));
  const gone = [...a].filter((l) => !b.has(l)).map((l) => `- ${l}`);
  const added = [...b].filter((l) => !a.has(l)).map((l) => `+ ${l}`);
  return [...gone, ...added].join("\n").slice(0, 3000);
}

const PNG = Uint8Array.from(atob("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="), (ch) => ch.charCodeAt(0));

/** The resources of an account a dashboard route can name, by the path segment before the id;
 * `name` goes into each one that has one, so another account's answer can be told by it. */
async function seed(t: TestAccount, p: Person, name: string, opts: { editor: boolean }): Promise<Record<string, string>> {
  const ids: Record<string, string> = {};
  const made = async (method: string, path: string, body: unknown) => {
    const res = await call(t, method, path, body);
    expect(res.status, `${method} ${path}: ${JSON.stringify(res.body)}`).toBeLessThan(300);
    return res.body.id as string;
  };
  // A scheduled email stays as it is: nothing in the background touches it during the run.
  ids.emails = await made("POST", "/emails", {
    from: `a@${t.domain}`, to: "delivered@simulator.tern.test", subject: name, text: name,
    scheduled_at: new Date(Date.now() + 7 * 86_400_000).toISOString(),
  });
  ids.domains = t.domainId;
  ids.segments = await made("POST", "/segments", { name });
  ids.contacts = await made("POST", "/contacts", { email: "ada@example.com", first_name: name });
  await made("POST", `/contacts/${ids.contacts}/segments/${ids.segments}`, undefined);
  ids.topics = await made("POST", "/topics", { name, default_subscription: "opt_in" });
  ids["contact-properties"] = await made("POST", "/contact-properties", { key: "plan", type: "string" });
  if (opts.editor) {
    // Made in the dashboard's editor, so that its saves reach the fields (an API-written body
    // would refuse them first, 409). Sendable: a segment with a contact, a verified domain, a body.
    const dash = async (path: string, body: unknown) => {
      const res = await send({ what: "seed", path: `/dashboard/api${path}`, body: JSON.stringify(body), type: "application/json", who: "owner", expect: "answered" }, "POST");
      expect(res.status, `${path}: ${await res.clone().text()}`).toBeLessThan(300);
      return (await res.json<{ id?: string }>()).id;
    };
    ids.templates = (await dash("/templates", { name }))!;
    await dash(`/templates/${ids.templates}`, { name, subject: name, from: `a@${t.domain}`, document: DOCUMENT });
    ids.broadcasts = (await dash("/broadcasts", { name, from: `a@${t.domain}`, subject: name, segment_id: ids.segments }))!;
    await dash(`/broadcasts/${ids.broadcasts}`, { document: DOCUMENT });
  } else {
    ids.templates = await made("POST", "/templates", { name, html: `<p>${name}</p>`, subject: name, from: `a@${t.domain}` });
    ids.broadcasts = await made("POST", "/broadcasts", { name, segment_id: ids.segments, from: `a@${t.domain}`, subject: name, html: `<p>${name}</p>` });
  }
  ids.suppressions = await made("POST", "/suppressions", { email: "gone@example.com", detail: name });
  // Subscribed to inbound mail only, which never comes here: no deliveries during the run.
  ids.webhooks = await made("POST", "/webhooks", { endpoint: "https://hooks.example.com/tern", events: ["email.received"] });
  ids["api-keys"] = (await call(t, "GET", "/api-keys")).body.data[0].id;
  ids.logs = (await call(t, "GET", "/logs")).body.data[0].id;
  const form = new FormData();
  form.set("file", new Blob([`email,first_name\nbob@example.com,${name}\n`], { type: "text/csv" }));
  const imported = await exports.default.fetch(new Request("http://tern.test/contacts/imports", { method: "POST", headers: { authorization: `Bearer ${t.token}` }, body: form }));
  expect(imported.status).toBeLessThan(300);
  ids.imports = (await imported.json<{ id: string }>()).id;
  const image = await storeImage(env, t.accountId, PNG, DASH, `${name}.png`);
  ids.media = ids.images = image.id;
  const now = Date.now();
  const inv = await inviteToAccount(env.DB, { accountId: t.accountId, email: `invited-${name}@example.com`, role: "member", invitedBy: p.user, now });
  if (inv.kind !== "invited") throw new Error("the invitation was not made");
  ids.invitations = inv.id;
  ids.token = inv.token;
  ids.received = crypto.randomUUID();
  ids.attachments = crypto.randomUUID();
  const key = `inbound/${ids.received}/${ids.attachments}`;
  await env.BLOBS.put(key, name);
  await env.BLOBS.put(`inbound/${ids.received}/content.json`, JSON.stringify({ html: null, text: name, headers: [] }));
  ids.deliveries = crypto.randomUUID();
  ids.passkeys = crypto.randomUUID();
  await env.DB.batch([
    env.DB.prepare("INSERT INTO inbound_emails (id, account_id, from_address, to_json, subject, raw_key, size, content_key, attachments_json, created_at) VALUES (?, ?, 'a@example.org', '[\"in@example.test\"]', ?, ?, 10, ?, ?, ?)")
      .bind(ids.received, t.accountId, name, `inbound/${ids.received}/raw`, `inbound/${ids.received}/content.json`, JSON.stringify([{ id: ids.attachments, filename: `${name}.txt`, content_type: "text/plain", content_disposition: "attachment", content_id: null, size: name.length, key }]), now),
    env.DB.prepare("INSERT INTO webhook_deliveries (id, webhook_id, account_id, event_id, event_type, status, attempts, created_at) VALUES (?, ?, ?, ?, 'email.received', 'failed', 1, ?)")
      .bind(ids.deliveries, ids.webhooks, t.accountId, crypto.randomUUID(), now),
    env.DB.prepare("INSERT INTO auth_passkeys (id, user_id, credential_id, public_key, device_type, name, created_at) VALUES (?, ?, ?, 'pk', 'singleDevice', ?, ?)")
      .bind(ids.passkeys, p.user, crypto.randomUUID(), name, now),
  ]);
  ids.sessions = (await env.DB.prepare("SELECT id FROM auth_sessions WHERE user_id = ?").bind(p.user).first<{ id: string }>())!.id;
  return ids;
}

beforeAll(async () => {
  [acct, other] = await Promise.all([createAccount(), createAccount()]);
  owner = await signedIn("owner", acct.accountId);
  member = await signedIn("member", acct.accountId);
  otherOwner = await signedIn("owner", other.accountId);
  Object.assign(real, await seed(acct, owner, "Fuzz", { editor: true }));
  Object.assign(foreign, await seed(other, otherOwner, MARKER, { editor: false }));
  real.accounts = acct.accountId;
  foreign.accounts = other.accountId;
  real.members = member.user;
  foreign.members = otherOwner.user;
  const found = await env.DB.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table'").all<{ name: string; sql: string }>();
  tables = found.results.filter((r) => /[`"]account_id[`"] (text|integer)/i.test(r.sql)).map((r) => r.name).sort();
  expect(tables).toEqual(expect.arrayContaining(["audit_log", "api_logs", "invitations", "memberships", "media_images", "broadcasts", "contacts", "templates", "webhooks"]));
  // The imports run in the background: everything they change is done before the first route.
  await settled();
}, 30_000);

// ---- the tests -------------------------------------------------------------------------------

describe("every dashboard endpoint and page refuses bad input cleanly", () => {
  it("finds the dashboard's routes in the app, and what each reads", () => {
    const unsafe = routes.filter((r) => r.method !== "GET");
    expect(unsafe.length).toBeGreaterThan(60);
    const reads = (m: string, p: string) => routes.find((r) => r.method === m && r.path === p)?.reads;
    // The source-reading is what picks the cases: these must come out as they are.
    expect(reads("POST", "/dashboard/api/account")).toBe("json");
    expect(reads("POST", "/dashboard/api/contacts/imports")).toBe("form");
    expect(reads("POST", "/dashboard/api/media")).toBe("bytes");
    expect(reads("POST", "/dashboard/api/sign-out")).toBe("nothing");
    expect(routes.find((r) => r.path === "/dashboard/api/suppressions")?.fields).toEqual(expect.arrayContaining(["email", "detail"]));
    expect(routes.find((r) => r.path.endsWith("/topics") && r.params.length)?.fields).toEqual(["topics.*"]);
    expect(routes.find((r) => r.path === "/dashboard/api/segments")?.fields).toEqual(["name"]);
    expect(routes.find((r) => r.path === "/dashboard/api/members/:userId/role")?.managers).toBe(true);
  });

  for (const route of routes) {
    const name = `${route.method} ${route.path} `;
    const what = takesNothing(route) ? "refuses a request without a session or from another site, changing nothing" : "answers bad ids, bodies and queries with an error in its shape, changing nothing";
    it(`${name}${what}`, async () => {
      fuzz.reseed(name);
      await calibrate(route);
      const cases = casesFor(route);
      const before = await snapshot();
      const problems: string[] = [];
      const statusOf = new Map<Case, number>();
      for (const c of cases) {
        const res = await send(c, route.method);
        statusOf.set(c, res.status);
        const problem = await problemOf(route, c, res);
        if (problem) problems.push(`${c.who === "owner" ? "" : `(${c.who}) `}${c.what}: ${problem}`);
      }
      for (const c of cases) {
        if (c.expect === "as-unknown" && c.twin && statusOf.get(c) !== statusOf.get(c.twin)) {
          problems.push(`${c.what}: answered ${statusOf.get(c)} where an id naming nothing gets ${statusOf.get(c.twin)}`);
        }
      }
      const after = await snapshot();
      if (after !== before) problems.push(`rows changed:\n${difference(before, after)}`);
      expect(problems).toEqual([]);
    });
  }
});
