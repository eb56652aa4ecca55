// The account-data service's seams over the Worker's bindings (D1 and R2). Kept apart from
// data.ts, which ops/admin.ts runs in Node over wrangler instead.
import type { BlobStore, Row, SqlRunner } from "./data.ts";

export function d1Runner(d1: D1Database): SqlRunner {
  return { all: async (sql, params = []) => (await d1.prepare(sql).bind(...params).all<Row>()).results };
}

export function r2Store(bucket: R2Bucket): BlobStore {
  return {
    delete: async (keys) => {
      if (keys.length) await bucket.delete(keys);
    },
    list: async (prefix) => {
      const keys: string[] = [];
      let cursor: string | undefined;
      for (;;) {
        const page = await bucket.list({ prefix, cursor, limit: 1000 });
        keys.push(...page.objects.map((o) => o.key));
        if (!page.truncated) return keys;
        cursor = page.cursor;
      }
    },
  };
}
