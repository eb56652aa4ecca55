ALTER TABLE `contact_imports` ADD `parse_offset` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `contact_imports` ADD `parse_record` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `contact_imports` ADD `layout_json` text;