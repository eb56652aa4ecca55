CREATE TABLE `account_events` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`type` text NOT NULL,
	`object_id` text NOT NULL,
	`data_json` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `account_events_account` ON `account_events` (`account_id`,`id`);--> statement-breakpoint
CREATE TABLE `dkim_keys` (
	`id` text PRIMARY KEY NOT NULL,
	`domain_id` text NOT NULL,
	`account_id` text NOT NULL,
	`selector` text NOT NULL,
	`algorithm` text NOT NULL,
	`public_key` text NOT NULL,
	`private_key_sealed` text NOT NULL,
	`state` text NOT NULL,
	`status` text DEFAULT 'not_started' NOT NULL,
	`created_at` integer NOT NULL,
	`activated_at` integer,
	`retired_at` integer,
	FOREIGN KEY (`domain_id`) REFERENCES `domains`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `dkim_keys_domain_selector` ON `dkim_keys` (`domain_id`,`selector`);--> statement-breakpoint
CREATE INDEX `dkim_keys_account` ON `dkim_keys` (`account_id`);--> statement-breakpoint
ALTER TABLE `domains` ADD `return_path` text DEFAULT 'send' NOT NULL;--> statement-breakpoint
ALTER TABLE `domains` ADD `open_tracking` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `domains` ADD `click_tracking` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `domains` ADD `tls` text DEFAULT 'opportunistic' NOT NULL;--> statement-breakpoint
ALTER TABLE `domains` ADD `receiving` integer DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE `domains` ADD `record_status_json` text DEFAULT '{}' NOT NULL;--> statement-breakpoint
ALTER TABLE `domains` ADD `dmarc_json` text;--> statement-breakpoint
ALTER TABLE `domains` ADD `verification_started_at` integer;--> statement-breakpoint
ALTER TABLE `domains` ADD `failing_since` integer;--> statement-breakpoint
ALTER TABLE `domains` ADD `last_checked_at` integer;--> statement-breakpoint
ALTER TABLE `domains` ADD `next_check_at` integer;--> statement-breakpoint
ALTER TABLE `domains` ADD `updated_at` integer;--> statement-breakpoint
CREATE INDEX `domains_next_check` ON `domains` (`next_check_at`);--> statement-breakpoint
ALTER TABLE `emails` ADD `domain_id` text;