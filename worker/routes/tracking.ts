// The public endpoints mail points at (no API key): the open pixel, click redirects and
// one-click unsubscribe (RFC 8058). Their tokens are the only authority, so a forged, altered
// or moved token gets a 404 and changes nothing; a click redirects only to the link stored for
// that email at that index. Registered on the plain router: their path segments are tokens,
// not the UUIDs defineRoute's parameters match.
import type { App, Ctx } from "../app.ts";
import { readConfig } from "../config.ts";
import { unsubscribeAddress } from "../contacts/contacts.ts";
import { UNSUBSCRIBE_PATH_PREFIX, verifyUnsubscribeToken } from "../contacts/unsubscribe-token.ts";
import { ApiError, errorResponse } from "../errors.ts";
import { linkTokenKey } from "../tracking/outgoing.ts";
import { loadEmail, loadLinks, recordClick, recordOpen, visitorOf } from "../tracking/record.ts";
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
      const claim = await verifyOpenToken(await linkTokenKey(readConfig(c.env)), c.req.param("token"));
      const email = claim.ok ? await loadEmail(c.env.DB, claim.value.emailId) : undefined;
      if (email) await recordOpen(c.env, email, visitorOf(c.req.raw));
    } catch (err) {
      console.error("recording an open failed", err instanceof Error ? err.message : String(err));
    }
    return new Response(PIXEL, { headers: { ...NO_STORE, "content-type": "image/gif" } });
  });

  app.get(`${CLICK_PATH_PREFIX}:token`, async (c) => {
    const resolved = await resolveClick(await linkTokenKey(readConfig(c.env)), c.req.param("token"), (id) => loadLinks(c.env.DB, id));
    if (!resolved.ok) return linkNotFound();
    try {
      const email = await loadEmail(c.env.DB, resolved.value.emailId);
      if (email) await recordClick(c.env, email, resolved.value.linkIndex, resolved.value.link, visitorOf(c.req.raw));
    } catch (err) {
      // The reader still gets where the link goes.
      console.error("recording a click failed", err instanceof Error ? err.message : String(err));
    }
    return new Response(null, { status: 302, headers: { ...NO_STORE, location: resolved.value.link } });
  });

  // GET shows a confirmation page and changes nothing (link scanners and prefetchers follow
  // GETs); its button, like a mail client's one-click, POSTs.
  app.get(`${UNSUBSCRIBE_PATH_PREFIX}:token`, async (c) => {
    const claim = await unsubscribeClaim(c);
    if (!claim) return linkNotFound();
    return new Response(page("Unsubscribe", `<p>Stop receiving these emails at <b>${escapeHtml(claim.recipient)}</b>?</p>
<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click"><button type="submit">Unsubscribe</button></form>`), { headers: PAGE_HEADERS });
  });

  app.post(`${UNSUBSCRIBE_PATH_PREFIX}:token`, async (c) => {
    const claim = await unsubscribeClaim(c);
    if (!claim) return linkNotFound();
    await unsubscribeAddress(c.env, claim.accountId, claim.recipient);
    return new Response(page("Unsubscribed", `<p><b>${escapeHtml(claim.recipient)}</b> is unsubscribed.</p>`), { headers: PAGE_HEADERS });
  });
}

async function unsubscribeClaim(c: Ctx) {
  const claim = await verifyUnsubscribeToken(await linkTokenKey(readConfig(c.env)), c.req.param("token") ?? "");
  return claim.ok ? claim.value : null;
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
}

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>${title}</title><style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}button{font:inherit;padding:.4rem 1rem}</style>
</head><body><h1>${title}</h1>${body}</body></html>`;
}
