-- Hand-written, not generated: drizzle-kit cannot declare WITHOUT ROWID. metric_rollups (as
-- 0009 creates it from worker/db/schema.ts, same columns and key) becomes a table clustered on
-- its primary key: an upsert then writes one b-tree instead of a rowid table and its key's
-- index, and a metrics query reads a range of rows in key order without a lookup per row
-- (docs/benchmarks.md, metrics). The table is new in 0009 and still empty here.
DROP TABLE `metric_rollups`;
--> statement-breakpoint
CREATE TABLE `metric_rollups` (
	`account_id` text NOT NULL,
	`span` integer NOT NULL,
	`bucket` integer NOT NULL,
	`domain_id` text DEFAULT '' NOT NULL,
	`broadcast_id` text DEFAULT '' NOT NULL,
	`received` integer DEFAULT 0 NOT NULL,
	`sent` integer DEFAULT 0 NOT NULL,
	`delivered` integer DEFAULT 0 NOT NULL,
	`delivery_delayed` integer DEFAULT 0 NOT NULL,
	`bounced` integer DEFAULT 0 NOT NULL,
	`bounced_permanent` integer DEFAULT 0 NOT NULL,
	`bounced_transient` integer DEFAULT 0 NOT NULL,
	`bounced_undetermined` integer DEFAULT 0 NOT NULL,
	`complained` integer DEFAULT 0 NOT NULL,
	`failed` integer DEFAULT 0 NOT NULL,
	`suppressed` integer DEFAULT 0 NOT NULL,
	`opened` integer DEFAULT 0 NOT NULL,
	`unique_opened` integer DEFAULT 0 NOT NULL,
	`clicked` integer DEFAULT 0 NOT NULL,
	`unique_clicked` integer DEFAULT 0 NOT NULL,
	`unsubscribed` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`account_id`, `span`, `bucket`, `domain_id`, `broadcast_id`)
) WITHOUT ROWID;
