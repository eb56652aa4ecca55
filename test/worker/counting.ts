// A D1 binding that counts what reaches the database: batches, and statements run on their own
// (run/all/first/raw/exec). With `logWrites` in the counts, the request log's own inserts
// (api_logs) are counted there instead of as queries. Shared by the tests that hold the send
// path to its D1 budget (round-trips, idempotency-front).
export interface D1Counts {
  d1Batches: number;
  d1Queries: number;
  logWrites?: number;
}

export function countingD1(db: D1Database, counts: D1Counts): D1Database {
  const real = new WeakMap<object, D1PreparedStatement>();
  const wrap = (stmt: D1PreparedStatement, isLog: boolean): D1PreparedStatement => {
    const proxy = new Proxy(stmt, {
      get(target, prop) {
        if (prop === "bind") return (...args: unknown[]) => wrap(target.bind(...args), isLog);
        if (prop === "run" || prop === "all" || prop === "first" || prop === "raw") {
          return (...args: unknown[]) => {
            if (isLog && counts.logWrites !== undefined) counts.logWrites++;
            else counts.d1Queries++;
            return (target[prop] as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        const v = Reflect.get(target, prop, target);
        return typeof v === "function" ? v.bind(target) : v;
      },
    });
    real.set(proxy, stmt);
    return proxy;
  };
  return new Proxy(db, {
    get(target, prop) {
      if (prop === "prepare") return (sql: string) => wrap(target.prepare(sql), /^insert into "api_logs"/i.test(sql));
      if (prop === "batch") {
        return (stmts: D1PreparedStatement[]) => {
          counts.d1Batches++;
          return target.batch(stmts.map((s) => real.get(s) ?? s));
        };
      }
      if (prop === "exec") return (sql: string) => (counts.d1Queries++, target.exec(sql));
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}
