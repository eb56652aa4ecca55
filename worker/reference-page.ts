// A readable API reference rendered server-side from the OpenAPI document: no scripts, no
// remote assets, so it works offline and under a strict CSP.

type Json = Record<string, unknown>;

const esc = (s: unknown) =>
  String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);

function resolve(doc: Json, schema: Json | undefined): Json | undefined {
  const ref = schema?.$ref as string | undefined;
  if (!ref) return schema;
  const name = ref.split("/").pop()!;
  return ((doc.components as Json)?.schemas as Json)?.[name] as Json;
}

function typeOf(doc: Json, schema: Json | undefined): string {
  const s = resolve(doc, schema);
  if (!s) return "";
  if (s.$ref) return String(s.$ref).split("/").pop()!;
  if (Array.isArray(s.anyOf)) return (s.anyOf as Json[]).map((x) => typeOf(doc, x)).join(" | ");
  if (Array.isArray(s.oneOf)) return (s.oneOf as Json[]).map((x) => typeOf(doc, x)).join(" | ");
  if (Array.isArray(s.enum)) return (s.enum as unknown[]).map((v) => JSON.stringify(v)).join(" | ");
  if (s.type === "array") return `${typeOf(doc, s.items as Json)}[]`;
  if (schema?.$ref) return String(schema.$ref).split("/").pop()!;
  return String(s.type ?? "object");
}

function fieldsTable(doc: Json, schema: Json | undefined): string {
  let s = resolve(doc, schema);
  if (s?.type === "array") s = resolve(doc, s.items as Json);
  const props = s?.properties as Record<string, Json> | undefined;
  if (!props) return "";
  const required = new Set((s?.required as string[]) ?? []);
  const rows = Object.entries(props)
    .map(([name, p]) => {
      const r = resolve(doc, p) ?? {};
      return `<tr><td><code>${esc(name)}</code>${required.has(name) ? ' <span class="req">required</span>' : ""}</td><td><code>${esc(typeOf(doc, p))}</code></td><td>${esc(r.description ?? p.description ?? "")}</td></tr>`;
    })
    .join("");
  return `<table><thead><tr><th>Field</th><th>Type</th><th>Notes</th></tr></thead><tbody>${rows}</tbody></table>`;
}

export function renderReference(doc: Json): string {
  const info = doc.info as Json;
  const paths = (doc.paths ?? {}) as Record<string, Record<string, Json>>;
  const byTag = new Map<string, string[]>();
  for (const [path, ops] of Object.entries(paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const tag = ((op.tags as string[]) ?? ["Other"])[0]!;
      const body = (((op.requestBody as Json)?.content as Json)?.["application/json"] as Json)?.schema as Json | undefined;
      const responses = Object.entries((op.responses ?? {}) as Record<string, Json>)
        .map(([code, r]) => `<li><code>${esc(code)}</code> ${esc(r.description)}</li>`)
        .join("");
      const html = `<section class="op" id="${esc(method)}-${esc(path)}">
<h3><span class="m ${esc(method)}">${esc(method.toUpperCase())}</span> <code>${esc(path)}</code></h3>
<p>${esc(op.summary)}</p>${op.description ? `<p class="d">${esc(op.description)}</p>` : ""}
${body ? `<h4>Body</h4>${fieldsTable(doc, body)}` : ""}
<h4>Responses</h4><ul>${responses}</ul></section>`;
      byTag.set(tag, [...(byTag.get(tag) ?? []), html]);
    }
  }
  const nav = [...byTag.keys()].map((t) => `<li><a href="#tag-${esc(t)}">${esc(t)}</a></li>`).join("");
  const sections = [...byTag.entries()].map(([t, ops]) => `<h2 id="tag-${esc(t)}">${esc(t)}</h2>${ops.join("")}`).join("");
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>${esc(info.title)} reference</title><style>
body{font:15px/1.5 system-ui,sans-serif;margin:0;display:flex;color:#1a1a1a}nav{width:220px;padding:24px;border-right:1px solid #eee;position:sticky;top:0;height:100vh;box-sizing:border-box}
main{padding:24px 40px;max-width:900px}code{font:13px ui-monospace,monospace;background:#f5f5f5;padding:1px 4px;border-radius:3px}
.op{border:1px solid #e5e5e5;border-radius:8px;padding:4px 20px;margin:16px 0}.m{font:bold 12px ui-monospace,monospace;padding:2px 6px;border-radius:4px;color:#fff;background:#555}
.get{background:#2a7}.post{background:#27c}.patch{background:#c82}.delete{background:#c33}table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #eee;padding:6px;text-align:left;vertical-align:top}
.req{color:#c33;font-size:12px}.d{color:#555}</style></head><body>
<nav><strong>${esc(info.title)}</strong><ul>${nav}</ul><p><a href="/openapi.json">openapi.json</a></p></nav>
<main><h1>${esc(info.title)}</h1><p>${esc(info.description)}</p>
<p>Authenticate with <code>Authorization: Bearer tern_...</code>. Errors are <code>{"statusCode","name","message"}</code>.</p>${sections}</main></body></html>`;
}
