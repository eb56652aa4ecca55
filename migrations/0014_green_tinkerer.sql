ALTER TABLE `broadcasts` ADD `document_json` text;--> statement-breakpoint
ALTER TABLE `templates` ADD `document_json` text;