// An account's uploaded images as a library: the list (newest first, a page at a time, each with
// its public URL), the account's use of its media limit, and deleting one image. The dashboard's
// Images page and the editor's picker call these; every statement names the account, so one
// tenant never lists, counts or deletes another's images.
import { mediaLimitsOf, type MediaLimits } from "../config.ts";
import type { Result } from "../result.ts";
import { IMAGE_TYPES, ImageError, imageUrl, objectKey, type ImageExt } from "./images.ts";

export interface LibraryImage {
  id: string;
  /** The public, signed URL emails use. */
  url: string;
  /** The file's name at upload; null for uploads made before names were kept. */
  name: string | null;
  bytes: number;
  type: string;
  /** ISO 8601. */
  created_at: string;
}

export interface ImagePage {
  object: "list";
  has_more: boolean;
  data: LibraryImage[];
}

export interface MediaUsage {
  bytes: number;
  images: number;
  /** null: no limit. */
  limits: MediaLimits;
}

const ID = /^[0-9a-f]{32}$/;

type LibraryEnv = Pick<Env, "DB" | "MASTER_KEY"> & Partial<Pick<Env, "MEDIA_ACCOUNT_LIMIT_MB" | "MEDIA_ACCOUNT_LIMIT_IMAGES">>;
type Row = { id: string; bytes: number; ext: string; name: string | null; created_at: number };

/** The SQL of one page: the account's images newest first, after the image `after` (whose
 * upload time and id are the cursor, read from its own row within the account, so an unknown
 * or another account's id gives an empty page). The (account_id, created_at, id) index walks
 * it: a page reads its own rows, not the account's thousands. */
export function imagePageQuery(accountId: string, limit: number, after?: string): { sql: string; params: unknown[] } {
  const cursor = after ? ` AND (created_at, id) < (SELECT created_at, id FROM media_images WHERE account_id = ?1 AND id = ?3)` : "";
  return {
    sql: `SELECT id, bytes, ext, name, created_at FROM media_images WHERE account_id = ?1${cursor} ORDER BY created_at DESC, id DESC LIMIT ?2`,
    params: after ? [accountId, limit, after] : [accountId, limit],
  };
}

/** One page of the account's images, newest first. `limit` 1 to 100 (default 48, a grid of
 * 2, 3, 4 or 6 across); `after` the last id of the page before. */
export async function listImages(env: LibraryEnv, accountId: string, origin: string, page: { limit?: number; after?: string | undefined } = {}): Promise<ImagePage> {
  const limit = page.limit ?? 48;
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new ImageError("`limit` is a whole number from 1 to 100.");
  if (page.after !== undefined && !ID.test(page.after)) throw new ImageError("`after` is the id of an image (32 hex digits), as a page of images gives it.");
  const q = imagePageQuery(accountId, limit + 1, page.after);
  const rows = (await env.DB.prepare(q.sql).bind(...q.params).all<Row>()).results;
  const data = await Promise.all(rows.slice(0, limit).map(async (r) => ({
    id: r.id,
    url: await imageUrl(env.MASTER_KEY, origin, accountId, r.id, r.ext),
    name: r.name,
    bytes: r.bytes,
    type: IMAGE_TYPES[r.ext as ImageExt] ?? "application/octet-stream",
    created_at: new Date(r.created_at).toISOString(),
  })));
  return { object: "list", has_more: rows.length > limit, data };
}

/** What the account's images take, beside the operator's limits: the same sum and count the
 * upload checks (worker/media/images.ts). */
export async function mediaUsage(env: LibraryEnv, accountId: string): Promise<MediaUsage> {
  const used = await env.DB.prepare(`SELECT coalesce(sum(bytes), 0) AS bytes, count(*) AS images FROM media_images WHERE account_id = ?1`)
    .bind(accountId).first<{ bytes: number; images: number }>();
  return { bytes: used?.bytes ?? 0, images: used?.images ?? 0, limits: mediaLimitsOf(env) };
}

export interface DeletedImage {
  id: string;
  name: string | null;
  bytes: number;
  ext: string;
  type: string;
}

/** Deletes one of the account's images: its bytes in R2, then its row. Its URL answers 404 from
 * then on, in every email that shows it. An id that is not one of this account's images (unknown,
 * malformed, deleted already, or another account's) changes nothing and says so, in the same
 * words whichever it is, so an id cannot be probed across accounts.
 *
 * The bytes go first: the row is what the limit counts, so a Worker that dies between the two
 * leaves a row without bytes (its space still counted, its URL already 404, deleting it again
 * finishes the job), never bytes in R2 that no row counts. The other order could leave R2
 * holding objects the limit no longer sees, a leak the tenant could repeat. */
export async function deleteImage(env: Pick<Env, "DB" | "BLOBS">, accountId: string, id: string): Promise<Result<DeletedImage>> {
  const gone = { ok: false as const, message: "There is no such image in this account: it was deleted already, or the id is wrong. Reload the page to see the account's images." };
  if (!ID.test(id)) return gone;
  const row = await env.DB.prepare(`SELECT id, bytes, ext, name FROM media_images WHERE account_id = ?1 AND id = ?2`).bind(accountId, id).first<Omit<Row, "created_at">>();
  if (!row) return gone;
  await env.BLOBS.delete(objectKey(accountId, id));
  // Of two deletes at once, the one whose statement removed the row reports it.
  const removed = await env.DB.prepare(`DELETE FROM media_images WHERE account_id = ?1 AND id = ?2 RETURNING id`).bind(accountId, id).first();
  if (!removed) return gone;
  return { ok: true, value: { id, name: row.name, bytes: row.bytes, ext: row.ext, type: IMAGE_TYPES[row.ext as ImageExt] ?? "application/octet-stream" } };
}
