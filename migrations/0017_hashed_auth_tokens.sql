-- Hand-written (data, not schema): session tokens and verification identifiers are now stored
-- hashed (worker/dashboard/session-tokens.ts, verification.storeIdentifier "hashed"). Rows
-- written before that hold them in clear and can no longer be found by their hash: delete them
-- rather than keep secrets at rest. People signed in sign in again; a pending reset or
-- confirmation link is asked for again.
DELETE FROM `auth_sessions` WHERE `token` NOT LIKE 'sha256:%';
--> statement-breakpoint
DELETE FROM `auth_verifications`;
