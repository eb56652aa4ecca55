// Cursor pagination of contract section 1: `limit` (1..100, default 20), `after` / `before`
// (ids, mutually exclusive), newest first. Ids are UUIDv7, so id order is creation order.
import { z } from "@hono/zod-openapi";
import { and, asc, desc, gt, lt, type SQL } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import { ApiError } from "./errors.ts";
import { validate } from "./http.ts";

export const ListQuery = z
  .object({
    limit: z.coerce.number().int().min(1).max(100).default(20).openapi({ description: "1 to 100, default 20." }),
    after: z.string().uuid().optional().openapi({ description: "Return items after (older than) this id." }),
    before: z.string().uuid().optional().openapi({ description: "Return items before (newer than) this id." }),
  });

export interface Page {
  limit: number;
  after?: string;
  before?: string;
}

export function readPage(query: Record<string, string>): Page {
  const page = validate(ListQuery, query, "query");
  if (page.after && page.before) {
    throw new ApiError("validation_error", "`after` and `before` cannot be used together.");
  }
  // Ids are stored in lower case and compared as text: an id given in upper case is the same id.
  if (page.after) page.after = page.after.toLowerCase();
  if (page.before) page.before = page.before.toLowerCase();
  return page;
}

/** The where-clause, order and row limit for one page (one row more than the page, which
 * tells finishPage whether there is more); pass the rows to finishPage. */
export function pageQuery(idColumn: SQLiteColumn, page: Page, scope: SQL | undefined) {
  const limit = page.limit + 1;
  if (page.before) return { where: and(scope, gt(idColumn, page.before)), orderBy: asc(idColumn), limit };
  return { where: and(scope, page.after ? lt(idColumn, page.after) : undefined), orderBy: desc(idColumn), limit };
}

export function finishPage<T>(rows: T[], page: Page): { object: "list"; has_more: boolean; data: T[] } {
  const hasMore = rows.length > page.limit;
  let data = rows.slice(0, page.limit);
  if (page.before) data = data.reverse();
  return { object: "list", has_more: hasMore, data };
}

export function listSchema<T extends z.ZodType>(item: T) {
  return z.object({ object: z.literal("list"), has_more: z.boolean(), data: z.array(item) });
}

/** One page of a short in-memory list in its own order: `after` / `before` name an item. */
export function pageOfList<T extends { id: string }>(items: T[], page: Page): { object: "list"; has_more: boolean; data: T[] } {
  let start = 0;
  let end = items.length;
  if (page.after) {
    const i = items.findIndex((x) => x.id === page.after);
    start = i < 0 ? items.length : i + 1;
  }
  if (page.before) {
    const i = items.findIndex((x) => x.id === page.before);
    end = i < 0 ? 0 : i;
    start = Math.max(0, end - page.limit);
    return { object: "list", has_more: start > 0, data: items.slice(start, end) };
  }
  return { object: "list", has_more: end - start > page.limit, data: items.slice(start, start + page.limit) };
}
