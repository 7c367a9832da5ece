-- Lean receipts: every index a write touches is a billed row, so the happy path (insert, then one update to
-- processed) touches only the row and the (source, event_key) arbiter. Written by hand: drizzle-kit cannot
-- express WITHOUT ROWID tables or partial indexes' billing intent. See docs/architecture.md, "Storage and cost".
CREATE TABLE `receipts_lean` (
	`id` text NOT NULL PRIMARY KEY,
	`source` text NOT NULL,
	`event_key` text NOT NULL,
	`event_type` text,
	`subject` text,
	`version` integer,
	`occurred_at` integer,
	`payload_sha256` text NOT NULL,
	`body` blob,
	`kept_headers` text,
	`received_at` integer NOT NULL,
	`relayed_at` integer,
	`status` text DEFAULT 'pending' NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`lease_generation` integer DEFAULT 0 NOT NULL,
	`next_attempt_at` integer,
	`lease_until` integer,
	`last_error` text,
	`processed_at` integer,
	`committed_at` integer,
	`stale_against_version` integer,
	`provenance` text DEFAULT 'live' NOT NULL,
	`replay_count` integer DEFAULT 0 NOT NULL,
	`replayed_at` integer,
	`attempt_started_at` integer,
	`attempt_duration_ms` integer,
	`attempt_http_status` integer
) WITHOUT ROWID;
--> statement-breakpoint
INSERT INTO `receipts_lean` (`id`, `source`, `event_key`, `event_type`, `subject`, `version`, `occurred_at`, `payload_sha256`,
	`body`, `kept_headers`, `received_at`, `relayed_at`, `status`, `attempts`, `lease_generation`, `next_attempt_at`, `lease_until`,
	`last_error`, `processed_at`, `committed_at`, `stale_against_version`, `provenance`, `replay_count`)
SELECT r.`id`, r.`source`, r.`event_key`, r.`event_type`, r.`subject`, r.`version`, r.`occurred_at`, r.`payload_sha256`,
	r.`body`, r.`kept_headers`, r.`received_at`, r.`relayed_at`, r.`status`, r.`attempts`,
	COALESCE((SELECT MAX(a.`attempt_number`) FROM `attempts` a WHERE a.`receipt_id` = r.`id`), 0),
	CASE WHEN r.`status` = 'pending' AND r.`attempts` > 0 THEN COALESCE(r.`next_attempt_at`, r.`received_at`) ELSE r.`next_attempt_at` END,
	r.`lease_until`, r.`last_error`, r.`processed_at`,
	(SELECT p.`processed_at` FROM `processed_events` p WHERE p.`source` = r.`source` AND p.`event_key` = r.`event_key`),
	r.`stale_against_version`,
	CASE WHEN r.`provenance` = 'replayed' THEN 'live' ELSE r.`provenance` END,
	CASE WHEN r.`provenance` = 'replayed' THEN 1 ELSE 0 END
FROM `receipts` r;
--> statement-breakpoint
DROP TABLE `receipts`;
--> statement-breakpoint
ALTER TABLE `receipts_lean` RENAME TO `receipts`;
--> statement-breakpoint
CREATE UNIQUE INDEX `receipts_source_event_key` ON `receipts` (`source`,`event_key`);
--> statement-breakpoint
CREATE INDEX `receipts_dead` ON `receipts` (`source`,`id`) WHERE `status` = 'dead';
--> statement-breakpoint
CREATE INDEX `receipts_retrying` ON `receipts` (`next_attempt_at`) WHERE `next_attempt_at` IS NOT NULL;
--> statement-breakpoint
DROP TABLE `processed_events`;
--> statement-breakpoint
-- Never holds a row: inserting NULL into it is how a D1 batch aborts itself when a guard changed nothing.
CREATE TABLE `batch_aborts` (
	`reason` text NOT NULL
);
