// Topics (Resend's /topics): name, description, visibility, and a default_subscription fixed at
// creation. A contact's choices live on the contact (/contacts/{id}/topics).
import { createRoute, z } from "@hono/zod-openapi";
import { defineRoute, type App, type Ctx } from "../app.ts";
import { createTopic, deleteTopic, findTopic, listTopics, updateTopic } from "../contacts/topics.ts";
import type { TopicRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import { readJson, validate } from "../http.ts";
import { ListQuery, listSchema, readPage } from "../pagination.ts";
import { errorResponses, IdParam, iso, json, jsonBody, label } from "./schemas.ts";

const TopicName = label("name", 50);
// A caption of up to 200 characters, shown in a paragraph of the preference page: one line too.
const Description = label("description", 200, { mayBeEmpty: true }).nullable();
const Visibility = z.enum(["public", "private"], { error: "`visibility` must be `public` or `private`." });

export const CreateTopicRequest = z.object({
  name: TopicName,
  default_subscription: z.enum(["opt_in", "opt_out"], { error: "`default_subscription` must be `opt_in` or `opt_out`." }),
  description: Description.optional(),
  visibility: Visibility.optional(),
}).openapi("CreateTopicRequest");

export const UpdateTopicRequest = z.object({
  name: TopicName.optional(),
  description: Description.optional(),
  visibility: Visibility.optional(),
}).openapi("UpdateTopicRequest");

const Topic = z.object({
  object: z.literal("topic"), id: z.string(), name: z.string(), description: z.string().nullable(),
  default_subscription: z.enum(["opt_in", "opt_out"]), visibility: z.enum(["public", "private"]), created_at: z.string(),
}).openapi("Topic");
const TopicRef = z.object({ object: z.literal("topic"), id: z.string() });
const TopicDeleted = z.object({ object: z.literal("topic"), id: z.string(), deleted: z.literal(true) });

function view(r: TopicRow) {
  return { object: "topic" as const, id: r.id, name: r.name, description: r.description, default_subscription: r.defaultSubscription, visibility: r.visibility, created_at: iso(r.createdAt)! };
}

const notFound = () => new ApiError("not_found", "Topic not found.");
const account = (c: Ctx) => c.get("principal").accountId;

export function registerTopicRoutes(app: App): void {
  defineRoute(
    app,
    "full",
    createRoute({
      method: "post", path: "/topics", tags: ["Topics"], summary: "Create a topic",
      request: jsonBody(CreateTopicRequest),
      responses: { 201: json(TopicRef, "The new topic"), ...errorResponses(400, 401, 403, 422) },
    }),
    async (c) => {
      const body = validate(CreateTopicRequest, await readJson(c.req.raw));
      const row = await createTopic(c.env.DB, account(c), { name: body.name, description: body.description, defaultSubscription: body.default_subscription, visibility: body.visibility });
      return c.json({ object: "topic" as const, id: row.id }, 201);
    },
  );
  defineRoute(
    app,
    "full",
    createRoute({
      method: "get", path: "/topics", tags: ["Topics"], summary: "List topics",
      request: { query: ListQuery },
      responses: { 200: json(listSchema(Topic), "The account's topics, newest first"), ...errorResponses(401, 403, 422) },
    }),
    async (c) => {
      const list = await listTopics(c.env.DB, account(c), readPage(c.req.query()));
      return c.json({ ...list, data: list.data.map(view) });
    },
  );
  defineRoute(
    app,
    "full",
    createRoute({
      method: "get", path: "/topics/{id}", tags: ["Topics"], summary: "Retrieve a topic",
      request: { params: IdParam },
      responses: { 200: json(Topic, "The topic"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const row = await findTopic(c.env.DB, account(c), c.req.param("id")!);
      if (!row) throw notFound();
      return c.json(view(row));
    },
  );
  defineRoute(
    app,
    "full",
    createRoute({
      method: "patch", path: "/topics/{id}", tags: ["Topics"], summary: "Update a topic",
      description: "Name, description and visibility; `default_subscription` is fixed at creation.",
      request: { params: IdParam, ...jsonBody(UpdateTopicRequest) },
      responses: { 200: json(TopicRef, "Updated"), ...errorResponses(400, 401, 403, 404, 422) },
    }),
    async (c) => {
      const raw = await readJson(c.req.raw);
      const body = validate(UpdateTopicRequest, raw);
      // The schema drops unknown fields; the one that may not change is passed on to be refused.
      const defaultSubscription = (raw as Record<string, unknown>).default_subscription;
      const row = await updateTopic(c.env.DB, account(c), c.req.param("id")!, { name: body.name, description: body.description, visibility: body.visibility, defaultSubscription });
      if (!row) throw notFound();
      return c.json({ object: "topic" as const, id: row.id });
    },
  );
  defineRoute(
    app,
    "full",
    createRoute({
      method: "delete", path: "/topics/{id}", tags: ["Topics"], summary: "Delete a topic",
      description: "Contacts' choices for it go with it.",
      request: { params: IdParam },
      responses: { 200: json(TopicDeleted, "Deleted"), ...errorResponses(401, 403, 404) },
    }),
    async (c) => {
      const row = await deleteTopic(c.env, account(c), c.req.param("id")!);
      if (!row) throw notFound();
      return c.json({ object: "topic" as const, id: row.id, deleted: true as const });
    },
  );
}
