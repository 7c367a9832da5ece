-- Fan-out (docs/processing.md, "Deliveries"): one delivery per (receipt, matched route). The receipt row carries one
-- route's delivery, as it always has (its `route`); `deliveries` holds a row only for each further route that matched,
-- with its own status, attempts, retry schedule, lease generation and last error. A one-route source never writes
-- here, nor the two new receipt columns.
ALTER TABLE `receipts` ADD `route` text;
-- The routes whose filter did not match, comma-separated ('' when all did): counted here, in the update the consumer
-- makes anyway, so a filtered-out route writes no row. NULL until the event was fanned out.
ALTER TABLE `receipts` ADD `filtered_routes` text;
-- WITHOUT ROWID: the primary key is the table, so a delivered route costs one row and no index row. The partial indexes
-- hold only deliveries off the happy path: waiting for a retry or a lease (the re-drive finds a lost message there),
-- and dead letters (a bulk replay by route reads them).
CREATE TABLE `deliveries` (
	`receipt_id` text NOT NULL,
	`route` text NOT NULL,
	`status` text DEFAULT 'pending' NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`lease_generation` integer DEFAULT 0 NOT NULL,
	`next_attempt_at` integer,
	`lease_until` integer,
	`last_error` text,
	`http_status` integer,
	`attempt_started_at` integer,
	`attempt_duration_ms` integer,
	`committed_at` integer,
	`processed_at` integer,
	`replay_count` integer DEFAULT 0 NOT NULL,
	`replayed_at` integer,
	PRIMARY KEY(`receipt_id`, `route`)
) WITHOUT ROWID;
CREATE INDEX `deliveries_unfinished` ON `deliveries` (`next_attempt_at`) WHERE status IN ('pending', 'processing');
CREATE INDEX `deliveries_dead` ON `deliveries` (`route`, `receipt_id`) WHERE status = 'dead';
-- Migration 0013's stamp, unless the writer stamped status_entered_at itself in the same update (the consumer does, on
-- D1's clock as the trigger would): then the trigger's second write of the row is saved.
DROP TRIGGER `receipts_status_entered`;
CREATE TRIGGER `receipts_status_entered` AFTER UPDATE OF `status` ON `receipts`
WHEN NEW.status IN ('dead', 'dismissed', 'stale', 'skipped') AND NEW.status IS NOT OLD.status AND NEW.status_entered_at IS OLD.status_entered_at
BEGIN
  UPDATE `receipts` SET `status_entered_at` = CAST(unixepoch('subsec') * 1000 AS INTEGER) WHERE `id` = NEW.id;
END;
