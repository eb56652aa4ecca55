// Webhook payloads of contract section 6: `{type, created_at, data}`, built by pure functions
// from plain facts (no D1 row types), so the event consumer, replays and tests build the very
// same JSON. The zod schemas describe each payload for the OpenAPI document and let tests
// check that what is built is what is documented.
import { z } from "@hono/zod-openapi";

export const EMAIL_EVENT_TYPES = [
  "email.sent",
  "email.delivered",
  "email.delivery_delayed",
  "email.bounced",
  "email.complained",
  "email.opened",
  "email.clicked",
  "email.failed",
  "email.scheduled",
  "email.suppressed",
  "email.received",
] as const;
export const CONTACT_EVENT_TYPES = ["contact.created", "contact.updated", "contact.deleted"] as const;
export const DOMAIN_EVENT_TYPES = ["domain.created", "domain.updated", "domain.deleted"] as const;
/** Every event type an endpoint can subscribe to, in the contract's order. */
export const WEBHOOK_EVENT_TYPES = [...EMAIL_EVENT_TYPES, ...CONTACT_EVENT_TYPES, ...DOMAIN_EVENT_TYPES] as const;

export type EmailEventType = (typeof EMAIL_EVENT_TYPES)[number];
export type ContactEventType = (typeof CONTACT_EVENT_TYPES)[number];
export type DomainEventType = (typeof DOMAIN_EVENT_TYPES)[number];
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

export function isWebhookEventType(value: unknown): value is WebhookEventType {
  return typeof value === "string" && (WEBHOOK_EVENT_TYPES as readonly string[]).includes(value);
}

/** Sent, bounced and the other email events share these fields; the rest add one object. */
type PlainEmailEventType = Exclude<EmailEventType, "email.bounced" | "email.opened" | "email.clicked" | "email.failed" | "email.received">;
const PLAIN_EMAIL_EVENT_TYPES = EMAIL_EVENT_TYPES.filter(
  (t): t is PlainEmailEventType => !["email.bounced", "email.opened", "email.clicked", "email.failed", "email.received"].includes(t),
) as [PlainEmailEventType, ...PlainEmailEventType[]];

// --- schemas ----------------------------------------------------------------------------------

const IsoTime = z.string().openapi({ format: "date-time", example: "2026-11-21T10:00:00.000Z" });

export const BounceSchema = z
  .object({
    type: z.enum(["Permanent", "Transient", "Undetermined"]),
    subType: z.string().openapi({ example: "NoEmail" }),
    message: z.string(),
    diagnosticCode: z.array(z.string()),
  })
  .openapi("WebhookBounce");

export const ClickSchema = z
  .object({ ipAddress: z.string(), link: z.string(), timestamp: IsoTime, userAgent: z.string() })
  .openapi("WebhookClick");

export const OpenSchema = z.object({ ipAddress: z.string(), timestamp: IsoTime, userAgent: z.string() }).openapi("WebhookOpen");

export const FailedSchema = z.object({ reason: z.string() }).openapi("WebhookFailed");

export const EmailEventDataSchema = z
  .object({
    email_id: z.string(),
    created_at: IsoTime,
    from: z.string(),
    to: z.array(z.string()),
    subject: z.string(),
    message_id: z.string().nullable().openapi({ example: "<0193a8a0-1c2d-7000-8000-000000000000@example.com>" }),
    tags: z.record(z.string(), z.string()),
    broadcast_id: z.string().optional().openapi({ description: "The broadcast the email was sent for, if any." }),
    bounce: BounceSchema.optional(),
    open: OpenSchema.optional(),
    click: ClickSchema.optional(),
    failed: FailedSchema.optional(),
  })
  .openapi("WebhookEmailData");

export const ReceivedAttachmentSchema = z
  .object({
    id: z.string(),
    filename: z.string().nullable(),
    content_type: z.string(),
    content_disposition: z.string().nullable(),
    content_id: z.string().nullable(),
    size: z.number().int(),
  })
  .openapi("WebhookReceivedAttachment");

/** `email.received` announces inbound mail with metadata only (contract section 8). */
export const ReceivedEmailDataSchema = z
  .object({
    email_id: z.string(),
    created_at: IsoTime,
    from: z.string(),
    to: z.array(z.string()),
    cc: z.array(z.string()),
    subject: z.string(),
    message_id: z.string().nullable(),
    attachments: z.array(ReceivedAttachmentSchema),
  })
  .openapi("WebhookReceivedEmailData");

export const ContactDataSchema = z
  .object({
    id: z.string(),
    email: z.string(),
    first_name: z.string().nullable(),
    last_name: z.string().nullable(),
    unsubscribed: z.boolean(),
    created_at: IsoTime,
    updated_at: IsoTime,
  })
  .openapi("WebhookContactData");

export const DomainRecordSchema = z
  .object({
    record: z.enum(["DKIM", "SPF", "Receiving", "Tracking"]),
    name: z.string(),
    type: z.enum(["TXT", "MX", "CNAME"]),
    ttl: z.string(),
    status: z.string(),
    value: z.string(),
    priority: z.number().int().optional(),
  })
  .openapi("WebhookDomainRecord");

export const DomainDataSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    status: z.string(),
    region: z.string(),
    created_at: IsoTime,
    records: z.array(DomainRecordSchema),
  })
  .openapi("WebhookDomainData");

function envelope<T extends readonly [string, ...string[]], D extends z.ZodType>(types: T, data: D) {
  return z.object({ type: z.enum(types), created_at: IsoTime, data });
}

export const WebhookPayloadSchema = z
  .union([
    envelope(PLAIN_EMAIL_EVENT_TYPES, EmailEventDataSchema),
    envelope(["email.bounced"], EmailEventDataSchema.required({ bounce: true })),
    envelope(["email.opened"], EmailEventDataSchema.required({ open: true })),
    envelope(["email.clicked"], EmailEventDataSchema.required({ click: true })),
    envelope(["email.failed"], EmailEventDataSchema.required({ failed: true })),
    envelope(["email.received"], ReceivedEmailDataSchema),
    envelope(CONTACT_EVENT_TYPES, ContactDataSchema),
    envelope(DOMAIN_EVENT_TYPES, DomainDataSchema),
  ])
  .openapi("WebhookPayload");

export type Bounce = z.infer<typeof BounceSchema>;
export type Click = z.infer<typeof ClickSchema>;
export type Open = z.infer<typeof OpenSchema>;
export type EmailEventData = z.infer<typeof EmailEventDataSchema>;
export type ReceivedEmailData = z.infer<typeof ReceivedEmailDataSchema>;
export type ContactData = z.infer<typeof ContactDataSchema>;
export type DomainData = z.infer<typeof DomainDataSchema>;
export type DomainRecord = z.infer<typeof DomainRecordSchema>;
export type WebhookPayload = z.infer<typeof WebhookPayloadSchema>;

// --- builders ---------------------------------------------------------------------------------

/** A moment as tern stores it (Unix milliseconds), as a Date, or already as ISO text. */
export type Moment = number | Date | string;

function iso(at: Moment): string {
  return (typeof at === "string" ? new Date(at) : at instanceof Date ? at : new Date(at)).toISOString();
}

/** The facts of a sent email that every email event repeats. */
export interface EmailFacts {
  id: string;
  createdAt: Moment;
  from: string;
  to: readonly string[];
  subject: string;
  /** As tern stores it (`<id>@<domain>`, without angle brackets) or as the header has it. */
  messageId: string | null;
  /** Tags as sent (`[{name, value}]`) or already as a map. */
  tags: ReadonlyArray<{ name: string; value: string }> | Readonly<Record<string, string>>;
  /** The broadcast the email was sent for, if any. */
  broadcastId?: string | null;
}

export type EmailEventInput =
  | { type: PlainEmailEventType; email: EmailFacts; at: Moment }
  | { type: "email.bounced"; email: EmailFacts; at: Moment; bounce: Bounce }
  | { type: "email.opened"; email: EmailFacts; at: Moment; open: { ipAddress: string; userAgent: string } }
  | { type: "email.clicked"; email: EmailFacts; at: Moment; click: { ipAddress: string; userAgent: string; link: string } }
  | { type: "email.failed"; email: EmailFacts; at: Moment; failed: { reason: string } };

export interface EmailEventPayload {
  type: EmailEventInput["type"];
  created_at: string;
  data: EmailEventData;
}

/** The Message-ID as the header writes it, angle brackets included. */
export function headerMessageId(messageId: string | null): string | null {
  if (messageId === null) return null;
  const bare = messageId.trim().replace(/^<|>$/g, "");
  return bare === "" ? null : `<${bare}>`;
}

function tagMap(tags: EmailFacts["tags"]): Record<string, string> {
  if (!Array.isArray(tags)) return { ...(tags as Record<string, string>) };
  const out: Record<string, string> = {};
  for (const { name, value } of tags as ReadonlyArray<{ name: string; value: string }>) out[name] = value;
  return out;
}

/** The payload of an email event; the event's own object (bounce, open, click, failed) is added for the types that have one. */
export function emailEventPayload(input: EmailEventInput): EmailEventPayload {
  const { email } = input;
  const createdAt = iso(input.at);
  const data: EmailEventData = {
    email_id: email.id,
    created_at: iso(email.createdAt),
    from: email.from,
    to: [...email.to],
    subject: email.subject,
    message_id: headerMessageId(email.messageId),
    tags: tagMap(email.tags),
  };
  if (email.broadcastId) data.broadcast_id = email.broadcastId;
  switch (input.type) {
    case "email.bounced":
      data.bounce = { ...input.bounce, diagnosticCode: [...input.bounce.diagnosticCode] };
      break;
    case "email.opened":
      data.open = { ipAddress: input.open.ipAddress, timestamp: createdAt, userAgent: input.open.userAgent };
      break;
    case "email.clicked":
      data.click = { ipAddress: input.click.ipAddress, link: input.click.link, timestamp: createdAt, userAgent: input.click.userAgent };
      break;
    case "email.failed":
      data.failed = { reason: input.failed.reason };
      break;
  }
  return { type: input.type, created_at: createdAt, data };
}

export interface ReceivedEmailFacts {
  id: string;
  createdAt: Moment;
  from: string;
  to: readonly string[];
  cc: readonly string[];
  subject: string;
  messageId: string | null;
  attachments: ReadonlyArray<{
    id: string;
    filename: string | null;
    contentType: string;
    contentDisposition: string | null;
    contentId: string | null;
    size: number;
  }>;
}

/** `email.received`: metadata only; bodies and attachments are fetched through the API. */
export function receivedEventPayload(email: ReceivedEmailFacts, at: Moment): { type: "email.received"; created_at: string; data: ReceivedEmailData } {
  return {
    type: "email.received",
    created_at: iso(at),
    data: {
      email_id: email.id,
      created_at: iso(email.createdAt),
      from: email.from,
      to: [...email.to],
      cc: [...email.cc],
      subject: email.subject,
      message_id: headerMessageId(email.messageId),
      attachments: email.attachments.map((a) => ({
        id: a.id,
        filename: a.filename,
        content_type: a.contentType,
        content_disposition: a.contentDisposition,
        content_id: a.contentId,
        size: a.size,
      })),
    },
  };
}

export interface ContactFacts {
  id: string;
  email: string;
  firstName?: string | null;
  lastName?: string | null;
  unsubscribed: boolean;
  createdAt: Moment;
  updatedAt: Moment;
}

/** contact.created / updated / deleted: the contact as it is after the change (before it, for deleted). */
export function contactEventPayload(type: ContactEventType, contact: ContactFacts, at: Moment): { type: ContactEventType; created_at: string; data: ContactData } {
  return {
    type,
    created_at: iso(at),
    data: {
      id: contact.id,
      email: contact.email,
      first_name: contact.firstName ?? null,
      last_name: contact.lastName ?? null,
      unsubscribed: contact.unsubscribed,
      created_at: iso(contact.createdAt),
      updated_at: iso(contact.updatedAt),
    },
  };
}

export interface DomainFacts {
  id: string;
  name: string;
  status: string;
  region: string;
  createdAt: Moment;
  records: readonly DomainRecord[];
}

/** domain.created / updated / deleted, with the DNS records of contract section 5. */
export function domainEventPayload(type: DomainEventType, domain: DomainFacts, at: Moment): { type: DomainEventType; created_at: string; data: DomainData } {
  return {
    type,
    created_at: iso(at),
    data: {
      id: domain.id,
      name: domain.name,
      status: domain.status,
      region: domain.region,
      created_at: iso(domain.createdAt),
      records: domain.records.map((r) => ({ ...r })),
    },
  };
}
