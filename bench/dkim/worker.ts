// The DKIM benchmark's Worker (run by bench/dkim.ts with `wrangler dev -c bench/dkim/wrangler.toml`):
// renders a message the way the send consumer does, n times, and signs each one or not.
// Timing is taken outside (Node): inside workerd the clock only moves on I/O.
import { generateDkimKey } from "../../worker/dkim/keys.ts";
import { signMessage, type SigningKey } from "../../worker/dkim/sign.ts";
import { buildMessage, type MimeMessageInput } from "../../worker/mime/build.ts";

type Mode = "unsigned" | "rsa" | "ed25519" | "rsa+ed25519";

const keys = new Map<string, Promise<SigningKey>>();
function key(algorithm: "rsa" | "ed25519"): Promise<SigningKey> {
  let k = keys.get(algorithm);
  if (!k) {
    k = (async () => {
      const g = await generateDkimKey(algorithm);
      const params = algorithm === "rsa" ? { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" } : { name: "Ed25519" };
      const privateKey = await crypto.subtle.importKey("pkcs8", g.pkcs8 as Uint8Array<ArrayBuffer>, params, false, ["sign"]);
      return { domain: "bench.tern.test", selector: `bench-${algorithm}`, algorithm, privateKey };
    })();
    keys.set(algorithm, k);
  }
  return k;
}

/** A message of about `bytes`: up to 5 KB of html and text; larger ones carry a binary attachment. */
function input(bytes: number): MimeMessageInput {
  const html = `<p>${"Benchmark paragraph with some words in it. ".repeat(Math.max(1, Math.floor(Math.min(bytes, 5 * 1024) / 2 / 44) - 2))}</p>`;
  const attachmentBytes = Math.max(0, Math.floor((bytes - 5 * 1024) * 0.74));
  const content = new Uint8Array(attachmentBytes);
  for (let i = 0; i < content.length; i++) content[i] = (i * 2654435761) >>> 24;
  return {
    from: { email: "news@bench.tern.test", name: "Bench" },
    to: [{ email: "someone@example.com" }],
    cc: [],
    replyTo: [],
    subject: "DKIM benchmark",
    html,
    text: html.replace(/<[^>]+>/g, ""),
    headers: {},
    attachments: attachmentBytes > 0 ? [{ filename: "data.bin", contentType: "application/octet-stream", content }] : [],
    messageId: "bench@bench.tern.test",
    date: new Date(0),
  };
}

const inputs = new Map<number, MimeMessageInput>();

export default {
  async fetch(req: Request): Promise<Response> {
    const url = new URL(req.url);
    const bytes = Number(url.searchParams.get("bytes"));
    const n = Number(url.searchParams.get("n"));
    const mode = url.searchParams.get("mode") as Mode;
    if (!(bytes > 0 && n > 0) || !["unsigned", "rsa", "ed25519", "rsa+ed25519"].includes(mode)) return new Response("bad query", { status: 400 });
    let msg = inputs.get(bytes);
    if (!msg) inputs.set(bytes, (msg = input(bytes)));
    const signers = mode === "unsigned" ? [] : await Promise.all(mode.split("+").map((a) => key(a as "rsa" | "ed25519")));
    let size = 0;
    for (let i = 0; i < n; i++) {
      const raw = buildMessage(msg);
      const out = signers.length ? await signMessage(raw, signers) : raw;
      size = out.length;
    }
    return Response.json({ n, size });
  },
};
