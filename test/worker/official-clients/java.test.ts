// resend-java (4.20.0, resend/resend-java at b33ea98, 2026-08-21): every call it has that tern
// serves, as its services build them (OkHttp through ops/resend-host-proxy.ts, since the client
// has no base-URL option; ids and addresses put in paths as they are), read as ResendMapper
// reads them: Jackson with FAIL_ON_UNKNOWN_PROPERTIES off, so null and extra fields are fine,
// but a container of the wrong kind (an array for a Map, an object for a String) fails.
import { beforeAll, describe, expect, it } from "vitest";
import { any, arr, bareTopics, bool, int, loose, makeWorld, map, OPS, replay, readSuccess, rowsOf, runErrors, runTable, str, type Op, type T, type World } from "./harness.ts";

const o = loose;
const list = (item: T): T => o({ object: str, has_more: bool, data: arr(item) });
const email = o({ id: str, to: arr(str), bcc: arr(str), cc: arr(str), reply_to: arr(str), from: str, subject: str, html: str, text: str, created_at: str, last_event: str });
const received = o({ id: str, to: arr(str), headers: map(str), bcc: arr(str), cc: arr(str), reply_to: arr(str), received_for: arr(str), attachments: arr(o({ id: str, filename: str, content_type: str })) });
const contact = o({ id: str, email: str, first_name: str, last_name: str, created_at: str, unsubscribed: bool });
/** GetContactResponseSuccess: properties is Map<String, ContactPropertyValue { Object value; String type }>. */
const gotContact = o({ id: str, email: str, first_name: str, last_name: str, created_at: str, unsubscribed: bool, properties: map(o({ value: any, type: str })) });
const domain = o({ id: str, name: str, created_at: str, status: str, region: str, open_tracking: bool, click_tracking: bool, tracking_subdomain: str, records: arr(o({ record: str, name: str, type: str, ttl: str, status: str, value: str })) });
/** Log.java: requestBody and responseBody are Map<String, Object>. */
const log = o({ id: str, created_at: str, endpoint: str, method: str, response_status: int, user_agent: str, request_body: map(any), response_body: map(any) });

const LACKS: Op[] = ["emails.metrics", "broadcasts.clicked_links", "broadcasts.recipients", "contacts.get_in_audience", "contacts.update_in_audience", "contacts.remove_in_audience", "contacts.list_in_audience", "contacts.create_in_audience"];

export const JAVA = rowsOf(OPS.filter((o) => !LACKS.includes(o)), (op) => `resend.${op.split(".").map((p) => p.replace(/_(\w)/g, (_m, c: string) => c.toUpperCase())).join("().")}()`, {
  // ContactTopics.update serialises just the topics list.
  "contacts.topics.update": bareTopics,
  "emails.share": () => ({ body: {} }),
  "audiences.remove": (_c, w) => ({ path: `/audiences/${w.spareSegmentId}` }),
}, {
  "emails.get": email, "emails.list": list(email), "receiving.get": received, "contacts.get": gotContact, "contacts.get_by_email": gotContact, "contacts.list": list(contact),
  "domains.get": domain, "domains.create": domain, "logs.get": log, "logs.list": list(o({ id: str, created_at: str, endpoint: str, method: str, response_status: int, user_agent: str })),
});

/** resend-java calls tern does not serve (issue 19 scope). */
export const JAVA_OUT_OF_SCOPE = ["resend.automations()", "resend.events()", "resend.oauthGrants()"];

let w: World;
beforeAll(async () => { w = await makeWorld("java"); });

describe("resend-java", () => {
  it("every call it has that tern serves, read as Jackson reads its models", async () => {
    await runTable("java", JAVA, w);
  });
  it("the log of a batch send (an array body) still reads as Log", async () => {
    const batch = { name: "resend.batch().send()", method: "POST" as const, path: "/emails/batch", body: [{ from: `a@${w.acct.domain}`, to: ["delivered@simulator.tern.test"], subject: "b", text: "b" }] };
    readSuccess("java", batch, await replay(w.acct.token, "java", batch));
    const logs = await replay(w.acct.token, "java", { name: "resend.logs().list()", method: "GET", path: "/logs?limit=5" });
    const id = (logs.body as { data: { id: string; endpoint: string }[] }).data.find((l) => l.endpoint === "/emails/batch")!.id;
    const one = { name: "resend.logs().get()", method: "GET" as const, path: `/logs/${id}` };
    readSuccess("java", one, await replay(w.acct.token, "java", one), log);
  });
  it("error answers: ResendException from the status and message, one 404 and one 422 per resource", async () => {
    expect(await runErrors("java", w, () => true)).toBeGreaterThan(20);
  });
});
