// An account's uploaded images as a library: the list (newest first, a page at a time, each with
// its public URL), the account's use of its media limit, and deleting one image. The dashboard's
// Images page and the editor's picker call these; every statement names the account, so one
// tenant never lists, counts or deletes another's images.
import { mediaLimitsOf, type MediaLimits } from "../config.ts";
import type { Result } from "../result.ts";
import { IMAGE_TYPES, ImageError, imageUrl, objectKey, thumbFailedKey, thumbKey, type ImageExt } from "./images.ts";

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
  await env.BLOBS.delete([objectKey(accountId, id), thumbKey(accountId, id), thumbFailedKey(accountId, id)]);
  // Of two deletes at once, the one whose statement removed the row reports it.
  const removed = await env.DB.prepare(`DELETE FROM media_images WHERE account_id = ?1 AND id = ?2 RETURNING id`).bind(accountId, id).first();
  if (!removed) return gone;
  return { ok: true, value: { id, name: row.name, bytes: row.bytes, ext: row.ext, type: IMAGE_TYPES[row.ext as ImageExt] ?? "application/octet-stream" } };
}

/** One of the account's images by id (null: not this account's, or no such image). */
export async function findImage(env: LibraryEnv, accountId: string, origin: string, id: string): Promise<LibraryImage | null> {
  if (!ID.test(id)) return null;
  const r = await env.DB.prepare(`SELECT id, bytes, ext, name, created_at FROM media_images WHERE account_id = ?1 AND id = ?2`).bind(accountId, id).first<Row>();
  if (!r) return null;
  return {
    id: r.id, url: await imageUrl(env.MASTER_KEY, origin, accountId, r.id, r.ext), name: r.name, bytes: r.bytes,
    type: IMAGE_TYPES[r.ext as ImageExt] ?? "application/octet-stream", created_at: new Date(r.created_at).toISOString(),
  };
}

/** The part of an image's URL that names it whatever the origin (the dashboard's, PUBLIC_URL):
 * its id is 128 random bits, so the path alone finds it in a body. */
export function imagePath(accountId: string, id: string): string {
  return `/media/${accountId}/${id}/`;
}

export interface ImageUses {
  /** Broadcasts whose body shows it, drafts first; `status` as the API names it. */
  broadcasts: { id: string; name: string | null; subject: string | null; status: string; recipients: number }[];
  /** Templates whose draft or published version shows it. */
  templates: { id: string; name: string; draft: boolean; published: boolean }[];
}

/** Where the account's broadcasts and templates show an image, for the owner to see before
 * deleting it: a draft or a template would show a broken image from then on, and a broadcast
 * already sent points every recipient's copy at its URL. A scan of the account's bodies
 * (instr, no index): an account has tens or hundreds of them, and this runs only when someone
 * is about to delete an image. Emails sent through the API with the URL are not searched: their
 * bodies are not kept for this. */
export async function imageUses(db: D1Database, accountId: string, id: string): Promise<ImageUses> {
  const path = imagePath(accountId, id);
  const [b, t] = await db.batch([
    db.prepare(
      `SELECT id, name, subject, status, recipient_count FROM broadcasts
       WHERE account_id = ?1 AND (instr(coalesce(html, ''), ?2) > 0 OR instr(coalesce(text, ''), ?2) > 0 OR instr(coalesce(document_json, ''), ?2) > 0)
       ORDER BY CASE status WHEN 'draft' THEN 0 WHEN 'scheduled' THEN 1 WHEN 'queued' THEN 2 WHEN 'sending' THEN 3 ELSE 4 END, id DESC LIMIT 200`,
    ).bind(accountId, path),
    db.prepare(
      `SELECT id, name, instr(draft_json, ?2) > 0 AS in_draft, instr(coalesce(published_json, ''), ?2) > 0 AS in_published FROM templates
       WHERE account_id = ?1 AND (instr(draft_json, ?2) > 0 OR instr(coalesce(published_json, ''), ?2) > 0 OR instr(coalesce(document_json, ''), ?2) > 0)
       ORDER BY id DESC LIMIT 200`,
    ).bind(accountId, path),
  ]);
  return {
    broadcasts: (b!.results as { id: string; name: string | null; subject: string | null; status: string; recipient_count: number }[])
      .map((r) => ({ id: r.id, name: r.name, subject: r.subject, status: r.status, recipients: r.recipient_count })),
    templates: (t!.results as { id: string; name: string; in_draft: number; in_published: number }[])
      .map((r) => ({ id: r.id, name: r.name, draft: !!r.in_draft, published: !!r.in_published })),
  };
}

/** The absolute URL whose path is html[start, end): read back to the nearest http(s) scheme,
 * never across a space, quote or bracket and at most URL_HEAD characters, or null. */
function urlEndingIn(html: string, start: number, end: number): string | null {
  let i = start;
  const stop = Math.max(0, start - URL_HEAD);
  while (i > stop && !/[\s"'<>()]/.test(html[i - 1]!)) i--;
  const head = html.slice(i, start);
  const at = Math.max(head.lastIndexOf("http://"), head.lastIndexOf("https://"));
  return at < 0 ? null : html.slice(i + at, end);
}
/** Characters of scheme and host read back from an image's path (a media URL's are a few dozen). */
const URL_HEAD = 512;

/** Images uploaded to this account that a body shows but that were deleted since: readers would
 * see a broken image. Each missing image's URL as the body has it, once. */
export async function deletedImagesIn(db: D1Database, accountId: string, html: string | null): Promise<string[]> {
  if (!html) return [];
  const found = new Map<string, string>();
  // The path's fixed shape is matched, then its URL's start is read back from it: a pattern
  // starting at "http" with a free run before /media/ backtracked once per "http" in a run, and a
  // body of repeated links took seconds per 100 KB.
  const tail = /\/media\/([A-Za-z0-9_-]{1,64})\/([0-9a-f]{32})\/[A-Za-z0-9_-]{22}\.(?:png|jpg|gif|webp)/g;
  for (const m of html.matchAll(tail)) {
    if (m[1] !== accountId || found.has(m[2]!)) continue;
    const url = urlEndingIn(html, m.index, m.index + m[0].length);
    if (url) found.set(m[2]!, url);
  }
  if (found.size === 0) return [];
  const ids = [...found.keys()];
  const present = new Set<string>();
  // D1 binds at most 100 parameters to a statement.
  for (let i = 0; i < ids.length; i += 90) {
    const part = ids.slice(i, i + 90);
    const rows = await db.prepare(`SELECT id FROM media_images WHERE account_id = ?1 AND id IN (${part.map((_, j) => `?${j + 2}`).join(", ")})`).bind(accountId, ...part).all<{ id: string }>();
    for (const r of rows.results) present.add(r.id);
  }
  return ids.filter((i) => !present.has(i)).map((i) => found.get(i)!);
}
