-- Per-route ordering (docs/routing.md, "Ordering"): the event's value for its route's `ordered_by`, written by the
-- relay's insert of the receipt (no extra row). NULL for every source without an ordered route.
ALTER TABLE `receipts` ADD `ordering_key` text;
-- Only ordered receipts not finished yet, or dead: the ordering check asks it whether an earlier one of the same value
-- is outstanding, one seek per delivery. A receipt of an unordered source never enters it (its key is NULL), so the
-- happy path of every other source writes no row here; an ordered receipt's insert writes one, and the update that
-- finishes it one more (it leaves the index).
CREATE INDEX `receipts_ordered_outstanding` ON `receipts` (`source`, `ordering_key`, `id`) WHERE ordering_key IS NOT NULL AND status IN ('pending', 'processing', 'dead');
