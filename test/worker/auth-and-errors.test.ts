// Authentication, API keys and the error contract on every path.
import { env, exports } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "@hono/zod-openapi";
import { hashToken } from "../../worker/api-key-token.ts";
import { ApiError, describeFailure } from "../../worker/errors.ts";
import { readBodyLimited, validate } from "../../worker/http.ts";
import { addKey, api, createAccount, type TestAccount } from "./fixtures.ts";

let acct: TestAccount;
beforeAll(async () => {
  acct = await createAccount();
});

async function errorOf(res: Response) {
  expect(res.headers.get("content-type")).toMatch(/application\/json/);
  const body = (await res.json()) as { statusCode: number; name: string; message: string };
  expect(body.statusCode).toBe(res.status);
  return body;
}

describe("authentication", () => {
  it("answers 401 missing_api_key without an Authorization header", async () => {
    const res = await api(null, "GET", "/emails");
    expect(res.status).toBe(401);
    expect((await errorOf(res)).name).toBe("missing_api_key");
  });
  it("answers 401 missing_api_key for a non-Bearer scheme", async () => {
    const res = await api(null, "GET", "/emails", undefined, { authorization: `Basic ${btoa("a:b")}` });
    expect((await errorOf(res)).name).toBe("missing_api_key");
  });
  it("answers 403 invalid_api_key for an unknown key", async () => {
    const res = await api("tern_" + "x".repeat(40), "GET", "/emails");
    expect(res.status).toBe(403);
    expect((await errorOf(res)).name).toBe("invalid_api_key");
  });
  it("answers 403 invalid_api_key for a malformed key", async () => {
    const res = await api("re_123", "GET", "/emails");
    expect(res.status).toBe(403);
  });
  it("a sending_access key may send but nothing else (401 restricted_api_key)", async () => {
    const sending = await addKey(acct.accountId, "sending_access");
    const send = await api(sending, "POST", "/emails", { from: `a@${acct.domain}`, to: "delivered@simulator.tern.test", subject: "s", text: "t" });
    expect(send.status).toBe(200);
    for (const [method, path] of [["GET", "/emails"], ["GET", "/api-keys"], ["POST", "/api-keys"], ["GET", `/emails/${((await send.json()) as { id: string }).id}`]] as const) {
      const res = await api(sending, method, path, method === "POST" ? { name: "x" } : undefined);
      expect(res.status, `${method} ${path}`).toBe(401);
      expect((await errorOf(res)).name).toBe("restricted_api_key");
    }
  });
});

describe("API keys", () => {
  it("creates a key whose token is shown once and stored only as a hash", async () => {
    const res = await api(acct.token, "POST", "/api-keys", { name: "CI key", permission: "sending_access" });
    expect(res.status).toBe(201);
    const { id, token } = (await res.json()) as { id: string; token: string };
    expect(token).toMatch(/^tern_[0-9A-Za-z]{40}$/);
    const row = await env.DB.prepare("SELECT * FROM api_keys WHERE id = ?").bind(id).first<Record<string, unknown>>();
    expect(row!.token_hash).toBe(await hashToken(token));
    expect(JSON.stringify(row)).not.toContain(token);
    const list = (await (await api(acct.token, "GET", "/api-keys")).json()) as { object: string; data: Record<string, unknown>[] };
    expect(list.object).toBe("list");
    const listed = list.data.find((k) => k.id === id)!;
    expect(Object.keys(listed).sort()).toEqual(["created_at", "id", "last_used_at", "name"]);
    expect(JSON.stringify(list)).not.toContain(token);
  });
  it("a revoked key stops working at once", async () => {
    const { id, token } = (await (await api(acct.token, "POST", "/api-keys", { name: "temp" })).json()) as { id: string; token: string };
    expect((await api(token, "GET", "/emails")).status).toBe(200);
    const del = await api(acct.token, "DELETE", `/api-keys/${id}`);
    expect(del.status).toBe(200);
    expect(await del.json()).toEqual({ object: "api_key", id, deleted: true });
    expect((await api(token, "GET", "/emails")).status).toBe(403);
  });
  it("validates name, permission and domain_id", async () => {
    expect((await errorOf(await api(acct.token, "POST", "/api-keys", {}))).name).toBe("missing_required_field");
    expect((await api(acct.token, "POST", "/api-keys", { name: "x".repeat(51) })).status).toBe(422);
    expect((await api(acct.token, "POST", "/api-keys", { name: "x", permission: "admin" })).status).toBe(422);
    const other = await createAccount();
    const foreign = await api(acct.token, "POST", "/api-keys", { name: "x", permission: "sending_access", domain_id: other.domainId });
    expect(foreign.status).toBe(422);
    expect((await errorOf(foreign)).message).toMatch(/domain_id/);
    const full = await api(acct.token, "POST", "/api-keys", { name: "x", permission: "full_access", domain_id: acct.domainId });
    expect(full.status).toBe(422);
  });
  it("cannot revoke another account's key", async () => {
    const other = await createAccount();
    const { id } = (await (await api(other.token, "POST", "/api-keys", { name: "theirs" })).json()) as { id: string };
    const res = await api(acct.token, "DELETE", `/api-keys/${id}`);
    expect(res.status).toBe(404);
    expect((await errorOf(res)).name).toBe("not_found");
  });
  it("paginates with limit, after and before", async () => {
    const a = await createAccount();
    for (let i = 0; i < 4; i++) await api(a.token, "POST", "/api-keys", { name: `k${i}` });
    const p1 = (await (await api(a.token, "GET", "/api-keys?limit=2")).json()) as { has_more: boolean; data: { id: string; name: string }[] };
    expect(p1.data.map((k) => k.name)).toEqual(["k3", "k2"]);
    expect(p1.has_more).toBe(true);
    const p2 = (await (await api(a.token, "GET", `/api-keys?limit=2&after=${p1.data[1]!.id}`)).json()) as typeof p1;
    expect(p2.data.map((k) => k.name)).toEqual(["k1", "k0"]);
    const back = (await (await api(a.token, "GET", `/api-keys?limit=2&before=${p2.data[0]!.id}`)).json()) as typeof p1;
    expect(back.data.map((k) => k.name)).toEqual(["k3", "k2"]);
    // A cursor in upper case is the same id (a UUID's case carries nothing).
    const upper = (await (await api(a.token, "GET", `/api-keys?limit=2&after=${p1.data[1]!.id.toUpperCase()}`)).json()) as typeof p1;
    expect(upper.data.map((k) => k.name)).toEqual(["k1", "k0"]);
    const upperBack = (await (await api(a.token, "GET", `/api-keys?limit=2&before=${p2.data[0]!.id.toUpperCase()}`)).json()) as typeof p1;
    expect(upperBack.data.map((k) => k.name)).toEqual(["k3", "k2"]);
    expect((await api(a.token, "GET", `/api-keys?after=${p1.data[0]!.id}&before=${p1.data[1]!.id}`)).status).toBe(422);
    expect((await api(a.token, "GET", "/api-keys?limit=0")).status).toBe(422);
    expect((await api(a.token, "GET", "/api-keys?limit=101")).status).toBe(422);
  });
});

describe("the error contract everywhere", () => {
  it("an unknown route answers JSON 404 not_found", async () => {
    const res = await api(acct.token, "GET", "/nope");
    expect(res.status).toBe(404);
    expect((await errorOf(res)).name).toBe("not_found");
  });
  it("a known path with the wrong method answers JSON 405", async () => {
    for (const [method, path] of [["PUT", "/emails"], ["DELETE", "/emails/batch"], ["GET", "/emails/batch"], ["POST", `/api-keys/${crypto.randomUUID()}`], ["PUT", `/emails/${crypto.randomUUID()}`]] as const) {
      const res = await api(acct.token, method, path);
      expect(res.status, `${method} ${path}`).toBe(405);
      expect((await errorOf(res)).name).toBe("method_not_allowed");
    }
  });
  it("the 405 names every method the path has, in its Allow header and its message", async () => {
    for (const [method, path, allowed] of [
      ["PUT", "/emails", ["GET", "POST"]],
      ["PATCH", "/domains", ["GET", "POST"]],
      ["PUT", `/domains/${crypto.randomUUID()}`, ["DELETE", "GET", "PATCH"]],
      ["POST", `/suppressions/${crypto.randomUUID()}`, ["DELETE", "GET"]],
      ["PUT", "/emails/not-an-id", ["GET", "PATCH"]],
      // Not a contact called "imports": the imports' own path.
      ["DELETE", "/contacts/imports", ["GET", "POST"]],
      ["PATCH", "/contacts/imports", ["GET", "POST"]],
    ] as const) {
      const res = await api(acct.token, method, path);
      expect(res.status, `${method} ${path}`).toBe(405);
      expect(res.headers.get("allow")!.split(", ").sort(), `${method} ${path}`).toEqual(allowed);
      expect((await errorOf(res)).message).toBe(`Method ${method} is not allowed on ${path}. Allowed: ${res.headers.get("allow")}.`);
    }
  });
  it("an id of the wrong shape is the resource's own 404, saying what an id looks like, and changes nothing", async () => {
    const domains = async () => ((await (await api(acct.token, "GET", "/domains")).json()) as { data: unknown[] }).data.length;
    const before = await domains();
    for (const [method, path, message] of [
      ["GET", "/emails/not-an-id", "Email not found: ids are UUIDs, and `not-an-id` is not one."],
      ["DELETE", "/domains/xyz", "Domain not found: ids are UUIDs, and `xyz` is not one."],
      ["POST", "/domains/xyz/verify", "Domain not found: ids are UUIDs, and `xyz` is not one."],
      ["GET", `/webhooks/${crypto.randomUUID()}/events/12`, "Webhook event not found: ids are UUIDs, and `12` is not one."],
      ["GET", "/emails/receiving/%E2%9C%89%20x", "Received email not found: ids are UUIDs, and `✉ x` is not one."],
      ["DELETE", `/api-keys/${"a".repeat(200)}`, `API key not found: ids are UUIDs, and \`${"a".repeat(80)}...\` is not one.`],
      // Control characters are echoed as escapes: a NUL or a terminal escape reaches no one's screen.
      ["GET", "/domains/a%00b%1B%5B2J", "Domain not found: ids are UUIDs, and `a\\u0000b\\u001b[2J` is not one."],
    ] as const) {
      const res = await api(acct.token, method, path);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(await errorOf(res), `${method} ${path}`).toEqual({ statusCode: 404, name: "not_found", message });
    }
    expect(await domains()).toBe(before);
    // A path no route has keeps the contract's own words.
    expect((await errorOf(await api(acct.token, "GET", "/emails/x/y/z"))).message).toBe("The requested endpoint could not be found.");
  });
  it("an unknown email id answers 404, also for another account's email", async () => {
    expect((await api(acct.token, "GET", "/emails/not-a-uuid")).status).toBe(404);
    const other = await createAccount();
    const sent = (await (await api(other.token, "POST", "/emails", { from: `a@${other.domain}`, to: "delivered@simulator.tern.test", subject: "s", text: "t" })).json()) as { id: string };
    for (const [method, path] of [["GET", `/emails/${sent.id}`], ["GET", `/emails/${sent.id}/events`], ["POST", `/emails/${sent.id}/cancel`]] as const) {
      const res = await api(acct.token, method, path);
      expect(res.status, path).toBe(404);
    }
    const list = (await (await api(acct.token, "GET", "/emails?limit=100")).json()) as { data: { id: string }[] };
    expect(list.data.map((e) => e.id)).not.toContain(sent.id);
  });
});

describe("what a failure logs", () => {
  it("never the values a query was bound to, always the database's reason, and never megabytes", async () => {
    const { drizzle } = await import("drizzle-orm/d1");
    const { emails } = await import("../../worker/db/schema.ts");
    const secret = "person@example.com " + "x".repeat(100_000);
    const failed = await drizzle(env.DB).insert(emails).values({ id: "e", accountId: "no-such-account", fromAddress: secret } as never).then(() => null, (e: unknown) => e);
    expect(failed).toBeInstanceOf(Error);
    expect(String((failed as Error).message)).toContain("person@example.com"); // drizzle's own message has it
    const logged = describeFailure(failed);
    expect(logged).toContain("Failed query: insert into \"emails\"");
    expect(logged).toContain("params: (not logged)");
    expect(logged).not.toContain("person@example.com");
    expect(logged).toMatch(/caused by: .*(NOT NULL|FOREIGN KEY|constraint)/s);
    expect(describeFailure(new Error("y".repeat(50_000))).length).toBeLessThan(9_000);
  });
});

describe("validation messages read as sentences", () => {
  it("a list's query parameters say what they must be, whatever is wrong with them", async () => {
    for (const limit of ["abc", "0", "101", "1.5", "", "-3"]) {
      const res = await api(acct.token, "GET", `/emails?limit=${limit}`);
      expect(res.status, limit).toBe(422);
      expect(await errorOf(res), limit).toEqual({ statusCode: 422, name: "validation_error", message: "`limit` must be a whole number from 1 to 100." });
    }
    expect((await errorOf(await api(acct.token, "GET", "/domains?after=x"))).message).toBe("`after` must be a UUID, like 01a20f86-1a38-7307-9dc6-c29aa74bf40f.");
    // A schema's own message stays.
    expect((await errorOf(await api(acct.token, "GET", "/suppressions?origin=x"))).message).toBe("`origin` must be `bounce`, `complaint` or `manual`.");
  });

  it("zod's common issues become plain sentences naming the field; a schema's own message wins", () => {
    const Schema = z.object({
      name: z.string().min(1).max(50).optional(),
      tags: z.array(z.string()).min(1).max(3).optional(),
      kind: z.enum(["a", "b", "c"]).optional(),
      on: z.boolean().optional(),
      at: z.string().datetime().optional(),
      to: z.string().email().optional(),
      score: z.number().positive().optional(),
      step: z.number().multipleOf(5).optional(),
      code: z.string().regex(/^\d+$/, "must be digits only.").optional(),
      nested: z.object({ n: z.number().int().max(9) }).strict().optional(),
    }).strict();
    const message = (input: unknown) => {
      try {
        validate(Schema, input);
      } catch (err) {
        expect(err).toBeInstanceOf(ApiError);
        return (err as ApiError).message;
      }
      throw new Error("no error");
    };
    expect(message({ name: "" })).toBe("`name` must be 1 to 50 characters long.");
    expect(message({ name: "x".repeat(51) })).toBe("`name` must be 1 to 50 characters long.");
    expect(message({ name: 5 })).toBe("`name` must be a string.");
    expect(message({ name: null })).toBe("`name` must be a string, not null.");
    expect(message({ tags: [] })).toBe("`tags` must have 1 to 3 items.");
    expect(message({ tags: "a" })).toBe("`tags` must be a list (a JSON array).");
    expect(message({ kind: "d" })).toBe("`kind` must be one of `a`, `b` or `c`.");
    expect(message({ on: "yes" })).toBe("`on` must be true or false.");
    expect(message({ at: "tomorrow" })).toBe("`at` must be an ISO 8601 date and time, like 2026-11-05T09:00:00Z.");
    expect(message({ to: "nobody" })).toBe("`to` must be an email address, like a@example.com.");
    expect(message({ score: 0 })).toBe("`score` must be a number greater than 0.");
    expect(message({ score: "1" })).toBe("`score` must be a number greater than 0.");
    expect(message({ step: 7 })).toBe("`step` must be a multiple of 5.");
    expect(message({ code: "x1" })).toBe("`code` must be digits only.");
    expect(message({ nested: { n: 10 } })).toBe("`nested.n` must be a whole number of at most 9.");
    expect(message({ nested: { n: 1, m: 2 } })).toBe("`nested.m` is not a field this request takes.");
    expect(message({ extra: 1, more: 2 })).toBe("`extra` and `more` are not fields this request takes.");
  });

  it("a union names the shapes it takes, a record is an object, and a body none of a union's shapes is a 400", async () => {
    const Schema = z.object({ reply_to: z.union([z.string(), z.array(z.string())]).optional(), headers: z.record(z.string(), z.string()).optional(), age: z.union([z.string(), z.number()]).optional() }).strict();
    const message = (schema: z.ZodType, input: unknown) => {
      try {
        validate(schema, input);
      } catch (err) {
        return [(err as ApiError).status, (err as ApiError).message];
      }
      throw new Error("no error");
    };
    expect(message(Schema, { reply_to: 123 })).toEqual([422, "`reply_to` must be a string or a list (a JSON array)."]);
    expect(message(Schema, { headers: null })).toEqual([422, "`headers` must be an object, not null."]);
    expect(message(Schema, { age: true })).toEqual([422, "`age` must be a string or a number."]);
    expect(message(z.union([z.object({ a: z.string() }), z.array(z.string())]), null)).toEqual([400, "The request body must be an object or a list (a JSON array)."]);
    // A rule of the whole body reads with the body as its subject.
    expect(message(z.array(z.string()).max(2), ["a", "b", "c"])).toEqual([422, "The request body must have at most 2 items."]);
    // A body whose reading fails (its client went away mid-body: "Network connection lost") is
    // the request's 400, with or without a declared length.
    for (const length of ["200", null]) {
      const cut = new ReadableStream({ start(c) { c.enqueue(new TextEncoder().encode('{"email":"a@b.co"')); c.error(new Error("Network connection lost.")); } });
      const req = new Request("http://tern.test/contacts", { method: "POST", body: cut, headers: length ? { "content-length": length } : {} });
      const err = await readBodyLimited(req, 1024).then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(ApiError);
      expect([(err as ApiError).status, (err as ApiError).message]).toEqual([400, "The request body ended before it was complete."]);
    }
  });
});

describe("request bodies: compressed, and keys zod would drop", () => {
  const raw = (body: BodyInit, headers: Record<string, string>) =>
    exports.default.fetch(new Request("http://tern.test/contacts", { method: "POST", body, headers: { authorization: `Bearer ${acct.token}`, "content-type": "application/json", ...headers } }));
  const compressed = async (text: string, format: "gzip" | "deflate") =>
    new Uint8Array(await new Response(new Blob([text]).stream().pipeThrough(new CompressionStream(format))).arrayBuffer());
  const contactCount = async () => Number((await env.DB.prepare("SELECT count(*) AS n FROM contacts WHERE account_id = ?").bind(acct.accountId).first<{ n: number }>())!.n);

  it("a gzip or deflate body is read as the JSON it holds", async () => {
    for (const format of ["gzip", "deflate"] as const) {
      const email = `compressed-${format}-${crypto.randomUUID()}@example.com`;
      const body = await compressed(JSON.stringify({ email, first_name: "Zip" }), format);
      const res = await raw(body, { "content-encoding": format, "content-length": String(body.byteLength) });
      expect(res.status, format).toBe(201);
      const got = (await (await api(acct.token, "GET", `/contacts/${encodeURIComponent(email)}`)).json()) as { first_name: string };
      expect(got.first_name).toBe("Zip");
    }
  });
  it("a compressed body is held to the limit once decompressed, and bad data or another encoding is a clear error", async () => {
    // 1 MB of zeros compresses to about 1 KB; the limit counts what it holds.
    const bomb = await compressed("0".repeat(1024 * 1024 + 1), "gzip");
    const err = await readBodyLimited(new Request("http://tern.test/x", { method: "POST", body: bomb, headers: { "content-encoding": "gzip" } }), 1024 * 1024).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect([(err as ApiError).status, (err as ApiError).message]).toEqual([413, "The request body must be at most 1 MB once decompressed."]);
    const before = await contactCount();
    const garbage = await raw(JSON.stringify({ email: "plain@example.com" }), { "content-encoding": "gzip" });
    expect(garbage.status).toBe(400);
    expect(await errorOf(garbage)).toEqual({ statusCode: 400, name: "validation_error", message: "The request body is not valid gzip data, as its Content-Encoding says it is." });
    const br = await raw(JSON.stringify({ email: "br@example.com" }), { "content-encoding": "br" });
    expect(br.status).toBe(415);
    expect((await errorOf(br)).message).toBe("Content-Encoding `br` is not supported: send the body uncompressed, or with gzip or deflate.");
    expect(await contactCount()).toBe(before);
  });
  it("a `__proto__` key anywhere, plain or escaped, is a 422 and changes nothing", async () => {
    const before = await contactCount();
    for (const text of [
      '{"email":"proto1@example.com","properties":{"__proto__":"x"}}',
      '{"email":"proto2@example.com","properties":{"\\u005f_proto__":"x"}}',
      '[{"email":"proto3@example.com","properties":{"a":[{"__pr\\u006fto__":{}}]}}]',
    ]) {
      const res = await api(acct.token, "POST", "/contacts", text);
      expect(res.status, text).toBe(422);
      expect((await errorOf(res)).message).toBe("`__proto__` cannot be used as a name (of a property, header, variable or any other key).");
    }
    expect(await contactCount()).toBe(before);
    // Text that merely mentions it, or escapes other characters, is fine.
    const ok = await api(acct.token, "POST", "/contacts", '{"email":"proto-ok@example.com","first_name":"__proto__ \\u00e9"}');
    expect(ok.status).toBe(201);
  });
});
