// Text decoded from a header field (an encoded word, RFC 2047; a parameter, RFC 2231; a raw
// byte) can hold any character: NUL, ESC, CR and LF too, which no header line can carry and a
// reader's terminal, log or reply must not get. One rule for both sides: the Worker keeps the
// names, subject and filenames of received mail as one line (worker/inbound/receive.ts); the
// bridge sends a submitted message's subject and filenames as one line (smtp-bridge/submission.ts).
// It lives in smtp-bridge/ because the bridge ships only that folder (smtp-bridge/build.ts, the
// Dockerfile); the Worker's bundler takes it from here like any other module.

/** A decoded name, address, subject, header value or filename as one line of text: a tab or
 * line break (Unicode's line and paragraph separators too) becomes a space, every other C0 or
 * C1 control character (and DEL) goes. */
export function oneLine(value: string): string {
  return value.replace(/[\t\r\n\u2028\u2029]/g, " ").replace(/[\u0000-\u001f\u007f-\u009f]/g, "");
}
