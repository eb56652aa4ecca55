// A message as Cloudflare Email Routing hands it to the Worker's email handler, for the inbound
// tests: its raw bytes streamed in 64 KB pieces, its declared size (which a sender may misstate),
// and the reason the handler rejects it with, if it does.

export interface Incoming {
  message: ForwardableEmailMessage;
  rejected: () => string | null;
}

export function incoming(from: string, to: string, raw: string | Uint8Array, claimedSize?: number): Incoming {
  const bytes = typeof raw === "string" ? new TextEncoder().encode(raw) : raw;
  let rejected: string | null = null;
  const message = {
    from,
    to,
    headers: new Headers(),
    raw: new ReadableStream<Uint8Array>({
      start(c) {
        for (let i = 0; i < bytes.length; i += 65536) c.enqueue(bytes.subarray(i, i + 65536));
        c.close();
      },
    }),
    rawSize: claimedSize ?? bytes.length,
    canBeForwarded: false,
    setReject(reason: string) {
      rejected = reason;
    },
    forward: () => Promise.reject(new Error("not used")),
    reply: () => Promise.reject(new Error("not used")),
  } as unknown as ForwardableEmailMessage;
  return { message, rejected: () => rejected };
}
