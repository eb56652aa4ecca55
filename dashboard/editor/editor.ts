// The dashboard's block editor for broadcasts and templates, on TipTap (ProseMirror) without a
// UI framework: headings, formatted text and links, lists, buttons, images (uploaded to tern or
// by URL), dividers, two-column sections and variables. The page's markup (toolbar, dialogs,
// actions) is server-rendered with labels; this wires it. The document is saved as TipTap's
// JSON; the Worker renders the email's html and text from it (worker/broadcasts/document.ts),
// so previews, tests and sends all show what the server made.
// Bundled by dev/build-editor.ts into assets/editor/, loaded only on the editor's pages.
import { Editor, Extension, Node, getText, getTextSerializersFromSchema, mergeAttributes, type JSONContent } from "@tiptap/core";
import Image from "@tiptap/extension-image";
import StarterKit from "@tiptap/starter-kit";
import { Placeholder, UndoRedo } from "@tiptap/extensions";
import { NodeSelection, Plugin } from "@tiptap/pm/state";
import type { Node as PMNode } from "@tiptap/pm/model";
import { PLACEHOLDER, placeholderParts, placeholderText, variableLabel } from "../../worker/templates/variables.ts";
import { formatBytes } from "../../worker/media/sizes.ts";

interface Variable { key: string; label: string; fallback: string }
/** A body written outside the editor (through the API): kept until the person chooses otherwise. */
interface ApiBody { html: string | null; text: string | null }
interface PageData { kind: "broadcast" | "template"; id: string; document: JSONContent; variables: Variable[]; apiBody: ApiBody | null }

const data = JSON.parse(document.getElementById("editor-data")!.textContent!) as PageData;
const csrf = document.querySelector('meta[name="csrf-token"]')?.getAttribute("content") ?? "";
const base = `/dashboard/api/${data.kind}s/${data.id}`;
const $ = <T extends Element = HTMLElement>(sel: string, root: ParentNode = document) => root.querySelector(sel) as T;
const UNSUBSCRIBE = "{{{RESEND_UNSUBSCRIBE_URL}}}";
/** A whole value that is one placeholder (a link or image to be filled per contact). */
const WHOLE_PLACEHOLDER = new RegExp(`^${PLACEHOLDER.source}$`);
const labels = new Map(data.variables.map((v) => [v.key, v.label]));

/** Text in Resend's syntax as inline content: text, and a variable node for each placeholder. */
function inlineContent(source: string): JSONContent[] {
  return placeholderParts(source).map((p) => ("text" in p ? { type: "text", text: p.text } : { type: "variable", attrs: { key: p.key, fallback: p.fallback } }));
}

// ---- nodes the email has beyond the starter kit ---------------------------------------------

/** Alignment of paragraphs and headings (one attribute, no extra package). */
const TextAlign = Extension.create({
  name: "textAlign",
  addGlobalAttributes() {
    return [{
      types: ["paragraph", "heading"],
      attributes: {
        textAlign: {
          default: null,
          parseHTML: (el) => (el as HTMLElement).style.textAlign || null,
          renderHTML: (a) => (a.textAlign ? { style: `text-align:${a.textAlign}` } : {}),
        },
      },
    }];
  },
});

/** A call-to-action button: its label, link and colour, edited in a dialog. */
const EmailButton = Node.create({
  name: "button",
  group: "block",
  atom: true,
  selectable: true,
  draggable: true,
  addAttributes() {
    const plain = (d: string) => ({ default: d, renderHTML: () => ({}) });
    return { href: plain(""), label: plain("Button"), color: plain("#2563eb") };
  },
  parseHTML: () => [{ tag: "div[data-email-button]" }],
  renderHTML({ node }) {
    const color = /^#[0-9a-f]{6}$/i.test(node.attrs.color) ? node.attrs.color : "#2563eb";
    return ["div", { "data-email-button": "", class: "email-button-block", title: node.attrs.href || "No link yet" },
      ["span", { class: "email-button", style: `background:${color}` }, node.attrs.label || "Button"]];
  },
});

const Columns = Node.create({
  name: "columns",
  group: "block",
  content: "column column",
  isolating: true,
  parseHTML: () => [{ tag: "div[data-columns]" }],
  renderHTML: ({ HTMLAttributes }) => ["div", mergeAttributes(HTMLAttributes, { "data-columns": "", class: "email-columns" }), 0],
});

const Column = Node.create({
  name: "column",
  content: "block+",
  isolating: true,
  parseHTML: () => [{ tag: "div[data-column]" }],
  renderHTML: ({ HTMLAttributes }) => ["div", mergeAttributes(HTMLAttributes, { "data-column": "", class: "email-column" }), 0],
});

/** {{{KEY|fallback}}}, shown as a chip with the variable's name. */
const VariableNode = Node.create({
  name: "variable",
  group: "inline",
  inline: true,
  atom: true,
  selectable: true,
  addAttributes() {
    // Read back from the chip's own markup, so a chip copied and pasted keeps its key.
    return {
      key: { default: "FIRST_NAME", parseHTML: (el) => el.getAttribute("data-variable"), renderHTML: () => ({}) },
      fallback: { default: "", parseHTML: (el) => el.getAttribute("data-fallback") ?? "", renderHTML: () => ({}) },
    };
  },
  parseHTML: () => [{ tag: "span[data-variable]" }],
  renderHTML({ node }) {
    const name = labels.get(node.attrs.key) ?? node.attrs.key;
    return ["span", { "data-variable": node.attrs.key, "data-fallback": node.attrs.fallback, class: "variable-chip", title: placeholderText(node.attrs.key, node.attrs.fallback) },
      variableLabel(name, node.attrs.fallback)];
  },
  renderText: ({ node }) => placeholderText(node.attrs.key, node.attrs.fallback),
});

const EmailImage = Image.extend({
  addAttributes() {
    return { ...this.parent?.(), href: { default: null, renderHTML: () => ({}) } };
  },
});

// ---- the editor ------------------------------------------------------------------------------

const content = $("#editor-content");
const editor = new Editor({
  element: content,
  extensions: [
    StarterKit.configure({
      heading: { levels: [1, 2, 3] },
      codeBlock: false,
      code: false,
      link: {
        openOnClick: false,
        autolink: true,
        defaultProtocol: "https",
        protocols: ["http", "https", "mailto", "tel"],
        // A placeholder ({{{RESEND_UNSUBSCRIBE_URL}}}, a property holding a URL) is a link too.
        isAllowedUri: (url, ctx) => WHOLE_PLACEHOLDER.test(url) || ctx.defaultValidate(url),
      },
    }),
    // What to type where, in empty blocks: a non-programmer sees where the heading goes.
    Placeholder.configure({
      includeChildren: true,
      placeholder: ({ node }) => (node.type.name === "heading" ? "Heading" : "Write your message, or add a button, image or columns from the toolbar…"),
    }),
    TextAlign,
    EmailButton,
    Columns,
    Column,
    VariableNode,
    EmailImage.configure({ inline: false, allowBase64: false }),
  ],
  content: data.document,
  editorProps: {
    attributes: { class: "email-canvas", role: "textbox", "aria-multiline": "true", "aria-label": "Email content", spellcheck: "true" },
    handleKeyDown(view, event) {
      const sel = view.state.selection;
      if (event.key === "Enter" && sel instanceof NodeSelection && ["button", "image"].includes(sel.node.type.name)) {
        event.preventDefault();
        void (sel.node.type.name === "button" ? editButton() : editImage());
        return true;
      }
      if ((event.ctrlKey || event.metaKey) && event.key.toLowerCase() === "k") {
        event.preventDefault();
        // After the browser's pending selectionchange: the editor reads a selection made with
        // the keyboard from it, and a fast Ctrl+K could otherwise find the selection still empty.
        setTimeout(() => void editLink(), 0);
        return true;
      }
      return false;
    },
    handleDoubleClickOn(_view, _pos, node) {
      if (node.type.name !== "button" && node.type.name !== "image") return false;
      void (node.type.name === "button" ? editButton() : editImage());
      return true;
    },
    handleTextInput: (view, from, _to, text) => doubleBrace(view, from, text, () => editor),
  },
});

/** "{{" opens the variable menu, as people who know Resend's syntax expect. */
function doubleBrace(view: Editor["view"], from: number, text: string, target: () => Editor): boolean {
  if (text !== "{" || from === 0 || view.state.doc.textBetween(from - 1, from) !== "{") return false;
  view.dispatch(view.state.tr.delete(from - 1, from));
  void insertVariable(target());
  return true;
}

// ---- dialogs ---------------------------------------------------------------------------------

type Values = Record<string, string>;

function showDialogError(dialog: HTMLDialogElement, message: string | null) {
  const box = $("[data-dialog-error]", dialog);
  box.textContent = message ?? "";
  box.hidden = !message;
}

/** Opens a dialog with `initial` values; resolves with the button pressed and the values, or
 * null when cancelled. `check` may refuse the values with a message shown in the dialog. */
function ask(id: string, initial: Values, check?: (v: Values, action: string) => string | null | Promise<string | null>, returnTo: Editor = editor): Promise<{ action: string; values: Values } | null> {
  const dialog = document.getElementById(id) as HTMLDialogElement;
  const form = $<HTMLFormElement>("form", dialog);
  form.reset();
  for (const [k, v] of Object.entries(initial)) {
    const el = form.elements.namedItem(k);
    if (el instanceof HTMLInputElement || el instanceof HTMLSelectElement) el.value = v;
  }
  showDialogError(dialog, null);
  dialog.dispatchEvent(new Event("dialog-open"));
  return new Promise((resolve) => {
    const onSubmit = async (e: SubmitEvent) => {
      const action = (e.submitter as HTMLButtonElement | null)?.value ?? "ok";
      if (action === "cancel") return;
      e.preventDefault();
      const values: Values = {};
      for (const el of Array.from(form.elements) as HTMLInputElement[]) if (el.name && el.type !== "file") values[el.name] = el.value.trim();
      const problem = check ? await check(values, action) : null;
      if (problem) return showDialogError(dialog, problem);
      finish({ action, values });
      dialog.close();
    };
    const onClose = () => finish(null);
    let done = false;
    const finish = (r: { action: string; values: Values } | null) => {
      if (done) return;
      done = true;
      form.removeEventListener("submit", onSubmit);
      dialog.removeEventListener("close", onClose);
      resolve(r);
      returnTo.commands.focus();
    };
    form.addEventListener("submit", onSubmit);
    dialog.addEventListener("close", onClose);
    dialog.showModal();
  });
}

function normalUrl(s: string): string {
  if (!s || WHOLE_PLACEHOLDER.test(s) || /^(https?:|mailto:|tel:)/i.test(s)) return s;
  return s.includes("@") && !s.includes("/") ? `mailto:${s}` : `https://${s}`;
}
function badUrl(s: string, required: boolean): string | null {
  if (!s) return required ? "Enter the address it should open, like https://example.com/page." : null;
  if (WHOLE_PLACEHOLDER.test(s)) return null;
  try {
    const u = new URL(normalUrl(s));
    return ["http:", "https:", "mailto:", "tel:"].includes(u.protocol) ? null : "Use a web address (https://…), an email address or a phone number.";
  } catch {
    return "That is not a web address. Write it like https://example.com/page.";
  }
}

async function editLink() {
  const current = editor.getAttributes("link").href as string | undefined;
  if (editor.state.selection.empty && !current) {
    showError("Select the words to link first, then choose Link.");
    return;
  }
  const r = await ask("dlg-link", { href: current ?? "" }, (v, action) => (action === "remove" ? null : badUrl(v.href!, true)));
  if (!r) return;
  const chain = editor.chain().focus().extendMarkRange("link");
  if (r.action === "remove") chain.unsetLink().run();
  else chain.setLink({ href: normalUrl(r.values.href!) }).run();
}

async function editButton() {
  const sel = editor.state.selection;
  const existing = sel instanceof NodeSelection && sel.node.type.name === "button" ? sel.node : null;
  const r = await ask("dlg-button", { label: existing?.attrs.label ?? "", href: existing?.attrs.href ?? "", color: existing?.attrs.color ?? "#2563eb" },
    (v) => (!v.label ? "Give the button a text, like “Read more”." : badUrl(v.href!, true)));
  if (!r) return;
  const attrs = { label: r.values.label, href: normalUrl(r.values.href!), color: r.values.color };
  if (existing) editor.chain().focus().updateAttributes("button", attrs).run();
  else editor.chain().focus().insertContent([{ type: "button", attrs }, { type: "paragraph" }]).run();
}

let uploading: Promise<string | null> | null = null;
const imageDialog = document.getElementById("dlg-image") as HTMLDialogElement;
const uploadState = $("[data-upload-state]", imageDialog);
const srcInput = $<HTMLInputElement>("input[name=src]", imageDialog);
const fileInput = $<HTMLInputElement>("input[name=file]", imageDialog);
imageDialog.addEventListener("dialog-open", () => {
  uploadState.textContent = "";
  uploading = null;
  void loadPicker();
});

// ---- the picker of images uploaded before (the account's library, newest first) -------------

interface LibraryImage { id: string; url: string; name: string | null; bytes: number; created_at: string }
const pickerList = $("[data-picker-list]", imageDialog);
const pickerState = $("[data-picker-state]", imageDialog);
const pickerMore = $<HTMLButtonElement>("[data-picker-more]", imageDialog);
let pickerAfter: string | null = null;
/** Counts uploads and picks: an upload that finishes after a later choice leaves it alone. */
let uploadTurn = 0;
let pickerLoad = 0;

async function loadPicker(more = false) {
  const load = ++pickerLoad;
  if (!more) {
    pickerList.replaceChildren();
    pickerAfter = null;
  }
  pickerMore.hidden = true;
  pickerState.textContent = "Loading your uploaded images…";
  try {
    const res = await fetch(`/dashboard/api/media?limit=24${pickerAfter ? `&after=${pickerAfter}` : ""}`, { credentials: "same-origin", headers: { accept: "application/json" } });
    const body = (await res.json().catch(() => ({}))) as { data?: LibraryImage[]; has_more?: boolean; message?: string };
    if (!res.ok || !body.data) throw new Error(body.message ?? `Your uploaded images could not be loaded (${res.status}).`);
    // The dialog was opened again meanwhile: that load fills the list.
    if (load !== pickerLoad) return;
    for (const img of body.data) pickerList.append(pickerItem(img));
    pickerAfter = body.data.at(-1)?.id ?? null;
    pickerMore.hidden = !body.has_more;
    pickerState.textContent = pickerList.childElementCount ? "" : "No uploaded images yet: upload one above, and it can be picked here next time.";
  } catch (err) {
    if (load !== pickerLoad) return;
    pickerState.textContent = `${err instanceof Error ? err.message : String(err)} Upload the image or give its web address instead.`;
  }
}

function pickerItem(img: LibraryImage): HTMLLabelElement {
  const name = img.name ?? `Image uploaded ${img.created_at.slice(0, 10)}`;
  const item = document.createElement("label");
  item.className = "pick";
  item.title = name;
  const radio = document.createElement("input");
  radio.type = "radio";
  radio.name = "pick";
  radio.value = img.url;
  radio.checked = srcInput.value === img.url;
  const thumb = document.createElement("img");
  // The thumbnail (worker/media/images.ts, thumbUrl), never the full image, in the tile's box.
  thumb.src = `${img.url}?size=thumb`;
  thumb.alt = "";
  thumb.width = 92;
  thumb.height = 56;
  thumb.loading = "lazy";
  thumb.decoding = "async";
  const caption = document.createElement("span");
  caption.className = "pick-name";
  caption.textContent = name;
  const size = document.createElement("span");
  size.className = "pick-size";
  size.textContent = formatBytes(img.bytes);
  item.append(radio, thumb, caption, size);
  radio.addEventListener("change", () => {
    if (!radio.checked) return;
    srcInput.value = img.url;
    fileInput.value = "";
    uploading = null;
    uploadTurn++;
    showDialogError(imageDialog, null);
    uploadState.textContent = `Picked ${name}.`;
  });
  return item;
}

pickerMore.addEventListener("click", () => {
  // Keyboard focus stays in the list: on the first of the older images once they are in.
  const before = pickerList.childElementCount;
  void loadPicker(true).then(() => pickerList.querySelectorAll<HTMLInputElement>("input[type=radio]")[before]?.focus());
});
// An address typed or an upload chosen replaces a pick.
const unpick = () => pickerList.querySelectorAll<HTMLInputElement>("input[type=radio]").forEach((r) => (r.checked = false));
srcInput.addEventListener("input", unpick);

fileInput.addEventListener("change", (e) => {
  const file = (e.target as HTMLInputElement).files?.[0];
  if (!file) return;
  unpick();
  showDialogError(imageDialog, null);
  uploadState.textContent = `Uploading ${file.name}…`;
  const mine = ++uploadTurn;
  uploading = (async () => {
    try {
      const res = await fetch("/dashboard/api/media", { method: "POST", headers: { "x-csrf-token": csrf, "content-type": file.type || "application/octet-stream", "x-file-name": encodeURIComponent(file.name) }, body: file, credentials: "same-origin" });
      const body = (await res.json().catch(() => ({}))) as { url?: string; message?: string };
      if (!res.ok || !body.url) throw new Error(body.message ?? `The upload failed (${res.status}).`);
      // An image picked (or another file chosen) meanwhile is what the person wants now.
      if (mine !== uploadTurn) return null;
      srcInput.value = body.url;
      uploadState.textContent = `Uploaded ${file.name}.`;
      return body.url;
    } catch (err) {
      if (mine !== uploadTurn) return null;
      uploadState.textContent = "";
      showDialogError(imageDialog, err instanceof Error ? err.message : String(err));
      return null;
    }
  })();
});

async function editImage() {
  const sel = editor.state.selection;
  const existing = sel instanceof NodeSelection && sel.node.type.name === "image" ? sel.node : null;
  const r = await ask("dlg-image", { src: existing?.attrs.src ?? "", alt: existing?.attrs.alt ?? "", href: existing?.attrs.href ?? "" }, async (v) => {
    if (uploading) {
      const url = await uploading;
      if (!url) return "The upload failed; choose the file again or give its web address.";
      v.src = url;
    }
    if (!v.src) return "Upload an image or give its web address.";
    if (!/^https?:\/\//i.test(v.src)) return "An image's address starts with https://.";
    return badUrl(v.href!, false);
  });
  if (!r) return;
  const attrs = { src: r.values.src, alt: r.values.alt, href: r.values.href ? normalUrl(r.values.href) : null };
  if (existing) editor.chain().focus().updateAttributes("image", attrs).run();
  else editor.chain().focus().insertContent([{ type: "image", attrs }, { type: "paragraph" }]).run();
}

const variableDialog = document.getElementById("dlg-variable") as HTMLDialogElement;
const variableKey = $<HTMLSelectElement>("select[name=key]", variableDialog);
function syncVariableDialog() {
  const option = variableKey.selectedOptions[0];
  ($("[data-other]", variableDialog) as HTMLElement).hidden = variableKey.value !== "";
  ($("[data-fallback-field]", variableDialog) as HTMLElement).hidden = variableKey.value === "RESEND_UNSUBSCRIBE_URL";
  $<HTMLInputElement>("input[name=fallback]", variableDialog).value = option?.dataset.fallback ?? "";
}
variableKey.addEventListener("change", syncVariableDialog);
variableDialog.addEventListener("dialog-open", () => queueMicrotask(syncVariableDialog));

/** The variable menu, inserting into the body or into a one-line field (`target`). */
async function insertVariable(target: Editor) {
  // An unsubscribe link belongs in the body; a one-line field (subject, preview text) has none.
  const unsubscribe = variableKey.querySelector<HTMLOptionElement>("option[value=RESEND_UNSUBSCRIBE_URL]");
  if (unsubscribe) unsubscribe.hidden = unsubscribe.disabled = target !== editor;
  const r = await ask("dlg-variable", {}, (v) => (v.key === "" && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(v.other ?? "") ? "A key is letters, digits and underscores, like ORDER_ID." : null), target);
  if (!r) return;
  const key = r.values.key || r.values.other!;
  if (key === "RESEND_UNSUBSCRIBE_URL") {
    editor.chain().focus().insertContent([{ type: "text", text: "Unsubscribe", marks: [{ type: "link", attrs: { href: UNSUBSCRIBE } }] }, { type: "text", text: " " }]).unsetMark("link").run();
    return;
  }
  if (!labels.has(key)) labels.set(key, key);
  target.chain().focus().insertContent({ type: "variable", attrs: { key, fallback: (r.values.fallback ?? "").replace(/[{}|]/g, "") } }).run();
}

// ---- one-line fields with variables (subject, preview text) ---------------------------------

// A one-line document: one paragraph of text and variable chips, nothing else (no marks, no
// breaks). Its own tiny schema rather than the body's: a subject or a preview text has no
// formatting to offer.
const LineDoc = Node.create({ name: "doc", topNode: true, content: "paragraph" });
const LineParagraph = Node.create({ name: "paragraph", content: "inline*", parseHTML: () => [{ tag: "p" }], renderHTML: () => ["p", 0] });
const LineText = Node.create({ name: "text", group: "inline" });

/** The string form of a one-line document: its text, each chip as its placeholder. */
function lineText(doc: PMNode): string {
  return getText(doc, { blockSeparator: " ", textSerializers: getTextSerializersFromSchema(doc.type.schema) }).replace(/[\r\n]+/g, " ");
}

/** Replaces a server-rendered `<label>Subject<input name=subject data-variable-field></label>`
 * (the subject, the preview text) with the label, a one-line editor showing variables as the
 * body's chips and a "{ } Variable" button. The input stays in the form, hidden, holding the
 * string form ({{{FIRST_NAME|friend}}}) the API takes: without this script it is the field. */
function lineField(input: HTMLInputElement): Editor {
  const label = input.closest("label")!;
  const field = document.createElement("div");
  field.className = `line-field ${label.className}`.trim();
  const name = document.createElement("span");
  name.id = `${input.name}-label`;
  name.textContent = Array.from(label.childNodes).filter((n) => n.nodeType === 3 /* text */).map((n) => n.textContent).join("").trim();
  const row = document.createElement("div");
  row.className = "line-row";
  const box = document.createElement("div");
  box.className = "line-box";
  const button = document.createElement("button");
  button.type = "button";
  button.className = "secondary line-variable";
  button.title = "Insert a variable (or type {{ in the field)";
  const hidden = document.createElement("span");
  hidden.className = "sr-only";
  hidden.textContent = ` in ${name.textContent}`;
  button.append("{ } Variable", hidden);
  row.append(box, button);
  const hint = label.querySelector(".hint");
  if (hint) hint.id ||= `${input.name}-hint`;
  field.append(name, row, ...(hint ? [hint] : []));
  label.replaceWith(field);
  input.type = "hidden";
  field.append(input);

  // The input's maxlength, kept as an input keeps it: no edit makes the string form longer (a
  // paste that would is refused whole rather than cut inside a placeholder).
  const limit = input.maxLength;
  const MaxLength = Extension.create({
    name: "maxLength",
    addProseMirrorPlugins: () => limit > 0 ? [new Plugin({
      filterTransaction: (tr, state) => !tr.docChanged || lineText(tr.doc).length <= Math.max(limit, lineText(state.doc).length),
    })] : [],
  });
  let touched = false;
  const line: Editor = new Editor({
    element: box,
    extensions: [LineDoc, LineParagraph, LineText, VariableNode, UndoRedo, MaxLength],
    content: { type: "doc", content: [{ type: "paragraph", content: inlineContent(input.value) }] },
    editorProps: {
      attributes: {
        class: "line-input", role: "textbox", "aria-multiline": "false", "aria-labelledby": name.id, spellcheck: "true",
        ...(input.required ? { "aria-required": "true" } : {}),
        ...(hint ? { "aria-describedby": hint.id } : {}),
      },
      // One line: Enter (with any modifier) inserts nothing; the form has no submit to make.
      handleKeyDown: (_view, event) => event.key === "Enter",
      handleTextInput: (view, from, _to, text) => doubleBrace(view, from, text, () => line),
      // Pasted or dropped text, in Resend's syntax or not, becomes text and chips on this one
      // line (a chip dragged within the field moves as it is).
      handlePaste: (_view, event) => dropText(event.clipboardData),
      handleDrop(view, event, _slice, moved) {
        if (moved) return false;
        const at = view.posAtCoords({ left: event.clientX, top: event.clientY });
        return dropText(event.dataTransfer, at?.pos);
      },
    },
  });
  function dropText(data: DataTransfer | null, at?: number): boolean {
    const text = data?.getData("text/plain");
    if (!text) return false;
    const content = inlineContent(text.replace(/\s*[\r\n]+\s*/g, " ").replace(/\t/g, " "));
    const chain = line.chain().focus();
    if (at !== undefined) chain.setTextSelection(at);
    if (content.length) chain.insertContent(content);
    chain.run();
    return true;
  }
  line.on("focus", () => (touched = true));
  line.on("update", () => {
    input.value = lineText(line.state.doc);
    input.dispatchEvent(new Event("input", { bubbles: true }));
  });
  // Clicking the name, or the box's padding, focuses the field, as for an input.
  name.addEventListener("click", () => line.commands.focus("end"));
  box.addEventListener("mousedown", (e) => {
    if (e.target !== box) return;
    e.preventDefault();
    line.commands.focus("end");
  });
  button.addEventListener("click", () => {
    // Never clicked into yet: the variable goes at the end, where a person would expect it.
    if (!touched) line.commands.setTextSelection(line.state.doc.content.size - 1);
    void insertVariable(line);
  });
  return line;
}
document.querySelectorAll<HTMLInputElement>("#editor-settings input[data-variable-field]").forEach(lineField);

// ---- toolbar ---------------------------------------------------------------------------------

const commands: Record<string, () => unknown> = {
  bold: () => editor.chain().focus().toggleBold().run(),
  italic: () => editor.chain().focus().toggleItalic().run(),
  underline: () => editor.chain().focus().toggleUnderline().run(),
  strike: () => editor.chain().focus().toggleStrike().run(),
  link: editLink,
  bulletList: () => editor.chain().focus().toggleBulletList().run(),
  orderedList: () => editor.chain().focus().toggleOrderedList().run(),
  alignLeft: () => editor.chain().focus().updateAttributes("paragraph", { textAlign: null }).updateAttributes("heading", { textAlign: null }).run(),
  alignCenter: () => editor.chain().focus().updateAttributes("paragraph", { textAlign: "center" }).updateAttributes("heading", { textAlign: "center" }).run(),
  button: editButton,
  image: editImage,
  divider: () => editor.chain().focus().setHorizontalRule().run(),
  columns: () => editor.chain().focus().insertContent([
    { type: "columns", content: [{ type: "column", content: [{ type: "paragraph" }] }, { type: "column", content: [{ type: "paragraph" }] }] },
    { type: "paragraph" },
  ]).run(),
  variable: () => insertVariable(editor),
  undo: () => editor.chain().focus().undo().run(),
  redo: () => editor.chain().focus().redo().run(),
};

// Buttons in the toolbar keep the editor's selection: a mousedown would move focus first.
document.querySelectorAll<HTMLButtonElement>(".toolbar button[data-cmd]").forEach((b) => {
  b.addEventListener("mousedown", (e) => e.preventDefault());
  b.addEventListener("click", () => void commands[b.dataset.cmd!]?.());
});

const blockSelect = $<HTMLSelectElement>("#block-type");
blockSelect.addEventListener("change", () => {
  const v = blockSelect.value;
  if (v === "paragraph") editor.chain().focus().setParagraph().run();
  else editor.chain().focus().setHeading({ level: Number(v.slice(1)) as 1 | 2 | 3 }).run();
});

function refreshToolbar() {
  for (const name of ["bold", "italic", "underline", "strike", "link", "bulletList", "orderedList"]) {
    document.querySelector(`.toolbar [data-cmd=${name}]`)?.setAttribute("aria-pressed", String(editor.isActive(name)));
  }
  const center = editor.isActive({ textAlign: "center" });
  document.querySelector(".toolbar [data-cmd=alignCenter]")?.setAttribute("aria-pressed", String(center));
  document.querySelector(".toolbar [data-cmd=alignLeft]")?.setAttribute("aria-pressed", String(!center));
  const level = [1, 2, 3].find((l) => editor.isActive("heading", { level: l }));
  blockSelect.value = level ? `h${level}` : "paragraph";
}
editor.on("transaction", refreshToolbar);
refreshToolbar();

// ---- saving, preview, test, review, send ----------------------------------------------------

const saveState = $("#save-state");
const errorBox = $("#editor-error");
const settings = $<HTMLFormElement>("#editor-settings");
let dirty = false;
/** Saves leave the body alone (no document sent): it was written through the API. */
let bodyKept = data.apiBody !== null;
/** The person chose to replace that body: the next save says so, once (the server refuses a
 * document in place of an API-written body without it). */
let replaceBody = false;
let saving: Promise<boolean> | null = null;
let timer: ReturnType<typeof setTimeout> | undefined;

function showError(message: string | null) {
  errorBox.textContent = message ?? "";
  errorBox.hidden = !message;
}

async function call(path: string, payload: unknown = {}): Promise<Record<string, unknown>> {
  const res = await fetch(path, {
    method: "POST",
    headers: { "content-type": "application/json", "x-csrf-token": csrf, accept: "application/json" },
    body: JSON.stringify(payload),
    credentials: "same-origin",
  });
  const body = (await res.json().catch(() => ({}))) as Record<string, unknown>;
  if (!res.ok) throw new Error(String(body.message ?? `The request failed (${res.status}). Reload the page and try again.`));
  return body;
}

function settingsValues(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const el of Array.from(settings.elements) as HTMLInputElement[]) if (el.name) out[el.name] = el.value.trim();
  return out;
}

function markDirty() {
  // An error from the last save or send is about the document as it was: an edit may fix it,
  // and the next save or send says again if not.
  showError(null);
  dirty = true;
  saveState.textContent = "Unsaved changes";
  clearTimeout(timer);
  timer = setTimeout(() => void save(), 2000);
}
editor.on("update", markDirty);
settings.addEventListener("input", markDirty);
settings.addEventListener("submit", (e) => e.preventDefault());

/** Saves now (waiting for a save under way first); false when the server refused it. */
async function save(): Promise<boolean> {
  clearTimeout(timer);
  // A loop, not one wait: two callers (the autosave timer and Preview) may wake from the same
  // save, and the second must then wait for the one the first starts, not report saved early.
  while (saving) await saving;
  if (!dirty) return true;
  dirty = false;
  saveState.textContent = "Saving…";
  saving = (async () => {
    try {
      const replacing = replaceBody;
      await call(base, { ...settingsValues(), ...(bodyKept ? {} : { document: editor.getJSON(), ...(replacing ? { replace_body: true } : {}) }) });
      if (replacing) replaceBody = false;
      // UTC, as every time the dashboard shows.
      saveState.textContent = `Saved at ${new Date().toISOString().slice(11, 19)} UTC`;
      showError(null);
      return true;
    } catch (err) {
      dirty = true;
      saveState.textContent = "Not saved";
      showError(err instanceof Error ? err.message : String(err));
      return false;
    } finally {
      saving = null;
    }
  })();
  return saving;
}
window.addEventListener("beforeunload", (e) => {
  if (dirty) e.preventDefault();
});

// ---- a body written through the API ---------------------------------------------------------

/** Placeholders in the HTML's text as the editor's variable chips (VariableNode parses them). */
function chipsIn(root: HTMLElement) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const found: Text[] = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) if ((n as Text).data.includes("{{{")) found.push(n as Text);
  for (const t of found) {
    const parts = placeholderParts(t.data);
    if (!parts.some((p) => !("text" in p))) continue;
    t.replaceWith(...parts.map((p) => {
      if ("text" in p) return p.text;
      const chip = document.createElement("span");
      chip.setAttribute("data-variable", p.key);
      chip.setAttribute("data-fallback", p.fallback);
      return chip;
    }));
  }
}

/** The editor's document from the API-written body: TipTap parses the html into its schema
 * (words, headings, links, lists, images; no layout or styles); text becomes paragraphs. */
function importBody(body: ApiBody): JSONContent | string {
  if (body.html) {
    // Parsed inert (DOMParser runs no scripts and loads nothing); the head and styles are dropped.
    const doc = new DOMParser().parseFromString(body.html, "text/html");
    doc.querySelectorAll("script, style, head, title").forEach((el) => el.remove());
    chipsIn(doc.body);
    return doc.body.innerHTML;
  }
  const paragraphs = (body.text ?? "").split(/\r?\n\s*\r?\n/).map((p) => p.trim()).filter(Boolean);
  return {
    type: "doc",
    content: paragraphs.map((p) => ({
      type: "paragraph",
      content: p.split(/\r?\n/).flatMap((line, i) => [...(i ? [{ type: "hardBreak" }] : []), ...inlineContent(line).filter((n) => n.type !== "text" || n.text)]),
    })),
  };
}

const bodyEdit = document.querySelector<HTMLButtonElement>("[data-body-edit]");
bodyEdit?.addEventListener("click", async () => {
  const r = await ask("dlg-body", {});
  if (!r || !data.apiBody) return;
  // The person's explicit choice: the editor takes over the body, and its next save replaces it.
  editor.commands.setContent(r.action === "import" ? importBody(data.apiBody) : data.document, { emitUpdate: false });
  if (editor.isEmpty) editor.commands.setContent(data.document, { emitUpdate: false });
  bodyKept = false;
  replaceBody = true;
  $("#api-body").hidden = true;
  $(".editor-frame").hidden = false;
  dirty = true;
  editor.commands.focus("start");
  await save();
});

async function busy(button: HTMLButtonElement, work: () => Promise<void>) {
  button.disabled = true;
  try {
    await work();
  } catch (err) {
    showError(err instanceof Error ? err.message : String(err));
  } finally {
    button.disabled = false;
  }
}

const previewPanel = $("#preview-panel");
const frame = $<HTMLIFrameElement>("#preview-frame");
async function preview() {
  if (!(await save())) return;
  const r = await call(`${base}/preview`);
  frame.srcdoc = String(r.html ?? `<pre>${String(r.text ?? "").replace(/[&<]/g, (c) => (c === "&" ? "&amp;" : "&lt;"))}</pre>`);
  $("#preview-text").textContent = String(r.text ?? "");
  if (data.kind === "broadcast") {
    // As an inbox lists it: the subject, then the preview text in grey, for the same contact.
    $("#preview-subject").textContent = String(r.subject ?? "");
    const preheader = $("#preview-preheader");
    preheader.textContent = typeof r.preview_text === "string" ? r.preview_text : "";
    preheader.hidden = !preheader.textContent;
    $("#preview-who").textContent = `As ${String(r.who)} will see it.`;
  } else $("#preview-who").textContent = String(r.who);
  previewPanel.hidden = false;
  showError(null);
  previewPanel.scrollIntoView({ behavior: "smooth", block: "start" });
}
previewPanel.querySelectorAll<HTMLButtonElement>("[data-width]").forEach((b) => b.addEventListener("click", () => {
  $(".preview-stage").classList.toggle("mobile", b.dataset.width === "mobile");
  previewPanel.querySelectorAll("[data-width]").forEach((x) => x.setAttribute("aria-pressed", String(x === b)));
}));

function listItem(status: string, title: string, detail: string): HTMLLIElement {
  const li = document.createElement("li");
  const badge = document.createElement("span");
  badge.className = `badge ${status}`;
  badge.textContent = status;
  const strong = document.createElement("strong");
  strong.textContent = ` ${title}`;
  const p = document.createElement("p");
  p.className = "muted";
  p.textContent = detail.replace(/`/g, "");
  li.append(badge, strong, p);
  return li;
}

interface Insight { id: string; status: "passed" | "warning" | "failed"; title: string; detail: string }
interface Review { blocking: string[]; warnings: string[]; recipients?: number | null; insights: Insight[]; verdict: string }
const reviewPanel = document.getElementById("review-panel");
/** The review in reading order: what blocks it, what to look at, the verdict on both (from the
 * server, worker/broadcasts/review.ts and worker/templates/review.ts), then deliverability. */
async function review() {
  if (!reviewPanel || !(await save())) return;
  const r = (await call(`${base}/review`)) as unknown as Review;
  const verb = data.kind === "broadcast" ? "sending" : "publishing";
  const section = (box: HTMLElement, title: string, status: "failed" | "warning", items: string[], alert: boolean) => {
    box.replaceChildren();
    if (!items.length) return;
    const h = document.createElement("h3");
    h.textContent = title;
    const ul = document.createElement("ul");
    ul.className = `insights${status === "failed" ? " blocking" : ""}`;
    if (alert) ul.setAttribute("role", "alert");
    for (const item of items) ul.append(listItem(status, "", item));
    box.append(h, ul);
  };
  section($("#review-blocking"), `Fix ${r.blocking.length === 1 ? "this" : "these"} before ${verb}`, "failed", r.blocking, true);
  section($("#review-warnings"), `Look at ${r.warnings.length === 1 ? "this" : "these"} before ${verb}`, "warning", r.warnings, false);
  const verdict = $("#review-verdict");
  verdict.textContent = r.verdict;
  verdict.className = r.blocking.length ? "error" : r.warnings.length || r.insights.some((i) => i.status === "failed") ? "warn-text" : "ok";
  const order = { failed: 0, warning: 1, passed: 2 };
  const problems = r.insights.filter((i) => i.status !== "passed").sort((a, b) => order[a.status] - order[b.status]);
  const passed = r.insights.filter((i) => i.status === "passed");
  const box = $("#review-insights");
  box.replaceChildren();
  if (r.insights.length) {
    const h = document.createElement("h3");
    h.textContent = `Deliverability: ${problems.length ? `${problems.length} to look at` : "all checks passed"}`;
    box.append(h);
  }
  if (problems.length) {
    const ul = document.createElement("ul");
    ul.className = "insights";
    for (const i of problems) ul.append(listItem(i.status, i.title, i.detail));
    box.append(ul);
  }
  if (passed.length) {
    const d = document.createElement("details");
    const s = document.createElement("summary");
    s.textContent = `${passed.length} passed checks`;
    const ul = document.createElement("ul");
    ul.className = "insights";
    for (const i of passed) ul.append(listItem(i.status, i.title, i.detail));
    d.append(s, ul);
    box.append(d);
  }
  $<HTMLButtonElement>("[data-review-submit]", reviewPanel).disabled = r.blocking.length > 0;
  reviewPanel.hidden = false;
  showError(null);
  reviewPanel.scrollIntoView({ behavior: "smooth", block: "start" });
}

const sendForm = document.getElementById("send-form") as HTMLFormElement | null;
if (sendForm) {
  const when = $<HTMLSelectElement>("select[name=when]", sendForm);
  const sendButton = $<HTMLButtonElement>("#send-button");
  when.addEventListener("change", () => {
    ($("[data-when-later]", sendForm) as HTMLElement).hidden = when.value !== "later";
    sendButton.textContent = when.value === "later" ? "Schedule" : "Send now";
  });
  sendForm.addEventListener("submit", (e) => {
    e.preventDefault();
    void busy(sendButton, async () => {
      const later = when.value === "later";
      const at = $<HTMLInputElement>("input[name=scheduled_at]", sendForm).value.trim();
      if (later && !at) throw new Error("Say when to send it, like “tomorrow at 9am”.");
      const segment = $<HTMLSelectElement>("select[name=segment_id]", settings).selectedOptions[0]?.textContent ?? "the segment";
      if (!confirm(later ? `Schedule this broadcast to ${segment} for ${at}?` : `Send this broadcast to everyone in ${segment} now?`)) return;
      if (!(await save())) return;
      await call(`${base}/send`, later ? { scheduled_at: at } : {});
      location.href = `/dashboard/broadcasts/${data.id}`;
    });
  });
}

const actions: Record<string, () => Promise<void>> = {
  save: async () => {
    dirty = true;
    await save();
  },
  preview,
  review,
  test: async () => {
    if (!(await save())) return;
    const r = await call(`${base}/test`);
    saveState.textContent = `Test sent to ${String(r.to)}.`;
  },
};

const publishForm = document.getElementById("publish-form") as HTMLFormElement | null;
publishForm?.addEventListener("submit", (e) => {
  e.preventDefault();
  void busy($<HTMLButtonElement>("#publish-button"), async () => {
    if (!(await save())) return;
    await call(`${base}/publish`);
    location.reload();
  });
});
document.querySelectorAll<HTMLButtonElement>("[data-action]").forEach((b) => b.addEventListener("click", () => void busy(b, actions[b.dataset.action!]!)));

(window as unknown as { ternEditor: Editor }).ternEditor = editor;
