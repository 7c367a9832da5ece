-- When each quarantine row reached D1 (D1's clock, set by the relay). A quarantine id is minted on arrival, like a
-- receipt id, so a relay held up inserts rows among ids a reader has already paged past: paging the quarantine
-- catches up on rows relayed since its previous page through this index (src/admin/queries.ts, readQuarantineSlice),
-- as receipt paging does through receipts_late_relays. Quarantine is off the happy path: a full index costs a
-- delivery that is not quarantined nothing. Rows relayed before this migration keep NULL; no cursor that carries a
-- read time can have passed them unseen, as every such cursor is younger than they are.
ALTER TABLE `quarantine` ADD `relayed_at` integer;
CREATE INDEX `quarantine_relayed_at` ON `quarantine` (`relayed_at`);
