-- When an operator last restored a dismissed dead letter (status back to 'dead'), so the receipt's timeline shows
-- the restore as it shows the dismissal: a restore now leaves dismissed_at in place, and each column holds the
-- latest of its kind. Additive: one nullable column, no index, written by a restore alone (the happy path never
-- writes it, and a restore is still one update of the receipt's row).
ALTER TABLE `receipts` ADD `restored_at` integer;
