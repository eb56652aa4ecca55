CREATE TABLE `media_images` (
	`id` text PRIMARY KEY NOT NULL,
	`account_id` text NOT NULL,
	`bytes` integer NOT NULL,
	`ext` text NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`account_id`) REFERENCES `accounts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `media_images_account` ON `media_images` (`account_id`,`bytes`);