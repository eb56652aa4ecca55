// The floor of part 1 of `npm run bench` (bench/floor.ts starts it under `wrangler dev`, as
// tern is started): what the local runtime charges for tern's bare route and for the one D1
// batch of an accepted email, with none of tern's own code around them (no auth, validation,
// zod, queue send or queue consumer).
//   GET  /health  the same route as tern's (worker/routes/docs.ts): c.json({ ok: true });
//   POST /write   exactly one env.DB.batch() of the statements tern's accept path sends for a
//                 plain send (bench/floor/statements.ts); the request body is not read
//                 (?n=200: 200 such batches in a row, for bench/d1-writes.ts);
//   GET  /read    one D1 read of the shape of tern's GET /emails/<unknown id>: a SELECT by
//                 primary key (.raw(), as drizzle's .get() does) that finds nothing.
//   POST /emails  and the send queue's consumer: the floor of end-to-end delivery (./delivery.ts).
//   POST /emails/batch, POST /broadcasts, POST /seed and the broadcast queue's consumer: the
//                 floor of a broadcast email's cost against a batch-sent one's (./broadcast.ts).
import { Hono } from "hono";
import { acceptBatch, createBroadcast, enqueue, fanOutRun, seedContacts } from "./broadcast.ts";
import { deliverBatch, type DeliveryFloorEnv } from "./delivery.ts";
import { EMAIL_BY_ID_SQL, FLOOR_ACCOUNT, newSendBatch } from "./statements.ts";

type FloorEnv = DeliveryFloorEnv;

const app = new Hono<{ Bindings: FloorEnv }>();

app.get("/health", (c) => c.json({ ok: true }));

app.post("/write", async (c) => {
  // ?n=: that many batches one after another in this request (bench/d1-writes.ts: the database's
  // own pace, without an HTTP round trip per batch). Without it, one batch.
  const n = Math.min(1000, Math.max(1, Number(c.req.query("n") ?? 1) || 1));
  let last: { emailId: string; used?: number } = { emailId: "" };
  for (let i = 0; i < n; i++) {
    const { emailId, statements } = newSendBatch();
    const results = await c.env.DB.batch(statements.map((s) => c.env.DB.prepare(s.sql).bind(...s.params)));
    last = { emailId, used: (results[0]?.results[0] as { used?: number } | undefined)?.used };
  }
  return c.json({ id: last.emailId, used: last.used });
});

app.get("/read", async (c) => {
  const rows = await c.env.DB.prepare(EMAIL_BY_ID_SQL).bind(crypto.randomUUID(), FLOOR_ACCOUNT).raw();
  return c.json({ found: rows.length > 0 });
});

app.post("/emails", async (c) => c.json({ id: (await acceptBatch(c.env, [await c.req.json()]))[0] }));
app.post("/emails/batch", async (c) => c.json({ data: (await acceptBatch(c.env, await c.req.json(), c.req.query("hold") === "1")).map((id) => ({ id })) }));
app.post("/enqueue", async (c) => {
  await enqueue(c.env, await c.req.json());
  return c.json({ ok: true });
});
app.post("/broadcasts", async (c) => c.json({ id: await createBroadcast(c.env, await c.req.json()) }));
app.post("/seed", async (c) => {
  await seedContacts(c.env, Math.min(1_000_000, Number(c.req.query("n") ?? 0) || 0));
  return c.json({ ok: true });
});

type FloorMessage = { id: string } | { broadcast: string; after: string };

export default {
  fetch: app.fetch,
  async queue(batch: MessageBatch<FloorMessage>, env: FloorEnv) {
    if (batch.queue === "tern-floor-broadcasts") {
      for (const m of batch.messages) await fanOutRun(env, m.body as { broadcast: string; after: string });
    } else {
      await deliverBatch(env, batch as MessageBatch<{ id: string }>);
    }
  },
} satisfies ExportedHandler<FloorEnv, FloorMessage>;
