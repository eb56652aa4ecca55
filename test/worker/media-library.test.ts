// An account's uploaded images as a library (worker/media/library.ts): listed newest first a
// page at a time with their URLs, counted against the account's limits, and deleted (bytes,
// then row) so their URLs answer 404; never across accounts. Then the dashboard's Images page
// and its endpoints, with the dashboard's session, CSRF and role checks.
import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { cleanImageName, objectKey, serveImage, storeImage, thumbFailedKey, thumbKey } from "../../worker/media/images.ts";
import { deletedImagesIn, deleteImage, imagePageQuery, imageUses, listImages, mediaUsage } from "../../worker/media/library.ts";
import { deleteConsequences } from "../../worker/dashboard/media.tsx";
import { call, createAccount } from "./fixtures.ts";
import { formatBytes } from "../../worker/media/sizes.ts";
import { signedIn, type DashboardRole } from "./dashboard-session.ts";
import { concatBytes } from "../../worker/bytes.ts";

const ORIGIN = "https://t.tern.test";
const PNG = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52, 1, 2, 3]);
const GIF = new TextEncoder().encode("GIF89a-a-tiny-gif");
const pngOf = (size: number) => {
  const b = new Uint8Array(size);
  b.set(PNG);
  return b;
};
/** A real PNG of w x h noise pixels (noise: it does not compress, so it is big enough to get a
 * thumbnail), with its chunks' CRCs. */
async function noisePng(w: number, h: number): Promise<Uint8Array> {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (b: Uint8Array) => {
    let c = 0xffffffff;
    for (const x of b) c = crcTable[(c ^ x) & 0xff]! ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Uint8Array) => {
    const out = new Uint8Array(12 + data.length);
    const v = new DataView(out.buffer);
    v.setUint32(0, data.length);
    out.set(new TextEncoder().encode(type), 4);
    out.set(data, 8);
    v.setUint32(8 + data.length, crc(out.subarray(4, 8 + data.length)));
    return out;
  };
  const ihdr = new Uint8Array(13);
  new DataView(ihdr.buffer).setUint32(0, w);
  new DataView(ihdr.buffer).setUint32(4, h);
  ihdr.set([8, 2, 0, 0, 0], 8);
  const raw = new Uint8Array(h * (1 + w * 3));
  for (let y = 0; y < h; y++) crypto.getRandomValues(raw.subarray(y * (1 + w * 3) + 1, (y + 1) * (1 + w * 3)));
  const zipped = new Uint8Array(await new Response(new Blob([raw]).stream().pipeThrough(new CompressionStream("deflate"))).arrayBuffer());
  const parts = [Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", ihdr), chunk("IDAT", zipped), chunk("IEND", new Uint8Array())];
  return concatBytes(parts);
}
const fetchPath = (url: string) => exports.default.fetch(url);
const held = async (accountId: string) => ({
  objects: (await env.BLOBS.list({ prefix: `media/${accountId}/` })).objects.length,
  rows: (await env.DB.prepare("SELECT count(*) AS n FROM media_images WHERE account_id = ?").bind(accountId).first<{ n: number }>())!.n,
});

/** Uploads `n` images a millisecond apart (their upload times differ), oldest first. */
async function upload(accountId: string, n: number, name = (i: number) => `image-${i}.png`) {
  const out = [];
  for (let i = 0; i < n; i++) {
    out.push(await storeImage(env, accountId, pngOf(100 + i), ORIGIN, name(i)));
    await new Promise((r) => setTimeout(r, 2));
  }
  return out;
}

describe("an account's image library", () => {
  it("lists the account's images newest first, a page at a time, each with its URL, name, size, type and time", async () => {
    const a = (await createAccount()).accountId;
    const b = (await createAccount()).accountId;
    const mine = await upload(a, 5);
    await storeImage(env, b, GIF, ORIGIN, "theirs.gif");

    const first = await listImages(env, a, ORIGIN, { limit: 2 });
    expect(first.has_more).toBe(true);
    expect(first.data.map((x) => x.name)).toEqual(["image-4.png", "image-3.png"]);
    expect(first.data[0]).toEqual({ id: mine[4]!.id, url: mine[4]!.url, name: "image-4.png", bytes: 104, type: "image/png", created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
    const second = await listImages(env, a, ORIGIN, { limit: 2, after: first.data[1]!.id });
    expect(second.data.map((x) => x.name)).toEqual(["image-2.png", "image-1.png"]);
    const third = await listImages(env, a, ORIGIN, { limit: 2, after: second.data[1]!.id });
    expect(third).toMatchObject({ has_more: false, data: [{ name: "image-0.png" }] });
    // The URLs listed are the ones the upload gave, and they serve the image.
    expect((await fetchPath(first.data[0]!.url)).status).toBe(200);

    // The other account sees only its own; a cursor from another account gives nothing.
    expect((await listImages(env, b, ORIGIN)).data.map((x) => [x.name, x.type])).toEqual([["theirs.gif", "image/gif"]]);
    expect((await listImages(env, b, ORIGIN, { after: mine[3]!.id })).data).toEqual([]);
    // Bad paging says what it takes.
    await expect(listImages(env, a, ORIGIN, { limit: 0 })).rejects.toThrow("`limit` is a whole number from 1 to 100.");
    await expect(listImages(env, a, ORIGIN, { after: "../x" })).rejects.toThrow(/`after` is the id of an image/);
  });

  it("pages through images uploaded in the same millisecond without skipping or repeating one", async () => {
    const a = (await createAccount()).accountId;
    const prefix = crypto.randomUUID().replace(/-/g, "").slice(0, 31);
    const ids = Array.from({ length: 5 }, (_, i) => `${prefix}${i}`);
    await env.DB.batch(ids.map((id) => env.DB.prepare("INSERT INTO media_images (id, account_id, bytes, ext, created_at) VALUES (?, ?, 10, 'png', 1000)").bind(id, a)));
    const seen: string[] = [];
    let after: string | undefined;
    for (;;) {
      const p = await listImages(env, a, ORIGIN, { limit: 2, after });
      seen.push(...p.data.map((x) => x.id));
      if (!p.has_more) break;
      after = p.data.at(-1)!.id;
    }
    expect(seen).toEqual([...ids].reverse());
    // Rows from before names were kept list without one.
    expect((await listImages(env, a, ORIGIN, { limit: 1 })).data[0]!.name).toBeNull();
  });

  it("walks the (account, upload time) index: a page reads its rows, not the account's", async () => {
    for (const after of [undefined, "0".repeat(32)]) {
      const q = imagePageQuery("acct", 49, after);
      const plan = (await env.DB.prepare(`EXPLAIN QUERY PLAN ${q.sql}`).bind(...q.params).all<{ detail: string }>()).results.map((r) => r.detail).join("\n");
      expect(plan).toContain("USING INDEX media_images_account_created (account_id=?");
      expect(plan).not.toMatch(/TEMP B-TREE|SCAN media_images/);
    }
  });

  it("counts what the account uses beside its limits", async () => {
    const a = (await createAccount()).accountId;
    expect(await mediaUsage(env, a)).toEqual({ bytes: 0, images: 0, limits: { bytes: 500 * 1048576, images: 10_000 } });
    await storeImage(env, a, pngOf(1500), ORIGIN);
    await storeImage(env, a, pngOf(500), ORIGIN);
    await storeImage(env, (await createAccount()).accountId, pngOf(9999), ORIGIN);
    expect(await mediaUsage({ ...env, MEDIA_ACCOUNT_LIMIT_MB: "0", MEDIA_ACCOUNT_LIMIT_IMAGES: "5" }, a)).toEqual({ bytes: 2000, images: 2, limits: { bytes: null, images: 5 } });
  });

  it("keeps a file name fit to show: no control or direction characters, 200 characters, never half of one", () => {
    expect(cleanImageName("C:\\Users\\ada\\invoice\u202Egnp.exe")).toBe("invoicegnp.exe");
    expect(cleanImageName("a\u0085b\u009Bc\u200Bd\u2066e\u2028f\u0007.png")).toBe("abcdef.png");
    const emoji = cleanImageName("x".repeat(199) + "\u{1F600}\u{1F600}");
    expect(emoji).toBe("x".repeat(199) + "\u{1F600}");
    expect(cleanImageName("\uD800.png")).toBe("\uFFFD.png");
    expect(cleanImageName("\u202E\u200B ")).toBeNull();
  });

  it("writes sizes as people read them", () => {
    expect([512, 48 * 1024, 12.34 * 1048576, 500 * 1048576, 1048576].map(formatBytes)).toEqual(["512 bytes", "48 KB", "12.3 MB", "500 MB", "1 MB"]);
  });
});

describe("deleting an image", () => {
  it("removes its bytes and its row, gives its space back, and its URL answers 404", async () => {
    const a = (await createAccount()).accountId;
    const [keep, gone] = await upload(a, 2);
    const r = await deleteImage(env, a, gone!.id);
    expect(r).toEqual({ ok: true, value: { id: gone!.id, name: "image-1.png", bytes: 101, ext: "png", type: "image/png" } });
    expect(await env.BLOBS.head(objectKey(a, gone!.id))).toBeNull();
    expect(await held(a)).toEqual({ objects: 1, rows: 1 });
    expect((await mediaUsage(env, a)).bytes).toBe(100);
    expect((await fetchPath(gone!.url)).status).toBe(404);
    expect((await fetchPath(keep!.url)).status).toBe(200);
    // Again: nothing left to delete, and it says so.
    expect(await deleteImage(env, a, gone!.id)).toEqual({ ok: false, message: expect.stringContaining("There is no such image in this account") });
  });

  it("never deletes another account's image, and answers it as it answers an unknown id", async () => {
    const a = (await createAccount()).accountId;
    const b = (await createAccount()).accountId;
    const [theirs] = await upload(b, 1);
    const other = await deleteImage(env, a, theirs!.id);
    const unknown = await deleteImage(env, a, "f".repeat(32));
    const malformed = await deleteImage(env, a, "../../etc");
    expect(other.ok).toBe(false);
    expect(other).toEqual(unknown);
    expect(malformed).toEqual(unknown);
    expect(await held(b)).toEqual({ objects: 1, rows: 1 });
    expect((await fetchPath(theirs!.url)).status).toBe(200);
  });

  it("never leaves bytes in R2 that no row counts: a failure between the two leaves the row, and deleting again finishes", async () => {
    const a = (await createAccount()).accountId;
    const [img] = await upload(a, 1);
    // R2 fails: nothing changed.
    const r2Down = { ...env, BLOBS: { delete: () => Promise.reject(new Error("R2 is down")) } as unknown as R2Bucket };
    await expect(deleteImage(r2Down, a, img!.id)).rejects.toThrow("R2 is down");
    expect(await held(a)).toEqual({ objects: 1, rows: 1 });
    // D1 fails after the bytes went: the row still counts them (the safe side of the limit).
    const d1Down = {
      ...env,
      DB: new Proxy(env.DB, {
        get: (db, k) => (k === "prepare" ? (sql: string) => (sql.startsWith("DELETE") ? { bind: () => ({ first: () => Promise.reject(new Error("D1 is down")) }) } : db.prepare(sql)) : Reflect.get(db, k)),
      }),
    };
    await expect(deleteImage(d1Down, a, img!.id)).rejects.toThrow("D1 is down");
    expect(await held(a)).toEqual({ objects: 0, rows: 1 });
    expect((await fetchPath(img!.url)).status).toBe(404);
    expect((await deleteImage(env, a, img!.id)).ok).toBe(true);
    expect(await held(a)).toEqual({ objects: 0, rows: 0 });
  });
});

describe("where an image is used, and thumbnails", () => {
  it("finds the broadcasts and templates that show an image, drafts first, never another account's; says what deleting breaks", async () => {
    const a = await createAccount();
    const b = await createAccount();
    const [img, other] = await upload(a.accountId, 2);
    const html = `<p>Sale</p><img src="${img!.url}" alt="Sale">`;
    const segment = (await call(a, "POST", "/segments", { name: "Uses" })).body.id;
    const draft = (await call(a, "POST", "/broadcasts", { segment_id: segment, name: "Spring draft", from: `n@${a.domain}`, subject: "S", html })).body.id;
    const sent = (await call(a, "POST", "/broadcasts", { segment_id: segment, name: "Winter sale", from: `n@${a.domain}`, subject: "S", html })).body.id;
    await env.DB.prepare("UPDATE broadcasts SET status = 'sent', recipient_count = 1200 WHERE id = ?").bind(sent).run();
    await call(a, "POST", "/broadcasts", { segment_id: segment, from: `n@${a.domain}`, subject: "S", html: `<img src="${other!.url}" alt="">` });
    const tpl = (await call(a, "POST", "/templates", { name: "Receipt", html })).body.id;
    expect((await call(a, "POST", `/templates/${tpl}/publish`)).status).toBe(200);
    const tplDraft = (await call(a, "POST", "/templates", { name: "Welcome", html: "<p>Hi</p>" })).body.id;
    expect((await call(a, "PATCH", `/templates/${tplDraft}`, { html })).status).toBe(200);
    // The same URL in another account's broadcast (pasted there) is not this account's use.
    const segB = (await call(b, "POST", "/segments", { name: "B" })).body.id;
    await call(b, "POST", "/broadcasts", { segment_id: segB, from: `n@${b.domain}`, subject: "S", html });

    const uses = await imageUses(env.DB, a.accountId, img!.id);
    expect(uses.broadcasts.map((x) => [x.id, x.status, x.recipients])).toEqual([[draft, "draft", 0], [sent, "sent", 1200]]);
    expect(uses.templates.map((x) => [x.id, x.draft, x.published]).sort()).toEqual([[tpl, true, true], [tplDraft, true, false]].sort());
    expect(deleteConsequences(uses)).toEqual([
      "A broadcast already sent to 1,200 recipients shows it: the copies in their inboxes load it from its URL, so they will show a broken image. That cannot be fixed once it is deleted.",
      "A broadcast not sent yet would go out with a broken image: replace it in its editor first.",
      "A published template would send a broken image with every email from now on, and mail already sent with it breaks too: replace it, then publish again.",
      "A template's draft would show a broken image once published.",
    ]);
    expect(await imageUses(env.DB, b.accountId, img!.id)).toEqual({ broadcasts: [], templates: [] });

    // The delete page lists them with links, then what deleting breaks, then the button.
    const owner = await person("owner", a.accountId);
    const page = await (await owner.get(`/dashboard/images/${img!.id}/delete`)).text();
    expect(page).toContain(`<a href="/dashboard/broadcasts/${draft}">Spring draft</a>`);
    expect(page).toContain(`<a href="/dashboard/broadcasts/${sent}">Winter sale</a>`);
    expect(page).toContain(`<a href="/dashboard/templates/${tpl}">Receipt</a></td><td>the published version and the draft</td>`);
    expect(page.indexOf("Winter sale")).toBeLessThan(page.indexOf("If you delete it"));
    expect(page.indexOf("already sent to 1,200 recipients")).toBeLessThan(page.indexOf("Delete the image"));

    // Once deleted, the reviews of what still shows it say so.
    expect(await deletedImagesIn(env.DB, a.accountId, html)).toEqual([]);
    expect((await owner.post(`/media/${img!.id}/delete`)).status).toBe(200);
    expect(await deletedImagesIn(env.DB, a.accountId, `${html}${html}<img src="${other!.url}">`)).toEqual([img!.url]);
    expect(await deletedImagesIn(env.DB, b.accountId, html)).toEqual([]);

    // Any body is read in time proportional to its length: 340 KB of link-like text once took
    // seconds (a pattern backtracking once per "http"); the URL is still found as written.
    const links = "http://x/media/a/".repeat(20_000);
    const started = performance.now();
    expect(await deletedImagesIn(env.DB, a.accountId, `<p>${links}</p>`)).toEqual([]);
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(await deletedImagesIn(env.DB, a.accountId, `<p>${links}${img!.url}</p>`)).toEqual([img!.url]);
  });

  it("serves a thumbnail made by the Images binding, kept in R2 and deleted with the image; a small image is its own", async () => {
    const a = (await createAccount()).accountId;
    const big = await storeImage(env, a, await noisePng(400, 300), ORIGIN, "photo.png");
    expect(big.bytes).toBeGreaterThan(300_000);
    const res = await fetchPath(`${big.url}?size=thumb`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/webp");
    expect(res.headers.get("content-security-policy")).toBe("default-src 'none'; sandbox");
    const thumb = new Uint8Array(await res.arrayBuffer());
    expect(thumb.length).toBeGreaterThan(0);
    expect(thumb.length).toBeLessThan(big.bytes / 2);
    expect(new TextDecoder().decode(thumb.subarray(8, 12))).toBe("WEBP");
    expect(await env.BLOBS.head(thumbKey(a, big.id))).not.toBeNull();
    // The full image is unchanged at its own URL; a bad signature gets no thumbnail either.
    expect((await fetchPath(big.url)).headers.get("content-type")).toBe("image/png");
    expect((await fetchPath(`${big.url.replace(/\/[A-Za-z0-9_-]{22}\./, "/AAAAAAAAAAAAAAAAAAAAAA.")}?size=thumb`)).status).toBe(404);
    // The binding failing (a failed transform) serves the image itself, never a broken tile.
    const other = await storeImage(env, a, await noisePng(300, 200), ORIGIN, "other.png");
    const [, , acct, oid, file] = new URL(other.url).pathname.split("/");
    let tried = 0;
    const broken = { ...env, IMAGES: { input: () => { tried++; throw new Error("Images is down"); } } as unknown as ImagesBinding };
    const fallbacks = await Promise.all([1, 2, 3].map(() => serveImage(broken, acct!, oid!, file!, true)));
    for (const fallback of fallbacks) {
      expect(fallback.headers.get("content-type")).toBe("image/png");
      // Cached for an hour, not a year: the thumbnail's URL shows the thumbnail once it can be made.
      expect(fallback.headers.get("cache-control")).toBe("public, max-age=3600");
      expect((await fallback.arrayBuffer()).byteLength).toBe(other.bytes);
    }
    expect(await env.BLOBS.head(thumbKey(a, other.id))).toBeNull();
    // Three requests at once made one attempt, and the failure is remembered: a public URL
    // cannot make the binding work on every request.
    expect(tried).toBe(1);
    await (await serveImage(broken, acct!, oid!, file!, true)).arrayBuffer();
    expect(tried).toBe(1);
    // Hours later it is tried again (and Images, back, makes it).
    const failedAt = await env.BLOBS.head(thumbFailedKey(a, other.id));
    expect(failedAt).not.toBeNull();
    await env.BLOBS.put(thumbFailedKey(a, other.id), "", { customMetadata: { at: String(Date.now() - 7 * 3600_000) } });
    const healed = await fetchPath(`${other.url}?size=thumb`);
    expect(healed.headers.get("content-type")).toBe("image/webp");
    await healed.arrayBuffer();
    expect((await deleteImage(env, a, other.id)).ok).toBe(true);
    expect(await env.BLOBS.head(thumbFailedKey(a, other.id))).toBeNull();
    // A small image is served as it is.
    const [small] = await upload(a, 1);
    const smallRes = await fetchPath(`${small!.url}?size=thumb`);
    expect(smallRes.headers.get("content-type")).toBe("image/png");
    expect((await smallRes.arrayBuffer()).byteLength).toBe(small!.bytes);
    // Deleting removes the thumbnail with the image: nothing stays in R2.
    expect((await deleteImage(env, a, big.id)).ok).toBe(true);
    expect(await env.BLOBS.head(thumbKey(a, big.id))).toBeNull();
    expect((await fetchPath(`${big.url}?size=thumb`)).status).toBe(404);
  });
});

// ---- the Images page and its endpoints ----------------------------------------------------

/** A signed-in person (as test/worker/dashboard.test.ts makes one). */
async function person(role: DashboardRole, accountId: string) {
  const { cookie, csrf } = await signedIn(role, accountId);
  return {
    get: (path: string) => exports.default.fetch(`${ORIGIN}${path}`, { headers: { cookie } }),
    post: (path: string, init: { csrf?: string | null; body?: BodyInit; headers?: Record<string, string> } = {}) =>
      exports.default.fetch(`${ORIGIN}/dashboard/api${path}`, {
        method: "POST",
        headers: { cookie, origin: ORIGIN, "content-type": "application/json", ...(init.csrf === null ? {} : { "x-csrf-token": init.csrf ?? csrf }), ...init.headers },
        body: init.body ?? "{}",
      }),
  };
}

const auditOf = async (accountId: string, action: string) =>
  (await env.DB.prepare("SELECT target, detail_json FROM audit_log WHERE account_id = ? AND action = ?").bind(accountId, action).all<{ target: string; detail_json: string }>()).results;

describe("the Images page", () => {
  it("says how images get there when there are none", async () => {
    const a = (await createAccount()).accountId;
    const owner = await person("owner", a);
    const html = await (await owner.get("/dashboard/images")).text();
    expect(html).toContain("No images uploaded yet.");
    expect(html).toMatch(/Upload one in the editor of a <a href="\/dashboard\/broadcasts">broadcast<\/a>/);
    expect(html).toContain("0 bytes of 500 MB</strong>, 0 of 10,000 images");
    expect(html).toContain('href="/dashboard/images" aria-current="page"');
  });

  it("stops an upload sent without a length at 5 MB instead of reading it whole", async () => {
    const a = (await createAccount()).accountId;
    const owner = await person("owner", a);
    let pulled = 0;
    const chunk = new Uint8Array(256 * 1024);
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        // 64 MB on offer; a reader that stops at the limit pulls a little over 5.
        if (pulled >= 64 * 1024 * 1024) return controller.close();
        pulled += chunk.byteLength;
        controller.enqueue(chunk);
      },
    });
    const res = await owner.post("/media", { body, headers: { "content-type": "image/png" } });
    expect(res.status).toBe(422);
    expect(((await res.json()) as { message: string }).message).toMatch(/over 5 MB; at most 5 MB/);
    expect(pulled).toBeLessThan(8 * 1024 * 1024);
    expect((await mediaUsage(env, a)).images).toBe(0);
  });

  it("uploads with the file's name, shows the grid with usage, and deletes with CSRF, the owner's role and an audit entry", async () => {
    const a = (await createAccount()).accountId;
    const b = (await createAccount()).accountId;
    const owner = await person("owner", a);
    const member = await person("member", a);
    const stranger = await person("owner", b);

    const up = await member.post("/media", { body: pngOf(2048), headers: { "content-type": "image/png", "x-file-name": encodeURIComponent("Spring sale\u0007 banner.png") } });
    expect(up.status, await up.clone().text()).toBe(201);
    const stored = (await up.json()) as { id: string; url: string; name: string };
    expect(stored.name).toBe("Spring sale banner.png");

    const html = await (await member.get("/dashboard/images")).text();
    // The grid asks for thumbnails in a fixed box, lazily, never the full image.
    expect(html).toContain(`<img src="${stored.url}?size=thumb" alt="Spring sale banner.png (opens full size)" width="240" height="140" loading="lazy" decoding="async"`);
    expect(html).toContain(`data-copy="${stored.url}"`);
    expect(html).toContain("2 KB of 500 MB</strong>, 1 of 10,000 images");
    // A member sees and copies, and is told who deletes; the owner gets the button and its warning.
    expect(html).not.toContain("/delete");
    expect(html).toContain("Only owners and admins delete images.");
    const ownerHtml = await (await owner.get("/dashboard/images")).text();
    expect(ownerHtml).toContain(`href="/dashboard/images/${stored.id}/delete"`);
    // Its delete page is the confirmation: where it is used (nowhere), what deleting breaks.
    const confirm = await (await owner.get(`/dashboard/images/${stored.id}/delete`)).text();
    expect(confirm).toContain(`data-api="/dashboard/api/media/${stored.id}/delete"`);
    expect(confirm).toContain("No broadcast or template of this account shows it.");
    expect(confirm).toContain("Emails already sent that show it will show a broken image");
    expect(await (await member.get(`/dashboard/images/${stored.id}/delete`)).text()).not.toContain(`/dashboard/api/media/${stored.id}/delete`);
    expect((await stranger.get(`/dashboard/images/${stored.id}/delete`)).status).toBe(404);
    // Another account's page and list do not show it.
    expect(await (await stranger.get("/dashboard/images")).text()).not.toContain(stored.id);
    expect(((await (await stranger.get("/dashboard/api/media")).json()) as { data: unknown[] }).data).toEqual([]);
    // The editor's list.
    const list = (await (await member.get("/dashboard/api/media?limit=5")).json()) as { data: { id: string; name: string }[]; has_more: boolean };
    expect(list).toMatchObject({ has_more: false, data: [{ id: stored.id, name: "Spring sale banner.png", bytes: 2048, type: "image/png" }] });
    expect((await member.get("/dashboard/api/media?limit=500")).status).toBe(422);

    // Refused: without the page's token, from a member, from another account (nothing changes).
    expect((await owner.post(`/media/${stored.id}/delete`, { csrf: null })).status).toBe(403);
    const byMember = await member.post(`/media/${stored.id}/delete`);
    expect(byMember.status).toBe(403);
    expect(((await byMember.json()) as { message: string }).message).toMatch(/Only owners and admins delete images/);
    const byStranger = await stranger.post(`/media/${stored.id}/delete`);
    expect(byStranger.status).toBe(404);
    expect(((await byStranger.json()) as { message: string }).message).toMatch(/There is no such image in this account/);
    expect(await held(a)).toEqual({ objects: 1, rows: 1 });
    expect(await auditOf(b, "media.deleted")).toEqual([]);

    const del = await owner.post(`/media/${stored.id}/delete`);
    expect(del.status, await del.clone().text()).toBe(200);
    expect(await held(a)).toEqual({ objects: 0, rows: 0 });
    expect((await fetchPath(stored.url)).status).toBe(404);
    expect(await auditOf(a, "media.deleted")).toEqual([{ target: stored.url, detail_json: JSON.stringify({ bytes: 2048, type: "image/png", name: "Spring sale banner.png" }) }]);
    expect((await owner.post(`/media/${stored.id}/delete`)).status).toBe(404);
    expect(await (await owner.get("/dashboard/images")).text()).toContain("No images uploaded yet.");
  });

  it("pages with Older and Newest, and answers a made-up cursor with a way back", async () => {
    const a = (await createAccount()).accountId;
    const owner = await person("admin", a);
    const prefix = crypto.randomUUID().replace(/-/g, "").slice(0, 28);
    await env.DB.batch(Array.from({ length: 50 }, (_, i) => env.DB.prepare("INSERT INTO media_images (id, account_id, bytes, ext, name, created_at) VALUES (?, ?, 10, 'png', ?, ?)").bind(`${prefix}${i.toString(16).padStart(4, "0")}`, a, `n${i}.png`, 1000 + i)));
    const first = await (await owner.get("/dashboard/images")).text();
    expect(first.match(/class="media-card"/g)).toHaveLength(48);
    const older = /href="(\/dashboard\/images\?after=[0-9a-f]{32})"/.exec(first)![1]!;
    const second = await (await owner.get(older)).text();
    expect(second.match(/class="media-card"/g)).toHaveLength(2);
    expect(second).toContain("n1.png");
    expect(second).toContain(">Newest</a>");
    const bad = await owner.get("/dashboard/images?after=nonsense");
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain("Show the newest images");
  });
});
