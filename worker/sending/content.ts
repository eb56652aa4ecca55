// Where an email's content lives: small bodies in the D1 row, large bodies and every
// attachment in R2 (D1 statements and rows are size-limited; attachments are binary).
import type { EmailRow } from "../db/schema.ts";

export interface StoredAttachment {
  filename: string | null;
  content_type: string;
  content_id: string | null;
  size: number;
  /** R2 key of the bytes. */
  key: string;
}

export interface AttachmentBytes {
  filename?: string;
  contentType: string;
  contentId?: string;
  content: Uint8Array;
}

export interface EmailContent {
  html: string | null;
  text: string | null;
  attachments: AttachmentBytes[];
}

export class ContentMissingError extends Error {}

const bodyKey = (emailId: string) => `emails/${emailId}/body.json`;
const attachmentKey = (emailId: string, i: number) => `emails/${emailId}/attachments/${i}`;

/** Writes what must go to R2 and says what the D1 row keeps. Runs before the row is written,
 * so a row never points at content that is not there. */
export async function storeContent(
  bucket: R2Bucket,
  emailId: string,
  content: EmailContent,
  inlineLimit: number,
): Promise<{ html: string | null; text: string | null; contentKey: string | null; attachments: StoredAttachment[] }> {
  const attachments: StoredAttachment[] = [];
  const puts: Promise<unknown>[] = [];
  content.attachments.forEach((a, i) => {
    const key = attachmentKey(emailId, i);
    puts.push(bucket.put(key, a.content));
    attachments.push({ filename: a.filename ?? null, content_type: a.contentType, content_id: a.contentId ?? null, size: a.content.byteLength, key });
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

export async function loadBodies(bucket: R2Bucket, row: Pick<EmailRow, "html" | "text" | "contentKey">): Promise<{ html: string | null; text: string | null }> {
  if (!row.contentKey) return { html: row.html, text: row.text };
  const obj = await bucket.get(row.contentKey);
  if (!obj) throw new ContentMissingError(`content ${row.contentKey} is missing from R2`);
  return (await obj.json()) as { html: string | null; text: string | null };
}

export async function loadContent(bucket: R2Bucket, row: EmailRow): Promise<EmailContent> {
  const bodies = await loadBodies(bucket, row);
  const meta = JSON.parse(row.attachmentsJson) as StoredAttachment[];
  const attachments = await Promise.all(
    meta.map(async (m) => {
      const obj = await bucket.get(m.key);
      if (!obj) throw new ContentMissingError(`attachment ${m.key} is missing from R2`);
      return {
        filename: m.filename ?? undefined,
        contentType: m.content_type,
        contentId: m.content_id ?? undefined,
        content: new Uint8Array(await obj.arrayBuffer()),
      };
    }),
  );
  return { ...bodies, attachments };
}
