-- Receipts whose body payload retention's id-ordered scan may have passed without dropping: dead letters (kept
-- for dead_letter_retention so they can be replayed), dismissed ones and replayed ones (which may leave the dead
-- state after the scan went by). Partial: the happy path's receipts never enter it, and a receipt leaves it when
-- its body is dropped, so the cron reads only bodies still held (src/reconcile/retention-held.ts). The condition
-- must stay equal to HELD_BODY in src/db/schema.ts: SQLite uses a partial index only for a query that repeats it.
CREATE INDEX `receipts_held_bodies` ON `receipts` (`source`, `id`) WHERE (status IN ('dead', 'dismissed') OR replay_count > 0) AND (body IS NOT NULL OR body_location IS NOT NULL);
