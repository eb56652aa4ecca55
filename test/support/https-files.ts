// A loopback HTTPS file server for the worker tests of outbound fetches (attachment paths),
// started by test/global-setup.ts. Its leaf comes from the local CA that workerd trusts.
import { readFileSync } from "node:fs";
import type { ServerResponse } from "node:http";
import { createServer } from "node:https";
import { prepareTestCertificates } from "./certificates.ts";
import { sizedPattern } from "./sized-pattern.ts";

/** The bytes `/file.pdf` serves. */
export const FILE_PDF_BYTES = new TextEncoder().encode("%PDF-1.4\n% tern test file\n%%EOF\n");
const BIG_BYTES = 5 * 1024 * 1024;

export interface HttpsFiles {
  port: number;
  close(): Promise<void>;
}

export async function startHttpsFiles(): Promise<HttpsFiles> {
  const certs = prepareTestCertificates();
  const open = new Set<ServerResponse>();
  /** What `/sized` served, by its `tag`: requests and body bytes written. */
  const served = new Map<string, { requests: number; bytes: number }>();
  const server = createServer({ cert: readFileSync(certs.certPath), key: readFileSync(certs.keyPath) }, (req, res) => {
    open.add(res);
    res.on("close", () => open.delete(res));
    const url = new URL(req.url ?? "/", "https://localhost");
    const redirect = (location: string) => res.writeHead(302, { location }).end();
    switch (url.pathname) {
      case "/file.pdf":
        res.writeHead(200, { "content-type": "application/pdf", "content-length": FILE_PDF_BYTES.length });
        res.end(FILE_PDF_BYTES);
        return;
      case "/download": // no extension: the filename must come from elsewhere
        res.writeHead(200, { "content-type": "image/png; charset=binary" });
        res.end(FILE_PDF_BYTES);
        return;
      case "/big": {
        // 5 MB in chunks, with no Content-Length: only counting the stream can stop it.
        res.writeHead(200, { "content-type": "application/octet-stream" });
        const chunk = new Uint8Array(64 * 1024).fill(97);
        let sent = 0;
        const pump = () => {
          while (sent < BIG_BYTES && !res.destroyed) {
            sent += chunk.length;
            if (!res.write(chunk)) return void res.once("drain", pump);
          }
          if (!res.destroyed) res.end();
        };
        pump();
        return;
      }
      case "/big-declared":
        // Declares 5 MB and then sends nothing: only the Content-Length check answers quickly.
        res.writeHead(200, { "content-type": "application/octet-stream", "content-length": BIG_BYTES });
        res.flushHeaders();
        return;
      case "/slow":
        // Starts the body and never finishes it.
        res.writeHead(200, { "content-type": "application/pdf" });
        res.write(FILE_PDF_BYTES.slice(0, 4));
        return;
      case "/sized": {
        // ?bytes=N of "a" (or, with ?pattern, of sizedPattern), with a Content-Length unless
        // ?undeclared; counted under ?tag.
        const total = Number(url.searchParams.get("bytes") ?? 0);
        const patterned = url.searchParams.has("pattern");
        const tag = served.get(url.searchParams.get("tag") ?? "") ?? { requests: 0, bytes: 0 };
        served.set(url.searchParams.get("tag") ?? "", tag);
        tag.requests++;
        res.writeHead(200, { "content-type": "application/octet-stream", ...(url.searchParams.has("undeclared") ? {} : { "content-length": total }) });
        const chunk = new Uint8Array(64 * 1024).fill(97);
        let sent = 0;
        const pump = () => {
          while (sent < total && !res.destroyed) {
            const piece = chunk.subarray(0, Math.min(chunk.length, total - sent));
            if (patterned) for (let i = 0; i < piece.length; i++) piece[i] = sizedPattern(sent + i);
            sent += piece.length;
            tag.bytes += piece.length;
            if (!res.write(piece)) return void res.once("drain", pump);
          }
          if (!res.destroyed) res.end();
        };
        pump();
        return;
      }
      case "/served": // what /sized served under ?tag, as JSON
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(served.get(url.searchParams.get("tag") ?? "") ?? { requests: 0, bytes: 0 }));
        return;
      case "/redirect-ok":
        redirect("/file.pdf");
        return;
      case "/redirect-private":
        redirect(url.searchParams.get("to") === "http" ? `http://127.0.0.1:${port}/file.pdf` : "https://10.0.0.1/file.pdf");
        return;
      case "/redirect-loop":
        redirect("/redirect-loop");
        return;
      case "/404":
        res.writeHead(404, { "content-type": "text/plain" }).end("not found");
        return;
      default:
        res.writeHead(404, { "content-type": "text/plain" }).end("no such route");
    }
  });
  server.on("tlsClientError", () => {});
  server.on("error", () => {});
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of open) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

