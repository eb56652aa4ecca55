ALTER TABLE `media_images` ADD `name` text;--> statement-breakpoint
CREATE INDEX `media_images_account_created` ON `media_images` (`account_id`,`created_at`,`id`);