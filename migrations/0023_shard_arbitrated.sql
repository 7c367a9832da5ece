-- The claim shard as a partitioned source's only arbiter (DESIGN invariant 3; docs/architecture.md "Receipts in time
-- partitions"): a receipt whose claim shard holds its event key for the whole key window, across shard-count changes
-- (an epoch), needs no D1 entry for it. The relay marks such a receipt `shard_arbitrated = 1` (src/relay/receipt-insert.ts)
-- and the unique index leaves it out: its insert writes the row alone, one billed row instead of two. Every other
-- receipt keeps NULL and its entry, so all existing rows keep their meaning, and a lookup by key names the index's
-- condition (src/db/schema.ts KEY_INDEXED) to use it.
-- Written by hand, as every migration since 0002: drizzle-kit's snapshot stops at 0001.
-- Re-creating the index writes one row per existing receipt, once (docs/deploy.md "Upgrading").
ALTER TABLE `receipts` ADD `shard_arbitrated` integer;
--> statement-breakpoint
DROP INDEX `receipts_source_event_key`;
--> statement-breakpoint
CREATE UNIQUE INDEX `receipts_source_event_key` ON `receipts` (`source`,`event_key`) WHERE shard_arbitrated IS NULL;
