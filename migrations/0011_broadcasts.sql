CREATE TABLE `broadcast_recipients` (
	`broadcast_id` text NOT NULL,
	`contact_id` text NOT NULL,
	`account_id` text NOT NULL,
	`email_id` text NOT NULL,
	`email` text NOT NULL,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`broadcast_id`, `contact_id`)
);
--> statement-breakpoint
CREATE INDEX `broadcast_recipients_email` ON `broadcast_recipients` (`email_id`);--> statement-breakpoint
CREATE TABLE `broadcasts` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`name` text,
	`segment_id` text,
	`topic_id` text,
	`from_address` text,
	`subject` text,
	`reply_to_json` text DEFAULT '[]' NOT NULL,
	`preview_text` text,
	`html` text,
	`text` text,
	`status` text NOT NULL,
	`status_reason` text,
	`scheduled_at` integer,
	`sent_at` integer,
	`checkpoint` text,
	`recipient_count` integer DEFAULT 0 NOT NULL,
	`domain_id` text,
	`region` text,
	`lease_until` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `broadcasts_account` ON `broadcasts` (`account_id`,`id`);--> statement-breakpoint
CREATE INDEX `broadcasts_due` ON `broadcasts` (`status`,`scheduled_at`);--> statement-breakpoint
CREATE TABLE `contact_imports` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`status` text NOT NULL,
	`file_key` text NOT NULL,
	`options_json` text NOT NULL,
	`cursor` integer DEFAULT 0 NOT NULL,
	`total` integer DEFAULT 0 NOT NULL,
	`created` integer DEFAULT 0 NOT NULL,
	`updated` integer DEFAULT 0 NOT NULL,
	`skipped` integer DEFAULT 0 NOT NULL,
	`failed` integer DEFAULT 0 NOT NULL,
	`error` text,
	`lease_until` integer,
	`created_at` integer NOT NULL,
	`completed_at` integer,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `contact_imports_account` ON `contact_imports` (`account_id`,`id`);--> statement-breakpoint
CREATE INDEX `contact_imports_status` ON `contact_imports` (`status`);--> statement-breakpoint
CREATE TABLE `contact_properties` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`key` text NOT NULL,
	`type` text NOT NULL,
	`fallback_json` text,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `contact_properties_account_key` ON `contact_properties` (`account_id`,`key`);--> statement-breakpoint
CREATE INDEX `contact_properties_account` ON `contact_properties` (`account_id`,`id`);--> statement-breakpoint
CREATE TABLE `contact_segments` (
	`segment_id` text NOT NULL,
	`contact_id` text NOT NULL,
	`account_id` text NOT NULL,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`segment_id`, `contact_id`),
	FOREIGN KEY (`segment_id`) REFERENCES `segments`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`contact_id`) REFERENCES `contacts`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `contact_segments_contact` ON `contact_segments` (`contact_id`,`segment_id`);--> statement-breakpoint
CREATE TABLE `contact_topics` (
	`contact_id` text NOT NULL,
	`topic_id` text NOT NULL,
	`account_id` text NOT NULL,
	`subscription` text NOT NULL,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`contact_id`, `topic_id`),
	FOREIGN KEY (`contact_id`) REFERENCES `contacts`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`topic_id`) REFERENCES `topics`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `contact_topics_topic` ON `contact_topics` (`topic_id`);--> statement-breakpoint
CREATE TABLE `segments` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`name` text NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `segments_account` ON `segments` (`account_id`,`id`);--> statement-breakpoint
CREATE TABLE `templates` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`name` text NOT NULL,
	`alias` text,
	`draft_json` text NOT NULL,
	`published_json` text,
	`published_at` integer,
	`current_version_id` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `templates_account_alias` ON `templates` (`account_id`,`alias`);--> statement-breakpoint
CREATE INDEX `templates_account` ON `templates` (`account_id`,`id`);--> statement-breakpoint
CREATE TABLE `topics` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`name` text NOT NULL,
	`description` text,
	`default_subscription` text NOT NULL,
	`visibility` text DEFAULT 'private' NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `topics_account` ON `topics` (`account_id`,`id`);--> statement-breakpoint
ALTER TABLE `contacts` ADD `properties_json` text DEFAULT '{}' NOT NULL;