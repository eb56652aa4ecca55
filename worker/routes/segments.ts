// Segments (Resend's /segments) and the older /audiences names for the same rows. Members are
// managed on the contact (/contacts/{id}/segments/...); deleting a segment keeps its contacts.
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App, type Ctx } from "../app.ts";
import { createSegment, deleteSegment, findSegment, listSegments, renameSegment } from "../contacts/segments.ts";
import type { SegmentRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { readJson, validate } from "../http.ts";
import { ListQuery, listSchema, readPage } from "../pagination.ts";
import { errorResponses, IdParam, iso, json, jsonBody, label } from "./schemas.ts";

const SegmentName = label("name", 256);
export const CreateSegmentRequest = z.object({ name: SegmentName }).openapi("CreateSegmentRequest");
const UpdateSegmentRequest = z.object({ name: SegmentName }).openapi("UpdateSegmentRequest");

const kinds = [
  { base: "/segments", object: "segment", tag: "Segments", word: "segment" },
  { base: "/audiences", object: "audience", tag: "Audiences", word: "audience" },
] as const;

function view(object: string, r: SegmentRow) {
  return { object, id: r.id, name: r.name, created_at: iso(r.createdAt)! };
}

const Segment = z.object({ object: z.string(), id: z.string(), name: z.string(), created_at: z.string() }).openapi("Segment");
const SegmentRef = z.object({ object: z.string(), id: z.string(), name: z.string().optional() });
const SegmentDeleted = z.object({ object: z.string(), id: z.string(), deleted: z.literal(true) });

const account = (c: Ctx) => c.get("principal").accountId;

export function registerSegmentRoutes(app: App): void {
  for (const k of kinds) {
    const notFound = () => new ApiError("not_found", `${k.word[0]!.toUpperCase()}${k.word.slice(1)} not found.`);
    const deprecated = k.object === "audience" ? { deprecated: true, description: "Resend's older name for segments; the same rows." } : {};
    defineRoute(
      app,
      "full",
      createRoute({
        method: "post", path: k.base, tags: [k.tag], summary: `Create a ${k.word}`, ...deprecated,
        request: jsonBody(CreateSegmentRequest),
        responses: { 201: json(SegmentRef, `The new ${k.word}`), ...errorResponses(400, 401, 403, 422) },
      }),
      async (c) => {
        const body = validate(CreateSegmentRequest, await readJson(c.req.raw));
        const row = await createSegment(c.env.DB, account(c), body.name);
        return c.json({ object: k.object, id: row.id, name: row.name }, 201);
      },
    );
    defineRoute(
      app,
      "full",
      createRoute({
        method: "get", path: k.base, tags: [k.tag], summary: `List ${k.word}s`, ...deprecated,
        request: { query: ListQuery },
        responses: { 200: json(listSchema(Segment), `The account's ${k.word}s, newest first`), ...errorResponses(401, 403, 422) },
      }),
      async (c) => {
        const list = await listSegments(c.env.DB, account(c), readPage(c.req.query()));
        return c.json({ ...list, data: list.data.map((r) => view(k.object, r)) });
      },
    );
    defineRoute(
      app,
      "full",
      createRoute({
        method: "get", path: `${k.base}/{id}`, tags: [k.tag], summary: `Retrieve a ${k.word}`, ...deprecated,
        request: { params: IdParam },
        responses: { 200: json(Segment, `The ${k.word}`), ...errorResponses(401, 403, 404) },
      }),
      async (c) => {
        const row = await findSegment(c.env.DB, account(c), c.req.param("id")!);
        if (!row) throw notFound();
        return c.json(view(k.object, row));
      },
    );
    defineRoute(
      app,
      "full",
      createRoute({
        method: "patch", path: `${k.base}/{id}`, tags: [k.tag], summary: `Rename a ${k.word}`, ...deprecated,
        request: { params: IdParam, ...jsonBody(UpdateSegmentRequest) },
        responses: { 200: json(SegmentRef, "Renamed"), ...errorResponses(400, 401, 403, 404, 422) },
      }),
      async (c) => {
        const body = validate(UpdateSegmentRequest, await readJson(c.req.raw));
        const row = await renameSegment(c.env.DB, account(c), c.req.param("id")!, body.name);
        if (!row) throw notFound();
        return c.json({ object: k.object, id: row.id });
      },
    );
    defineRoute(
      app,
      "full",
      createRoute({
        method: "delete", path: `${k.base}/{id}`, tags: [k.tag], summary: `Delete a ${k.word}`, ...deprecated,
        description: "Its contacts stay; they leave the segment.",
        request: { params: IdParam },
        responses: { 200: json(SegmentDeleted, "Deleted"), ...errorResponses(401, 403, 404) },
      }),
      async (c) => {
        const row = await deleteSegment(c.env, account(c), c.req.param("id")!);
        if (!row) throw notFound();
        return c.json({ object: k.object, id: row.id, deleted: true as const });
      },
    );
  }
}
