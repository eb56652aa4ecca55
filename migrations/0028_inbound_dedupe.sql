ALTER TABLE `inbound_emails` ADD `dedupe_key` text;--> statement-breakpoint
CREATE UNIQUE INDEX `inbound_emails_dedupe` ON `inbound_emails` (`account_id`,`dedupe_key`);