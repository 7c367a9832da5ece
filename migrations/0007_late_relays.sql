-- Receipts relayed more than 10 s after they arrived (a relay held up by an outage or a shard's back-off). Their
-- ids sort among receipts a reader may already have paged past, so paging looks them up here
-- (src/admin/receipt-cursor.ts). Partial: a receipt relayed on time never enters it, so the happy path's insert
-- and update write no row for it. The literal must stay equal to LATE_RELAY_MS.
CREATE INDEX `receipts_late_relays` ON `receipts` (`relayed_at`) WHERE relayed_at > received_at + 10000;
