-- Every replay of a receipt, one row each, so the timeline can show them all (receipts.replay_count and
-- replayed_at keep only the count and the latest). Written only by a replay, in the same D1 batch as the reset
-- and under the same guard, so the happy path (insert, then one update to processed) never touches it.
-- WITHOUT ROWID, keyed (receipt_id, replay_number): replay_number is the receipt's replay_count after that
-- replay, so one receipt's replays are one primary-key range and no other index is needed. Retention deletes
-- them with their receipt.
CREATE TABLE `replays` (
	`receipt_id` text NOT NULL,
	`replay_number` integer NOT NULL,
	`replayed_at` integer NOT NULL,
	`previous_status` text NOT NULL,
	`requested_by` text,
	PRIMARY KEY(`receipt_id`, `replay_number`)
) WITHOUT ROWID;
