CREATE TABLE `maintenance_jobs` (
	`name` text PRIMARY KEY NOT NULL,
	`cursor_json` text,
	`done_at` integer
);
--> statement-breakpoint
-- Contacts and suppressions stored before addresses took one spelling per domain (worker/mime/
-- address.ts, canonicalDomain) are rewritten by worker/maintenance.ts, a slice per cron tick.
INSERT INTO `maintenance_jobs` (`name`, `cursor_json`, `done_at`) VALUES ('canonical_addresses', NULL, NULL);
