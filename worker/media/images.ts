// Images the editor uploads for emails, stored in R2 per account (media/{account}/{id}) and
// served by tern at /media/{account}/{id}/{signature}.{ext}. The URLs are public, because every
// recipient's mail client fetches them without a session, and permanent, because mail is read
// years later; they are signed (an HMAC of the account and id under the master key) so a URL
// cannot be made up or walked, and a request with a bad signature never reaches R2. The type
// is read from the bytes, never from the browser, and only PNG, JPEG, GIF and WebP are kept
// (SVG can carry script); they are served with that type, nosniff and a sandboxing CSP.
// Each image has a media_images row, and an account's rows may hold at most the operator's
// MEDIA_ACCOUNT_LIMIT_MB and MEDIA_ACCOUNT_LIMIT_IMAGES, so one tenant cannot fill the bucket.
import { constantTimeEqual, toBase64Url } from "../bytes.ts";
import { macKey } from "../crypto/master-key.ts";
import { mediaLimitsOf } from "../config.ts";
import { describeFailure } from "../errors.ts";

/** Email images beyond a few hundred KB slow every reader's download; 5 MB is a hard limit. */
export const MAX_IMAGE_BYTES = 5 * 1024 * 1024;

export const IMAGE_TYPES = { png: "image/png", jpg: "image/jpeg", gif: "image/gif", webp: "image/webp" } as const;
export type ImageExt = keyof typeof IMAGE_TYPES;

export class ImageError extends Error {}
/** The upload would take the account past its media limit: nothing was stored. */
export class MediaLimitError extends ImageError {}

/** The image format the bytes start with (their magic numbers), or null. */
export function sniffImage(b: Uint8Array): ImageExt | null {
  const at = (i: number, ...xs: number[]) => xs.every((x, j) => b[i + j] === x);
  if (at(0, 0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) return "png";
  if (at(0, 0xff, 0xd8, 0xff)) return "jpg";
  if (at(0, 0x47, 0x49, 0x46, 0x38) && (b[4] === 0x37 || b[4] === 0x39) && b[5] === 0x61) return "gif";
  if (at(0, 0x52, 0x49, 0x46, 0x46) && at(8, 0x57, 0x45, 0x42, 0x50)) return "webp";
  return null;
}

const ID = /^[0-9a-f]{32}$/;
const ACCOUNT = /^[A-Za-z0-9_-]{1,64}$/;

async function signature(masterKey: string | undefined, accountId: string, id: string): Promise<string> {
  const key = await macKey(masterKey, "link-token");
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, new TextEncoder().encode(`media:${accountId}/${id}`)));
  return toBase64Url(mac.slice(0, 16));
}

export function objectKey(accountId: string, id: string): string {
  return `media/${accountId}/${id}`;
}

/** The public, signed URL of an account's image under `origin`. */
export async function imageUrl(masterKey: string | undefined, origin: string, accountId: string, id: string, ext: string): Promise<string> {
  return `${origin}/media/${accountId}/${id}/${await signature(masterKey, accountId, id)}.${ext}`;
}

/** A file name as the browser gave it, fit to show: the last path part, without control or
 * format characters (a right-to-left override shows "invoice\u202Egnp.exe" as "invoiceexe.png"
 * and turns the rest of a sentence around it), at most 200 characters, never half of one;
 * null when nothing is left. */
export function cleanImageName(name: string | null | undefined): string | null {
  if (!name) return null;
  const base = (name.split(/[\\/]/).pop() ?? "").toWellFormed().replace(/[\p{Cc}\p{Cf}\u2028\u2029]/gu, "").replace(/\s+/g, " ").trim();
  return base ? [...base].slice(0, 200).join("") : null;
}

type StoreEnv = Pick<Env, "BLOBS" | "MASTER_KEY" | "DB"> & Partial<Pick<Env, "MEDIA_ACCOUNT_LIMIT_MB" | "MEDIA_ACCOUNT_LIMIT_IMAGES">>;

/** Checks and stores an uploaded image (`name`: the file's, shown in the library); answers its
 * public URL under `origin`. Throws MediaLimitError, storing nothing, when the account's images
 * would pass its limit. */
export async function storeImage(env: StoreEnv, accountId: string, bytes: Uint8Array, origin: string, name?: string | null): Promise<{ id: string; url: string; bytes: number; type: string; name: string | null }> {
  if (bytes.length === 0) throw new ImageError("The file is empty. Choose an image file.");
  if (bytes.length > MAX_IMAGE_BYTES) throw new ImageError(`The image is ${(bytes.length / 1048576).toFixed(1)} MB; at most 5 MB is accepted. Make it smaller (email images are best under 500 KB).`);
  const ext = sniffImage(bytes);
  if (!ext) throw new ImageError("That file is not a PNG, JPEG, GIF or WebP image. Save it in one of those formats and upload it again.");
  const id = [...crypto.getRandomValues(new Uint8Array(16))].map((x) => x.toString(16).padStart(2, "0")).join("");
  // The row is the reservation: the check and the insert are one statement, and D1 runs one
  // statement at a time, so two uploads at once cannot both pass the limit. It is written
  // before the bytes, so a refused upload never reaches R2.
  const limits = mediaLimitsOf(env);
  const reserved = await env.DB.prepare(
    `INSERT INTO media_images (id, account_id, bytes, ext, name, created_at)
     SELECT ?1, ?2, ?3, ?4, ?8, ?5
     WHERE (SELECT (?6 IS NULL OR coalesce(sum(bytes), 0) + ?3 <= ?6) AND (?7 IS NULL OR count(*) < ?7) FROM media_images WHERE account_id = ?2)
     RETURNING id`,
  ).bind(id, accountId, bytes.length, ext, Date.now(), limits.bytes, limits.images, cleanImageName(name)).first();
  if (!reserved) throw await limitError(env.DB, accountId, bytes.length, limits);
  try {
    await env.BLOBS.put(objectKey(accountId, id), bytes, { httpMetadata: { contentType: IMAGE_TYPES[ext] }, customMetadata: { account: accountId, ext } });
  } catch (err) {
    // A Worker that dies right here leaves a row without bytes: it counts against the limit
    // until the account is deleted, at most 5 MB an occurrence, the safe side of the limit.
    await env.DB.prepare(`DELETE FROM media_images WHERE id = ?1`).bind(id).run()
      .catch((e: unknown) => console.error("could not give back the space of an image R2 refused", id, describeFailure(e)));
    throw err;
  }
  return { id, url: await imageUrl(env.MASTER_KEY, origin, accountId, id, ext), bytes: bytes.length, type: IMAGE_TYPES[ext], name: cleanImageName(name) };
}

async function limitError(db: D1Database, accountId: string, bytes: number, limits: { bytes: number | null; images: number | null }): Promise<MediaLimitError> {
  const used = await db.prepare(`SELECT coalesce(sum(bytes), 0) AS bytes, count(*) AS images FROM media_images WHERE account_id = ?1`).bind(accountId).first<{ bytes: number; images: number }>();
  // Sizes rounded up, and the room left rounded down, so the sentence never reads as if the
  // image would fit.
  const size = (n: number, round: (x: number) => number = Math.ceil) =>
    n < 1024 && round === Math.floor ? `${n} bytes` : n < 1048576 ? `${round(n / 1024)} KB` : `${(round(n / 104857.6) / 10).toFixed(1)} MB`;
  const fix = "Reuse an image already uploaded (its URL works in any email), or ask the operator to raise";
  if (limits.images !== null && (used?.images ?? 0) >= limits.images) {
    return new MediaLimitError(`This account already has ${used?.images} uploaded images, its limit. ${fix} MEDIA_ACCOUNT_LIMIT_IMAGES.`);
  }
  const left = Math.max(0, (limits.bytes ?? 0) - (used?.bytes ?? 0));
  return new MediaLimitError(`This account's uploaded images leave ${size(left, Math.floor)} of its ${size(limits.bytes ?? 0)}, and this image takes ${size(bytes)}. ${fix} MEDIA_ACCOUNT_LIMIT_MB.`);
}

/** Thumbnails are this wide (the Images page's cards and the picker's tiles at twice their CSS
 * width), WebP, made once by the Images binding and kept in R2 beside the image. */
export const THUMB_WIDTH = 480;

export function thumbKey(accountId: string, id: string): string {
  return `media/${accountId}/${id}/thumb-${THUMB_WIDTH}`;
}

/** Marks a thumbnail that could not be made (its `at` the time of the failure), so that requests
 * for it serve the image until THUMB_RETRY_MS has passed instead of transforming it again. */
export function thumbFailedKey(accountId: string, id: string): string {
  return `${thumbKey(accountId, id)}.failed`;
}

/** How long a failed thumbnail is not tried again: long enough that a public URL cannot make the
 * binding work on every request, short enough that an outage of Images heals by itself. */
const THUMB_RETRY_MS = 6 * 3600_000;

/** The URL of an image's thumbnail: its own URL asking for the small size. */
export function thumbUrl(url: string): string {
  return `${url}?size=thumb`;
}

const HEADERS = {
  "x-content-type-options": "nosniff",
  "content-security-policy": "default-src 'none'; sandbox",
  "content-disposition": "inline",
  "cache-control": "public, max-age=31536000, immutable",
  "cross-origin-resource-policy": "cross-origin",
};
/** The image served in place of a thumbnail that could not be made: cached for an hour, not a
 * year, so that the thumbnail's URL shows the thumbnail once it can be made. */
const STANDIN_HEADERS = { ...HEADERS, "cache-control": "public, max-age=3600" };

/** The response for GET /media/{account}/{id}/{sig}.{ext}: the image, or a 404 that says nothing.
 * With `thumb`, its thumbnail (see thumbnail()), or the image itself where none can be made. */
export async function serveImage(env: Pick<Env, "BLOBS" | "MASTER_KEY"> & Partial<Pick<Env, "IMAGES">>, accountId: string, id: string, file: string, thumb = false): Promise<Response> {
  const notFound = () => new Response("Not found", { status: 404, headers: { "content-type": "text/plain; charset=utf-8", "x-content-type-options": "nosniff" } });
  const m = /^([A-Za-z0-9_-]{22})\.(png|jpg|gif|webp)$/.exec(file);
  if (!m || !ID.test(id) || !ACCOUNT.test(accountId)) return notFound();
  const enc = new TextEncoder();
  if (!constantTimeEqual(enc.encode(m[1]!), enc.encode(await signature(env.MASTER_KEY, accountId, id)))) return notFound();
  let standIn = false;
  if (thumb && env.IMAGES) {
    // The image's own size decides (a head, no bytes): a small one is as cheap as its thumbnail,
    // and a deleted one has none, whatever R2 still holds.
    const meta = await env.BLOBS.head(objectKey(accountId, id));
    if (!meta) return notFound();
    if (meta.size > THUMB_FROM_BYTES) {
      const small = await thumbnail({ BLOBS: env.BLOBS, IMAGES: env.IMAGES }, accountId, id);
      if (small) return new Response(small, { headers: { "content-type": "image/webp", ...HEADERS } });
      standIn = true;
    }
  }
  const obj = await env.BLOBS.get(objectKey(accountId, id));
  if (!obj) return notFound();
  const ext = (obj.customMetadata?.ext ?? m[2]) as ImageExt;
  // The type found at upload, never the one the URL names.
  return new Response(obj.body, { headers: { "content-type": IMAGE_TYPES[ext] ?? "application/octet-stream", ...(standIn ? STANDIN_HEADERS : HEADERS) } });
}

/** Images up to this size are their own thumbnail. */
const THUMB_FROM_BYTES = 48 * 1024;

type ThumbEnv = Pick<Env, "BLOBS" | "IMAGES">;

/** Thumbnails being made in this isolate: requests that come meanwhile wait for the same one. */
const making = new Map<string, Promise<ArrayBuffer | null>>();

/** An image's thumbnail bytes: kept in R2, or made now with the Images binding (in `wrangler dev`
 * and tests too: miniflare runs it on sharp) and kept. The URL is public, so each image is
 * transformed at one width, once (requests meanwhile in this isolate wait for it), and a
 * failure is remembered for THUMB_RETRY_MS: nobody can make the binding work on every request.
 * Null when there is none: the caller serves the image itself, never a broken tile. */
async function thumbnail(env: ThumbEnv, accountId: string, id: string): Promise<ArrayBuffer | null> {
  const kept = await env.BLOBS.get(thumbKey(accountId, id));
  if (kept) return kept.arrayBuffer();
  const failed = await env.BLOBS.head(thumbFailedKey(accountId, id));
  if (failed && Date.now() - Number(failed.customMetadata?.at ?? 0) < THUMB_RETRY_MS) return null;
  const key = thumbKey(accountId, id);
  let made = making.get(key);
  if (!made) {
    made = makeThumbnail(env, accountId, id).finally(() => making.delete(key));
    making.set(key, made);
  }
  return made;
}

async function makeThumbnail(env: ThumbEnv, accountId: string, id: string): Promise<ArrayBuffer | null> {
  const original = await env.BLOBS.get(objectKey(accountId, id));
  if (!original) return null;
  try {
    const out = await env.IMAGES.input(original.body).transform({ width: THUMB_WIDTH, fit: "scale-down" }).output({ format: "image/webp", quality: 80 });
    const bytes = await out.response().arrayBuffer();
    await env.BLOBS.put(thumbKey(accountId, id), bytes, { httpMetadata: { contentType: "image/webp" } });
    // Deleted meanwhile (deleteImage removes both keys): take the thumbnail back too, so no
    // bytes stay in R2 that no row counts.
    if (!(await env.BLOBS.head(objectKey(accountId, id)))) await env.BLOBS.delete(thumbKey(accountId, id));
    return bytes;
  } catch (err) {
    console.error("thumbnail not made; serving the image", accountId, id, err instanceof Error ? err.message : String(err));
    await env.BLOBS.put(thumbFailedKey(accountId, id), "", { customMetadata: { at: String(Date.now()) } }).catch(() => {});
    // Deleted meanwhile: the marker goes too.
    if (!(await env.BLOBS.head(objectKey(accountId, id)))) await env.BLOBS.delete(thumbFailedKey(accountId, id)).catch(() => {});
    return null;
  }
}
