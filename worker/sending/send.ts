// A send, from parsed JSON to the answer the client gets: the one path that POST /emails,
// POST /emails/batch and idempotent replays share. The answer is data (status, body,
// headers), so that it can be stored and replayed.
import type { Principal } from "../auth.ts";
import { readConfig } from "../config.ts";
import { ApiError, unexpectedError } from "../errors.ts";
import { plainErrors, zodToApiError } from "../http.ts";
import { createOutboundFetcher, type OutboundFetcher } from "../net/outbound.ts";
import { discardContent, prepareEmail, recordEmails, type Defer, type PreparedEmail, type SendDeps } from "./accept.ts";
import { KeyTaken, type KeyClaim } from "./key-claim.ts";
import { quotaHeaders } from "./quota.ts";
import { SendEmailRequest } from "./request.ts";
import type { SendLog } from "../logs/record.ts";
import { applyTemplate } from "../templates/send.ts";
import { recipientsForTopic } from "../contacts/topics.ts";

export const MAX_BATCH = 100;
export const ATTACHMENT_FETCH = { maxBytes: 40 * 1024 * 1024, timeoutMs: 15_000, maxRedirects: 3 };

export interface SendRequest {
  kind: "single" | "batch";
  /** The parsed JSON body. */
  body: unknown;
  batchMode: "strict" | "permissive";
}

/** What a send answers, as plain data (the body as JSON text), so that it can be stored with
 * an idempotency key and replayed byte for byte. */
export type Answer = {
  status: number;
  body: string;
  headers: Record<string, string>;
};

function answerOf(status: number, body: object, headers: Record<string, string> = {}): Answer {
  return { status, body: JSON.stringify(body), headers };
}

export function sendDeps(env: Env, now = Date.now()): SendDeps {
  const config = readConfig(env);
  return {
    db: env.DB,
    blobs: env.BLOBS,
    config,
    now,
    fetcher: createOutboundFetcher({ allowPrivate: config.devMode, allowHttp: config.devMode, ...ATTACHMENT_FETCH }),
  };
}

export interface SendOptions {
  /** An idempotency key: its row is recorded in the same batch as the emails; when another
   * request holds the key, the send throws KeyTaken and records nothing. */
  claim?: KeyClaim;
  /** Lets the queue hints finish after the answer (`ctx.waitUntil`). */
  defer?: Defer;
  /** Fetches attachment paths under another policy than the configured one (tests reach a
   * loopback file server with it). */
  fetcher?: OutboundFetcher;
  /** The request's API log, written in the recording batch when the send succeeds. */
  log?: SendLog;
}

/** Runs a send. */
export async function performSend(env: Env, principal: Principal, req: SendRequest, opts: SendOptions = {}): Promise<Answer> {
  try {
    return req.kind === "single" ? await sendOne(env, principal, req.body, opts) : await sendBatch(env, principal, req, opts);
  } catch (err) {
    if (err instanceof KeyTaken) throw err;
    const e = err instanceof ApiError ? err : unexpectedError(err);
    return answerOf(e.status, e.body, e.headers);
  }
}

async function sendOne(env: Env, principal: Principal, raw: unknown, { claim, defer, fetcher, log }: SendOptions): Promise<Answer> {
  const body = await applyTemplate(env.DB, principal.accountId, raw);
  const parsed = SendEmailRequest.safeParse(body, plainErrors(SendEmailRequest));
  if (!parsed.success) throw zodToApiError(parsed.error, body);
  const deps = { ...sendDeps(env), ...(fetcher ? { fetcher } : {}) };
  const prepared = await prepareEmail(deps, principal, parsed.data, "");
  if (parsed.data.topic_id) {
    try {
      prepared.recipients = await recipientsForTopic(env.DB, principal.accountId, parsed.data.topic_id, prepared.recipients);
    } catch (err) {
      // Its fetched attachments are already in R2; recordEmails removes them on its own failures.
      await discardContent(env.BLOBS, [prepared]);
      throw err;
    }
  }
  const answer = JSON.stringify({ id: prepared.id });
  const use = await recordEmails(env, deps.config, principal, [prepared], deps.now, { key: claim && { claim, status: 200, body: answer }, defer, extra: log?.statement(200, answer) });
  if (log) log.written = true;
  return { status: 200, body: answer, headers: quotaHeaders(use!) };
}

/** An error about item `i` of a batch, with the item named in its message. */
function itemError(err: unknown, i: number): ApiError {
  if (!(err instanceof ApiError)) throw err;
  const message = err.message.startsWith(`\`[${i}]`) ? err.message : `\`[${i}]\`: ${err.message}`;
  return new ApiError(err.errorName, message, err.status);
}

async function sendBatch(env: Env, principal: Principal, req: SendRequest, { claim, defer, log }: SendOptions): Promise<Answer> {
  const input = req.body;
  if (!Array.isArray(input)) throw new ApiError("validation_error", "The request body must be a JSON array of emails.", 400);
  if (input.length === 0 || input.length > MAX_BATCH) {
    throw new ApiError("validation_error", `A batch must have between 1 and ${MAX_BATCH} emails; it has ${input.length}.`);
  }
  const deps = sendDeps(env);
  const prepared: PreparedEmail[] = [];
  const errors: { index: number; message: string }[] = [];
  for (const [i, raw] of input.entries()) {
    try {
      const item = await applyTemplate(env.DB, principal.accountId, raw, `\`[${i}]\`:`, [i]);
      const parsed = SendEmailRequest.safeParse(item, plainErrors(SendEmailRequest));
      if (!parsed.success) throw zodToApiError(parsed.error, item, "body", [i]);
      const one = parsed.data;
      if (one.attachments !== undefined) throw new ApiError("validation_error", `\`[${i}].attachments\` is not supported in batch sends.`);
      if (one.scheduled_at !== undefined) throw new ApiError("validation_error", `\`[${i}].scheduled_at\` is not supported in batch sends.`);
      const p = await prepareEmail(deps, principal, one, `\`[${i}]\`:`);
      if (one.topic_id) p.recipients = await recipientsForTopic(env.DB, principal.accountId, one.topic_id, p.recipients, `\`[${i}]\`:`);
      prepared.push(p);
    } catch (err) {
      const e = itemError(err, i);
      if (req.batchMode === "strict") throw e;
      errors.push({ index: i, message: e.message });
    }
  }
  const data = prepared.map((p) => ({ id: p.id }));
  const answer = JSON.stringify(req.batchMode === "permissive" ? { data, errors } : { data });
  // A permissive batch with nothing valid records no email; its answer is stored like a 4xx.
  const extra = prepared.length > 0 ? log?.statement(200, answer) : undefined;
  const use = await recordEmails(env, deps.config, principal, prepared, deps.now, { key: claim && { claim, status: 200, body: answer }, defer, extra });
  if (log && extra) log.written = true;
  return { status: 200, body: answer, headers: use ? quotaHeaders(use) : {} };
}
