// @ts-check
// Passkeys: adding one in Settings and signing in with one. SimpleWebAuthn's browser bundle
// (vendor/simplewebauthn-browser.min.js, loaded before this) turns the server's JSON options
// into the browser's WebAuthn calls and back; the server checks everything (passkeys.ts).
import { showError } from "./app.js";
const csrf = document.querySelector('meta[name="csrf-token"]')?.getAttribute("content") ?? "";
const AUTH = "/dashboard/api/auth/passkey";

/** @returns {any} */
const webauthn = () => /** @type {any} */ (globalThis).SimpleWebAuthnBrowser;


/** POSTs JSON and answers the parsed reply, or throws an Error with the server's message. */
async function post(/** @type {string} */ path, /** @type {unknown} */ body) {
  const res = await fetch(`${AUTH}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json", ...(csrf ? { "x-csrf-token": csrf } : {}) },
    body: JSON.stringify(body ?? {}),
    credentials: "same-origin",
  });
  const text = await res.text();
  /** @type {any} */
  let data = {};
  try { data = text ? JSON.parse(text) : {}; } catch { data = { message: text }; }
  if (!res.ok) throw new Error(data.message ?? (res.status === 429 ? "Too many attempts. Wait a few minutes and try again." : `The request failed (${res.status}).`));
  return data;
}

/** What a person should read when the browser's prompt failed. */
function promptError(/** @type {unknown} */ err) {
  const name = err instanceof Error ? err.name : "";
  if (name === "NotAllowedError") return "The passkey prompt was closed or timed out. Try again when you are ready.";
  if (name === "InvalidStateError") return "This device already holds a passkey for your tern sign-in.";
  if (name === "SecurityError") return "The browser refused passkeys for this address. Open the dashboard on its domain name (or localhost).";
  return err instanceof Error ? err.message : String(err);
}

const supported = typeof window.PublicKeyCredential === "function";
for (const el of document.querySelectorAll("[data-passkey-unsupported]")) /** @type {HTMLElement} */ (el).hidden = supported;
for (const el of document.querySelectorAll("[data-passkey]")) if (!supported) el.setAttribute("hidden", "");

document.addEventListener("submit", async (event) => {
  const form = /** @type {HTMLFormElement} */ (event.target);
  if (form.dataset.passkey !== "register") return;
  event.preventDefault();
  const button = form.querySelector("button");
  button?.setAttribute("disabled", "");
  const fields = Object.fromEntries(new FormData(form));
  try {
    const optionsJSON = await post("/register/options", { password: fields.password || undefined, code: fields.code || undefined });
    let response;
    try {
      response = await webauthn().startRegistration({ optionsJSON });
    } catch (err) {
      return showError(form, promptError(err));
    }
    const added = await post("/register/verify", { response, name: fields.name || undefined });
    sessionStorage.setItem("tern-notice", `Passkey "${added.name}" added. You can sign in with it from now on.`);
    location.reload();
  } catch (err) {
    showError(form, err instanceof Error ? err.message : String(err));
  } finally {
    button?.removeAttribute("disabled");
  }
});

document.addEventListener("click", async (event) => {
  const button = /** @type {HTMLElement} */ (event.target).closest("[data-passkey='sign-in']");
  if (!(button instanceof HTMLButtonElement)) return;
  const where = /** @type {HTMLElement} */ (button.closest("[data-passkey-box]") ?? button.parentElement);
  button.disabled = true;
  try {
    const optionsJSON = await post("/sign-in/options", {});
    let response;
    try {
      response = await webauthn().startAuthentication({ optionsJSON });
    } catch (err) {
      return showError(where, promptError(err));
    }
    await post("/sign-in/verify", { response });
    location.href = "/dashboard/emails";
  } catch (err) {
    showError(where, err instanceof Error ? err.message : String(err));
  } finally {
    button.disabled = false;
  }
});
