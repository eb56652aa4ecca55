// The account's uploaded images in the dashboard: the Images page (a grid of thumbnails with
// each one's size, date, URL to copy and a delete, beside the account's use of its media
// limit), and the JSON endpoints the editor uses (upload, and the list its image dialog picks
// from). Rules live in worker/media/; these routes only read the request and render.
// Deleting is for owners and admins, as deleting a template is: it breaks the image in every
// email already sent that shows it, which a member (who "sees and sends") should not do alone.
// It goes through a page that lists the broadcasts and templates showing the image first.
// Thumbnails are the image's ?size=thumb (made by the Images binding, worker/media/images.ts),
// with a fixed box size and lazy, async decoding, so a page of 48 never loads 48 full images.
import type { Hono } from "hono";
import { ImageError, imageUrl, MAX_IMAGE_BYTES, storeImage, thumbUrl } from "../media/images.ts";
import { deleteImage, findImage, imageUses, listImages, mediaUsage, type ImageUses, type LibraryImage, type MediaUsage } from "../media/library.ts";
import { formatBytes, formatCount } from "../media/sizes.ts";
import { Badge, Empty, Time } from "./layout.tsx";
import { DashError, json, page, type DashCtx, type DashEnv } from "./routes.tsx";
import { audit } from "./viewer.ts";
import { dashboardOrigin } from "./auth.ts";
import { ApiError } from "../errors.ts";
import { readBodyLimited } from "../http.ts";

const TYPE_NAMES: Record<string, string> = { "image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP" };

export const DELETE_WARNING = "Emails already sent that show it will show a broken image from now on, and so will drafts and templates that use it. This cannot be undone.";

/** The thumbnail box of the Images page's cards (CSS .media-thumb), for width and height. */
const THUMB_BOX = { width: 240, height: 140 };

function label(img: LibraryImage): string {
  return img.name ?? `Image uploaded ${img.created_at.slice(0, 10)}`;
}

/** A share of a limit, 0 to 100 (null limit: no bar); any use at all shows as a sliver. */
function share(used: number, limit: number | null): number | null {
  if (limit === null) return null;
  return used === 0 ? 0 : Math.max(0.5, Math.min(100, limit === 0 ? 100 : (used / limit) * 100));
}

function Usage(props: { usage: MediaUsage }) {
  const u = props.usage;
  const bytes = share(u.bytes, u.limits.bytes);
  const images = share(u.images, u.limits.images);
  const storage = u.limits.bytes === null ? `${formatBytes(u.bytes)} (no limit)` : `${formatBytes(u.bytes)} of ${formatBytes(u.limits.bytes)}`;
  const count = u.limits.images === null ? `${formatCount(u.images)} ${u.images === 1 ? "image" : "images"} (no limit)` : `${formatCount(u.images)} of ${formatCount(u.limits.images)} images`;
  const worst = Math.max(bytes ?? 0, images ?? 0);
  const level = worst >= 100 ? "over_limit" : worst >= 90 ? "warning" : "";
  const setting = (bytes ?? 0) >= (images ?? 0) ? "MEDIA_ACCOUNT_LIMIT_MB" : "MEDIA_ACCOUNT_LIMIT_IMAGES";
  return (
    <section class="panel usage" aria-labelledby="usage-title">
      <h2 id="usage-title" class="sr-only">Space used</h2>
      <p class="usage-line"><strong>{storage}</strong>, {count}</p>
      <div class="usage-bars">
        {bytes !== null ? <div><span class="muted small">Storage</span><div class={`health-bar ${level}`} aria-hidden="true"><span style={`width:${bytes.toFixed(1)}%`}></span></div></div> : null}
        {images !== null ? <div><span class="muted small">Images</span><div class={`health-bar ${level}`} aria-hidden="true"><span style={`width:${images.toFixed(1)}%`}></span></div></div> : null}
      </div>
      {level === "over_limit" ? <p class="error">This account's images are at its limit: new uploads are refused. Delete images no email needs any more, or ask the operator to raise {setting}.</p>
        : level === "warning" ? <p class="muted">Nearly full: delete images no email needs any more, or ask the operator to raise {setting}.</p> : null}
    </section>
  );
}

function Card(props: { img: LibraryImage; canDelete: boolean }) {
  const img = props.img;
  const name = label(img);
  return (
    <li class="media-card">
      <a class="media-thumb" href={img.url} target="_blank" rel="noopener noreferrer">
        <img src={thumbUrl(img.url)} alt={`${name} (opens full size)`} width={THUMB_BOX.width} height={THUMB_BOX.height} loading="lazy" decoding="async" />
      </a>
      <div class="media-meta">
        <div class="media-name" title={name}>{name}</div>
        <div class="muted small">{TYPE_NAMES[img.type] ?? img.type} · {formatBytes(img.bytes)}</div>
        <div class="muted small"><Time at={img.created_at} /></div>
        <div class="media-actions">
          <button type="button" class="secondary" data-copy={img.url} aria-label={`Copy the URL of ${name}`}>Copy URL</button>
          {props.canDelete ? (
            <a class="button danger" href={`/dashboard/images/${img.id}/delete`} aria-label={`Delete ${name}…`}>Delete…</a>
          ) : null}
        </div>
      </div>
    </li>
  );
}

async function imagesPage(c: DashCtx) {
  const v = c.get("viewer");
  const after = c.req.query("after") || undefined;
  const origin = dashboardOrigin(c.env, c.req.url);
  const usage = await mediaUsage(c.env, v.account.id);
  let list;
  try {
    list = await listImages(c.env, v.account.id, origin, { after });
  } catch (err) {
    if (!(err instanceof ImageError)) throw err;
    c.status(400);
    return page(c, "Images", <Empty title="That page of images does not exist."><p><a href="/dashboard/images">Show the newest images</a></p></Empty>);
  }
  const last = list.data[list.data.length - 1];
  return page(c, "Images", (
    <>
      <p class="muted intro">Images uploaded in the broadcast and template editors. Emails load each one from its URL, so it keeps working in mail already sent until it is deleted here.</p>
      <Usage usage={usage} />
      {!v.canManage && list.data.length ? <p class="muted">Only owners and admins delete images.</p> : null}
      {list.data.length === 0 ? (
        after ? <Empty title="No older images."><p><a href="/dashboard/images">Show the newest images</a></p></Empty> : (
          <Empty title="No images uploaded yet.">
            <p>Upload one in the editor of a <a href="/dashboard/broadcasts">broadcast</a> or a <a href="/dashboard/templates">template</a> (Insert, then Image); it appears here, ready to reuse in any email.</p>
          </Empty>
        )
      ) : (
        <ul class="media-grid" aria-label="Uploaded images, newest first">
          {list.data.map((img) => <Card img={img} canDelete={v.canManage} />)}
        </ul>
      )}
      {after || (list.has_more && last) ? (
        <nav class="pager" aria-label="Pages">
          {after ? <a class="button secondary" href="/dashboard/images">Newest</a> : null}
          {list.has_more && last ? <a class="button secondary" href={`/dashboard/images?after=${last.id}`}>Older</a> : null}
        </nav>
      ) : null}
    </>
  ));
}

/** What deleting breaks, in words: sent mail first (it cannot be fixed), then what can be. */
export function deleteConsequences(uses: ImageUses): string[] {
  const out: string[] = [];
  const reached = uses.broadcasts.filter((b) => b.recipients > 0);
  const recipients = reached.reduce((n, b) => n + b.recipients, 0);
  if (reached.length > 0) {
    out.push(`${reached.length === 1 ? "A broadcast" : `${reached.length} broadcasts`} already sent to ${recipients.toLocaleString("en-US")} recipient${recipients === 1 ? "" : "s"} show${reached.length === 1 ? "s" : ""} it: the copies in their inboxes load it from its URL, so they will show a broken image. That cannot be fixed once it is deleted.`);
  }
  const waiting = uses.broadcasts.filter((b) => b.recipients === 0 && ["draft", "scheduled", "queued", "sending"].includes(b.status));
  if (waiting.length > 0) {
    out.push(`${waiting.length === 1 ? "A broadcast" : `${waiting.length} broadcasts`} not sent yet would go out with a broken image: replace it in ${waiting.length === 1 ? "its" : "their"} editor first.`);
  }
  const published = uses.templates.filter((t) => t.published);
  if (published.length > 0) {
    out.push(`${published.length === 1 ? "A published template" : `${published.length} published templates`} would send a broken image with every email from now on, and mail already sent with ${published.length === 1 ? "it" : "them"} breaks too: replace it, then publish again.`);
  }
  const drafts = uses.templates.filter((t) => !t.published);
  if (drafts.length > 0) out.push(`${drafts.length === 1 ? "A template's draft" : `${drafts.length} templates' drafts`} would show a broken image once published.`);
  return out;
}

/** The page before an image is deleted: the image, where it is used, what deleting breaks. */
async function deleteImagePage(c: DashCtx) {
  const v = c.get("viewer");
  const img = await findImage(c.env, v.account.id, dashboardOrigin(c.env, c.req.url), c.req.param("id")!);
  if (!img) {
    c.status(404);
    return page(c, "Image not found", <Empty title="There is no such image in this account."><p>It was deleted already, or the address is wrong. <a href="/dashboard/images">All images</a></p></Empty>);
  }
  const name = label(img);
  const uses = await imageUses(c.env.DB, v.account.id, img.id);
  const consequences = deleteConsequences(uses);
  const used = uses.broadcasts.length + uses.templates.length;
  return page(c, `Delete ${name}?`, (
    <>
      <p><a href="/dashboard/images">← All images</a></p>
      <section class="panel media-delete" aria-labelledby="used-in">
        <div class="media-delete-head">
          <a class="media-thumb" href={img.url} target="_blank" rel="noopener noreferrer"><img src={thumbUrl(img.url)} alt={`${name} (opens full size)`} width={THUMB_BOX.width} height={THUMB_BOX.height} decoding="async" /></a>
          <div class="muted">{TYPE_NAMES[img.type] ?? img.type} · {formatBytes(img.bytes)} · uploaded <Time at={img.created_at} /></div>
        </div>
        <h2 id="used-in">Where it is used</h2>
        {used === 0 ? (
          <p>No broadcast or template of this account shows it. Emails sent through the API with its URL are not searched: if your code sends it, those emails show a broken image once it is deleted.</p>
        ) : (
          <>
            {uses.broadcasts.length ? (
              <table>
                <thead><tr><th scope="col">Broadcast</th><th scope="col">Status</th><th scope="col" class="num">Recipients</th></tr></thead>
                <tbody>{uses.broadcasts.map((b) => (
                  <tr><td><a href={`/dashboard/broadcasts/${b.id}`}>{b.name || b.subject || "(untitled)"}</a></td><td><Badge value={b.status} /></td><td class="num">{b.recipients.toLocaleString("en-US")}</td></tr>
                ))}</tbody>
              </table>
            ) : null}
            {uses.templates.length ? (
              <table>
                <thead><tr><th scope="col">Template</th><th scope="col">In</th></tr></thead>
                <tbody>{uses.templates.map((t) => (
                  <tr><td><a href={`/dashboard/templates/${t.id}`}>{t.name}</a></td><td>{[t.published ? "the published version" : null, t.draft ? "the draft" : null].filter(Boolean).join(" and ") || "the editor's design"}</td></tr>
                ))}</tbody>
              </table>
            ) : null}
          </>
        )}
        <h2>If you delete it</h2>
        <ul class="consequences">{[...consequences, used ? "This cannot be undone." : DELETE_WARNING].map((x) => <li>{x}</li>)}</ul>
        {v.canManage ? (
          // This page is the confirmation: what deleting breaks is listed above the button.
          <form method="post" class="row" data-api={`/dashboard/api/media/${img.id}/delete`} data-then="/dashboard/images">
            <button type="submit" class="danger">Delete the image</button>
            <a class="button secondary" href="/dashboard/images">Keep it</a>
          </form>
        ) : <p class="muted">Only owners and admins delete images, since emails already sent may show them.</p>}
      </section>
    </>
  ));
}

export function registerMediaPages(app: Hono<DashEnv>): void {
  app.get("/images", (c) => imagesPage(c));
  app.get("/images/:id/delete", (c) => deleteImagePage(c));

  // An image for the editor: the file's bytes as the body (the type is read from them), its
  // name (URI-encoded) in X-File-Name.
  app.post("/api/media", async (c) => {
    const v = c.get("viewer");
    const declared = Number(c.req.header("content-length") ?? "0");
    const tooBig = (size: string) => new DashError(422, `The image is ${size}; at most 5 MB is accepted. Make it smaller (email images are best under 500 KB).`);
    if (declared > MAX_IMAGE_BYTES) throw tooBig(`${(declared / 1048576).toFixed(1)} MB`);
    // Read up to the limit only: a body sent without a length is stopped there, not buffered.
    const bytes = await readBodyLimited(c.req.raw, MAX_IMAGE_BYTES).catch((err: unknown) => {
      throw err instanceof ApiError && err.status === 413 ? tooBig("over 5 MB") : err;
    });
    let name: string | null = null;
    try {
      name = decodeURIComponent(c.req.header("x-file-name") ?? "");
    } catch {}
    try {
      const stored = await storeImage(c.env, v.account.id, bytes, dashboardOrigin(c.env, c.req.url), name);
      await audit(c.env, v, { action: "media.uploaded", target: stored.url, detail: { bytes: stored.bytes, type: stored.type, name: stored.name } });
      return json(stored, 201);
    } catch (err) {
      if (err instanceof ImageError) throw new DashError(422, err.message);
      throw err;
    }
  });

  // A page of the account's images, for the editor's picker.
  app.get("/api/media", async (c) => {
    const v = c.get("viewer");
    const limit = c.req.query("limit");
    try {
      return json(await listImages(c.env, v.account.id, dashboardOrigin(c.env, c.req.url), { limit: limit === undefined ? undefined : Number(limit), after: c.req.query("after") || undefined }));
    } catch (err) {
      if (err instanceof ImageError) throw new DashError(422, err.message);
      throw err;
    }
  });

  app.post("/api/media/:id/delete", async (c) => {
    const v = c.get("viewer");
    if (!v.canManage) throw new DashError(403, "Only owners and admins delete images, since emails already sent may show them. Ask one of them.");
    const r = await deleteImage(c.env, v.account.id, c.req.param("id"));
    if (!r.ok) throw new DashError(404, r.message);
    const url = await imageUrl(c.env.MASTER_KEY, dashboardOrigin(c.env, c.req.url), v.account.id, r.value.id, r.value.ext);
    await audit(c.env, v, { action: "media.deleted", target: url, detail: { bytes: r.value.bytes, type: r.value.type, name: r.value.name } });
    return c.json({ ok: true });
  });
}
