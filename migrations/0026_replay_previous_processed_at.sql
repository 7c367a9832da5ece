-- Each replay keeps when the run it ended had finished well (the receipt's processed_at at that moment), because
-- the replayed run overwrites processed_at: replay 1's value is the first run's finish, what "received → finished"
-- measures (src/db/receipt-runs.ts, docs/operating.md "Attempts and latency"). Replays logged before this
-- migration keep NULL: their first finish is unknown, and is left out of the latency rather than guessed.
-- Written by hand, as every migration since 0002: drizzle-kit's snapshot stops at 0001.
ALTER TABLE `replays` ADD `previous_processed_at` integer;
