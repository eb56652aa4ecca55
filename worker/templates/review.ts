// The review of a template's draft before it is published, with the broadcast review's own
// checks (worker/broadcasts/review.ts) where they apply to a template. What publish refuses is
// only what no send could ever fix: a body that shows nothing (POST /templates/{id}/publish
// answers it with a 422, as a broadcast's send does). The rest are warnings, because a send can
// make up for them and Resend publishes such templates: a send gives its own `from` and
// `subject` (they win over the template's), a domain may be verified after publishing, and a
// variable that is neither declared nor given a fallback can still be given in
// `template.variables` (a send without it is refused then, naming it).
import type { Principal } from "../auth.ts";
import { bodyWarnings, messageInsights } from "../broadcasts/review.ts";
import type { TemplateRow } from "../db/schema.ts";
import { ApiError } from "../errors.ts";
import type { Insight } from "../insights/checks.ts";
import { parseMailbox } from "../mime/address.ts";
import { authorizeSender } from "../sending/sender.ts";
import { ownValue, render, type VariableValue } from "./render.ts";
import { publishProblems, viewOf, type TemplateContent } from "./templates.ts";
import { placeholderParts } from "./variables.ts";

export interface TemplateReview {
  /** What keeps it from being published, each saying how to fix it. */
  blocking: string[];
  /** What sends with it would need or show, each saying what to do. */
  warnings: string[];
  /** The deliverability checks on the draft filled with its fallbacks (empty without a from). */
  insights: Insight[];
  /** One sentence after the problems and warnings: whether it can be published. */
  verdict: string;
}

/** Variables the draft uses with no fallback of their own (`{{{KEY|fallback}}}`) that it does not
 * declare either: every send must give them, and one without them is refused. */
export function undeclaredVariables(draft: TemplateContent): string[] {
  const declared = new Set(draft.variables.map((v) => v.key));
  const out: string[] = [];
  for (const source of [draft.subject, draft.html, draft.text]) {
    for (const p of placeholderParts(source ?? "")) {
      if ("text" in p || p.key === "RESEND_UNSUBSCRIBE_URL" || p.fallback !== "" || declared.has(p.key) || out.includes(p.key)) continue;
      out.push(p.key);
    }
  }
  return out;
}

export function templateVerdict(blocking: number, warnings: number): string {
  if (blocking > 0) return `It cannot be published until ${blocking === 1 ? "this is" : `these ${blocking} are`} fixed; sends keep using the version published before.`;
  if (warnings > 0) return `It can be published, but read the warning${warnings === 1 ? "" : "s"} above first. Once published, every send that names this template uses this version.`;
  return "Ready to publish. Once published, every send that names this template uses this version.";
}

export async function reviewTemplate(env: Env, principal: Principal, row: TemplateRow): Promise<TemplateReview> {
  const { draft } = viewOf(row);
  const blocking = publishProblems(draft).map((e) => e.message);
  const warnings: string[] = [];
  if (!draft.subject?.trim()) warnings.push("It has no subject, so every send with it must give its own `subject`, or is refused. Write one in Subject.");
  const from = draft.from ? parseMailbox(draft.from) : null;
  if (from) {
    await authorizeSender(env.DB, principal, from.email).catch((err: unknown) => {
      if (!(err instanceof ApiError)) throw err;
      warnings.push(`${err.message} Until then, sends that use the template's From are refused (a send's own \`from\` wins).`);
    });
  }
  const undeclared = undeclaredVariables(draft);
  if (undeclared.length > 0) {
    // Where each is, so the person knows which field to open.
    const where = (k: string) => {
      const places = [["the subject", draft.subject], ["the body", draft.html], ["the text version", draft.text]]
        .filter(([, source]) => placeholderParts(source ?? "").some((p) => !("text" in p) && p.key === k)).map(([place]) => place);
      const listed = places.length > 1 ? `${places.slice(0, -1).join(", ")} and ${places[places.length - 1]}` : places[0];
      return listed ? ` (in ${listed})` : "";
    };
    const list = undeclared.map((k) => `\`${k}\`${where(k)}`).join(", ");
    warnings.push(`${list} ${undeclared.length === 1 ? "is" : "are"} used without a fallback and not declared, so every send must give ${undeclared.length === 1 ? "its value" : "their values"} in \`template.variables\`, or is refused. Give the placeholder a fallback, as in {{{${undeclared[0]}|fallback}}}, or declare ${undeclared.length === 1 ? "it" : "them"} with one (\`variables\` in the API).`);
  }
  warnings.push(...(await bodyWarnings(env.DB, principal.accountId, { html: draft.html, documentJson: row.documentJson })));
  // Insights need a sender; a template without one is checked by each send's own.
  let insights: Insight[] = [];
  if (draft.from && from) {
    const fallbacks: Record<string, VariableValue> = Object.fromEntries(draft.variables.filter((x) => x.fallback_value !== undefined).map((x) => [x.key, x.fallback_value as VariableValue]));
    const lookup = (k: string) => ownValue(fallbacks, k);
    insights = await messageInsights(env, principal.accountId, {
      from: draft.from,
      replyTo: draft.reply_to ?? [],
      subject: render(draft.subject ?? "", lookup, "text").output,
      html: render(draft.html, lookup, "html").output,
      text: draft.text === null ? null : render(draft.text, lookup, "text").output,
      headers: {},
      attachments: [],
      broadcast: false,
    });
  }
  return { blocking, warnings, insights, verdict: templateVerdict(blocking.length, warnings.length) };
}
