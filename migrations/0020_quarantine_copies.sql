-- How many quarantined deliveries a row stands for. A claim shard keeps the first few copies of one key's other
-- bytes whole and, past them, only counts (src/claims/quarantine.ts): that count reaches D1 as one row per key with
-- no body, whose `copies` the relay raises as more arrive. Every row relayed before this migration is one copy.
-- Written by hand in drizzle-kit's form: the journal in migrations/meta stops at 0001, so `drizzle-kit generate`
-- cannot diff against it.
ALTER TABLE `quarantine` ADD `copies` integer DEFAULT 1 NOT NULL;
