// Where an email's content lives: small bodies in the D1 row, large bodies and every
// attachment in R2 (D1 statements and rows are size-limited; attachments are binary).
// Attachments move in pieces both ways (issue 20, item 3): a fetched `path` is written to R2
// as it arrives, and delivery reads each attachment back as a stream every time the message
// is made, so no isolate holds a large attachment whole.
import type { EmailRow } from "../db/schema.ts";
import type { ByteSource, MimeAttachment } from "../mime/build.ts";
import type { OutboundBody } from "../net/outbound.ts";
import type { DecodedContent } from "./attachments.ts";
import { describeFailure } from "../errors.ts";
import { putFixed } from "../r2-put.ts";

export interface StoredAttachment {
  filename: string | null;
  content_type: string;
  content_id: string | null;
  size: number;
  /** R2 key of the bytes. */
  key: string;
}

/** Bytes already in R2 (a fetched `path`, written there as it arrived). */
export interface StoredBytes {
  key: string;
  size: number;
}

/** An attachment at acceptance: its bytes in memory (`content`) or already in R2 (`path`). */
export interface AttachmentBytes {
  filename?: string;
  contentType: string;
  contentId?: string;
  content: Uint8Array | StoredBytes;
}

/** An email's content to store. */
export interface ContentToStore {
  html: string | null;
  text: string | null;
  attachments: AttachmentBytes[];
}

/** An email's content as delivery reads it: each attachment a stream it opens on demand. */
export interface EmailContent {
  html: string | null;
  text: string | null;
  attachments: MimeAttachment[];
}

export class ContentMissingError extends Error {}

export function byteLength(content: Uint8Array | StoredBytes): number {
  return content instanceof Uint8Array ? content.byteLength : content.size;
}

export const bodyKey = (emailId: string) => `emails/${emailId}/body.json`;
export const attachmentKey = (emailId: string, i: number) => `emails/${emailId}/attachments/${i}`;

/** Writes what must go to R2 and says what the D1 row keeps. Runs before the row is written,
 * so a row never points at content that is not there. Attachments already in R2 stay where
 * they are (their keys are this email's). */
export async function storeContent(
  bucket: R2Bucket,
  emailId: string,
  content: ContentToStore,
  inlineLimit: number,
): Promise<{ html: string | null; text: string | null; contentKey: string | null; attachments: StoredAttachment[] }> {
  const attachments: StoredAttachment[] = [];
  const puts: Promise<unknown>[] = [];
  content.attachments.forEach((a, i) => {
    let key: string;
    if (a.content instanceof Uint8Array) {
      key = attachmentKey(emailId, i);
      puts.push(bucket.put(key, a.content));
    } else {
      key = a.content.key;
    }
    attachments.push({ filename: a.filename ?? null, content_type: a.contentType, content_id: a.contentId ?? null, size: byteLength(a.content), key });
  });
  const bodyBytes = (content.html?.length ?? 0) + (content.text?.length ?? 0);
  let inline = { html: content.html, text: content.text, contentKey: null as string | null };
  if (bodyBytes > inlineLimit) {
    puts.push(bucket.put(bodyKey(emailId), JSON.stringify({ html: content.html, text: content.text })));
    inline = { html: null, text: null, contentKey: bodyKey(emailId) };
  }
  await Promise.all(puts);
  return { ...inline, attachments };
}

/** Every R2 key a stored or half-stored email may have written (what a refused send deletes). */
export function contentKeys(emailId: string, attachments: number): string[] {
  return [bodyKey(emailId), ...Array.from({ length: attachments }, (_, i) => attachmentKey(emailId, i))];
}

/** R2 takes a stream of unknown length only as a multipart upload, whose parts but the last
 * must be at least 5 MiB and all of one size: one part is the most a fetch holds at a time. */
const PART_BYTES = 5 * 1024 * 1024;

/**
 * Writes a fetched body to R2 under `key` as it arrives. With a declared length it goes
 * through a FixedLengthStream into one put (R2 needs the length of a streamed put); without
 * one, a body under one part is put whole and a longer one goes up as a multipart upload of
 * 5 MiB parts. If the body fails (over the limit, broken, too slow: an OutboundBodyError) or
 * R2 does, whatever was written is removed before the error is thrown on.
 */
export async function storeFetched(bucket: R2Bucket, key: string, body: OutboundBody): Promise<StoredBytes> {
  try {
    if (body.declaredLength !== null) return { key, size: await putFixed(bucket, key, body.chunks, body.declaredLength) };
    return { key, size: await putParts(bucket, key, body.chunks) };
  } catch (err) {
    await bucket.delete(key).catch((e: unknown) => console.error("could not delete a refused attachment", key, describeFailure(e)));
    throw err;
  }
}

/** Writes decoded base64 `content` to R2 under `key` a slice at a time, through a
 * FixedLengthStream into one put (its size is known from the base64). If R2 fails, whatever
 * was written is removed before the error is thrown on. */
export async function storeDecoded(bucket: R2Bucket, key: string, content: DecodedContent): Promise<StoredBytes> {
  try {
    // A small one is put whole: one slice, copied out of the decoder's reused buffer.
    if (content.size <= 64 * 1024) {
      const whole = new Uint8Array(content.size);
      let at = 0;
      for (const slice of content.slices()) {
        whole.set(slice, at);
        at += slice.byteLength;
      }
      await bucket.put(key, whole);
      return { key, size: content.size };
    }
    return { key, size: await putFixed(bucket, key, content.slices(), content.size) };
  } catch (err) {
    await bucket.delete(key).catch((e: unknown) => console.error("could not delete a refused attachment", key, describeFailure(e)));
    throw err;
  }
}

async function putParts(bucket: R2Bucket, key: string, chunks: AsyncIterable<Uint8Array>): Promise<number> {
  const part = new Uint8Array(PART_BYTES);
  let filled = 0;
  let total = 0;
  let upload: R2MultipartUpload | undefined;
  const uploaded: R2UploadedPart[] = [];
  try {
    for await (const chunk of chunks) {
      for (let at = 0; at < chunk.length; ) {
        if (filled === PART_BYTES) {
          upload ??= await bucket.createMultipartUpload(key);
          uploaded.push(await upload.uploadPart(uploaded.length + 1, part));
          filled = 0;
        }
        const n = Math.min(PART_BYTES - filled, chunk.length - at);
        part.set(chunk.subarray(at, at + n), filled);
        filled += n;
        at += n;
        total += n;
      }
    }
    if (!upload) {
      await bucket.put(key, part.subarray(0, filled));
      return total;
    }
    if (filled > 0) uploaded.push(await upload.uploadPart(uploaded.length + 1, part.subarray(0, filled)));
    await upload.complete(uploaded);
    return total;
  } catch (err) {
    await upload?.abort().catch(() => {});
    throw err;
  }
}

export async function loadBodies(bucket: R2Bucket, row: Pick<EmailRow, "html" | "text" | "contentKey">): Promise<{ html: string | null; text: string | null }> {
  if (!row.contentKey) return { html: row.html, text: row.text };
  const obj = await bucket.get(row.contentKey);
  if (!obj) throw new ContentMissingError(`content ${row.contentKey} is missing from R2`);
  return (await obj.json()) as { html: string | null; text: string | null };
}

/** The email's content for delivery. Each attachment is checked to be in R2 with its size now
 * (so a missing one fails the email before anything is sent) and read as a stream each time
 * the message is made. */
export async function loadContent(bucket: R2Bucket, row: EmailRow): Promise<EmailContent> {
  const bodies = await loadBodies(bucket, row);
  const meta = JSON.parse(row.attachmentsJson) as StoredAttachment[];
  const attachments = await Promise.all(
    meta.map(async (m): Promise<MimeAttachment> => {
      const head = await bucket.head(m.key);
      if (!head) throw new ContentMissingError(`attachment ${m.key} is missing from R2`);
      if (head.size !== m.size) throw new ContentMissingError(`attachment ${m.key} has ${head.size} bytes in R2, not ${m.size}`);
      const attachment: MimeAttachment = { contentType: m.content_type, content: r2Source(bucket, m.key, m.size) };
      if (m.filename !== null) attachment.filename = m.filename;
      if (m.content_id !== null) attachment.contentId = m.content_id;
      return attachment;
    }),
  );
  return { ...bodies, attachments };
}

/** What one read of a stored attachment brings at most. */
const READ_BYTES = 64 * 1024;

/** An R2 object read as a stream each time, into one reused buffer (a BYOB reader: a new
 * buffer per chunk left the attachment again in garbage at every read, and a message is read
 * once for its DKIM hash and once for each recipient's DATA). A chunk is only valid until the
 * next one is asked for. */
function r2Source(bucket: R2Bucket, key: string, size: number): ByteSource {
  return {
    size,
    async *read() {
      const obj = await bucket.get(key);
      if (!obj) throw new ContentMissingError(`attachment ${key} is missing from R2`);
      const reader = obj.body.getReader({ mode: "byob" });
      let buffer = new ArrayBuffer(READ_BYTES);
      let done = false;
      try {
        for (;;) {
          const r = await reader.read(new Uint8Array(buffer));
          if (r.done) break;
          const chunk = new Uint8Array(r.value.buffer, r.value.byteOffset, r.value.byteLength);
          buffer = chunk.buffer as ArrayBuffer;
          yield chunk;
        }
        done = true;
      } finally {
        if (!done) reader.cancel().catch(() => {});
      }
    },
  };
}
