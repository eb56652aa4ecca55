// The account's uploaded images in the dashboard: the Images page (a grid of thumbnails with
// each one's size, date, URL to copy and a delete, beside the account's use of its media
// limit), and the JSON endpoints the editor uses (upload, and the list its image dialog picks
// from). Rules live in worker/media/; these routes only read the request and render.
// Deleting is for owners and admins, as deleting a template is: it breaks the image in every
// email already sent that shows it, which a member (who "sees and sends") should not do alone.
import type { Hono } from "hono";
import { ImageError, imageUrl, MAX_IMAGE_BYTES, storeImage } from "../media/images.ts";
import { deleteImage, listImages, mediaUsage, type LibraryImage, type MediaUsage } from "../media/library.ts";
import { formatBytes, formatCount } from "../media/sizes.ts";
import { Empty, Time } from "./layout.tsx";
import { DashError, json, page, type DashCtx, type DashEnv } from "./routes.tsx";
import { audit } from "./viewer.ts";
import { dashboardOrigin } from "./auth.ts";
import { ApiError } from "../errors.ts";
import { readBodyLimited } from "../http.ts";

const TYPE_NAMES: Record<string, string> = { "image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP" };

export const DELETE_WARNING = "Emails already sent that show it will show a broken image from now on, and so will drafts and templates that use it. This cannot be undone.";

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
        <img src={img.url} alt={`${name} (opens full size)`} loading="lazy" decoding="async" />
      </a>
      <div class="media-meta">
        <div class="media-name" title={name}>{name}</div>
        <div class="muted small">{TYPE_NAMES[img.type] ?? img.type} · {formatBytes(img.bytes)}</div>
        <div class="muted small"><Time at={img.created_at} /></div>
        <div class="media-actions">
          <button type="button" class="secondary" data-copy={img.url} aria-label={`Copy the URL of ${name}`}>Copy URL</button>
          {props.canDelete ? (
            <form method="post" class="inline" data-api={`/dashboard/api/media/${img.id}/delete`} data-confirm={`Delete ${name}? ${DELETE_WARNING}`}>
              <button type="submit" class="danger" aria-label={`Delete ${name}`}>Delete</button>
            </form>
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

export function registerMediaPages(app: Hono<DashEnv>): void {
  app.get("/images", (c) => imagesPage(c));

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
