// @ts-check
// The dashboard's only script before a page is usable (a few KB): forms marked data-api post
// JSON to the dashboard's endpoints with the CSRF token, show errors in place and follow the
// answer; copy buttons. Pages work as server-rendered HTML; this adds the calls.
const csrf = document.querySelector('meta[name="csrf-token"]')?.getAttribute("content") ?? "";

/** @param {HTMLFormElement} form */
function formJson(form) {
  /** @type {Record<string, unknown>} */
  const out = {};
  for (const el of /** @type {any[]} */ ([...form.elements])) {
    if (!el.name || el.disabled) continue;
    if (el.type === "checkbox") {
      if (el.dataset.list !== undefined) {
        const list = /** @type {string[]} */ (out[el.name] ??= []);
        if (el.checked) list.push(el.value);
      } else out[el.name] = el.checked;
    } else if (el.type === "radio") {
      if (el.checked) out[el.name] = el.value;
    } else if (el.value !== "" || el.dataset.keepEmpty !== undefined) {
      out[el.name] = el.type === "number" ? Number(el.value) : el.value;
    }
  }
  return out;
}

/** Shows `message` at the top of `where` (a form, or a box around a button), in place of the
 * last one. The pages' other scripts import it. @param {HTMLElement} where @param {string} message */
export function showError(where, message) {
  let box = where.querySelector("[data-error]");
  if (!box) {
    box = document.createElement("p");
    box.setAttribute("data-error", "");
    box.setAttribute("role", "alert");
    box.className = "error";
    where.prepend(box);
  }
  box.textContent = message;
}

document.addEventListener("submit", async (event) => {
  const form = /** @type {HTMLFormElement} */ (event.target);
  const url = form.dataset.api;
  if (!url) return;
  event.preventDefault();
  if (form.dataset.confirm && !confirm(form.dataset.confirm)) return;
  const button = form.querySelector("button[type=submit], button:not([type])");
  if (button) button.setAttribute("disabled", "");
  try {
    const res = await fetch(url, {
      method: form.dataset.method ?? "POST",
      headers: { "content-type": "application/json", "x-csrf-token": csrf, accept: "application/json" },
      body: JSON.stringify(formJson(form)),
      credentials: "same-origin",
    });
    const text = await res.text();
    /** @type {any} */
    let data = {};
    try { data = text ? JSON.parse(text) : {}; } catch { data = { message: text }; }
    if (!res.ok) {
      const msg = data.message ?? data.error?.message ?? (res.status === 429 ? "Too many attempts. Wait a few minutes and try again." : `The request failed (${res.status}).`);
      showError(form, msg);
      return;
    }
    if (data.twoFactorRedirect) return void (location.href = "/dashboard/sign-in/two-factor");
    const show = form.dataset.show && document.getElementById(form.dataset.show);
    if (show) {
      for (const el of show.querySelectorAll("[data-field]")) {
        let v = data[/** @type {string} */ (el.getAttribute("data-field"))];
        // data-param="secret": one parameter of the URL the field holds (the authenticator
        // link's key, for an app that takes it typed in).
        const param = el.getAttribute("data-param");
        if (param) { try { v = new URL(String(v)).searchParams.get(param) ?? ""; } catch { v = ""; } }
        if (el instanceof HTMLInputElement) {
          el.value = Array.isArray(v) ? v.join(" ") : String(v ?? "");
        }
        else if (el instanceof HTMLImageElement) el.src = String(v ?? "");
        // A list of sentences (what a setup did, record by record): one item each.
        else if (el instanceof HTMLUListElement) el.replaceChildren(...(Array.isArray(v) ? v : [v]).map((t) => Object.assign(document.createElement("li"), { textContent: String(t ?? "") })));
        else el.textContent = Array.isArray(v) ? v.join("\n") : String(v ?? "");
      }
      show.hidden = false;
      // The caret at the start (once shown: a hidden field may not keep it), so a value wider
      // than its field shows its beginning.
      for (const el of show.querySelectorAll("input[data-field]")) if (el instanceof HTMLInputElement && el.type === "text") { el.setSelectionRange(0, 0); el.scrollLeft = 0; }
      form.hidden = form.dataset.hide !== undefined;
      // data-stale="id": a list the answer made out of date (it lacks the new key), hidden until
      // "Done" reloads the page, so it cannot say "No webhook endpoints." under the new one.
      if (form.dataset.stale) document.getElementById(form.dataset.stale)?.setAttribute("hidden", "");
      show.querySelector("input,button,a")?.focus();
      return;
    }
    if (data.url && data.redirect && !form.dataset.then) return void (location.href = data.url);
    // What the answer says happened (an invitation renewed, a check that could not reach DNS)
    // is shown on the page that loads next.
    if (typeof data.notice === "string") sessionStorage.setItem("tern-notice", data.notice);
    // data-then="/dashboard/domains/{id}": the new thing's page, from the answer's fields.
    const then = form.dataset.then?.replace(/\{(\w+)\}/g, (_, k) => encodeURIComponent(String(data[k] ?? "")));
    if (then === "reload" || !then) location.reload();
    else location.href = then;
  } catch (err) {
    showError(form, "The dashboard could not be reached. Check your connection and try again.");
  } finally {
    if (button) button.removeAttribute("disabled");
  }
});

// A copy button: data-copy holds the value, or data-copy-from names the field that does (a secret
// the page shows once, filled in from the answer).
document.addEventListener("click", async (event) => {
  const button = /** @type {HTMLElement} */ (event.target).closest("[data-copy], [data-copy-from]");
  if (!button) return;
  const from = button.getAttribute("data-copy-from");
  const field = from ? document.getElementById(from) : null;
  const value = field instanceof HTMLInputElement ? field.value : field ? field.textContent ?? "" : button.getAttribute("data-copy") ?? "";
  try {
    await navigator.clipboard.writeText(value);
    const before = button.textContent;
    button.textContent = "Copied";
    setTimeout(() => (button.textContent = before), 1500);
  } catch {
    prompt("Copy this value:", value);
  }
});

// A download button: data-download-from names the element whose text is saved, as data-filename.
document.addEventListener("click", (event) => {
  const button = /** @type {HTMLElement} */ (event.target).closest("[data-download-from]");
  if (!button) return;
  const field = document.getElementById(button.getAttribute("data-download-from") ?? "");
  const text = field instanceof HTMLInputElement ? field.value : field?.textContent ?? "";
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([text.endsWith("\n") ? text : text + "\n"], { type: "text/plain" }));
  link.download = button.getAttribute("data-filename") ?? "download.txt";
  link.click();
  setTimeout(() => URL.revokeObjectURL(link.href), 1000);
});

// A "select all" checkbox (data-select-all) checks or clears the other boxes of its fieldset, and
// shows their state: checked when all are, mixed when some are.
/** @param {HTMLFieldSetElement} group */
function syncSelectAll(group) {
  const all = /** @type {HTMLInputElement | null} */ (group.querySelector("input[data-select-all]"));
  if (!all) return;
  const boxes = /** @type {HTMLInputElement[]} */ ([...group.querySelectorAll("input[type=checkbox]:not([data-select-all])")]);
  const on = boxes.filter((b) => b.checked).length;
  all.checked = on === boxes.length;
  all.indeterminate = on > 0 && on < boxes.length;
}
document.addEventListener("change", (event) => {
  const box = /** @type {HTMLElement} */ (event.target);
  const group = box.closest("fieldset");
  if (!(box instanceof HTMLInputElement) || !group || !group.querySelector("input[data-select-all]")) return;
  if (box.dataset.selectAll !== undefined) {
    for (const b of /** @type {NodeListOf<HTMLInputElement>} */ (group.querySelectorAll("input[type=checkbox]:not([data-select-all])"))) b.checked = box.checked;
  }
  syncSelectAll(/** @type {HTMLFieldSetElement} */ (group));
});
for (const group of document.querySelectorAll("fieldset")) if (group.querySelector("input[data-select-all]")) syncSelectAll(/** @type {HTMLFieldSetElement} */ (group));
// On a phone the navigation is one row that scrolls sideways: bring the current page's link into
// it (scrollLeft only, so a page opened at an #anchor stays there).
const navLinks = document.querySelector("nav.side .nav-links");
const here = navLinks?.querySelector("[aria-current]");
if (navLinks && here && navLinks.scrollWidth > navLinks.clientWidth) {
  const offset = here.getBoundingClientRect().left - navLinks.getBoundingClientRect().left;
  navLinks.scrollLeft += offset - (navLinks.clientWidth - here.getBoundingClientRect().width) / 2;
}
// The notice an action left for this page (see the submit handler), shown once at the top.
const notice = sessionStorage.getItem("tern-notice");
if (notice) {
  sessionStorage.removeItem("tern-notice");
  const main = document.getElementById("main");
  if (main) {
    const p = document.createElement("p");
    p.className = "notice";
    p.setAttribute("role", "status");
    p.textContent = notice;
    const h1 = main.querySelector("h1");
    if (h1) h1.after(p);
    else main.prepend(p);
  }
}
