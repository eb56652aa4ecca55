ALTER TABLE `email_events` ADD `dedupe_key` text;--> statement-breakpoint
CREATE UNIQUE INDEX `email_events_dedupe` ON `email_events` (`email_id`,`dedupe_key`);