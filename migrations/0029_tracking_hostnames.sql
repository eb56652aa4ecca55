CREATE TABLE `tracking_hostnames` (
	`hostname` text PRIMARY KEY NOT NULL,
	`wanted` integer NOT NULL,
	`cloudflare_id` text,
	`status` text,
	`ssl_status` text,
	`validation_error` text,
	`last_error` text,
	`generation` integer DEFAULT 0 NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`create_requested_at` integer,
	`owned` integer DEFAULT false NOT NULL,
	`sync_until` integer,
	`next_sync_at` integer,
	`synced_at` integer,
	`wanted_since` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `tracking_hostnames_next_sync` ON `tracking_hostnames` (`next_sync_at`);--> statement-breakpoint
CREATE INDEX `domains_tracking_host` ON `domains` (`tracking_subdomain`,`name`) WHERE "domains"."tracking_subdomain" IS NOT NULL;