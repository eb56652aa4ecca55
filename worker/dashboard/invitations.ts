// Invitations to join an account: who may be invited, what inviting an address twice does,
// and what accepting does for someone who is already a member. The routes (routes.tsx) send
// the mail and write the audit log; the rules live here, testable without HTTP.
import { and, eq, gt, isNull, ne, sql } from "drizzle-orm";
import { drizzle, type DrizzleD1Database } from "drizzle-orm/d1";
import { toBase64Url } from "../bytes.ts";
import { hashToken } from "../api-key-token.ts";
import { authUsers, invitations, memberships } from "../db/schema.ts";

export type InvitationRow = typeof invitations.$inferSelect;

export type InvitedRole = "admin" | "member";
export const INVITATION_TTL_MS = 7 * 86400_000;

export type InviteResult =
  /** A new invitation; `token` goes in the emailed link (only its hash is kept). */
  | { kind: "invited"; id: string; token: string }
  /** The address had an invitation waiting: it now has a new link and a new expiry, the old
   * link no longer works, and the role is the one chosen this time (`previousRole` was the old). */
  | { kind: "renewed"; id: string; token: string; previousRole: InvitedRole }
  /** The address already belongs to a member: nothing was written and no mail goes out. */
  | { kind: "member"; role: string };

export interface InviteInput {
  accountId: string;
  email: string;
  role: InvitedRole;
  invitedBy: string;
  now: number;
}

export async function inviteToAccount(d1: D1Database, input: InviteInput): Promise<InviteResult> {
  const db = drizzle(d1);
  const email = input.email.toLowerCase();
  const member = await db
    .select({ role: memberships.role })
    .from(memberships)
    .innerJoin(authUsers, eq(authUsers.id, memberships.userId))
    .where(and(eq(memberships.accountId, input.accountId), sql`lower(${authUsers.email}) = ${email}`))
    .get();
  if (member) return { kind: "member", role: member.role };

  const token = toBase64Url(crypto.getRandomValues(new Uint8Array(32)));
  const tokenHash = await hashToken(token);
  const expiresAt = input.now + INVITATION_TTL_MS;
  // One open invitation per address: an unaccepted one (expired too) gets the new token, so
  // the link mailed before stops working. Older duplicates (made before this rule) go.
  const open = and(eq(invitations.accountId, input.accountId), eq(invitations.email, email), isNull(invitations.acceptedAt));
  const existing = await db.select().from(invitations).where(open).orderBy(sql`${invitations.createdAt} desc`).all();
  const keep = existing[0];
  if (keep) {
    await db.batch([
      db.update(invitations).set({ tokenHash, role: input.role, invitedBy: input.invitedBy, createdAt: input.now, expiresAt }).where(eq(invitations.id, keep.id)),
      db.delete(invitations).where(and(open, ne(invitations.id, keep.id))),
    ]);
    return { kind: "renewed", id: keep.id, token, previousRole: keep.role };
  }
  const id = crypto.randomUUID();
  // Inserted only while no open invitation exists: two invites racing make one row.
  const inserted = await d1
    .prepare(
      `INSERT INTO invitations (id, account_id, email, role, token_hash, invited_by, created_at, expires_at)
       SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8
       WHERE NOT EXISTS (SELECT 1 FROM invitations WHERE account_id = ?2 AND email = ?3 AND accepted_at IS NULL)`,
    )
    .bind(id, input.accountId, email, input.role, tokenHash, input.invitedBy, input.now, expiresAt)
    .run();
  if (inserted.meta.changes === 0) return inviteToAccount(d1, input); // the other one won: renew it
  return { kind: "invited", id, token };
}

/** A usable invitation (unused, unexpired) by its link's token. */
export async function findInvitation(d1: D1Database, token: string, now = Date.now()): Promise<InvitationRow | null> {
  if (!token || token.length > 100) return null;
  const row = await drizzle(d1).select().from(invitations).where(and(eq(invitations.tokenHash, await hashToken(token)), isNull(invitations.acceptedAt), gt(invitations.expiresAt, now))).get();
  return row ?? null;
}

export type AcceptResult =
  | { kind: "joined"; role: InvitedRole }
  /** Already a member: the invitation is used up and the role stays what it was (an
   * invitation never lowers, nor raises, the role of someone already in the account). */
  | { kind: "already_member"; role: string };

export async function acceptInvitation(d1: D1Database, inv: InvitationRow, userId: string, now: number): Promise<AcceptResult> {
  const db = drizzle(d1);
  const used = db.update(invitations).set({ acceptedAt: now }).where(eq(invitations.id, inv.id));
  const current = await db.select({ role: memberships.role }).from(memberships).where(and(eq(memberships.accountId, inv.accountId), eq(memberships.userId, userId))).get();
  if (current) {
    await used.run();
    return { kind: "already_member", role: current.role };
  }
  await db.batch([db.insert(memberships).values({ accountId: inv.accountId, userId, role: inv.role, createdAt: now }).onConflictDoNothing(), used]);
  return { kind: "joined", role: inv.role };
}

/** The statement that takes back the open invitations one person sent in an account (they were
 * removed, or may no longer invite), returning each one's id; for the batch that changes them. */
export function withdrawInvitations(db: DrizzleD1Database, accountId: string, invitedBy: string) {
  return db.delete(invitations)
    .where(and(eq(invitations.accountId, accountId), eq(invitations.invitedBy, invitedBy), isNull(invitations.acceptedAt)))
    .returning({ id: invitations.id });
}
