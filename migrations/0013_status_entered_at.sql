-- When a receipt last entered a resting status off the happy path (dead, dismissed, stale, skipped), on D1's clock.
-- A status-filtered list pages by receipt id, so a receipt the reader has passed can enter the filtered status
-- behind it: the next page catches up on those through this index (src/admin/receipt-cursor.ts), as it does on
-- late relays. Set by a trigger, so every writer of a status (consumer, dead-letter consumer, re-drive, replay,
-- dismiss, restore) stamps it inside its own write, and D1's one-writer order makes the stamp follow commit order.
-- Partial, and the trigger fires only on entering those statuses: pending -> processing -> processed writes no row
-- for either.
ALTER TABLE `receipts` ADD `status_entered_at` integer;
CREATE INDEX `receipts_status_entered` ON `receipts` (`status_entered_at`) WHERE status IN ('dead', 'dismissed', 'stale', 'skipped');
CREATE TRIGGER `receipts_status_entered` AFTER UPDATE OF `status` ON `receipts`
WHEN NEW.status IN ('dead', 'dismissed', 'stale', 'skipped') AND NEW.status IS NOT OLD.status
BEGIN
  UPDATE `receipts` SET `status_entered_at` = CAST(unixepoch('subsec') * 1000 AS INTEGER) WHERE `id` = NEW.id;
END;
