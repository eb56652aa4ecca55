// A plain message for the MIME builder's tests (workerd and Node alike): one sender, one
// recipient, a text body, a fixed Message-ID, date and boundary seed.
import type { MimeMessageInput } from "../../worker/mime/build.ts";

export function mimeInput(over: Partial<MimeMessageInput> = {}): MimeMessageInput {
  return {
    from: { name: "Acme", email: "hello@acme.test" },
    to: [{ email: "user@example.com" }],
    cc: [],
    replyTo: [],
    subject: "Hello",
    text: "Hi there",
    headers: {},
    attachments: [],
    messageId: "0192d4c0-7b3a-7000-8000-000000000001@tern.test",
    date: new Date(Date.UTC(2026, 0, 1, 9, 5, 7)),
    boundarySeed: "seed-1",
    ...over,
  };
}
