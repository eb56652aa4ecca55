CREATE TABLE `api_logs` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`key_id` text,
	`method` text NOT NULL,
	`endpoint` text NOT NULL,
	`status` integer NOT NULL,
	`user_agent` text,
	`request_json` text,
	`response_json` text,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `api_logs_account` ON `api_logs` (`account_id`,`id`);--> statement-breakpoint
CREATE TABLE `domain_claims` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`domain_id` text NOT NULL,
	`name` text NOT NULL,
	`region` text NOT NULL,
	`token` text NOT NULL,
	`status` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `domain_claims_domain` ON `domain_claims` (`domain_id`,`id`);--> statement-breakpoint
CREATE INDEX `domain_claims_name` ON `domain_claims` (`name`);