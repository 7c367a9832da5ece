-- Per-route ordering on a source with several routes (docs/routing.md, "Ordering"): a further delivery of an ordered
-- route carries its event's ordering value (the receipt's `ordering_key`, copied by the insert that writes the row:
-- no extra row). NULL for every delivery of an unordered route.
ALTER TABLE `deliveries` ADD `ordering_key` text;
-- Only ordered further deliveries not finished yet, or dead: the ordering check asks it whether an earlier delivery of
-- the same route and value is outstanding, one seek per delivery. An unordered route's deliveries never enter it, and
-- a further delivery that succeeds on its first attempt is inserted finished, so it never enters it either.
CREATE INDEX `deliveries_ordered_outstanding` ON `deliveries` (`route`, `ordering_key`, `receipt_id`) WHERE ordering_key IS NOT NULL AND status IN ('pending', 'processing', 'dead');
