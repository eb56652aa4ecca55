// @ts-check
// The CSV import form: sends the chosen file's first 64 KB to the dashboard, which reads its
// header row by the upload's own rules (refusing a binary or non-UTF-8 file with what to do), to
// offer its columns (guessing the usual names); then uploads the file with the column map as the
// API's multipart form (POST /contacts/imports has the same fields). Only on the import page.
import { showError } from "./app.js";
const csrf = document.querySelector('meta[name="csrf-token"]')?.getAttribute("content") ?? "";
const form = /** @type {HTMLFormElement | null} */ (document.querySelector("form[data-import]"));

/** @param {string} s */
const norm = (s) => s.toLowerCase().replace(/[^a-z0-9]/g, "");
/** @type {Record<string, string[]>} */
const GUESSES = {
  email: ["email", "emailaddress", "mail", "address"],
  first_name: ["firstname", "first", "givenname"],
  last_name: ["lastname", "last", "surname", "familyname"],
  unsubscribed: ["unsubscribed", "unsubscribe", "optedout", "optout"],
};

const HEAD = 65536;


if (form) {
  const file = /** @type {HTMLInputElement} */ (form.querySelector('input[type="file"]'));
  const selects = () => /** @type {HTMLSelectElement[]} */ ([...form.querySelectorAll("select[data-column], select[data-property]")]);

  /** Back to "choose a file first", as when the page loaded. */
  const resetColumns = () => {
    for (const select of selects()) {
      select.replaceChildren(new Option("choose a file first", ""));
      select.disabled = true;
    }
  };

  file.addEventListener("change", async () => {
    const chosen = file.files?.[0];
    if (!chosen) return;
    const head = new FormData();
    head.set("file", chosen.slice(0, HEAD), chosen.name);
    if (chosen.size > HEAD) head.set("partial", "1");
    /** @type {string[]} */
    let columns;
    try {
      const res = await fetch(form.dataset.inspect ?? "", { method: "POST", body: head, headers: { "x-csrf-token": csrf, accept: "application/json" }, credentials: "same-origin" });
      const body = await res.json().catch(() => ({}));
      if (!res.ok) {
        resetColumns();
        return showError(form, body.message ?? `The file could not be read (${res.status}).`);
      }
      columns = body.columns;
    } catch {
      return showError(form, "The dashboard could not be reached. Check your connection and try again.");
    }
    form.querySelector("[data-error]")?.remove();
    for (const select of selects()) {
      const field = select.dataset.column ?? select.dataset.property ?? "";
      const guesses = GUESSES[field] ?? [norm(field)];
      select.replaceChildren(new Option(select.dataset.column === "email" ? "choose the column" : "not in the file", ""));
      for (const c of columns) select.add(new Option(c, c));
      const guess = columns.find((c) => guesses.includes(norm(c)));
      if (guess) select.value = guess;
      select.disabled = false;
    }
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const chosen = file.files?.[0];
    if (!chosen) return showError(form, "Choose a CSV file first.");
    /** @type {Record<string, unknown>} */
    const map = {};
    /** @type {Record<string, {column: string, type: string}>} */
    const properties = {};
    for (const select of selects()) {
      if (!select.value) continue;
      if (select.dataset.column) map[select.dataset.column] = select.value;
      else if (select.dataset.property) properties[select.dataset.property] = { column: select.value, type: select.dataset.type ?? "string" };
    }
    if (!map.email) return showError(form, "Say which column holds the email addresses.");
    if (Object.keys(properties).length) map.properties = properties;
    const segments = [...form.querySelectorAll('input[name="segments"]:checked')].map((el) => /** @type {HTMLInputElement} */ (el).value);
    const topics = [...form.querySelectorAll("select[data-topic]")]
      .map((el) => /** @type {HTMLSelectElement} */ (el))
      .filter((el) => el.value)
      .map((el) => ({ id: el.dataset.topic, subscription: el.value }));
    const data = new FormData();
    data.set("file", chosen);
    data.set("column_map", JSON.stringify(map));
    data.set("on_conflict", /** @type {HTMLSelectElement} */ (form.elements.namedItem("on_conflict")).value);
    data.set("segments", JSON.stringify(segments));
    data.set("topics", JSON.stringify(topics));
    const button = form.querySelector("button[type=submit]");
    button?.setAttribute("disabled", "");
    try {
      const res = await fetch(form.dataset.import ?? "", { method: "POST", body: data, headers: { "x-csrf-token": csrf, accept: "application/json" }, credentials: "same-origin" });
      const body = await res.json().catch(() => ({}));
      if (!res.ok) return showError(form, body.message ?? `The upload failed (${res.status}).`);
      location.reload();
    } catch {
      showError(form, "The dashboard could not be reached. Check your connection and try again.");
    } finally {
      button?.removeAttribute("disabled");
    }
  });
}
