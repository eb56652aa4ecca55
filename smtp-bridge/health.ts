// `GET /health` for load balancers, container runtimes and monitoring: 200 while the bridge
// takes mail, 503 once it is draining for a shutdown (so traffic moves elsewhere first).
// It does not call the API: an API outage must not get healthy bridges restarted.
import { createServer, type Server } from "node:http";

export interface HealthStatus {
  status: "ok" | "draining";
  ports: { port: number; tls: string }[];
  sessions: number;
  /** Messages being read and submitted, and messages whose DATA waits for a slot. */
  submissions: { active: number; waiting: number };
  certificate: { subject: string; notAfter: string; fingerprint: string; loadedAt: string };
  uptimeSeconds: number;
  /** MB: resident set, V8 heap (reserved, in use), and memory outside it (buffers). */
  memory: { rss: number; heapTotal: number; heapUsed: number; external: number; arrayBuffers: number };
}

export function startHealthServer(host: string, port: number, status: () => HealthStatus): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    const send = (code: number, body: unknown) => {
      res.writeHead(code, { "content-type": "application/json", "cache-control": "no-store" });
      res.end(JSON.stringify(body));
    };
    if (path !== "/health") return send(404, { status: "not_found" });
    if (req.method !== "GET" && req.method !== "HEAD") return send(405, { status: "method_not_allowed" });
    const s = status();
    send(s.status === "ok" ? 200 : 503, s);
  });
  server.keepAliveTimeout = 5_000;
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve(server);
    });
  });
}
