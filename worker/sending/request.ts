// The send request of contract section 4.1 as a zod schema: the one definition that validates
// POST /emails and /emails/batch and documents them in the OpenAPI document.
import { z } from "@hono/zod-openapi";
import { parseMailbox } from "../mime/address.ts";
import { isOwnedHeaderName, isValidHeaderName } from "../mime/build.ts";
import { isTraceHeaderName } from "../../smtp-bridge/trace-headers.ts";
import { MAX_SCHEDULED_AT_LENGTH } from "./schedule.ts";

/** `template` on a send (worker/templates/send.ts applies it). */
export const EmailTemplateInput = z.object({
  id: z.string({ error: "must be a template id or alias." }).min(1, "must be a template id or alias.").max(256),
  variables: z.record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null(), z.array(z.unknown()), z.record(z.string(), z.unknown())])).optional(),
}).openapi("EmailTemplateInput", { description: "A published template and the values of its variables; html and text then come from it." });

export const MAX_RECIPIENTS_PER_FIELD = 50;
export const MAX_SUBJECT_LENGTH = 998;
export const MAX_TAGS = 75;
export const MAX_ATTACHMENTS = 100;
export const MAX_HEADERS = 100;
export const MAX_HEADER_NAME_LENGTH = 76;
export const MAX_HEADER_VALUE_LENGTH = 2000;
/** In characters (code points), as JSON Schema's maxLength counts them. */
export const MAX_FILENAME_LENGTH = 255;
/** Content-IDs are shorter than this many characters. */
export const CONTENT_ID_LIMIT = 128;

/** Headers tern writes itself (the MIME builder's list, plus Reply-To, set by `reply_to`). */
function isReservedHeader(name: string): boolean {
  return isOwnedHeaderName(name) || name.toLowerCase() === "reply-to";
}

const Mailbox = z.string({ error: "must be a string." }).refine((s) => parseMailbox(s) !== null, {
  message: "must be an email address like `a@example.com` or `Name <a@example.com>`.",
});

function addressList(required: boolean) {
  const base = z.union([
    Mailbox,
    z.array(Mailbox)
      .min(required ? 1 : 0, "must list at least one address.")
      .max(MAX_RECIPIENTS_PER_FIELD, `must list at most ${MAX_RECIPIENTS_PER_FIELD} addresses.`),
  ], { error: "must be an email address or an array of email addresses." });
  return base.openapi({ description: "An address or an array of addresses (at most 50)." });
}

// Name and value rules stay in the superRefine, not in key and value schemas: a header with
// several faults is refused for the first in this order, as before; the document states them.
const Headers = z
  .record(z.string(), z.string({ error: "must be a string." }).openapi({ maxLength: MAX_HEADER_VALUE_LENGTH, description: "Without line breaks." }))
  // zod has no size check for records: the refinement enforces it, maxProperties states it.
  .refine((headers) => Object.keys(headers).length <= MAX_HEADERS, `must have at most ${MAX_HEADERS} headers.`)
  .superRefine((headers, ctx) => {
    for (const name of Object.keys(headers)) {
      const value = headers[name]!;
      if (!isValidHeaderName(name) || name.length > MAX_HEADER_NAME_LENGTH) {
        ctx.addIssue({ code: "custom", path: [name], message: "is not a valid header name (printable ASCII without `:` or spaces)." });
      } else if (isReservedHeader(name)) {
        const hint = name.toLowerCase() === "reply-to" ? " Use `reply_to`." : "";
        ctx.addIssue({ code: "custom", path: [name], message: `cannot be set: tern sets this header itself.${hint}` });
      } else if (isTraceHeaderName(name)) {
        // Refused, not dropped: an API caller hears why the header did not go out.
        ctx.addIssue({ code: "custom", path: [name], message: "cannot be set: it is a trace or verdict header, written only by the servers a message passes through." });
      } else if (/[\r\n\0]/.test(value)) {
        ctx.addIssue({ code: "custom", path: [name], message: "must not contain line breaks." });
      } else if (value.length > MAX_HEADER_VALUE_LENGTH) {
        ctx.addIssue({ code: "custom", path: [name], message: `must be at most ${MAX_HEADER_VALUE_LENGTH} characters.` });
      }
    }
  })
  .openapi({
    description: `Custom headers, name to value: at most ${MAX_HEADERS}. A name is 1 to ${MAX_HEADER_NAME_LENGTH} printable ASCII characters without \`:\` or spaces; headers tern sets itself (From, To, Subject, Reply-To, MIME headers...) and trace headers cannot be set.`,
    maxProperties: MAX_HEADERS,
    example: { "X-Entity-Ref-ID": "123" },
  });

const TagPart = z
  .string({ error: "must be a string." })
  .min(1, "must not be empty.")
  .max(256, "must be at most 256 characters.")
  .regex(/^[A-Za-z0-9_-]+$/, "must contain only ASCII letters, numbers, underscores or dashes.");

const Tag = z.object({ name: TagPart, value: TagPart });

// An attachment's fields are checked as it is resolved (worker/sending/attachments.ts), after
// the sender's domain, so their limits are stated here and enforced there.
export const AttachmentRequest = z
  .object({
    filename: z.string().optional().openapi({ maxLength: MAX_FILENAME_LENGTH, description: "Without line breaks or other control characters." }),
    content: z.unknown().optional().openapi({
      description: "Base64 string, array of bytes, or {type: \"Buffer\", data: [...]}.",
      type: "string",
    }),
    path: z.string().optional().openapi({ description: "An https URL tern fetches the content from." }),
    content_type: z.string().optional(),
    contentType: z.string().optional().openapi({ description: "Alias of content_type." }),
    content_id: z.string().optional().openapi({ maxLength: CONTENT_ID_LIMIT - 1, description: "Makes the attachment inline, referenced as cid:<content_id>. Printable ASCII without spaces or angle brackets." }),
    inline_content_id: z.string().optional().openapi({ maxLength: CONTENT_ID_LIMIT - 1, description: "Alias of content_id." }),
  })
  .openapi("Attachment");

export const SendEmailRequest = z
  .object({
    from: Mailbox.openapi({ example: "Acme <onboarding@acme.dev>" }),
    to: addressList(true),
    subject: z
      .string({ error: "must be a string." })
      .min(1, "must not be empty.")
      .max(MAX_SUBJECT_LENGTH, `must be at most ${MAX_SUBJECT_LENGTH} characters.`)
      .refine((s) => !/[\r\n\0]/.test(s), "must not contain line breaks."),
    cc: addressList(false).optional(),
    bcc: addressList(false).optional(),
    reply_to: addressList(false).optional(),
    html: z.string({ error: "must be a string." }).optional(),
    text: z.string({ error: "must be a string." }).optional().openapi({
      description: "Derived from html when absent; an empty string opts out.",
    }),
    headers: Headers.optional(),
    attachments: z.array(AttachmentRequest).max(MAX_ATTACHMENTS, `must have at most ${MAX_ATTACHMENTS} attachments.`).optional(),
    tags: z.array(Tag).max(MAX_TAGS, `must have at most ${MAX_TAGS} tags.`).optional(),
    // Its length is checked with the rest of its reading, after the sender's domain (and a
    // batch refuses it outright), so the schema states the limit rather than enforcing it.
    scheduled_at: z.string({ error: "must be a string." }).optional().openapi({
      maxLength: MAX_SCHEDULED_AT_LENGTH,
      description: "ISO 8601, or natural language such as \"in 1 min\" or \"tomorrow at 9am\" (UTC); at most 30 days ahead.",
    }),
    template: EmailTemplateInput.optional(),
    topic_id: z.string({ error: "must be a topic id." }).uuid("must be a topic id.").optional().openapi({
      description: "Scopes the email to a topic: recipients whose contact opted out of it are not sent to.",
    }),
  })
  .superRefine((r, ctx) => {
    const hasHtml = typeof r.html === "string" && r.html.length > 0;
    const hasText = typeof r.text === "string" && r.text.length > 0;
    if (!hasHtml && !hasText) {
      ctx.addIssue({ code: "custom", path: [], message: "Missing `html` or `text` field.", params: { missing: true } });
    }
  })
  .openapi("SendEmailRequest");

export type SendEmailRequest = z.infer<typeof SendEmailRequest>;

export const SendEmailResponse = z.object({ id: z.string() }).openapi("SendEmailResponse");

/** A string or an array of strings, as an array. */
export function asList(v: string | string[] | undefined): string[] {
  return v === undefined ? [] : Array.isArray(v) ? v : [v];
}
