-- When a further delivery (routes 2–16, migrations/0014) last entered a resting status off the happy path (dead,
-- dismissed, stale, skipped), on D1's clock: migration 0013's stamp, for the deliveries table. The changes feed
-- (src/admin/receipts/receipt-changes.ts) lists a receipt at its further deliveries' changes, and these two keep no
-- time of their own otherwise: one set dead by the work queue's dead-letter consumer, and a dismissal or restore.
-- Set by a trigger, so every writer of a status (consumer, dead-letter consumer, dismiss, restore) stamps it inside
-- its own write. The trigger fires only on entering those statuses: pending -> processing -> processed writes no
-- extra row, and entering one writes one (the row again; no index holds the column, the feed reads deliveries by
-- primary key). A writer that stamps the column itself in the same update saves that write, as on receipts (0014).
-- WITHOUT ROWID: the row is found by its primary key, (receipt_id, route).
ALTER TABLE `deliveries` ADD `status_entered_at` integer;
CREATE TRIGGER `deliveries_status_entered` AFTER UPDATE OF `status` ON `deliveries`
WHEN NEW.status IN ('dead', 'dismissed', 'stale', 'skipped') AND NEW.status IS NOT OLD.status AND NEW.status_entered_at IS OLD.status_entered_at
BEGIN
  UPDATE `deliveries` SET `status_entered_at` = CAST(unixepoch('subsec') * 1000 AS INTEGER)
  WHERE `receipt_id` = NEW.receipt_id AND `route` = NEW.route;
END;
