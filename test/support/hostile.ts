// Hostile input the fuzzing tests share (bad-input.test.ts for the REST API,
// dashboard-bad-input.test.ts for the dashboard's routes).

/** Path ids that are no id, each with what it is. */
export const MALFORMED_IDS: [string, string][] = [
  ["a word", "not-a-uuid"],
  ["a very long id", "7".repeat(4000)],
  ["an encoded ../", "..%2F..%2Fapi-keys"],
  ["unicode", encodeURIComponent("ü☃𝔘")],
  ["a NUL byte", "%00"],
  ["a terminal escape", "%1B%5B2J"],
  ["a broken percent escape", "%ZZ%E2%98"],
  ["an id one character short", "01928f3e-7b1c-7cc0-9c3a-4d1a2b3c4d5"],
  ["an id with a bad character", "01928f3e-7b1c-7cc0-9c3a-4d1a2b3c4d5g"],
  ["SQL", encodeURIComponent("' OR '1'='1")],
  ["an email-like id", encodeURIComponent("nobody@nowhere.example")],
];

/** A body of `bytes` spaces, sent without a length, so that only reading it finds its size. */
export function endless(bytes: number): ReadableStream<Uint8Array> {
  const chunk = new Uint8Array(1024 * 1024).fill(0x20);
  let sent = 0;
  return new ReadableStream({
    pull(controller) {
      if (sent >= bytes) return controller.close();
      sent += chunk.length;
      controller.enqueue(chunk);
    },
  });
}

/** An object nested `depth` levels deep. */
export function nested(depth: number): unknown {
  let v: unknown = "bottom";
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}
