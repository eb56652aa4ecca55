// HTML rendering for the dev relay's mailbox (dev/relay.ts). Everything that comes from a
// message is escaped; the email's own HTML only ever appears inside a sandboxed iframe's
// srcdoc, under the page's Content-Security-Policy (which a srcdoc document inherits), so it
// can neither run script nor load anything remote.
import type { AttachmentInfo, MessageDetail, MessageSummary } from "./relay.ts";

export function escapeHtml(value: unknown): string {
  return String(value ?? "").replace(/[&<>"']/g, (c) =>
    c === "&" ? "&amp;" : c === "<" ? "&lt;" : c === ">" ? "&gt;" : c === '"' ? "&quot;" : "&#39;",
  );
}

/** The CSP of every HTML page. The srcdoc iframe inherits it: no script, no remote anything. */
export function pageCsp(nonce: string): string {
  return [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    "style-src 'unsafe-inline'",
    "img-src data:",
    "font-src data:",
    "media-src data:",
    "connect-src 'self'",
    "frame-src 'none'",
    "form-action 'self'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
}

export function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

function formatTime(iso: string | null): string {
  if (!iso) return "";
  return iso.replace("T", " ").replace(/\.\d+Z$/, " UTC").replace(/Z$/, " UTC");
}

function time(iso: string | null): string {
  if (!iso) return "";
  return `<time datetime="${escapeHtml(iso)}" title="${escapeHtml(formatTime(iso))}">${escapeHtml(formatTime(iso))}</time>`;
}

const STYLE = `
:root { color-scheme: light dark; --bg:#f7f7f8; --fg:#1d1d1f; --muted:#6b6b76; --line:#e3e3e8; --card:#fff;
  --accent:#3b5bdb; --badge:#eef1fd; --warn:#b35900; --warnbg:#fff3e0; --row:#f0f3ff; }
@media (prefers-color-scheme: dark) { :root { --bg:#141417; --fg:#e8e8ec; --muted:#9a9aa6; --line:#2c2c33;
  --card:#1c1c21; --accent:#8ea2ff; --badge:#262b45; --warn:#ffb066; --warnbg:#3a2a17; --row:#22263a; } }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; background:var(--bg); color:var(--fg); }
a { color:var(--accent); text-decoration:none; } a:hover { text-decoration:underline; }
header.top { display:flex; gap:16px; align-items:center; flex-wrap:wrap; padding:12px 20px; background:var(--card);
  border-bottom:1px solid var(--line); position:sticky; top:0; z-index:2; }
header.top .brand { font-weight:650; font-size:15px; color:var(--fg); }
header.top .brand span { color:var(--muted); font-weight:400; }
header.top .spacer { flex:1; }
header.top .meta { color:var(--muted); font-size:12.5px; }
main { padding:16px 20px 40px; max-width:1300px; margin:0 auto; }
form.filter { display:flex; gap:6px; }
input[type=search] { font:inherit; padding:5px 9px; border:1px solid var(--line); border-radius:6px; background:var(--bg); color:var(--fg); width:240px; }
button, .button { font:inherit; padding:5px 11px; border:1px solid var(--line); border-radius:6px; background:var(--card);
  color:var(--fg); cursor:pointer; display:inline-block; }
button:hover, .button:hover { border-color:var(--accent); text-decoration:none; }
button.danger:hover { border-color:#d33; color:#d33; }
table.list { width:100%; border-collapse:collapse; background:var(--card); border:1px solid var(--line); border-radius:8px; overflow:hidden; }
table.list th { text-align:left; font-weight:600; color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.03em;
  padding:8px 12px; border-bottom:1px solid var(--line); }
table.list td { padding:9px 12px; border-bottom:1px solid var(--line); vertical-align:top; }
table.list tr:last-child td { border-bottom:0; }
table.list tbody tr { position:relative; }
table.list tbody tr:hover { background:var(--row); }
table.list td.subject a { color:var(--fg); font-weight:550; }
table.list td.subject a::after { content:""; position:absolute; inset:0; }
td.when, td.size { white-space:nowrap; color:var(--muted); }
td.size { text-align:right; }
.addr { max-width:260px; overflow:hidden; text-overflow:ellipsis; white-space:nowrap; }
.muted { color:var(--muted); }
.badge { display:inline-block; font-size:11.5px; padding:1px 7px; border-radius:10px; background:var(--badge); color:var(--accent);
  font-weight:550; margin-left:6px; white-space:nowrap; vertical-align:1px; }
.badge.warn { background:var(--warnbg); color:var(--warn); }
.empty { text-align:center; padding:60px 20px; color:var(--muted); background:var(--card); border:1px dashed var(--line); border-radius:8px; }
.empty code { background:var(--badge); padding:2px 6px; border-radius:4px; color:var(--fg); }
h1 { font-size:21px; margin:4px 0 14px; word-break:break-word; }
h2 { font-size:13px; text-transform:uppercase; letter-spacing:.04em; color:var(--muted); margin:22px 0 8px; }
.card { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:12px 16px; }
.grid { display:grid; grid-template-columns: minmax(0,1.6fr) minmax(0,1fr); gap:16px; }
@media (max-width: 900px) { .grid { grid-template-columns: minmax(0,1fr); } }
dl.kv { display:grid; grid-template-columns:max-content minmax(0,1fr); gap:4px 14px; margin:0; }
dl.kv dt { color:var(--muted); } dl.kv dd { margin:0; word-break:break-word; }
ul.rcpt { list-style:none; margin:0; padding:0; } ul.rcpt li { padding:2px 0; word-break:break-all; }
.tabs { margin-top:18px; }
.tabs > input { position:absolute; opacity:0; pointer-events:none; }
.tabs > label { display:inline-block; padding:7px 14px; border:1px solid transparent; border-bottom:0; border-radius:7px 7px 0 0;
  cursor:pointer; color:var(--muted); font-weight:550; }
.tabs > input:checked + label { background:var(--card); border-color:var(--line); color:var(--fg); margin-bottom:-1px; position:relative; }
.tabs > input:focus-visible + label { outline:2px solid var(--accent); }
.tabs > .panel { display:none; background:var(--card); border:1px solid var(--line); border-radius:0 8px 8px 8px; padding:0; }
#tab-html:checked ~ .panel.html, #tab-text:checked ~ .panel.text, #tab-headers:checked ~ .panel.headers,
#tab-raw:checked ~ .panel.raw { display:block; }
iframe.body { display:block; width:100%; height:70vh; min-height:300px; border:0; background:#fff; border-radius:0 8px 8px 8px; resize:vertical; }
pre { margin:0; padding:14px 16px; white-space:pre-wrap; word-break:break-word; font:12.5px/1.5 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; }
.note { padding:8px 16px; font-size:12.5px; color:var(--warn); background:var(--warnbg); border-bottom:1px solid var(--line); }
.panel .none { padding:20px 16px; color:var(--muted); }
table.headers { width:100%; border-collapse:collapse; font-size:13px; }
table.headers td { padding:5px 16px; border-bottom:1px solid var(--line); vertical-align:top; word-break:break-word; }
table.headers td.name { white-space:nowrap; color:var(--muted); width:1%; font-weight:550; }
table.headers tr:last-child td { border-bottom:0; }
ul.atts { list-style:none; margin:0; padding:0; } ul.atts li { padding:6px 0; border-bottom:1px solid var(--line); display:flex; gap:10px; align-items:baseline; flex-wrap:wrap; }
ul.atts li:last-child { border-bottom:0; }
.actions { display:flex; gap:8px; flex-wrap:wrap; }
`;

function layout(title: string, nonce: string, body: string, script = "", bodyAttrs = ""): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(title)}</title>
<link rel="icon" href="data:,">
<style>${STYLE}</style>
</head>
<body${bodyAttrs}>
${body}
${script ? `<script nonce="${escapeHtml(nonce)}">${script}</script>` : ""}
</body>
</html>
`;
}

function topBar(extra: string): string {
  return `<header class="top"><a class="brand" href="/">tern <span>dev mailbox</span></a>${extra}</header>`;
}

// Relative times, and a light poll that reloads the list when the mailbox changes.
const LIST_SCRIPT = `
(function () {
  function rel(iso) {
    var s = Math.round((Date.now() - Date.parse(iso)) / 1000);
    if (s < 45) return "just now";
    if (s < 3600) return Math.round(s / 60) + " min ago";
    if (s < 86400) return Math.round(s / 3600) + " h ago";
    return new Date(iso).toLocaleString();
  }
  function tick() {
    document.querySelectorAll("td.when time").forEach(function (t) { t.textContent = rel(t.getAttribute("datetime")); });
  }
  tick(); setInterval(tick, 15000);
  var state = document.body.getAttribute("data-state") || "";
  var query = location.search;
  setInterval(function () {
    if (document.hidden) return;
    fetch("/api/messages" + query, { cache: "no-store" }).then(function (r) { return r.json(); }).then(function (list) {
      var next = list.data.map(function (m) { return m.id; }).join(",");
      if (next !== state) location.reload();
    }).catch(function () {});
  }, 2000);
  var del = document.getElementById("delete-all");
  if (del) del.addEventListener("click", function () {
    if (!confirm(del.getAttribute("data-confirm"))) return;
    fetch("/api/messages" + query, { method: "DELETE" }).then(function () { location.reload(); });
  });
})();
`;

const MESSAGE_SCRIPT = `
(function () {
  var del = document.getElementById("delete-one");
  if (del) del.addEventListener("click", function () {
    if (!confirm("Delete this message?")) return;
    fetch("/api/messages/" + encodeURIComponent(del.getAttribute("data-id")), { method: "DELETE" })
      .then(function () { location.href = "/"; });
  });
  document.querySelectorAll("time").forEach(function (t) {
    t.textContent = new Date(t.getAttribute("datetime")).toLocaleString();
  });
})();
`;

export interface MailboxPageInput {
  messages: MessageSummary[];
  filterTo: string | null;
  smtpAddress: string;
  mailDir: string;
  nonce: string;
}

export function renderMailboxPage(input: MailboxPageInput): string {
  const { messages, filterTo, nonce } = input;
  const count = `${messages.length} message${messages.length === 1 ? "" : "s"}`;
  const bar = topBar(`
  <form class="filter" method="get" action="/">
    <input type="search" name="to" placeholder="Filter by envelope recipient" value="${escapeHtml(filterTo ?? "")}">
    <button type="submit">Filter</button>${filterTo ? ` <a class="button" href="/">Clear</a>` : ""}
  </form>
  <span class="spacer"></span>
  <span class="meta">${escapeHtml(count)} · SMTP ${escapeHtml(input.smtpAddress)} · <a href="/api/messages">API</a></span>
  ${messages.length ? `<button class="danger" id="delete-all" type="button" data-confirm="${escapeHtml(filterTo ? `Delete the ${count} sent to ${filterTo}?` : `Delete all ${count}?`)}">${filterTo ? "Delete shown" : "Delete all"}</button>` : ""}`);

  let content: string;
  if (!messages.length) {
    content = `<div class="empty">${
      filterTo
        ? `No messages for <strong>${escapeHtml(filterTo)}</strong>.`
        : `No messages yet.<br><br>Send something to <code>smtp://${escapeHtml(input.smtpAddress)}</code>: it shows up here and in <code>${escapeHtml(input.mailDir)}</code>.`
    }</div>`;
  } else {
    const rows = messages
      .map((m) => {
        const envelopeOnly = envelopeOnlyRecipients(m);
        const to = m.to.length ? m.to.join(", ") : m.envelope.to.join(", ");
        return `<tr>
<td class="addr" title="${escapeHtml(m.from)}">${escapeHtml(m.from || m.envelope.from || "(none)")}</td>
<td class="addr" title="${escapeHtml(m.envelope.to.join(", "))}">${escapeHtml(to)}${
          envelopeOnly.length ? `<span class="badge" title="${escapeHtml(`Envelope only: ${envelopeOnly.join(", ")}`)}">+${envelopeOnly.length} bcc</span>` : ""
        }</td>
<td class="subject"><a href="/messages/${encodeURIComponent(m.id)}">${m.subject ? escapeHtml(m.subject) : `<span class="muted">(no subject)</span>`}</a>${
          m.attachmentCount ? `<span class="badge" title="Attachments">📎 ${m.attachmentCount}</span>` : ""
        }</td>
<td class="when">${time(m.receivedAt)}</td>
<td class="size">${escapeHtml(formatSize(m.size))}</td>
</tr>`;
      })
      .join("\n");
    content = `<table class="list">
<thead><tr><th>From</th><th>To</th><th>Subject</th><th>Received</th><th class="size">Size</th></tr></thead>
<tbody>
${rows}
</tbody>
</table>`;
  }
  const state = messages.map((m) => m.id).join(",");
  return layout(
    `${filterTo ? `${filterTo} · ` : ""}${count} · tern dev mailbox`,
    nonce,
    `${bar}\n<main>${content}</main>`,
    LIST_SCRIPT,
    ` data-state="${escapeHtml(state)}"`,
  );
}

/** Envelope recipients that no To/Cc header names: Bcc, as the relay saw it. */
export function envelopeOnlyRecipients(m: Pick<MessageSummary, "to" | "cc" | "envelope">): string[] {
  const visible = new Set([...m.to, ...m.cc].map((a) => a.toLowerCase()));
  return m.envelope.to.filter((a) => !visible.has(a.toLowerCase()));
}

function countRemoteReferences(html: string): number {
  const matches = html.match(/(?:\b(?:src|background|poster|href)\s*=\s*["']?\s*(?:https?:)?\/\/)|(?:url\(\s*["']?\s*(?:https?:)?\/\/)/gi);
  return matches ? matches.length : 0;
}

export interface MessagePageInput {
  message: MessageDetail;
  /** The HTML body with cid: references resolved to data: URIs, for the preview. */
  previewHtml: string | null;
  raw: string;
  rawTruncated: boolean;
  nonce: string;
}

export function renderMessagePage(input: MessagePageInput): string {
  const { message: m, previewHtml, nonce } = input;
  const idPath = `/messages/${encodeURIComponent(m.id)}`;
  const envelopeOnly = new Set(envelopeOnlyRecipients(m).map((a) => a.toLowerCase()));
  const header = (name: string) => m.headers[name];

  const summaryRows: Array<[string, string]> = [];
  summaryRows.push(["From", escapeHtml(header("from") ?? "")]);
  if (header("to") !== undefined) summaryRows.push(["To", escapeHtml(header("to"))]);
  if (header("cc") !== undefined) summaryRows.push(["Cc", escapeHtml(header("cc"))]);
  if (header("reply-to") !== undefined) summaryRows.push(["Reply-To", escapeHtml(header("reply-to"))]);
  summaryRows.push(["Date", m.date ? time(m.date) : `<span class="muted">${escapeHtml(header("date") ?? "(none)")}</span>`]);
  if (m.messageId) summaryRows.push(["Message-ID", escapeHtml(m.messageId)]);

  const rcpts = m.envelope.to
    .map(
      (a) =>
        `<li>${escapeHtml(a)}${envelopeOnly.has(a.toLowerCase()) ? ` <span class="badge warn" title="In the envelope but in no To/Cc header">envelope only (bcc)</span>` : ""}</li>`,
    )
    .join("");
  const envelope = `<dl class="kv">
<dt>MAIL FROM</dt><dd>${m.envelope.from ? escapeHtml(`<${m.envelope.from}>`) : `<span class="muted">&lt;&gt; (null sender)</span>`}</dd>
<dt>RCPT TO</dt><dd><ul class="rcpt">${rcpts || `<li class="muted">(none)</li>`}</ul></dd>
<dt>Received</dt><dd>${time(m.receivedAt)}</dd>
${m.client ? `<dt>Client</dt><dd>${escapeHtml(m.client.address)}${m.client.helo ? ` <span class="muted">(HELO ${escapeHtml(m.client.helo)})</span>` : ""}</dd>` : ""}
<dt>Size</dt><dd>${escapeHtml(formatSize(m.size))} <span class="muted">(${m.size} bytes)</span></dd>
</dl>`;

  const attachments = m.attachments.length
    ? `<ul class="atts">${m.attachments.map((a) => attachmentItem(idPath, a)).join("")}</ul>`
    : `<span class="muted">None</span>`;

  const hasHtml = previewHtml !== null;
  const remote = hasHtml ? countRemoteReferences(previewHtml) : 0;
  const htmlPanel = hasHtml
    ? `${remote ? `<div class="note">Remote content is blocked in this preview (${remote} remote reference${remote === 1 ? "" : "s"}).</div>` : ""}<iframe class="body" sandbox="" referrerpolicy="no-referrer" title="HTML body" srcdoc="${escapeHtml(previewHtml)}"></iframe>`
    : `<div class="none">This message has no HTML part.</div>`;
  const textPanel = m.text !== null ? `<pre>${escapeHtml(m.text)}</pre>` : `<div class="none">This message has no text part.</div>`;
  const headersPanel = `<table class="headers"><tbody>${m.headerLines
    .map((h) => `<tr><td class="name">${escapeHtml(h.name)}</td><td>${escapeHtml(h.decoded)}</td></tr>`)
    .join("")}</tbody></table>`;
  const rawPanel = `${input.rawTruncated ? `<div class="note">Source truncated here: <a href="${idPath}/raw">open the full source</a>.</div>` : ""}<pre>${escapeHtml(input.raw)}</pre>`;
  const first = hasHtml ? "html" : "text";
  const tab = (name: string, label: string) =>
    `<input type="radio" name="tab" id="tab-${name}"${name === first ? " checked" : ""}><label for="tab-${name}">${label}</label>`;

  const body = `${topBar(`<a href="/">← Mailbox</a><span class="spacer"></span>
<span class="actions"><a class="button" href="${idPath}/raw">Raw source</a><a class="button" href="${idPath}/raw?download=1">Download .eml</a><a class="button" href="/api/messages/${encodeURIComponent(m.id)}">JSON</a><button class="danger" type="button" id="delete-one" data-id="${escapeHtml(m.id)}">Delete</button></span>`)}
<main>
<h1>${m.subject ? escapeHtml(m.subject) : `<span class="muted">(no subject)</span>`}</h1>
<div class="grid">
<section class="card"><dl class="kv">${summaryRows.map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${v}</dd>`).join("")}</dl></section>
<section class="card"><h2 style="margin-top:0">Envelope</h2>${envelope}</section>
</div>
<h2>Attachments (${m.attachments.length})</h2>
<section class="card">${attachments}</section>
<div class="tabs">
${tab("html", "HTML")}${tab("text", "Text")}${tab("headers", `Headers (${m.headerLines.length})`)}${tab("raw", "Raw")}
<div class="panel html">${htmlPanel}</div>
<div class="panel text">${textPanel}</div>
<div class="panel headers">${headersPanel}</div>
<div class="panel raw">${rawPanel}</div>
</div>
</main>`;
  return layout(`${m.subject || "(no subject)"} · tern dev mailbox`, nonce, body, MESSAGE_SCRIPT);
}

function attachmentItem(idPath: string, a: AttachmentInfo): string {
  const name = a.filename ?? `attachment-${a.index}`;
  return `<li><a href="${idPath}/attachments/${a.index}">${escapeHtml(name)}</a>
<span class="muted">${escapeHtml(a.contentType)} · ${escapeHtml(formatSize(a.size))}${a.contentId ? ` · cid:${escapeHtml(a.contentId)}` : ""}${a.disposition ? ` · ${escapeHtml(a.disposition)}` : ""}</span>
<span class="muted" title="SHA-256">${escapeHtml(a.sha256.slice(0, 16))}…</span></li>`;
}

export function renderNotFoundPage(nonce: string, what: string): string {
  return layout(
    "Not found · tern dev mailbox",
    nonce,
    `${topBar(`<a href="/">← Mailbox</a>`)}<main><div class="empty">${escapeHtml(what)}</div></main>`,
  );
}
