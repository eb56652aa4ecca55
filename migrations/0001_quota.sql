CREATE TABLE `usage` (
	`account_id` text NOT NULL,
	`period` text NOT NULL,
	`used` integer NOT NULL,
	`cap` integer NOT NULL,
	PRIMARY KEY(`account_id`, `period`),
	CONSTRAINT "usage_within_cap" CHECK("usage"."used" <= "usage"."cap")
);
--> statement-breakpoint
ALTER TABLE `accounts` ADD `rate_limit` integer DEFAULT 10 NOT NULL;