// The official Resend clients other than Node's, replayed: for each call tern serves among the
// endpoints of issue 19 (and the update bodies that used to be refused), the exact request each
// client's source makes (method, path and its escaping, body, headers: resend-python sends a
// `{}` JSON body even on GET and DELETE), and the answer read the way that client reads it:
//   - resend-go: encoding/json into typed structs (a number where a string is declared fails);
//   - resend-rust: serde into typed structs (null in a non-Option field, or an enum value it
//     does not know, fails);
//   - resend-dotnet: System.Text.Json with Guid ids, DateTime times and closed enums;
//   - resend-java: Jackson, unknown fields ignored, typed fields must match;
//   - resend-php: throws only for error names it knows, and only for JSON answers;
//   - resend-python and resend-ruby: an answer is an error when its status is >= 400 or its
//     body's `statusCode` is set and not 200.
// Sources read at resend/resend-{python,go,php,ruby,rust,java,dotnet} HEAD (August 2026). The
// whole table of each client's calls is in official-clients/, one file per client.
import { beforeAll, describe, expect, it } from "vitest";
import { api, createAccount, type TestAccount } from "./fixtures.ts";
import { USER_AGENTS } from "./official-clients/harness.ts";

type FieldType = "string" | "string?" | "uuid" | "uuid?" | "datetime" | "int" | "bool" | "any" | readonly string[];
type Shape = Record<string, FieldType>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Reads `value` as the strictest of the typed clients would; answers what it could not read. */
function typedRead(value: unknown, shape: Shape, where = ""): string[] {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return [`${where || "answer"} is not an object`];
  const v = value as Record<string, unknown>;
  const problems: string[] = [];
  for (const [key, type] of Object.entries(shape)) {
    const x = v[key];
    const at = `${where}${key}`;
    const nullable = typeof type === "string" && type.endsWith("?");
    if (x === undefined || x === null) {
      if (!nullable && type !== "any") problems.push(`${at} is ${x === null ? "null" : "missing"}`);
      continue;
    }
    if (typeof type !== "string") {
      if (!type.includes(x as string)) problems.push(`${at} = ${JSON.stringify(x)} is not one of ${type.join("|")}`);
    } else if (type.startsWith("string") && typeof x !== "string") problems.push(`${at} is not a string`);
    else if (type.startsWith("uuid") && !(typeof x === "string" && UUID.test(x))) problems.push(`${at} = ${JSON.stringify(x)} is not a Guid`);
    else if (type === "datetime" && !(typeof x === "string" && !Number.isNaN(Date.parse(x)))) problems.push(`${at} is not a date-time`);
    else if (type === "int" && !Number.isInteger(x)) problems.push(`${at} is not an integer`);
    else if (type === "bool" && typeof x !== "boolean") problems.push(`${at} is not a boolean`);
  }
  return problems;
}

function typedList(value: unknown, item: Shape): string[] {
  const v = value as { object?: unknown; has_more?: unknown; data?: unknown };
  if (!Array.isArray(v?.data)) return ["data is not an array"];
  const out = typeof v.has_more === "boolean" || v.has_more === undefined ? [] : ["has_more is not a boolean"];
  return out.concat(v.data.flatMap((d, i) => typedRead(d, item, `data[${i}].`)));
}

/** PHP's list (src/Transporters/HttpTransporter.php isResendError). */
const PHP_ERROR_NAMES = [
  "application_error", "concurrent_idempotent_requests", "daily_quota_exceeded", "internal_server_error", "invalid_access", "invalid_api_key",
  "invalid_attachment", "invalid_from_address", "invalid_idempotency_key", "invalid_idempotent_request", "invalid_parameter", "invalid_region",
  "method_not_allowed", "missing_api_key", "missing_required_field", "monthly_quota_exceeded", "not_found", "rate_limit_exceeded",
  "restricted_api_key", "security_error", "validation_error",
];

/** How resend-python (request.py) and resend-ruby (request.rb) tell an error from a success. */
function isErrorForPython(status: number, body: unknown): boolean {
  const code = (body as { statusCode?: unknown } | null)?.statusCode;
  return status >= 400 || (code !== undefined && code !== null && code !== 200);
}

interface Sent { status: number; contentType: string | null; body: unknown }

type Client = keyof typeof USER_AGENTS;

async function replay(token: string, client: Client, method: string, path: string, body?: unknown): Promise<Sent> {
  // resend-python's requests call always has json=params: a "{}" body on DELETE (and on GET,
  // which fetch cannot send; tern's GET routes read no body, so the headers are what differs).
  const payload = body ?? (client === "python" && method !== "GET" ? {} : undefined);
  const extra: Record<string, string> = client === "python" && method === "GET" ? { "content-type": "application/json" } : {};
  const res = await api(token, method, path.startsWith("/") ? path : `/${path}`, payload, { "user-agent": USER_AGENTS[client], accept: "application/json", ...extra });
  const contentType = res.headers.get("content-type");
  return { status: res.status, contentType, body: await res.json() };
}

/** Every client reads a success: no error by Python's rule, JSON for PHP. */
function success(r: Sent): void {
  expect(r.contentType).toMatch(/application\/json/);
  expect(isErrorForPython(r.status, r.body), JSON.stringify(r.body)).toBe(false);
}

/** Every client reads an error: PHP knows its name, Python and Ruby raise, all see JSON. */
function failure(r: Sent, name: string): void {
  expect(r.contentType).toMatch(/application\/json/);
  expect(isErrorForPython(r.status, r.body)).toBe(true);
  const b = r.body as { name: string; statusCode: number; message: string };
  expect(b).toMatchObject({ name, statusCode: r.status });
  expect(PHP_ERROR_NAMES).toContain(b.name);
  expect(typeof b.message).toBe("string");
}

// Field types as the typed clients declare them (Go struct tags, Rust serde types, .NET models).
const SUPPRESSION: Shape = { object: "string", id: "uuid", email: "string", origin: ["bounce", "complaint", "manual"], source_id: "string?", created_at: "datetime" };
const SUPPRESSION_ITEM: Shape = { id: "uuid", email: "string", origin: ["bounce", "complaint", "manual"], source_id: "string?", created_at: "datetime" };
const REF: Shape = { object: "string", id: "uuid" };
const REMOVED: Shape = { object: "string", id: "uuid", deleted: "bool" };
const LOG_ITEM: Shape = { id: "uuid", created_at: "datetime", endpoint: "string", method: ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"], response_status: "int", user_agent: "string?" };
const LOG: Shape = { ...LOG_ITEM, request_body: "any", response_body: "any" };
const ATTACHMENT: Shape = {
  id: "uuid", filename: "string?", content_type: "string", content_id: "string?", content_disposition: ["inline", "attachment"],
  size: "int", download_url: "string", expires_at: "datetime",
};
const SHARE: Shape = { object: "string", id: "uuid", url: "string" };
const CLAIM: Shape = {
  object: "string", id: "uuid", name: "string", status: ["pending", "verified", "completed", "blocked", "expired", "superseded", "canceled", "failed"],
  domain_id: "uuid?", region: ["us-east-1", "eu-west-1", "sa-east-1", "ap-northeast-1"], created_at: "datetime", expires_at: "datetime",
};
const DOMAIN: Shape = { object: "string", id: "uuid", name: "string", status: "string", created_at: "datetime", region: "string" };
const WEBHOOK: Shape = { object: "string", id: "uuid", endpoint: "string", status: ["enabled", "disabled"], created_at: "datetime" };

let acct: TestAccount;
beforeAll(async () => {
  acct = await createAccount();
});

const CLIENTS = Object.keys(USER_AGENTS) as Client[];

describe.each(CLIENTS)("%s", (client) => {
  it("suppressions: add, get by address and id, list by origin, batch add and remove, remove", async () => {
    const email = `${client}+${crypto.randomUUID().slice(0, 6)}@example.com`;
    // Path escaping as each client does it: Go url.PathEscape and Java leave "@" and "+"; the
    // others percent-encode (Python quote(safe=""), Ruby url_encode, Rust urlencoding, .NET EscapeDataString).
    const ref = (s: string) => (client === "go" || client === "java" || client === "php" ? s : encodeURIComponent(s));
    const added = await replay(acct.token, client, "POST", "/suppressions", { email });
    success(added);
    expect(typedRead(added.body, REF)).toEqual([]);
    const id = (added.body as { id: string }).id;

    const byEmail = await replay(acct.token, client, "GET", `/suppressions/${ref(email)}`);
    success(byEmail);
    expect(typedRead(byEmail.body, SUPPRESSION)).toEqual([]);
    const byId = await replay(acct.token, client, "GET", `/suppressions/${id}`);
    expect((byId.body as { email: string }).email).toBe(email);

    const listed = await replay(acct.token, client, "GET", "/suppressions?origin=manual&limit=100");
    success(listed);
    expect(typedList(listed.body, SUPPRESSION_ITEM)).toEqual([]);

    const batch = [`${client}-b1@example.com`, `${client}-b2@example.com`];
    const addMany = await replay(acct.token, client, "POST", "/suppressions/batch/add", { emails: batch });
    success(addMany);
    expect((addMany.body as { data: unknown[] }).data.flatMap((d) => typedRead(d, REF))).toEqual([]);
    const removeMany = await replay(acct.token, client, "POST", "/suppressions/batch/remove", { emails: batch });
    success(removeMany);
    expect((removeMany.body as { data: unknown[] }).data.flatMap((d) => typedRead(d, REMOVED))).toEqual([]);

    const removed = await replay(acct.token, client, "DELETE", `/suppressions/${ref(email)}`);
    success(removed);
    expect(typedRead(removed.body, REMOVED)).toEqual([]);
    failure(await replay(acct.token, client, "GET", `/suppressions/${ref(email)}`), "not_found");
  });

  it("API keys: rename", async () => {
    const created = (await (await api(acct.token, "POST", "/api-keys", { name: "x" })).json()) as { id: string };
    const renamed = await replay(acct.token, client, "PATCH", `/api-keys/${created.id}`, { name: `${client} key` });
    success(renamed);
    expect(typedRead(renamed.body, REF)).toEqual([]);
    failure(await replay(acct.token, client, "PATCH", `/api-keys/${crypto.randomUUID()}`, { name: "n" }), "not_found");
  });

  it("sent attachments and share links", async () => {
    const sent = (await (await api(acct.token, "POST", "/emails", {
      from: `a@${acct.domain}`, to: ["delivered@simulator.tern.test"], subject: "files", text: "t",
      attachments: [{ filename: "a.txt", content: btoa("hello") }],
    })).json()) as { id: string };
    const list = await replay(acct.token, client, "GET", `/emails/${sent.id}/attachments`);
    success(list);
    expect(typedList(list.body, ATTACHMENT)).toEqual([]);
    const attachmentId = (list.body as { data: { id: string }[] }).data[0]!.id;
    const one = await replay(acct.token, client, "GET", `/emails/${sent.id}/attachments/${attachmentId}`);
    success(one);
    expect(typedRead(one.body, ATTACHMENT)).toEqual([]);

    // Go sends {} (omitempty), Node and Python {expires_in} when given.
    const shared = await replay(acct.token, client, "POST", `/emails/${sent.id}/share`, client === "go" || client === "java" ? {} : { expires_in: "1h" });
    success(shared);
    expect(typedRead(shared.body, SHARE)).toEqual([]);
    failure(await replay(acct.token, client, "POST", `/emails/${crypto.randomUUID()}/share`, {}), "not_found");
  });

  it("logs: list and get", async () => {
    const list = await replay(acct.token, client, "GET", "/logs?limit=10");
    success(list);
    expect(typedList(list.body, LOG_ITEM)).toEqual([]);
    const first = (list.body as { data: { id: string }[] }).data[0]!;
    const one = await replay(acct.token, client, "GET", `/logs/${first.id}`);
    success(one);
    expect(typedRead(one.body, LOG)).toEqual([]);
    failure(await replay(acct.token, client, "GET", `/logs/${crypto.randomUUID()}`), "not_found");
  });

  it("domain claims: a claim of a name another account holds, and the errors", async () => {
    const holder = await createAccount();
    // resend-python and resend-go send the create-domain fields; tracking_subdomain is omitted when unset.
    const created = await replay(acct.token, client, "POST", "/domains/claim", { name: holder.domain, region: "us-east-1" });
    success(created);
    expect(typedRead(created.body, CLAIM)).toEqual([]);
    const domainId = (created.body as { domain_id: string }).domain_id;
    const got = await replay(acct.token, client, "GET", `/domains/${domainId}/claim`);
    expect(typedRead(got.body, CLAIM)).toEqual([]);
    const verified = await replay(acct.token, client, "POST", `/domains/${domainId}/claim/verify`, client === "python" ? {} : undefined);
    success(verified);
    expect((verified.body as { status: string }).status).toBe("pending");
    failure(await replay(acct.token, client, "POST", "/domains/claim", { name: `nobody-${crypto.randomUUID().slice(0, 8)}.example.com` }), "validation_error");
  });
});

describe("update bodies with the resource's id (resend-python)", () => {
  it("Domains.update sends {id, ...} and Webhooks.update {webhook_id, ...}: both read back as typed", async () => {
    const dom = await replay(acct.token, "python", "PATCH", `/domains/${acct.domainId}`, { id: acct.domainId, click_tracking: true });
    success(dom);
    expect(typedRead(dom.body, DOMAIN)).toEqual([]);
    const hook = (await (await api(acct.token, "POST", "/webhooks", { endpoint: "https://hooks.example.com/p", events: ["email.sent"] })).json()) as { id: string };
    const upd = await replay(acct.token, "python", "PATCH", `/webhooks/${hook.id}`, { webhook_id: hook.id, endpoint: "https://hooks.example.com/q", events: ["email.sent"], status: "enabled" });
    success(upd);
    expect(typedRead(upd.body, WEBHOOK)).toEqual([]);
    const email = (await (await api(acct.token, "POST", "/emails", { from: `a@${acct.domain}`, to: ["delivered@simulator.tern.test"], subject: "later", text: "t", scheduled_at: "in 1 hour" })).json()) as { id: string };
    const resched = await replay(acct.token, "python", "PATCH", `/emails/${email.id}`, { id: email.id, scheduled_at: "in 2 hours" });
    success(resched);
  });
});
