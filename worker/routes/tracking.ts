// The public endpoints mail points at (no API key): the open pixel, click redirects and
// one-click unsubscribe (RFC 8058). Their tokens are the only authority, so a forged, altered
// or moved token gets a 404 and changes nothing; a click redirects only to the link stored for
// that email at that index. Registered on the plain router: their path segments are tokens,
// not the UUIDs defineRoute's parameters match.
import { eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import type { App, Ctx } from "../app.ts";
import { readConfig } from "../config.ts";
import { accounts } from "../db/schema.ts";
import { applyPreference, topicOfEmail } from "../contacts/preferences.ts";
import { UNSUBSCRIBE_PATH_PREFIX, verifyUnsubscribeToken } from "../contacts/unsubscribe-token.ts";
import { ApiError, errorResponse } from "../errors.ts";
import { linkTokenKey } from "../tracking/outgoing.ts";
import { loadEmail, loadLinks, recordClick, recordOpen, visitorOf } from "../tracking/record.ts";
import { tokenHost } from "../tracking/hosts.ts";
import { CLICK_PATH_PREFIX, OPEN_PATH_PREFIX, resolveClick, verifyOpenToken } from "../tracking/tokens.ts";

/** A transparent 1x1 GIF. */
const PIXEL = Uint8Array.from(atob("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"), (c) => c.charCodeAt(0));
const NO_STORE = { "cache-control": "no-store, private", "referrer-policy": "no-referrer" };
const PAGE_HEADERS = {
  ...NO_STORE,
  "content-type": "text/html; charset=utf-8",
  "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
};

const linkNotFound = () => errorResponse(new ApiError("not_found", "This link is not valid."));

export function registerTrackingRoutes(app: App): void {
  // The pixel answers the same whatever the token: a mail client learns nothing from it.
  app.get(`${OPEN_PATH_PREFIX}:token`, async (c) => {
    try {
      const config = readConfig(c.env);
      const claim = await verifyOpenToken(await linkTokenKey(config), c.req.param("token"), tokenHost(config, c.req.url));
      const email = claim.ok ? await loadEmail(c.env.DB, claim.value.emailId) : undefined;
      if (email) await recordOpen(c.env, email, visitorOf(c.req.raw));
    } catch (err) {
      console.error("recording an open failed", err instanceof Error ? err.message : String(err));
    }
    return new Response(PIXEL, { headers: { ...NO_STORE, "content-type": "image/gif" } });
  });

  app.get(`${CLICK_PATH_PREFIX}:token`, async (c) => {
    // A token issued for a domain's tracking host is answered only there (tracking/hosts.ts).
    const config = readConfig(c.env);
    const resolved = await resolveClick(await linkTokenKey(config), c.req.param("token"), (id) => loadLinks(c.env.DB, id), tokenHost(config, c.req.url));
    if (!resolved.ok) return linkNotFound();
    try {
      const email = await loadEmail(c.env.DB, resolved.value.emailId);
      if (email) await recordClick(c.env, email, resolved.value.linkIndex, resolved.value.link, visitorOf(c.req.raw));
    } catch (err) {
      // The reader still gets where the link goes.
      console.error("recording a click failed", err instanceof Error ? err.message : String(err));
    }
    // The serialised URL: ASCII only (percent-encoded path, punycode host), as a Location must be.
    return new Response(null, { status: 302, headers: { ...NO_STORE, location: new URL(resolved.value.link).href } });
  });

  // GET shows a confirmation page and changes nothing (link scanners and prefetchers follow
  // GETs); its button, like a mail client's one-click, POSTs.
  app.get(`${UNSUBSCRIBE_PATH_PREFIX}:token`, async (c) => {
    const claim = await unsubscribeClaim(c);
    if (!claim) return linkNotFound();
    // A topic-scoped broadcast's link opens a preference page: leave the topic, or everything.
    const topic = await topicOfEmail(c.env.DB, claim);
    if (topic) {
      return new Response(page("Email preferences", `<p>Choose what <b>${escapeHtml(claim.recipient)}</b> receives.</p>
<form method="post"><input type="hidden" name="choice" value="topic"><button type="submit">Stop receiving ${escapeHtml(topic.name)}</button></form>
<p>${topic.description ? escapeHtml(topic.description) : ""}</p>
<form method="post"><input type="hidden" name="choice" value="all"><button type="submit">Unsubscribe from everything</button></form>`), { headers: PAGE_HEADERS });
    }
    return new Response(page("Unsubscribe", `<p>Stop receiving these emails at <b>${escapeHtml(claim.recipient)}</b>?</p>
<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click"><button type="submit">Unsubscribe</button></form>`), { headers: PAGE_HEADERS });
  });

  app.post(`${UNSUBSCRIBE_PATH_PREFIX}:token`, async (c) => {
    const claim = await unsubscribeClaim(c);
    if (!claim) return linkNotFound();
    const form = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
    const choice = form.choice === "topic" || form.choice === "all" ? form.choice : "one-click";
    const done = await applyPreference(c.env, claim, choice);
    if (done.left === "topic") {
      return new Response(page("Preferences saved", `<p><b>${escapeHtml(claim.recipient)}</b> no longer receives ${escapeHtml(done.topic!.name)}.</p>`), { headers: PAGE_HEADERS });
    }
    return new Response(page("Unsubscribed", `<p><b>${escapeHtml(claim.recipient)}</b> is unsubscribed.</p>`), { headers: PAGE_HEADERS });
  });
}

async function unsubscribeClaim(c: Ctx) {
  const claim = await verifyUnsubscribeToken(await linkTokenKey(readConfig(c.env)), c.req.param("token") ?? "");
  if (!claim.ok) return null;
  // A deleted account's links end with it: no list is left to leave, and no contact may be
  // written back into an account that no longer exists.
  const account = await drizzle(c.env.DB).select({ id: accounts.id }).from(accounts).where(eq(accounts.id, claim.value.accountId)).get();
  return account ? claim.value : null;
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>${title}</title><style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}button{font:inherit;padding:.4rem 1rem}</style>
</head><body><h1>${title}</h1>${body}</body></html>`;
}
