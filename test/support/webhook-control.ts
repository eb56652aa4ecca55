// The webhook receivers the worker tests deliver to, and a small HTTP control server through
// which tests inside workerd script them and read what arrived (they cannot call Node objects).
// "real" checks signed timestamps against this machine's clock; "driven" checks signatures
// only, for tests that run tern's clock ahead; "down" is a port nothing listens on.
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { startWebhookReceiver, type Answer, type WebhookReceiver } from "./webhook-receiver.ts";

export interface WebhookPeers {
  ports: { webhooks: number; webhooksDriven: number; webhookControl: number; webhookDown: number };
  close(): Promise<void>;
}

async function bodyOf(req: IncomingMessage): Promise<any> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return chunks.length ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : {};
}

export async function startWebhookPeers(): Promise<WebhookPeers> {
  const receivers: Record<string, WebhookReceiver> = {
    real: await startWebhookReceiver({ timestamps: "real" }),
    driven: await startWebhookReceiver({ timestamps: "signature-only" }),
  };
  const down = await startWebhookReceiver();
  await down.down();

  const control = createServer(async (req, res) => {
    try {
      const url = new URL(req.url ?? "/", "http://control");
      const receiver = receivers[url.searchParams.get("receiver") ?? "real"];
      if (!receiver) throw new Error("unknown receiver");
      const path = url.searchParams.get("path") ?? undefined;
      let answer: unknown = { ok: true };
      if (req.method === "GET" && url.pathname === "/deliveries") {
        answer = receiver.deliveries(path);
      } else if (req.method === "POST" && url.pathname === "/script") {
        const b = (await bodyOf(req)) as { answers: Answer[]; then?: Answer };
        receiver.script(path!, b.answers, b.then);
      } else if (req.method === "POST" && url.pathname === "/secrets") {
        const b = (await bodyOf(req)) as { secrets: string[] };
        receiver.setSecrets(b.secrets, path);
      } else {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer));
    } catch (err) {
      res.writeHead(400, { "content-type": "application/json" }).end(JSON.stringify({ error: String(err) }));
    }
  });
  await new Promise<void>((resolve) => control.listen(0, "127.0.0.1", resolve));

  return {
    ports: {
      webhooks: receivers.real!.port,
      webhooksDriven: receivers.driven!.port,
      webhookControl: (control.address() as AddressInfo).port,
      webhookDown: down.port,
    },
    async close() {
      await new Promise<void>((resolve) => control.close(() => resolve()));
      await Promise.all(Object.values(receivers).map((r) => r.close()));
    },
  };
}
