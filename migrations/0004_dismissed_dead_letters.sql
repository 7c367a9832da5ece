-- An operator can dismiss a dead letter (status 'dismissed') once its cause is fixed or it is not worth replaying:
-- it leaves the dead count, so the source's health and the dead-letter alert stop showing red, and stays
-- replayable after being restored. Additive: one nullable column, no index (the status change alone takes a
-- dismissed receipt out of the partial index receipts_dead).
ALTER TABLE `receipts` ADD `dismissed_at` integer;
