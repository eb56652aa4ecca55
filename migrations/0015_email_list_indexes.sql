CREATE TABLE `email_recipients` (
	`account_id` text NOT NULL,
	`address` text NOT NULL,
	`email_id` text NOT NULL,
	PRIMARY KEY(`account_id`, `address`, `email_id`)
);
--> statement-breakpoint
CREATE INDEX `email_recipients_email` ON `email_recipients` (`email_id`);--> statement-breakpoint
CREATE INDEX `emails_account_status` ON `emails` (`account_id`,`last_event`,`id`);