CREATE TABLE `accounts` (
	`id` text PRIMARY KEY NOT NULL,
	`credits` integer DEFAULT 0 NOT NULL,
	`plan` text,
	`plan_version` integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE `alerts` (
	`id` text PRIMARY KEY NOT NULL,
	`source` text,
	`kind` text NOT NULL,
	`state` text NOT NULL,
	`detail` text,
	`opened_at` integer NOT NULL,
	`resolved_at` integer,
	`notified_at` integer,
	`resolve_notified_at` integer
);
--> statement-breakpoint
CREATE INDEX `alerts_kind_state` ON `alerts` (`source`,`kind`,`state`);--> statement-breakpoint
CREATE TABLE `attempts` (
	`receipt_id` text NOT NULL,
	`attempt_number` integer NOT NULL,
	`started_at` integer NOT NULL,
	`finished_at` integer,
	`outcome` text,
	`http_status` integer,
	`error` text,
	`duration_ms` integer,
	PRIMARY KEY(`receipt_id`, `attempt_number`)
);
--> statement-breakpoint
CREATE TABLE `checkpoints` (
	`source` text NOT NULL,
	`reconciler` text NOT NULL,
	`cursor` text,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`source`, `reconciler`)
);
--> statement-breakpoint
CREATE TABLE `object_versions` (
	`source` text NOT NULL,
	`object_type` text NOT NULL,
	`object_id` text NOT NULL,
	`version` integer NOT NULL,
	`receipt_id` text NOT NULL,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`source`, `object_type`, `object_id`)
);
--> statement-breakpoint
CREATE TABLE `processed_events` (
	`source` text NOT NULL,
	`event_key` text NOT NULL,
	`receipt_id` text NOT NULL,
	`processed_at` integer NOT NULL,
	PRIMARY KEY(`source`, `event_key`)
);
--> statement-breakpoint
CREATE TABLE `quarantine` (
	`id` text PRIMARY KEY NOT NULL,
	`source` text NOT NULL,
	`event_key` text NOT NULL,
	`reason` text NOT NULL,
	`original_receipt_id` text,
	`original_sha256` text,
	`payload_sha256` text NOT NULL,
	`body` blob,
	`kept_headers` text,
	`received_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `quarantine_source_key` ON `quarantine` (`source`,`event_key`);--> statement-breakpoint
CREATE TABLE `receipts` (
	`id` text PRIMARY KEY NOT NULL,
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
	`next_attempt_at` integer,
	`lease_until` integer,
	`last_error` text,
	`processed_at` integer,
	`stale_against_version` integer,
	`provenance` text DEFAULT 'live' NOT NULL,
	`enqueued_at` integer
);
--> statement-breakpoint
CREATE UNIQUE INDEX `receipts_source_event_key` ON `receipts` (`source`,`event_key`);--> statement-breakpoint
CREATE INDEX `receipts_status_next_attempt` ON `receipts` (`status`,`next_attempt_at`);--> statement-breakpoint
CREATE INDEX `receipts_source_received` ON `receipts` (`source`,`received_at`);--> statement-breakpoint
CREATE INDEX `receipts_subject` ON `receipts` (`source`,`subject`);